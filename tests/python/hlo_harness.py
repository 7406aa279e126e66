"""Running small HLO programs on pjrtd, and XLA's semantics written out.

The reference functions here follow XLA where it differs from numpy
(integer division by zero, shifts past the bit width, saturating converts,
correctly rounded conversions to narrow floats, total order...), computed
with Python integers and fractions so that they are exact by construction.

Arrays of every HLO type are numpy arrays of their values; bf16 values are
float32 arrays whose elements are all exactly representable in bf16 (they
travel as uint16 bit patterns).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

import pjrt_client

INTS_S = ["s8", "s16", "s32", "s64"]
INTS_U = ["u8", "u16", "u32", "u64"]
INTS = INTS_S + INTS_U
FLOATS = ["f16", "bf16", "f32", "f64"]
NUMERIC = INTS + FLOATS
ALL = ["pred"] + NUMERIC

NP_DTYPE = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32,
    "s64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
    "u64": np.uint64, "f16": np.float16, "bf16": np.float32,
    "f32": np.float32, "f64": np.float64,
}
BITS = {"pred": 8, "s8": 8, "s16": 16, "s32": 32, "s64": 64, "u8": 8,
        "u16": 16, "u32": 32, "u64": 64, "f16": 16, "bf16": 16, "f32": 32,
        "f64": 64}
# Float formats: (precision in bits incl. the implicit one, minimum normal
# exponent, maximum exponent).
FLOAT_FORMAT = {"f16": (11, -14, 15), "bf16": (8, -126, 127),
                "f32": (24, -126, 127), "f64": (53, -1022, 1023)}
# Unsigned integer type of the same width, for bit patterns.
UINT_OF_WIDTH = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# --- integers ---------------------------------------------------------------

def int_range(ty: str) -> tuple[int, int]:
    """Smallest and largest value of integer type ``ty``."""
    bits = BITS[ty]
    if ty.startswith("s"):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def wrap(value: int, ty: str) -> int:
    """``value`` reduced modulo 2**bits into the range of ``ty``."""
    bits = BITS[ty]
    v = value & ((1 << bits) - 1)
    if ty.startswith("s") and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def ints(array: np.ndarray) -> list[int]:
    """The elements as Python ints, flattened."""
    return [int(v) for v in np.asarray(array).reshape(-1)]


def int_array(values: Sequence[int], ty: str,
              shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An array of type ``ty`` holding ``values`` (wrapped)."""
    a = np.array([wrap(int(v), ty) for v in values], dtype=NP_DTYPE[ty])
    return a.reshape(shape if shape is not None else (len(values),))


def unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


# --- floats -----------------------------------------------------------------

def round_to_float(value: Any, ty: str) -> float:
    """``value`` (int, float or Fraction) rounded to nearest even in float
    format ``ty``, overflowing to infinity; NaN and infinities unchanged."""
    if isinstance(value, np.floating):
        value = float(value)
    elif isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return value
    precision, emin, emax = FLOAT_FORMAT[ty]
    exact = Fraction(value)
    if exact == 0:
        return math.copysign(0.0, value) if isinstance(value, float) else 0.0
    sign = -1 if exact < 0 else 1
    magnitude = abs(exact)
    exponent = math.floor(math.log2(magnitude))
    # log2 of a Fraction may be off by one near powers of two: fix it.
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    quantum_exponent = max(exponent, emin) - (precision - 1)
    scaled = magnitude / Fraction(2) ** quantum_exponent
    n = round(scaled)  # Fraction rounding: half to even
    result = Fraction(n) * Fraction(2) ** quantum_exponent
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax
    if result > largest:
        return sign * math.inf
    return sign * float(result)


