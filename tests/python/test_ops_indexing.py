"""gather, scatter, sort and top-k on a real pjrtd against numpy and the
loop references of xla_reference.py, with XLA's edge cases: start indices
clamped into range, out-of-bounds scatter windows skipped, batching
dimensions, NaN keys in total order, stability, comparators of any
shape."""

from __future__ import annotations

import numpy as np
import pytest

import pjrt_client
import xla_reference as ref
from hlo_harness import run


def shape(ty: str, dims) -> str:
    return f"{ty}[{','.join(str(d) for d in dims)}]"


def gather_program(operand, indices, out_dims, ty="f32", ity="s32",
                   **dn) -> str:
    def lst(v):
        return "{" + ",".join(str(x) for x in v) + "}"
    extra = ""
    if dn.get("operand_batching_dims"):
        extra = (f", operand_batching_dims={lst(dn['operand_batching_dims'])}"
                 ", start_indices_batching_dims="
                 f"{lst(dn['start_indices_batching_dims'])}")
    return f"""
HloModule g
ENTRY e {{
  o = {shape(ty, operand)} parameter(0)
  i = {shape(ity, indices)} parameter(1)
  ROOT g = {shape(ty, out_dims)} gather(o, i),
    offset_dims={lst(dn['offset_dims'])},
    collapsed_slice_dims={lst(dn['collapsed_slice_dims'])},
    start_index_map={lst(dn['start_index_map'])},
    index_vector_dim={dn['index_vector_dim']},
    slice_sizes={lst(dn['slice_sizes'])}{extra}
}}
"""


GATHERS = [
    # Embedding lookup, as JAX prints it (ids with a trailing vector dim).
    ((8, 5), (3, 4, 1), dict(offset_dims=[2], collapsed_slice_dims=[0],
                             start_index_map=[0], index_vector_dim=2,
                             slice_sizes=[1, 5])),
    # Scalar indices: index_vector_dim == rank.
    ((8, 5), (6,), dict(offset_dims=[1], collapsed_slice_dims=[0],
                        start_index_map=[0], index_vector_dim=1,
                        slice_sizes=[1, 5])),
    # 2-D windows at 2-D starts, clamped near the edges.
    ((6, 7), (4, 2), dict(offset_dims=[1, 2], collapsed_slice_dims=[],
                          start_index_map=[0, 1], index_vector_dim=1,
                          slice_sizes=[3, 2])),
    # index_vector_dim first, start_index_map permuted, offset dim first.
    ((5, 6, 7), (2, 3), dict(offset_dims=[0], collapsed_slice_dims=[1, 2],
                             start_index_map=[2, 1], index_vector_dim=0,
                             slice_sizes=[4, 1, 1])),
    # Batching dimensions (vmap of a gather).
    ((3, 9, 4), (3, 5, 1), dict(offset_dims=[2], collapsed_slice_dims=[1],
                                start_index_map=[1], index_vector_dim=2,
                                slice_sizes=[1, 1, 4],
                                operand_batching_dims=[0],
                                start_indices_batching_dims=[0])),
]


@pytest.mark.parametrize("operand,indices,dn", GATHERS)
@pytest.mark.parametrize("ity", ["s32", "s64", "u32"])
def test_gather_matches_the_reference_with_clamping(client, operand, indices,
                                                    dn, ity):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(operand).astype(np.float32)
    low = 0 if ity.startswith("u") else -3
    idx = rng.integers(low, max(operand) + 3, indices).astype(
        np.dtype(ity.replace("s", "int").replace("u", "uint")))
    want = ref.gather(x, idx, **dn)
    (out,) = run(client, gather_program(operand, indices, want.shape,
                                        ity=ity, **dn),
                 [("f32", x), (ity, idx)])
    np.testing.assert_array_equal(out, want)


def test_gather_of_zero_rows_and_zero_size_slices(client):
    dn = dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
              index_vector_dim=1, slice_sizes=[1, 0])
    x = np.ones((4, 3), np.float32)
    (out,) = run(client, gather_program((4, 3), (0,), (0, 0), **dn),
                 [("f32", x), ("s32", np.zeros(0, np.int32))])
    assert out.shape == (0, 0)


