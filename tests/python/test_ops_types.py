"""Element types beyond the original thirteen, on a real pjrtd: c64 and
c128 (against numpy's complex arithmetic), s4 and u4 (packed two per byte
in buffers, 4-bit wrapping arithmetic, saturating float converts), and
the f8 types (against a reference that rounds to the nearest of the
format's values, ties to even, and hand-derived edge values)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import pjrt_client


def run(client, hlo, args):
    executable = client.compile(hlo)
    try:
        outs = executable.execute(args)
        try:
            with warnings.catch_warnings():
                # Without ml_dtypes, f8 results come back as their codes.
                warnings.simplefilter("ignore", UserWarning)
                return [o.to_numpy() for o in outs]
        finally:
            for o in outs:
                o.delete()
    finally:
        executable.delete()


def one_op(ty: str, op: str, n: int, arity: int, out_ty: str | None = None,
           attrs: str = "") -> str:
    params = "\n".join(f"  p{i} = {ty}[{n}] parameter({i})"
                       for i in range(arity))
    operands = ", ".join(f"p{i}" for i in range(arity))
    return (f"HloModule m\nENTRY e {{\n{params}\n"
            f"  ROOT r = {out_ty or ty}[{n}] {op}({operands}){attrs}\n}}\n")


# --- complex ----------------------------------------------------------------

RNG = np.random.default_rng(20261203)


def complex_values(dtype, n=64):
    return (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(dtype)


CX = {"c64": (np.complex64, "f32", 2e-5),
      "c128": (np.complex128, "f64", 1e-12)}
UNARY = {
    "negate": np.negative, "exponential": np.exp, "log": np.log,
    "sqrt": np.sqrt, "sine": np.sin, "cosine": np.cos, "tan": np.tan,
    "tanh": np.tanh, "rsqrt": lambda z: 1 / np.sqrt(z),
    "exponential-minus-one": np.expm1, "log-plus-one": np.log1p,
    "logistic": lambda z: 1 / (1 + np.exp(-z)),
    "sign": lambda z: z / np.abs(z),
    # The principal root, as numpy's principal power gives it.
    "cbrt": lambda z: np.power(z, 1 / 3),
}
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "power": np.power,
          # XLA's definition: -i log((x + iy) / sqrt(x^2 + y^2)).
          "atan2": lambda y, x: -1j * np.log((x + 1j * y)
                                             / np.sqrt(x * x + y * y))}


@pytest.mark.parametrize("ty", sorted(CX))
@pytest.mark.parametrize("op", sorted(UNARY))
def test_complex_unary_ops_match_numpy(client, ty, op):
    dtype, _, rtol = CX[ty]
    x = complex_values(dtype)
    (out,) = run(client, one_op(ty, op, x.size, 1), [x])
    assert out.dtype == dtype
    np.testing.assert_allclose(out, UNARY[op](x), rtol=rtol * 10, atol=rtol)


@pytest.mark.parametrize("ty", sorted(CX))
@pytest.mark.parametrize("op", sorted(BINARY))
def test_complex_binary_ops_match_numpy(client, ty, op):
    dtype, _, rtol = CX[ty]
    x, y = complex_values(dtype), complex_values(dtype)
    (out,) = run(client, one_op(ty, op, x.size, 2), [x, y])
    np.testing.assert_allclose(out, BINARY[op](x, y), rtol=rtol * 10)


@pytest.mark.parametrize("ty", sorted(CX))
def test_complex_atan2_of_real_values_is_the_real_atan2(client, ty):
    dtype, _, rtol = CX[ty]
    y = np.array([1, -1, 2, -3, 0.5], dtype)
    x = np.array([1, 2, 0.5, 4, 3], dtype)
    (out,) = run(client, one_op(ty, "atan2", 5, 2), [y, x])
    np.testing.assert_allclose(out.real, np.arctan2(y.real, x.real),
                               rtol=rtol * 10)
    np.testing.assert_allclose(out.imag, 0, atol=rtol)


@pytest.mark.parametrize("ty", sorted(CX))
def test_real_imag_abs_complex_and_compare(client, ty):
    dtype, part, rtol = CX[ty]
    x = complex_values(dtype, 8)
    y = x.copy()
    y[::2] += 1
    hlo = f"""HloModule m
