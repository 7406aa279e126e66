"""Every element-wise HLO op (unary, binary, compare, select, clamp,
convert, bitcast-convert) against a reference written out in numpy/Python,
for every element type the op allows, run through a real pjrtd (the
``cl`` client of conftest.py). test_ops_shapes.py and
test_ops_dot_reduce.py hold the other ops, test_ops_*.py the rest.

References follow XLA's semantics (its operation semantics page, and
hlo_harness.py), not numpy's where the two differ. Integer results and
exactly representable float results must match exactly; transcendental
functions may be off by a few units in the last place (ULPS).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np
import pytest

from hlo_harness import (ALL, BITS, FLOATS, INTS, INTS_S, INTS_U, NP_DTYPE,
                         NUMERIC, assert_floats_close, assert_same,
                         bf16_values, binary_hlo, float_array, float_bits,
                         int_array, int_range, ints, rng_for, round_array,
                         round_to_float, run1, sample, shape_str, small_ints,
                         total_order_key, unary_hlo, unsigned, wrap)

# Transcendental functions: allowed error in units in the last place.
ULPS = 4

# Compiler bugs these tests found, reported to the compiler's owner. The
# marks are strict: once a bug is fixed its test passes, pytest reports
# XPASS as a failure, and the entry must go.
KNOWN_COMPILER_BUGS: dict = {}


def cases(test: str, combinations) -> list:
    """Parameter sets for `test`, with known compiler bugs marked."""
    out = []
    for combination in combinations:
        reason = KNOWN_COMPILER_BUGS.get((test, *combination))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason \
            else []
        out.append(pytest.param(*combination, marks=marks))
    return out


# --- elementwise unary: floats -----------------------------------------------

def _sign(x: np.ndarray) -> np.ndarray:
    # XLA: sign(+-0) = +-0, sign(NaN) = NaN, else +-1.
    return np.where(np.isnan(x), np.nan,
                    np.where(x == 0, x, np.copysign(1.0, x)))


def _round_afz(x: np.ndarray) -> np.ndarray:
    # Half away from zero, computed exactly: trunc, then look at the
    # (exact) fractional part.
    t = np.trunc(x)
    frac = x - t
    return np.where(np.abs(frac) >= 0.5, t + np.copysign(1.0, x),
                    t) + 0.0 * x


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# op: (reference on float64, sampling interval, ulps, absolute error allowed
# in ulps of 1.0 for functions whose error is absolute near their zeros)
FLOAT_UNARY: dict[str, tuple[Callable, tuple[float, float], float, float]] = {
    "abs": (np.abs, (-8, 8), 0, 0),
    "negate": (np.negative, (-8, 8), 0, 0),
    "sign": (_sign, (-8, 8), 0, 0),
    "floor": (np.floor, (-8, 8), 0, 0),
    "ceil": (np.ceil, (-8, 8), 0, 0),
    "round-nearest-afz": (_round_afz, (-8, 8), 0, 0),
    "round-nearest-even": (np.rint, (-8, 8), 0, 0),
    "sqrt": (np.sqrt, (0, 100), 0, 0),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100), ULPS, 0),
    "cbrt": (np.cbrt, (-100, 100), ULPS, 0),
    "exponential": (np.exp, (-10, 10), ULPS, 0),
    "exponential-minus-one": (np.expm1, (-5, 5), ULPS, 0),
    "log": (np.log, (0.001, 1000), ULPS, 0),
    "log-plus-one": (np.log1p, (-0.99, 100), ULPS, 0),
    "tanh": (np.tanh, (-5, 5), ULPS, 0),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), (-10, 10), ULPS, 0),
    "sine": (np.sin, (-10, 10), ULPS, ULPS),
    "cosine": (np.cos, (-10, 10), ULPS, ULPS),
    "tan": (np.tan, (-1.5, 1.5), ULPS, ULPS),
    "erf": (_erf, (-3, 3), ULPS, ULPS),
}


def check_float_result(actual, expected64, ty, ulps, abs_ulps=0, what=""):
    """Compares with ``expected64`` (float64 values) rounded to ``ty``,
    within ``ulps`` of the result or, for functions whose error is absolute
    near their zeros, ``abs_ulps`` ulps of 1.0."""
    expected = round_array(np.asarray(expected64, np.float64), ty)
    assert_floats_close(actual, expected.astype(np.float64), ty, ulps, what,
                        abs_ulps_of_one=abs_ulps)


@pytest.mark.parametrize("op,ty", cases(
    "float_unary", [(op, ty) for op in sorted(FLOAT_UNARY) for ty in FLOATS]))
def test_float_unary(cl, op, ty):
    ref, (low, high), ulps, abs_ulps = FLOAT_UNARY[op]
    x = sample(ty, (4, 16), rng_for(op, ty), low, high)
    out = run1(cl, unary_hlo(op, ty, ty, x.shape), (ty, x))
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64))
    check_float_result(out, expected, ty, ulps, abs_ulps, f"{op} {ty}")


# Special values: exact results (op, input, expected).
FLOAT_SPECIALS = [
    ("abs", -0.0, 0.0), ("abs", -math.inf, math.inf),
    ("negate", 0.0, -0.0), ("negate", math.nan, math.nan),
    ("sign", -0.0, -0.0), ("sign", 0.0, 0.0), ("sign", math.nan, math.nan),
    ("sign", -math.inf, -1.0),
    ("floor", -0.5, -1.0), ("floor", -0.0, -0.0),
    ("ceil", -0.5, -0.0), ("ceil", 0.5, 1.0),
    ("round-nearest-afz", 0.5, 1.0), ("round-nearest-afz", -0.5, -1.0),
    ("round-nearest-afz", 2.5, 3.0), ("round-nearest-afz", -0.25, -0.0),
    ("round-nearest-even", 0.5, 0.0), ("round-nearest-even", 1.5, 2.0),
    ("round-nearest-even", 2.5, 2.0), ("round-nearest-even", -2.5, -2.0),
    ("round-nearest-even", -0.5, -0.0),
    ("sqrt", -1.0, math.nan), ("sqrt", -0.0, -0.0),
    ("sqrt", math.inf, math.inf),
    ("rsqrt", 0.0, math.inf), ("rsqrt", math.inf, 0.0), ("rsqrt", 4.0, 0.5),
    ("cbrt", -8.0, -2.0), ("cbrt", -math.inf, -math.inf),
    ("exponential", -math.inf, 0.0), ("exponential", math.inf, math.inf),
    ("exponential", math.nan, math.nan), ("exponential", 0.0, 1.0),
    ("exponential-minus-one", -math.inf, -1.0),
    ("exponential-minus-one", -0.0, -0.0),
    ("log", 0.0, -math.inf), ("log", -1.0, math.nan), ("log", 1.0, 0.0),
    ("log", math.inf, math.inf),
    ("log-plus-one", -1.0, -math.inf), ("log-plus-one", -0.0, -0.0),
    ("log-plus-one", -2.0, math.nan),
    ("tanh", math.inf, 1.0), ("tanh", -math.inf, -1.0), ("tanh", -0.0, -0.0),
    ("logistic", -math.inf, 0.0), ("logistic", math.inf, 1.0),
    ("logistic", 0.0, 0.5),
    ("sine", 0.0, 0.0), ("sine", -0.0, -0.0), ("sine", math.inf, math.nan),
    ("cosine", 0.0, 1.0), ("cosine", math.nan, math.nan),
    ("tan", -0.0, -0.0),
    ("erf", math.inf, 1.0), ("erf", -math.inf, -1.0), ("erf", 0.0, 0.0),
]


@pytest.mark.parametrize("ty", FLOATS)
@pytest.mark.parametrize("op", sorted({s[0] for s in FLOAT_SPECIALS}))
def test_float_unary_special_values(cl, op, ty):
    cases = [(x, e) for o, x, e in FLOAT_SPECIALS if o == op]
    x = float_array([c[0] for c in cases], ty)
    expected = np.array([c[1] for c in cases], dtype=np.float64)
    out = run1(cl, unary_hlo(op, ty, ty, x.shape), (ty, x))
    assert_floats_close(out, expected, ty, 0, f"{op} {ty} on {x.tolist()}")


@pytest.mark.parametrize("ty", FLOATS)
def test_is_finite(cl, ty):
    x = float_array([0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan,
                     -math.nan, 1e30], ty)
    out = run1(cl, unary_hlo("is-finite", ty, "pred", x.shape), (ty, x))
    assert_same(out, np.isfinite(x.astype(np.float64)), "pred",
                f"is-finite {ty}")


# --- elementwise unary: integers and pred ------------------------------------

def int_unary_ref(op: str, ty: str) -> Callable[[int], int]:
    bits = BITS[ty]
    signed = ty in INTS_S
    return {
        "abs": lambda v: wrap(abs(v), ty),  # abs(INT_MIN) = INT_MIN
        "negate": lambda v: wrap(-v, ty),
        "sign": lambda v: (v > 0) - (v < 0) if signed else int(v != 0),
        "not": lambda v: wrap(~v, ty),
        "popcnt": lambda v: bin(unsigned(v, bits)).count("1"),
        "count-leading-zeros": lambda v: bits - unsigned(v, bits).bit_length(),
    }[op]


def int_samples(ty: str, n: int, seed: object) -> np.ndarray:
    """Random integers plus the type's edges (min, max, 0, +-1)."""
    lo, hi = int_range(ty)
    edges = [lo, lo + 1, hi, hi - 1, 0, 1, wrap(-1, ty), 2]
    x = sample(ty, (n,), rng_for(seed))
    return np.concatenate([int_array(edges, ty), x])


