"""The requests of the hostile-input sweep (test_hostile_rpcs.py): which RPCs
are swept and what may justify an INTERNAL, requests built from the message
descriptors field by field and encoded on the wire by hand (so that values
the protobuf runtime refuses still reach the daemon), the hostile and sane
values of each field, and each RPC's cases. Values that name real objects
(a session, buffers, executables, a region) are resolved against the
sweep's pool when a request is built.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import pkgutil
import random
import secrets
import struct
from types import ModuleType
from typing import Any, Callable, Sequence

from google.protobuf import descriptor as pb_descriptor
from google.protobuf import symbol_database

from pjrt_client._proto.grpc.health.v1 import health_pb2
from pjrt_client._proto.pjrt import v1 as pjrt_v1
from pjrt_client._proto.pjrt.v1 import cluster_pb2, types_pb2

# The sweep's pool of real objects (test_hostile_rpcs.Pool), which the
# values of this module name.
Pool = Any

FD = pb_descriptor.FieldDescriptor

# --- what is swept ----------------------------------------------------------

#: Services defined in the protos that the client listeners do not serve,
#: with the reason. The test checks that each really answers UNIMPLEMENTED
#: there; every other service found is swept, method by method.
NOT_SERVED_TO_CLIENTS: dict[str, str] = {
    "pjrt.v1.Peer": "daemon-to-daemon calls, served only on the daemon's "
                    "--cluster entry (and only with the cluster secret)",
}

#: Services that must be found, so that a broken enumeration cannot pass
#: by sweeping nothing.
EXPECTED_SERVICES = {"pjrt.v1.Server", "pjrt.v1.Sessions", "pjrt.v1.Buffers",
                     "pjrt.v1.Executables", "grpc.health.v1.Health"}

#: Server-streaming RPCs that stay open by design: the sweep reads their
#: first message and then cancels the call instead of waiting for the end.
LONG_LIVED_STREAMS: dict[str, str] = {
    "pjrt.v1.Sessions.Attach": "stays open while the session lives",
    "grpc.health.v1.Health.Watch": "reports changes until cancelled",
}


@dataclasses.dataclass(frozen=True)
class Justification:
    """Calls that may end with INTERNAL: those of ``method`` (any if empty)
    and of case kind ``kind`` (any if empty) whose status details contain
    ``details``."""
    reason: str
    method: str = ""
    kind: str = ""
    details: str = ""

    def covers(self, method: str, kind: str, details: str) -> bool:
        return (not self.method or self.method == method) and \
            (not self.kind or self.kind == kind) and self.details in details


#: INTERNAL is accepted only where neither pjrtd's code nor its input
#: checks are to blame.
JUSTIFIED_INTERNAL = [
    Justification("the request does not parse as protobuf; grpc++ refuses "
                  "it before pjrtd's handler runs", kind="malformed"),
    Justification("grpc++'s built-in health service (not pjrtd code) "
                  "answers a service name it will not take with INTERNAL",
                  method="grpc.health.v1.Health.Watch",
                  details="could not parse request"),
]

#: Per-call deadline of this test; a call that reaches it may be a hang.
CALL_TIMEOUT = 3.0
#: Messages read from a server stream before the test cancels it.
MAX_STREAM_MESSAGES = 64
#: Nested messages are made hostile down to this depth.
MAX_DEPTH = 3
#: All-hostile random messages (or sequences) per RPC.
RANDOM_CASES = 8
#: How many elements "many" is for repeated fields.
MANY = 10000
SEED = 20240229
MIB = 1 << 20
PROTOCOL_VERSION = 5


def _proto_modules() -> list[ModuleType]:
    """Every generated pjrt.v1 module, plus gRPC's health service."""
    modules = [importlib.import_module(f"{pjrt_v1.__name__}.{info.name}")
               for info in pkgutil.iter_modules(pjrt_v1.__path__)
               if info.name.endswith("_pb2")]
    return modules + [health_pb2]


def _services() -> dict[str, pb_descriptor.ServiceDescriptor]:
    found = {}
    for module in _proto_modules():
        for service in module.DESCRIPTOR.services_by_name.values():
            found[service.full_name] = service
    return found


SERVICES = _services()
METHODS: dict[str, pb_descriptor.MethodDescriptor] = {
    method.full_name: method
    for name, service in sorted(SERVICES.items())
    if name not in NOT_SERVED_TO_CLIENTS
    for method in service.methods
}


