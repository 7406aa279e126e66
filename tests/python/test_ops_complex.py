"""c64 and c128 through the kernels that run regions on them (sort, scatter,
reduce-window, select-and-scatter, map) and through summing collectives,
on a real pjrtd, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays

RNG = np.random.default_rng(20261206)

CX = {"c64": (np.complex64, "f32", 2e-6),
      "c128": (np.complex128, "f64", 1e-14)}


def complex_values(dtype, shape):
    n = int(np.prod(shape))
    return (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(
        dtype).reshape(shape)


def run(client, hlo, args):
    return run_arrays(client, hlo, *args)


def add_region(ty: str, name: str = "add") -> str:
    return (f"{name} {{\n  p = {ty}[] parameter(0)\n  q = {ty}[] parameter(1)"
            f"\n  ROOT s = {ty}[] add(p, q)\n}}\n")


# --- sort --------------------------------------------------------------------

@pytest.mark.parametrize("ty", sorted(CX))
def test_sort_orders_complex_keys_by_a_lexicographic_comparator(cl, ty):
    # As jnp.sort orders complex numbers: by real part, then imaginary part;
    # the indices ride along (argsort), ties kept in order (is_stable).
    dtype, part, _ = CX[ty]
    x = complex_values(dtype, (3, 40))
    x.real = np.round(x.real * 2) / 2  # equal real parts, often
    x[1, 5] = x[1, 9]  # an exact tie
    hlo = f"""HloModule m
lex {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ra = {part}[] real(a)
  rb = {part}[] real(b)
  ia = {part}[] imag(a)
  ib = {part}[] imag(b)
  lt = pred[] compare(ra, rb), direction=LT
  eq = pred[] compare(ra, rb), direction=EQ
  lti = pred[] compare(ia, ib), direction=LT
  tie = pred[] and(eq, lti)
  ROOT r = pred[] or(lt, tie)
}}
ENTRY e {{
  x = {ty}[3,40] parameter(0)
  i = s32[3,40] iota(), iota_dimension=1
  ROOT s = ({ty}[3,40], s32[3,40]) sort(x, i), dimensions={{1}},
      is_stable=true, to_apply=lex
}}"""
    keys, order = run(cl, hlo, [x])
    want = np.argsort(x, axis=1, kind="stable")  # numpy's order is the same
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(keys, np.take_along_axis(x, want, axis=1))


def test_sort_carries_complex_values_behind_a_real_key(cl):
    k = RNG.permutation(30).astype(np.float32)
    v = complex_values(np.complex128, (30,))
    hlo = """HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = c128[] parameter(2)
  d = c128[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT
}
ENTRY e {
  k = f32[30] parameter(0)
  v = c128[30] parameter(1)
  ROOT s = (f32[30], c128[30]) sort(k, v), dimensions={0}, to_apply=lt
}"""
    keys, values = run(cl, hlo, [k, v])
    order = np.argsort(-k)
    np.testing.assert_array_equal(keys, k[order])
    np.testing.assert_array_equal(values, v[order])


# --- scatter -----------------------------------------------------------------

def scatter_hlo(ty, region, operand, updates, indices, window):
    """A scatter of `updates` rows into `operand` at `indices` (one index
    per row, into dimension 0)."""
    o = ",".join(map(str, operand))
    u = ",".join(map(str, updates))
    return f"""HloModule m
{region}
ENTRY e {{
  x = {ty}[{o}] parameter(0)
  i = s32[{indices},1] parameter(1)
  u = {ty}[{u}] parameter(2)
  ROOT s = {ty}[{o}] scatter(x, i, u), update_window_dims={window},
      inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}},
      index_vector_dim=1, to_apply=combine
}}"""


@pytest.mark.parametrize("ty", sorted(CX))
def test_scatter_add_sums_complex_updates_at_repeated_indices(cl, ty):
    dtype, _, rtol = CX[ty]
    x = complex_values(dtype, (10,))
    idx = np.array([[3], [7], [3], [0], [9], [3], [12], [-1]], np.int32)
    u = complex_values(dtype, (8,))
    (out,) = run(cl, scatter_hlo(ty, add_region(ty, "combine"), [10], [8], 8,
                                 "{}"), [x, idx, u])
    want = x.copy()
    for (at,), value in zip(idx, u):
        if 0 <= at < 10:  # out-of-bounds updates are skipped
            want[at] += value
    np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol)


def test_scatter_adds_complex_rows_as_an_embedding_gradient(cl):
    x = np.zeros((6, 5), np.complex64)
    idx = np.array([[1], [4], [1], [1], [0]], np.int32)
    u = complex_values(np.complex64, (5, 5))
    (out,) = run(cl, scatter_hlo("c64", add_region("c64", "combine"), [6, 5],
                                 [5, 5], 5, "{1}"), [x, idx, u])
    want = x.copy()
    np.add.at(want, idx[:, 0], u)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_scatter_with_a_complex_multiply_region_and_a_replace(cl):
    x = complex_values(np.complex128, (6,))
    idx = np.array([[2], [5], [2]], np.int32)
    u = complex_values(np.complex128, (3,))
    multiply = """combine {
  p = c128[] parameter(0)
  q = c128[] parameter(1)
  m = c128[] multiply(p, q)
  ROOT r = c128[] subtract(m, q)
}"""
    (out,) = run(cl, scatter_hlo("c128", multiply, [6], [3], 3, "{}"),
                 [x, idx, u])
    want = x.copy()
    for (at,), value in zip(idx, u):
        want[at] = want[at] * value - value  # in update order, as XLA does
    np.testing.assert_allclose(out, want, rtol=1e-14)
    replace = """combine {
  p = c128[] parameter(0)
  ROOT q = c128[] parameter(1)
}"""
    idx = np.array([[4], [0], [1]], np.int32)
    (out,) = run(cl, scatter_hlo("c128", replace, [6], [3], 3, "{}"),
                 [x, idx, u])
    want = x.copy()
    want[idx[:, 0]] = u
    np.testing.assert_array_equal(out, want)


# --- windows -----------------------------------------------------------------

@pytest.mark.parametrize("ty", sorted(CX))
def test_reduce_window_cumulative_sum_of_complex_values(cl, ty):
    # jnp.cumsum's form on the CPU: a window as long as the axis, padded
    # before.
    dtype, _, rtol = CX[ty]
    x = complex_values(dtype, (4, 9))
    hlo = f"""HloModule m
{add_region(ty)}
ENTRY e {{
  x = {ty}[4,9] parameter(0)
  z = {ty}[] constant((0, 0))
  ROOT c = {ty}[4,9] reduce-window(x, z), window={{size=1x9 pad=0_0x8_0}},
      to_apply=add
}}"""
    (out,) = run(cl, hlo, [x])
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=rtol * 10,
                               atol=rtol * 10)


def test_reduce_window_of_complex_values_with_strides_and_a_product(cl):
    x = complex_values(np.complex128, (6, 4))
    hlo = """HloModule m
