"""Every supported HLO op against a reference written out in numpy/Python,
for every element type the op allows, run through a real pjrtd.

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

import pjrt_client
from hlo_harness import (ALL, BITS, FLOATS, INTS, INTS_S, INTS_U, NP_DTYPE,
                         NUMERIC, assert_floats_close, assert_same,
                         bf16_values, float_array, float_bits, int_array,
                         int_range, ints, round_array, round_to_float, run,
                         sample, shape_str, small_ints, total_order_key,
                         unsigned, wrap)

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


@pytest.fixture(scope="module")
def cl(daemon):
    """One client for the whole module, over the unix socket."""
    with pjrt_client.connect(daemon.addresses[0],
                             client_name="test_ops") as c:
        yield c


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


# --- shapes and data movement ------------------------------------------------

@pytest.mark.parametrize("ty", NUMERIC)
@pytest.mark.parametrize("dim", [0, 1])
def test_iota(cl, ty, dim):
    hlo = f"""HloModule iota_{ty}

ENTRY main {{
  ROOT r = {ty}[5,7] iota(), iota_dimension={dim}
}}
"""
    out = run1(cl, hlo)
    expected = np.indices((5, 7))[dim]
    assert_same(out, expected.astype(NP_DTYPE[ty]), ty, f"iota {ty}")


BROADCASTS = [
    # (operand shape, output shape, dimensions)
    ((), (2, 3), ()),
    ((3,), (2, 3, 4), (1,)),
    ((2, 4), (2, 3, 4), (0, 2)),
    ((4,), (4, 3), (0,)),
    ((2, 3), (2, 5, 3, 1), (0, 2)),
]


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("case", range(len(BROADCASTS)))
def test_broadcast_maps_operand_dimensions(cl, ty, case):
    in_shape, out_shape, dims = BROADCASTS[case]
    x = sample(ty, in_shape, rng_for("broadcast", ty, case))
    hlo = f"""HloModule broadcast_{ty}

ENTRY main {{
  x = {shape_str(ty, in_shape)} parameter(0)
  ROOT r = {shape_str(ty, out_shape)} broadcast(x), {dims_attr(dims)}
}}
"""
    out = run1(cl, hlo, (ty, x))
    # Operand dimension i becomes output dimension dims[i]; the rest repeat.
    view = [1] * len(out_shape)
    for i, d in enumerate(dims):
        view[d] = in_shape[i]
    expected = np.broadcast_to(x.reshape(view), out_shape)
    assert_same(out, expected, ty, f"broadcast {in_shape}->{out_shape}")


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4, 6)), ((2, 3, 4), (24,)),
                                    ((2, 3, 4), (4, 3, 2)), ((1, 1), ()),
                                    ((), (1, 1, 1))])
def test_reshape(cl, ty, shapes):
    in_shape, out_shape = shapes
    x = sample(ty, in_shape, rng_for("reshape", ty, shapes))
    hlo = f"""HloModule reshape_{ty}

ENTRY main {{
  x = {shape_str(ty, in_shape)} parameter(0)
  ROOT r = {shape_str(ty, out_shape)} reshape(x)
}}
"""
    assert_same(run1(cl, hlo, (ty, x)), x.reshape(out_shape), ty, "reshape")


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("perm", [(2, 0, 1), (1, 0, 2), (0, 2, 1),
                                  (2, 1, 0)])
def test_transpose(cl, ty, perm):
    x = sample(ty, (2, 3, 4), rng_for("transpose", ty, perm))
    expected = np.transpose(x, perm)
    hlo = f"""HloModule transpose_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  ROOT r = {shape_str(ty, expected.shape)} transpose(x), {dims_attr(perm)}
}}
"""
    assert_same(run1(cl, hlo, (ty, x)), expected, ty, f"transpose {perm}")


@pytest.mark.parametrize("ty", ALL)
def test_slice_with_strides(cl, ty):
    x = sample(ty, (7, 9), rng_for("slice", ty))
    expected = x[1:6:2, 0:9:4]
    hlo = f"""HloModule slice_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  ROOT r = {shape_str(ty, expected.shape)} slice(x), slice={{[1:6:2], [0:9:4]}}
}}
"""
    assert_same(run1(cl, hlo, (ty, x)), expected, ty, "slice")


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("dim", [0, 1])
def test_concatenate(cl, ty, dim):
    rng = rng_for("concatenate", ty, dim)
    if dim == 1:
        shapes = [(2, 3), (2, 1), (2, 4)]
    else:
        shapes = [(2, 3), (1, 3), (4, 3)]
    parts = [sample(ty, s, rng) for s in shapes]
    expected = np.concatenate(parts, axis=dim)
    hlo = f"""HloModule concatenate_{ty}

