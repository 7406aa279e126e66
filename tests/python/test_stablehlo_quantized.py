"""StableHLO's uniform quantized types (!quant.uniform) through a real
pjrtd: quantize and dequantize per tensor and per axis, storage ranges,
quantized arguments and results, ops on quantized values (the spec's
dequantize_op_quantize), against NumPy; and the errors of bad quantized
types."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays

RNG = np.random.default_rng(20261206)


def quantize(x, scale, zero_point, lo, hi, dtype, axis=None):
    """The spec's quantize in f32: round_nearest_even(clamp(lo, x / scale +
    zero_point, hi)), per axis when `axis` is given."""
    scale = np.asarray(scale, np.float32)
    zero_point = np.asarray(zero_point, np.float32)
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zero_point = zero_point.reshape(shape)
    y = np.clip(x / scale + zero_point, np.float32(lo), np.float32(hi))
    return np.rint(y).astype(dtype)


def dequantize(q, scale, zero_point, axis=None):
    scale = np.asarray(scale, np.float32)
    zero_point = np.asarray(zero_point, np.float32)
    if axis is not None:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zero_point = zero_point.reshape(shape)
    return (q.astype(np.float32) - zero_point) * scale


def test_per_tensor_quantization_rounds_to_even_and_clamps(client):
    # Ties (0.5 steps) round to even; values past the storage range clamp
    # to it, here i8<-100:100> and u8.
    x = np.array([0.25, 0.75, 1.25, -0.25, 2.5e3, -7e3, 3.0, -1.0],
                 np.float32)
    program = """func.func @main(%x: tensor<8xf32>)
    -> (tensor<8xi8>, tensor<8xui8>, tensor<8xf32>) {
  %q = stablehlo.uniform_quantize %x : (tensor<8xf32>)
      -> tensor<8x!quant.uniform<i8<-100:100>:f32, 0.5:3>>
  %u = stablehlo.uniform_quantize %x : (tensor<8xf32>)
      -> tensor<8x!quant.uniform<u8:f32, 2.5e-1:128>>
  %d = stablehlo.uniform_dequantize %q
      : (tensor<8x!quant.uniform<i8<-100:100>:f32, 0.5:3>>) -> tensor<8xf32>
  %qb = stablehlo.bitcast_convert %q
      : (tensor<8x!quant.uniform<i8<-100:100>:f32, 0.5:3>>) -> tensor<8xi8>
  %ub = stablehlo.bitcast_convert %u
      : (tensor<8x!quant.uniform<u8:f32, 2.5e-1:128>>) -> tensor<8xui8>
  return %qb, %ub, %d : tensor<8xi8>, tensor<8xui8>, tensor<8xf32>
}
"""
    q, u, d = run_arrays(client, program, x)
    want_q = quantize(x, 0.5, 3, -100, 100, np.int8)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(u, quantize(x, 0.25, 128, 0, 255,
                                              np.uint8))
    np.testing.assert_array_equal(d, dequantize(want_q, 0.5, 3))
    assert list(q[:4]) == [4, 4, 6, 2]  # 3.5, 4.5, 5.5 and 2.5 to even


def test_per_axis_quantization_takes_a_scale_per_channel(client):
    x = RNG.standard_normal((3, 4)).astype(np.float32) * 4
    scales = [0.1, 0.02, 0.5, 1.5]
    zero_points = [0, -3, 7, 100]
    body = ", ".join(f"{s}:{z}" for s, z in zip(scales, zero_points))
    qtype = f"!quant.uniform<i8:f32:1, {{{body}}}>"
    program = f"""func.func @main(%x: tensor<3x4xf32>)
    -> (tensor<3x4xi8>, tensor<3x4xf32>) {{
  %q = "stablehlo.uniform_quantize"(%x) : (tensor<3x4xf32>)
      -> tensor<3x4x{qtype}>
  %d = "stablehlo.uniform_dequantize"(%q) : (tensor<3x4x{qtype}>)
      -> tensor<3x4xf32>
  %b = "stablehlo.bitcast_convert"(%q) : (tensor<3x4x{qtype}>)
      -> tensor<3x4xi8>
  return %b, %d : tensor<3x4xi8>, tensor<3x4xf32>
}}
"""
    q, d = run_arrays(client, program, x)
    want = quantize(x, scales, zero_points, -128, 127, np.int8, axis=1)
    np.testing.assert_array_equal(q, want)
    np.testing.assert_allclose(d, dequantize(want, scales, zero_points,
                                             axis=1), rtol=1e-6)


def test_quantized_arguments_and_results_hold_their_storage_integers(client):
    # An int8 matmul as a quantizing exporter writes it: the operands
    # arrive quantized, the dot runs on what they express (the spec's
    # dequantize_op_quantize) and its result is quantized again.
    a = RNG.integers(-128, 128, (2, 3), dtype=np.int8)
    w = RNG.integers(-128, 128, (3, 4), dtype=np.int8)
    program = """func.func @main(
    %a: tensor<2x3x!quant.uniform<i8:f32, 0.05:-2>>,
    %w: tensor<3x4x!quant.uniform<i8:f32:1, {0.01, 0.02, 0.03, 0.04}>>)
    -> (tensor<2x4x!quant.uniform<i8:f32, 0.1:5>>, tensor<2x4xi1>) {
  %r = "stablehlo.dot_general"(%a, %w) {
    dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1],
                                           rhs_contracting_dimensions = [0]>
  } : (tensor<2x3x!quant.uniform<i8:f32, 0.05:-2>>,
       tensor<3x4x!quant.uniform<i8:f32:1, {0.01, 0.02, 0.03, 0.04}>>)
      -> tensor<2x4x!quant.uniform<i8:f32, 0.1:5>>
  %c = "stablehlo.compare"(%r, %r) {
    comparison_direction = #stablehlo<comparison_direction GE>
  } : (tensor<2x4x!quant.uniform<i8:f32, 0.1:5>>,
       tensor<2x4x!quant.uniform<i8:f32, 0.1:5>>) -> tensor<2x4xi1>
  return %r, %c : tensor<2x4x!quant.uniform<i8:f32, 0.1:5>>, tensor<2x4xi1>
}
"""
    r, c = run_arrays(client, program, a, w)
    product = dequantize(a, 0.05, -2) @ dequantize(
        w, [0.01, 0.02, 0.03, 0.04], 0, axis=1)
    assert r.dtype == np.int8
    np.testing.assert_array_equal(
        r, quantize(product.astype(np.float32), 0.1, 5, -128, 127, np.int8))
    assert c.all()


@pytest.mark.parametrize("qtype,message", [
    ("!quant.uniform<i8:f32, 0.0:1>", "scale 0.0 is not a positive"),
    ("!quant.uniform<i8:f32, 0.5:200>", "zero point 200 is outside"),
    ("!quant.uniform<i8<-5:300>:f32, 0.5>", r"storage range \[-5, 300\]"),
    ("!quant.uniform<i64:f32, 0.5>", "quantized storage type i64"),
    ("!quant.uniform<i8:i32, 0.5>", "the expressed type is f16, bf16"),
])
def test_bad_quantized_types_are_refused_by_what_is_wrong(client, qtype,
                                                          message):
    program = f"""func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x{qtype}>
  %d = stablehlo.uniform_dequantize %q : (tensor<2x{qtype}>)
      -> tensor<2xf32>
  return %d : tensor<2xf32>
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(program)