@pytest.mark.parametrize("ty", INTS)
@pytest.mark.parametrize("op", ["abs", "negate", "sign", "not", "popcnt",
                                "count-leading-zeros"])
def test_integer_unary(cl, op, ty):
    x = int_samples(ty, 24, (op, ty))
    out = run1(cl, unary_hlo(op, ty, ty, x.shape), (ty, x))
    ref = int_unary_ref(op, ty)
    assert_same(out, int_array([ref(v) for v in ints(x)], ty), ty,
                f"{op} {ty} on {ints(x)}")


def test_not_of_pred_is_logical(cl):
    x = np.array([True, False, True, True, False])
    out = run1(cl, unary_hlo("not", "pred", "pred", x.shape), ("pred", x))
    assert_same(out, ~x, "pred", "not pred")


@pytest.mark.parametrize("ty", ALL)
def test_copy(cl, ty):
    x = sample(ty, (3, 5), rng_for("copy", ty))
    assert_same(run1(cl, unary_hlo("copy", ty, ty, x.shape), (ty, x)), x, ty,
                f"copy {ty}")


# --- elementwise binary ------------------------------------------------------

def int_binary_ref(op: str, ty: str) -> Callable[[int, int], int]:
    bits = BITS[ty]
    lo, hi = int_range(ty)
    signed = ty in INTS_S

    def divide(a: int, b: int) -> int:
        if b == 0:
            return wrap(-1, ty)           # x / 0 = -1 (all ones)
        if signed and a == lo and b == -1:
            return lo                     # INT_MIN / -1 = INT_MIN
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q   # rounds toward zero

    def remainder(a: int, b: int) -> int:
        if b == 0:
            return a                      # x % 0 = x
        if signed and a == lo and b == -1:
            return 0                      # INT_MIN % -1 = 0
        r = abs(a) % abs(b)
        return -r if a < 0 else r         # sign of the dividend

    def power(a: int, b: int) -> int:
        if signed and b < 0:
            return 1 if a == 1 else 0     # XLA: even for a base of -1
        return wrap(pow(a, b, 1 << bits), ty)

    def shift_left(a: int, b: int) -> int:
        n = unsigned(b, bits)
        return 0 if n >= bits else wrap(a << n, ty)

    def shift_right_logical(a: int, b: int) -> int:
        n = unsigned(b, bits)
        return 0 if n >= bits else wrap(unsigned(a, bits) >> n, ty)

    def shift_right_arithmetic(a: int, b: int) -> int:
        n = unsigned(b, bits)
        v = a if signed else (a - (1 << bits) if a > hi // 2 else a)
        return wrap(v >> min(n, bits - 1), ty)   # sign fill past the width

    return {
        "add": lambda a, b: wrap(a + b, ty),
        "subtract": lambda a, b: wrap(a - b, ty),
        "multiply": lambda a, b: wrap(a * b, ty),
        "divide": divide,
        "remainder": remainder,
        "power": power,
        "maximum": max,
        "minimum": min,
        "and": lambda a, b: wrap(a & b, ty),
        "or": lambda a, b: wrap(a | b, ty),
        "xor": lambda a, b: wrap(a ^ b, ty),
        "shift-left": shift_left,
        "shift-right-logical": shift_right_logical,
        "shift-right-arithmetic": shift_right_arithmetic,
    }[op]


INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "power",
              "maximum", "minimum", "and", "or", "xor", "shift-left",
              "shift-right-logical", "shift-right-arithmetic"]


