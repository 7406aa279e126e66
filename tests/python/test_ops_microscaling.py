"""The microscaling (OCP MX) element types on a real pjrtd: f4e2m1fn (packed
two per byte in buffers, like s4), f6e2m3fn and f6e3m2fn (a byte each), all
three finite only and saturating, and f8e8m0fnu, the powers of two that
scale them. Against a reference built from each format's definition: every
code's value, rounding to the nearest value (ties to the even code), and
what each format does past its range."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays

# (exponent bits, mantissa bits, bias) of the finite-only formats: the sign
# is the bit above the exponent, and there is no infinity and no NaN.
FINITE = {"f4e2m1fn": (2, 1, 1), "f6e2m3fn": (2, 3, 1),
          "f6e3m2fn": (3, 2, 3)}
RNG = np.random.default_rng(20261207)


def run(client, hlo, args):
    with warnings.catch_warnings():
        # Without ml_dtypes, these types come back as their codes.
        warnings.simplefilter("ignore", UserWarning)
        return run_arrays(client, hlo, *args)


def code_bits(ty: str) -> int:
    e_bits, m_bits, _ = FINITE[ty]
    return 1 + e_bits + m_bits


def finite_value(code: int, ty: str) -> float:
    """The value of a code of a finite-only format."""
    e_bits, m_bits, bias = FINITE[ty]
    sign = -1.0 if code >> (e_bits + m_bits) & 1 else 1.0
    exponent = (code >> m_bits) & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + mantissa / (1 << m_bits)) * 2.0 ** (exponent - bias)


def finite_round(x: float, ty: str) -> float:
    """x rounded to the nearest value of the format, ties to the even code;
    beyond the largest value, infinities too, the largest value of x's sign;
    NaN of either sign +0."""
    if np.isnan(x):
        return 0.0
    sign = -1.0 if np.signbit(x) else 1.0
    positive = range(1 << (code_bits(ty) - 1))
    values = [Fraction(finite_value(c, ty)) for c in positive]
    if not np.isfinite(x) or abs(x) >= float(values[-1]):
        return sign * float(values[-1])
    a = Fraction(abs(float(x)))
    best = min(positive, key=lambda c: (abs(values[c] - a), c % 2))
    return sign * float(values[best])


def e8m0_value(code: int) -> float:
    return np.nan if code == 0xFF else 2.0 ** (code - 127)


def e8m0_round(x: float) -> float:
    """The nearest power of two (a mantissa of exactly 1.5 to the even
    exponent code); zero and values below 2^-127 to 2^-127; negative
    values, infinities and NaN to NaN."""
    if np.isnan(x) or np.isinf(x) or (x < 0 and x != 0):
        return np.nan
    if x == 0:
        return 2.0 ** -127
    a = Fraction(float(x))
    candidates = [(abs(Fraction(2) ** (c - 127) - a), c % 2, c)
                  for c in range(255)]
    code = min(candidates)[2]
    if code == 254 and a >= Fraction(3, 2) * Fraction(2) ** 127:
        return np.nan
    return e8m0_value(code)


@pytest.mark.parametrize("ty", sorted(FINITE))
def test_every_finite_only_code_converts_to_its_value_and_back(client, ty):
    n = 1 << code_bits(ty)
    codes = np.arange(n, dtype=np.uint8)
    hlo = f"""HloModule m
ENTRY e {{
  x = {ty}[{n}] parameter(0)
  f = f32[{n}] convert(x)
  ROOT t = (f32[{n}], {ty}[{n}]) tuple(f, {ty}[{n}] convert(f))
}}"""
    values, back = run(client, hlo, [codes])
    want = np.array([finite_value(c, ty) for c in range(n)], np.float32)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(back, codes)


@pytest.mark.parametrize("ty", sorted(FINITE))
def test_f32_to_finite_only_types_rounds_to_nearest_even_and_saturates(
        client, ty):
    largest = finite_value((1 << (code_bits(ty) - 1)) - 1, ty)
    below = finite_value((1 << (code_bits(ty) - 1)) - 2, ty)
    tiny = finite_value(1, ty)
    edges = [largest, largest + (largest - below) / 2, 10 * largest,
             tiny / 2, 3 * tiny / 2, tiny / 4, 0.3, 3.1415, -1e-3,
             np.inf, -np.inf, np.nan, -np.nan, -0.0]
    x = np.concatenate([np.array(edges, np.float32),
                        (RNG.standard_normal(300) * largest).astype(
                            np.float32)])
    hlo = f"""HloModule m