ENTRY main {{
  a = {shape_str(ty, shapes[0])} parameter(0)
  b = {shape_str(ty, shapes[1])} parameter(1)
  c = {shape_str(ty, shapes[2])} parameter(2)
  ROOT r = {shape_str(ty, expected.shape)} concatenate(a, b, c),
    {dims_attr([dim])}
}}
"""
    out = run1(cl, hlo, *[(ty, p) for p in parts])
    assert_same(out, expected, ty, f"concatenate dim {dim}")


def pad_ref(x: np.ndarray, value, config) -> np.ndarray:
    """XLA's pad: interior padding first, then edge padding (negative
    crops)."""
    out = x
    for dim, (low, high, interior) in enumerate(config):
        n = out.shape[dim]
        size = n + max(n - 1, 0) * interior
        shape = list(out.shape)
        shape[dim] = size
        spread = np.full(shape, value, dtype=x.dtype)
        index = [slice(None)] * out.ndim
        index[dim] = slice(0, size, interior + 1)
        spread[tuple(index)] = out
        # Edges: positive adds, negative removes.
        before = list(spread.shape)
        before[dim] = max(low, 0)
        after = list(spread.shape)
        after[dim] = max(high, 0)
        spread = np.concatenate([np.full(before, value, dtype=x.dtype),
                                 spread,
                                 np.full(after, value, dtype=x.dtype)],
                                axis=dim)
        crop = [slice(None)] * out.ndim
        crop[dim] = slice(max(-low, 0), spread.shape[dim] - max(-high, 0))
        out = spread[tuple(crop)]
    return out


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("config", [((1, 2, 0), (0, 0, 1)),
                                    ((-1, 1, 1), (2, -2, 0)),
                                    ((0, -1, 2), (-1, -1, 1))])
def test_pad_negative_and_interior(cl, ty, config):
    rng = rng_for("pad", ty, config)
    x = sample(ty, (3, 4), rng)
    value = sample(ty, (), rng)
    expected = pad_ref(x, value, config)
    spec = "x".join(f"{lo}_{hi}_{inner}" for lo, hi, inner in config)
    hlo = f"""HloModule pad_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  v = {ty}[] parameter(1)
  ROOT r = {shape_str(ty, expected.shape)} pad(x, v), padding={spec}
}}
"""
    out = run1(cl, hlo, (ty, x), (ty, value))
    assert_same(out, expected, ty, f"pad {spec}")


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
def test_reverse(cl, ty, dims):
    x = sample(ty, (3, 5), rng_for("reverse", ty, dims))
    hlo = f"""HloModule reverse_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  ROOT r = {shape_str(ty, x.shape)} reverse(x), {dims_attr(dims)}
}}
"""
    assert_same(run1(cl, hlo, (ty, x)), np.flip(x, dims), ty,
                f"reverse {dims}")


# Start indices, including ones that must be clamped into range.
DYNAMIC_STARTS = [(0, 0), (1, 2), (3, 4), (-5, 1), (9, 100), (2, -1)]


@pytest.mark.parametrize("ty", ALL)
@pytest.mark.parametrize("index_ty", ["s32", "s64", "u32"])
def test_dynamic_slice_clamps_start_indices(cl, ty, index_ty):
    x = sample(ty, (5, 7), rng_for("dynamic-slice", ty))
    hlo = f"""HloModule dynamic_slice_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  i = {index_ty}[] parameter(1)
  j = {index_ty}[] parameter(2)
  ROOT r = {ty}[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={{2,3}}
}}
"""
    for i, j in DYNAMIC_STARTS:
        if index_ty.startswith("u") and (i < 0 or j < 0):
            continue
        out = run1(cl, hlo, (ty, x), (index_ty, np.array(i)),
                   (index_ty, np.array(j)))
        ci, cj = min(max(i, 0), 5 - 2), min(max(j, 0), 7 - 3)
        assert_same(out, x[ci:ci + 2, cj:cj + 3], ty,
                    f"dynamic-slice at ({i}, {j})")


@pytest.mark.parametrize("ty", ALL)
def test_dynamic_update_slice_clamps_start_indices(cl, ty):
    rng = rng_for("dynamic-update-slice", ty)
    x = sample(ty, (5, 7), rng)
    update = sample(ty, (2, 3), rng)
    hlo = f"""HloModule dynamic_update_slice_{ty}