ENTRY e {{
  x = {ty}[8] parameter(0)
  y = {ty}[8] parameter(1)
  re = {part}[8] real(x)
  im = {part}[8] imag(x)
  a = {part}[8] abs(x)
  c = {ty}[8] complex(im, re)
  eq = pred[8] compare(x, y), direction=EQ
  ne = pred[8] compare(x, y), direction=NE
  ROOT t = ({part}[8], {part}[8], {part}[8], {ty}[8], pred[8], pred[8])
      tuple(re, im, a, c, eq, ne)
}}"""
    re, im, a, c, eq, ne = run(client, hlo, [x, y])
    np.testing.assert_array_equal(re, x.real)
    np.testing.assert_array_equal(im, x.imag)
    np.testing.assert_allclose(a, np.abs(x), rtol=rtol)
    np.testing.assert_array_equal(c, x.imag + 1j * x.real)
    np.testing.assert_array_equal(eq, x == y)
    np.testing.assert_array_equal(ne, x != y)


def test_complex_power_of_zero(client):
    a = np.zeros(3, np.complex64)
    b = np.array([0, 2 + 1j, -1], np.complex64)
    (out,) = run(client, one_op("c64", "power", 3, 2), [a, b])
    assert out[0] == 1 and out[1] == 0
    assert not np.isfinite(out[2])


def test_f8_parameters_take_codes_not_floats(client):
    executable = client.compile(one_op("f8e4m3fn", "negate", 2, 1))
    try:
        with pytest.raises(TypeError, match="uint8 codes"):
            executable.execute([[0.5, 1.5]])
    finally:
        executable.delete()


def test_complex_converts_keep_or_drop_the_imaginary_part(client):
    x = complex_values(np.complex64, 4)
    r = np.array([1.5, -2, 0, 3], np.float32)
    hlo = """HloModule m
ENTRY e {
  x = c64[4] parameter(0)
  r = f32[4] parameter(1)
  ROOT t = (f32[4], c128[4], c64[4], s32[4], pred[4]) tuple(
      f32[4] convert(x), c128[4] convert(x), c64[4] convert(r),
      s32[4] convert(x), pred[4] convert(x))
}"""
    to_f32, to_c128, from_f32, to_s32, to_pred = run(client, hlo, [x, r])
    np.testing.assert_array_equal(to_f32, x.real)
    np.testing.assert_array_equal(to_c128, x.astype(np.complex128))
    np.testing.assert_array_equal(from_f32, r.astype(np.complex64))
    np.testing.assert_array_equal(to_s32, np.trunc(x.real).astype(np.int32))
    np.testing.assert_array_equal(to_pred, x.real != 0)


@pytest.mark.parametrize("ty", sorted(CX))
def test_complex_dot_and_reduce_match_numpy(client, ty):
    dtype, _, rtol = CX[ty]
    a = complex_values(dtype, 6 * 5).reshape(6, 5)
    b = complex_values(dtype, 5 * 4).reshape(5, 4)
    hlo = f"""HloModule m
add {{
  p = {ty}[] parameter(0)
  q = {ty}[] parameter(1)
  ROOT s = {ty}[] add(p, q)
}}
ENTRY e {{
  a = {ty}[6,5] parameter(0)
  b = {ty}[5,4] parameter(1)
  d = {ty}[6,4] dot(a, b), lhs_contracting_dims={{1}},
      rhs_contracting_dims={{0}}
  z = {ty}[] constant((0, 0))
  r = {ty}[6] reduce(a, z), dimensions={{1}}, to_apply=add
  ROOT t = ({ty}[6,4], {ty}[6]) tuple(d, r)
}}"""
    d, r = run(client, hlo, [a, b])
    np.testing.assert_allclose(d, a @ b, rtol=rtol * 10)
    np.testing.assert_allclose(r, a.sum(axis=1), rtol=rtol * 10)


def test_complex_moves_through_transpose_slice_and_concatenate(client):
    x = complex_values(np.complex128, 12).reshape(3, 4)
    hlo = """HloModule m
