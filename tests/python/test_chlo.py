"""CHLO ops that become more than one HLO instruction: chlo.scan (a while
over the scanned dimension) and chlo.ragged_dot (its three modes), against
NumPy."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays


def _ragged_rows(lhs, rhs, sizes):
    """Mode 1: row i of lhs times the rhs of its group; rows past the last
    group are zeros."""
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.float32)
    start = 0
    for g, size in enumerate(sizes):
        end = start + size
        out[start:end] = lhs[start:end] @ rhs[g]
        start = end
    return out


def test_ragged_dot_rows_take_their_groups_rhs(client):
    """group_sizes a parameter (not a constant), summing to fewer rows than
    lhs has: the rows past them are zeros; an empty group takes none."""
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((9, 4)).astype(np.float32)
    rhs = rng.standard_normal((4, 4, 3)).astype(np.float32)
    program = """func.func @main(%l: tensor<9x4xf32>, %r: tensor<4x4x3xf32>,
                 %s: tensor<4xi32>) -> tensor<9x3xf32> {
  %0 = "chlo.ragged_dot"(%l, %r, %s) {
    ragged_dot_dimension_numbers = #chlo.ragged_dot<
      lhs_batching_dimensions = [], rhs_batching_dimensions = [],
      lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1],
      lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>
  } : (tensor<9x4xf32>, tensor<4x4x3xf32>, tensor<4xi32>) -> tensor<9x3xf32>
  return %0 : tensor<9x3xf32>
}
"""
    for sizes in ([2, 0, 3, 4], [1, 1, 1, 1], [9, 0, 0, 0]):
        (got,) = run_arrays(client, program, lhs, rhs,
                            np.array(sizes, np.int32))
        np.testing.assert_allclose(got, _ragged_rows(lhs, rhs, sizes),
                                   rtol=1e-5, atol=1e-6, err_msg=str(sizes))


def test_ragged_dot_contracted_gives_one_product_per_group(client):
    """Mode 2, with a batch dimension: [b,m,k] x [b,k,n] -> [g,b,m,n], group
    j multiplying only its own columns of k."""
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((2, 3, 7)).astype(np.float32)
    rhs = rng.standard_normal((2, 7, 5)).astype(np.float32)
    sizes = np.array([3, 0, 2], np.int64)
    program = """func.func @main(%l: tensor<2x3x7xf32>, %r: tensor<2x7x5xf32>,
                 %s: tensor<3xi64>) -> tensor<3x2x3x5xf32> {
  %0 = "chlo.ragged_dot"(%l, %r, %s) {
    ragged_dot_dimension_numbers = #chlo.ragged_dot<
      lhs_batching_dimensions = [0], rhs_batching_dimensions = [0],
      lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1],
      lhs_ragged_dimensions = [2], rhs_group_dimensions = []>
  } : (tensor<2x3x7xf32>, tensor<2x7x5xf32>, tensor<3xi64>)
    -> tensor<3x2x3x5xf32>
  return %0 : tensor<3x2x3x5xf32>
}
"""
    (got,) = run_arrays(client, program, lhs, rhs, sizes)
    want = np.zeros((3, 2, 3, 5), np.float32)
    start = 0
    for g, size in enumerate(sizes):
        cols = slice(start, start + size)
        want[g] = np.einsum("bmk,bkn->bmn", lhs[:, :, cols], rhs[:, cols, :])
        start += size
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not got[1].any()  # the empty group


def test_ragged_dot_batch_zeroes_batches_past_the_groups(client):
    """Mode 3: a ragged batch dimension is the batched product, the batches
    past the sum of the group sizes zeros."""
    lhs = np.arange(4 * 2 * 3, dtype=np.int32).reshape(4, 2, 3)
    rhs = np.arange(4 * 3 * 2, dtype=np.int32).reshape(4, 3, 2) - 5
    program = """func.func @main(%l: tensor<4x2x3xi32>, %r: tensor<4x3x2xi32>,
                 %s: tensor<2xi32>) -> tensor<4x2x2xi32> {
  %0 = "chlo.ragged_dot"(%l, %r, %s) {
    ragged_dot_dimension_numbers = #chlo.ragged_dot<
      lhs_batching_dimensions = [0], rhs_batching_dimensions = [0],
      lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1],
      lhs_ragged_dimensions = [0], rhs_group_dimensions = []>
  } : (tensor<4x2x3xi32>, tensor<4x3x2xi32>, tensor<2xi32>)
    -> tensor<4x2x2xi32>
  return %0 : tensor<4x2x2xi32>
}
"""
    (got,) = run_arrays(client, program, lhs, rhs, np.array([1, 2], np.int32))
    want = np.einsum("bmk,bkn->bmn", lhs, rhs)
    want[3] = 0
    np.testing.assert_array_equal(got, want)


def test_ragged_dot_refuses_a_group_dimension_it_cannot_place(client):
    program = """func.func @main(%l: tensor<4x3xf32>, %r: tensor<2x3x5xf32>,
                 %s: tensor<2xi32>) -> tensor<4x5xf32> {
  %0 = "chlo.ragged_dot"(%l, %r, %s) {
    ragged_dot_dimension_numbers = #chlo.ragged_dot<
      lhs_batching_dimensions = [], rhs_batching_dimensions = [],
      lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1],
      lhs_ragged_dimensions = [0], rhs_group_dimensions = []>
  } : (tensor<4x3xf32>, tensor<2x3x5xf32>, tensor<2xi32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "rhs group dimensions {}: a ragged non-contracting" in str(e.value)


def test_scan_carries_outputs_and_values_from_outside(client):
    """A reverse scan along dimension 1 of a 3-D input with two outputs and
    one carry, its body using a value defined outside it."""
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) / 8
    program = """func.func @main(%x: tensor<2x4x3xf32>,
                 %scale: tensor<2x3xf32>)
    -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x3xf32>) {
  %init = stablehlo.constant dense<1.0> : tensor<2x3xf32>
  %0:3 = chlo.scan(%x) inits(%init) dimension=1
      attributes {is_reverse = true} {
  ^bb0(%slice: tensor<2x3xf32>, %acc: tensor<2x3xf32>):
    %m = stablehlo.multiply %acc, %slice : tensor<2x3xf32>
    %n = stablehlo.add %m, %scale : tensor<2x3xf32>
    %d = stablehlo.subtract %slice, %acc : tensor<2x3xf32>
    stablehlo.return %n, %d, %n : tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>
  } : (tensor<2x4x3xf32>, tensor<2x3xf32>)
      -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x3xf32>)
  return %0#0, %0#1, %0#2
      : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x3xf32>
}
"""
    scale = np.full((2, 3), 0.25, np.float32)
    out, diff, carry = run_arrays(client, program, x, scale)
    acc = np.ones((2, 3), np.float32)
    want_out = np.zeros_like(x)
    want_diff = np.zeros_like(x)
    for i in reversed(range(4)):
        want_diff[:, i] = x[:, i] - acc
        acc = acc * x[:, i] + scale
        want_out[:, i] = acc
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    np.testing.assert_allclose(diff, want_diff, rtol=1e-6)
    np.testing.assert_allclose(carry, acc, rtol=1e-6)