ENTRY main {{
  x = {shape_str(ty, x.shape)} parameter(0)
  u = {ty}[2,3] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = {shape_str(ty, x.shape)} dynamic-update-slice(x, u, i, j)
}}
"""
    for i, j in DYNAMIC_STARTS:
        out = run1(cl, hlo, (ty, x), (ty, update), ("s32", np.array(i)),
                   ("s32", np.array(j)))
        ci, cj = min(max(i, 0), 5 - 2), min(max(j, 0), 7 - 3)
        expected = x.copy()
        expected[ci:ci + 2, cj:cj + 3] = update
        assert_same(out, expected, ty, f"dynamic-update-slice at ({i}, {j})")


@pytest.mark.parametrize("ty", ALL)
def test_tuple_and_get_tuple_element(cl, ty):
    rng = rng_for("tuple", ty)
    x = sample(ty, (2, 3), rng)
    y = np.array(17, dtype=np.int32)
    s = shape_str(ty, (2, 3))
    hlo = f"""HloModule tuples_{ty}

ENTRY main {{
  x = {s} parameter(0)
  y = s32[] parameter(1)
  t = ({s}, s32[]) tuple(x, y)
  n = (({s}, s32[]), {s}) tuple(t, x)
  a = ({s}, s32[]) get-tuple-element(n), index=0
  b = {s} get-tuple-element(a), index=0
  c = s32[] get-tuple-element(t), index=1
  ROOT r = (({s}, s32[]), s32[], {s}) tuple(a, c, b)
}}
"""
    # A nested tuple root: results are flattened in order.
    outs = run(cl, hlo, [(ty, x), ("s32", y)])
    assert len(outs) == 4
    assert_same(outs[0], x, ty, "tuple element 0.0")
    assert int(outs[1]) == 17 and int(outs[2]) == 17
    assert_same(outs[3], x, ty, "tuple element 2")


@pytest.mark.parametrize("ty", ALL)
def test_call(cl, ty):
    rng = rng_for("call", ty)
    x = sample(ty, (4,), rng)
    y = sample(ty, (4,), rng)
    s = shape_str(ty, (4,))
    hlo = f"""HloModule call_{ty}

swap {{
  a = {s} parameter(0)
  b = {s} parameter(1)
  ROOT t = ({s}, {s}) tuple(b, a)
}}

pick {{
  p = pred[4] parameter(0)
  a = {s} parameter(1)
  b = {s} parameter(2)
  swapped = ({s}, {s}) call(a, b), to_apply=swap
  first = {s} get-tuple-element(swapped), index=0
  ROOT r = {s} select(p, first, a)
}}

ENTRY main {{
  p = pred[4] parameter(0)
  x = {s} parameter(1)
  y = {s} parameter(2)
  ROOT r = {s} call(p, x, y), to_apply=pick
}}
"""
    p = np.array([True, False, True, False])
    out = run1(cl, hlo, ("pred", p), (ty, x), (ty, y))
    assert_same(out, np.where(p, y, x), ty, "call")


@pytest.mark.parametrize("ty", ALL)
def test_opt_barrier_is_identity(cl, ty):
    x = sample(ty, (3, 2), rng_for("opt-barrier", ty))
    s = shape_str(ty, x.shape)
    hlo = f"""HloModule opt_barrier_{ty}