ENTRY e {
  x = c128[3,4] parameter(0)
  t = c128[4,3] transpose(x), dimensions={1,0}
  s = c128[2,3] slice(t), slice={[1:3], [0:3]}
  ROOT c = c128[6,3] concatenate(t, s), dimensions={0}
}"""
    (out,) = run(client, hlo, [x])
    np.testing.assert_array_equal(out, np.concatenate([x.T, x.T[1:3]]))


def test_complex_ordering_ops_are_refused_by_name(client):
    with pytest.raises(pjrt_client.InvalidArgumentError, match="EQ or NE"):
        client.compile(one_op("c64", "compare", 2, 2, "pred",
                              ", direction=LT"))
    with pytest.raises(pjrt_client.InvalidArgumentError, match="maximum"):
        client.compile(one_op("c64", "maximum", 2, 2))


def test_kernels_without_complex_support_refuse_it_by_name(client):
    topk = """HloModule m
ENTRY e {
  x = c64[4] parameter(0)
  ROOT t = (c64[2], s32[2]) topk(x), k=2, largest=true
}"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match=r"topk of c64\[4\]"):
        client.compile(topk)
    mixed = """HloModule m
ENTRY e {
  x = f32[1,4,2] parameter(0)
  k = c64[3,2,2] parameter(1)
  ROOT c = c64[1,2,2] convolution(x, k), window={size=3},
      dim_labels=b0f_0io->b0f
}"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match="a convolution of f32 and c64 into c64"):
        client.compile(mixed)


# --- s4 and u4 ---------------------------------------------------------------

def wrap4(values, signed, bits=4):
    v = np.asarray(values, np.int64) & ((1 << bits) - 1)
    return np.where(signed & (v >= 1 << (bits - 1)), v - (1 << bits), v)


@pytest.mark.parametrize("ty", ["s4", "u4", "s2", "u2"])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "negate"])
def test_sub_byte_arithmetic_wraps_to_the_types_bits(client, ty, op):
    signed = ty[0] == "s"
    bits = int(ty[1])
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (
        0, (1 << bits) - 1)
    a = np.arange(lo, hi + 1).repeat(hi - lo + 1)
    b = np.tile(np.arange(lo, hi + 1), hi - lo + 1)
    arity = 1 if op == "negate" else 2
    args = [a, b][:arity]
    (out,) = run(client, one_op(ty, op, a.size, arity), args)
    want = {"add": a + b, "subtract": a - b, "multiply": a * b,
            "negate": -a}[op]
    np.testing.assert_array_equal(out, wrap4(want, signed, bits))


def test_s2_and_u2_count_shift_convert_and_pack_four_per_byte(client):
    a = np.array([-2, -1, 0, 1, 1], np.int8)  # 5: the last byte half full
    u = np.array([0, 1, 2, 3, 2], np.uint8)
    one = np.ones(5, np.int8)
    f = np.array([1.7, -3.0, np.nan, 0.5, 9.0], np.float32)
    hlo = """HloModule m
ENTRY e {
  a = s2[5] parameter(0)
  u = u2[5] parameter(1)
  one = s2[5] parameter(2)
  f = f32[5] parameter(3)
  ou = u2[5] convert(one)
  ROOT t = (s2[5], s2[5], s2[5], s2[5], u2[5], s2[5], u2[5], s32[5],
            u2[5]) tuple(
      s2[5] popcnt(a), s2[5] count-leading-zeros(a),
      s2[5] shift-right-logical(a, one), s2[5] shift-right-arithmetic(a, one),
      u2[5] shift-right-arithmetic(u, ou), s2[5] convert(f), u2[5] convert(f),
      s32[5] convert(a), u2[5] add(u, u))
}"""
    pop, clz, srl, sra, usra, sf, uf, wide, twice = run(
        client, hlo, [a, u, one, f])
    bits = a.astype(np.int64) & 0x3
    np.testing.assert_array_equal(pop, wrap4(
        [bin(v).count("1") for v in bits], True, 2))
    # clz(0) is 2, which s2 holds as -2.
    np.testing.assert_array_equal(clz, wrap4(
        [2 - v.bit_length() for v in bits.tolist()], True, 2))
    np.testing.assert_array_equal(srl, bits >> 1)
    np.testing.assert_array_equal(sra, a >> 1)
    np.testing.assert_array_equal(usra, [(v >> 1) | (v & 2) for v in u])
    np.testing.assert_array_equal(sf, [1, -2, 0, 0, 1])  # saturates
    np.testing.assert_array_equal(uf, [1, 0, 0, 0, 3])
    np.testing.assert_array_equal(wide, a)
    np.testing.assert_array_equal(twice, (2 * u) & 3)
    buffer = client.put(a, as_type="s2")
    try:
        assert buffer.nbytes == 2 and buffer.dtype_name == "s2"
        np.testing.assert_array_equal(buffer.to_numpy(), a)
    finally:
        buffer.delete()
    from pjrt_client import _dtypes
    np.testing.assert_array_equal(
        _dtypes.pack_sub_byte(np.array([1, 2, 3, 0, 3], np.uint8), bits=2),
        [0b01101100, 0b11000000])


def test_s4_bit_ops_count_and_shift_within_four_bits(client):
    a = np.arange(-8, 8, dtype=np.int8)
    s = np.full(16, 1, np.int8)
    hlo = """HloModule m
