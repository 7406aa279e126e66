"""HLO text's batch-norm-training, batch-norm-inference and batch-norm-grad
through a real pjrtd, against NumPy's batch normalization: tuples and
their elements, every feature dimension, narrow types, a batch norm inside
a called computation, and the verifier's errors."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import round_array, run, run_arrays, shape_str
from xla_reference import batch_norm, batch_norm_grad
from xla_reference import batch_norm_moments as moments

RNG = np.random.default_rng(20261207)


@pytest.mark.parametrize("feature", [0, 1, 3])
def test_training_gives_the_normalized_operand_mean_and_variance(cl, feature):
    x = RNG.standard_normal((2, 3, 4, 5)) * 3 + 1
    c = x.shape[feature]
    scale = RNG.uniform(0.5, 2, c)
    offset = RNG.standard_normal(c)
    t, f = shape_str("f64", x.shape), shape_str("f64", (c,))
    program = f"""HloModule bn_training

ENTRY main {{
  x = {t} parameter(0)
  s = {f} parameter(1)
  o = {f} parameter(2)
  ROOT bn = ({t}, {f}, {f}) batch-norm-training(x, s, o),
      epsilon=0.001, feature_index={feature}
}}
"""
    y, m, v = run_arrays(cl, program, x, scale, offset)
    want_m, want_v = moments(x, feature)
    np.testing.assert_allclose(m, want_m, rtol=1e-12)
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(
        y, batch_norm(x, scale, offset, want_m, want_v, 0.001, feature),
        rtol=1e-9, atol=1e-10)


def test_training_elements_feed_other_ops(cl):
    # As XLA's tests and older JAX programs use it: get-tuple-element of
    # the result, then arithmetic on the normalized value and the moments.
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    scale = RNG.uniform(0.5, 2, 6).astype(np.float32)
    offset = RNG.standard_normal(6).astype(np.float32)
    program = """HloModule bn_elements

ENTRY main {
  x = f32[8,6] parameter(0)
  s = f32[6] parameter(1)
  o = f32[6] parameter(2)
  bn = (f32[8,6], f32[6], f32[6]) batch-norm-training(x, s, o),
      epsilon=0.01, feature_index=1
  y = f32[8,6] get-tuple-element(bn), index=0
  m = f32[6] get-tuple-element(bn), index=1
  v = f32[6] get-tuple-element(bn), index=2
  mv = f32[6] add(m, v)
  two = f32[] constant(2)
  twos = f32[8,6] broadcast(two), dimensions={}
  y2 = f32[8,6] multiply(y, twos)
  ROOT r = (f32[8,6], f32[6]) tuple(y2, mv)
}
"""
    y2, mv = run_arrays(cl, program, x, scale, offset)
    want_m, want_v = moments(x.astype(np.float64), 1)
    np.testing.assert_allclose(mv, want_m + want_v, rtol=1e-5, atol=1e-6)
    want_y = batch_norm(x.astype(np.float64), scale, offset, want_m, want_v,
                        0.01, 1)
    np.testing.assert_allclose(y2, 2 * want_y, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ty,tol", [("f32", 1e-5), ("f16", 2e-2),
                                    ("bf16", 8e-2)])
def test_inference_uses_the_given_mean_and_variance(cl, ty, tol):
    # Inputs exact in the type (bf16 values travel as float32 arrays).
    x = round_array(RNG.standard_normal((5, 4, 3)), ty)
    scale, offset, mean = (round_array(RNG.standard_normal(4), ty)
                           for _ in range(3))
    var = round_array(RNG.uniform(0.1, 2, 4), ty)
    t, f = shape_str(ty, x.shape), shape_str(ty, (4,))
    program = f"""HloModule bn_inference

ENTRY main {{
  x = {t} parameter(0)
  s = {f} parameter(1)
  o = {f} parameter(2)
  m = {f} parameter(3)
  v = {f} parameter(4)
  ROOT y = {t} batch-norm-inference(x, s, o, m, v),
      epsilon=0.5, feature_index=1
}}
"""
    (y,) = run(cl, program, [(ty, a) for a in (x, scale, offset, mean, var)])
    wide = [np.asarray(a, np.float64) for a in (x, scale, offset, mean, var)]
    want = batch_norm(*wide[:3], *wide[3:], 0.5, 1)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


def test_grad_is_the_gradient_of_training_normalization(cl):
    x = RNG.standard_normal((3, 5, 2))
    dy = RNG.standard_normal((3, 5, 2))
    scale = RNG.uniform(0.5, 2, 5)
    mean, var = moments(x, 1)
    eps = 1e-5
    t, f = shape_str("f64", x.shape), shape_str("f64", (5,))
    program = f"""HloModule bn_grad