ENTRY main {{
  x = {s} parameter(0)
  y = s32[] parameter(1)
  t = ({s}, s32[]) tuple(x, y)
  b = ({s}, s32[]) opt-barrier(t)
  ROOT r = {s} get-tuple-element(b), index=0
}}
"""
    out = run1(cl, hlo, (ty, x), ("s32", np.array(3, np.int32)))
    assert_same(out, x, ty, "opt-barrier")


@pytest.mark.parametrize("ty", ALL)
def test_custom_call_sharding_is_identity(cl, ty):
    x = sample(ty, (4, 2), rng_for("sharding", ty))
    s = shape_str(ty, x.shape)
    hlo = f"""HloModule sharding_{ty}

ENTRY main {{
  x = {s} parameter(0)
  ROOT r = {s} custom-call(x), custom_call_target="Sharding",
    sharding={{replicated}}
}}
"""
    assert_same(run1(cl, hlo, (ty, x)), x, ty, "Sharding custom-call")


# --- dot ---------------------------------------------------------------------

# (lhs shape, rhs shape, lhs batch, lhs contracting, rhs batch,
#  rhs contracting)
DOTS = [
    ((3, 4), (4, 5), (), (1,), (), (0,)),                 # matrix product
    ((4,), (4,), (), (0,), (), (0,)),                     # inner product
    ((3, 4), (4,), (), (1,), (), (0,)),                   # matrix-vector
    ((4, 3), (5, 4), (), (0,), (), (1,)),                 # transposed both
    ((2, 3, 4), (2, 4, 5), (0,), (2,), (0,), (1,)),       # batched
    ((3, 2, 4), (4, 2, 5), (1,), (2,), (1,), (0,)),       # batch in middle
    ((2, 3, 4, 2), (2, 4, 2, 5), (0,), (2, 3), (0,), (1, 2)),  # 2 contracted
    ((2, 6, 3), (3, 2, 7), (0,), (2,), (1,), (0,)),       # free dims after
]


def dot_ref(lhs: np.ndarray, rhs: np.ndarray, lb, lc, rb, rc) -> np.ndarray:
    """Result dimensions: batch, then lhs free, then rhs free."""
    letters = iter("abcdefghijklmnop")
    lhs_sub = [next(letters) for _ in lhs.shape]
    rhs_sub = [None] * rhs.ndim
    for lb_i, rb_i in zip(lb, rb):
        rhs_sub[rb_i] = lhs_sub[lb_i]
    for lc_i, rc_i in zip(lc, rc):
        rhs_sub[rc_i] = lhs_sub[lc_i]
    rhs_sub = [s or next(letters) for s in rhs_sub]
    out = ([lhs_sub[i] for i in lb]
           + [s for i, s in enumerate(lhs_sub) if i not in lb and i not in lc]
           + [s for i, s in enumerate(rhs_sub) if i not in rb and i not in rc])
    spec = f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}"
    return np.einsum(spec, lhs, rhs)


def dot_hlo(in_ty: str, out_ty: str, case) -> tuple[str, tuple[int, ...]]:
    ls, rs, lb, lc, rb, rc = case
    out_shape = dot_ref(np.zeros(ls), np.zeros(rs), lb, lc, rb, rc).shape

    def dims(d):
        return ",".join(map(str, d))
    attrs = (f"lhs_batch_dims={{{dims(lb)}}}, "
             f"lhs_contracting_dims={{{dims(lc)}}}, "
             f"rhs_batch_dims={{{dims(rb)}}}, "
             f"rhs_contracting_dims={{{dims(rc)}}}")
    if not lb:
        attrs = (f"lhs_contracting_dims={{{dims(lc)}}}, "
                 f"rhs_contracting_dims={{{dims(rc)}}}")
    hlo = f"""HloModule dot_{in_ty}_{out_ty}

