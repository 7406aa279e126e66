"""Buffer: an array on a device of the daemon."""

from __future__ import annotations

import concurrent.futures
import weakref
from typing import Any, TYPE_CHECKING

import grpc
import numpy as np

from pjrt_client import _dtypes
from pjrt_client._shm import LEASE_THRESHOLD, SHM_THRESHOLD, Region, copy_bytes
from pjrt_client._channels import finish_call
from pjrt_client._stream import ExecuteStream
from pjrt_client._errors import (Error, FailedPreconditionError,
                                 InvalidArgumentError, from_rpc_error)
from pjrt_client._proto.pjrt.v1 import buffer_pb2
from pjrt_client._common import (_call, _chunk_payload, Device, _device_id,
                                 INLINE_BYTES, _Run)

if TYPE_CHECKING:
    from pjrt_client._client import Client


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
        if self._dtype_wire in _dtypes.PACKED_BITS:
            # Packed several per byte: unpack to one value per byte.
            values = _dtypes.unpack_sub_byte(
                bytes(self._read_bytes()), self.size,
                signed=self._dtype_wire in _dtypes.SIGNED_PACKED,
                bits=_dtypes.PACKED_BITS[self._dtype_wire])
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
            got = f"{out.dtype}{list(out.shape)}"
            if not out.flags.c_contiguous:
                got += " (not C-contiguous)"
            if not out.flags.writeable:
                got += " (read-only)"
            raise InvalidArgumentError(
                f"out must be a writable C-contiguous {self.dtype}"
                f"{list(self._shape)} array; got {got}")
        found = self._client._region_of(out)
        if found is not None and not self._remote and \
                self._dtype_wire not in _dtypes.PACKED_BITS:
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