def scatter_program(operand, indices, updates, region, ty="f32", n=1,
                    **dn) -> str:
    def lst(v):
        return "{" + ",".join(str(x) for x in v) + "}"
    params = "\n".join(f"  o{k} = {shape(ty, operand)} parameter({k})"
                       for k in range(n))
    params += f"\n  i = {shape('s32', indices)} parameter({n})"
    params += "\n" + "\n".join(
        f"  u{k} = {shape(ty, updates)} parameter({n + 1 + k})"
        for k in range(n))
    out = shape(ty, operand) if n == 1 else \
        "(" + ", ".join([shape(ty, operand)] * n) + ")"
    extra = ""
    if dn.get("input_batching_dims"):
        extra = (f", input_batching_dims={lst(dn['input_batching_dims'])}"
                 ", scatter_indices_batching_dims="
                 f"{lst(dn['scatter_indices_batching_dims'])}")
    ops = ", ".join([f"o{k}" for k in range(n)] + ["i"] +
                    [f"u{k}" for k in range(n)])
    return f"""
HloModule s
{region}
ENTRY e {{
{params}
  ROOT s = {out} scatter({ops}),
    update_window_dims={lst(dn['update_window_dims'])},
    inserted_window_dims={lst(dn['inserted_window_dims'])},
    scatter_dims_to_operand_dims={lst(dn['scatter_dims_to_operand_dims'])},
    index_vector_dim={dn['index_vector_dim']}{extra}, to_apply=f
}}
"""


ADD = """f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}"""
SET = """f {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}"""
MUL_PLUS_ONE = """f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT s = f32[] add(m, f32[] constant(1))
}"""