def float_array(values: Sequence[Any], ty: str,
                shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An array of float type ``ty`` holding ``values`` rounded to it."""
    rounded = [round_to_float(v, ty) if not (isinstance(v, float) and
                                             math.isnan(v)) else v
               for v in values]
    a = np.array(rounded, dtype=NP_DTYPE[ty])
    return a.reshape(shape if shape is not None else (len(values),))


def round_array(values: np.ndarray, ty: str) -> np.ndarray:
    """float64 ``values`` rounded elementwise to float type ``ty``."""
    flat = [round_to_float(float(v), ty) for v in
            np.asarray(values, dtype=np.float64).reshape(-1)]
    return np.array(flat, dtype=NP_DTYPE[ty]).reshape(np.shape(values))


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """Bit patterns of float32 values that are exact in bf16."""
    bits = np.array(values, dtype=np.float32, order="C").view(np.uint32)
    return (bits >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bit patterns."""
    wide = np.array(bits, dtype=np.uint16).astype(np.uint32)
    return np.array(wide << np.uint32(16), dtype=np.uint32).view(np.float32)


def float_bits(array: np.ndarray, ty: str) -> np.ndarray:
    """The bit patterns (unsigned ints) of a float array of type ``ty``."""
    if ty == "bf16":
        return bf16_bits(array)
    return np.array(array, order="C").view(UINT_OF_WIDTH[BITS[ty]])


def spacing(values: np.ndarray, ty: str) -> np.ndarray:
    """Distance from each value to the next one in float format ``ty``."""
    precision, emin, _ = FLOAT_FORMAT[ty]
    v = np.abs(np.asarray(values, dtype=np.float64))
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(v > 0, v, 1.0)))
    exponent = np.maximum(exponent, emin)
    return np.ldexp(1.0, (exponent - (precision - 1)).astype(np.int64))


def assert_floats_close(actual: np.ndarray, expected: np.ndarray, ty: str,
                        ulps: float = 0, what: str = "",
                        abs_ulps_of_one: float = 0) -> None:
    """Checks float results of type ``ty`` against float64 ``expected``.

    Within ``ulps`` units in the last place of ``ty`` (0: exactly equal,
    with the sign of zero), or within ``abs_ulps_of_one`` ulps of 1.0;
    NaN where NaN is expected; infinities equal.
    """
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    nan_e = np.isnan(e)
    bad = nan_e != np.isnan(a)
    inf_e = np.isinf(e)
    bad |= inf_e & (a != e)
    finite = ~nan_e & ~inf_e
    if ulps == 0 and abs_ulps_of_one == 0:
        bad |= finite & ((a != e) | (np.signbit(a) != np.signbit(e)))
    else:
        tolerance = np.maximum(ulps * spacing(e, ty),
                               abs_ulps_of_one * spacing(np.ones_like(e), ty))
        with np.errstate(invalid="ignore"):
            bad |= finite & ~(np.abs(a - e) <= tolerance)
    if bad.any():
        index = np.argwhere(bad)[:5].tolist()
        pairs = [(float(a[tuple(i)]), float(e[tuple(i)])) for i in index]
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements of type {ty} "
            f"differ by more than {ulps} ulp(s); first (actual, expected) at "
            f"{index}: {pairs}")


def assert_same(actual: np.ndarray, expected: np.ndarray, ty: str,
                what: str = "") -> None:
    """Exact equality for any type (floats: same value and sign, NaN
    matches NaN)."""
    if ty in FLOATS:
        assert_floats_close(actual, expected, ty, 0, what)
        return
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    if ty == "pred":
        assert a.dtype == np.bool_, f"{what}: dtype {a.dtype}"
    bad = a != e.astype(a.dtype)
    if bad.any():
        index = np.argwhere(bad)[:5].tolist()
        pairs = [(a[tuple(i)].item(), e[tuple(i)].item()) for i in index]
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements differ; first "
            f"(actual, expected) at {index}: {pairs}")


def total_order_key(array: np.ndarray, ty: str) -> list[int]:
    """Integers ordered as XLA's TOTALORDER orders the floats:
    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN."""
    bits = BITS[ty]
    keys = []
    for b in ints(float_bits(array, ty)):
        signed = b - (1 << bits) if b >> (bits - 1) else b
        if signed < 0:
            signed ^= (1 << (bits - 1)) - 1
        keys.append(signed)
    return keys


# --- sample data ------------------------------------------------------------