ENTRY e {
  a = s4[16] parameter(0)
  s = s4[16] parameter(1)
  ROOT t = (s4[16], s4[16], s4[16], s4[16]) tuple(
      s4[16] popcnt(a), s4[16] count-leading-zeros(a),
      s4[16] shift-right-logical(a, s), s4[16] shift-right-arithmetic(a, s))
}"""
    pop, clz, srl, sra = run(client, hlo, [a, s])
    bits = a.astype(np.int64) & 0xF
    np.testing.assert_array_equal(pop, [bin(v).count("1") for v in bits])
    np.testing.assert_array_equal(clz, [4 - v.bit_length() for v in
                                        bits.tolist()])
    np.testing.assert_array_equal(srl, bits >> 1)
    np.testing.assert_array_equal(sra, a >> 1)


def test_u4_arithmetic_shift_copies_bit_three(client):
    a = np.arange(16, dtype=np.uint8)
    s = np.full(16, 1, np.uint8)
    (out,) = run(client, one_op("u4", "shift-right-arithmetic", 16, 2),
                 [a, s])
    # As a 4-bit pattern: 0b1000 >> 1 = 0b1100.
    np.testing.assert_array_equal(out, [(v >> 1) | (v & 8) for v in a])


def test_random_bits_refuse_int4_results(client):
    hlo = """HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u4[8]) rng-bit-generator(s), algorithm=rng_three_fry
}"""
    with pytest.raises(pjrt_client.UnimplementedError, match="u4"):
        client.compile(hlo)


def test_converts_to_int4_wrap_integers_and_saturate_floats(client):
    i = np.array([7, 8, -9, 100, -1, 15, 16, -8], np.int32)
    f = np.array([7.9, 8.5, -9.0, 1e9, -1e9, np.nan, -0.5, 3.5], np.float32)
    hlo = """HloModule m
ENTRY e {
  i = s32[8] parameter(0)
  f = f32[8] parameter(1)
  ROOT t = (s4[8], u4[8], s4[8], u4[8]) tuple(s4[8] convert(i),
      u4[8] convert(i), s4[8] convert(f), u4[8] convert(f))
}"""
    si, ui, sf, uf = run(client, hlo, [i, f])
    np.testing.assert_array_equal(si, wrap4(i, True))
    np.testing.assert_array_equal(ui, wrap4(i, False))
    np.testing.assert_array_equal(sf, [7, 7, -8, 7, -8, 0, 0, 3])
    np.testing.assert_array_equal(uf, [7, 8, 0, 15, 0, 0, 0, 3])


def test_int4_buffers_are_packed_two_per_byte_high_nibble_first(client):
    values = np.array([1, -2, 7, -8, 3], np.int8)  # odd count
    buffer = client.put(values, as_type="s4")
    try:
        assert buffer.nbytes == 3
        assert buffer.dtype_name == "s4"
        np.testing.assert_array_equal(buffer.to_numpy(), values)
    finally:
        buffer.delete()
    # The packed bytes, read back through a program that bitcasts nothing:
    # u4 -> u8 converts each value, so the order of nibbles shows.
    hlo = """HloModule m