def int_binary_operands(op: str, ty: str) -> tuple[np.ndarray, np.ndarray]:
    rng = rng_for(op, ty)
    lo, hi = int_range(ty)
    x = sample(ty, (40,), rng)
    y = sample(ty, (40,), rng)
    if op == "power":
        # Small bases and exponents (including negative ones) plus a few
        # that wrap.
        x = small_ints(ty, (40,), rng, -3, 3)
        y = small_ints(ty, (40,), rng, -2, 2 * BITS[ty])
    elif op.startswith("shift"):
        # Counts below, at and beyond the width, and "negative" ones.
        y = int_array([int(v) for v in rng.integers(0, BITS[ty] + 3,
                                                    size=36)]
                      + [BITS[ty], BITS[ty] + 1, wrap(-1, ty), hi], ty)
    elif op in ("divide", "remainder"):
        small = small_ints(ty, (20,), rng, -9, 9)
        y = np.concatenate([y[:20], small])
        edges_x = [lo, lo, 7, wrap(-7, ty), 0, hi]
        edges_y = [wrap(-1, ty), 0, 0, 2, 0, wrap(-1, ty)]
        x = np.concatenate([x[:-6], int_array(edges_x, ty)])
        y = np.concatenate([y[:-6], int_array(edges_y, ty)])
    return x, y


