"""HLO text's ragged-dot through a real pjrtd, against a NumPy reference
written from the op's definition (each lhs element takes part only with its
own group): the three modes (a ragged free, contracting or batch
dimension), group sizes shared by every row or given per index of the
dimensions before the ragged one, groups that are empty or leave rows
uncovered, mixed types, and the verifier's errors."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run, shape_str
from xla_reference import ragged_dot

RNG = np.random.default_rng(20261207)


def _sizes(total: int, g: int, shape=()) -> np.ndarray:
    """Group sizes [..., g] with sums at most `total` (some groups empty,
    some rows past the last group)."""
    out = np.zeros(tuple(shape) + (g,), np.int64)
    for idx in np.ndindex(*shape):
        cuts = np.sort(RNG.integers(0, total + 1, g))
        out[idx] = np.diff(np.concatenate([[0], cuts]))
    return out


def _attrs(lb=(), rb=(), lc=(), rc=(), ragged=0, group=None) -> str:
    def b(v):
        return "{" + ",".join(str(x) for x in v) + "}"
    text = ""
    if lb:
        text = f"lhs_batch_dims={b(lb)}, rhs_batch_dims={b(rb)}, "
    text += (f"lhs_contracting_dims={b(lc)}, rhs_contracting_dims={b(rc)}, "
             f"lhs_ragged_dims={{{ragged}}}")
    if group is not None:
        text += f", rhs_group_dims={{{group}}}"
    return text


def _program(lt, lhs_shape, rt, rhs_shape, st, sizes_shape, out_t, out_shape,
             attrs):
    return f"""HloModule ragged