ENTRY e {{
  x = f32[{x.size}] parameter(0)
  ROOT f = f32[{x.size}] convert({ty}[{x.size}] convert(x))
}}"""
    (out,) = run(client, hlo, [x])
    want = np.array([finite_round(float(v), ty) for v in x], np.float32)
    np.testing.assert_array_equal(out, want)
    assert np.signbit(out[len(edges) - 1])  # -0 stays -0
    assert not np.signbit(out[len(edges) - 3:len(edges) - 1]).any()  # NaNs


def test_e8m0_codes_are_powers_of_two_and_floats_round_to_the_nearest(client):
    codes = np.arange(256, dtype=np.uint8)
    x = np.array([1.0, 0.1, 3.1415, 1.5, 3.0, 1.49, 0.0, -0.0, 1e-45,
                  2.0 ** -126, -1.0, np.inf, -np.inf, np.nan, 1e38, 3e38],
                 np.float32)
    x = np.concatenate([x, np.abs(RNG.standard_normal(200) * 1e3).astype(
        np.float32)])
    hlo = f"""HloModule m
ENTRY e {{
  c = f8e8m0fnu[256] parameter(0)
  x = f32[{x.size}] parameter(1)
  ROOT t = (f32[256], f32[{x.size}]) tuple(f32[256] convert(c),
      f32[{x.size}] convert(f8e8m0fnu[{x.size}] convert(x)))
}}"""
    values, rounded = run(client, hlo, [codes, x])
    want = np.array([e8m0_value(c) for c in range(256)], np.float32)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(
        rounded, np.array([e8m0_round(float(v)) for v in x], np.float32))


def test_f4_buffers_are_packed_two_per_byte_high_nibble_first(client):
    codes = np.array([0x1, 0x2, 0xF, 0x7, 0x9], np.uint8)  # 0.5 1 -6 6 -0.5
    buffer = client.put(codes, as_type="f4e2m1fn")
    try:
        assert buffer.nbytes == 3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            np.testing.assert_array_equal(
                buffer.to_numpy().view(np.uint8), codes)
    finally:
        buffer.delete()
    # A program sees the values, and its f4 results are packed again.
    hlo = """HloModule m
ENTRY e {
  x = f4e2m1fn[5] parameter(0)
  f = f32[5] convert(x)
  ROOT t = (f32[5], f4e2m1fn[5], u4[5]) tuple(f, f4e2m1fn[5] negate(x),
      u4[5] bitcast-convert(x))
}"""
    values, negated, bits = run(client, hlo, [codes])
    np.testing.assert_array_equal(values, [0.5, 1, -6, 6, -0.5])
    np.testing.assert_array_equal(negated.view(np.uint8), codes ^ 0x8)
    np.testing.assert_array_equal(bits, codes)


def test_f4_arithmetic_rounds_after_each_op_and_saturates(client):
    x = np.array([0x2, 0x4, 0x7, 0x1], np.uint8)  # 1, 2, 6, 0.5
    hlo = """HloModule m
ENTRY e {
  x = f4e2m1fn[4] parameter(0)
  y = f4e2m1fn[4] add(x, x)
  ROOT r = f32[4] convert(f4e2m1fn[4] multiply(y, x))
}"""
    (out,) = run(client, hlo, [x])
    # 2*1 = 2 -> 2*1 = 2; 4 -> 8 saturates to 6; 12 -> 6 -> 36 -> 6;
    # 1 -> 0.5.
    np.testing.assert_array_equal(out, [2, 6, 6, 0.5])


def test_microscaled_dot_dequantizes_blocks_with_their_e8m0_scales(client):
    # The MX pattern: f4 elements times a power-of-two scale per block of
    # the contracting dimension, then an f32 product.
    m, k, n, block = 3, 8, 2, 4
    a_codes = RNG.integers(0, 16, (m, k)).astype(np.uint8)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    scale_codes = RNG.integers(120, 134, (m, k // block)).astype(np.uint8)
    hlo = f"""HloModule m