@pytest.mark.parametrize("ty", INTS)
@pytest.mark.parametrize("op", INT_BINARY)
def test_integer_binary(cl, op, ty):
    x, y = int_binary_operands(op, ty)
    out = run1(cl, binary_hlo(op, ty, ty, x.shape), (ty, x), (ty, y))
    ref = int_binary_ref(op, ty)
    expected = int_array([ref(a, b) for a, b in zip(ints(x), ints(y))], ty)
    assert_same(out, expected, ty,
                f"{op} {ty} on {list(zip(ints(x), ints(y)))}")


@pytest.mark.parametrize("op", ["and", "or", "xor", "maximum", "minimum"])
def test_pred_binary(cl, op):
    x = np.array([False, False, True, True])
    y = np.array([False, True, False, True])
    ref = {"and": x & y, "or": x | y, "xor": x ^ y, "maximum": x | y,
           "minimum": x & y}[op]
    out = run1(cl, binary_hlo(op, "pred", "pred", x.shape), ("pred", x),
               ("pred", y))
    assert_same(out, ref, "pred", f"{op} pred")


@pytest.mark.parametrize("ty", INTS_S)
def test_integer_division_edge_cases(cl, ty):
    lo, _ = int_range(ty)
    x = int_array([7, -7, 7, -7, 5, lo, lo, 0, -5], ty)
    y = int_array([2, 2, -2, -2, 0, -1, 0, 0, 0], ty)
    div = run1(cl, binary_hlo("divide", ty, ty, x.shape), (ty, x), (ty, y))
    rem = run1(cl, binary_hlo("remainder", ty, ty, x.shape), (ty, x), (ty, y))
    # Quotients round toward zero; x / 0 = -1; INT_MIN / -1 = INT_MIN.
    assert ints(div) == [3, -3, -3, 3, -1, lo, -1, -1, -1]
    # Remainders take the dividend's sign; x % 0 = x; INT_MIN % -1 = 0.
    assert ints(rem) == [1, -1, 1, -1, 5, 0, lo, 0, -5]


@pytest.mark.parametrize("ty", INTS_S)
def test_integer_power_with_negative_exponents(cl, ty):
    # As XLA computes it: x ** -n is 1 for x == 1 and 0 for every other x
    # (-1 included); 0 ** 0 is 1.
    x = int_array([1, -1, -1, 2, 0, 0, -2, 3], ty)
    y = int_array([-5, -1, -2, -1, 0, 3, 3, 0], ty)
    out = run1(cl, binary_hlo("power", ty, ty, x.shape), (ty, x), (ty, y))
    assert ints(out) == [1, 0, 0, 0, 1, 0, -8, 1]


