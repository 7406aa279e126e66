"""Client, Device, Buffer and Executable: the Python face of pjrtd."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import threading
import weakref
from typing import Any, Iterator, Sequence

import grpc
import numpy as np

from pjrt_client import _dtypes
from pjrt_client._shm import (LEASE_THRESHOLD, SHM_THRESHOLD, Region,
                              StagingPool, copy_bytes)
from pjrt_client._channels import DataChannels, finish_call
from pjrt_client._lane import ExecuteLanes
from pjrt_client._stream import ExecuteStream
from pjrt_client._errors import (Error, FailedPreconditionError,
                                 InvalidArgumentError, ResourceExhaustedError,
                                 UnavailableError, from_rpc_error)
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, buffer_pb2_grpc,
                                        executable_pb2, executable_pb2_grpc,
                                        server_pb2, server_pb2_grpc,
                                        session_pb2, session_pb2_grpc,
                                        types_pb2)

#: Where pjrtd listens unless told otherwise.
DEFAULT_ADDRESS = "unix:///run/pjrtd/pjrtd.sock"
#: Environment variable that overrides :data:`DEFAULT_ADDRESS`.
ADDRESS_ENV_VAR = "PJRTD_ADDRESS"
TOKEN_ENV_VAR = "PJRTD_TOKEN"
TLS_CA_ENV_VAR = "PJRTD_TLS_CA"
TLS_CERT_ENV_VAR = "PJRTD_TLS_CERT"
TLS_KEY_ENV_VAR = "PJRTD_TLS_KEY"
# The protocol's constants come from proto/pjrt/v1/types.proto
# (ProtocolConstant), as the daemon's and the C++ client's do.
#: pjrt.v1 protocol revision this client speaks: the newest whose features
#: every session uses (execute lanes), so that it works with the daemons
#: that have them.
PROTOCOL_VERSION = types_pb2.PROTOCOL_REVISION_EXECUTE_LANES
#: The revision that added whole-cluster sessions (Client(whole_cluster=)).
WHOLE_CLUSTER_VERSION = types_pb2.PROTOCOL_REVISION_WHOLE_CLUSTER
#: Bytes per upload chunk (the protocol's maximum).
CHUNK_BYTES = types_pb2.MAX_CHUNK_BYTES
#: Arrays of at most this many bytes are read in one unary call
#: (ReadBuffer), and fetched results must fit in it together.
INLINE_BYTES = 1 << 20

# Dropped buffers and executables wait for the next Execute to carry them
# to the daemon; this many handles, or buffers of this many bytes, are sent
# at once in the background instead, and none waits longer than the flush
# interval.
_RELEASE_BATCH = 64
_RELEASE_BYTES = 64 << 20
_RELEASE_INTERVAL = 0.1

_CALL_TIMEOUT = 60.0
# A large program may take a while to compile.
_COMPILE_TIMEOUT = 1800.0
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.keepalive_time_ms", 30000),
    ("grpc.keepalive_timeout_ms", 10000),
]


def resolve_address(address: str | None = None) -> str:
    """``address`` if given, else ``$PJRTD_ADDRESS``, else the default."""
    if address:
        return address
    return os.environ.get(ADDRESS_ENV_VAR) or DEFAULT_ADDRESS


@dataclasses.dataclass(frozen=True)
class Device:
    """One device of the daemon's cluster.

    Attributes:
        id: global id, the same whichever daemon of the cluster is asked.
        local_hardware_id: ordinal of the device on its host.
        task_id: the daemon (task) that owns it.
        platform: ``"host"`` or ``"cuda"``.
        kind: e.g. ``"cpu"`` or ``"NVIDIA H200"``.
        memory_bytes: memory the daemon may allocate on it.
        addressable: True if buffers can be placed on it through this daemon.
        unhealthy_reason: empty while the device works; once it has failed
            for good (a sticky CUDA error, a lost GPU), why: the daemon
            then refuses work on it.
    """

    id: int
    local_hardware_id: int
    task_id: int
    platform: str
    kind: str
    memory_bytes: int
    addressable: bool
    unhealthy_reason: str = ""

    @property
    def healthy(self) -> bool:
        """True while the device works (``unhealthy_reason`` is empty)."""
        return not self.unhealthy_reason

    def __str__(self) -> str:
        return f"{self.platform}:{self.id}"


class _Session:
    """The daemon-side session behind a Client; buffers point at it."""

    def __init__(self, channel: grpc.Channel, client_name: str,
                 attach: bool, whole_cluster: bool = False) -> None:
        self._sessions = session_pb2_grpc.SessionsStub(channel)
        self.buffers = buffer_pb2_grpc.BuffersStub(channel)
        self.executables = executable_pb2_grpc.ExecutablesStub(channel)
        # Bulk transfers with the chunks' messages as raw bytes: no
        # protobuf copy of each MiB on the way (see _chunk_payload).
        self.raw_download = channel.unary_stream(
            "/pjrt.v1.Buffers/Download",
            request_serializer=buffer_pb2.DownloadRequest.SerializeToString,
            response_deserializer=None)
        self.raw_upload = channel.stream_unary(
            "/pjrt.v1.Buffers/Upload", request_serializer=None,
            response_deserializer=buffer_pb2.BufferInfo.FromString)
        response = _call(self._sessions.OpenSession,
                         session_pb2.OpenSessionRequest(
                             client_name=client_name,
                             protocol_version=(WHOLE_CLUSTER_VERSION
                                               if whole_cluster
                                               else PROTOCOL_VERSION),
                             whole_cluster=whole_cluster))
        self.id: int = response.session_id
        self.public_id: int = response.public_id
        self.closed = False
        self._lock = threading.Lock()
        # Handles the program dropped (appended by finalizers, which may run
        # on any thread at any moment: deques, no locks), with the bytes of
        # the buffers among them.
        self._dropped_buffers: collections.deque[int] = collections.deque()
        self._dropped_executables: collections.deque[int] = \
            collections.deque()
        self._dropped_bytes = 0
        self._takes = 0  # how often a request took the dropped handles
        self._flushes: set[Any] = set()
        self._flusher: threading.Thread | bool | None = None
        # Reentrant: a finalizer may run while this thread starts the
        # flusher (creating a thread allocates, which may collect).
        self._flusher_lock = threading.RLock()
        self._wake = threading.Event()
        self._attach_call = None
        if attach:
            call = self._sessions.Attach(
                session_pb2.AttachRequest(session_id=self.id))
            try:
                next(call)  # the daemon confirms the attachment
            except grpc.RpcError as e:
                raise from_rpc_error(e) from None
            self._attach_call = call

    # --- handles the program dropped -------------------------------------

    def drop_buffer(self, handle: int, nbytes: int) -> None:
        """Frees a garbage-collected Buffer's handle: carried by the next
        Execute, or sent in a batch by the flusher (a finalizer must not
        wait for the daemon)."""
        if self.closed:
            return  # the daemon freed it with the session
        self._dropped_buffers.append(handle)
        self._dropped_bytes += nbytes
        self._dropped()

    def drop_executable(self, handle: int) -> None:
        if self.closed:
            return
        self._dropped_executables.append(handle)
        self._dropped()

    def _dropped(self) -> None:
        try:
            if len(self._dropped_buffers) + len(self._dropped_executables) \
                    >= _RELEASE_BATCH or self._dropped_bytes >= _RELEASE_BYTES:
                self.flush_releases(wait=False)
            elif self._flusher is None:
                self._start_flusher()
        except Exception:  # noqa: BLE001 - called by finalizers
            pass  # the channel is closed: the session went with it

    @property
    def has_releases(self) -> bool:
        """Whether what the program dropped may still hold daemon memory:
        queued, or being deleted by a flush in flight."""
        return bool(self._dropped_buffers or self._dropped_executables or
                    self._flushes)

    def take_releases(self) -> tuple[list[int], list[int]]:
        """Empties the queues of dropped handles (for a request to carry
        them)."""
        buffers: list[int] = []
        executables: list[int] = []
        try:
            while True:
                buffers.append(self._dropped_buffers.popleft())
        except IndexError:
            pass
        try:
            while True:
                executables.append(self._dropped_executables.popleft())
        except IndexError:
            pass
        if buffers:
            self._dropped_bytes = 0
        self._takes += 1
        return buffers, executables

    def flush_releases(self, wait: bool) -> None:
        """Sends the dropped handles now; ``wait``: until the daemon has
        freed them, and those that flushes in flight are deleting."""
        if self.closed:
            return
        if wait:
            for call in list(self._flushes):
                try:
                    call.result()
                except (grpc.RpcError, grpc.FutureCancelledError):
                    pass  # gone already, or the session is
        buffers, executables = self.take_releases()
        calls = []
        if buffers:
            calls.append(self.buffers.DeleteBuffers.future(
                buffer_pb2.DeleteBuffersRequest(session_id=self.id,
                                                handles=buffers,
                                                skip_unknown=True),
                timeout=_CALL_TIMEOUT))
        for handle in executables:
            calls.append(self.executables.DeleteExecutable.future(
                executable_pb2.DeleteExecutableRequest(
                    session_id=self.id, executable_handle=handle),
                timeout=_CALL_TIMEOUT))
        for call in calls:
            if wait:
                try:
                    call.result()
                except grpc.RpcError:
                    pass  # gone already, or the session is
            else:
                # A future dropped before it is done cancels its call.
                self._flushes.add(call)
                call.add_done_callback(self._flushes.discard)

    def _start_flusher(self) -> None:
        with self._flusher_lock:
            if self._flusher is not None or self.closed:
                return
            self._flusher = True  # being started
            thread = threading.Thread(target=self._flush_loop,
                                      name="pjrt-release", daemon=True)
            thread.start()
            self._flusher = thread

    def _flush_loop(self) -> None:
        # Handles dropped while Executes keep coming ride on them; those
        # that no Execute took for a whole interval are sent (so each waits
        # at most two intervals).
        seen = None
        while not self._wake.wait(_RELEASE_INTERVAL):
            if not self.has_releases:
                seen = None
            elif seen == self._takes:
                try:
                    self.flush_releases(wait=False)
                except Exception:  # noqa: BLE001 - the channel closed
                    return  # with the session, which frees them all
                seen = None
            else:
                seen = self._takes

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._wake.set()
        try:
            _call(self._sessions.CloseSession,
                  session_pb2.CloseSessionRequest(session_id=self.id))
        except Error:
            pass  # the daemon is gone, or closed the session already
        finally:
            if self._attach_call is not None:
                self._attach_call.cancel()
                self._attach_call = None


def _call(method: Any, request: Any, timeout: float | None = _CALL_TIMEOUT):
    """Calls a unary RPC, turning grpc.RpcError into pjrt_client.Error."""
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None


class _RandomHandles:
    """Unguessable 64-bit handles for results the client names, drawn from
    the kernel's random source 512 at a time (one system call each)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = memoryview(b"")

    def take(self, n: int) -> list[int]:
        with self._lock:
            if len(self._pool) < 8 * n:
                self._pool = memoryview(os.urandom(max(4096, 8 * n)))
            words, self._pool = self._pool[:8 * n], self._pool[8 * n:]
        return [int.from_bytes(words[8 * i:8 * i + 8], "little") | 1
                for i in range(n)]