ENTRY main {{
  a = {shape_str(in_ty, ls)} parameter(0)
  b = {shape_str(in_ty, rs)} parameter(1)
  ROOT r = {shape_str(out_ty, out_shape)} dot(a, b), {attrs}
}}
"""
    return hlo, out_shape


@pytest.mark.parametrize("ty", NUMERIC)
@pytest.mark.parametrize("case", range(len(DOTS)))
def test_dot_general(cl, ty, case):
    # Small integers: every product and partial sum is exact in every type,
    # so the result does not depend on the order of accumulation.
    rng = rng_for("dot", ty, case)
    ls, rs = DOTS[case][0], DOTS[case][1]
    a = small_ints(ty, ls, rng, -3, 3)
    b = small_ints(ty, rs, rng, -3, 3)
    hlo, out_shape = dot_hlo(ty, ty, DOTS[case])
    out = run1(cl, hlo, (ty, a), (ty, b))
    expected = dot_ref(a.astype(np.int64), b.astype(np.int64), *DOTS[case][2:])
    assert out.shape == out_shape
    if ty in INTS:
        expected = int_array(ints(expected), ty, out_shape)
    assert_same(out, expected.astype(np.float64) if ty in FLOATS else expected,
                ty, f"dot {ty} {DOTS[case]}")


def test_dot_output_dimension_order(cl):
    # lhs [b=2, m=3, k=4] x rhs [k=4, b=2, n=5] -> [b, m, n], with distinct
    # sizes so that any other order would have another shape.
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(40, dtype=np.float32).reshape(4, 2, 5)
    hlo = """HloModule dot_order

ENTRY main {
  a = f32[2,3,4] parameter(0)
  b = f32[4,2,5] parameter(1)
  ROOT r = f32[2,3,5] dot(a, b), lhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={0}
}
"""
    out = run1(cl, hlo, ("f32", a), ("f32", b))
    expected = np.einsum("bmk,kbn->bmn", a.astype(np.float64),
                         b.astype(np.float64))
    assert_same(out, expected, "f32", "dot batch/lhs/rhs order")


@pytest.mark.parametrize("in_ty", ["bf16", "f16"])
@pytest.mark.parametrize("case", [0, 4, 6])
def test_dot_mixed_precision_accumulates_in_f32(cl, in_ty, case):
    rng = rng_for("dot-mixed", in_ty, case)
    ls, rs = DOTS[case][0], DOTS[case][1]
    a = sample(in_ty, ls, rng, -2, 2)
    b = sample(in_ty, rs, rng, -2, 2)
    hlo, _ = dot_hlo(in_ty, "f32", DOTS[case])
    out = run1(cl, hlo, (in_ty, a), (in_ty, b))
    assert out.dtype == np.float32
    exact = dot_ref(a.astype(np.float64), b.astype(np.float64),
                    *DOTS[case][2:])
    # Products of two 8- or 11-bit values are exact in f32; only the f32
    # additions round: bound the error by the magnitudes summed.
    scale = dot_ref(np.abs(a.astype(np.float64)),
                    np.abs(b.astype(np.float64)), *DOTS[case][2:])
    k = np.prod([ls[i] for i in DOTS[case][3]])
    assert np.all(np.abs(out - exact) <= k * 2 ** -24 * scale), (out, exact)
    # Accumulating in bf16/f16 instead would lose these bits.
    assert not np.array_equal(out, round_array(exact, in_ty).astype(
        np.float32)) or np.array_equal(exact, round_array(exact, in_ty))


def test_dot_s8_into_s32(cl):
    rng = rng_for("dot-s8")
    a = sample("s8", (3, 16), rng)
    b = sample("s8", (16, 2), rng)
    hlo = """HloModule dot_s8

ENTRY main {
  a = s8[3,16] parameter(0)
  b = s8[16,2] parameter(1)
  ROOT r = s32[3,2] dot(a, b), lhs_contracting_dims={1},
    rhs_contracting_dims={0}
}
"""
    out = run1(cl, hlo, ("s8", a), ("s8", b))
    assert_same(out, a.astype(np.int64) @ b.astype(np.int64), "s32",
                "dot s8 -> s32")


# --- reduce ------------------------------------------------------------------

REDUCE_DIMS = [(0,), (2,), (1,), (0, 2), (0, 1, 2)]


def reduce_hlo(op: str, ty: str, dims, in_shape=(3, 4, 5)) -> str:
    out_shape = tuple(d for i, d in enumerate(in_shape) if i not in dims)
    return f"""HloModule reduce_{op}_{ty}

