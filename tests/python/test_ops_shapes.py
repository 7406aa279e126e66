"""The shape and data-movement ops (iota, broadcast, reshape, transpose,
slice, concatenate, pad, reverse, dynamic slices, tuples, call,
opt-barrier, sharding custom-calls) against numpy references, for every
element type they allow, run through a real pjrtd (the ``cl`` client of
conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_harness import (ALL, NP_DTYPE, NUMERIC, assert_same, dims_attr,
                         rng_for, run, run1, sample, shape_str)


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
