"""StableHLO's batch_norm_training, batch_norm_inference and
batch_norm_grad through a real pjrtd, against NumPy's batch normalization
(and the spec's own example)."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays
from xla_reference import batch_norm, batch_norm_grad
from xla_reference import batch_norm_moments as moments

RNG = np.random.default_rng(20261206)


def tensor(shape, ty="f32"):
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{ty}>"


@pytest.mark.parametrize("feature", [1, 3])
def test_training_normalizes_with_the_batchs_mean_and_variance(cl, feature):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float64) * 3 + 1
    c = x.shape[feature]
    scale = RNG.uniform(0.5, 2, c)
    offset = RNG.standard_normal(c)
    t, f = tensor(x.shape, "f64"), tensor((c,), "f64")
    program = f"""func.func @main(%x: {t}, %s: {f}, %o: {f})
    -> ({t}, {f}, {f}) {{
  %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o) {{
    epsilon = 1.0e-3 : f32, feature_index = {feature} : i64
  }} : ({t}, {f}, {f}) -> ({t}, {f}, {f})
  return %y, %m, %v : {t}, {f}, {f}
}}
"""
    y, m, v = run_arrays(cl, program, x, scale, offset)
    want_m, want_v = moments(x, feature)
    eps = np.float64(np.float32(1e-3))
    want_y = batch_norm(x, scale, offset, want_m, want_v, eps, feature)
    np.testing.assert_allclose(m, want_m, rtol=1e-12)
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(y, want_y, rtol=1e-9, atol=1e-10)


def test_inference_uses_the_given_mean_and_variance(cl):
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    scale, offset = (RNG.standard_normal(4).astype(np.float32)
                     for _ in range(2))
    mean = RNG.standard_normal(4).astype(np.float32)
    var = RNG.uniform(0.1, 2, 4).astype(np.float32)
    t, f = tensor((6, 4)), tensor((4,))
    program = f"""func.func @main(%x: {t}, %s: {f}, %o: {f}, %m: {f},
                                 %v: {f}) -> {t} {{
  %y = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v) {{
    epsilon = 0.5 : f32, feature_index = 1 : i64
  }} : ({t}, {f}, {f}, {f}, {f}) -> {t}
  return %y : {t}
}}
"""
    (y,) = run_arrays(cl, program, x, scale, offset, mean, var)
    want = scale * (x - mean) / np.sqrt(var + np.float32(0.5)) + offset
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_grad_is_the_gradient_of_training_normalization(cl):
    # With the batch's own mean and variance, grad_operand is the
    # derivative of sum(dy * batch_norm_training(x)) with respect to x:
    # checked against NumPy's textbook backward pass.
    x = RNG.standard_normal((3, 5, 2)).astype(np.float64)
    dy = RNG.standard_normal((3, 5, 2)).astype(np.float64)
    scale = RNG.uniform(0.5, 2, 5)
    mean, var = moments(x, 1)
    eps = 1e-5
    t, f = tensor(x.shape, "f64"), tensor((5,), "f64")
    program = f"""func.func @main(%x: {t}, %s: {f}, %m: {f}, %v: {f},
                                 %dy: {t}) -> ({t}, {f}, {f}) {{
  %gx, %gs, %go = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %dy) {{
    epsilon = 0x3727C5AC : f32, feature_index = 1 : i64
  }} : ({t}, {f}, {f}, {f}, {t}) -> ({t}, {f}, {f})
  return %gx, %gs, %go : {t}, {f}, {f}
}}
"""
    gx, gs, go = run_arrays(cl, program, x, scale, mean, var, dy)
    eps = float(np.float32(eps))  # 0x3727C5AC is 1e-5 as an f32
    want_gx, want_gs, want_go = batch_norm_grad(x, scale, mean, var, dy,
                                                eps, 1)
    np.testing.assert_allclose(go, want_go, rtol=1e-12)
    np.testing.assert_allclose(gs, want_gs, rtol=1e-10)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-9, atol=1e-12)


def test_the_specs_grad_example(cl):
    program = """func.func @main() -> (tensor<2x2x2xf64>, tensor<2xf64>,
                                      tensor<2xf64>) {
  %operand = stablehlo.constant dense<[[[1.0, 2.0], [3.0, 4.0]],
                                       [[3.0, 4.0], [1.0, 2.0]]]>
      : tensor<2x2x2xf64>
  %scale = stablehlo.constant dense<1.0> : tensor<2xf64>
  %mean = stablehlo.constant dense<[2.0, 3.0]> : tensor<2xf64>
  %variance = stablehlo.constant dense<1.0> : tensor<2xf64>
  %grad_output = stablehlo.constant dense<0.1> : tensor<2x2x2xf64>
  %gx, %gs, %go = "stablehlo.batch_norm_grad"(%operand, %scale, %mean,
      %variance, %grad_output) {epsilon = 0.0 : f32, feature_index = 2 : i64}
      : (tensor<2x2x2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>,
         tensor<2x2x2xf64>) -> (tensor<2x2x2xf64>, tensor<2xf64>,
                                tensor<2xf64>)
  return %gx, %gs, %go : tensor<2x2x2xf64>, tensor<2xf64>, tensor<2xf64>
}
"""
    gx, gs, go = run_arrays(cl, program)
    np.testing.assert_allclose(gx, np.zeros((2, 2, 2)), atol=1e-15)
    np.testing.assert_allclose(gs, [0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(go, [0.4, 0.4], rtol=1e-15)


@pytest.mark.parametrize("feature,scale,message", [
    (4, 3, "feature_index 4 is not a dimension of f32"),
    (1, 5, r"operand 1 is f32\[5\]; .* it must be f32\[3\]"),
])
def test_bad_batch_norms_name_the_value(cl, feature, scale, message):
    program = f"""func.func @main(%x: tensor<2x3xf32>, %s: tensor<{scale}xf32>,
                                 %o: tensor<{scale}xf32>) -> tensor<2x3xf32> {{
  %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o) {{
    epsilon = 1.0e-3 : f32, feature_index = {feature} : i64
  }} : (tensor<2x3xf32>, tensor<{scale}xf32>, tensor<{scale}xf32>)
      -> (tensor<2x3xf32>, tensor<{scale}xf32>, tensor<{scale}xf32>)
  return %y : tensor<2x3xf32>
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        cl.compile(program)