ENTRY e {
  x = u4[5] parameter(0)
  ROOT y = u8[5] convert(x)
}"""
    (out,) = run(client, hlo, [np.array([1, 14, 7, 8, 3], np.uint8)])
    np.testing.assert_array_equal(out, [1, 14, 7, 8, 3])
    from pjrt_client import _dtypes
    np.testing.assert_array_equal(
        _dtypes.pack_sub_byte(np.array([1, 14, 7, 8, 3], np.uint8)),
        [0x1E, 0x78, 0x30])


def test_int4_sums_in_reduce_scatter_windows_and_convolution_wrap(client):
    x = np.array([7, 7, 7, 1, -8, -8], np.int8)
    hlo = """HloModule m
add {
  a = s4[] parameter(0)
  b = s4[] parameter(1)
  ROOT s = s4[] add(a, b)
}
ENTRY e {
  x = s4[6] parameter(0)
  z = s4[] constant(0)
  r = s4[] reduce(x, z), dimensions={0}, to_apply=add
  w = s4[3] reduce-window(x, z), window={size=2 stride=2}, to_apply=add
  i = s32[2,1] constant({{0}, {0}})
  u = s4[2] constant({7, 7})
  sc = s4[6] scatter(x, i, u), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=add
  xr = s4[1,6,1] reshape(x)
  k = s4[2,1,1] constant({{{3}}, {{1}}})
  c = s4[1,5,1] convolution(xr, k), window={size=2}, dim_labels=b0f_0io->b0f
  ROOT t = (s4[], s4[3], s4[6], s4[1,5,1]) tuple(r, w, sc, c)
}"""
    r, w, sc, c = run(client, hlo, [x])
    wide = x.astype(np.int64)
    assert int(r) == wrap4(wide.sum(), True)
    np.testing.assert_array_equal(w, wrap4(wide.reshape(3, 2).sum(1), True))
    want = wide.copy()
    want[0] += 14
    np.testing.assert_array_equal(sc, wrap4(want, True))
    np.testing.assert_array_equal(c.reshape(-1),
                                  wrap4(wide[:-1] * 3 + wide[1:], True))


def test_int4_state_runs_through_a_while_loop(client):
    hlo = """HloModule m
