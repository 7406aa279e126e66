"""Where XLA's semantics turn on a single bit, on a real pjrtd: the order
of -0 and +0 in maximum, minimum and clamp (IEEE 754's maximum and minimum,
as the StableHLO spec defines them), converts into f16, bf16 and f8 that
round once from f64 and from wide integers (not twice, through the
nearest f32), and a reduction's initial value counted once."""

from __future__ import annotations

import numpy as np
import pytest


def run(client, hlo, args=()):
    executable = client.compile(hlo)
    try:
        return [o.to_numpy() for o in executable.execute(list(args))]
    finally:
        executable.delete()


def bits(values: np.ndarray) -> list[int]:
    return [int(v) for v in values.view(np.uint32)]


ZEROS_A = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
ZEROS_B = np.array([-0.0, 0.0, 0.0, -0.0], np.float32)
POS, NEG = 0x00000000, 0x80000000


@pytest.mark.parametrize("op, want", [
    ("maximum", [POS, POS, POS, NEG]),
    ("minimum", [NEG, NEG, POS, NEG]),
])
def test_maximum_and_minimum_order_minus_zero_below_plus_zero(cl, op, want):
    got = run(cl, f"""
HloModule m
ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT r = f32[4] {op}(a, b)
}}""", [ZEROS_A, ZEROS_B])
    assert bits(got[0]) == want


@pytest.mark.parametrize("ty, dtype", [("f64", np.float64),
                                       ("f16", np.float16),
                                       ("bf16", None)])
def test_zeros_order_holds_in_every_float_type(cl, ty, dtype):
    """In f64 and the types computed in f32 alike; bf16 travels as f32
    and converts inside the program."""
    hlo = f"""
HloModule m
ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  x = {ty}[4] convert(a)
  y = {ty}[4] convert(b)
  hi = {ty}[4] maximum(x, y)
  lo = {ty}[4] minimum(y, x)
  ROOT t = (f32[4], f32[4]) tuple(f32[4] convert(hi), f32[4] convert(lo))
}}"""
    hi, lo = run(cl, hlo, [ZEROS_A, ZEROS_B])
    assert bits(hi) == [POS, POS, POS, NEG]
    assert bits(lo) == [NEG, NEG, POS, NEG]


def test_clamp_and_reductions_order_zeros(cl):
    """clamp(0, -0, 0) is minimum(maximum(-0, 0), 0) = +0; a max over
    {-0, +0} is +0 and a min is -0, in whichever order they come."""
    hi, lo, c = run(cl, """
HloModule m
hi {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
lo {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] minimum(a, b)
}
ENTRY e {
  p = f32[2,2] parameter(0)
  ninf = f32[] constant(-inf)
  inf = f32[] constant(inf)
  r = f32[2] reduce(p, ninf), dimensions={1}, to_apply=hi
  s = f32[2] reduce(p, inf), dimensions={1}, to_apply=lo
  z = f32[2] broadcast(f32[] constant(0)), dimensions={}
  m = f32[2] negate(z)
  k = f32[2] clamp(z, m, z)
  ROOT t = (f32[2], f32[2], f32[2]) tuple(r, s, k)
}""", [np.array([[-0.0, 0.0], [0.0, -0.0]], np.float32)])
    assert bits(hi) == [POS, POS]
    assert bits(lo) == [NEG, NEG]
    assert bits(c) == [POS, POS]


# Values whose nearest f32 lies exactly halfway between two values of the
# narrow type, so that rounding twice (to f32, then to nearest even) goes
# the wrong way; the bits are the once-rounded value's.
ROUND_ONCE = [
    ("f64", np.float64, 1 + 2.0**-11 + 2.0**-40, "f16", 0x3C01),
    ("f64", np.float64, 2.0**-25 + 2.0**-50, "f16", 0x0001),
    ("f64", np.float64, 65520 - 2.0**-20, "f16", 0x7BFF),
    ("f64", np.float64, 1 + 2.0**-8 + 2.0**-40, "bf16", 0x3F81),
    ("f64", np.float64, -(1 + 2.0**-8 + 2.0**-40), "bf16", 0xBF81),
    ("f64", np.float64, 1 + 2.0**-4 + 2.0**-40, "f8e4m3fn", 0x39),
    ("f64", np.float64, 1 + 2.0**-3 + 2.0**-40, "f8e5m2", 0x3D),
    ("s64", np.int64, 16842753, "bf16", 0x4B81),
    ("s64", np.int64, 2**40 + 2**32 + 1, "bf16", 0x5381),
    ("s64", np.int64, -(2**40 + 2**32 + 1), "bf16", 0xD381),
    ("u64", np.uint64, 2**63 + 2**55 + 1, "bf16", 0x5F01),
    ("s32", np.int32, 16842753, "bf16", 0x4B81),
    ("u32", np.uint32, 16842753, "bf16", 0x4B81),
    ("s32", np.int32, 65519, "f16", 0x7BFF),
]