_random_handles = _RandomHandles()


class _Run:
    """What the results of one run share: once one of them is known to be
    defined without error, so are the others (one event defines them
    all), and waiting for them costs no further call."""

    __slots__ = ("ready",)

    def __init__(self, ready: bool = False) -> None:
        self.ready = ready


class Buffer:
    """An array on a device of the daemon.

    A Buffer is deleted on the daemon when :meth:`delete` is called, when a
    ``with`` block using it ends, when it is garbage-collected, or when its
    client closes.
    """

    def __init__(self, client: "Client", info: buffer_pb2.BufferInfo,
                 owned: bool = True,
                 pending: tuple[ExecuteStream, int] | None = None,
                 run: _Run | None = None) -> None:
        self._client = client
        self._session = client._session
        # Shared with the other results of the run that made the buffer.
        self._run = run
        # The contents, when the call that made the buffer carried them
        # (an Execute with fetch=True).
        self._data: bytes | None = \
            info.data if info.HasField("data") else None
        # Made by a pipelined run the daemon may not have reached yet: calls
        # naming the buffer first wait for it (and raise its error).
        self._pending = pending
        self._handle: int = info.handle
        self._dtype_wire: int = info.shape.dtype
        self._shape: tuple[int, ...] = tuple(info.shape.dims)
        self._device_id: int = info.device_id
        self._nbytes: int = info.size_bytes
        self._is_tuple: bool = info.is_tuple
        # A tuple owns its elements: they are views, freed with it.
        self._elements = [Buffer(client, e, owned=False)
                          for e in info.tuple_elements]
        self._deleted = False
        if pending is not None:
            self._finalizer = weakref.finalize(
                self, pending[0].defer_delete, pending[1], self._handle)
        else:
            self._finalizer = weakref.finalize(self, self._session.drop_buffer,
                                               self._handle, self._nbytes)
        self._finalizer.atexit = False
        if not owned:
            self._finalizer.detach()

    @classmethod
    def _pending_result(cls, client: "Client", handle: int, dtype: int,
                        dims: tuple[int, ...], device_id: int, nbytes: int,
                        pending: tuple[ExecuteStream, int]) -> "Buffer":
        """A result of a pipelined run, as __init__ would make it from a
        BufferInfo, without building one (the pipelined path's cost)."""
        self = cls.__new__(cls)
        self._client = client
        self._session = client._session
        self._run = None
        self._data = None
        self._pending = pending
        self._handle = handle
        self._dtype_wire = dtype
        self._shape = dims
        self._device_id = device_id
        self._nbytes = nbytes
        self._is_tuple = False
        self._elements = []
        self._deleted = False
        self._finalizer = weakref.finalize(self, pending[0].defer_delete,
                                           pending[1], handle)
        self._finalizer.atexit = False
        return self

    # --- description -----------------------------------------------------

    @property
    def handle(self) -> int:
        """The daemon's handle for the buffer (unique within the session)."""
        return self._handle

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimensions, row-major (``()`` for a tuple)."""
        return self._shape

    @property
    def is_tuple(self) -> bool:
        """True for a tuple buffer: its :attr:`elements` hold the data."""
        return self._is_tuple

    @property
    def elements(self) -> list["Buffer"]:
        """A tuple's elements (owned by the tuple: deleting it deletes
        them); empty for an array."""
        return list(self._elements)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        """Element type as a numpy dtype (see :func:`numpy_dtype` for bf16)."""
        return _dtypes.numpy_dtype(self._dtype_wire)

    @property
    def dtype_name(self) -> str:
        """Element type as HLO spells it: ``'f32'``, ``'bf16'``..."""
        return _dtypes.wire_name(self._dtype_wire)

    @property
    def device(self) -> Device:
        """The device holding the buffer."""
        return self._client.device(self._device_id)

    @property
    def nbytes(self) -> int:
        """Size of the contents in bytes."""
        return self._nbytes

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    def __repr__(self) -> str:
        state = "deleted" if self._deleted else f"handle={self._handle:#x}"
        if self._is_tuple:
            return (f"Buffer(tuple of {len(self._elements)} on device "
                    f"{self._device_id}, {state})")
        dims = ",".join(str(d) for d in self._shape)
        return (f"Buffer({self.dtype_name}[{dims}] on "
                f"device {self._device_id}, {state})")

    # --- reading -----------------------------------------------------------

    def _check_alive(self) -> None:
        if self._deleted:
            raise FailedPreconditionError(
                f"buffer {self._handle:#x} was deleted on this side; it can "
                f"no longer be used")

    def _sync(self) -> None:
        """Checks the buffer is usable and, for a result of a pipelined
        run, waits until the daemon has run it (raising the run's error)."""
        self._check_alive()
        if self._pending is not None:
            stream, sequence = self._pending
            stream.wait(sequence)
            self._pending = None

    def to_numpy(self, out: np.ndarray | None = None) -> Any:
        """Copies the contents to a new numpy array (waits until defined);
        for a tuple, a tuple of arrays.

        ``out``: an existing C-contiguous array of the buffer's shape and
        dtype to fill instead (returned). When it lies in a shared-memory
        :class:`Region` of this client, the daemon writes straight into it.
        """
        self._sync()
        if self._is_tuple:
            if out is not None:
                raise InvalidArgumentError(
                    "out= takes an array; a tuple buffer has several")
            return tuple(e.to_numpy() for e in self._elements)
        if out is not None:
            return self._download_into(out)
        if self._dtype_wire in _dtypes.INT4:
            # Packed two per byte: unpack to one value per byte.
            values = _dtypes.unpack_int4(
                bytes(self._read_bytes()), self.size,
                signed=self._dtype_wire == types_pb2.DTYPE_S4)
            return values.view(self.dtype).reshape(self._shape)
        if self._nbytes <= INLINE_BYTES:
            array = np.frombuffer(self._read_bytes(), dtype=self.dtype)
            # A fresh array the caller may write to.
            return array.reshape(self._shape).copy()
        staging = self._client._staging.take(self._nbytes) \
            if self._nbytes >= SHM_THRESHOLD and not self._remote else None
        if staging is not None:
            lent = False
            try:
                self._download_to_region(staging, 0)
                if self._nbytes >= LEASE_THRESHOLD:
                    # The region itself becomes the array's memory.
                    flat = self._client._staging.lend(staging, self._nbytes)
                    lent = True
                    return flat.view(self.dtype).reshape(self._shape)
                array = np.empty(self._shape, dtype=self.dtype)
                copy_bytes(array.reshape(-1).view(np.uint8),
                           staging._bytes[:self._nbytes])
                return array
            finally:
                if not lent:
                    self._client._staging.give_back(staging)
        return self._stream_download().view(self.dtype).reshape(self._shape)

    @property
    def _remote(self) -> bool:
        """On another task's device (a whole-cluster client): its bytes
        cross the daemon's gRPC service, not this host's shared memory or
        data channels."""
        return self._client._is_remote(self._device_id)

    def _download_to_region(self, region: Region, offset: int) -> None:
        _call(self._session.buffers.DownloadToRegion,
              buffer_pb2.DownloadToRegionRequest(
                  session_id=self._session.id, handle=self._handle,
                  region_handle=region.handle, offset=offset),
              timeout=None)

    def _download_into(self, out: np.ndarray) -> np.ndarray:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, not "
                            f"{type(out).__name__}")
        if out.shape != self._shape or out.dtype != self.dtype or \
                not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidArgumentError(
                f"out must be a writable C-contiguous {self.dtype}"
                f"{list(self._shape)} array; got {out.dtype}"
                f"{list(out.shape)}")
        found = self._client._region_of(out)
        if found is not None and self._dtype_wire not in _dtypes.INT4 and \
                not self._remote:
            self._download_to_region(*found)
            return out
        np.copyto(out, self.to_numpy())
        return out

    def _read_bytes(self) -> bytes | np.ndarray:
        """The contents: carried by the reply that made the buffer, in
        one unary call when small, else streamed."""
        if self._data is not None:
            return self._data
        if self._nbytes > INLINE_BYTES:
            return self._stream_download()
        info = _call(self._session.buffers.ReadBuffer,
                     buffer_pb2.DownloadRequest(session_id=self._session.id,
                                                handle=self._handle),
                     timeout=None)
        if len(info.data) != self._nbytes:
            raise Error(f"daemon sent {len(info.data)} bytes for buffer "
                        f"{self._handle:#x} of {self._nbytes}")
        if self._run is not None:
            self._run.ready = True
        return info.data

    def _stream_download(self) -> np.ndarray:
        # Straight into memory that is not zero-filled first.
        out = np.empty(self._nbytes, dtype=np.uint8)
        channel = None if self._remote else self._client._channels.take()
        if channel is not None:
            self._download_over_channel(channel, out)
            return out
        view = memoryview(out)
        received = 0
        request = buffer_pb2.DownloadRequest(session_id=self._session.id,
                                             handle=self._handle)
        try:
            for raw in self._session.raw_download(request):
                chunk = _chunk_payload(raw)
                if chunk is None:
                    continue  # the header
                end = received + len(chunk)
                if end > self._nbytes:
                    raise Error(f"daemon sent more than the {self._nbytes} "
                                f"bytes of buffer {self._handle:#x}")
                view[received:end] = chunk
                received = end
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        if received != self._nbytes:
            raise Error(f"download of buffer {self._handle:#x} ended after "
                        f"{received} of {self._nbytes} bytes")
        return out

    def _download_over_channel(self, channel: Any, out: np.ndarray) -> None:
        call = self._session.buffers.Download(
            buffer_pb2.DownloadRequest(session_id=self._session.id,
                                       handle=self._handle,
                                       channel_handle=channel.handle),
            timeout=None)
        ok = False
        try:
            next(call)  # the header: the bytes follow on the channel
            channel.receive_into(memoryview(out).cast("B"), call,
                                 f"download of buffer {self._handle:#x}")
            finish_call(call, upload=False)
            ok = True
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        except StopIteration:
            raise Error(f"download of buffer {self._handle:#x} ended "
                        f"before its header") from None
        finally:
            if ok:
                self._client._channels.give_back(channel)
            else:
                call.cancel()
                self._client._channels.discard(channel)

    def to_numpy_async(self) -> "concurrent.futures.Future[Any]":
        """Starts reading the contents in the background and returns at
        once; the future's ``result()`` is what :meth:`to_numpy` returns
        (or raises its error). Reads of several buffers then overlap with
        each other and with the caller's work::

            futures = [b.to_numpy_async() for b in buffers]
            arrays = [f.result() for f in futures]
        """
        self._check_alive()
        return self._client._background().submit(self.to_numpy)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._is_tuple:
            raise InvalidArgumentError(
                f"buffer {self._handle:#x} is a tuple of "
                f"{len(self._elements)}; convert its elements")
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    def block_until_ready(self, timeout: float | None = None) -> "Buffer":
        """Waits until the contents are defined; returns self.

        Raises the error bound to the buffer if its producer failed, or
        :class:`DeadlineExceededError` after ``timeout`` seconds.
        """
        self._sync()
        if self._run is not None and self._run.ready:
            return self  # a result of the same run was: so is this one
        timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        _call(self._session.buffers.BlockUntilReady,
              buffer_pb2.BlockUntilReadyRequest(session_id=self._session.id,
                                                handle=self._handle,
                                                timeout_ms=timeout_ms),
              timeout=None)
        if self._run is not None:
            self._run.ready = True
        return self

    def is_ready(self) -> bool:
        """True once the contents are defined (or their producer failed)."""
        if self._run is not None and self._run.ready and not self._deleted:
            return True
        return self.describe().ready

    def describe(self) -> buffer_pb2.BufferInfo:
        """The daemon's view of the buffer (shape, device, ready, error)."""
        self._sync()
        return _call(self._session.buffers.DescribeBuffer,
                     buffer_pb2.DescribeBufferRequest(
                         session_id=self._session.id, handle=self._handle))

    # --- moving and freeing ------------------------------------------------

    def copy_to(self, device: "Device | int") -> "Buffer":
        """Copies the buffer to another device of the daemon."""
        self._sync()
        info = _call(self._session.buffers.CopyToDevice,
                     buffer_pb2.CopyToDeviceRequest(
                         session_id=self._session.id, handle=self._handle,
                         device_id=_device_id(device)))
        return Buffer(self._client, info)

    def copy_to_remote_device(self, descriptor: bytes) -> dict[str, Any]:
        """Sends the buffer to a receive buffer on another task.

        ``descriptor`` is one of the descriptors that
        :meth:`Client.make_cross_host_receive_buffers` returned on the
        receiving task. This daemon waits until the buffer is defined, then
        streams its bytes to the receiving daemon; the call returns once
        they have all arrived. Returns ``{"bytes", "receiver_task_id",
        "seconds"}``.

        Raises:
            InvalidArgumentError: a malformed descriptor, or one for another
                shape.
            PermissionDeniedError: a forged or altered descriptor.
            FailedPreconditionError: a descriptor already used, cancelled or
                expired.
            UnavailableError: the receiving task cannot be reached, or went
                away during the transfer.
        """
        self._sync()
        if not isinstance(descriptor, (bytes, bytearray, memoryview)):
            raise TypeError(f"descriptor must be bytes, not "
                            f"{type(descriptor).__name__}")
        response = _call(self._session.buffers.CopyToRemoteDevice,
                         buffer_pb2.CopyToRemoteDeviceRequest(
                             session_id=self._session.id,
                             handle=self._handle,
                             transfer_descriptor=bytes(descriptor)),
                         timeout=None)
        return {"bytes": response.bytes,
                "receiver_task_id": response.receiver_task_id,
                "seconds": response.seconds}

    def delete(self) -> None:
        """Frees the buffer on the daemon now. Idempotent."""
        if self._deleted:
            return
        stream = self._pending[0] if self._pending is not None \
            else self._client._stream
        if stream is not None and not stream.is_done(stream.last_sent):
            # A pipelined run sent earlier may use the buffer: delete it
            # once the daemon has run everything sent so far.
            self._deleted = True
            self._finalizer.detach()
            for e in self._elements:
                e._deleted = True
            stream.defer_delete(stream.last_sent, self._handle)
            return
        self._deleted = True
        self._finalizer.detach()
        for e in self._elements:
            e._deleted = True
        if self._session.closed:
            return
        _call(self._session.buffers.DeleteBuffers,
              buffer_pb2.DeleteBuffersRequest(session_id=self._session.id,
                                              handles=[self._handle]))

    @property
    def is_deleted(self) -> bool:
        """True after :meth:`delete` (on this object)."""
        return self._deleted

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