@pytest.mark.parametrize("ty", INTS_U)
def test_unsigned_division_by_zero_is_all_ones(cl, ty):
    _, hi = int_range(ty)
    x = int_array([7, 0, hi], ty)
    y = int_array([0, 0, 0], ty)
    div = run1(cl, binary_hlo("divide", ty, ty, x.shape), (ty, x), (ty, y))
    rem = run1(cl, binary_hlo("remainder", ty, ty, x.shape), (ty, x), (ty, y))
    assert ints(div) == [hi, hi, hi]
    assert ints(rem) == [7, 0, hi]


@pytest.mark.parametrize("ty", INTS)
def test_shifts_at_or_beyond_the_width(cl, ty):
    bits = BITS[ty]
    lo, hi = int_range(ty)
    negative = lo if ty in INTS_S else 1 << (bits - 1)   # sign bit set
    x = int_array([negative, negative, negative, 5, 5, hi], ty)
    y = int_array([bits, bits + 5, wrap(-1, ty), bits, bits - 1, bits], ty)

    def go(op):
        return ints(run1(cl, binary_hlo(op, ty, ty, x.shape), (ty, x),
                         (ty, y)))
    assert go("shift-left") == [0, 0, 0, 0, wrap(5 << (bits - 1), ty), 0]
    assert go("shift-right-logical") == [0, 0, 0, 0, 0, 0]
    fill = wrap(-1, ty)  # the sign bit everywhere
    assert go("shift-right-arithmetic") == [fill, fill, fill, 0, 0,
                                            0 if ty in INTS_S else fill]


def exact_float_ref(op: str) -> Callable[[float, float], object]:
    """Exact results (Fraction) of the correctly rounded float ops."""
    return {
        "add": lambda a, b: Fraction(a) + Fraction(b),
        "subtract": lambda a, b: Fraction(a) - Fraction(b),
        "multiply": lambda a, b: Fraction(a) * Fraction(b),
        "divide": lambda a, b: Fraction(a) / Fraction(b),
    }[op]


@pytest.mark.parametrize("ty", FLOATS)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_float_arithmetic_is_correctly_rounded(cl, op, ty):
    rng = rng_for(op, ty)
    x = sample(ty, (48,), rng, -100, 100)
    y = sample(ty, (48,), rng, -100, 100)
    y[y == 0] = 1
    out = run1(cl, binary_hlo(op, ty, ty, x.shape), (ty, x), (ty, y))
    ref = exact_float_ref(op)
    expected = np.array([round_to_float(ref(float(a), float(b)), ty)
                         for a, b in zip(x.astype(np.float64),
                                         y.astype(np.float64))])
    assert_floats_close(out, expected, ty, 0, f"{op} {ty}")


@pytest.mark.parametrize("ty", FLOATS)
def test_float_remainder_is_fmod(cl, ty):
    rng = rng_for("fmod", ty)
    x = np.concatenate([sample(ty, (30,), rng, -50, 50),
                        float_array([5.5, -5.5, 5.5, -5.5, -0.0, 3.0, 1.0,
                                     math.inf], ty)])
    y = np.concatenate([sample(ty, (30,), rng, -7, 7),
                        float_array([2.0, 2.0, -2.0, -2.0, 3.0, 0.0, math.inf,
                                     2.0], ty)])
    out = run1(cl, binary_hlo("remainder", ty, ty, x.shape), (ty, x),
               (ty, y))
    # fmod is exact; the result has the dividend's sign (-5.5 % 2 = -1.5).
    expected = np.array([math.fmod(a, b) if b != 0 and not math.isinf(a)
                         else math.nan
                         for a, b in zip(x.astype(np.float64),
                                         y.astype(np.float64))])
    assert_floats_close(out, expected, ty, 0, f"remainder {ty}")
    assert list(out[30:34].astype(np.float64)) == [1.5, -1.5, 1.5, -1.5]


@pytest.mark.parametrize("ty", FLOATS)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_float_maximum_minimum_propagate_nan(cl, op, ty):
    rng = rng_for(op, ty)
    x = np.concatenate([sample(ty, (20,), rng),
                        float_array([math.nan, 1.0, math.nan, -math.inf,
                                     math.inf], ty)])
    y = np.concatenate([sample(ty, (20,), rng),
                        float_array([1.0, math.nan, math.nan, 3.0, -2.0],
                                    ty)])
    out = run1(cl, binary_hlo(op, ty, ty, x.shape), (ty, x), (ty, y))
    f = np.maximum if op == "maximum" else np.minimum   # numpy propagates NaN
    assert_floats_close(out, f(x.astype(np.float64), y.astype(np.float64)),
                        ty, 0, f"{op} {ty}")
    assert np.isnan(out[20:23]).all()