cond {
  s = (s32[], s4[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s4[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s4[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  three = s4[] constant(3)
  b = s4[3] broadcast(three), dimensions={}
  ROOT t = (s32[], s4[3]) tuple(s32[] add(i, one), s4[3] add(x, b))
}
ENTRY e {
  x = s4[3] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s4[3]) tuple(z, x)
  w = (s32[], s4[3]) while(init), condition=cond, body=body
  ROOT r = s4[3] get-tuple-element(w), index=1
}"""
    x = np.array([0, -8, 5], np.int8)
    (out,) = run(client, hlo, [x])
    np.testing.assert_array_equal(out, wrap4(x.astype(np.int64) + 15, True))


# --- f8 ---------------------------------------------------------------------

# (exponent bits, mantissa bits, encoding, bias): "ieee" has infinities
# and NaNs in its largest exponent, "fn" one NaN per sign (all bits set),
# "fnuz" one NaN (0x80, the code of -0) and no -0.
F8 = {"f8e4m3fn": (4, 3, "fn", 7), "f8e5m2": (5, 2, "ieee", 15),
      "f8e4m3": (4, 3, "ieee", 7), "f8e3m4": (3, 4, "ieee", 3),
      "f8e4m3fnuz": (4, 3, "fnuz", 8), "f8e5m2fnuz": (5, 2, "fnuz", 16),
      "f8e4m3b11fnuz": (4, 3, "fnuz", 11)}


def f8_value(code: int, ty: str) -> float:
    """The value of an f8 code, from the format's definition."""
    e_bits, m_bits, encoding, bias = F8[ty]
    if encoding == "fnuz" and code == 0x80:
        return np.nan
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> m_bits) & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if encoding == "ieee" and exponent == top:
        return sign * np.inf if mantissa == 0 else np.nan
    if encoding == "fn" and exponent == top and \
            mantissa == (1 << m_bits) - 1:
        return np.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + mantissa / (1 << m_bits)) * 2.0 ** (exponent - bias)


def f8_round(x: float, ty: str) -> float:
    """x rounded to the nearest f8 value, ties to the even code; past the
    largest value by half an ulp or more: inf where the format has one,
    else NaN; fnuz formats have no -0."""
    if np.isnan(x):
        return np.nan
    encoding = F8[ty][2]
    codes = [c for c in range(0x80) if np.isfinite(f8_value(c, ty))]
    values = [Fraction(f8_value(c, ty)) for c in codes]
    largest = values[-1]
    ulp = largest - values[-2]
    a = Fraction(abs(float(x))) if np.isfinite(x) else None
    sign = -1.0 if np.signbit(x) else 1.0
    if a is None or a > largest + ulp / 2 or (
            a == largest + ulp / 2 and codes[-1] % 2 == 1):
        return sign * np.inf if encoding == "ieee" else np.nan
    best = min(range(len(codes)),
               key=lambda k: (abs(values[k] - a), codes[k] % 2))
    if encoding == "fnuz" and values[best] == 0:
        return 0.0
    return sign * float(values[best])


def f8_edges(ty: str) -> list[float]:
    """The largest value, the tie above it and past it, the smallest
    subnormal and the ties around it, infinities."""
    codes = [c for c in range(0x80) if np.isfinite(f8_value(c, ty))]
    largest, below = f8_value(codes[-1], ty), f8_value(codes[-2], ty)
    tiny = f8_value(1, ty)
    return [largest, largest + (largest - below) / 2,
            largest + (largest - below) * 0.75, 2 * largest, tiny / 2,
            3 * tiny / 2, tiny, 0.3, -1e-3, -tiny / 4, np.inf, -np.inf]


@pytest.mark.parametrize("ty", sorted(F8))
def test_every_f8_code_converts_to_its_value_and_back(client, ty):
    codes = np.arange(256, dtype=np.uint8)
    hlo = f"""HloModule m
ENTRY e {{
  x = {ty}[256] parameter(0)
  f = f32[256] convert(x)
  ROOT t = (f32[256], {ty}[256]) tuple(f, {ty}[256] convert(f))
}}"""
    values, back = run(client, hlo, [codes])
    want = np.array([f8_value(c, ty) for c in range(256)], np.float32)
    np.testing.assert_array_equal(values, want)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(back[finite], codes[finite])


@pytest.mark.parametrize("ty", sorted(F8))
def test_f32_to_f8_rounds_to_nearest_even_and_overflows(client, ty):
    edges = {
        # 464 is halfway between 448 and the NaN code: ties to even (448);
        # anything above overflows to NaN (no infinity).
        "f8e4m3fn": [448, 464, 465, 480, 2.0 ** -10, 3 * 2.0 ** -10,
                     2.0 ** -9, 0.3, -1e-3, np.inf, -np.inf],
        # 61440 is halfway between 57344 (odd code) and 2^16: rounds up to
        # infinity.
        "f8e5m2": [57344, 61439, 61440, 1e6, 2.0 ** -17, 3 * 2.0 ** -17,
                   0.3, -1e-3, np.inf, -np.inf],
    }.get(ty, []) + f8_edges(ty)
    x = np.concatenate([np.array(edges, np.float32),
                        (RNG.standard_normal(200) * 50).astype(np.float32),
                        np.array([np.nan, -0.0], np.float32)])
    hlo = f"""HloModule m
ENTRY e {{
  x = f32[{x.size}] parameter(0)
  ROOT f = f32[{x.size}] convert({ty}[{x.size}] convert(x))
}}"""
    (out,) = run(client, hlo, [x])
    want = np.array([f8_round(float(v), ty) for v in x], np.float32)
    np.testing.assert_array_equal(out, want)
    # -0 stays -0, but for the fnuz formats, which have none.
    assert np.signbit(out[-1]) == (F8[ty][2] != "fnuz")


def test_f8_arithmetic_computes_in_f32_and_rounds_after_each_op(client):
    x = np.array([0x40, 0x38, 0x7E, 0x01], np.uint8)  # 2, 1, 448, 2^-9
    hlo = """HloModule m
ENTRY e {
  x = f8e4m3fn[4] parameter(0)
  y = f8e4m3fn[4] parameter(1)
  ROOT r = f8e4m3fn[4] add(x, y)
}"""
    (out,) = run(client, hlo, [x, x])
    got = [f8_value(int(c), "f8e4m3fn") for c in out]
    assert got[:2] == [4.0, 2.0]
    assert np.isnan(got[2])  # 896 overflows
    assert got[3] == 2.0 ** -8


# --- fft --------------------------------------------------------------------

def fft_program(fft_type: str, in_ty: str, in_dims, out_ty: str, out_dims,
                lengths) -> str:
    d_in = ",".join(map(str, in_dims))
    d_out = ",".join(map(str, out_dims))
    return f"""HloModule m
ENTRY e {{
  x = {in_ty}[{d_in}] parameter(0)
  ROOT f = {out_ty}[{d_out}] fft(x), fft_type={fft_type},
      fft_length={{{",".join(map(str, lengths))}}}
}}"""


@pytest.mark.parametrize("lengths", [(8,), (5,), (4, 6), (3, 4, 5)])
@pytest.mark.parametrize("ty", ["c64", "c128"])
def test_fft_and_ifft_match_numpy(client, ty, lengths):
    dtype, _, rtol = CX[ty]
    shape = (2,) + lengths
    x = complex_values(dtype, int(np.prod(shape))).reshape(shape)
    axes = tuple(range(1, len(shape)))
    (f,) = run(client, fft_program("FFT", ty, shape, ty, shape, lengths), [x])
    np.testing.assert_allclose(f, np.fft.fftn(x, axes=axes),
                               rtol=rtol * 100, atol=rtol * 100)
    (i,) = run(client, fft_program("IFFT", ty, shape, ty, shape, lengths), [x])
    np.testing.assert_allclose(i, np.fft.ifftn(x, axes=axes),
                               rtol=rtol * 100, atol=rtol * 10)


@pytest.mark.parametrize("lengths", [(8,), (7,), (4, 6), (2, 3, 5)])
@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_rfft_and_irfft_match_numpy(client, ty, lengths):
    real = np.float32 if ty == "f32" else np.float64
    cty = "c64" if ty == "f32" else "c128"
    tol = 1e-4 if ty == "f32" else 1e-10
    shape = (3,) + lengths
    x = RNG.standard_normal(shape).astype(real)
    axes = tuple(range(1, len(shape)))
    half = shape[:-1] + (lengths[-1] // 2 + 1,)
    (r,) = run(client, fft_program("RFFT", ty, shape, cty, half, lengths), [x])
    want = np.fft.rfftn(x, axes=axes)
    np.testing.assert_allclose(r, want, rtol=tol, atol=tol)
    (back,) = run(client, fft_program("IRFFT", cty, half, ty, shape, lengths),
                  [want.astype(r.dtype)])
    np.testing.assert_allclose(back, np.fft.irfftn(want, s=lengths,
                                                   axes=axes),
                               rtol=tol, atol=tol)


def test_fft_with_a_length_that_does_not_fit_is_refused(client):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="dimension 1 should be 5"):
        client.compile(fft_program("IRFFT", "c64", (2, 4), "f32", (2, 8),
                                   (8,)))
    with pytest.raises(pjrt_client.InvalidArgumentError, match="c64 or c128"):
        client.compile(fft_program("FFT", "f32", (8,), "f32", (8,), (8,)))
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="at least 1"):
        client.compile(fft_program("RFFT", "f32", (2, 0), "c64", (2, 1),
                                   (0,)))


