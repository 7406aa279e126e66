"""Element types: numpy dtypes and the wire's DType enum.

c64 and c128 are numpy's complex64 and complex128. bf16, the floats
narrower than 16 bits (the f8 types, f6e2m3fn, f6e3m2fn, f4e2m1fn) and
s4/u4 are ml_dtypes' types when ml_dtypes is installed (and has them);
without it they travel as raw codes (see RAW_CODES): bf16 and the narrow
floats as their bit patterns (uint16, uint8; the 4- and 6-bit floats' codes
in the low bits), s4 and u4 as one value per byte (int8 in [-8, 7], uint8 in
[0, 15]), s2 and u2 likewise (int8 in [-2, 1], uint8 in [0, 3]). On the
wire and in the daemon's buffers s4, u4 and f4e2m1fn are packed two per
byte, element 2i in the high nibble of byte i (as XLA packs them), s2 and
u2 four per byte, the first in the top bits; the client packs and unpacks
them.
"""

from __future__ import annotations

import warnings

import numpy as np

from pjrt_client._proto.pjrt.v1 import types_pb2

try:  # bfloat16, f8 and int4 as numpy types, when ml_dtypes is installed.
    import ml_dtypes as _ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(_ml_dtypes.bfloat16)
    _ML_DTYPES: dict[int, np.dtype] = {
        types_pb2.DTYPE_F8E4M3FN: np.dtype(_ml_dtypes.float8_e4m3fn),
        types_pb2.DTYPE_F8E5M2: np.dtype(_ml_dtypes.float8_e5m2),
        types_pb2.DTYPE_F8E4M3FNUZ: np.dtype(_ml_dtypes.float8_e4m3fnuz),
        types_pb2.DTYPE_F8E5M2FNUZ: np.dtype(_ml_dtypes.float8_e5m2fnuz),
        types_pb2.DTYPE_F8E4M3B11FNUZ:
            np.dtype(_ml_dtypes.float8_e4m3b11fnuz),
        types_pb2.DTYPE_S4: np.dtype(_ml_dtypes.int4),
        types_pb2.DTYPE_U4: np.dtype(_ml_dtypes.uint4),
    }
    # Newer ml_dtypes releases only.
    for _wire, _name in ((types_pb2.DTYPE_F8E4M3, "float8_e4m3"),
                         (types_pb2.DTYPE_F8E3M4, "float8_e3m4"),
                         (types_pb2.DTYPE_F8E8M0FNU, "float8_e8m0fnu"),
                         (types_pb2.DTYPE_F6E2M3FN, "float6_e2m3fn"),
                         (types_pb2.DTYPE_F6E3M2FN, "float6_e3m2fn"),
                         (types_pb2.DTYPE_F4E2M1FN, "float4_e2m1fn"),
                         (types_pb2.DTYPE_S2, "int2"),
                         (types_pb2.DTYPE_U2, "uint2")):
        if hasattr(_ml_dtypes, _name):
            _ML_DTYPES[_wire] = np.dtype(getattr(_ml_dtypes, _name))
except ImportError:  # pragma: no cover - depends on the machine
    BFLOAT16 = None
    _ML_DTYPES = {}

# The floats narrower than 16 bits: one-byte codes (f4e2m1fn's packed two
# per byte on the wire).
MINIFLOATS = (types_pb2.DTYPE_F8E4M3FN, types_pb2.DTYPE_F8E5M2,
              types_pb2.DTYPE_F8E4M3, types_pb2.DTYPE_F8E3M4,
              types_pb2.DTYPE_F8E4M3FNUZ, types_pb2.DTYPE_F8E5M2FNUZ,
              types_pb2.DTYPE_F8E4M3B11FNUZ, types_pb2.DTYPE_F8E8M0FNU,
              types_pb2.DTYPE_F6E2M3FN, types_pb2.DTYPE_F6E3M2FN,
              types_pb2.DTYPE_F4E2M1FN)