@pytest.mark.parametrize("ty", FLOATS)
def test_power(cl, ty):
    rng = rng_for("pow", ty)
    x = sample(ty, (40,), rng, 0.1, 4)
    y = sample(ty, (40,), rng, -3, 3)
    out = run1(cl, binary_hlo("power", ty, ty, x.shape), (ty, x), (ty, y))
    check_float_result(out, np.power(x.astype(np.float64),
                                     y.astype(np.float64)), ty, ULPS,
                       what=f"power {ty}")
    specials_x = float_array([2.0, 0.0, -8.0, -2.0, 1.0, math.nan], ty)
    specials_y = float_array([0.0, -1.0, 1 / 3, 3.0, math.nan, 0.0], ty)
    out = run1(cl, binary_hlo("power", ty, ty, specials_x.shape),
               (ty, specials_x), (ty, specials_y))
    assert_floats_close(out, [1.0, math.inf, math.nan, -8.0, 1.0, 1.0], ty, 0,
                        f"power {ty} special values")


@pytest.mark.parametrize("ty", FLOATS)
def test_atan2(cl, ty):
    rng = rng_for("atan2", ty)
    y = sample(ty, (40,), rng, -4, 4)
    x = sample(ty, (40,), rng, -4, 4)
    out = run1(cl, binary_hlo("atan2", ty, ty, y.shape), (ty, y), (ty, x))
    check_float_result(out, np.arctan2(y.astype(np.float64),
                                       x.astype(np.float64)), ty, ULPS,
                       what=f"atan2 {ty}")
    sy = float_array([0.0, -0.0, 1.0, -1.0, 0.0], ty)
    sx = float_array([-1.0, -1.0, 0.0, 0.0, 1.0], ty)
    out = run1(cl, binary_hlo("atan2", ty, ty, sy.shape), (ty, sy), (ty, sx))
    check_float_result(out, [math.pi, -math.pi, math.pi / 2, -math.pi / 2,
                             0.0], ty, 1, what=f"atan2 {ty} quadrants")


# --- compare, select, clamp --------------------------------------------------

DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less,
              "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal}


def compare_operands(ty: str) -> tuple[np.ndarray, np.ndarray]:
    """Pairs with many equalities (and NaNs and signed zeros for floats)."""
    rng = rng_for("compare", ty)
    if ty == "pred":
        x = np.array([False, False, True, True])
        y = np.array([False, True, False, True])
        return x, y
    if ty in INTS:
        lo, hi = int_range(ty)
        pool = int_array([lo, hi, 0, 1, wrap(-1, ty), 5], ty)
    else:
        pool = float_array([-math.inf, -1.5, -0.0, 0.0, 2.0, math.inf,
                            math.nan], ty)
    i = rng.integers(0, len(pool), size=60)
    j = rng.integers(0, len(pool), size=60)
    return pool[i], pool[j]


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_compare(cl, direction, ty):
    x, y = compare_operands(ty)
    out = run1(cl, binary_hlo("compare", ty, "pred", x.shape,
                              f", direction={direction}"), (ty, x), (ty, y))
    if ty in INTS:
        expected = DIRECTIONS[direction](np.array(ints(x), dtype=object),
                                         np.array(ints(y), dtype=object))
    else:
        # Partial order: NaN is unordered (only NE holds), -0 == +0.
        with np.errstate(invalid="ignore"):
            expected = DIRECTIONS[direction](x.astype(np.float64),
                                             y.astype(np.float64))
    assert_same(out, np.asarray(expected, dtype=np.bool_), "pred",
                f"compare {direction} {ty}")


def negative_nan(ty: str) -> np.ndarray:
    bits = {"f16": np.array([0xFE00], np.uint16),
            "bf16": np.array([0xFFC0], np.uint16),
            "f32": np.array([0xFFC00000], np.uint32),
            "f64": np.array([0xFFF8000000000000], np.uint64)}[ty]
    if ty == "bf16":
        return bf16_values(bits)
    return bits.view(NP_DTYPE[ty])