SCATTERS = [
    # The gradient of an embedding lookup: rows added at (repeated) ids.
    ((8, 5), (3, 4, 1), (3, 4, 5),
     dict(update_window_dims=[2], inserted_window_dims=[0],
          scatter_dims_to_operand_dims=[0], index_vector_dim=2)),
    # .at[i].set on scalars.
    ((10,), (6,), (6,),
     dict(update_window_dims=[], inserted_window_dims=[0],
          scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
    # 2-D windows at 2-D starts; those crossing an edge are skipped.
    ((6, 7), (5, 2), (5, 3, 2),
     dict(update_window_dims=[1, 2], inserted_window_dims=[],
          scatter_dims_to_operand_dims=[0, 1], index_vector_dim=1)),
    # Batching dimensions.
    ((3, 9, 4), (3, 5, 1), (3, 5, 4),
     dict(update_window_dims=[2], inserted_window_dims=[1],
          scatter_dims_to_operand_dims=[1], index_vector_dim=2,
          input_batching_dims=[0], scatter_indices_batching_dims=[0])),
]


@pytest.mark.parametrize("operand,indices,updates,dn", SCATTERS)
@pytest.mark.parametrize("region,combine", [
    (ADD, lambda a, b: [a[0] + b[0]]),
    (SET, lambda a, b: [b[0]]),
    (MUL_PLUS_ONE, lambda a, b: [np.float32(a[0] * b[0] + 1)]),
])
def test_scatter_matches_the_reference_skipping_out_of_bounds_windows(
        client, operand, indices, updates, dn, region, combine):
    rng = np.random.default_rng(2)
    x = rng.integers(-4, 5, operand).astype(np.float32)
    # Few distinct ids: repeats; some negative or past the end.
    idx = rng.integers(-2, max(operand) + 2, indices).astype(np.int32)
    upd = rng.integers(-4, 5, updates).astype(np.float32)
    if region is SET:
        # Repeated ids with .set: XLA leaves the order open; keep ids unique
        # (per batch, with batching dimensions).
        groups = indices[0] if dn.get("input_batching_dims") else 1
        per = int(np.prod(indices)) // groups
        idx = np.stack([rng.permutation(max(operand) + 4)[:per] - 2
                        for _ in range(groups)]).reshape(indices).astype(
                            np.int32)
    (want,) = ref.scatter([x], idx, [upd], combine, **dn)
    (out,) = run(client, scatter_program(operand, indices, updates, region,
                                         **dn),
                 [("f32", x), ("s32", idx), ("f32", upd)])
    np.testing.assert_array_equal(out, want)


def test_variadic_scatter_updates_every_operand_together(client):
    region = """f {
  a0 = f32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = f32[] parameter(3)
  bigger = pred[] compare(b0, a0), direction=GT
  m0 = f32[] select(bigger, b0, a0)
  m1 = f32[] select(bigger, b1, a1)
  ROOT t = (f32[], f32[]) tuple(m0, m1)
}"""
    dn = dict(update_window_dims=[], inserted_window_dims=[0],
              scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    x = np.full(5, -np.inf, np.float32)
    ids = np.zeros(5, np.float32)
    idx = np.array([1, 3, 1, 4, 3, 1], np.int32)
    vals = np.array([2, 7, 5, 1, 3, 4], np.float32)
    pos = np.arange(6, dtype=np.float32)

    def combine(a, b):
        return [b[0], b[1]] if b[0] > a[0] else [a[0], a[1]]
    want = ref.scatter([x, ids], idx, [vals, pos], combine, **dn)
    out = run(client, scatter_program((5,), (6,), (6,), region, n=2, **dn),
              [("f32", x), ("f32", ids), ("s32", idx), ("f32", vals),
               ("f32", pos)])
    np.testing.assert_array_equal(out[0], want[0])
    np.testing.assert_array_equal(out[1], want[1])


@pytest.mark.parametrize("bad,message", [
    ("update_window_dims={1}, inserted_window_dims={}",
     "update_window_dims"),
    ("update_window_dims={}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0,1}", "scatter_dims_to_operand_dims"),
])
def test_inconsistent_scatter_dimension_numbers_are_invalid(
        client, bad, message):
    attrs = bad if "scatter_dims" in bad else \
        bad + ", scatter_dims_to_operand_dims={0}"
    program = f"""
HloModule s
{ADD}
ENTRY e {{
  o = f32[10] parameter(0)
  i = s32[6] parameter(1)
  u = f32[6] parameter(2)
  ROOT s = f32[10] scatter(o, i, u), {attrs}, index_vector_dim=1, to_apply=f
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(program)


def test_gather_with_a_collapsed_dimension_wider_than_one_is_invalid(client):
    program = gather_program((8, 5), (3, 1), (3, 5), offset_dims=[1],
                             collapsed_slice_dims=[0], start_index_map=[0],
                             index_vector_dim=1, slice_sizes=[2, 5])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"slice_sizes\[0\]=2 .* collapsed"):
        client.compile(program)


# --- sort -------------------------------------------------------------------

def sort_program(dims, types, comparator, dim=0, stable=False) -> str:
    params = "\n".join(f"  p{k} = {shape(t, dims)} parameter({k})"
                       for k, t in enumerate(types))
    out = shape(types[0], dims) if len(types) == 1 else \
        "(" + ", ".join(shape(t, dims) for t in types) + ")"
    ops = ", ".join(f"p{k}" for k in range(len(types)))
    return f"""
HloModule sort
{comparator}
ENTRY e {{
{params}
  ROOT s = {out} sort({ops}), dimensions={{{dim}}},
    is_stable={'true' if stable else 'false'}, to_apply=cmp
}}
"""


def less(ty, direction="LT", total=True, operands=1):
    params = "\n".join(
        f"  p{k}.{side} = {ty if k == 0 else 's32'}[] parameter({2 * k + j})"
        for k in range(operands) for j, side in enumerate(["l", "r"]))
    kind = ", type=TOTALORDER" if total else ""
    return f"""cmp {{
{params}
  ROOT c = pred[] compare(p0.l, p0.r), direction={direction}{kind}
}}"""


@pytest.mark.parametrize("ty", ["f32", "f64", "f16", "s32", "u8", "s64"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort_keys_with_a_plain_comparator(client, ty, direction):
    rng = np.random.default_rng(3)
    dtype = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
             "s32": np.int32, "u8": np.uint8, "s64": np.int64}[ty]
    x = rng.integers(0 if ty == "u8" else -60, 60, (7, 33)).astype(dtype)
    comparator = less(ty, direction, total=ty.startswith("f"))
    (out,) = run(client, sort_program((7, 33), [ty], comparator, dim=1),
                 [(ty, x)])
    want = np.sort(x, axis=1)
    np.testing.assert_array_equal(out, want if direction == "LT"
                                  else want[:, ::-1])


def test_sort_with_nan_keys_follows_total_order(client):
    x = np.array([3, np.nan, -0.0, -np.inf, 0.0, -np.nan, 1, np.inf],
                 np.float32)
    (out,) = run(client, sort_program((8,), ["f32"], less("f32")),
                 [("f32", x)])
    bits = out.view(np.uint32)
    want = np.array([-np.nan, -np.inf, -0.0, 0.0, 1, 3, np.inf, np.nan],
                    np.float32).view(np.uint32)
    # -nan has the sign bit; every NaN keeps its payload.
    assert bits[0] == x.view(np.uint32)[5] and bits[-1] == x.view(
        np.uint32)[1]
    np.testing.assert_array_equal(bits[1:-1], want[1:-1])


def test_stable_key_value_sort_along_the_first_dimension(client):
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 4, (50, 3)).astype(np.float32)
    values = np.arange(150, dtype=np.int32).reshape(50, 3)
    k, v = run(client, sort_program((50, 3), ["f32", "s32"],
                                    less("f32", operands=2), dim=0,
                                    stable=True),
               [("f32", keys), ("s32", values)])
    order = np.argsort(keys, axis=0, kind="stable")
    np.testing.assert_array_equal(k, np.take_along_axis(keys, order, 0))
    np.testing.assert_array_equal(v, np.take_along_axis(values, order, 0))


def test_sort_with_a_lexicographic_comparator(client):
    comparator = """cmp {
  a.l = s32[] parameter(0)
  a.r = s32[] parameter(1)
  b.l = s32[] parameter(2)
  b.r = s32[] parameter(3)
  lt = pred[] compare(a.l, a.r), direction=LT
  eq = pred[] compare(a.l, a.r), direction=EQ
  blt = pred[] compare(b.l, b.r), direction=GT
  tie = pred[] and(eq, blt)
  ROOT c = pred[] or(lt, tie)
}"""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 5, 64).astype(np.int32)
    b = rng.integers(0, 100, 64).astype(np.int32)
    x, y = run(client, sort_program((64,), ["s32", "s32"], comparator,
                                    stable=True),
               [("s32", a), ("s32", b)])
    order = sorted(range(64), key=lambda i: (a[i], -b[i]))
    np.testing.assert_array_equal(x, a[order])
    np.testing.assert_array_equal(y, b[order])


def test_an_inconsistent_comparator_never_crashes_the_daemon(client):
    comparator = """cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=NE
}"""
    x = np.random.default_rng(6).standard_normal(4096).astype(np.float32)
    (out,) = run(client, sort_program((4096,), ["f32"], comparator),
                 [("f32", x)])
    np.testing.assert_array_equal(np.sort(out), np.sort(x))


def test_a_comparator_with_the_wrong_signature_is_invalid(client):
    comparator = """cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}"""
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="comparator cmp returns f32"):
        client.compile(sort_program((8,), ["f32"], comparator))


@pytest.mark.parametrize("spelling", ["topk", "custom-call"])
def test_top_k_returns_the_largest_first_and_lower_indices_on_ties(
        client, spelling):
    x = np.array([[1, 5, 3, 5, -1, np.nan], [0, 0, 0, 2, 2, 1]], np.float32)
    if spelling == "topk":
        op = "topk(x), k=3, largest=true"
    else:
        op = 'custom-call(x), custom_call_target="TopK"'
    program = f"""
HloModule t
ENTRY e {{
  x = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) {op}
}}
"""
    values, indices = run(client, program, [("f32", x)])
    np.testing.assert_array_equal(indices, [[5, 1, 3], [3, 4, 5]])
    np.testing.assert_array_equal(values[1], [2, 2, 1])
    assert np.isnan(values[0, 0]) and list(values[0, 1:]) == [5, 5]


def test_top_k_with_largest_false_returns_the_smallest_first(client):
    x = np.array([[1, 5, 3, 5, -1, np.nan], [0, 2, 0, 2, 2, 1]], np.float32)
    program = """
