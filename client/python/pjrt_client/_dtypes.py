"""Element types: numpy dtypes and the wire's DType enum.

c64 and c128 are numpy's complex64 and complex128. bf16, the floats
narrower than 16 bits (the f8 types, f6e2m3fn, f6e3m2fn, f4e2m1fn) and
s4/u4 are ml_dtypes' types when ml_dtypes is installed (and has them);
without it they travel as raw codes (see RAW_CODES): bf16 and the narrow
floats as their bit patterns (uint16, uint8; the 4- and 6-bit floats' codes
in the low bits), s4 and u4 as one value per byte (int8 in [-8, 7], uint8 in
[0, 15]). On the wire and in the daemon's buffers s4, u4 and f4e2m1fn are
packed two per byte, element 2i in the high nibble of byte i (as XLA packs
them); the client packs and unpacks them.
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
                         (types_pb2.DTYPE_F4E2M1FN, "float4_e2m1fn")):
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
}
# Packed two per byte on the wire.
PACKED4 = (types_pb2.DTYPE_S4, types_pb2.DTYPE_U4, types_pb2.DTYPE_F4E2M1FN)

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
}
MINIFLOAT_NAMES = tuple(_WIRE_NAMES[f8] for f8 in MINIFLOATS)


def wire_dtype(dtype: np.dtype, bf16: bool = False,
               as_type: str | None = None) -> int:
    """The wire DType for numpy ``dtype``.

    ``bf16=True`` declares uint16 data to be bfloat16 bit patterns (for
    machines without ml_dtypes). ``as_type`` names the HLO type ("bf16",
    a narrow float such as "f8e4m3fn" or "f4e2m1fn", "s4", "u4") whose raw
    codes (RAW_CODES)
    the data holds.

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
        if dtype != raw and _ML_DTYPES.get(wire) != dtype and not (
                wire == types_pb2.DTYPE_BF16 and dtype == BFLOAT16):
            raise TypeError(f"{as_type} raw codes are {raw} values; got "
                            f"{dtype}")
        return wire
    if bf16:
        if dtype != np.dtype(np.uint16) and dtype != BFLOAT16:
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
        if wire not in (types_pb2.DTYPE_S4, types_pb2.DTYPE_U4):
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
    """Bytes per element on the wire (0.5 for s4, u4 and f4e2m1fn)."""
    if wire in PACKED4:
        return 0.5
    if wire in RAW_CODES:
        return RAW_CODES[wire].itemsize
    return _WIRE_TO_NUMPY[wire].itemsize


def wire_nbytes(wire: int, count: int) -> int:
    """Bytes of ``count`` elements of ``wire`` on the wire."""
    if wire in PACKED4:
        return (count + 1) // 2
    return count * int(itemsize(wire))


def pack_int4(values: np.ndarray) -> np.ndarray:
    """s4/u4 values or f4e2m1fn codes (one per byte) packed two per byte, as
    XLA packs them:
    element 2i in the high nibble of byte i; an odd count leaves the last
    low nibble zero."""
    flat = np.asarray(values).reshape(-1).view(np.uint8) & np.uint8(0xF)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return (flat[0::2] << np.uint8(4)) | flat[1::2]


def unpack_int4(packed: bytes | np.ndarray, count: int,
                signed: bool) -> np.ndarray:
    """The inverse of pack_int4: ``count`` values, int8 (sign-extended) when
    ``signed``, else uint8."""
    b = np.frombuffer(packed, dtype=np.uint8) if not isinstance(
        packed, np.ndarray) else packed.view(np.uint8)
    out = np.empty(2 * b.size, np.uint8)
    out[0::2] = b >> np.uint8(4)
    out[1::2] = b & np.uint8(0xF)
    out = out[:count]
    if signed:
        return ((out.astype(np.int8) << np.int8(4)) >> np.int8(4)).astype(
            np.int8)
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