@pytest.mark.parametrize("ty", FLOATS)
@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_compare_total_order(cl, direction, ty):
    # -NaN < -inf < -1 < -0 < +0 < 1 < inf < NaN, every pair.
    values = np.concatenate([negative_nan(ty),
                             float_array([-math.inf, -1.0, -0.0, 0.0, 1.0,
                                          math.inf, math.nan], ty)])
    x = np.repeat(values, len(values))
    y = np.tile(values, len(values))
    out = run1(cl, binary_hlo("compare", ty, "pred", x.shape,
                              f", direction={direction}, type=TOTALORDER"),
               (ty, x), (ty, y))
    kx = np.array(total_order_key(x, ty), dtype=object)
    ky = np.array(total_order_key(y, ty), dtype=object)
    assert_same(out, np.asarray(DIRECTIONS[direction](kx, ky), np.bool_),
                "pred", f"compare {direction} TOTALORDER {ty}")
    # The ranks are the positions in `values`.
    assert sorted(range(len(values)),
                  key=lambda i: total_order_key(values, ty)[i]) == list(
                      range(len(values)))


@pytest.mark.parametrize("ty", ALL)
def test_select(cl, ty):
    rng = rng_for("select", ty)
    p = rng.integers(0, 2, size=(3, 7)).astype(np.bool_)
    a = sample(ty, (3, 7), rng)
    b = sample(ty, (3, 7), rng)
    hlo = f"""HloModule select_{ty}

ENTRY main {{
  p = pred[3,7] parameter(0)
  a = {ty}[3,7] parameter(1)
  b = {ty}[3,7] parameter(2)
  ROOT r = {ty}[3,7] select(p, a, b)
}}
"""
    out = run1(cl, hlo, ("pred", p), (ty, a), (ty, b))
    assert_same(out, np.where(p, a, b), ty, f"select {ty}")


@pytest.mark.parametrize("ty", NUMERIC)
@pytest.mark.parametrize("bounds", ["scalar", "array"])
def test_clamp(cl, ty, bounds):
    rng = rng_for("clamp", ty, bounds)
    x = small_ints(ty, (20,), rng, -9, 9) if ty in INTS else sample(
        ty, (20,), rng)
    if bounds == "scalar":
        lo = np.array(1 if ty in INTS_U else -2, dtype=NP_DTYPE[ty])
        hi = np.array(5, dtype=NP_DTYPE[ty])
        bshape = ()
    else:
        lo = small_ints(ty, (20,), rng, -5, 0)
        hi = small_ints(ty, (20,), rng, 1, 5)
        bshape = (20,)
    hlo = f"""HloModule clamp_{ty}

ENTRY main {{
  lo = {shape_str(ty, bshape)} parameter(0)
  x = {ty}[20] parameter(1)
  hi = {shape_str(ty, bshape)} parameter(2)
  ROOT r = {ty}[20] clamp(lo, x, hi)
}}
"""
    out = run1(cl, hlo, (ty, lo), (ty, x), (ty, hi))
    expected = np.minimum(np.maximum(x, lo), hi)
    assert_same(out, expected, ty, f"clamp {ty}")


# --- convert and bitcast-convert ---------------------------------------------

def convert_sources(ty: str) -> np.ndarray:
    """Values of ``ty`` that exercise every target: signs, fractions, ties,
    the edges of each integer range, overflow, NaN and infinities."""
    if ty == "pred":
        return np.array([False, True, True, False])
    if ty in INTS:
        lo, hi = int_range(ty)
        values = [0, 1, -1, lo, hi, 127, 128, -128, -129, 255, 256, 32767,
                  32768, 65504, 65520, 65535, 65536, (1 << 24) + 1,
                  (1 << 31) - 1, 1 << 31, (1 << 53) + 1, -(1 << 63),
                  (1 << 64) - 1, 12345678901]
        return int_array(values, ty)
    values = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 100.9, -100.9,
              127.9, 128.0, -128.5, -129.0, 255.5, 256.0, 65504.0, 65520.0,
              -65536.0, 1e10, -1e10, 3e38, -3e38, 1e300, 1 + 2 ** -9,
              1 + 3 * 2 ** -12, 5.96e-8, 1e-40, math.inf, -math.inf,
              math.nan]
    return float_array(values, ty)


