"""The public HLO corpus (tests/data/hlo-corpus/programs): every program
compiles on a real pjrtd, and those whose results can be computed run and
match numpy. The gather and scatter programs are compiled only (their
results hold ~10^11 elements); their dimension numbers run at a smaller
size in test_ops_indexing.py.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import pjrt_client
import xla_reference as ref
from hlo_harness import bf16_bits, bf16_values, run

PROGRAMS = (pathlib.Path(__file__).resolve().parents[1] / "data" /
            "hlo-corpus" / "programs")
ALL = sorted(p.name for p in PROGRAMS.glob("*.hlo"))


def text(name: str) -> str:
    return (PROGRAMS / name).read_text()


def test_the_corpus_is_all_there():
    assert len(ALL) == 21


@pytest.mark.parametrize("name", ALL)
def test_every_program_compiles(client, name):
    executable = client.compile(text(name))
    executable.delete()


def test_maxtext_train_step_compiles_with_its_whole_module_verified(client):
    # The module is 592 KB of real JAX output: gather, scatter, two while
    # loops over layers, dots and custom-calls. Compiling it verifies every
    # computation; running it needs ~100 GB of activations.
    executable = client.compile(
        text("jax_maxtext_train_step_before_optimization.hlo"))
    executable.delete()


def test_literals_of_every_type_and_nonfinite_values_run(client):
    (small,) = run(client,
                   text("02_literal_rank4_with_index_comments.hlo"), [])
    assert small.shape == (3, 2, 1, 1)
    (finite,) = run(client, text("04_literal_nonfinite_and_isfinite.hlo"), [])
    assert finite.dtype == np.bool_ and finite.shape == (6,)


def test_while_counts_to_five(client):
    assert run(client, text("05_while_scalar_s32.hlo"), [])[0] == 5


def test_reduce_window_with_layout_matches_numpy(client):
    x = np.random.default_rng(6).standard_normal((13, 12, 8, 15)).astype(
        np.float32)
    (out,) = run(client, text("06_reduce_window_nondefault_layout.hlo"),
                 [("f32", x)])
    (want,) = ref.reduce_window([x], [np.float32(0)],
                                lambda a, v: [a[0] + v[0]],
                                size=[1, 1, 7, 1], stride=[1, 4, 1, 1],
                                padding=[(0, 0), (0, 0), (3, 3), (0, 0)])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_convolution_1d_matches_numpy(client):
    x = np.array([[[3.0], [-2.0]]], np.float32)
    w = np.array([[[1.5]]], np.float32)
    (out,) = run(client, text("07_convolution_1d_dim_labels.hlo"),
                 [("f32", x), ("f32", w)])
    np.testing.assert_array_equal(out, x * 1.5)


def test_sort_key_value_matches_a_stable_argsort(client):
    rng = np.random.default_rng(10)
    keys = rng.integers(-50, 50, 1024).astype(np.float32)
    values = np.arange(1024, dtype=np.int32)
    k, v = run(client, text("10_sort_key_value.hlo"),
               [("f32", keys), ("s32", values)])
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(k, keys[order])
    np.testing.assert_array_equal(v, values[order])


def test_indexed_conditional_runs_branch_one(client):
    program = text("11_conditional_indexed_branches.hlo")
    assert run(client, program, [])[0] == 12


def test_dot_with_batch_dimensions_matches_numpy(client):
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 10)).astype(np.float32)
    b = rng.standard_normal((10, 2)).astype(np.float32)
    (out,) = run(client, text("12_dot_general_batch_dims.hlo"),
                 [("f32", a), ("f32", b)])
    np.testing.assert_allclose(out, np.einsum("ik,ki->i", a, b), rtol=1e-5)


def test_pad_with_negative_and_interior_padding_matches_numpy(client):
    x = np.random.default_rng(13).standard_normal((1, 25, 7, 7, 10)).astype(
        np.float32)
    (out,) = run(client, text("13_pad_negative_and_interior.hlo"),
                 [("f32", x)])
    pads = [(0, 0, 0), (0, -10, 0), (0, -1, 0), (-2, -2, 0), (-1, -1, 3)]
    want = x
    for d, (lo, hi, interior) in enumerate(pads):
        if interior:
            n = want.shape[d]
            shape = list(want.shape)
            shape[d] = n + (n - 1) * interior
            spread = np.full(shape, np.float32(-5.123))
            index = [slice(None)] * want.ndim
            index[d] = slice(None, None, interior + 1)
            spread[tuple(index)] = want
            want = spread
        index = [slice(None)] * want.ndim
        index[d] = slice(max(-lo, 0), want.shape[d] - max(-hi, 0))
        want = want[tuple(index)]
        widths = [(0, 0)] * want.ndim
        widths[d] = (max(lo, 0), max(hi, 0))
        want = np.pad(want, widths, constant_values=np.float32(-5.123))
    np.testing.assert_array_equal(out, want)


def test_select_and_scatter_matches_xla(client):
    (out,) = run(client, text("14_select_and_scatter.hlo"), [])
    want = np.zeros((4, 5), np.float32)
    want[1, 2] = 8
    want[2, 2] = 3
    want[3, 3] = 1
    np.testing.assert_array_equal(out.reshape(4, 5), want)


def test_variadic_reduce_argmax_matches_numpy(client):
    rng = np.random.default_rng(15)
    x = rng.standard_normal(1024).astype(np.float32)
    i = np.arange(1024, dtype=np.int32)
    value, index = run(client, text("15_variadic_reduce_argmax.hlo"),
                       [("f32", x), ("s32", i)])
    assert value == x.max() and index == np.argmax(x)


def test_causal_attention_in_bf16_matches_numpy(client):
    rng = np.random.default_rng(16)

    def bf16(shape):
        return bf16_values(bf16_bits(
            rng.standard_normal(shape).astype(np.float32) * 0.5))

    q, k, v = bf16((2, 6, 2048, 128)), bf16((2, 6, 128, 2048)), \
        bf16((2, 6, 2048, 128))
    (out,) = run(client, text("16_jax_causal_attention_softmax_bf16.hlo"),
                 [("bf16", q), ("bf16", k), ("bf16", v)])

    # The program's steps, each rounded to bf16 where it computes in bf16
    # (dots accumulate in f32, as XLA's do).
    def r(x):
        bits = np.asarray(x, np.float32).view(np.uint32)
        even = (bits >> 16) & 1  # round to nearest, ties to even
        bits = (bits + np.uint32(0x7FFF) + even) & np.uint32(0xFFFF0000)
        return bits.view(np.float32).astype(np.float64)
    s = r(np.einsum("bhqd,bhdk->bhqk", q.astype(np.float32),
                    k.astype(np.float32)))
    s = r(s * 2)
    mask = np.triu(np.ones((2048, 2048), bool), 1)
    s = r(s + r(np.where(mask, -2.366e38, 0)))
    e = r(np.exp(r(s - s.max(-1, keepdims=True))))
    total = r(e.astype(np.float32).sum(-1, keepdims=True, dtype=np.float32))
    p = r(e / total)
    want = r(np.einsum("bhqk,bhkd->bhqd", p.astype(np.float32),
                       v.astype(np.float32)))
    # A sum in another order may round an intermediate to the neighbouring
    # bf16 value: rarely (< 0.01% of outputs), and by a bf16 step or two.
    tight = np.isclose(out, want, rtol=2 ** -7, atol=2 ** -12)
    assert (~tight).mean() < 1e-4
    np.testing.assert_allclose(out, want, rtol=2 ** -6, atol=2 ** -6)


def test_f16_min_reduce_of_a_broadcast_is_one(client):
    (out,) = run(client, text("17_jax_reduce_f16_min_newstyle.hlo"), [])
    np.testing.assert_array_equal(out, np.ones(2, np.float16))


def test_dilated_reduce_window_of_s64_matches_numpy(client):
    x = np.random.default_rng(18).integers(-1000, 1000, (8, 10, 12))
    (out,) = run(client, text("18_jax_reduce_window_dilated_oldstyle.hlo"),
                 [("s64", x)])
    (want,) = ref.reduce_window([x], [0], lambda a, v: [a[0] + v[0]],
                                size=[3, 2, 1],
                                padding=[(1, 1), (1, 1), (0, 0)],
                                dil=[1, 2, 2])
    np.testing.assert_array_equal(out, want)


def test_nested_scan_matches_numpy(client):
    (out,) = run(client, text("19_jax_scan_nested_while_no_entry_kw.hlo"), [])
    want = np.arange(1, 9)
    for _ in range(8):
        want = np.cumsum(want)
    np.testing.assert_array_equal(out, want)


def test_scan_with_placement_annotations_matches_numpy(client):
    host, device = run(
        client, text("20_jax_scan_offload_while_memspace_layout.hlo"), [])
    np.testing.assert_array_equal(host, np.ones(4, np.float32))
    np.testing.assert_array_equal(device, np.full(4, 2, np.float32))


def test_the_all_types_literal_program_runs_to_its_c128_root(client):
    (out,) = run(client, text("03_literal_minmax_all_types.hlo"), [])
    np.testing.assert_array_equal(
        out, np.array([-1.79769e308 + 1.79769e308j,
                       1.79769e308 - 1.79769e308j]))


def test_a_program_needing_more_memory_than_the_device_is_refused(client):
    # Compiling is fine; running asks for more scratch than the device has.
    program = """
HloModule big
ENTRY e {
  p = f32[8] parameter(0)
  b = f32[16384,16384,8] broadcast(p), dimensions={2}
  ROOT r = f32[8] reduce(b, f32[] constant(0)), dimensions={0,1},
    to_apply=add
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""
    with pytest.raises(pjrt_client.ResourceExhaustedError, match="bytes"):
        run(client, program, [("f32", np.ones(8, np.float32))])
