"""Tridiagonal solves as JAX lowers lax.linalg.tridiagonal_solve:
StableHLO custom calls to lapack_?gtsv_ffi (CPUs) and cusparse_gtsv2_ffi
(GPUs), through a real pjrtd, against the dense solution and a NumPy
transcription of LAPACK's ?gtsv (partial pivoting between adjacent rows),
whose info and overwritten diagonals pjrtd gives too."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays
from test_lapack_calls import MLIR, PREFIX, sample, tensor


def gtsv_program(m, n, batch, dtype, target=None):
    t = MLIR[dtype]
    diag = tensor(batch + (m,), t)
    b = tensor(batch + (m, n), t)
    info = tensor(batch, "i32")
    target = target or f"lapack_{PREFIX[dtype]}gtsv_ffi"
    if target.startswith("lapack_"):
        results = f"({diag}, {diag}, {diag}, {b}, {info})"
        returned = "%0#0, %0#1, %0#2, %0#3, %0#4"
        types = f"{diag}, {diag}, {diag}, {b}, {info}"
        count = ":5"
    else:
        results, returned, types, count = b, "%0", b, ""
    return f"""module @jit_tridiagonal_solve {{
  func.func public @main(%arg0: {diag}, %arg1: {diag}, %arg2: {diag},
      %arg3: {b}) -> ({types}) {{
    %0{count} = stablehlo.custom_call @{target}(%arg0, %arg1, %arg2, %arg3)
        {{mhlo.backend_config = {{}}}} :
        ({diag}, {diag}, {diag}, {b}) -> {results}
    return {returned} : {types}
  }}
}}
"""


def gtsv_reference(dl, d, du, b):
    """LAPACK's ?gtsv on one system, in JAX's layout: (dl, d, du, x,
    info) as it leaves them."""
    m = d.shape[0]
    wide = np.complex128 if np.iscomplexobj(b) else np.float64
    low = np.append(dl[1:], 0).astype(wide)
    d = d.astype(wide)
    up = np.append(du[:-1], 0).astype(wide)
    b = b.astype(wide)

    def size(v):
        return abs(v.real) + abs(v.imag)

    info = 0
    for i in range(m - 1):
        if size(d[i]) >= size(low[i]):
            if d[i] == 0:
                info = info or i + 1
                fact = 0
            else:
                fact = low[i] / d[i]
            d[i + 1] -= fact * up[i]
            b[i + 1] -= fact * b[i]
            low[i] = 0
        else:
            fact = d[i] / low[i]
            d[i] = low[i]
            temp = d[i + 1]
            d[i + 1] = up[i] - fact * temp
            low[i] = up[i + 1]
            up[i + 1] = -fact * low[i]
            up[i] = temp
            bi, bi1 = b[i].copy(), b[i + 1].copy()
            b[i] = bi1
            b[i + 1] = bi - fact * bi1
    if d[m - 1] == 0:
        info = info or m
    x = b
    with np.errstate(divide="ignore", invalid="ignore"):  # info != 0
        for i in reversed(range(m)):
            rest = x[i].copy()
            if i + 1 < m:
                rest -= up[i] * x[i + 1]
            if i + 2 < m:
                rest -= low[i] * x[i + 2]
            x[i] = rest / d[i]
    return (np.concatenate([dl[:1], low[:m - 1]]), d,
            np.concatenate([up[:m - 1], du[m - 1:]]), x, info)


def dense(dl, d, du):
    return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("m,n,batch", [(6, 2, ()), (5, 1, (3,)),
                                       (2, 3, ()), (1, 2, (2,)),
                                       (7, 4, (2, 2))])
def test_gtsv_solves_every_system(client, dtype, m, n, batch):
    dl, d, du = (sample(batch + (m,), dtype) for _ in range(3))
    b = sample(batch + (m, n), dtype)
    out_dl, out_d, out_du, x, info = run_arrays(
        client, gtsv_program(m, n, batch, dtype), dl, d, du, b)
    tol = 1e-3 if dtype in (np.float32, np.complex64) else 1e-9
    for idx in np.ndindex(*batch):
        a = dense(dl[idx], d[idx], du[idx]).astype(np.complex128)
        np.testing.assert_allclose(a @ x[idx], b[idx], rtol=tol, atol=tol)
    assert not np.any(info)
    np.testing.assert_array_equal(out_dl[..., :1], dl[..., :1])
    np.testing.assert_array_equal(out_du[..., -1:], du[..., -1:])
    for idx in np.ndindex(*batch):
        want = gtsv_reference(dl[idx], d[idx], du[idx], b[idx])
        for got, expected in zip((out_dl[idx], out_d[idx], out_du[idx],
                                  x[idx]), want):
            np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def test_gtsv_pivots_past_a_zero_diagonal(client):
    """d[0] = 0 needs the row swap: without pivoting this system fails."""
    dl = np.array([0, 1, 2, 1, 3], np.float64)
    d = np.array([0, 4, 0, 5, 2], np.float64)
    du = np.array([2, 1, 3, 1, 0], np.float64)
    b = np.arange(10, dtype=np.float64).reshape(5, 2)
    out_dl, out_d, out_du, x, info = run_arrays(
        client, gtsv_program(5, 2, (), np.float64), dl, d, du, b)
    assert info == 0
    np.testing.assert_allclose(dense(dl, d, du) @ x, b, atol=1e-12)
    want = gtsv_reference(dl, d, du, b)
    np.testing.assert_allclose(out_d, want[1], atol=1e-12)
    np.testing.assert_allclose(out_dl, want[0], atol=1e-12)


def test_gtsv_reports_the_first_zero_pivot(client):
    """[[1, 1, 0], [1, 1, 0], [0, 0, 1]]: eliminating row 1 leaves U[1, 1]
    = 0 with nothing below to pivot on: info 2."""
    dl = np.array([0, 1, 0], np.float64)
    d = np.array([1, 1, 1], np.float64)
    du = np.array([1, 0, 0], np.float64)
    b = np.ones((3, 1))
    *_, info = run_arrays(client, gtsv_program(3, 1, (), np.float64),
                          dl, d, du, b)
    assert info == gtsv_reference(dl, d, du, b)[4] == 2
    # The last pivot alone: [[1, 1], [1, 1]].
    *_, info = run_arrays(client, gtsv_program(2, 1, (), np.float64),
                          np.array([0.0, 1]), np.array([1.0, 1]),
                          np.array([1.0, 0]), np.ones((2, 1)))
    assert info == 2


def test_cusparse_gtsv2_gives_the_solution_alone(client):
    dl, d, du = (sample((2, 6), np.float32) for _ in range(3))
    b = sample((2, 6, 3), np.float32)
    program = gtsv_program(6, 3, (2,), np.float32,
                           target="cusparse_gtsv2_ffi")
    x, = run_arrays(client, program, dl, d, du, b)
    for i in range(2):
        np.testing.assert_allclose(dense(dl[i], d[i], du[i]) @ x[i], b[i],
                                   rtol=1e-3, atol=1e-3)


def test_gtsv_of_mismatched_diagonals_is_refused(client):
    program = gtsv_program(4, 2, (), np.float64).replace(
        "%arg1: tensor<4xf64>", "%arg1: tensor<3xf64>").replace(
        "(tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4x2xf64>) ->",
        "(tensor<4xf64>, tensor<3xf64>, tensor<4xf64>, tensor<4x2xf64>) ->")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("lapack_dgtsv_ffi takes the diagonals dl, d, du [..., m] and "
            "right-hand sides b [..., m, n], all f64; got 4 operand(s), the "
            "first f64[4]") in str(e.value)