# --- bitcast across layouts -------------------------------------------------

def test_bitcast_to_another_layout_reinterprets_the_physical_buffer(client):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # Row-major [2,3] read as column-major [3,2]: y[i, j] = flat[j * 3 + i].
    (y,) = run(client, """HloModule m
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  ROOT y = f32[3,2]{0,1} bitcast(x)
}""", [x])
    np.testing.assert_array_equal(y, x.reshape(-1).reshape(2, 3).T)
    # A column-major operand's physical order is its transpose, flattened.
    (flat,) = run(client, """HloModule m
ENTRY e {
  x = f32[2,3]{0,1} parameter(0)
  ROOT y = f32[6]{0} bitcast(x)
}""", [x])
    np.testing.assert_array_equal(flat, x.T.reshape(-1))
    # Same layouts: a plain view.
    (same,) = run(client, """HloModule m
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  ROOT y = f32[3,2]{1,0} bitcast(x)
}""", [x])
    np.testing.assert_array_equal(same, x.reshape(3, 2))


# --- bitcast-convert across widths -------------------------------------------

# (operand type, numpy dtype, result type, numpy dtype)
BITCASTS = [("f32", np.float32, "u8", np.uint8),
            ("u8", np.uint8, "f32", np.float32),
            ("s64", np.int64, "s32", np.int32),
            ("s32", np.int32, "f64", np.float64),
            ("f16", np.float16, "u32", np.uint32),
            ("c64", np.complex64, "f32", np.float32),
            ("c128", np.complex128, "c64", np.complex64),
            ("f64", np.float64, "c64", np.complex64),
            ("u64", np.uint64, "u16", np.uint16)]