# The numpy dtype of each type's raw codes (without ml_dtypes).
RAW_CODES: dict[int, np.dtype] = {
    types_pb2.DTYPE_BF16: np.dtype(np.uint16),
    **{f8: np.dtype(np.uint8) for f8 in MINIFLOATS},
    types_pb2.DTYPE_S4: np.dtype(np.int8),
    types_pb2.DTYPE_U4: np.dtype(np.uint8),
    types_pb2.DTYPE_S2: np.dtype(np.int8),
    types_pb2.DTYPE_U2: np.dtype(np.uint8),
}
# Packed several per byte on the wire: the bits of each element.
PACKED_BITS: dict[int, int] = {
    types_pb2.DTYPE_S4: 4, types_pb2.DTYPE_U4: 4,
    types_pb2.DTYPE_F4E2M1FN: 4, types_pb2.DTYPE_S2: 2,
    types_pb2.DTYPE_U2: 2}
# The sub-byte integers, held one value per byte by the client.
SUB_BYTE_INTS = (types_pb2.DTYPE_S4, types_pb2.DTYPE_U4, types_pb2.DTYPE_S2,
                 types_pb2.DTYPE_U2)
SIGNED_PACKED = (types_pb2.DTYPE_S4, types_pb2.DTYPE_S2)

_NUMPY_TO_WIRE: dict[np.dtype, int] = {
    np.dtype(np.bool_): types_pb2.DTYPE_PRED,
    np.dtype(np.int8): types_pb2.DTYPE_S8,
    np.dtype(np.int16): types_pb2.DTYPE_S16,
    np.dtype(np.int32): types_pb2.DTYPE_S32,
    np.dtype(np.int64): types_pb2.DTYPE_S64,
    np.dtype(np.uint8): types_pb2.DTYPE_U8,
    np.dtype(np.uint16): types_pb2.DTYPE_U16,
    np.dtype(np.uint32): types_pb2.DTYPE_U32,
    np.dtype(np.uint64): types_pb2.DTYPE_U64,
    np.dtype(np.float16): types_pb2.DTYPE_F16,
    np.dtype(np.float32): types_pb2.DTYPE_F32,
    np.dtype(np.float64): types_pb2.DTYPE_F64,
    np.dtype(np.complex64): types_pb2.DTYPE_C64,
    np.dtype(np.complex128): types_pb2.DTYPE_C128,
}
if BFLOAT16 is not None:
    _NUMPY_TO_WIRE[BFLOAT16] = types_pb2.DTYPE_BF16
for _wire, _dtype in _ML_DTYPES.items():
    _NUMPY_TO_WIRE[_dtype] = _wire

_WIRE_TO_NUMPY: dict[int, np.dtype] = {v: k for k, v in _NUMPY_TO_WIRE.items()}

# HLO spelling of each wire type, for messages and reprs.
_WIRE_NAMES: dict[int, str] = {
    types_pb2.DTYPE_PRED: "pred", types_pb2.DTYPE_S8: "s8",
    types_pb2.DTYPE_S16: "s16", types_pb2.DTYPE_S32: "s32",
    types_pb2.DTYPE_S64: "s64", types_pb2.DTYPE_U8: "u8",
    types_pb2.DTYPE_U16: "u16", types_pb2.DTYPE_U32: "u32",
    types_pb2.DTYPE_U64: "u64", types_pb2.DTYPE_F16: "f16",
    types_pb2.DTYPE_BF16: "bf16", types_pb2.DTYPE_F32: "f32",
    types_pb2.DTYPE_F64: "f64", types_pb2.DTYPE_C64: "c64",
    types_pb2.DTYPE_C128: "c128", types_pb2.DTYPE_F8E4M3FN: "f8e4m3fn",
    types_pb2.DTYPE_F8E5M2: "f8e5m2", types_pb2.DTYPE_S4: "s4",
    types_pb2.DTYPE_U4: "u4", types_pb2.DTYPE_F8E4M3: "f8e4m3",
    types_pb2.DTYPE_F8E3M4: "f8e3m4", types_pb2.DTYPE_F8E4M3FNUZ: "f8e4m3fnuz",
    types_pb2.DTYPE_F8E5M2FNUZ: "f8e5m2fnuz",
    types_pb2.DTYPE_F8E4M3B11FNUZ: "f8e4m3b11fnuz",
    types_pb2.DTYPE_F8E8M0FNU: "f8e8m0fnu",
    types_pb2.DTYPE_F6E2M3FN: "f6e2m3fn", types_pb2.DTYPE_F6E3M2FN: "f6e3m2fn",
    types_pb2.DTYPE_F4E2M1FN: "f4e2m1fn",
    types_pb2.DTYPE_S2: "s2", types_pb2.DTYPE_U2: "u2",
}
MINIFLOAT_NAMES = tuple(_WIRE_NAMES[f8] for f8 in MINIFLOATS)