def _method_id(full_name: str) -> str:
    return full_name.split(".", 2)[-1] if full_name.startswith("pjrt.v1.") \
        else full_name.rsplit(".", 2)[-2] + "." + full_name.rsplit(".")[-1]


def message_class(desc: pb_descriptor.Descriptor) -> Any:
    """The generated class of a message descriptor."""
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22
        return symbol_database.Default().GetSymbol(desc.full_name)
    return GetMessageClass(desc)


# --- wire encoding ----------------------------------------------------------

VARINT_TYPES = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64,
                FD.TYPE_BOOL, FD.TYPE_ENUM}
ZIGZAG_TYPES = {FD.TYPE_SINT32, FD.TYPE_SINT64}
FIXED64_TYPES = {FD.TYPE_FIXED64, FD.TYPE_SFIXED64}
FIXED32_TYPES = {FD.TYPE_FIXED32, FD.TYPE_SFIXED32}
SIGNED_TYPES = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_SINT32,
                FD.TYPE_SINT64, FD.TYPE_SFIXED32, FD.TYPE_SFIXED64}
UNSIGNED_TYPES = {FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_FIXED32,
                  FD.TYPE_FIXED64}
INT_TYPES = SIGNED_TYPES | UNSIGNED_TYPES
FLOAT_TYPES = {FD.TYPE_FLOAT, FD.TYPE_DOUBLE}
MASK64 = (1 << 64) - 1


def _varint(value: int) -> bytes:
    value &= MASK64
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _length_delimited(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


def _float32(value: float) -> bytes:
    try:
        return struct.pack("<f", value)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, value))


def encode_one(field: pb_descriptor.FieldDescriptor, value: Any) -> bytes:
    """One occurrence of ``field`` holding ``value``, however out of range:
    integers are wrapped to the wire width, strings may be raw bytes."""
    t, n = field.type, field.number
    if t in VARINT_TYPES:
        return _key(n, 0) + _varint(int(value))
    if t in ZIGZAG_TYPES:
        v = (int(value) + (1 << 63)) % (1 << 64) - (1 << 63)
        return _key(n, 0) + _varint((v << 1) ^ (v >> 63))
    if t in FIXED64_TYPES:
        return _key(n, 1) + struct.pack("<Q", int(value) & MASK64)
    if t == FD.TYPE_DOUBLE:
        return _key(n, 1) + struct.pack("<d", float(value))
    if t in FIXED32_TYPES:
        return _key(n, 5) + struct.pack("<I", int(value) & 0xFFFFFFFF)
    if t == FD.TYPE_FLOAT:
        return _key(n, 5) + _float32(float(value))
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    elif hasattr(value, "SerializeToString"):
        value = value.SerializeToString()
    return _length_delimited(n, bytes(value))


class _Unset:
    """A field left out of the message."""

    def __repr__(self) -> str:
        return "unset"


UNSET = _Unset()


@dataclasses.dataclass(eq=False)
class Lazy:
    """A value known only when the request is sent (a handle of the current
    hostile session, a fresh handle, a nested message).

    ``kind`` is "int", "bytes", "str" or "msg", so that a value meant for a
    field of one type is never put into a field of another.
    """
    label: str
    kind: str
    fn: Callable[["Pool", dict[int, Any]], Any]

    def __repr__(self) -> str:
        return self.label


Spec = tuple[tuple[pb_descriptor.FieldDescriptor, Any], ...]


def resolve(value: Any, pool: "Pool", memo: dict[int, Any]) -> Any:
    """``value`` with Lazy values evaluated; one evaluation per Lazy object
    and request (so [x] * 10000 repeats one value)."""
    if isinstance(value, Lazy):
        key = id(value)
        if key not in memo:
            memo[key] = value.fn(pool, memo)
        return memo[key]
    return value


def encode_field(field: pb_descriptor.FieldDescriptor, value: Any,
                 pool: "Pool", memo: dict[int, Any]) -> bytes:
    value = resolve(value, pool, memo)
    if value is UNSET:
        return b""
    if field.label == FD.LABEL_REPEATED:
        return b"".join(encode_one(field, resolve(v, pool, memo))
                        for v in value)
    return encode_one(field, value)