region_{op} {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT r = {ty}[] {op}(a, b)
}}

ENTRY main {{
  x = {shape_str(ty, in_shape)} parameter(0)
  init = {ty}[] parameter(1)
  ROOT r = {shape_str(ty, out_shape)} reduce(x, init), {dims_attr(dims)},
    to_apply=region_{op}
}}
"""


REDUCERS = {
    # op: (numpy reduction, identity, types)
    "add": (np.sum, 0, NUMERIC),
    "multiply": (np.prod, 1, NUMERIC),
    "maximum": (np.max, None, NUMERIC),
    "minimum": (np.min, None, NUMERIC),
    "and": (np.bitwise_and.reduce, None, ["pred"] + INTS),
    "or": (np.bitwise_or.reduce, None, ["pred"] + INTS),
}
REDUCE_CASES = [(op, ty) for op, (_, _, tys) in REDUCERS.items()
                for ty in tys]


def reduce_identity(op: str, ty: str):
    if op in ("add", "or"):
        return False if ty == "pred" else 0
    if op in ("multiply",):
        return 1
    if op == "and":
        return True if ty == "pred" else wrap(-1, ty)
    if ty in INTS:
        lo, hi = int_range(ty)
        return lo if op == "maximum" else hi
    return -math.inf if op == "maximum" else math.inf


@pytest.mark.parametrize("dims", REDUCE_DIMS)
@pytest.mark.parametrize("op,ty", REDUCE_CASES)
def test_reduce(cl, op, ty, dims):
    rng = rng_for("reduce", op, ty, dims)
    if ty in FLOATS and op in ("add", "multiply"):
        # Exact in every order: small integers (sums), +-1 and +-2 with
        # few factors (products).
        x = small_ints(ty, (3, 4, 5), rng, -3, 3) if op == "add" else \
            rng.choice([-1.0, 1.0, 1.0, 2.0, -2.0, 1.0, 1.0, 1.0],
                       size=(3, 4, 5)).astype(NP_DTYPE[ty])
        if op == "multiply" and ty == "f16":
            x = np.clip(x, -1, 1)  # 2**60 would overflow f16
    else:
        x = sample(ty, (3, 4, 5), rng)   # integers wrap: order is free
    init = np.array(reduce_identity(op, ty), dtype=NP_DTYPE[ty])
    out = run1(cl, reduce_hlo(op, ty, dims), (ty, x), (ty, init))
    numpy_reduce = REDUCERS[op][0]
    if ty in INTS and op in ("add", "multiply"):
        # Python integers, wrapped once at the end (wrapping commutes).
        flat = np.array(x.astype(object))
        expected = np.apply_over_axes(
            lambda a, axis: np.expand_dims(
                (np.sum if op == "add" else np.prod)(a, axis=axis), axis),
            flat, dims)
        expected = int_array([int(v) for v in expected.reshape(-1)], ty,
                             out.shape)
    else:
        expected = numpy_reduce(x, axis=dims)
    assert_same(out, np.asarray(expected).reshape(out.shape), ty,
                f"reduce {op} {ty} over {dims}")


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("ty", FLOATS)
def test_reduce_max_min_propagate_nan(cl, op, ty):
    x = float_array([1.0, math.nan, 3.0, -1.0, 2.0, 5.0], ty, (2, 3))
    init = np.array(reduce_identity(op, ty), dtype=NP_DTYPE[ty])
    out = run1(cl, reduce_hlo(op, ty, (1,), (2, 3)), (ty, x), (ty, init))
    f = np.max if op == "maximum" else np.min
    assert_floats_close(out, f(x.astype(np.float64), axis=1), ty, 0,
                        f"reduce {op} {ty}")


@pytest.mark.parametrize("ty", ["f32", "bf16", "s32", "f64"])
def test_variadic_reduce_argmax(cl, ty):
    # Ties go to the smaller index, as jnp.argmax does.
    rng = rng_for("argmax", ty)
    x = small_ints(ty, (4, 6), rng, -3, 3)
    lowest = "-inf" if ty in FLOATS else str(int_range(ty)[0])
    hlo = f"""HloModule argmax_{ty}

