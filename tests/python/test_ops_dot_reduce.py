"""dot (batch, contracting and mixed-precision), reduce (every reducer,
variadic) and reduce-precision against references written out in
numpy/Python following XLA's semantics, run through a real pjrtd (the
``cl`` client of conftest.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hlo_harness import (BITS, FLOATS, INTS, NP_DTYPE, NUMERIC,
                         assert_floats_close, assert_same, dims_attr,
                         float_array, float_bits, int_array, int_range, ints,
                         rng_for, round_array, run, run1, sample, shape_str,
                         small_ints, unary_hlo, wrap)


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