_PROGRAM_FORMATS = {
    None: executable_pb2.PROGRAM_FORMAT_UNSPECIFIED,
    "hlo": executable_pb2.PROGRAM_FORMAT_HLO,
    "stablehlo": executable_pb2.PROGRAM_FORMAT_STABLEHLO,
}


def _program_format(name: str | None) -> int:
    if name not in _PROGRAM_FORMATS:
        raise InvalidArgumentError(
            f"program_format={name!r}; use 'stablehlo', 'hlo' or None (told "
            f"from the text)")
    return _PROGRAM_FORMATS[name]


def _device_id(device: "Device | int | None") -> int:
    if device is None:
        return 0
    if isinstance(device, Device):
        return device.id
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        return int(device)
    raise TypeError(f"device must be a Device or an int id, not "
                    f"{type(device).__name__}")


def _shape_proto(spec: Any) -> types_pb2.ArrayShape:
    """An ArrayShape, a ``(dtype, dims)`` pair or anything with ``dtype``
    and ``shape`` (a numpy array, a Buffer) as a wire shape."""
    if isinstance(spec, ArrayShape):
        dtype, dims = spec.dtype, spec.shape
    elif hasattr(spec, "dtype") and hasattr(spec, "shape"):
        dtype, dims = spec.dtype, spec.shape
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        dtype, dims = spec
    else:
        raise TypeError(f"a shape must be an ArrayShape, a (dtype, dims) "
                        f"pair or an array; got {spec!r}")
    try:
        wire = _dtypes.wire_from_name(dtype) if isinstance(dtype, str) \
            else None
    except ValueError:
        wire = None
    if wire is None:
        wire = _dtypes.wire_dtype(np.dtype(dtype))
    return types_pb2.ArrayShape(dtype=wire, dims=[int(d) for d in dims])