def build(spec: Spec, pool: "Pool", memo: dict[int, Any]) -> bytes:
    """The wire bytes of a message given as (field, value) pairs."""
    return b"".join(encode_field(f, v, pool, memo) for f, v in spec)


def nested(label: str, spec: Spec) -> Lazy:
    return Lazy(label, "msg", lambda pool, memo: build(spec, pool, memo))


# --- values -----------------------------------------------------------------

def _ref(label: str, kind: str, getter: Callable[["Pool"], Any]) -> Lazy:
    return Lazy(label, kind, lambda pool, memo: getter(pool))


def _buffer(name: str) -> Lazy:
    return _ref(f"buffer {name}", "int",
                lambda p: p.buffer_handles.get(name, 0))


def _executable(name: str) -> Lazy:
    return _ref(f"executable {name}", "int",
                lambda p: p.executable_handles.get(name, 0))


def _fresh(label: str) -> Lazy:
    return _ref(label, "int", lambda p: secrets.randbits(64) | 1)


REAL_SESSION = _ref("the real session", "int", lambda p: p.session_id)
CLOSED_SESSION = _ref("a closed session", "int",
                      lambda p: p.closed_sessions[0])
OWN_PUBLIC_ID = _ref("its own public id", "int", lambda p: p.public_id)
VICTIM_PUBLIC_ID = _ref("the victim's public id", "int",
                        lambda p: p.victim_public_id)
VICTIM_BUFFER = _ref("the victim's buffer", "int", lambda p: p.victim_handle)
REGION = _ref("the region", "int", lambda p: p.region_handle)
STALE_REGION = _ref("an unregistered region", "int",
                    lambda p: p.stale_region_handle)
REAL_DESCRIPTOR = _ref("a real descriptor", "bytes", lambda p: p.descriptor)
CANCELLED_DESCRIPTOR = _ref("a cancelled receive's descriptor", "bytes",
                            lambda p: p.cancelled_descriptor)
FRESH = [_fresh("a fresh handle"), _fresh("another fresh handle")]
A, B = _buffer("a"), _buffer("b")
ADD_EXE = _executable("add")

SIGNED = [0, -1, 1, 2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1, -2**63]
UNSIGNED = [0, 1, 2**32 - 1, 2**64 - 1]
FLOATS = [math.nan, math.inf, -math.inf, -1.0, 1e300, 0.0, 5e-324]
BOOLS = [False, True, 2, MASK64]  # 2 and 2**64-1: non-canonical varints

ADD_HLO = """HloModule hostile_add
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT s = f32[3] add(x, y)
}"""
TUPLE_HLO = """HloModule hostile_tuple
ENTRY e {
  p = (f32[3], f32[3]) parameter(0)
  a = f32[3] get-tuple-element(p), index=0
  b = f32[3] get-tuple-element(p), index=1
  s = f32[3] add(a, b)
  ROOT t = (f32[3], f32[3]) tuple(s, b)
}"""
REPLICATED_HLO = """HloModule hostile_replicated, replica_count=3
ENTRY e {
  x = f32[3] parameter(0)
  ROOT n = f32[3] negate(x)
}"""
ALL_REDUCE_HLO = """HloModule hostile_all_reduce, replica_count=3
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=add
}"""

# Programs that take ADD's arguments and return a result whose byte size
# overflows int64 (2**64 + 4096 bytes, 2**64 bytes) or is merely huge.
HUGE_RESULT_HLO = """HloModule hostile_huge_{name}
ENTRY e {{
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  c = f32[] constant(1)
  ROOT b = f32[{dims}] broadcast(c), dimensions={{}}
}}"""
HUGE_RESULTS = {
    "overflowing_result": "1024,18014398509481985",
    "zero_byte_result": "4611686018427387904",
    "huge_result": "1099511627776",
}