ENTRY main {{
  l = {shape_str(lt, lhs_shape)} parameter(0)
  r = {shape_str(rt, rhs_shape)} parameter(1)
  s = {shape_str(st, sizes_shape)} parameter(2)
  ROOT d = {shape_str(out_t, out_shape)} ragged-dot(l, r, s), {attrs}
}}
"""


def _check(cl, lhs, rhs, sizes, out_shape, *, st="s64", ty="f32",
           out_t=None, rtol=1e-5, **dims):
    out_t = out_t or ty
    program = _program(ty, lhs.shape, ty, rhs.shape, st, sizes.shape, out_t,
                       out_shape, _attrs(**dims))
    (got,) = run(cl, program, [(ty, lhs), (ty, rhs), (st, sizes)])
    want = ragged_dot(lhs.astype(np.float64), rhs.astype(np.float64), sizes,
                      **{"lb": dims.get("lb", ()), "rb": dims.get("rb", ()),
                         "lc": dims.get("lc", ()), "rc": dims.get("rc", ()),
                         "ragged": dims["ragged"],
                         "group": dims.get("group")})
    assert got.shape == tuple(out_shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    return got


@pytest.mark.parametrize("st", ["s32", "s64", "u32"])
def test_rows_take_their_groups_rhs(cl, st):
    # [m, k] x [g, k, n]: each row multiplies its group's matrix; the
    # sizes leave the last rows in no group (zeros) and may be empty.
    lhs = RNG.standard_normal((11, 5)).astype(np.float32)
    rhs = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    sizes = np.array([4, 0, 5])
    got = _check(cl, lhs, rhs, sizes, (11, 7), st=st, lc=(1,), rc=(1,),
                 ragged=0, group=0)
    assert not got[9:].any()
    np.testing.assert_allclose(got[:4], lhs[:4] @ rhs[0], rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(got[4:9], lhs[4:9] @ rhs[2], rtol=1e-5,
                               atol=1e-5)


def test_rows_with_group_sizes_per_leading_index(cl):
    # XLA's own example: group_sizes [19, 3], one set of groups for every
    # index of the lhs dimension before the ragged one.
    lhs = RNG.standard_normal((19, 11, 5)).astype(np.float32)
    rhs = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    sizes = _sizes(11, 3, (19,))
    _check(cl, lhs, rhs, sizes, (19, 11, 7), lc=(2,), rc=(1,), ragged=1,
           group=0)


@pytest.mark.parametrize("per_batch", [False, True])
def test_rows_with_batch_dimensions_and_group_inside_rhs(cl, per_batch):
    # lhs [b, m, k], rhs [k, b, g, n] (batch and group dimensions anywhere).
    lhs = RNG.standard_normal((2, 6, 4)).astype(np.float32)
    rhs = RNG.standard_normal((4, 2, 3, 5)).astype(np.float32)
    sizes = _sizes(6, 3, (2,)) if per_batch else np.array([2, 3, 1])
    _check(cl, lhs, rhs, sizes, (2, 6, 5), lb=(0,), rb=(1,), lc=(2,),
           rc=(0,), ragged=1, group=2)


def test_rows_in_bf16_summed_to_f32(cl):
    lhs = RNG.standard_normal((8, 16)).astype(np.float32)
    rhs = RNG.standard_normal((2, 16, 4)).astype(np.float32)
    # Values bf16 holds exactly, so the reference sees what the daemon does.
    lhs = (lhs * 8).round() / 8
    rhs = (rhs * 8).round() / 8
    sizes = np.array([3, 5], np.int32)
    _check(cl, lhs, rhs, sizes, (8, 4), st="s32", ty="bf16", out_t="f32",
           lc=(1,), rc=(1,), ragged=0, group=0)


@pytest.mark.parametrize("ty", ["f32", "bf16"])
@pytest.mark.parametrize("rc", [1, 2])
def test_many_rows_go_in_tiles_of_their_groups(cl, rc, ty):
    # Rows enough for the loop over tiles (hlo/passes_ragged.cc, Tiled; on
    # the host, for bf16 operands summed into f32: f32 runs a product per
    # group, compiler/host/kernel_ragged_dot.cc): groups that straddle
    # tiles, empty ones, rows past the last group; the rhs [g, k, n] or
    # [g, n, k].
    lhs = RNG.standard_normal((300, 8)).astype(np.float32)
    rhs = RNG.standard_normal((6, 8, 5) if rc == 1 else (6, 5, 8)).astype(
        np.float32)
    # Values bf16 holds exactly, so the reference sees what the daemon does.
    lhs, rhs = (lhs * 8).round() / 8, (rhs * 8).round() / 8
    sizes = np.array([70, 0, 45, 1, 130, 20])
    got = _check(cl, lhs, rhs, sizes, (300, 5), ty=ty, out_t="f32",
                 lc=(1,), rc=(rc,), ragged=0, group=0)
    assert not got[266:].any()
    for _ in range(3):
        _check(cl, lhs, rhs, _sizes(300, 6), (300, 5), ty=ty, out_t="f32",
               lc=(1,), rc=(rc,), ragged=0, group=0)


# The ragged-dots the host runs as one matrix product per group (a 2-D
# lhs, no batch dimensions, f32 or f64 throughout: hlo::IsPlainRaggedDot,
# compiler/host/kernel_ragged_dot.cc), in every layout of their operands,
# each group's matrices read where they lie.
# Wide ones (32 rows and columns and more) go through oneDNN's sgemm in
# f32, with the groups' sub-matrices as its leading dimensions.
@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("lhs_t", [False, True])
@pytest.mark.parametrize("rhs_layout", ["gkn", "gnk", "kgn", "ngk"])
def test_rows_of_a_product_per_group_in_every_layout(cl, ty, wide, lhs_t,
                                                     rhs_layout):
    m, k, n = (200, 40, 48) if wide else (70, 9, 6)
    # The last rows in no group.
    sizes = np.array([64, 0, 100, 20] if wide else [20, 0, 33, 10])
    covered = int(sizes.sum())
    dtype = np.float32 if ty == "f32" else np.float64
    lhs = RNG.standard_normal((k, m) if lhs_t else (m, k)).astype(dtype)
    extent = {"g": 4, "k": k, "n": n}
    rhs = RNG.standard_normal(tuple(extent[c] for c in rhs_layout)).astype(
        dtype)
    got = _check(cl, lhs, rhs, sizes, (m, n), ty=ty,
                 lc=(0 if lhs_t else 1,), rc=(rhs_layout.index("k"),),
                 ragged=1 if lhs_t else 0, group=rhs_layout.index("g"))
    assert not got[covered:].any() and got[covered - 1].any()


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("lhs_k_first", [False, True])
@pytest.mark.parametrize("rhs_k_first", [False, True])
def test_contracted_groups_of_a_product_per_group_in_every_layout(
        cl, ty, wide, lhs_k_first, rhs_k_first):
    big_k, m, n = (50, 40, 48) if wide else (50, 7, 5)
    dtype = np.float32 if ty == "f32" else np.float64
    lhs = RNG.standard_normal((big_k, m) if lhs_k_first else (m, big_k))
    rhs = RNG.standard_normal((big_k, n) if rhs_k_first else (n, big_k))
    # Group 1 is empty (zeros); the last runs past the end and stops there.
    sizes = np.array([12, 0, 30, 20])
    got = _check(cl, lhs.astype(dtype), rhs.astype(dtype), sizes, (4, m, n),
                 ty=ty, lc=(0 if lhs_k_first else 1,),
                 rc=(0 if rhs_k_first else 1,),
                 ragged=0 if lhs_k_first else 1)
    assert not got[1].any() and got[3].any()


def test_a_large_f64_group_goes_in_pieces_across_the_pool(cl):
    # Eigen's GEMM (f64) on a group of 3e7 flops and more: pieces of rows
    # across the host's threads, starting at multiples of 48 rows.
    lhs = RNG.standard_normal((1000, 200))
    rhs = RNG.standard_normal((2, 200, 96))
    program = _program("f64", lhs.shape, "f64", rhs.shape, "s32", (2,),
                       "f64", (1000, 96),
                       _attrs(lc=(1,), rc=(1,), ragged=0, group=0))
    (got,) = run(cl, program, [("f64", lhs), ("f64", rhs),
                               ("s32", np.array([900, 100], np.int32))])
    np.testing.assert_allclose(got[:900], lhs[:900] @ rhs[0], rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(got[900:], lhs[900:] @ rhs[1], rtol=1e-12,
                               atol=1e-12)


def test_sizes_outside_the_rows_count_as_the_nearest_inside(cl):
    # A negative size is an empty group, one past the rows ends at the
    # last row, as the rewrite into dots and masks reads them.
    lhs = RNG.standard_normal((10, 3)).astype(np.float32)
    rhs = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    program = _program("f32", lhs.shape, "f32", rhs.shape, "s32", (3,),
                       "f32", (10, 2),
                       _attrs(lc=(1,), rc=(1,), ragged=0, group=0))

    def apply(sizes):
        return run(cl, program, [("f32", lhs), ("f32", rhs),
                                 ("s32", np.array(sizes, np.int32))])[0]

    np.testing.assert_array_equal(apply([-3, 4, 100]), apply([0, 4, 6]))
    np.testing.assert_array_equal(apply([2, -2**31, 2**31 - 1]),
                                  apply([2, 0, 8]))


def test_tiles_of_groups_past_the_rows_and_of_other_types(cl):
    # Sizes summing past the rows: the groups end at the last row.
    lhs = RNG.standard_normal((256, 16)).astype(np.float32)
    rhs = RNG.standard_normal((8, 16, 4)).astype(np.float32)
    lhs = (lhs * 8).round() / 8
    rhs = (rhs * 8).round() / 8
    sizes = np.array([40, 40, 0, 100, 3, 60, 90, 7], np.int32)
    _check(cl, lhs, rhs, sizes, (256, 4), st="s32", ty="bf16", out_t="f32",
           lc=(1,), rc=(1,), ragged=0, group=0)
    ints = RNG.integers(-9, 9, (128, 6)).astype(np.int32)
    weights = RNG.integers(-9, 9, (4, 6, 3)).astype(np.int32)
    _check(cl, ints, weights, np.array([50, 0, 50, 28]), (128, 3), ty="s32",
           rtol=0, lc=(1,), rc=(1,), ragged=0, group=0)


@pytest.mark.parametrize("lhs_t,rhs_t", [(False, False), (True, True)])
def test_many_contracted_rows_go_in_tiles_of_their_groups(cl, lhs_t, rhs_t):
    # A mixture of experts' weight gradient: [m, k] (or [k, m]) by [m, n]
    # (or [n, m]) contracted along the ragged m, one [k, n] per group,
    # through the loop over tiles; groups that straddle tiles, an empty one
    # (zeros), rows past the last group.
    lhs = RNG.standard_normal((300, 6)).astype(np.float32)
    rhs = RNG.standard_normal((300, 4)).astype(np.float32)
    sizes = np.array([70, 0, 45, 1, 130, 20])
    got = _check(cl, lhs.T if lhs_t else lhs, rhs.T if rhs_t else rhs,
                 sizes, (6, 6, 4), lc=(1 if lhs_t else 0,),
                 rc=(1 if rhs_t else 0,), ragged=1 if lhs_t else 0)
    assert not got[1].any()
    for _ in range(2):
        _check(cl, lhs, rhs[:, :3].copy(), _sizes(300, 6), (6, 6, 3),
               lc=(0,), rc=(0,), ragged=0)


def test_contracted_tiles_of_bf16_sum_in_f32(cl):
    # A bf16 result of the loop over tiles is its f32 sum rounded once, as
    # one dot's would be, not rounded after every tile.
    lhs = (RNG.standard_normal((600, 4)) * 8).round() / 8
    rhs = (RNG.standard_normal((600, 3)) * 8).round() / 8
    sizes = np.array([100, 0, 300, 150, 40, 10])
    program = _program("bf16", lhs.shape, "bf16", rhs.shape, "s64",
                       sizes.shape, "bf16", (6, 4, 3),
                       _attrs(lc=(0,), rc=(0,), ragged=0))
    (got,) = run(cl, program, [("bf16", lhs.astype(np.float32)),
                               ("bf16", rhs.astype(np.float32)),
                               ("s64", sizes)])
    want = ragged_dot(lhs, rhs, sizes, lb=(), rb=(), lc=(0,), rc=(0,),
                      ragged=0, group=None)
    # Within half a bf16 step of the exact sum (one rounding).
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2.0 ** -8,
                               atol=1e-6)


def test_contracted_gives_one_product_per_group(cl):
    # XLA's example: the ragged dimension is the second of two contracting
    # ones; group_sizes [19, 3] per index of the first.
    lhs = RNG.standard_normal((11, 19, 5)).astype(np.float32)
    rhs = RNG.standard_normal((19, 5, 7)).astype(np.float32)
    sizes = _sizes(5, 3, (19,))
    _check(cl, lhs, rhs, sizes, (3, 11, 7), lc=(1, 2), rc=(0, 1), ragged=2)


@pytest.mark.parametrize("per_batch", [False, True])
def test_contracted_with_batch_dimensions(cl, per_batch):
    lhs = RNG.standard_normal((3, 4, 10)).astype(np.float32)
    rhs = RNG.standard_normal((3, 10, 2)).astype(np.float32)
    sizes = _sizes(10, 4, (3,)) if per_batch else np.array([3, 0, 4, 2])
    got = _check(cl, lhs, rhs, sizes, (4, 3, 4, 2), lb=(0,), rb=(0,),
                 lc=(2,), rc=(1,), ragged=2)
    if not per_batch:
        assert not got[1].any()
        np.testing.assert_allclose(got[0], lhs[:, :, :3] @ rhs[:, :3],
                                   rtol=1e-5, atol=1e-5)


def test_ragged_batch_zeroes_batches_past_the_last_group(cl):
    lhs = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    rhs = RNG.standard_normal((5, 4, 2)).astype(np.float32)
    got = _check(cl, lhs, rhs, np.array([1, 2]), (5, 3, 2), lb=(0,),
                 rb=(0,), lc=(2,), rc=(1,), ragged=0)
    assert not got[3:].any() and got[:3].any()


def test_ragged_second_batch_dimension_with_sizes_per_first(cl):
    lhs = RNG.standard_normal((2, 4, 3, 2)).astype(np.float32)
    rhs = RNG.standard_normal((2, 4, 2, 3)).astype(np.float32)
    sizes = np.array([[1, 2], [0, 4]])
    _check(cl, lhs, rhs, sizes, (2, 4, 3, 3), lb=(0, 1), rb=(0, 1),
           lc=(3,), rc=(2,), ragged=1)


def test_integers(cl):
    lhs = RNG.integers(-9, 9, (6, 3)).astype(np.int32)
    rhs = RNG.integers(-9, 9, (2, 3, 4)).astype(np.int32)
    program = _program("s32", lhs.shape, "s32", rhs.shape, "s32", (2,),
                       "s32", (6, 4),
                       _attrs(lc=(1,), rc=(1,), ragged=0, group=0))
    sizes = np.array([2, 3], np.int32)
    (got,) = run(cl, program, [("s32", lhs), ("s32", rhs), ("s32", sizes)])
    want = np.zeros((6, 4), np.int64)
    want[:2] = lhs[:2] @ rhs[0]
    want[2:5] = lhs[2:5] @ rhs[1]
    np.testing.assert_array_equal(got, want)


def test_inside_a_called_computation_with_sizes_from_a_constant(cl):
    program = """HloModule ragged_call

