"""reduce-window, select-and-scatter and convolution on a real pjrtd against
the loop references of xla_reference.py: padding (negative too), strides,
base and window dilation, variadic and arbitrary regions, empty windows,
every dim_labels order, feature and batch groups, window reversal."""

from __future__ import annotations

import numpy as np
import pytest

import pjrt_client
import xla_reference as ref
from hlo_harness import bf16_bits, bf16_values, run


def dims(v) -> str:
    return ",".join(str(d) for d in v)


def window_attr(size, stride=None, padding=None, base=None, dil=None,
                reversal=None) -> str:
    parts = [f"size={'x'.join(map(str, size))}"]
    if stride:
        parts.append(f"stride={'x'.join(map(str, stride))}")
    if padding:
        parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in padding))
    if base:
        parts.append(f"lhs_dilate={'x'.join(map(str, base))}")
    if dil:
        parts.append(f"rhs_dilate={'x'.join(map(str, dil))}")
    if reversal:
        parts.append("rhs_reversal=" + "x".join(str(int(r)) for r in reversal))
    return "window={" + " ".join(parts) + "}"


REDUCERS = {
    "add": ("add", lambda a, v: [a[0] + v[0]], 0.0),
    "max": ("maximum", lambda a, v: [max(a[0], v[0])], -np.inf),
}


@pytest.mark.parametrize("reducer", ["add", "max"])
@pytest.mark.parametrize("size,stride,padding,base,dil", [
    ([2, 2], [2, 2], None, None, None),                 # pooling
    ([3, 3], [1, 1], [(1, 1), (1, 1)], None, None),     # same padding
    ([5, 1], [1, 1], [(4, 0), (0, 0)], None, None),     # cumulative sum
    ([2, 3], [1, 2], [(-1, 2), (0, -1)], None, None),   # negative padding
    ([2, 2], [1, 1], [(1, 1), (0, 0)], [2, 1], None),   # base dilation
    ([2, 2], [2, 1], None, None, [2, 3]),               # window dilation
    ([7, 1], [1, 1], None, None, None),                 # no full window
])
def test_reduce_window_matches_the_reference(client, reducer, size, stride,
                                             padding, base, dil):
    op, combine, init = REDUCERS[reducer]
    x = np.random.default_rng(7).integers(-9, 9, (6, 5)).astype(np.float32)
    (want,) = ref.reduce_window([x], [np.float32(init)], combine, size=size,
                                stride=stride, padding=padding, base=base,
                                dil=dil)
    program = f"""
HloModule rw
f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] {op}(a, b)
}}
ENTRY e {{
  x = f32[6,5] parameter(0)
  i = f32[] constant({'-inf' if init == -np.inf else init})
  ROOT r = f32[{dims(want.shape)}] reduce-window(x, i),
    {window_attr(size, stride, padding, base, dil)}, to_apply=f
}}
"""
    (out,) = run(client, program, [("f32", x)])
    np.testing.assert_array_equal(out, want)


def test_variadic_reduce_window_argmax_with_a_region(client):
    x = np.random.default_rng(8).standard_normal((9,)).astype(np.float32)
    pos = np.arange(9, dtype=np.int32)
    program = """
HloModule argmax
f {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(bv, av), direction=GT
  v = f32[] select(gt, bv, av)
  i = s32[] select(gt, bi, ai)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[9] parameter(0)
  p = s32[9] parameter(1)
  ninf = f32[] constant(-inf)
  m1 = s32[] constant(-1)
  ROOT r = (f32[4], s32[4]) reduce-window(x, p, ninf, m1),
    window={size=3 stride=2}, to_apply=f
}
"""
    values, indices = run(client, program, [("f32", x), ("s32", pos)])

    def combine(a, v):
        return [v[0], v[1]] if v[0] > a[0] else a
    want = ref.reduce_window([x, pos], [np.float32(-np.inf), -1], combine,
                             size=[3], stride=[2])
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(indices, want[1])