# UploadRequest.chunk and DownloadResponse.chunk are field 2, bytes: on
# the wire a tag byte, the length as a varint, then the bytes.
_CHUNK_TAG = 0x12


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _chunk_payload(raw: bytes) -> memoryview | None:
    """The bytes of a serialized DownloadResponse holding a chunk, as a
    view of `raw`; None for the header."""
    if not raw or raw[0] != _CHUNK_TAG:
        return None
    size = 0
    shift = 0
    i = 1
    while True:
        if i >= len(raw):
            raise Error("malformed download chunk: its length is cut off")
        byte = raw[i]
        size |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            break
        shift += 7
    if i + size != len(raw):
        raise Error(f"malformed download chunk: {size} bytes announced, "
                    f"{len(raw) - i} sent")
    return memoryview(raw)[i:]


def _chunks(header: buffer_pb2.UploadHeader,
            data: memoryview) -> Iterator[bytes]:
    """An upload's messages, serialized: the header, then each chunk
    copied once into its message."""
    yield buffer_pb2.UploadRequest(header=header).SerializeToString()
    for offset in range(0, len(data), CHUNK_BYTES):
        piece = data[offset:offset + CHUNK_BYTES]
        yield b"".join((bytes((_CHUNK_TAG,)), _varint(len(piece)), piece))