HOSTILE_STRINGS = [
    ("''", ""),
    ("1 MiB of 'x'", "x" * MIB),
    ("control characters and escapes",
     "a\nb\r\n\x00c\x1b[2J\x7f\\n\\x00%s%n%x{}{0}\t\u202e\ufeff\U0001f4a5"),
    ("invalid-looking text",
     "\ufffd\uffff\ufffe\x00\x01 \\xff\\xfe\\ud800 \xff\xfe \u0000%00"),
    ("HLO of a 2**64-byte parameter",
     "HloModule m\nENTRY e { ROOT p = f32[1024,18014398509481985] "
     "parameter(0) }"),
]
HLO_EXTRAS = [
    ("HLO nested 100000 tuples deep",
     "HloModule m\nENTRY e { ROOT p = " + "(" * 100000 + "f32[]"
     + ")" * 100000 + " parameter(0) }"),
    ("HLO with replica_count=2147483647",
     "HloModule m, replica_count=2147483647\n"
     "ENTRY e { ROOT p = f32[] parameter(0) }"),
    ("HLO of a 4 TiB broadcast",
     "HloModule m\nENTRY e {\n  c = f32[] constant(1)\n"
     "  ROOT b = f32[1099511627776] broadcast(c), dimensions={}\n}"),
    ("HLO with parameter(2147483647)",
     "HloModule m\nENTRY e { ROOT p = f32[] parameter(2147483647) }"),
    ("HLO with a negative dimension",
     "HloModule m\nENTRY e { ROOT p = f32[-1] parameter(0) }"),
    ("HLO with an element count overflowing int64",
     "HloModule m\nENTRY e { ROOT p = f32[4294967296,4294967296,4294967296] "
     "parameter(0) }"),
    ("HLO cut off", "HloModule m\nENTRY e { ROOT p = f32[3"),
    ("HLO calling itself",
     "HloModule m\nf {\n  p = f32[] parameter(0)\n"
     "  ROOT c = f32[] call(p), to_apply=f\n}\n"
     "ENTRY e {\n  p = f32[] parameter(0)\n"
     "  ROOT c = f32[] call(p), to_apply=f\n}"),
    ("HLO reading tuple element 5 of 1",
     "HloModule m\nENTRY e {\n  p = (f32[]) parameter(0)\n"
     "  ROOT g = f32[] get-tuple-element(p), index=5\n}"),
    ("HLO slicing past the end",
     "HloModule m\nENTRY e {\n  p = f32[3] parameter(0)\n"
     "  ROOT s = f32[5] slice(p), slice={[0:5]}\n}"),
    ("HLO of a real all-reduce over 3 replicas", ALL_REDUCE_HLO),
]
HOSTILE_BYTES = [
    ("b''", b""),
    ("1 MiB of zeros", bytes(MIB)),
    ("1 MiB + 1 of 0xff", b"\xff" * (MIB + 1)),
    ("control bytes", b"\x00\n\r\x1b[2J\xff\xfe\xc0\x80%s%n"),
    ("b'PJXD'", b"PJXD"),
    ("b'PJXD' and garbage", b"PJXD" + b"\xff" * 16),
]


def _descriptor_variant(label: str,
                        change: Callable[[Any], Any]) -> Lazy:
    """The real cross-host descriptor with one thing changed."""
    def make(pool: "Pool", memo: dict[int, Any]) -> bytes:
        d = cluster_pb2.CrossHostDescriptor.FromString(pool.descriptor[4:])
        out = change(d)
        return out if isinstance(out, bytes) else b"PJXD" + \
            d.SerializeToString()
    return Lazy(label, "bytes", make)