def convert_ref(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """XLA's convert, element by element."""
    out: list = []
    for v in x.reshape(-1).tolist():
        if src == "pred":
            v = int(v)
        if dst == "pred":
            out.append(v != 0)          # NaN != 0: true
        elif dst in INTS:
            if isinstance(v, float):
                lo, hi = int_range(dst)
                if math.isnan(v):
                    out.append(0)       # NaN -> 0
                elif math.isinf(v):
                    out.append(lo if v < 0 else hi)
                else:
                    out.append(min(max(math.trunc(v), lo), hi))  # saturate
            else:
                out.append(wrap(int(v), dst))  # integers wrap
        else:
            out.append(round_to_float(v, dst))  # correctly rounded
    if dst == "pred":
        return np.array(out, dtype=np.bool_).reshape(x.shape)
    if dst in INTS:
        return int_array(out, dst, x.shape)
    return np.array(out, dtype=np.float64).reshape(x.shape)


@pytest.mark.parametrize("dst", ALL)
@pytest.mark.parametrize("src", ALL)
def test_convert(cl, src, dst):
    x = convert_sources(src)
    out = run1(cl, unary_hlo("convert", src, dst, x.shape), (src, x))
    expected = convert_ref(x, src, dst)
    assert_same(out, expected, dst,
                f"convert {src} -> {dst} of {x.tolist()}")


@pytest.mark.parametrize("ty", INTS)
@pytest.mark.parametrize("src", FLOATS)
def test_convert_float_to_int_saturates_and_maps_nan_to_zero(cl, src, ty):
    lo, hi = int_range(ty)
    x = float_array([math.nan, -math.nan, math.inf, -math.inf, 1e30, -1e30,
                     -0.9, 0.9, -7.5], src)
    out = run1(cl, unary_hlo("convert", src, ty, x.shape), (src, x))
    # NaN -> 0; out of range (1e30 is infinite in f16) -> the nearest end;
    # in range -> truncated toward zero.
    tail = [0, 0, -7 if ty in INTS_S else 0]
    assert ints(out) == [0, 0, hi, lo, hi, lo] + tail


def test_convert_to_narrow_floats_rounds_to_nearest_even(cl):
    # f32 values at and around the halfway points of bf16 and f16.
    tie_bf16 = [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20]
    tie_f16 = [1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20,
               65520.0, 65519.0]
    x = float_array(tie_bf16 + tie_f16, "f32")
    to_bf16 = run1(cl, unary_hlo("convert", "f32", "bf16", x.shape),
                   ("f32", x))
    to_f16 = run1(cl, unary_hlo("convert", "f32", "f16", x.shape), ("f32", x))
    assert to_bf16[:3].tolist() == [1.0, 1 + 2 ** -6, 1 + 2 ** -7]
    assert to_f16[3:].astype(np.float64).tolist() == [
        1.0, 1 + 2 ** -9, 1 + 2 ** -10, math.inf, 65504.0]


BITCAST_GROUPS = [["s8", "u8"], ["s16", "u16", "f16", "bf16"],
                  ["s32", "u32", "f32"], ["s64", "u64", "f64"]]
BITCAST_PAIRS = [(a, b) for g in BITCAST_GROUPS for a in g for b in g]


@pytest.mark.parametrize("src,dst", cases("bitcast", BITCAST_PAIRS))
def test_bitcast_convert_same_width(cl, src, dst):
    rng = rng_for("bitcast", src, dst)
    bits = BITS[src]
    raw = rng.integers(0, 1 << bits, size=16, dtype=np.uint64,
                       endpoint=False) if bits < 64 else rng.integers(
                           0, np.iinfo(np.uint64).max, size=16,
                           dtype=np.uint64)
    pattern = raw.astype({8: np.uint8, 16: np.uint16, 32: np.uint32,
                          64: np.uint64}[bits])
    if src == "bf16":
        x = bf16_values(pattern)
    else:
        x = pattern.view(NP_DTYPE[src])
    out = run1(cl, unary_hlo("bitcast-convert", src, dst, x.shape), (src, x))
    got = float_bits(out, dst) if dst in FLOATS else out.view(pattern.dtype)
    # Every bit survives, NaN payloads included.
    np.testing.assert_array_equal(got, pattern)
