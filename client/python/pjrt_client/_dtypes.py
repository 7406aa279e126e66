"""Element types: numpy dtypes and the wire's DType enum."""

from __future__ import annotations

import warnings

import numpy as np

from pjrt_client._proto.pjrt.v1 import types_pb2

try:  # bfloat16 as its own numpy type, when ml_dtypes is installed.
    import ml_dtypes as _ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the machine
    BFLOAT16 = None

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
}
if BFLOAT16 is not None:
    _NUMPY_TO_WIRE[BFLOAT16] = types_pb2.DTYPE_BF16

_WIRE_TO_NUMPY: dict[int, np.dtype] = {v: k for k, v in _NUMPY_TO_WIRE.items()}

# HLO spelling of each wire type, for messages and reprs.
_WIRE_NAMES: dict[int, str] = {
    types_pb2.DTYPE_PRED: "pred", types_pb2.DTYPE_S8: "s8",
    types_pb2.DTYPE_S16: "s16", types_pb2.DTYPE_S32: "s32",
    types_pb2.DTYPE_S64: "s64", types_pb2.DTYPE_U8: "u8",
    types_pb2.DTYPE_U16: "u16", types_pb2.DTYPE_U32: "u32",
    types_pb2.DTYPE_U64: "u64", types_pb2.DTYPE_F16: "f16",
    types_pb2.DTYPE_BF16: "bf16", types_pb2.DTYPE_F32: "f32",
    types_pb2.DTYPE_F64: "f64",
}


def wire_dtype(dtype: np.dtype, bf16: bool = False) -> int:
    """The wire DType for numpy ``dtype``.

    ``bf16=True`` declares uint16 data to be bfloat16 bit patterns (for
    machines without ml_dtypes).

    Raises:
        TypeError: the dtype has no pjrtd equivalent.
    """
    dtype = np.dtype(dtype).newbyteorder("=")
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
    return _WIRE_TO_NUMPY[wire]


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