def sample(ty: str, shape: tuple[int, ...], rng: np.random.Generator,
           low: float = -8.0, high: float = 8.0) -> np.ndarray:
    """Random values of ``ty``: integers over the whole range, floats
    uniform in [low, high) rounded to the type, pred 0/1."""
    n = int(np.prod(shape, dtype=np.int64))
    if ty == "pred":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if ty in INTS:
        lo, hi = int_range(ty)
        return np.array([int(rng.integers(lo, hi, endpoint=True,
                                          dtype=np.int64 if ty != "u64"
                                          else np.uint64))
                         for _ in range(n)], dtype=NP_DTYPE[ty]).reshape(shape)
    values = rng.uniform(low, high, size=n)
    return float_array(list(values), ty, shape)


def small_ints(ty: str, shape: tuple[int, ...], rng: np.random.Generator,
               low: int = -4, high: int = 4) -> np.ndarray:
    """Small integer values of any numeric type (exact in every one)."""
    if ty in INTS_U or ty == "pred":
        low = max(low, 0)
    if ty == "pred":
        high = min(high, 1)
    values = rng.integers(low, high, size=shape, endpoint=True)
    if ty == "pred":
        return values.astype(np.bool_)
    return values.astype(NP_DTYPE[ty])


# --- running programs -------------------------------------------------------

def shape_str(ty: str, shape: Sequence[int]) -> str:
    """HLO spelling of an array shape: ``f32[2,3]``."""
    return f"{ty}[{','.join(str(d) for d in shape)}]"


def to_wire(ty: str, array: np.ndarray) -> np.ndarray:
    """What to pass to execute() for a parameter of type ``ty``."""
    if ty == "bf16":
        return bf16_bits(array)
    return np.asarray(array, dtype=NP_DTYPE[ty])


def from_wire(buffer: pjrt_client.Buffer) -> np.ndarray:
    """A result's values (bf16 as float32)."""
    if buffer.dtype_name == "bf16":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = buffer.to_numpy()
        if raw.dtype == np.uint16:
            return bf16_values(raw)
        return raw.astype(np.float32)
    return buffer.to_numpy()


def run(client: pjrt_client.Client, hlo: str,
        args: Sequence[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """Compiles ``hlo``, runs it with ``args`` (pairs of HLO type and
    values) and returns every result's values."""
    executable = client.compile(hlo)
    try:
        outputs = executable.execute([to_wire(ty, a) for ty, a in args])
        try:
            return [from_wire(b) for b in outputs]
        finally:
            for b in outputs:
                b.delete()
    finally:
        executable.delete()


def run_arrays(client: pjrt_client.Client, program: str,
               *arrays: np.ndarray) -> list[np.ndarray]:
    """Compiles ``program`` (HLO or StableHLO text), runs it on numpy
    arrays as they are and returns every result's values."""
    executable = client.compile(program)
    try:
        outputs = executable.execute(list(arrays))
        try:
            return [b.to_numpy() for b in outputs]
        finally:
            for b in outputs:
                b.delete()
    finally:
        executable.delete()


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded from the test's parameters (reproducible)."""
    return np.random.default_rng([ord(ch) for ch in repr(key)])


def unary_hlo(op: str, ty: str, out_ty: str, shape: tuple[int, ...],
              attrs: str = "") -> str:
    return f"""HloModule {op.replace('-', '_')}_{ty}

ENTRY main {{
  x = {shape_str(ty, shape)} parameter(0)
  ROOT r = {shape_str(out_ty, shape)} {op}(x){attrs}
}}
"""


def binary_hlo(op: str, ty: str, out_ty: str, shape: tuple[int, ...],
               attrs: str = "", rhs_ty: str | None = None) -> str:
    return f"""HloModule {op.replace('-', '_')}_{ty}

ENTRY main {{
  x = {shape_str(ty, shape)} parameter(0)
  y = {shape_str(rhs_ty or ty, shape)} parameter(1)
  ROOT r = {shape_str(out_ty, shape)} {op}(x, y){attrs}
}}
"""


def dims_attr(dims) -> str:
    """``dimensions={1,2}``."""
    return "dimensions={" + ",".join(str(d) for d in dims) + "}"


def run1(cl, hlo: str, *args: tuple[str, np.ndarray]) -> np.ndarray:
    """Runs a program with one result and returns it."""
    (out,) = run(cl, hlo, list(args))
    return out