HloModule t
ENTRY e {
  x = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=false
}
"""
    values, indices = run(client, program, [("f32", x)])
    np.testing.assert_array_equal(indices, [[4, 0, 2], [0, 2, 5]])
    np.testing.assert_array_equal(values, [[-1, 1, 3], [0, 0, 1]])


def test_top_k_with_a_largest_that_is_not_a_boolean_is_invalid(client):
    program = """
HloModule t
ENTRY e {
  x = f32[6] parameter(0)
  ROOT t = (f32[2], s32[2]) topk(x), k=2, largest=maybe
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="largest=maybe must be true or false"):
        client.compile(program)


def test_sorting_one_long_row_shares_it_between_threads(client):
    n = (1 << 20) + 3
    x = np.random.default_rng(14).standard_normal(n).astype(np.float32)
    x[::1000] = np.float32(0.5)  # ties
    x[7::5001] = np.nan  # above +inf in the total order
    x[9::7001] = -np.inf
    for direction in ["LT", "GT"]:
        (out,) = run(client, sort_program((n,), ["f32"],
                                          less("f32", direction)),
                     [("f32", x)])
        want = np.sort(x)
        np.testing.assert_array_equal(out, want if direction == "LT"
                                      else want[::-1])
    keys = np.random.default_rng(15).integers(0, 50, n).astype(np.int32)
    k, v = run(client, sort_program((n,), ["s32", "s32"],
                                    less("s32", total=False, operands=2),
                                    stable=True),
               [("s32", keys), ("s32", np.arange(n, dtype=np.int32))])
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(k, keys[order])
    np.testing.assert_array_equal(v, order)


def test_a_sort_whose_working_memory_exceeds_the_device_is_refused(client):
    # 2^27 keys with values: the sort's working memory is scratch, counted
    # against the device's 1 GiB, not host memory taken behind its back.
    program = """
HloModule big
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = s32[134217728] iota(), iota_dimension=0
  s = (s32[134217728], s32[134217728]) sort(k, k), dimensions={0},
    to_apply=cmp
  ROOT r = s32[] reduce(s32[134217728] get-tuple-element(s), index=0,
    s32[] constant(0)), dimensions={0}, to_apply=add
}
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
"""
    with pytest.raises(pjrt_client.ResourceExhaustedError, match="bytes"):
        run(client, program, [])