body {
  l = f32[4,2] parameter(0)
  r = f32[2,2,3] parameter(1)
  s = s32[2] constant({1, 3})
  ROOT d = f32[4,3] ragged-dot(l, r, s), lhs_contracting_dims={1},
      rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
}

ENTRY main {
  l = f32[4,2] parameter(0)
  r = f32[2,2,3] parameter(1)
  ROOT c = f32[4,3] call(l, r), to_apply=body
}
"""
    lhs = RNG.standard_normal((4, 2)).astype(np.float32)
    rhs = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    (got,) = run(cl, program, [("f32", lhs), ("f32", rhs)])
    want = np.concatenate([lhs[:1] @ rhs[0], lhs[1:] @ rhs[1]])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lhs,rhs,sizes,out,attrs,message", [
    ("f32[4,3]", "f32[2,3,5]", "s32[3]", "f32[4,5]",
     _attrs(lc=(1,), rc=(1,), ragged=0, group=0),
     "rhs group dimensions {0}: a ragged non-contracting lhs dimension "
     "needs one rhs dimension of the 3 groups; rhs is f32[2,3,5]"),
    ("f32[2,4,3]", "f32[2,3,5]", "s32[4,2]", "f32[2,4,5]",
     _attrs(lc=(2,), rc=(1,), ragged=1, group=0),
     "group_sizes is s32[4,2]; for lhs f32[2,4,3] with ragged dimension 1 "
     "it must be [2] or [2,2]"),
    ("f32[4,3]", "f32[2,3,5]", "f32[2]", "f32[4,5]",
     _attrs(lc=(1,), rc=(1,), ragged=0, group=0),
     "group_sizes is f32[2]; it must hold integers"),
    ("f32[4,3]", "f32[3,5]", "s32[2]", "f32[4,5]",
     _attrs(lc=(1,), rc=(0,), ragged=0),
     "rhs group dimensions {}: a ragged non-contracting lhs dimension"),
    ("f32[4,3]", "f32[3,5]", "s32[2]", "f32[4,5]",
     _attrs(lc=(1,), rc=(0,), ragged=1, group=1),
     "rhs group dimensions {1} must be none: the lhs ragged dimension 1 is "
     "a contracting dimension"),
    ("f32[4,3]", "f32[2,3,5]", "s32[2]", "f32[4,5]",
     _attrs(lc=(1,), rc=(1,), ragged=2, group=0),
     "lhs ragged dimension 2 is out of range for rank 2"),
    ("f32[4,3]", "f32[2,3,5]", "s32[2]", "f32[2,4,5]",
     _attrs(lc=(1,), rc=(1,), ragged=0, group=0),
     "f32[4,5]"),
    ("pred[4,3]", "pred[2,3,5]", "s32[2]", "pred[4,5]",
     _attrs(lc=(1,), rc=(1,), ragged=0, group=0),
     "needs numeric lhs and rhs, not pred"),
])
def test_malformed_ragged_dots_are_refused_by_name(cl, lhs, rhs, sizes, out,
                                                   attrs, message):
    program = f"""HloModule bad

ENTRY main {{
  l = {lhs} parameter(0)
  r = {rhs} parameter(1)
  s = {sizes} parameter(2)
  ROOT d = {out} ragged-dot(l, r, s), {attrs}
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        cl.compile(program)
    assert message in str(e.value)
    assert "%d" in str(e.value)


def test_two_ragged_dimensions_are_refused(cl):
    program = """HloModule bad

ENTRY main {
  l = f32[4,3] parameter(0)
  r = f32[2,3,5] parameter(1)
  s = s32[2] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1},
      rhs_contracting_dims={1}, lhs_ragged_dims={0,1}, rhs_group_dims={0}
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        cl.compile(program)
    assert ("lhs ragged dimensions {0,1} must be exactly one dimension of "
            "lhs f32[4,3]") in str(e.value)