def test_reduce_window_of_an_empty_array_and_an_empty_window(client):
    program = """
HloModule rw
f {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}
ENTRY e {
  x = s32[0,3] parameter(0)
  y = s32[3] parameter(1)
  z = s32[] constant(5)
  a = s32[0,2] reduce-window(x, z), window={size=1x2}, to_apply=f
  b = s32[4] reduce-window(y, z), window={size=0}, to_apply=f
  ROOT t = (s32[0,2], s32[4]) tuple(a, b)
}
"""
    a, b = run(client, program, [("s32", np.zeros((0, 3), np.int32)),
                                 ("s32", np.arange(3, dtype=np.int32))])
    assert a.shape == (0, 2)
    np.testing.assert_array_equal(b, [5, 5, 5, 5])


@pytest.mark.parametrize("padding", [None, [(1, 1), (0, 1)]])
def test_select_and_scatter_is_the_gradient_of_max_pooling(client, padding):
    rng = np.random.default_rng(9)
    x = rng.permutation(42).reshape(6, 7).astype(np.float32)
    size, stride = [2, 3], [2, 2]
    (pooled,) = ref.reduce_window([x], [np.float32(-np.inf)],
                                  lambda a, v: [max(a[0], v[0])], size=size,
                                  stride=stride, padding=padding)
    source = rng.integers(1, 9, pooled.shape).astype(np.float32)
    want = ref.select_and_scatter(x, source, np.float32(0),
                                  lambda a, b: a >= b, lambda a, b: a + b,
                                  size=size, stride=stride, padding=padding)
    program = f"""
HloModule sas
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[6,7] parameter(0)
  s = f32[{dims(source.shape)}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[6,7] select-and-scatter(x, s, z),
    {window_attr(size, stride, padding)}, select=ge, scatter=add
}}
"""
    (out,) = run(client, program, [("f32", x), ("f32", source)])
    np.testing.assert_array_equal(out, want)


def conv_program(lhs, rhs, out, labels, ty="f32", out_ty=None, **attrs):
    extra = []
    fg = attrs.pop("feature_group_count", 1)
    bg = attrs.pop("batch_group_count", 1)
    if fg > 1:
        extra.append(f"feature_group_count={fg}")
    if bg > 1:
        extra.append(f"batch_group_count={bg}")
    window = window_attr(**attrs)
    extra_text = ", " + ", ".join(extra) if extra else ""
    return f"""
HloModule conv
ENTRY e {{
  l = {ty}[{dims(lhs)}] parameter(0)
  r = {ty}[{dims(rhs)}] parameter(1)
  ROOT c = {out_ty or ty}[{dims(out)}] convolution(l, r), {window},
    dim_labels={labels}{extra_text}
}}
"""


CONVS = [
    # (labels, lhs, rhs, window attrs, groups)
    ("b01f_01io->b01f", (2, 6, 5, 3), (3, 3, 3, 4),
     dict(size=[3, 3], padding=[(1, 1), (1, 1)]), {}),
    ("bf01_oi01->bf01", (2, 3, 7, 6), (4, 3, 2, 3),
     dict(size=[2, 3], stride=[2, 1]), {}),
    ("b01f_01io->b01f", (1, 5, 5, 2), (3, 3, 2, 2),
     dict(size=[3, 3], padding=[(2, -1), (0, 1)], base=[2, 1], dil=[1, 2],
          reversal=[True, False]), {}),
    # Depthwise: one group per input feature.
    ("b01f_01io->b01f", (2, 5, 5, 4), (3, 3, 1, 8),
     dict(size=[3, 3]), dict(feature_group_count=4)),
    # Batch groups (the filter gradient of a depthwise convolution).
    ("f01b_i01o->01bf", (3, 4, 4, 4), (3, 2, 2, 6),
     dict(size=[2, 2]), dict(batch_group_count=2)),
    # 1-D and 3-D.
    ("b0f_0io->b0f", (2, 9, 3), (4, 3, 5), dict(size=[4], stride=[2]), {}),
    ("b012f_012io->b012f", (1, 4, 3, 3, 2), (2, 2, 2, 2, 3),
     dict(size=[2, 2, 2]), {}),
]