mul {
  p = c128[] parameter(0)
  q = c128[] parameter(1)
  ROOT m = c128[] multiply(p, q)
}
ENTRY e {
  x = c128[6,4] parameter(0)
  one = c128[] constant((1, 0))
  ROOT w = c128[3,2] reduce-window(x, one), window={size=2x2 stride=2x2},
      to_apply=mul
}"""
    (out,) = run(cl, hlo, [x])
    want = x.reshape(3, 2, 2, 2).transpose(0, 2, 1, 3).reshape(3, 2, 4)
    np.testing.assert_allclose(out, np.prod(want, axis=2), rtol=1e-13)


def test_select_and_scatter_sends_complex_values_to_each_windows_maximum(cl):
    # The gradient of a 2x2 max-pool, with a complex upstream gradient.
    x = RNG.permutation(24).astype(np.float32).reshape(4, 6)
    g = complex_values(np.complex64, (2, 3))
    hlo = """HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
add {
  p = c64[] parameter(0)
  q = c64[] parameter(1)
  ROOT s = c64[] add(p, q)
}
ENTRY e {
  x = f32[4,6] parameter(0)
  g = c64[2,3] parameter(1)
  z = c64[] constant((0, 0))
  ROOT s = c64[4,6] select-and-scatter(x, g, z),
      window={size=2x2 stride=2x2}, select=ge, scatter=add
}"""
    (out,) = run(cl, hlo, [x, g])
    want = np.zeros((4, 6), np.complex64)
    for i in range(2):
        for j in range(3):
            w = x[2 * i:2 * i + 2, 2 * j:2 * j + 2]
            a, b = np.unravel_index(np.argmax(w), w.shape)
            want[2 * i + a, 2 * j + b] += g[i, j]
    np.testing.assert_array_equal(out, want)


# --- map ---------------------------------------------------------------------

def test_map_runs_a_complex_computation_per_element(cl):
    x = complex_values(np.complex128, (2, 7))
    y = complex_values(np.complex128, (2, 7))
    hlo = """HloModule m