def wire_dtype(dtype: np.dtype, bf16: bool = False,
               as_type: str | None = None) -> int:
    """The wire DType for numpy ``dtype``.

    ``bf16=True`` declares uint16 data to be bfloat16 bit patterns (for
    machines without ml_dtypes). ``as_type`` names the HLO type ("bf16",
    a narrow float such as "f8e4m3fn" or "f4e2m1fn", "s4", "u4", "s2", "u2")
    whose raw codes (RAW_CODES) the data holds.

    Raises:
        TypeError: the dtype has no pjrtd equivalent, or does not hold the
            raw codes of ``as_type``.
    """
    dtype = np.dtype(dtype).newbyteorder("=")
    if as_type is not None:
        wire = wire_from_name(as_type)
        raw = RAW_CODES.get(wire)
        if raw is None:
            raise TypeError(f"as_type={as_type!r} is not a type of raw codes; "
                            f"use one of "
                            f"{', '.join(wire_name(w) for w in RAW_CODES)}")
        # (A dtype compared with None is numpy's default float64: the
        # ml_dtypes types are None without ml_dtypes.)
        ml_dtype = _ML_DTYPES.get(wire)
        if dtype != raw and (ml_dtype is None or ml_dtype != dtype) and not (
                wire == types_pb2.DTYPE_BF16 and BFLOAT16 is not None and
                dtype == BFLOAT16):
            raise TypeError(f"{as_type} raw codes are {raw} values; got "
                            f"{dtype}")
        return wire
    if bf16:
        if dtype != np.dtype(np.uint16) and (BFLOAT16 is None or
                                             dtype != BFLOAT16):
            raise TypeError(
                f"bf16=True needs uint16 bit patterns (or "
                f"ml_dtypes.bfloat16); got {dtype}")
        return types_pb2.DTYPE_BF16
    try:
        return _NUMPY_TO_WIRE[dtype]
    except KeyError:
        supported = ", ".join(str(d) for d in _NUMPY_TO_WIRE)
        raise TypeError(
            f"dtype {dtype} is not supported by pjrtd; use one of "
            f"{supported}") from None


def numpy_dtype(wire: int) -> np.dtype:
    """The numpy dtype in which arrays of wire type ``wire`` are returned.

    bf16 is ``ml_dtypes.bfloat16`` when available; otherwise its bit patterns
    come back as uint16, with a warning (shown once per call site under
    Python's default warning filters).
    """
    if wire == types_pb2.DTYPE_BF16 and BFLOAT16 is None:
        warnings.warn(
            "ml_dtypes is not installed: bf16 arrays are returned as uint16 "
            "bit patterns (view them with ml_dtypes.bfloat16, or convert: "
            "(x.astype(np.uint32) << 16).view(np.float32))",
            UserWarning, stacklevel=3)
        return np.dtype(np.uint16)
    if wire in RAW_CODES and wire not in _WIRE_TO_NUMPY:
        if wire not in SUB_BYTE_INTS:
            warnings.warn(
                f"ml_dtypes is not installed: {wire_name(wire)} arrays are "
                f"returned as their uint8 codes", UserWarning, stacklevel=3)
        return RAW_CODES[wire]
    return _WIRE_TO_NUMPY[wire]


def is_ml_dtype(dtype: np.dtype, name: str) -> bool:
    """Whether ``dtype`` is ml_dtypes' numpy type for HLO type ``name``
    ("f8e4m3fn", "s4"...); False without ml_dtypes."""
    ml = _ML_DTYPES.get(wire_from_name(name))
    return ml is not None and np.dtype(dtype) == ml


def itemsize(wire: int) -> float:
    """Bytes per element on the wire (0.5 for s4, u4 and f4e2m1fn, 0.25 for
    s2 and u2)."""
    if wire in PACKED_BITS:
        return PACKED_BITS[wire] / 8
    if wire in RAW_CODES:
        return RAW_CODES[wire].itemsize
    return _WIRE_TO_NUMPY[wire].itemsize


