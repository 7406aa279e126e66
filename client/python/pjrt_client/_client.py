"""Client: a connection to pjrtd and its session; connect()."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import weakref
from typing import Any, Sequence

import grpc
import numpy as np

from pjrt_client import _dtypes
from pjrt_client._shm import SHM_THRESHOLD, Region, StagingPool, copy_bytes
from pjrt_client._channels import DataChannels, finish_call
from pjrt_client._lane import ExecuteLanes
from pjrt_client._stream import ExecuteStream
from pjrt_client._errors import (FailedPreconditionError, InvalidArgumentError,
                                 ResourceExhaustedError, UnavailableError,
                                 from_rpc_error)
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, executable_pb2,
                                        server_pb2, server_pb2_grpc,
                                        session_pb2, types_pb2)
from pjrt_client._common import (ADDRESS_ENV_VAR, _call, _CALL_TIMEOUT,
                                 _CHANNEL_OPTIONS, CHUNK_BYTES, _chunks,
                                 check_address, _COMPILE_TIMEOUT, Device,
                                 _device_id, _program_format,
                                 PROTOCOL_VERSION, resolve_address,
                                 _shape_proto, TLS_CA_ENV_VAR,
                                 TLS_CERT_ENV_VAR, TLS_KEY_ENV_VAR,
                                 TOKEN_ENV_VAR, WHOLE_CLUSTER_VERSION)
from pjrt_client._session import _Session
from pjrt_client._buffer import Buffer
from pjrt_client._executable import Executable


class _BearerToken(grpc.UnaryUnaryClientInterceptor,
                   grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor,
                   grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer TOKEN`` to every call."""

    def __init__(self, token: str) -> None:
        self._metadata = ("authorization", f"Bearer {token}")

    def _details(self, details: Any) -> Any:
        metadata = list(details.metadata or [])
        metadata.append(self._metadata)
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