f {
  a = c128[] parameter(0)
  b = c128[] parameter(1)
  m = c128[] multiply(a, b)
  e = c128[] exponential(a)
  ROOT r = c128[] add(m, e)
}
ENTRY e {
  x = c128[2,7] parameter(0)
  y = c128[2,7] parameter(1)
  ROOT m = c128[2,7] map(x, y), dimensions={0,1}, to_apply=f
}"""
    (out,) = run(cl, hlo, [x, y])
    np.testing.assert_allclose(out, x * y + np.exp(x), rtol=1e-14)


# --- collectives -------------------------------------------------------------

REPLICAS = 3


def replicated(cl, hlo, per_replica):
    if len(cl.devices()) < REPLICAS:
        pytest.skip(f"needs {REPLICAS} devices")
    e = cl.compile(hlo)
    try:
        results = e.execute_replicated([[a] for a in per_replica])
        return [[b.to_numpy() for b in r] for r in results]
    finally:
        e.delete()


@pytest.mark.parametrize("ty", sorted(CX))
def test_all_reduce_sums_complex_values(cl, ty):
    # jax.lax.psum of a complex array.
    dtype, _, rtol = CX[ty]
    xs = [complex_values(dtype, (5, 3)) for _ in range(REPLICAS)]
    hlo = f"""HloModule m, replica_count={REPLICAS}
{add_region(ty)}
ENTRY e {{
  x = {ty}[5,3] parameter(0)
  ROOT s = {ty}[5,3] all-reduce(x), replica_groups={{}}, to_apply=add
}}"""
    results = replicated(cl, hlo, xs)
    for r in range(REPLICAS):
        np.testing.assert_allclose(results[r][0], xs[0] + xs[1] + xs[2],
                                   rtol=rtol * 10, err_msg=f"replica {r}")


@pytest.mark.parametrize("dim", [0, 1])
def test_reduce_scatter_sums_complex_values_and_splits_them(cl, dim):
    shape = (6, 3) if dim == 0 else (2, 6)
    xs = [complex_values(np.complex64, shape) for _ in range(REPLICAS)]
    out = list(shape)
    out[dim] //= REPLICAS
    hlo = f"""HloModule m, replica_count={REPLICAS}
{add_region("c64")}
ENTRY e {{
  x = c64[{shape[0]},{shape[1]}] parameter(0)
  ROOT s = c64[{out[0]},{out[1]}] reduce-scatter(x), replica_groups={{}},
      dimensions={{{dim}}}, to_apply=add
}}"""
    results = replicated(cl, hlo, xs)
    total = xs[0] + xs[1] + xs[2]
    for r, pieces in enumerate(np.split(total, REPLICAS, axis=dim)):
        np.testing.assert_allclose(results[r][0], pieces, rtol=1e-6,
                                   err_msg=f"replica {r}")


def test_complex_products_across_replicas_are_refused_by_name(cl):
    if len(cl.devices()) < REPLICAS:
        pytest.skip(f"needs {REPLICAS} devices")
    hlo = f"""HloModule m, replica_count={REPLICAS}
mul {{
  p = c64[] parameter(0)
  q = c64[] parameter(1)
  ROOT m = c64[] multiply(p, q)
}}
ENTRY e {{
  x = c64[4] parameter(0)
  ROOT s = c64[4] all-reduce(x), replica_groups={{}}, to_apply=mul
}}"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match=r"c64 values with mul.*add only"):
        cl.compile(hlo, num_replicas=REPLICAS)


# --- convolution -------------------------------------------------------------

def test_convolution_of_complex_signals(cl):
    # jnp.convolve's form: a correlation, without conjugation.
    x = complex_values(np.complex64, (2, 10, 3))
    k = complex_values(np.complex64, (4, 3, 5))
    hlo = """HloModule m
ENTRY e {
  x = c64[2,10,3] parameter(0)
  k = c64[4,3,5] parameter(1)
  ROOT c = c64[2,7,5] convolution(x, k), window={size=4},
      dim_labels=b0f_0io->b0f
}"""
    (out,) = run(cl, hlo, [x, k])
    want = np.zeros((2, 7, 5), np.complex128)
    for t in range(4):
        want += np.einsum("bxi,io->bxo", x[:, t:t + 7, :], k[t])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_grouped_strided_padded_convolution_of_c128(cl):
    x = complex_values(np.complex128, (1, 4, 5, 6))  # bf01
    hlo = """HloModule m
ENTRY e {
  x = c128[1,4,5,6] parameter(0)
  k = c128[4,2,2,3] parameter(1)
  ROOT c = c128[1,4,3,3] convolution(x, k),
      window={size=2x3 stride=2x2 pad=1_0x1_1}, dim_labels=bf01_oi01->bf01,
      feature_group_count=2
}"""
    k = complex_values(np.complex128, (4, 2, 2, 3))  # oi01, 2 groups
    (out,) = run(cl, hlo, [x, k])
    padded = np.zeros((1, 4, 6, 8), np.complex128)
    padded[:, :, 1:, 1:7] = x
    want = np.zeros((1, 4, 3, 3), np.complex128)
    for o in range(4):
        g = o // 2  # output features 0-1 read inputs 0-1, 2-3 read 2-3
        for y in range(3):
            for z in range(3):
                window = padded[0, 2 * g:2 * g + 2, 2 * y:2 * y + 2,
                                2 * z:2 * z + 3]
                want[0, o, y, z] = np.sum(window * k[o])
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)