def wire_nbytes(wire: int, count: int) -> int:
    """Bytes of ``count`` elements of ``wire`` on the wire."""
    if wire in PACKED_BITS:
        per_byte = 8 // PACKED_BITS[wire]
        return (count + per_byte - 1) // per_byte
    return count * int(itemsize(wire))


def sub_byte_range_error(values: np.ndarray, wire: int) -> str | None:
    """Why integer ``values`` (one per byte) do not fit the packed type
    ``wire`` (s4 -8..7, u4 0..15, s2 -2..1, u2 0..3, f4e2m1fn codes
    0..15), naming the first that does not; None when they all do (and for
    ml_dtypes arrays, which hold only what fits)."""
    a = np.asarray(values)
    if a.dtype.kind not in "iu" or a.size == 0:
        return None
    bits = PACKED_BITS[wire]
    if wire in SIGNED_PACKED:
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        low, high = 0, (1 << bits) - 1
    flat = a.reshape(-1)
    bad = (flat < low) | (flat > high)
    if not bad.any():
        return None
    at = int(np.argmax(bad))
    return (f"{wire_name(wire)} holds {low}..{high}; element {at} is "
            f"{flat[at]}")


def pack_sub_byte(values: np.ndarray, bits: int = 4) -> np.ndarray:
    """Values or codes of ``bits`` bits (4: s4, u4, f4e2m1fn; 2: s2, u2),
    one per byte, packed 8 // bits per byte as XLA packs them: the first in
    the top bits (element 2i of a 4-bit type in the high nibble of byte i);
    a count that does not fill the last byte leaves its low bits zero."""
    per_byte = 8 // bits
    flat = np.asarray(values).reshape(-1).view(np.uint8) & np.uint8(
        (1 << bits) - 1)
    pad = -flat.size % per_byte
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
    groups = flat.reshape(-1, per_byte)
    out = np.zeros(groups.shape[0], np.uint8)
    for k in range(per_byte):
        out |= groups[:, k] << np.uint8(8 - bits * (k + 1))
    return out


def unpack_sub_byte(packed: bytes | np.ndarray, count: int, signed: bool,
                    bits: int = 4) -> np.ndarray:
    """The inverse of pack_sub_byte: ``count`` values, int8 (sign-extended)
    when ``signed``, else uint8."""
    b = np.frombuffer(packed, dtype=np.uint8) if not isinstance(
        packed, np.ndarray) else packed.view(np.uint8)
    per_byte = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    out = np.empty((b.size, per_byte), np.uint8)
    for k in range(per_byte):
        out[:, k] = (b >> np.uint8(8 - bits * (k + 1))) & mask
    out = out.reshape(-1)[:count]
    if signed:
        shift = np.int8(8 - bits)
        return ((out.astype(np.int8) << shift) >> shift).astype(np.int8)
    return out


def wire_from_name(name: str) -> int:
    """The wire type HLO spells ``name`` ('f32', 'bf16', ...)."""
    for wire, spelling in _WIRE_NAMES.items():
        if spelling == name:
            return wire
    raise ValueError(f"unknown element type {name!r}; expected one of "
                     f"{', '.join(_WIRE_NAMES.values())}")


def wire_name(wire: int) -> str:
    """HLO name of a wire type: 'f32', 'bf16', ..."""
    return _WIRE_NAMES.get(wire, f"dtype#{wire}")


def float_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of ``values``, rounded to nearest even.

    NaN stays a quiet NaN of the same sign; values beyond the bfloat16 range
    become infinities, as XLA's convert does.
    """
    f = np.array(values, dtype=np.float32, order="C")  # keeps 0-d arrays
    bits = f.view(np.uint32).astype(np.uint64)
    one, sixteen = np.uint64(1), np.uint64(16)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> sixteen) & one)) >> sixteen
    quiet_nan = (bits >> sixteen) | np.uint64(0x40)
    return np.array(np.where(np.isnan(f), quiet_nan, rounded),
                    dtype=np.uint16)


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact)."""
    wide = np.array(bits, dtype=np.uint16).astype(np.uint32)
    return np.array(wide << np.uint32(16), dtype=np.uint32).view(np.float32)