argmax_region {{
  a_v = {ty}[] parameter(0)
  a_i = s32[] parameter(1)
  b_v = {ty}[] parameter(2)
  b_i = s32[] parameter(3)
  gt = pred[] compare(a_v, b_v), direction=GT
  eq = pred[] compare(a_v, b_v), direction=EQ
  lt_i = pred[] compare(a_i, b_i), direction=LT
  tie = pred[] and(eq, lt_i)
  take_a = pred[] or(gt, tie)
  v = {ty}[] select(take_a, a_v, b_v)
  i = s32[] select(take_a, a_i, b_i)
  ROOT t = ({ty}[], s32[]) tuple(v, i)
}}

ENTRY main {{
  x = {ty}[4,6] parameter(0)
  idx = s32[4,6] iota(), iota_dimension=1
  lowest = {ty}[] constant({lowest})
  zero = s32[] constant(0)
  ROOT r = ({ty}[4], s32[4]) reduce(x, idx, lowest, zero), dimensions={{1}},
    to_apply=argmax_region
}}
"""
    values, indices = run(cl, hlo, [(ty, x)])
    assert_same(values, x.max(axis=1), ty, "argmax values")
    assert ints(indices) == ints(np.argmax(x, axis=1))


# --- reduce-precision --------------------------------------------------------

def reduce_precision_ref(x: np.ndarray, ty: str, exponent_bits: int,
                         mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision on the bits: round the mantissa to nearest
    even, then flush exponents below the reduced range to signed zero and
    above it to signed infinity; NaN stays NaN."""
    width = BITS[ty]
    src_mantissa = {"f32": 23, "f64": 52}[ty]
    src_exponent = {"f32": 8, "f64": 11}[ty]
    mask = (1 << width) - 1
    out = []
    for b in ints(float_bits(x, ty)):
        if mantissa_bits < src_mantissa:
            shift = src_mantissa - mantissa_bits
            last = 1 << shift
            bias = (last >> 1) - 1 + ((b & last) >> shift)
            b = ((b + bias) & mask) & ~(last - 1) & mask
        if exponent_bits < src_exponent:
            sign = b & (1 << (width - 1))
            exp_mask = ((1 << src_exponent) - 1) << src_mantissa
            bias = (1 << (src_exponent - 1)) - 1
            reduced_bias = (1 << (exponent_bits - 1)) - 1
            exponent = b & exp_mask
            if exponent > (bias + reduced_bias) << src_mantissa:
                b = sign | exp_mask
            elif exponent <= (bias - reduced_bias) << src_mantissa:
                b = sign
        out.append(b)
    bits = np.array(out, dtype=np.uint64).astype(
        np.uint32 if ty == "f32" else np.uint64)
    result = bits.view(NP_DTYPE[ty]).reshape(x.shape).astype(np.float64)
    return np.where(np.isnan(x), np.nan, result)


@pytest.mark.parametrize("ty,bits", [
    (ty, bits) for ty in ["f32", "f64"]
    for bits in [(5, 10), (8, 7), (8, 23), (11, 52), (4, 2)]
    if not (ty == "f32" and bits == (11, 52))])   # wider than f32
def test_reduce_precision(cl, ty, bits):
    exponent_bits, mantissa_bits = bits
    rng = rng_for("reduce-precision", ty, bits)
    x = np.concatenate([
        sample(ty, (24,), rng, -3, 3),
        float_array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65520.0, 65504.0, 1e-5,
                     -3e-5, 6e-5, 1e6, -1e38, 0.0, -0.0, math.inf,
                     -math.inf, math.nan, 1 + 2 ** -8, 1e-40], ty)])
    out = run1(cl, unary_hlo("reduce-precision", ty, ty, x.shape,
                             f", exponent_bits={exponent_bits}, "
                             f"mantissa_bits={mantissa_bits}"), (ty, x))
    assert_floats_close(out, reduce_precision_ref(x, ty, exponent_bits,
                                                  mantissa_bits), ty, 0,
                        f"reduce-precision e{exponent_bits}m{mantissa_bits}")