def _read_file(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise FailedPreconditionError(
            f"cannot read the {what} {path}: {e.strerror}") from None
    # gRPC would log its parser's errors and fail the connection as if no
    # daemon were there.
    if b"-----BEGIN " not in pem:
        raise InvalidArgumentError(
            f"the {what} {path} holds no PEM block (-----BEGIN ...-----)")
    return pem


class Client:
    """A connection to pjrtd, with the session that owns its buffers.

    Create one with :func:`connect`. Closing the client (or leaving its
    ``with`` block, or the process exiting) closes the session, and the
    daemon frees every buffer the client still had.
    """

    def __init__(self, address: str | None = None, timeout: float = 10.0,
                 client_name: str | None = None, attach: bool = True,
                 shared_memory: bool = True, token: str | None = None,
                 tls_ca: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None,
                 data_channels: bool = True,
                 execute_lanes: bool = True,
                 whole_cluster: bool = False) -> None:
        self.address = resolve_address(address)
        check_address(self.address)
        token = token or os.environ.get(TOKEN_ENV_VAR) or None
        tls_ca = tls_ca or os.environ.get(TLS_CA_ENV_VAR) or None
        tls_cert = tls_cert or os.environ.get(TLS_CERT_ENV_VAR) or None
        tls_key = tls_key or os.environ.get(TLS_KEY_ENV_VAR) or None
        if (tls_cert is None) != (tls_key is None):
            raise FailedPreconditionError(
                "a client certificate needs both tls_cert and tls_key")
        if tls_ca or tls_cert:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_file(tls_ca, "TLS CA file"),
                private_key=_read_file(tls_key, "TLS key file"),
                certificate_chain=_read_file(tls_cert, "TLS certificate file"))
            raw = grpc.secure_channel(self.address, credentials,
                                      options=_CHANNEL_OPTIONS)
        else:
            raw = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._raw_channel = raw
        self._channel = (grpc.intercept_channel(raw, _BearerToken(token))
                         if token else raw)
        ready = grpc.channel_ready_future(raw)
        try:
            ready.result(timeout=timeout)
        except grpc.FutureTimeoutError:
            # Stop the future's watcher thread before the channel closes
            # under it (it would print a traceback).
            ready.cancel()
            self._channel.close()
            raise UnavailableError(
                f"cannot reach pjrtd at {self.address} within {timeout:g}s: "
                f"is the daemon running there? (start it with `pjrtd "
                f"--listen {self.address}`, or set {ADDRESS_ENV_VAR} or "
                f"address=)") from None
        self._server = server_pb2_grpc.ServerStub(self._channel)
        self._info = _call(self._server.GetServerInfo,
                           server_pb2.GetServerInfoRequest(), timeout=timeout)
        if not (self._info.protocol_version_min <= PROTOCOL_VERSION
                <= self._info.protocol_version_max):
            self._channel.close()
            raise FailedPreconditionError(
                f"pjrtd at {self.address} ({self._info.build_version}) speaks "
                f"pjrt.v1 revisions {self._info.protocol_version_min} to "
                f"{self._info.protocol_version_max}; this client speaks "
                f"{PROTOCOL_VERSION}")
        name = client_name or f"python:{os.getpid()}"
        if whole_cluster and self._info.protocol_version_max < \
                WHOLE_CLUSTER_VERSION:
            self._channel.close()
            raise FailedPreconditionError(
                f"pjrtd at {self.address} ({self._info.build_version}) has no "
                f"whole-cluster sessions (pjrt.v1 revision "
                f"{WHOLE_CLUSTER_VERSION}; it speaks up to "
                f"{self._info.protocol_version_max})")
        self.whole_cluster = whole_cluster
        self._session = _Session(self._channel, name, attach, whole_cluster)
        self._local_devices: frozenset[int] | None = None
        self._devices: list[Device] | None = None
        self._default_device: int | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        if not shared_memory:
            self._info.region_socket = ""
        self._staging = StagingPool(self)
        # Beside plaintext TCP only: gRPC over TLS keeps the bytes private.
        self._channels = DataChannels(
            self.address, self._session,
            data_channels and not (tls_ca or tls_cert))
        self._regions: weakref.WeakSet[Region] = weakref.WeakSet()
        # Execute calls through the daemon's lane socket when it offers one
        # this process reaches (see _lane.py); through gRPC otherwise.
        self._lanes = ExecuteLanes(
            self._info.execute_lane_socket if execute_lanes else "",
            self._session, _CALL_TIMEOUT)
        self._stream: ExecuteStream | None = None
        self._stream_lock = threading.Lock()

    # --- context management ------------------------------------------------

    def close(self) -> None:
        """Closes the session (freeing its buffers) and the connection.
        Background reads still running finish first."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        with self._stream_lock:
            stream, self._stream = self._stream, None
        if stream is not None and not self._session.closed:
            stream.close()
        self._channels.close()
        self._lanes.close()
        if self._session is not None:
            self._session.close()
        self._channel.close()

    def _background(self) -> concurrent.futures.ThreadPoolExecutor:
        """Threads for asynchronous reads, made on first use."""
        with self._executor_lock:
            if self._session.closed:
                raise FailedPreconditionError("the client is closed")
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=4, thread_name_prefix="pjrt-client")
            return self._executor

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Client({self.address!r}, platform={self._info.platform!r}, "
                f"session={self._session.public_id})")

    # --- the daemon --------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Build, protocol range, platform, backend and capabilities."""
        i = self._info
        return {
            "address": self.address,
            "build_version": i.build_version,
            "protocol_version_min": i.protocol_version_min,
            "protocol_version_max": i.protocol_version_max,
            "platform": i.platform,
            "backend": i.backend,
            "capabilities": list(i.capabilities),
            "task_id": i.task_id,
            "task_count": i.task_count,
            "addressable_device_count": i.addressable_device_count,
            "pid": i.pid,
            "metrics_url": i.metrics_url,
        }

    def sessions(self) -> list[dict[str, Any]]:
        """The sessions this client may see (its tenant's; an admin's or a
        daemon without tenants: every one), with what each has used."""
        response = _call(self._session._sessions.ListSessions,
                         session_pb2.ListSessionsRequest())
        return [{
            "public_id": s.public_id,
            "client_name": s.client_name,
            "tenant": s.tenant,
            "peer": s.peer,
            "attached": s.attached,
            "buffer_count": s.buffer_count,
            "executable_count": s.executable_count,
            "bytes": s.bytes,
            "peak_bytes": s.peak_bytes,
            "age_seconds": s.age_seconds,
            "device_seconds": s.device_seconds,
            "device_times": {t.device_id: t.seconds for t in s.device_times},
            "executions": s.executions,
            "failed_executions": s.failed_executions,
            "bytes_to_device": s.bytes_to_device,
            "bytes_from_device": s.bytes_from_device,
        } for s in response.sessions]

    def devices(self) -> list[Device]:
        """Every device of the daemon (and its cluster)."""
        response = _call(self._server.ListDevices,
                         server_pb2.ListDevicesRequest())
        self._devices = [
            Device(d.id, d.local_hardware_id, d.task_id, d.platform, d.kind,
                   d.memory_bytes, d.addressable, d.unhealthy_reason)
            for d in response.devices
        ]
        return list(self._devices)

    def device(self, device_id: int) -> Device:
        """The device with global id ``device_id``."""
        devices = self._devices
        if devices is None:
            devices = self.devices()
        for d in devices:
            if d.id == device_id:
                return d
        raise InvalidArgumentError(
            f"device {device_id} does not exist; devices are "
            f"{[d.id for d in devices]}")

    def _default_device_id(self) -> int:
        """The first device this daemon addresses (0 unless it is a later
        task of a cluster)."""
        if self._default_device is None:
            devices = self._devices if self._devices is not None \
                else self.devices()
            self._default_device = next(
                (d.id for d in devices if d.addressable), 0)
        return self._default_device

    def _is_remote(self, device_id: int) -> bool:
        """True for a device of another task that this (whole-cluster)
        client reaches through its daemon."""
        if not self.whole_cluster:
            return False
        if self._local_devices is None:
            devices = self._devices if self._devices is not None \
                else self.devices()
            self._local_devices = frozenset(
                d.id for d in devices if d.addressable)
        return device_id not in self._local_devices

    def _resolve_device(self, device: Device | int | None) -> int:
        return self._default_device_id() if device is None \
            else _device_id(device)

    def stats(self) -> dict[str, Any]:
        """Memory per device (bytes in use, peak, limit...) and counts.

        Buffers and executables this client dropped are freed first, so
        that the figures do not count them."""
        self._session.flush_releases(wait=True)
        with self._stream_lock:
            stream = self._stream
        if stream is not None:
            stream.flush_deletes()
        s = _call(self._server.GetStats, server_pb2.GetStatsRequest())
        return {
            "devices": [{
                "device_id": d.device_id,
                "bytes_in_use": d.bytes_in_use,
                "peak_bytes_in_use": d.peak_bytes_in_use,
                "bytes_limit": d.bytes_limit,
                "num_allocs": d.num_allocs,
                "total_allocs": d.total_allocs,
                "largest_free_block": d.largest_free_block,
                "fragmentation": d.fragmentation,
                "queue_depth": d.queue_depth,
                "bytes_reserved": d.bytes_reserved,
            } for d in s.devices],
            "session_count": s.session_count,
            "buffer_count": s.buffer_count,
            "executable_count": s.executable_count,
            "cross_host_receives_pending": s.cross_host_receives_pending,
            "cross_host_bytes_received": s.cross_host_bytes_received,
            "region_count": s.region_count,
            "region_bytes": s.region_bytes,
            "data_channel_count": s.data_channel_count,
            "execute_lane_count": s.execute_lane_count,
            "compile_cache": {
                "entries": s.compile_cache.entries,
                "capacity": s.compile_cache.capacity,
                "hits": s.compile_cache.hits,
                "compiles": s.compile_cache.compiles,
                "failures": s.compile_cache.failures,
                "evictions": s.compile_cache.evictions,
            },
        }

    def ping(self) -> None:
        """One empty round trip to the daemon."""
        _call(self._server.Ping, server_pb2.PingRequest())

    @property
    def uses_shared_memory(self) -> bool:
        """Whether large transfers go through shared memory: the daemon
        offers it and, once tried, its region socket was reachable (it is
        not from another host)."""
        return self._staging.usable

    @property
    def uses_data_channels(self) -> bool:
        """Whether arrays of 1 MiB or more that do not go through shared
        memory travel over data channels (raw TCP beside gRPC): the client
        reaches the daemon over plaintext TCP and, once tried, the daemon
        offered channels and their port was reachable."""
        return self._channels.unavailable is None

    @property
    def uses_execute_lanes(self) -> bool:
        """Whether ``execute`` calls go over execute lanes (a unix socket
        beside gRPC, one write and one read per call): the daemon offers
        them and, once tried, this process reached its lane socket. Lanes
        are used only as long as one is free (four per client); other calls
        go through gRPC."""
        return self._lanes.offered

    def _execute_call(self, request: Any) -> Any:
        """The ExecuteResponse of ``request``: over a lane when one is
        free, else through gRPC."""
        response = self._lanes.call(request)
        if response is None:
            response = _call(self._session.executables.Execute, request)
        return response

    # --- pipelined runs ---------------------------------------------------

    def _execute_stream(self) -> ExecuteStream:
        """The ordered stream for pipelined runs, opened on first use.
        Raises (once) the error that ended the previous one."""
        with self._stream_lock:
            if self._session.closed:
                raise FailedPreconditionError("the client is closed")
            stream = self._stream
            if stream is not None and stream.ended:
                self._stream = None
                if stream.error is not None:
                    raise stream.error
            if self._stream is None:
                self._stream = ExecuteStream(
                    self._session,
                    batched=self._info.protocol_version_max >= 6)
            return self._stream

    def synchronize(self) -> None:
        """Waits until every pipelined run sent so far has run; raises the
        first error among them. Pipelined results dropped so far are freed
        on the daemon."""
        with self._stream_lock:
            stream = self._stream
        if stream is None:
            return
        try:
            stream.wait(stream.last_sent)
        finally:
            stream.flush_deletes()

    # --- shared memory ----------------------------------------------------

    def create_region(self, nbytes: int, name: str | None = None) -> Region:
        """Shared memory of ``nbytes`` bytes, registered with the daemon
        (clients on the daemon's host only). Make arrays in it with
        :meth:`Region.array`; :meth:`put` of such an array, and
        :meth:`Buffer.to_numpy` with ``out=`` one, skip the socket.

        Raises:
            UnavailableError: the daemon has shared memory turned off, or is
                on another host.
            InvalidArgumentError: a size that is not positive.
        """
        region = Region(self, int(nbytes), name or "pjrt-region")
        self._regions.add(region)
        return region

    def regions(self) -> list[dict[str, Any]]:
        """The session's regions on the daemon: handle, size, name and how
        many transfers or zero-copy buffers use each now."""
        response = _call(self._session.buffers.ListRegions,
                         buffer_pb2.ListRegionsRequest(
                             session_id=self._session.id))
        return [{"handle": r.region_handle, "nbytes": r.size_bytes,
                 "name": r.name, "uses": r.uses} for r in response.regions]

    def _region_of(self, array: np.ndarray) -> tuple[Region, int] | None:
        for region in list(self._regions):
            offset = region.offset_of(array)
            if offset is not None:
                return region, offset
        return None

    @property
    def session_id(self) -> int:
        """Public number of this client's session (as `pjrtctl sessions`)."""
        return self._session.public_id

    # --- buffers -------------------------------------------------------------

    def put(self, array: Any, device: Device | int | None = None, *,
            bf16: bool = False, as_type: str | None = None,
            zero_copy: bool = False) -> Buffer:
        """Uploads ``array`` to ``device`` (default: the daemon's first
        device: device 0, unless the daemon is a later task of a cluster).

        ``array`` may be any numpy array (non-contiguous or big-endian ones
        are converted), a numpy scalar, or anything ``np.asarray`` accepts.
        ``bf16=True`` uploads uint16 data as bfloat16 bit patterns;
        ``as_type`` ("bf16", "f8e4m3fn" or another narrow float, "s4", "u4",
        "s2", "u2") uploads the raw codes of that type (uint16, uint8, int8
        values in [-8, 7] or [-2, 1], uint8 values in [0, 15] or [0, 3]; see
        the _dtypes module), for
        machines without ml_dtypes. complex64 and complex128 arrays upload
        as c64 and c128.

        On the daemon's host, arrays of 1 MiB or more travel through shared
        memory (a staging region; see :attr:`uses_shared_memory`); on the
        host platform one of 32 MiB or more stays there, the region's bytes
        becoming the buffer's (the daemon copies nothing), until the buffer
        is gone. An array made in a :class:`Region` of this client goes
        without the copy into staging.
        ``zero_copy=True`` (for such an array, on the host platform, at a
        64-byte aligned offset) makes the region's bytes the buffer itself:
        leave them unchanged while the buffer lives.
        """
        try:
            return self._put(array, device, bf16, as_type, zero_copy)
        except ResourceExhaustedError:
            # Memory or a quota may be held by buffers the program dropped
            # and the daemon has not freed yet: free them, then retry.
            if not self._session.has_releases:
                raise
            self._session.flush_releases(wait=True)
            return self._put(array, device, bf16, as_type, zero_copy)

    def _put(self, array: Any, device: Device | int | None, bf16: bool,
             as_type: str | None, zero_copy: bool) -> Buffer:
        if self._session.closed:
            raise FailedPreconditionError("the client is closed")
        a = np.asarray(array)
        wire = _dtypes.wire_dtype(a.dtype, bf16=bf16, as_type=as_type)
        # The wire is row-major little-endian.
        if a.dtype.byteorder == ">" or (a.dtype.byteorder == "="
                                        and np.little_endian is False):
            a = a.astype(a.dtype.newbyteorder("<"))
        a = np.require(a, requirements="C")  # keeps 0-d arrays 0-d
        device_id = self._resolve_device(device)
        shape = types_pb2.ArrayShape(dtype=wire, dims=list(a.shape))
        if wire in _dtypes.PACKED_BITS:
            if zero_copy:
                raise InvalidArgumentError(
                    f"zero_copy=True cannot take {_dtypes.wire_name(wire)} "
                    f"data: buffers hold it packed several per byte")
            why = _dtypes.sub_byte_range_error(a, wire)
            if why is not None:
                raise InvalidArgumentError(f"cannot upload: {why}")
            a = _dtypes.pack_sub_byte(a, _dtypes.PACKED_BITS[wire])
        remote = self._is_remote(device_id)
        if remote and zero_copy:
            raise InvalidArgumentError(
                f"zero_copy=True needs a device of this daemon's task; "
                f"device {device_id} is another task's")
        found = self._region_of(a) if a.nbytes and not remote else None
        if found is None and zero_copy:
            raise InvalidArgumentError(
                "zero_copy=True needs an array made in a Region of this "
                "client (Client.create_region, Region.array)")
        if found is not None:
            return self._put_from_region(found[0], found[1], shape,
                                         device_id, zero_copy)
        if a.nbytes >= SHM_THRESHOLD and not remote:
            staging, adopt = self._staging.take_for_put(
                a.nbytes, can_alias=self._info.platform == "host")
            if staging is not None:
                buffer = None
                try:
                    copy_bytes(staging._bytes[:a.nbytes],
                               a.reshape(-1).view(np.uint8))
                    buffer = self._put_from_region(staging, 0, shape,
                                                   device_id, adopt)
                    return buffer
                finally:
                    if adopt:
                        # Until the daemon says it holds no use of it (the
                        # buffer may exist even when the call failed).
                        self._staging.adopted(staging, buffer)
                    else:
                        self._staging.give_back(staging)
        header = buffer_pb2.UploadHeader(session_id=self._session.id,
                                         shape=shape, device_id=device_id)
        data = memoryview(a.reshape(-1).view(np.uint8)) if a.size else \
            memoryview(b"")
        if a.nbytes >= CHUNK_BYTES and not remote:
            channel = self._channels.take()
            if channel is not None:
                return Buffer(self, self._put_over_channel(channel, header,
                                                           data))
        try:
            info = self._session.raw_upload(_chunks(header, data),
                                            timeout=None)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return Buffer(self, info)

    def _put_over_channel(self, channel: Any,
                          header: buffer_pb2.UploadHeader,
                          data: memoryview) -> buffer_pb2.BufferInfo:
        header.channel_handle = channel.handle
        call = self._session.raw_upload.future(
            iter([buffer_pb2.UploadRequest(
                header=header).SerializeToString()]), timeout=None)
        ok = False
        try:
            channel.send_all(data, call, "upload")
            info = finish_call(call, upload=True)
            ok = True
            return info
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            if ok:
                self._channels.give_back(channel)
            else:
                call.cancel()
                self._channels.discard(channel)

    def _put_from_region(self, region: Region, offset: int,
                         shape: types_pb2.ArrayShape, device_id: int,
                         zero_copy: bool) -> Buffer:
        info = _call(self._session.buffers.UploadFromRegion,
                     buffer_pb2.UploadFromRegionRequest(
                         session_id=self._session.id,
                         region_handle=region.handle, offset=offset,
                         shape=shape, device_id=device_id,
                         zero_copy=zero_copy),
                     timeout=None)
        return Buffer(self, info)

    def buffer(self, handle: int) -> Buffer:
        """A Buffer object for a handle of this client's session."""
        info = _call(self._session.buffers.DescribeBuffer,
                     buffer_pb2.DescribeBufferRequest(
                         session_id=self._session.id, handle=handle))
        return Buffer(self, info)

    # --- programs ------------------------------------------------------------

    def compile(self, hlo_text: str | bytes, *,
                num_replicas: int | None = None,
                num_partitions: int | None = None,
                device_assignment: Any = None, portable: bool = False,
                non_donatable_parameters: Sequence[int] = (),
                collective_timeout: float | None = None,
                program_format: str | None = None) -> Executable:
        """Compiles a program for this daemon's devices.

        ``hlo_text`` is the program: StableHLO as
        ``jax.jit(f).lower(*args).as_text()`` prints it (MLIR text, pretty
        or generic syntax), or HLO text as XLA's ``HloModule::ToString()``
        or ``as_text(dialect="hlo")`` prints it. The
        daemon caches compiled programs: compiling the same text again (from
        any client) is cheap, and :attr:`Executable.cache_hit` says so.

        Args:
            num_replicas, num_partitions: default: the module header's
                ``replica_count`` / ``num_partitions`` (else 1).
            device_assignment: ``[replica][partition]`` -> device (id or
                :class:`Device`); default: replica r, partition p on device
                ``r * num_partitions + p``.
            portable: one replica, one partition, run on any device with
                :meth:`Executable.execute_portable`.
            non_donatable_parameters: parameters that ``input_output_alias``
                would donate but that must be copied instead.
            collective_timeout: seconds any collective waits for a peer
                (default 30).
            program_format: ``"stablehlo"`` or ``"hlo"``; default: told
                from the text (StableHLO starts with ``module``,
                ``func.func`` or a ``#`` alias).

        Raises:
            InvalidArgumentError: the text does not parse or verify; the
                message has the line, the column and a caret.
            UnimplementedError: an op the compiler does not support (named,
                with its line).
        """
        if self._session.closed:
            raise FailedPreconditionError("the client is closed")
        if isinstance(hlo_text, bytes):
            hlo_text = hlo_text.decode("utf-8")
        if not isinstance(hlo_text, str):
            raise TypeError(f"hlo_text must be str or bytes, not "
                            f"{type(hlo_text).__name__}")
        options = executable_pb2.CompileOptions(
            num_replicas=int(num_replicas or 0),
            num_partitions=int(num_partitions or 0),
            portable=bool(portable),
            non_donatable_parameters=[int(p) for p in
                                      non_donatable_parameters],
            collective_timeout_seconds=float(collective_timeout or 0),
            program_format=_program_format(program_format))
        if device_assignment is not None:
            rows = [[_device_id(d) for d in row] for row in device_assignment]
            widths = {len(row) for row in rows}
            if not rows or len(widths) != 1 or 0 in widths:
                raise InvalidArgumentError(
                    f"device_assignment must be a non-empty [replica]"
                    f"[partition] table of device ids, every row as long; "
                    f"got rows of lengths {[len(r) for r in rows]}")
            for name, given, actual in (("num_replicas", num_replicas,
                                         len(rows)),
                                        ("num_partitions", num_partitions,
                                         widths.pop())):
                if given not in (None, 0, actual):
                    raise InvalidArgumentError(
                        f"{name}={given} disagrees with device_assignment, "
                        f"which has {actual}")
            options.num_replicas = len(rows)
            options.num_partitions = len(rows[0])
            options.device_assignment.extend(d for row in rows for d in row)
        response = _call(self._session.executables.Compile,
                         executable_pb2.CompileRequest(
                             session_id=self._session.id, hlo_text=hlo_text,
                             options=options),
                         timeout=_COMPILE_TIMEOUT)
        return Executable(self, response)

    def make_tuple(self, elements: Sequence[Buffer]) -> Buffer:
        """A tuple buffer of ``elements`` (all on one device), to pass as
        the single argument of a program with one tuple parameter
        (``arguments_are_tupled=True``). The tuple takes ownership of the
        elements: deleting it deletes them."""
        elements = list(elements)
        for e in elements:
            if not isinstance(e, Buffer):
                raise TypeError(f"tuple elements must be Buffers, not "
                                f"{type(e).__name__}")
            e._check_alive()
        info = _call(self._session.buffers.MakeTuple,
                     buffer_pb2.MakeTupleRequest(
                         session_id=self._session.id,
                         handles=[e.handle for e in elements]))
        for e in elements:
            e._finalizer.detach()
        return Buffer(self, info)

    # --- across tasks --------------------------------------------------------

    def make_cross_host_receive_buffers(
            self, shapes: Sequence[Any], device: Device | int | None = None,
            *, timeout: float | None = None
    ) -> tuple[list[Buffer], list[bytes]]:
        """Makes buffers that another task of the cluster will fill.

        Each shape is an :class:`ArrayShape`, a ``(dtype, dims)`` pair
        (``("f32", (2, 3))`` or ``(np.float32, (2, 3))``) or an array-like
        with ``dtype`` and ``shape``. Returns the receive buffers (not ready
        until their data arrives) and one descriptor (opaque ``bytes``) per
        buffer. Send each descriptor to the task that holds the data, whose
        client calls :meth:`Buffer.copy_to_remote_device` with it. A receive
        that gets no data within ``timeout`` seconds (default: the daemon's
        ``--receive-timeout``) fails: reading its buffer raises
        :class:`DeadlineExceededError`. Deleting a receive buffer, or
        :meth:`cancel_cross_host_receives`, cancels its receive.
        """
        if self._session.closed:
            raise FailedPreconditionError("the client is closed")
        protos = [_shape_proto(s) for s in shapes]
        response = _call(self._session.buffers.MakeCrossHostReceiveBuffers,
                         buffer_pb2.MakeCrossHostReceiveBuffersRequest(
                             session_id=self._session.id, shapes=protos,
                             device_id=self._resolve_device(device),
                             timeout_seconds=float(timeout or 0)))
        buffers = [Buffer(self, info) for info in response.buffers]
        return buffers, list(response.descriptors)

    def cancel_cross_host_receives(self, buffers: Sequence[Buffer]) -> int:
        """Cancels the receives of ``buffers`` that have not started; their
        buffers then raise :class:`CancelledError` when read. Returns how
        many were cancelled."""
        response = _call(self._session.buffers.CancelCrossHostReceives,
                         buffer_pb2.CancelCrossHostReceivesRequest(
                             session_id=self._session.id,
                             handles=[b.handle for b in buffers]))
        return response.cancelled

    def cluster_status(self, timeout: float | None = None
                       ) -> list[dict[str, Any]]:
        """The tasks of the daemon's cluster and whether the daemon reaches
        each now (it calls every peer, waiting ``timeout`` seconds each,
        default 2). One dict per task: ``task_id``, ``address``, ``self``,
        ``reachable``, ``error``, ``device_count``, ``round_trip_ms``."""
        status = _call(self._server.GetClusterStatus,
                       server_pb2.GetClusterStatusRequest(
                           timeout_seconds=float(timeout or 0)))
        return [{"task_id": t.task_id, "address": t.address, "self": t.self,
                 "reachable": t.reachable, "error": t.error,
                 "device_count": t.device_count,
                 "round_trip_ms": t.round_trip_ms} for t in status.tasks]

    def delete(self, buffers: Sequence[Buffer]) -> None:
        """Deletes several buffers in one call (all or none)."""
        handles = [b.handle for b in buffers if not b.is_deleted]
        _call(self._session.buffers.DeleteBuffers,
              buffer_pb2.DeleteBuffersRequest(session_id=self._session.id,
                                              handles=handles))
        for b in buffers:
            b._deleted = True
            b._finalizer.detach()