@dataclasses.dataclass(frozen=True)
class ArrayShape:
    """Element type and dimensions of a program's parameter or result.

    Unpacks as a pair: ``dtype, shape = executable.parameter_shapes[0]``.

    Attributes:
        dtype: the element type as HLO spells it (``'f32'``, ``'bf16'``...).
        shape: the dimensions, row-major.
    """

    dtype: str
    shape: tuple[int, ...]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of arrays of this type (see Buffer.dtype)."""
        return _dtypes.numpy_dtype(_dtypes.wire_from_name(self.dtype))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.dtype, self.shape))

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


def _array_shape(proto: types_pb2.ArrayShape) -> ArrayShape:
    return ArrayShape(_dtypes.wire_name(proto.dtype), tuple(proto.dims))


class Executable:
    """A compiled HLO program of the client's session.

    Create one with :meth:`Client.compile`. It is dropped on the daemon when
    :meth:`delete` is called, when a ``with`` block using it ends, when it is
    garbage-collected, or when its client closes; runs already enqueued
    finish regardless.
    """

    def __init__(self, client: "Client",
                 response: executable_pb2.CompileResponse) -> None:
        self._client = client
        self._session = client._session
        self._handle: int = response.executable_handle
        self._name: str = response.name
        self._parameter_shapes = [_array_shape(s)
                                  for s in response.parameter_shapes]
        self._result_shapes = [_array_shape(s) for s in response.result_shapes]
        self._result_protos = list(response.result_shapes)
        # (wire dtype, dims, bytes) of each result, for pipelined runs.
        self._result_meta = []
        for shape in self._result_protos:
            count = 1
            for d in shape.dims:
                count *= d
            self._result_meta.append(
                (shape.dtype, tuple(shape.dims),
                 _dtypes.wire_nbytes(shape.dtype, count)))
        self._result_is_tuple: bool = response.result_is_tuple
        self._compile_seconds: float = response.compile_seconds
        self._cache_hit: bool = response.cache_hit
        self._fingerprint: str = response.fingerprint
        self._num_replicas: int = response.num_replicas
        self._num_partitions: int = response.num_partitions
        self._portable: bool = response.portable
        p = max(1, response.num_partitions)
        flat = list(response.device_assignment)
        self._device_assignment = [flat[i:i + p]
                                   for i in range(0, len(flat), p)]
        self._addressable_device_ids = list(response.addressable_device_ids)
        self._donated_parameters = list(response.donated_parameters)
        self._parameter_is_tuple: bool = response.parameter_is_tuple
        self._deleted = False
        self._finalizer = weakref.finalize(self, self._session.drop_executable,
                                           self._handle)
        self._finalizer.atexit = False

    @property
    def handle(self) -> int:
        """The daemon's handle for the executable (unique in the session)."""
        return self._handle

    @property
    def name(self) -> str:
        """The HloModule's name, e.g. ``'jit_train_step'``."""
        return self._name

    @property
    def parameter_shapes(self) -> list[ArrayShape]:
        """One :class:`ArrayShape` per parameter, in order."""
        return list(self._parameter_shapes)

    @property
    def result_shapes(self) -> list[ArrayShape]:
        """One :class:`ArrayShape` per result (a tuple root's elements,
        flattened in order)."""
        return list(self._result_shapes)

    @property
    def result_is_tuple(self) -> bool:
        """True when the program's root is a tuple of the results."""
        return self._result_is_tuple

    @property
    def compile_seconds(self) -> float:
        """Seconds the daemon spent compiling (or waiting for a compile of
        the same program) for this call; near zero on a cache hit."""
        return self._compile_seconds

    @property
    def cache_hit(self) -> bool:
        """True when the daemon had the program compiled already."""
        return self._cache_hit

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the program text and options (the cache key)."""
        return self._fingerprint

    @property
    def num_replicas(self) -> int:
        """Replicas the program runs as (1 if portable)."""
        return self._num_replicas

    @property
    def num_partitions(self) -> int:
        """Partitions of each replica (1 if portable)."""
        return self._num_partitions

    @property
    def portable(self) -> bool:
        """True when compiled ``portable=True``: runs on any one device."""
        return self._portable

    @property
    def device_assignment(self) -> list[list[int]]:
        """``[replica][partition]`` -> device id; empty when portable."""
        return [list(row) for row in self._device_assignment]

    @property
    def addressable_devices(self) -> list[Device]:
        """The devices :meth:`execute_replicated` takes one argument list
        for, in order (replica-major)."""
        return [self._client.device(d) for d in self._addressable_device_ids]

    @property
    def donated_parameters(self) -> list[int]:
        """Parameters whose argument buffers are donated to results (by the
        module's ``input_output_alias``): invalid after a run."""
        return list(self._donated_parameters)

    @property
    def parameter_is_tuple(self) -> bool:
        """True when the only parameter is a tuple: pass its elements (see
        :attr:`parameter_shapes`), or one tuple buffer with
        ``arguments_are_tupled=True``."""
        return self._parameter_is_tuple

    def __repr__(self) -> str:
        params = ", ".join(str(s) for s in self._parameter_shapes)
        results = ", ".join(str(s) for s in self._result_shapes)
        if self._result_is_tuple:
            results = f"({results})"
        state = "deleted" if self._deleted else f"handle={self._handle:#x}"
        return f"Executable({self._name}: ({params}) -> {results}, {state})"

    def _argument(self, index: int, value: Any, device_id: int,
                  temporaries: list[Buffer],
                  pipelined_on: ExecuteStream | None = None) -> int:
        """The handle of argument ``index``, uploading host data first."""
        if isinstance(value, Buffer):
            if pipelined_on is not None and value._pending is not None and \
                    value._pending[0] is pipelined_on:
                # The stream runs in order: no need to wait.
                value._check_alive()
            else:
                value._sync()
            return value.handle
        expected = (self._parameter_shapes[index]
                    if index < len(self._parameter_shapes) else None)
        array = value if isinstance(value, np.ndarray) else None
        if array is None:
            # Python scalars and lists take the parameter's type.
            dtype = None
            if expected is not None and expected.dtype not in (
                    "bf16", "f8e4m3fn", "f8e5m2"):
                dtype = expected.numpy_dtype
            array = np.asarray(value, dtype=dtype)
        as_type = None
        if expected is not None and expected.dtype == "bf16":
            if array.dtype.kind == "f" and array.dtype != _dtypes.BFLOAT16:
                array = _dtypes.float_to_bf16_bits(array)
            if array.dtype == np.uint16:
                as_type = "bf16"
        elif expected is not None and expected.dtype in ("s4", "u4") and \
                array.dtype.kind in "iub":
            # Integers take the parameter's 4-bit type (one per byte).
            as_type = expected.dtype
            array = array.astype(_dtypes.RAW_CODES[
                _dtypes.wire_from_name(as_type)])
        elif expected is not None and \
                expected.dtype in ("f8e4m3fn", "f8e5m2") and \
                not _dtypes.is_ml_dtype(array.dtype, expected.dtype):
            if array.dtype != np.uint8:
                raise TypeError(
                    f"parameter {index} is {expected.dtype}: pass "
                    f"ml_dtypes arrays or its uint8 codes, not {array.dtype}")
            as_type = expected.dtype  # codes
        buffer = self._client.put(array, device=device_id, as_type=as_type)
        temporaries.append(buffer)
        return buffer.handle

    def _check_alive(self) -> None:
        if self._deleted:
            raise FailedPreconditionError(
                f"executable {self._name} ({self._handle:#x}) was deleted; "
                f"compile the program again")

    def _forget_donated(self, args: Sequence[Any]) -> None:
        """Donated arguments stop answering from what this client knew of
        them (fetched bytes, readiness): the daemon says they are gone."""
        for i in self._donated_parameters:
            if i < len(args) and isinstance(args[i], Buffer):
                args[i]._data = None
                args[i]._run = None

    def _handles(self, args: Sequence[Any], device_id: int,
                 temporaries: list[Buffer],
                 pipelined_on: ExecuteStream | None = None) -> list[int]:
        if isinstance(args, (Buffer, np.ndarray)):
            raise TypeError("args must be a sequence with one argument per "
                            "parameter, not a single "
                            f"{type(args).__name__}")
        return [self._argument(i, a, device_id, temporaries, pipelined_on)
                for i, a in enumerate(args)]

    _OPTIONS: dict[tuple, executable_pb2.ExecuteOptions] = {}

    @staticmethod
    def _options(launch_id: int, arguments_are_tupled: bool,
                 untuple_result: bool, wait: bool = False,
                 fetch: bool = False) -> executable_pb2.ExecuteOptions:
        # Requests copy their options: one message per combination serves.
        key = (int(launch_id), bool(arguments_are_tupled),
               bool(untuple_result), bool(wait), bool(fetch))
        options = Executable._OPTIONS.get(key)
        if options is None:
            options = executable_pb2.ExecuteOptions(
                launch_id=key[0], arguments_are_tupled=key[1],
                keep_tuple_result=not key[2], wait_until_ready=key[3],
                fetch_results=key[4])
            if key[0] == 0:  # launch ids vary; keep the cache small
                Executable._OPTIONS[key] = options
        return options

    def execute(self, args: Sequence[Any],
                device: Device | int | None = None, *, launch_id: int = 0,
                arguments_are_tupled: bool = False,
                untuple_result: bool = True,
                wait: bool = False, fetch: bool = False,
                pipelined: bool = False) -> list[Buffer]:
        """Enqueues one run on one device and returns its results at once.

        Args:
            args: one argument per parameter: a :class:`Buffer` of this
                client (on ``device``), or host data (a numpy array, scalar
                or list), which is uploaded to ``device`` first. For a bf16
                parameter, host data may be uint16 bit patterns or floats
                (rounded to nearest even). With ``arguments_are_tupled``,
                one tuple buffer (see :meth:`Client.make_tuple`).
            device: where to run; default: the device of the first Buffer
                argument, else device 0. A program over several devices
                runs only the replica and partition assigned to ``device``
                (see :meth:`execute_sharded`).
            launch_id: identifies one launch over several devices.
            arguments_are_tupled: ``args`` is one tuple buffer holding the
                elements of the program's tuple parameter.
            untuple_result: a tuple root comes back as one buffer per
                element (default), else as one tuple buffer.
            wait: return only once the results are ready: one round trip
                for a run whose results are read at once (an error of the
                run is still raised by whoever reads them).
            fetch: as ``wait``, and the reply also carries the contents of
                the results (those that fit in 1 MiB together, in order):
                their ``to_numpy`` then costs no call. A step that runs and
                reads a scalar loss is one round trip.
            pipelined: return without waiting for the daemon at all: the
                run goes out on the client's ordered execution stream with
                result handles chosen here, so a loop of dependent steps
                (each feeding the next) costs no round trip per step. Any
                error, including one the daemon finds in the request
                (a wrong argument, say), is raised by the first read of a
                result of that run or a later one (``to_numpy``,
                ``block_until_ready``...), and by the next pipelined run.

        Arguments of :attr:`donated_parameters` are donated: the result
        reuses their memory and the argument buffer can no longer be used
        (compile with ``non_donatable_parameters`` to keep them).

        The results become ready when the run finishes; an error during the
        run is raised by whoever reads them (``to_numpy``,
        ``block_until_ready``).

        Raises:
            InvalidArgumentError: wrong number of arguments, or an argument
                of the wrong shape, dtype or device (the message names it).
            NotFoundError: an argument that is not a buffer of this client.
            FailedPreconditionError: a deleted executable, or a deleted or
                donated argument.
        """
        self._check_alive()
        args = list(args)
        if device is None:
            device_id = next((a._device_id for a in args
                              if isinstance(a, Buffer)), None)
            if device_id is None:
                device_id = self._client._default_device_id()
        else:
            device_id = _device_id(device)
        if pipelined:
            if wait or fetch or not untuple_result:
                raise InvalidArgumentError(
                    "pipelined runs return one buffer per result without "
                    "waiting; they cannot be combined with wait=True, "
                    "fetch=True or untuple_result=False")
            return self._execute_pipelined(args, device_id, launch_id,
                                           arguments_are_tupled)
        temporaries: list[Buffer] = []
        try:
            handles = self._handles(args, device_id, temporaries)
            self._forget_donated(args)
            request = executable_pb2.ExecuteRequest(
                session_id=self._session.id, executable_handle=self._handle,
                argument_handles=handles, device_id=device_id,
                options=self._options(launch_id, arguments_are_tupled,
                                      untuple_result, wait, fetch))
            # What the program dropped goes with the run: no call of its own.
            buffers, executables = self._session.take_releases()
            request.release_buffers.extend(
                buffers + [t.handle for t in temporaries])
            request.release_executables.extend(executables)
            for buffer in temporaries:
                # The run holds its own references to uploaded arguments.
                buffer._deleted = True
                buffer._finalizer.detach()
            try:
                response = self._client._execute_call(request)
            except ResourceExhaustedError:
                # Memory or a quota may be held by what the program dropped
                # and the daemon has not freed yet: free it, then retry.
                if not (buffers or executables or
                        self._session.has_releases):
                    raise
                self._session.flush_releases(wait=True)
                del request.release_buffers[:]
                del request.release_executables[:]
                response = self._client._execute_call(request)
        finally:
            for buffer in temporaries:
                buffer.delete()  # when the request did not carry them
        return _results(self._client, response.results)

    def _execute_pipelined(self, args: list[Any], device_id: int,
                           launch_id: int,
                           arguments_are_tupled: bool) -> list[Buffer]:
        stream = self._client._execute_stream()
        temporaries: list[Buffer] = []
        handles = self._handles(args, device_id, temporaries,
                                pipelined_on=stream)
        self._forget_donated(args)
        result_handles = _random_handles.take(len(self._result_meta))
        sequence = stream.send(
            executable_pb2.ExecuteRequest(
                session_id=self._session.id, executable_handle=self._handle,
                argument_handles=handles, device_id=device_id,
                options=self._options(launch_id, arguments_are_tupled, True),
                result_handles=result_handles),
            holds=[a for a in args if isinstance(a, Buffer)])
        for buffer in temporaries:
            # Deleted once the run holds them.
            buffer._finalizer.detach()
            buffer._deleted = True
            stream.defer_delete(sequence, buffer.handle)
        pending = (stream, sequence)
        return [Buffer._pending_result(self._client, handle, dtype, dims,
                                       device_id, nbytes, pending)
                for handle, (dtype, dims, nbytes) in zip(result_handles,
                                                         self._result_meta)]

    def execute_sharded(self, args: Sequence[Any], device: Device | int, *,
                        launch_id: int, arguments_are_tupled: bool = False,
                        untuple_result: bool = True) -> list[Buffer]:
        """Runs only the replica and partition assigned to ``device``.

        The calls for every device of :attr:`device_assignment` with the
        same nonzero ``launch_id`` (from this or other clients, in any
        order, from any thread) form one launch and meet at collectives; a
        peer that never comes fails the run after the collective timeout.
        """
        if not launch_id:
            raise InvalidArgumentError(
                "execute_sharded needs a nonzero launch_id shared by the "
                "calls of every device of the launch")
        return self.execute(args, device, launch_id=launch_id,
                            arguments_are_tupled=arguments_are_tupled,
                            untuple_result=untuple_result)

    def execute_portable(self, args: Sequence[Any], device: Device | int, *,
                         arguments_are_tupled: bool = False,
                         untuple_result: bool = True) -> list[Buffer]:
        """Runs a portable executable (compiled ``portable=True``) on
        ``device``."""
        if not self._portable:
            raise InvalidArgumentError(
                f"executable {self._name} was compiled for devices "
                f"{self._addressable_device_ids}, not portable; compile it "
                f"with portable=True to run it on a device of your choice")
        return self.execute(args, device,
                            arguments_are_tupled=arguments_are_tupled,
                            untuple_result=untuple_result)

    def execute_replicated(self, per_device_args: Sequence[Sequence[Any]],
                           *, launch_id: int = 0,
                           arguments_are_tupled: bool = False,
                           untuple_result: bool = True
                           ) -> list[list[Buffer]]:
        """Runs every replica and partition at once.

        Args:
            per_device_args: one argument list per device of
                :attr:`addressable_devices`, in that order; host data is
                uploaded to the device of its list.
            launch_id: the launch's id (default: the daemon picks one).

        Returns:
            One result list per device, in the same order.

        Raises:
            InvalidArgumentError: a wrong number of lists, or a bad argument
                (the message names the replica, partition and argument).
            A run that fails on one device fails on every device: the error,
            naming the replica and partition, is bound to every result.
        """
        self._check_alive()
        lists = list(per_device_args)
        if len(lists) != len(self._addressable_device_ids):
            raise InvalidArgumentError(
                f"executable {self._name} runs on devices "
                f"{self._addressable_device_ids}; got {len(lists)} argument "
                f"lists, one per device is needed")
        temporaries: list[Buffer] = []
        try:
            arguments = [
                executable_pb2.ArgumentList(argument_handles=self._handles(
                    args, device_id, temporaries))
                for args, device_id in zip(lists,
                                           self._addressable_device_ids)
            ]
            for args in lists:
                self._forget_donated(list(args))
            response = _call(self._session.executables.ExecuteReplicated,
                             executable_pb2.ExecuteReplicatedRequest(
                                 session_id=self._session.id,
                                 executable_handle=self._handle,
                                 arguments=arguments,
                                 options=self._options(
                                     launch_id, arguments_are_tupled,
                                     untuple_result)))
        finally:
            for buffer in temporaries:
                buffer.delete()
        return [_results(self._client, r.results) for r in response.results]

    def __call__(self, *args: Any, device: Device | int | None = None
                 ) -> list[Buffer]:
        """Same as :meth:`execute` with the arguments spread out."""
        return self.execute(args, device=device)

    def delete(self) -> None:
        """Drops the executable on the daemon now. Idempotent."""
        if self._deleted:
            return
        self._deleted = True
        self._finalizer.detach()
        if self._session.closed:
            return
        _call(self._session.executables.DeleteExecutable,
              executable_pb2.DeleteExecutableRequest(
                  session_id=self._session.id,
                  executable_handle=self._handle))

    @property
    def is_deleted(self) -> bool:
        """True after :meth:`delete` (on this object)."""
        return self._deleted

    def __enter__(self) -> "Executable":
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _results(client: "Client", infos: Sequence[buffer_pb2.BufferInfo]
             ) -> list[Buffer]:
    """Buffer objects for the results of one run, sharing its state."""
    run = _Run(ready=bool(infos) and all(i.ready and not i.error_code
                                         for i in infos))
    return [Buffer(client, info, run=run) for info in infos]


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
            return f.read()
    except OSError as e:
        raise FailedPreconditionError(
            f"cannot read the {what} {path}: {e.strerror}") from None


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
        try:
            grpc.channel_ready_future(raw).result(timeout=timeout)
        except grpc.FutureTimeoutError:
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
        first error among them."""
        with self._stream_lock:
            stream = self._stream
        if stream is None:
            return
        stream.wait(stream.last_sent)

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
        ``as_type`` ("bf16", "f8e4m3fn", "f8e5m2", "s4", "u4") uploads the raw
        codes of that type (uint16, uint8, int8 values in [-8, 7], uint8
        values in [0, 15]; see the _dtypes module), for machines without
        ml_dtypes. complex64 and complex128 arrays upload as c64 and c128.

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
        if wire in _dtypes.INT4:
            if zero_copy:
                raise InvalidArgumentError(
                    "zero_copy=True cannot take s4 or u4 data: buffers hold "
                    "them packed two per byte")
            a = _dtypes.pack_int4(a)
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