@pytest.mark.parametrize("src,src_dtype,dst,dst_dtype", BITCASTS)
def test_bitcast_convert_across_widths_views_the_bytes(client, src, src_dtype,
                                                       dst, dst_dtype):
    """XLA's rule: a wider operand gains a minor dimension of the width
    ratio, a narrower one loses it; the bytes are numpy's view of them,
    as a result and as the operand of an element-wise op."""
    src_bytes = np.dtype(src_dtype).itemsize
    dst_bytes = np.dtype(dst_dtype).itemsize
    shape = (3, 2)
    if src_bytes < dst_bytes:
        shape = (3, 2, dst_bytes // src_bytes)
    raw = RNG.integers(0, 256, size=int(np.prod(shape)) * src_bytes,
                       dtype=np.uint8)
    x = raw.view(src_dtype).reshape(shape)
    if np.issubdtype(src_dtype, np.floating) or np.issubdtype(
            src_dtype, np.complexfloating):
        x = np.nan_to_num(x, nan=1.5, posinf=2.5, neginf=-2.5)
    want = np.ascontiguousarray(x).view(dst_dtype)
    if src_bytes > dst_bytes:
        want = want.reshape(shape + (src_bytes // dst_bytes,))
    elif src_bytes < dst_bytes:
        want = want.reshape(want.shape[:-1])
    dims = ",".join(map(str, want.shape))
    in_dims = ",".join(map(str, x.shape))
    hlo = (f"HloModule m\nENTRY e {{\n  x = {src}[{in_dims}] parameter(0)\n"
           f"  b = {dst}[{dims}] bitcast-convert(x)\n"
           f"  n = {dst}[{dims}] negate(b)\n"
           f"  ROOT r = ({dst}[{dims}], {dst}[{dims}]) tuple(b, n)\n}}\n")
    out, negated = run(client, hlo, [x])
    assert out.shape == want.shape
    assert out.tobytes() == want.tobytes()
    with np.errstate(all="ignore"):
        assert negated.tobytes() == np.negative(want).tobytes()


@pytest.mark.parametrize("hlo,error,message", [
    ("x = f32[3] parameter(0)\n  ROOT b = u8[3] bitcast-convert(x)",
     pjrt_client.InvalidArgumentError,
     r"bitcast-convert of f32\[3\] gives u8\[3,4\], not u8\[3\]"),
    ("x = u8[3,2] parameter(0)\n  ROOT b = f32[3] bitcast-convert(x)",
     pjrt_client.InvalidArgumentError,
     r"needs a last dimension of 4 \(the width ratio\)"),
    ("x = pred[8] parameter(0)\n  ROOT b = s64[] bitcast-convert(x)",
     pjrt_client.UnimplementedError,
     r"bitcast-convert of pred to s64 is not supported"),
])
def test_bitcast_convert_across_widths_refuses_naming_what_is_wrong(
        client, hlo, error, message):
    with pytest.raises(error, match=message):
        client.compile(f"HloModule m\nENTRY e {{\n  {hlo}\n}}\n")