ENTRY e {{
  a = f4e2m1fn[{m},{k}] parameter(0)
  s = f8e8m0fnu[{m},{k // block}] parameter(1)
  b = f32[{k},{n}] parameter(2)
  af = f32[{m},{k}] convert(a)
  sf = f32[{m},{k // block}] convert(s)
  sb = f32[{m},{k // block},{block}] broadcast(sf), dimensions={{0,1}}
  scaled = f32[{m},{k}] multiply(af, f32[{m},{k}] reshape(sb))
  ROOT d = f32[{m},{n}] dot(scaled, b), lhs_contracting_dims={{1}},
      rhs_contracting_dims={{0}}
}}"""
    (out,) = run(client, hlo, [a_codes, scale_codes, b])
    a = np.array([[finite_value(int(c), "f4e2m1fn") for c in row]
                  for row in a_codes])
    scales = np.repeat(2.0 ** (scale_codes.astype(np.float64) - 127), block,
                       axis=1)
    np.testing.assert_allclose(out, (a * scales) @ b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ty", ["f4e2m1fn", "f6e2m3fn", "f6e3m2fn",
                                "f8e8m0fnu"])
def test_sort_and_reduce_order_the_values(client, ty):
    n = 16 if ty == "f4e2m1fn" else 64
    codes = RNG.permutation(np.arange(n, dtype=np.uint8))
    value = (e8m0_value if ty == "f8e8m0fnu"
             else lambda c: finite_value(c, ty))
    # The lowest value: f8e8m0fnu has no negative ones (zero is its least).
    low = "0" if ty == "f8e8m0fnu" else "-1e30"
    hlo = f"""HloModule m
lt {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}}
mx {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT c = {ty}[] maximum(a, b)
}}
total_lt {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER
}}
ENTRY e {{
  x = {ty}[{n}] parameter(0)
  s = {ty}[{n}] sort(x), dimensions={{0}}, to_apply=lt
  init = {ty}[] convert(f32[] constant({low}))
  m = {ty}[] reduce(x, init), dimensions={{0}}, to_apply=mx
  total = {ty}[{n}] sort(x), dimensions={{0}}, to_apply=total_lt
  ROOT t = (f32[{n}], f32[], {ty}[{n}]) tuple(f32[{n}] convert(s),
      f32[] convert(m), total)
}}"""
    ordered, largest, total = run(client, hlo, [codes])
    want = np.array(sorted(value(int(c)) for c in codes), np.float32)
    np.testing.assert_array_equal(ordered, want)
    assert largest == want[-1]
    # The total order (a radix sort of the codes' keys) puts -0 before +0.
    negative_zero = 1 << (code_bits(ty) - 1) if ty in FINITE else None
    want_codes = sorted((int(c) for c in codes),
                        key=lambda c: (value(c), c != negative_zero))
    np.testing.assert_array_equal(total.view(np.uint8), want_codes)


@pytest.mark.parametrize("ty,low,high,values", [
    ("f4e2m1fn", 0, 6, [0, 0.5, 1, 1.5, 2, 3, 4]),
    ("f6e3m2fn", -1, 1, None),
    ("f8e8m0fnu", 1, 8, [1, 2, 4])])
def test_uniform_random_values_stay_below_the_upper_bound(
        client, ty, low, high, values):
    # Values that round up to the bound become the value just below it.
    hlo = f"""HloModule m
ENTRY e {{
  a = {ty}[] convert(f32[] constant({low}))
  b = {ty}[] convert(f32[] constant({high}))
  ROOT r = f32[4000] convert({ty}[4000] rng(a, b),
      distribution=rng_uniform)
}}"""
    (out,) = run(client, hlo, [])
    assert out.min() >= low and out.max() < high
    if values is not None:
        assert set(np.unique(out).tolist()) == set(values)
    else:
        assert len(np.unique(out)) > 20


def test_constants_round_and_refuse_what_lies_past_the_largest(client):
    hlo = """HloModule m
ENTRY e {
  a = f4e2m1fn[4] constant({1, -2, 6.4, 0.2})
  b = f6e3m2fn[2] constant({28, -0.0625})
  c = f8e8m0fnu[2] constant({0.25, 3})
  ROOT t = (f32[4], f32[2], f32[2]) tuple(f32[4] convert(a),
      f32[2] convert(b), f32[2] convert(c))
}"""
    a, b, c = run(client, hlo, [])
    np.testing.assert_array_equal(a, [1, -2, 6, 0])
    np.testing.assert_array_equal(b, [28, -0.0625])
    np.testing.assert_array_equal(c, [0.25, 2])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="out of range|outside"):
        client.compile("HloModule m\nENTRY e {\n"
                       "  ROOT a = f6e2m3fn[1] constant({8})\n}")