ENTRY main {{
  x = {t} parameter(0)
  s = {f} parameter(1)
  m = {f} parameter(2)
  v = {f} parameter(3)
  dy = {t} parameter(4)
  ROOT g = ({t}, {f}, {f}) batch-norm-grad(x, s, m, v, dy),
      epsilon={eps}, feature_index=1
}}
"""
    gx, gs, go = run_arrays(cl, program, x, scale, mean, var, dy)
    want_gx, want_gs, want_go = batch_norm_grad(x, scale, mean, var, dy,
                                                eps, 1)
    np.testing.assert_allclose(go, want_go, rtol=1e-12)
    np.testing.assert_allclose(gs, want_gs, rtol=1e-10)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-9, atol=1e-12)


def test_a_batch_norm_inside_a_called_computation(cl):
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    scale = RNG.uniform(0.5, 2, 3).astype(np.float32)
    offset = RNG.standard_normal(3).astype(np.float32)
    program = """HloModule bn_called

norm {
  a = f32[4,3] parameter(0)
  b = f32[3] parameter(1)
  c = f32[3] parameter(2)
  t = (f32[4,3], f32[3], f32[3]) batch-norm-training(a, b, c),
      epsilon=0.001, feature_index=1
  ROOT y = f32[4,3] get-tuple-element(t), index=0
}

ENTRY main {
  x = f32[4,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  ROOT r = f32[4,3] call(x, s, o), to_apply=norm
}
"""
    (y,) = run_arrays(cl, program, x, scale, offset)
    wide = x.astype(np.float64)
    m, v = moments(wide, 1)
    np.testing.assert_allclose(
        y, batch_norm(wide, scale, offset, m, v, 0.001, 1),
        rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("line,message", [
    ("ROOT bn = (f32[4,3], f32[3], f32[3]) batch-norm-training(x, s, o), "
     "epsilon=0.001", "needs the attribute feature_index"),
    ("ROOT bn = (f32[4,3], f32[3], f32[3]) batch-norm-training(x, s, o), "
     "feature_index=1", "needs the attribute epsilon"),
    ("ROOT bn = (f32[4,3], f32[3], f32[3]) batch-norm-training(x, s, o), "
     "epsilon=small, feature_index=1", "epsilon=small"),
    ("ROOT bn = (f32[4,3], f32[4], f32[4]) batch-norm-training(x, s, o), "
     "epsilon=0.001, feature_index=2",
     "feature_index=2 is not a dimension of the operand f32[4,3]"),
    ("ROOT bn = (f32[4,3], f32[4], f32[4]) batch-norm-training(x, s, o), "
     "epsilon=0.001, feature_index=0",
     "operand 1 (%s) is f32[3]; with the operand f32[4,3] and "
     "feature_index=0 it must be f32[4]"),
    ("ROOT bn = (f32[4,3], f32[3]) batch-norm-training(x, s, o), "
     "epsilon=0.001, feature_index=1", "f32[3], f32[3])"),
    ("ROOT bn = f32[4,3] batch-norm-inference(x, s, o), "
     "epsilon=0.001, feature_index=1", "takes 5 operand(s), got 3"),
])
def test_malformed_batch_norms_are_refused_by_name(cl, line, message):
    program = f"""HloModule bn_bad

ENTRY main {{
  x = f32[4,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  {line}
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        cl.compile(program)
    assert message in str(e.value)


def test_an_integer_operand_is_refused_by_name(cl):
    program = """HloModule bn_int

ENTRY main {
  x = s32[4,3] parameter(0)
  s = s32[3] parameter(1)
  o = s32[3] parameter(2)
  ROOT bn = (s32[4,3], s32[3], s32[3]) batch-norm-training(x, s, o),
      epsilon=0.001, feature_index=1
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        cl.compile(program)
    assert "normalizes a floating-point array, not s32[4,3]" in str(e.value)