def test_per_axis_scales_must_match_the_dimension(client):
    program = """func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xi8> {
  %q = stablehlo.uniform_quantize %x : (tensor<2x3xf32>)
      -> tensor<2x3x!quant.uniform<i8:f32:1, {0.1, 0.2}>>
  %b = stablehlo.bitcast_convert %q
      : (tensor<2x3x!quant.uniform<i8:f32:1, {0.1, 0.2}>>) -> tensor<2x3xi8>
  return %b : tensor<2x3xi8>
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"along dimension 1 needs a scale per index of "
                             r"it; it has 2"):
        client.compile(program)


def test_quantized_types_where_pjrtd_does_not_take_them_are_refused(client):
    constant = """func.func @main() -> tensor<2xi8> {
  %c = stablehlo.constant dense<[1, 2]>
      : tensor<2x!quant.uniform<i8:f32, 0.5:3>>
  %b = stablehlo.bitcast_convert %c
      : (tensor<2x!quant.uniform<i8:f32, 0.5:3>>) -> tensor<2xi8>
  return %b : tensor<2xi8>
}
"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match="supported in op signatures and function"):
        client.compile(constant)
    region = """func.func @main(%x: tensor<4x!quant.uniform<i8:f32, 0.5:3>>,
    %i: tensor<!quant.uniform<i8:f32, 0.5:3>>)
    -> tensor<!quant.uniform<i8:f32, 0.5:3>> {
  %r = "stablehlo.reduce"(%x, %i) ({
  ^bb0(%a: tensor<!quant.uniform<i8:f32, 0.5:3>>,
       %b: tensor<!quant.uniform<i8:f32, 0.5:3>>):
    %s = "stablehlo.add"(%a, %b) : (tensor<!quant.uniform<i8:f32, 0.5:3>>,
        tensor<!quant.uniform<i8:f32, 0.5:3>>)
        -> tensor<!quant.uniform<i8:f32, 0.5:3>>
    "stablehlo.return"(%s) : (tensor<!quant.uniform<i8:f32, 0.5:3>>) -> ()
  }) {dimensions = array<i64: 0>}
      : (tensor<4x!quant.uniform<i8:f32, 0.5:3>>,
         tensor<!quant.uniform<i8:f32, 0.5:3>>)
      -> tensor<!quant.uniform<i8:f32, 0.5:3>>
  return %r : tensor<!quant.uniform<i8:f32, 0.5:3>>
}
"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match="quantized values in regions"):
        client.compile(region)
