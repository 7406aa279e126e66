"""What the client's modules share: the protocol's and the client's
constants, devices, shapes, the upload chunk encoding and _call."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Iterator

import grpc
import numpy as np

from pjrt_client import _dtypes
from pjrt_client._errors import (Error, FailedPreconditionError,
                                 InvalidArgumentError, from_rpc_error)
from pjrt_client._proto.pjrt.v1 import buffer_pb2, executable_pb2, types_pb2


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


def check_address(address: str) -> None:
    """InvalidArgumentError for an address that is neither a socket scheme
    gRPC knows nor host:port: gRPC would resolve it as a name for the
    whole connect timeout before failing."""
    if address.startswith(("unix:", "unix-abstract:", "vsock:", "dns:",
                           "ipv4:", "ipv6:", "passthrough:", "xds:")):
        return
    host, colon, port = address.rpartition(":")
    if host.startswith("["):
        good_host = host.endswith("]") and len(host) > 2
    else:
        good_host = bool(host) and ":" not in host
    if not (colon and good_host and port.isascii() and port.isdigit()
            and int(port) <= 65535):
        raise InvalidArgumentError(
            f"address {address!r} is neither unix:///path/name.sock nor "
            "host:port (such as 127.0.0.1:7070 or [::1]:7070)")


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


def _call(method: Any, request: Any, timeout: float | None = _CALL_TIMEOUT):
    """Calls a unary RPC, turning grpc.RpcError into pjrt_client.Error
    (and gRPC's ValueError for a closed channel into
    FailedPreconditionError: the client was closed)."""
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None
    except ValueError as e:
        if "closed channel" not in str(e):
            raise
        raise FailedPreconditionError(
            "the client is closed; connect again to use the daemon") from None


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