@pytest.mark.parametrize("src, dtype, value, dst, want", ROUND_ONCE)
def test_converts_into_narrow_floats_round_once(cl, src, dtype, value,
                                                dst, want):
    width = 16 if dst in ("f16", "bf16") else 8
    got = run(cl, f"""
HloModule m
ENTRY e {{
  p = {src}[1] parameter(0)
  c = {dst}[1] convert(p)
  ROOT b = u{width}[1] bitcast-convert(c)
}}""", [np.array([value], dtype)])
    assert int(got[0][0]) == want, f"{value!r} -> {dst}: {int(got[0][0]):#x}"


def test_converts_that_were_exact_in_f32_are_unchanged(cl):
    """Ties of the narrow type itself still go to even, and values f32
    holds exactly convert as before."""
    values = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, 0.1, -2.5, 1e-45,
                       3.4e38, 1e300, -1e300], np.float64)
    got = run(cl, """
HloModule m
ENTRY e {
  p = f64[8] parameter(0)
  c = bf16[8] convert(p)
  ROOT b = u16[8] bitcast-convert(c)
}""", [values])
    assert [int(v) for v in got[0]] == [
        0x3F80, 0x3F82, 0x3DCD, 0xC020, 0x0000, 0x7F80, 0x7F80, 0xFF80]


@pytest.mark.parametrize("op, init, values, want", [
    ("add", 7, [], 7),
    ("add", 7, [1, 1, 1], 10),
    ("add", 7, list(range(1, 20)), 7 + 190),
    ("multiply", 7, [], 7),
    ("multiply", 2, [3, 5], 30),
    ("maximum", 7, [1, 2], 7),
    ("minimum", -7, [1, 2], -7),
])
def test_a_reduction_counts_its_initial_value_once(cl, op, init, values,
                                                   want):
    """XLA applies the initial value once per result; the spec allows
    more only for an identity, where it changes nothing."""
    n = len(values)
    got = run(cl, f"""
HloModule m
region {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {op}(a, b)
}}
ENTRY e {{
  p = f32[3,{n}] parameter(0)
  ROOT r = f32[3] reduce(p, f32[] constant({init})), dimensions={{1}},
      to_apply=region
}}""", [np.tile(np.array(values, np.float32), (3, 1)).reshape(3, n)])
    np.testing.assert_array_equal(got[0], [want] * 3)


# Functions the host computes by approximation (in SIMD packets): an
# element's result may not depend on where it lies in the array (its offset
# from an aligned address, or whether it falls in a block's last partial
# packet), nor on which thread's scratch memory its block was computed in.
# A run on the daemon's worker and a run inline on the calling thread used
# to differ in the last bit of exp (the MLP step's gradients).
APPROXIMATED = ["exponential", "exponential-minus-one", "log", "log-plus-one",
                "tanh", "logistic", "sine", "cosine", "erf"]


@pytest.mark.parametrize("op", APPROXIMATED)
@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_an_elements_result_does_not_depend_on_its_position(cl, op, ty):
    rng = np.random.default_rng(7)
    dtype = np.float32 if ty == "f32" else np.float64
    values = rng.uniform(0.05, 4.0, 61).astype(dtype)
    if op not in ("log", "log-plus-one"):
        values[::2] *= -1

    def apply(x):
        return run(cl, f"""
HloModule m
ENTRY e {{
  a = {ty}[{x.size}] parameter(0)
  ROOT r = {ty}[{x.size}] {op}(a)
}}""", [x])[0]

    # Every value at every offset modulo 64 elements, and at the ends.
    whole = apply(np.tile(values, 70))
    want = apply(values[:1])[0]
    assert (whole.reshape(70, 61) == whole[:61]).all(), op
    assert whole[0] == want and whole[-61] == want, op
    for length in (1, 3, 7, 15, 17):
        np.testing.assert_array_equal(apply(values[:length]),
                                      whole[:length], err_msg=op)