def connect(address: str | None = None, timeout: float = 10.0, *,
            client_name: str | None = None,
            shared_memory: bool = True, token: str | None = None,
            tls_ca: str | None = None, tls_cert: str | None = None,
            tls_key: str | None = None,
            data_channels: bool = True,
            execute_lanes: bool = True,
            whole_cluster: bool = False) -> Client:
    """Connects to pjrtd and opens a session.

    Args:
        address: ``unix:///path/to.sock`` or ``host:port``; default
            ``$PJRTD_ADDRESS``, then ``unix:///run/pjrtd/pjrtd.sock``.
        timeout: seconds to wait for the daemon to answer.
        client_name: shown by ``pjrtctl sessions`` (default ``python:PID``).
        shared_memory: move large arrays through shared memory when the
            daemon is on this host (default); False always streams.
        token: the tenant's bearer token, for a daemon with a tenants
            file; default ``$PJRTD_TOKEN``.
        tls_ca: PEM file of the CA that signed the daemon's certificate:
            connect over TLS (default ``$PJRTD_TLS_CA``; the system's CAs
            when only a client certificate is given).
        tls_cert, tls_key: PEM client certificate and key, for a daemon
            that requires them (mutual TLS); default ``$PJRTD_TLS_CERT``
            and ``$PJRTD_TLS_KEY``.
        data_channels: over plaintext TCP, move arrays of 1 MiB or more
            over raw TCP connections beside gRPC, when the daemon offers
            them (default; see :attr:`Client.uses_data_channels`); False
            always streams them through gRPC.
        execute_lanes: send ``execute`` calls over the daemon's execute
            lane socket when it offers one this process can reach (a
            client on its host; default; see
            :attr:`Client.uses_execute_lanes`); False always calls gRPC.
        whole_cluster: drive every task of the daemon's cluster from this
            one client (single controller): ``put`` takes any device of the
            cluster, and a program whose device assignment spans tasks
            takes one argument list per device of the assignment, its
            ``execute_replicated`` launching it on every task at once. The
            buffers on other tasks stay there and read back through this
            client. Default: this task's devices only (one client per
            task).

    Raises:
        UnavailableError: nothing answered at the address.
        FailedPreconditionError: the daemon speaks another protocol revision.
    """
    return Client(address, timeout=timeout, client_name=client_name,
                  shared_memory=shared_memory, token=token, tls_ca=tls_ca,
                  tls_cert=tls_cert, tls_key=tls_key,
                  data_channels=data_channels, execute_lanes=execute_lanes,
                  whole_cluster=whole_cluster)