def test_scan_in_generic_form_without_carries(client):
    """The generic form names its inputs and inits by operandSegmentSizes; a
    scan with no carry maps each slice."""
    program = """func.func @main(%x: tensor<5xi32>, %y: tensor<5xi32>)
    -> tensor<5xi32> {
  %0 = "chlo.scan"(%x, %y) <{dimension = 0 : i64,
      operandSegmentSizes = array<i32: 2, 0>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %m = stablehlo.multiply %a, %b : tensor<i32>
    stablehlo.return %m : tensor<i32>
  }) : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
  return %0 : tensor<5xi32>
}
"""
    x = np.array([1, -2, 3, 4, 5], np.int32)
    y = np.array([7, 7, -1, 0, 2], np.int32)
    (got,) = run_arrays(client, program, x, y)
    np.testing.assert_array_equal(got, x * y)


def test_scan_refuses_inputs_of_different_lengths(client):
    program = """func.func @main(%x: tensor<4xf32>, %y: tensor<3xf32>)
    -> (tensor<4xf32>, tensor<f32>) {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %0:2 = chlo.scan(%x, %y) inits(%init) dimension=0 {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>):
    %s = stablehlo.add %a, %c : tensor<f32>
    stablehlo.return %s, %s : tensor<f32>, tensor<f32>
  } : (tensor<4xf32>, tensor<3xf32>, tensor<f32>)
      -> (tensor<4xf32>, tensor<f32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<f32>
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "input 1 is tensor<3xf32>" in str(e.value)


def test_scan_of_nothing_gives_its_inits(client):
    """A scanned dimension of size 0: empty outputs, the carries as the
    inits were (the body never runs)."""
    program = """func.func @main(%x: tensor<0x3xf32>, %init: tensor<3xf32>)
    -> (tensor<0x3xf32>, tensor<3xf32>) {
  %0:2 = chlo.scan(%x) inits(%init) dimension=0 {
  ^bb0(%s: tensor<3xf32>, %c: tensor<3xf32>):
    %a = stablehlo.add %s, %c : tensor<3xf32>
    stablehlo.return %a, %a : tensor<3xf32>, tensor<3xf32>
  } : (tensor<0x3xf32>, tensor<3xf32>) -> (tensor<0x3xf32>, tensor<3xf32>)
  return %0#0, %0#1 : tensor<0x3xf32>, tensor<3xf32>
}
"""
    init = np.array([1, -2, 3.5], np.float32)
    out, carry = run_arrays(client, program, np.zeros((0, 3), np.float32),
                            init)
    assert out.shape == (0, 3)
    np.testing.assert_array_equal(carry, init)