def _set(message: Any, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(message, name, value)


DESCRIPTOR_VARIANTS = [
    _descriptor_variant("descriptor of version 2",
                        lambda d: _set(d, version=2)),
    _descriptor_variant("descriptor of task 7",
                        lambda d: _set(d, task_id=7)),
    _descriptor_variant("descriptor of task -1",
                        lambda d: _set(d, task_id=-1)),
    _descriptor_variant("descriptor of another incarnation",
                        lambda d: _set(d, incarnation=d.incarnation ^ 1)),
    _descriptor_variant("descriptor of device 2**31-1",
                        lambda d: _set(d, device_id=2**31 - 1)),
    _descriptor_variant("descriptor of another receive",
                        lambda d: _set(d, receive_id=d.receive_id ^ 1)),
    _descriptor_variant("descriptor with a flipped token",
                        lambda d: _set(d, token=bytes(
                            b ^ 0xFF for b in d.token))),
    _descriptor_variant("descriptor with an empty token",
                        lambda d: _set(d, token=b"")),
    _descriptor_variant("descriptor of f32[2**62]",
                        lambda d: d.shape.dims.__setitem__(
                            slice(None), [2**62])),
    _descriptor_variant("descriptor of dtype 999",
                        lambda d: _set(d.shape, dtype=999)),
    _descriptor_variant("descriptor that expired in 1970",
                        lambda d: _set(d, expires_unix_micros=1)),
    _descriptor_variant("descriptor expiring at 2**63-1 us",
                        lambda d: _set(d, expires_unix_micros=2**63 - 1)),
    _ref("a truncated descriptor", "bytes", lambda p: p.descriptor[:-1]),
    _ref("a descriptor with trailing garbage", "bytes",
         lambda p: p.descriptor + b"\xff\xff"),
]

SESSION_VALUES = [REAL_SESSION, CLOSED_SESSION, OWN_PUBLIC_ID,
                  VICTIM_PUBLIC_ID, A]
BUFFER_VALUES = [A, _buffer("c"), _buffer("empty"), _buffer("scalar"),
                 _buffer("u8"), _buffer("tuple"), _buffer("element"),
                 _buffer("errored"), _buffer("tuple_of_one_twice"),
                 _buffer("tuple_of_a_tuple"), _buffer("overflowed"),
                 _ref("a deleted buffer", "int", lambda p: p.stale_buffer),
                 _ref("a receive buffer", "int", lambda p: p.pending_buffer),
                 ADD_EXE, REGION, VICTIM_BUFFER, REAL_SESSION]
EXECUTABLE_VALUES = [ADD_EXE, _executable("portable"), _executable("tuple"),
                     _executable("replicated"), _executable("all_reduce"),
                     _executable("overflowing_result"),
                     _executable("zero_byte_result"),
                     _executable("huge_result"),
                     _ref("a deleted executable", "int",
                          lambda p: p.stale_executable),
                     A, REAL_SESSION]
REGION_VALUES = [REGION, STALE_REGION, A, REAL_SESSION]
REGION_SIZE = 4096

#: Values that fields of a name get besides those of their type.
SEMANTIC_VALUES: dict[str, list[Any]] = {
    "session_id": SESSION_VALUES,
    "executable_handle": EXECUTABLE_VALUES,
    "region_handle": REGION_VALUES,
    "handle": BUFFER_VALUES,
    "device_id": [1, 2, 3, 4],
    "public_id": [OWN_PUBLIC_ID, VICTIM_PUBLIC_ID],
    "offset": [REGION_SIZE - 11, REGION_SIZE, REGION_SIZE + 1, 2**62],
    "hlo_text": [(label, text) for label, text in HLO_EXTRAS],
    "chunk": [("11 bytes", bytes(11)), ("13 bytes", bytes(13))],
    "transfer_descriptor": [REAL_DESCRIPTOR, CANCELLED_DESCRIPTOR]
    + DESCRIPTOR_VARIANTS,
    "admin_token": [("32 zeros", "0" * 32)],
    "protocol_version": [4, 6],
    "timeout_ms": [1],
    "timeout_seconds": [1e-9, 0.001],
}

#: Sane values by field name; other fields are left unset (their default).
SANE_VALUES: dict[str, Any] = {
    "session_id": REAL_SESSION,
    "executable_handle": ADD_EXE,
    "region_handle": REGION,
    "handle": A,
    "handles": [A, B],
    "argument_handles": [A, B],
    "result_handles": [FRESH[0]],
    "device_id": 0,
    "dims": [3],
    "dtype": types_pb2.DTYPE_F32,
    "hlo_text": ADD_HLO,
    "client_name": "hostile-sweep",
    "protocol_version": PROTOCOL_VERSION,
    "transfer_descriptor": REAL_DESCRIPTOR,
    "chunk": bytes(12),
    "timeout_ms": 1000,
    "timeout_seconds": 1.0,
    "public_id": OWN_PUBLIC_ID,
    # Results then come back with the error of a failed run bound to them.
    "wait_until_ready": True,
}


def _kind(field: pb_descriptor.FieldDescriptor) -> str:
    if field.type == FD.TYPE_MESSAGE:
        return "msg"
    if field.type == FD.TYPE_STRING:
        return "str"
    if field.type == FD.TYPE_BYTES:
        return "bytes"
    if field.type in FLOAT_TYPES:
        return "float"
    return "int"


def _fits(field: pb_descriptor.FieldDescriptor, value: Any) -> bool:
    """Whether ``value`` is of the kind ``field`` holds."""
    kind = _kind(field)
    if isinstance(value, Lazy):
        return value.kind == kind
    if isinstance(value, (list, tuple)):
        return all(_fits(field, v) for v in value)
    if isinstance(value, bool) or isinstance(value, int):
        return kind in ("int", "float")
    if isinstance(value, float):
        return kind == "float"
    if isinstance(value, str):
        return kind == "str"
    if isinstance(value, bytes):
        return kind == "bytes"
    return False


def _label(value: Any) -> str:
    named = {2**31 - 1: "2**31-1", 2**31: "2**31", 2**32 + 1: "2**32+1",
             2**63 - 1: "2**63-1", -2**63: "-2**63", 2**32 - 1: "2**32-1",
             MASK64: "2**64-1", 2**62: "2**62"}
    if isinstance(value, Lazy):
        return value.label
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return named.get(value, str(value))
    if isinstance(value, (str, bytes)) and len(value) > 40:
        return f"<{type(value).__name__} of {len(value)}>"
    return repr(value)


def _labelled(values: Sequence[Any]) -> list[tuple[str, Any]]:
    return [v if isinstance(v, tuple) else (_label(v), v) for v in values]


def _semantic(field: pb_descriptor.FieldDescriptor) -> list[Any]:
    name = field.name
    if field.label == FD.LABEL_REPEATED and name.endswith("handles"):
        name = name[:-1]  # an element of "handles" is a "handle"
    for key in (name, name.rsplit("_", 1)[-1]):
        if key in SEMANTIC_VALUES:
            return SEMANTIC_VALUES[key]
    return []


def _typed(field: pb_descriptor.FieldDescriptor) -> list[Any]:
    t = field.type
    if t == FD.TYPE_BOOL:
        return BOOLS
    if t == FD.TYPE_ENUM:
        return [v.number for v in field.enum_type.values] + [999, -1]
    if t in SIGNED_TYPES:
        return SIGNED
    if t in UNSIGNED_TYPES:
        return UNSIGNED
    if t in FLOAT_TYPES:
        return FLOATS
    if t == FD.TYPE_STRING:
        return HOSTILE_STRINGS
    if t == FD.TYPE_BYTES:
        return HOSTILE_BYTES
    raise AssertionError(f"no hostile values for {field.full_name}")


def scalar_values(field: pb_descriptor.FieldDescriptor
                  ) -> list[tuple[str, Any]]:
    """Hostile values of one element of ``field``, labelled."""
    out: dict[str, Any] = {}
    for label, value in _labelled(_semantic(field)) + _labelled(
            _typed(field)):
        if _fits(field, value) and label not in out:
            out[label] = value
    return list(out.items())


def _rng(*parts: Any) -> random.Random:
    return random.Random(":".join(str(p) for p in (SEED,) + parts))


def _random_element(field: pb_descriptor.FieldDescriptor,
                    rng: random.Random) -> Any:
    if field.type in FLOAT_TYPES:
        return rng.uniform(-1e9, 1e9)
    if field.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
        data = bytes(rng.getrandbits(8) for _ in range(8))
        return data.hex() if field.type == FD.TYPE_STRING else data
    bits = 32 if field.type in (FD.TYPE_INT32, FD.TYPE_UINT32, FD.TYPE_ENUM,
                                FD.TYPE_FIXED32, FD.TYPE_SFIXED32,
                                FD.TYPE_SINT32) else 64
    if field.type == FD.TYPE_BOOL:
        bits = 1
    return rng.getrandbits(bits)


def repeated_scalar_values(field: pb_descriptor.FieldDescriptor
                           ) -> list[tuple[str, Any]]:
    """Hostile lists for a repeated scalar field: empty, one hostile
    element at a time, a few, many."""
    elements = scalar_values(field)
    out = [("[]", [])] + [(f"[{label}]", [v]) for label, v in elements]
    plain = [v for _, v in elements if not isinstance(v, Lazy)]
    lazy = [v for _, v in elements if isinstance(v, Lazy)]
    if lazy:
        first = lazy[0]
        out += [(f"[{first.label}] x2", [first, first]),
                ("[every real handle]", lazy),
                (f"[{first.label}] x{MANY}", [first] * MANY)]
    if field.name == "result_handles":
        out += [("[fresh, fresh]", list(FRESH)),
                ("[fresh] x2", [FRESH[0], FRESH[0]])]
    if field.type in INT_TYPES:
        big = [v for v in plain if isinstance(v, int) and abs(v) >= 2**31]
        out += [(f"[{_label(v)}] x2", [v, v]) for v in big]
        out += [("[2] x64", [2] * 64), (f"[1] x{MANY}", [1] * MANY)]
    if plain:
        out.append((f"[{_label(plain[0])}, ...] (a few)", plain[:4]))
    rng = _rng(field.full_name)
    out.append((f"{MANY} random", [_random_element(field, rng)
                                   for _ in range(MANY)]))
    return out


@functools.lru_cache(maxsize=None)
def sane_spec(desc: pb_descriptor.Descriptor, variant: int = 0) -> Spec:
    """Sane (field, value) pairs of a message: real session and handles by
    field name, nested messages sane; ``variant`` picks the member of the
    first oneof that is set."""
    oneof = desc.oneofs[0] if desc.oneofs else None
    chosen = oneof.fields[variant % len(oneof.fields)] if oneof else None
    spec = []
    for field in desc.fields:
        group = field.containing_oneof
        if group is not None and field is not (
                chosen if group is oneof else group.fields[0]):
            spec.append((field, UNSET))
            continue
        if field.type == FD.TYPE_MESSAGE:
            value = sane_message(field.message_type)
            spec.append((field, [value] if field.label == FD.LABEL_REPEATED
                         else value))
            continue
        value = SANE_VALUES.get(field.name)
        if value is None or not _fits(field, value) or (
                isinstance(value, list)
                != (field.label == FD.LABEL_REPEATED)):
            value = UNSET
        spec.append((field, value))
    return tuple(spec)


@functools.lru_cache(maxsize=None)
def sane_message(desc: pb_descriptor.Descriptor) -> Lazy:
    return nested(f"sane {desc.name}", sane_spec(desc))


def _replace(spec: Spec, field: pb_descriptor.FieldDescriptor,
             value: Any) -> Spec:
    return tuple((f, value if f is field else v) for f, v in spec)


def field_values(field: pb_descriptor.FieldDescriptor,
                 depth: int) -> list[tuple[str, Any]]:
    """Every hostile value of ``field``, labelled."""
    if field.type != FD.TYPE_MESSAGE:
        if field.label == FD.LABEL_REPEATED:
            return repeated_scalar_values(field)
        return scalar_values(field)
    sane = sane_message(field.message_type)
    inner = one_field_cases(field.message_type, depth + 1) \
        if depth < MAX_DEPTH else []
    if field.label == FD.LABEL_REPEATED:
        return [("[]", []), ("[sane]", [sane]), ("[sane] x3", [sane] * 3),
                (f"[sane] x{MANY}", [sane] * MANY)] + [
            (f"[{{{label}}}]", [value]) for label, value in inner]
    return [("unset", UNSET), ("{}", b""), ("{sane}", sane)] + [
        (f"{{{label}}}", value) for label, value in inner]


@functools.lru_cache(maxsize=None)
def one_field_cases(desc: pb_descriptor.Descriptor,
                    depth: int) -> tuple[tuple[str, Lazy], ...]:
    """Messages with one field hostile and the others sane."""
    base = sane_spec(desc)
    cases = []
    for field in desc.fields:
        for label, value in field_values(field, depth):
            cases.append((f"{field.name}={label}",
                          nested(label, _replace(base, field, value))))
    return tuple(cases)


def random_spec(desc: pb_descriptor.Descriptor, rng: random.Random,
                depth: int = 0) -> tuple[Spec, list[str]]:
    """A message with each field sane, unset or hostile at random."""
    spec, labels = [], []
    for field, sane in sane_spec(desc):
        roll = rng.random()
        if roll < 0.35:
            spec.append((field, sane))
            continue
        if roll < 0.45:
            spec.append((field, UNSET))
            labels.append(f"{field.name}=unset")
            continue
        if field.type == FD.TYPE_MESSAGE and depth < MAX_DEPTH and \
                rng.random() < 0.6:
            inner, inner_labels = random_spec(field.message_type, rng,
                                              depth + 1)
            value = nested("random", inner)
            count = rng.choice([1, 1, 2, 3])
            spec.append((field, [value] * count if field.label
                         == FD.LABEL_REPEATED else value))
            labels.append(f"{field.name}={{{', '.join(inner_labels)}}}"
                          + (f" x{count}" if field.label
                             == FD.LABEL_REPEATED else ""))
            continue
        label, value = rng.choice(field_values(field, MAX_DEPTH))
        spec.append((field, value))
        labels.append(f"{field.name}={label}")
    return tuple(spec), labels


# --- cases ------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    """One call: a request (or a sequence of them for client streams)."""
    label: str
    messages: list[Lazy] | Lazy
    kind: str = "field"  # "field", "random", "baseline" or "malformed"


def _raw(label: str, fn: Callable[["Pool", dict[int, Any]], bytes]) -> Lazy:
    return Lazy(label, "msg", fn)


def malformed_cases(desc: pb_descriptor.Descriptor) -> list[Case]:
    """Requests that are not valid protobuf, or carry an unknown field."""
    sane = sane_message(desc)
    cases = [
        Case("wire: 7 bytes of 0xff", _raw("garbage",
                                           lambda p, m: b"\xff" * 7),
             "malformed"),
        Case("wire: sane request cut short by one byte",
             _raw("cut", lambda p, m: resolve(sane, p, m)[:-1]),
             "malformed"),
        Case("wire: sane request and an unknown field of 64 KiB",
             _raw("unknown", lambda p, m: resolve(sane, p, m)
                  + _length_delimited(536870911, bytes(65536)))),
    ]
    for field in desc.fields:
        if field.type == FD.TYPE_STRING:
            spec = _replace(sane_spec(desc), field, b"\xc3\x28\xff\xfe")
            cases.append(Case(f"wire: invalid UTF-8 in {field.name}",
                              nested("utf8", spec), "malformed"))
    return cases


@functools.lru_cache(maxsize=None)
def unary_cases(desc: pb_descriptor.Descriptor, method: str
                ) -> tuple[Case, ...]:
    """Cases of a unary or server-streaming RPC."""
    cases = [Case("baseline (all sane)", sane_message(desc), "baseline")]
    cases += [Case(label, value) for label, value in one_field_cases(desc, 0)]
    cases += malformed_cases(desc)
    for i in range(RANDOM_CASES):
        spec, labels = random_spec(desc, _rng(method, i))
        cases.append(Case(f"random #{i}: {{{', '.join(labels)}}}",
                          nested("random", spec), "random"))
    return tuple(cases)


@functools.lru_cache(maxsize=None)
def stream_cases(desc: pb_descriptor.Descriptor, method: str
                 ) -> tuple[Case, ...]:
    """Sequences for a client-streaming RPC: the sane sequence (each member
    of a oneof in turn, e.g. header then chunk), each hostile message alone,
    after a sane first message and after the whole sane sequence, and a few
    random sequences."""
    count = len(desc.oneofs[0].fields) if desc.oneofs else 2
    sane = [nested(f"sane {desc.name} #{i}", sane_spec(desc, i))
            for i in range(count)]
    cases = [Case("stream []", [], "baseline"),
             Case("stream [sane...]", list(sane), "baseline")]
    for case in unary_cases(desc, method)[1:]:
        if case.kind == "random":
            continue
        cases.append(Case(f"stream [{case.label}]", [case.messages],
                          case.kind))
        cases.append(Case(f"stream [sane, {case.label}]",
                          [sane[0], case.messages], case.kind))
        cases.append(Case(f"stream [sane..., {case.label}]",
                          sane + [case.messages], case.kind))
    for i in range(RANDOM_CASES):
        rng = _rng(method, "stream", i)
        messages, labels = [], []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.4:
                k = rng.randrange(count)
                messages.append(sane[k])
                labels.append(f"sane #{k}")
            else:
                spec, inner = random_spec(desc, rng)
                messages.append(nested("random", spec))
                labels.append(f"{{{', '.join(inner)}}}")
        cases.append(Case(f"random stream #{i}: [{'; '.join(labels)}]",
                          messages, "random"))
    return tuple(cases)


def cases_of(method: pb_descriptor.MethodDescriptor) -> tuple[Case, ...]:
    if method.client_streaming:
        return stream_cases(method.input_type, method.full_name)
    return unary_cases(method.input_type, method.full_name)