def out_shape(labels, lhs, rhs, window, groups):
    ins, rest = labels.split("_")
    ker, outs = rest.split("->")
    spatial = len(ins) - 2
    in_sp = [lhs[ins.index(str(i))] for i in range(spatial)]
    padding = window.get("padding") or [(0, 0)] * spatial
    sp = ref.window_output_shape(in_sp, window["size"],
                                 window.get("stride") or [1] * spatial,
                                 padding, window.get("base") or [1] * spatial,
                                 window.get("dil") or [1] * spatial)
    out = [0] * len(outs)
    out[outs.index("b")] = lhs[ins.index("b")] // groups.get(
        "batch_group_count", 1)
    out[outs.index("f")] = rhs[ker.index("o")]
    for i in range(spatial):
        out[outs.index(str(i))] = sp[i]
    return out


@pytest.mark.parametrize("labels,lhs,rhs,window,groups", CONVS)
def test_convolution_matches_the_reference(client, labels, lhs, rhs, window,
                                           groups):
    rng = np.random.default_rng(11)
    x = rng.integers(-3, 4, lhs).astype(np.float32)
    w = rng.integers(-3, 4, rhs).astype(np.float32)
    want = ref.convolution(
        x, w, labels, stride=window.get("stride"),
        padding=window.get("padding"), lhs_dilation=window.get("base"),
        rhs_dilation=window.get("dil"), reversal=window.get("reversal"),
        **groups)
    assert list(want.shape) == out_shape(labels, lhs, rhs, window, groups)
    program = conv_program(lhs, rhs, want.shape, labels, **window, **groups)
    (out,) = run(client, program, [("f32", x), ("f32", w)])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("ty,out_ty", [("bf16", "bf16"), ("f16", "f32"),
                                       ("s32", "s32"), ("f64", "f64")])
def test_convolution_in_other_types(client, ty, out_ty):
    rng = np.random.default_rng(12)
    lhs, rhs = (2, 6, 6, 3), (3, 3, 3, 2)
    x = rng.integers(-3, 4, lhs)
    w = rng.integers(-3, 4, rhs)
    want = ref.convolution(x.astype(np.float64), w.astype(np.float64),
                           "b01f_01io->b01f")
    cast = {"bf16": np.float32, "f16": np.float16, "s32": np.int32,
            "f64": np.float64}[ty]
    program = conv_program(lhs, rhs, want.shape, "b01f_01io->b01f", ty=ty,
                           out_ty=out_ty, size=[3, 3])
    (out,) = run(client, program, [(ty, x.astype(cast)),
                                   (ty, w.astype(cast))])
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_pred_convolution_is_true_where_any_product_is(client):
    rng = np.random.default_rng(17)
    lhs, rhs = (1, 5, 5, 2), (3, 3, 2, 2)
    x = rng.random(lhs) < 0.3
    w = rng.random(rhs) < 0.3
    counts = ref.convolution(x.astype(np.float64), w.astype(np.float64),
                             "b01f_01io->b01f")
    assert counts.max() > 1  # sums of several products: still true, as 1
    program = conv_program(lhs, rhs, counts.shape, "b01f_01io->b01f",
                           ty="pred", out_ty="pred", size=[3, 3])
    (out,) = run(client, program, [("pred", x), ("pred", w)])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out.view(np.uint8), counts != 0)


def test_bf16_convolution_rounds_like_bf16(client):
    rng = np.random.default_rng(13)
    x = bf16_values(bf16_bits(rng.standard_normal((1, 8, 8, 16)).astype(
        np.float32)))
    w = bf16_values(bf16_bits(rng.standard_normal((3, 3, 16, 8)).astype(
        np.float32)))
    want = ref.convolution(x, w, "b01f_01io->b01f")
    program = conv_program((1, 8, 8, 16), (3, 3, 16, 8), want.shape,
                           "b01f_01io->b01f", ty="bf16", size=[3, 3])
    (out,) = run(client, program, [("bf16", x), ("bf16", w)])
    np.testing.assert_allclose(out, want, rtol=1 / 128, atol=1 / 64)


@pytest.mark.parametrize("labels,message", [
    ("b01f_01io->b0f", "three labelings of one rank"),
    ("b0f_0io->b0f", "dim_labels describe rank 3"),
    ("bb1f_01io->b01f", "each appear once"),
])
def test_convolution_labels_that_do_not_match_are_invalid(client, labels,
                                                          message):
    program = conv_program((1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 2), labels,
                           size=[3, 3])
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(program)
