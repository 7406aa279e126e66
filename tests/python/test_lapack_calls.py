"""LU and Cholesky as JAX lowers them for CPUs: StableHLO custom calls to
lapack_?getrf_ffi and lapack_?potrf_ffi, through a real pjrtd, against
NumPy references written from LAPACK's definitions (getrf: partial
pivoting by the first largest |a| (|re| + |im| for complex), 1-based
pivots, info the first zero pivot's column; potrf: the factor in one
triangle, the other left as it was, info the first leading minor that is
not positive definite)."""
import re

import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays

RNG = np.random.default_rng(20261207)

MLIR = {np.float32: "f32", np.float64: "f64", np.complex64: "complex<f32>",
        np.complex128: "complex<f64>"}
PREFIX = {np.float32: "s", np.float64: "d", np.complex64: "c",
          np.complex128: "z"}


def tensor(shape, t):
    return "tensor<" + "".join(f"{d}x" for d in shape) + t + ">"


def lu_reference(a):
    """LAPACK's getrf on one matrix: (lu, 1-based pivots, info)."""
    a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    m, n = a.shape
    piv = np.zeros(min(m, n), np.int32)
    info = 0
    for k in range(min(m, n)):
        mag = np.abs(a[k:, k].real) + np.abs(a[k:, k].imag)
        p = k + int(np.argmax(mag))
        piv[k] = p + 1
        a[[k, p]] = a[[p, k]]
        if a[k, k] != 0:
            a[k + 1:, k] *= 1 / a[k, k]
        elif info == 0:
            info = k + 1
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return a, piv, info


def getrf_program(shape, dtype):
    batch = shape[:-2]
    m, n = shape[-2:]
    t = MLIR[dtype]
    a = tensor(shape, t)
    pivots = tensor(batch + (min(m, n),), "i32")
    info = tensor(batch, "i32")
    return f"""module @jit_lu {{
  func.func public @main(%arg0: {a}) -> ({a}, {pivots}, {info}) {{
    %0:3 = stablehlo.custom_call @lapack_{PREFIX[dtype]}getrf_ffi(%arg0)
        {{mhlo.backend_config = {{}}, operand_layouts = [dense<[0, 1]> :
        tensor<2xindex>], output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [0],
        operand_index = 0, operand_tuple_indices = []>], result_layouts =
        [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>,
        dense<> : tensor<0xindex>]}} : ({a}) -> ({a}, {pivots}, {info})
    return %0#0, %0#1, %0#2 : {a}, {pivots}, {info}
  }}
}}
"""


def sample(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (6, 3), (3, 6),
                                   (2, 1, 3, 3)])
def test_getrf_matches_lapacks_partial_pivoting(client, dtype, shape):
    a = sample(shape, dtype)
    lu, piv, info = run_arrays(client, getrf_program(shape, dtype), a)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    for idx in np.ndindex(*shape[:-2]):
        want_lu, want_piv, want_info = lu_reference(a[idx])
        np.testing.assert_array_equal(piv[idx], want_piv)
        assert info[idx] == want_info
        np.testing.assert_allclose(lu[idx], want_lu, rtol=tol, atol=tol)
        # And the factors rebuild the rows as the pivots permuted them.
        m, n = shape[-2:]
        r = min(m, n)
        lower = np.tril(lu[idx][:, :r], -1) + np.eye(m, r)
        upper = np.triu(lu[idx][:r, :])
        rows = np.arange(m)
        for k, p in enumerate(piv[idx]):
            rows[[k, p - 1]] = rows[[p - 1, k]]
        np.testing.assert_allclose(lower @ upper, a[idx][rows], rtol=tol * 10,
                                   atol=tol * 10)


def test_getrf_reports_the_first_zero_pivot(client):
    a = np.array([[1, 2, 3], [2, 4, 6], [0, 0, 1]], np.float64)
    lu, piv, info = run_arrays(client, getrf_program((3, 3), np.float64), a)
    want_lu, want_piv, want_info = lu_reference(a)
    assert want_info == 2 and info == 2
    np.testing.assert_array_equal(piv, want_piv)
    np.testing.assert_allclose(lu, want_lu)


def potrf_program(shape, dtype, lower):
    batch = shape[:-2]
    t = MLIR[dtype]
    a = tensor(shape, t)
    info = tensor(batch, "i32")
    uplo = 76 if lower else 85
    return f"""module @jit_cholesky {{
  func.func public @main(%arg0: {a}) -> ({a}, {info}) {{
    %0:2 = stablehlo.custom_call @lapack_{PREFIX[dtype]}potrf_ffi(%arg0)
        {{mhlo.backend_config = {{uplo = {uplo} : ui8}}, operand_layouts =
        [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [0],
        operand_index = 0, operand_tuple_indices = []>], result_layouts =
        [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]}} :
        ({a}) -> ({a}, {info})
    return %0#0, %0#1 : {a}, {info}
  }}
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_writes_one_triangle(client, dtype, lower):
    x = sample((2, 4, 4), dtype)
    a = x @ np.conj(np.swapaxes(x, -1, -2)) + 4 * np.eye(4, dtype=dtype)
    out, info = run_arrays(client, potrf_program(a.shape, dtype, lower), a)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for i in range(2):
        factor = np.linalg.cholesky(a[i].astype(np.complex128))
        if not lower:
            factor = np.conj(factor.T)
        mine = np.tril if lower else np.triu
        other = np.triu if lower else np.tril
        np.testing.assert_allclose(mine(out[i]), factor, rtol=tol, atol=tol)
        # The other triangle is the operand's, untouched.
        np.testing.assert_array_equal(other(out[i], 1 if lower else -1),
                                      other(a[i], 1 if lower else -1))
        assert info[i] == 0


def test_potrf_reports_the_first_minor_not_positive_definite(client):
    a = np.array([[4, 2, 0], [2, 1, 0], [0, 0, 9]], np.float64)
    _, info = run_arrays(client, potrf_program(a.shape, np.float64, True), a)
    assert info == 2


def test_a_lapack_call_of_the_wrong_type_is_refused(client):
    program = getrf_program((3, 3), np.float32).replace(
        "lapack_sgetrf_ffi", "lapack_dgetrf_ffi")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "lapack_dgetrf_ffi takes one f64 matrix" in str(e.value)


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3)])
def test_cusolver_lu_as_jax_lowers_it_for_gpus(client, shape):
    """cusolver_getrf_ffi (the type from the operand), then the 0-based
    pivots through cu_lu_pivots_to_permutation: the rows of a in the order
    the factorization took them."""
    batch, (m, n) = shape[:-2], shape[-2:]
    r = min(m, n)
    a_t = tensor(shape, "f32")
    piv_t = tensor(batch + (r,), "i32")
    perm_t = tensor(batch + (m,), "i32")
    info_t = tensor(batch, "i32")
    program = f"""module @jit_lu {{
  func.func public @main(%arg0: {a_t}) -> ({a_t}, {piv_t}, {perm_t},
      {info_t}) {{
    %c = stablehlo.constant dense<1> : {piv_t}
    %0:3 = stablehlo.custom_call @cusolver_getrf_ffi(%arg0) {{api_version =
        4 : i32, operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
        output_operand_aliases = [#stablehlo.output_operand_alias<
        output_tuple_indices = [0], operand_index = 0,
        operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> :
        tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> :
        tensor<0xindex>]}} : ({a_t}) -> ({a_t}, {piv_t}, {info_t})
    %1 = stablehlo.subtract %0#1, %c : {piv_t}
    %2 = stablehlo.custom_call @cu_lu_pivots_to_permutation(%1)
        {{api_version = 4 : i32}} : ({piv_t}) -> {perm_t}
    return %0#0, %0#1, %2, %0#2 : {a_t}, {piv_t}, {perm_t}, {info_t}
  }}
}}
"""
    a = sample(shape, np.float32)
    lu, piv, perm, info = run_arrays(client, program, a)
    for idx in np.ndindex(*batch):
        want_lu, want_piv, want_info = lu_reference(a[idx])
        np.testing.assert_array_equal(piv[idx], want_piv)
        np.testing.assert_allclose(lu[idx], want_lu, rtol=1e-4, atol=1e-4)
        rows = np.arange(m)
        for k, p in enumerate(want_piv):
            rows[[k, p - 1]] = rows[[p - 1, k]]
        np.testing.assert_array_equal(perm[idx], rows)
        assert info[idx] == want_info


def trsm_program(a_shape, b_shape, dtype, side, uplo, trans, diag,
                 alpha=False):
    t = MLIR[dtype]
    a, b = tensor(a_shape, t), tensor(b_shape, t)
    operands, types = "%arg0, %arg1", f"{a}, {b}"
    params = f"%arg0: {a}, %arg1: {b}"
    if alpha:
        operands += ", %arg2"
        types += f", tensor<{t}>"
        params += f", %arg2: tensor<{t}>"
    batch = len(a_shape) - 2
    return f"""module @jit_solve_triangular {{
  func.func public @main({params}) -> {b} {{
    %0 = stablehlo.custom_call @lapack_{PREFIX[dtype]}trsm_ffi({operands})
        {{mhlo.backend_config = {{diag = {ord(diag)} : ui8, side =
        {ord(side)} : ui8, trans_x = {ord(trans)} : ui8, uplo = {ord(uplo)}
        : ui8}}, mhlo.frontend_attributes = {{num_batch_dims = "{batch}"}},
        operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> :
        tensor<2xindex>], output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [],
        operand_index = 1, operand_tuple_indices = []>], result_layouts =
        [dense<[0, 1]> : tensor<2xindex>]}} : ({types}) -> {b}
    return %0 : {b}
  }}
}}
"""


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("side,uplo,trans,diag", [
    ("L", "L", "N", "N"), ("L", "U", "T", "U"), ("R", "L", "C", "N"),
    ("R", "U", "N", "U"), ("L", "U", "C", "N")])
def test_trsm_solves_with_the_triangle_it_names(client, dtype, side, uplo,
                                                trans, diag):
    m, n = 4, 3
    k = m if side == "L" else n
    a = sample((2, k, k), dtype) + 4 * np.eye(k, dtype=dtype)
    b = sample((2, m, n), dtype)
    program = trsm_program(a.shape, b.shape, dtype, side, uplo, trans, diag)
    (x,) = run_arrays(client, program, a, b)
    tol = 1e-4 if dtype == np.complex64 else 1e-10
    for i in range(2):
        t = np.tril(a[i]) if uplo == "L" else np.triu(a[i])
        if diag == "U":
            np.fill_diagonal(t, 1)
        op = {"N": t, "T": t.T, "C": np.conj(t.T)}[trans]
        got = op @ x[i] if side == "L" else x[i] @ op
        np.testing.assert_allclose(got, b[i], rtol=tol, atol=tol)


def test_trsm_with_alpha_scales_the_solution(client):
    a = np.triu(sample((3, 3), np.float32)) + 3 * np.eye(3, dtype=np.float32)
    b = sample((3, 2), np.float32)
    program = trsm_program(a.shape, b.shape, np.float32, "L", "U", "N", "N",
                           alpha=True)
    (x,) = run_arrays(client, program, a, b, np.array(2, np.float32))
    np.testing.assert_allclose(a @ x, 2 * b, rtol=1e-4, atol=1e-4)


def test_trsm_without_its_side_is_refused(client):
    program = trsm_program((3, 3), (3, 2), np.float32, "L", "U", "N", "N")
    program = program.replace("side =\n        76 : ui8, ", "")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("lapack_strsm_ffi needs side in its backend_config, one of the "
            "characters LR as a ui8; it has none") in str(e.value)
    # And one that is not a side.
    program = trsm_program((3, 3), (3, 2), np.float32, "L", "U", "N", "N")
    program = program.replace("side =\n        76 : ui8", "side = 88 : ui8")
    assert "side = 88" in program
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("lapack_strsm_ffi needs side in its backend_config, one of the "
            "characters LR as a ui8; got 88") in str(e.value)


def qr_program(shape, dtype):
    batch = shape[:-2]
    t = MLIR[dtype]
    a = tensor(shape, t)
    tau = tensor(batch + (min(shape[-2:]),), t)
    p = PREFIX[dtype]
    org = f"lapack_{p}{'un' if p in 'cz' else 'or'}gqr_ffi"
    return f"""module @jit_qr {{
  func.func public @main(%arg0: {a}) -> ({a}, {tau}, {a}) {{
    %0:2 = stablehlo.custom_call @lapack_{p}geqrf_ffi(%arg0)
        {{mhlo.backend_config = {{}}, operand_layouts = [dense<[0, 1]> :
        tensor<2xindex>], output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [0],
        operand_index = 0, operand_tuple_indices = []>], result_layouts =
        [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}} :
        ({a}) -> ({a}, {tau})
    %1 = stablehlo.custom_call @{org}(%0#0, %0#1) {{mhlo.backend_config =
        {{}}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> :
        tensor<1xindex>], output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [],
        operand_index = 0, operand_tuple_indices = []>], result_layouts =
        [dense<[0, 1]> : tensor<2xindex>]}} : ({a}, {tau}) -> {a}
    return %0#0, %0#1, %1 : {a}, {tau}, {a}
  }}
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 6, 4)])
def test_geqrf_and_orgqr_match_lapack_through_numpy(client, dtype, shape):
    """numpy's qr(mode='raw') is LAPACK's geqrf (its reflectors
    transposed); Q from orgqr is numpy's reduced Q."""
    a = sample(shape, dtype)
    h, tau, q = run_arrays(client, qr_program(shape, dtype), a)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    for idx in np.ndindex(*shape[:-2]):
        want_h, want_tau = np.linalg.qr(a[idx].astype(np.complex128
                                                      if np.iscomplexobj(a)
                                                      else np.float64),
                                        mode="raw")
        np.testing.assert_allclose(h[idx], want_h.T, rtol=tol, atol=tol)
        np.testing.assert_allclose(tau[idx], want_tau, rtol=tol, atol=tol)
        want_q, _ = np.linalg.qr(a[idx].astype(np.complex128))
        n = shape[-1]
        np.testing.assert_allclose(q[idx][:, :min(shape[-2:])], want_q,
                                   rtol=tol * 10, atol=tol * 10)
        assert q.shape[-1] == n


def test_geqrf_of_a_column_already_reduced_takes_tau_zero(client):
    a = np.array([[2, 1], [0, 3], [0, 4]], np.float64)
    h, tau, _ = run_arrays(client, qr_program(a.shape, np.float64), a)
    want_h, want_tau = np.linalg.qr(a, mode="raw")
    assert tau[0] == 0
    np.testing.assert_allclose(h, want_h.T, atol=1e-12)
    np.testing.assert_allclose(tau, want_tau, atol=1e-12)


def test_geqrf_of_a_column_of_zeros_takes_tau_zero(client):
    """alpha and beta are both 0 there: the reflector is the identity, and
    nothing else of the matrix may become NaN."""
    a = np.array([[0, 1, 2], [0, 3, 1], [0, 4, 5], [0, 2, 2]], np.float64)
    h, tau, q = run_arrays(client, qr_program(a.shape, np.float64), a)
    want_h, want_tau = np.linalg.qr(a, mode="raw")
    assert tau[0] == 0
    np.testing.assert_allclose(h, want_h.T, atol=1e-12)
    np.testing.assert_allclose(tau, want_tau, atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)


def syevd_program(shape, dtype, lower):
    batch = shape[:-2]
    t = MLIR[dtype]
    a = tensor(shape, t)
    w = tensor(shape[:-1], {"complex<f32>": "f32",
                            "complex<f64>": "f64"}.get(t, t))
    info = tensor(batch, "i32")
    routine = "heevd" if t.startswith("complex") else "syevd"
    return f"""module @jit_eigh {{
  func.func public @main(%arg0: {a}) -> ({a}, {w}, {info}) {{
    %0:3 = stablehlo.custom_call @lapack_{PREFIX[dtype]}{routine}_ffi(%arg0)
        {{mhlo.backend_config = {{mode = 86 : ui8, uplo = {76 if lower else 85}
        : ui8}}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
        output_operand_aliases = [#stablehlo.output_operand_alias<
        output_tuple_indices = [0], operand_index = 0,
        operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> :
        tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> :
        tensor<0xindex>]}} : ({a}) -> ({a}, {w}, {info})
    return %0#0, %0#1, %0#2 : {a}, {w}, {info}
  }}
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (1, 1), (2, 8, 8)])
def test_syevd_gives_ascending_values_and_orthonormal_vectors(
        client, dtype, lower, shape):
    x = sample(shape, dtype)
    sym = (x + np.swapaxes(x, -1, -2)) / 2
    # The triangle LAPACK does not read holds garbage.
    n = shape[-1]
    keep = np.tril(np.ones((n, n), bool)) if lower else \
        np.triu(np.ones((n, n), bool))
    a = np.where(keep, sym, 1e3).astype(dtype)
    v, w, info = run_arrays(client, syevd_program(shape, dtype, lower), a)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    for idx in np.ndindex(*shape[:-2]):
        want = np.linalg.eigvalsh(sym[idx].astype(np.float64))
        np.testing.assert_allclose(w[idx], want, rtol=tol, atol=tol)
        np.testing.assert_allclose(sym[idx] @ v[idx], v[idx] * w[idx],
                                   rtol=tol * 10, atol=tol * 10)
        np.testing.assert_allclose(v[idx].T @ v[idx], np.eye(n),
                                   rtol=tol * 10, atol=tol * 10)
    assert not np.any(info)


def test_syevd_with_repeated_eigenvalues(client):
    q, _ = np.linalg.qr(sample((6, 6), np.float64))
    sym = q @ np.diag([2.0, 2.0, 2.0, -1.0, 5.0, 5.0]) @ q.T
    v, w, _ = run_arrays(client, syevd_program((6, 6), np.float64, True), sym)
    np.testing.assert_allclose(w, [-1, 2, 2, 2, 5, 5], atol=1e-10)
    np.testing.assert_allclose(sym @ v, v * w, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(5, 5), (2, 4, 4), (1, 1)])
def test_heevd_gives_real_ascending_values_and_unitary_vectors(
        client, dtype, lower, shape):
    """?heevd reads one triangle, and of the diagonal only the real part."""
    x = sample(shape, dtype)
    herm = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    n = shape[-1]
    keep = np.tril(np.ones((n, n), bool)) if lower else \
        np.triu(np.ones((n, n), bool))
    # An imaginary part on the diagonal, which LAPACK ignores.
    a = (np.where(keep, herm, 1e3 + 7j) + 5j * np.eye(n)).astype(dtype)
    v, w, info = run_arrays(client, syevd_program(shape, dtype, lower), a)
    assert w.dtype == (np.float32 if dtype == np.complex64 else np.float64)
    tol = 2e-4 if dtype == np.complex64 else 1e-10
    for idx in np.ndindex(*shape[:-2]):
        h = herm[idx].astype(np.complex128)
        np.testing.assert_allclose(w[idx], np.linalg.eigvalsh(h), rtol=tol,
                                   atol=tol)
        np.testing.assert_allclose(h @ v[idx], v[idx] * w[idx],
                                   rtol=tol * 10, atol=tol * 10)
        np.testing.assert_allclose(np.conj(v[idx]).T @ v[idx], np.eye(n),
                                   rtol=tol * 10, atol=tol * 10)
    assert not np.any(info)


def test_heevd_with_repeated_eigenvalues(client):
    q, _ = np.linalg.qr(sample((6, 6), np.complex128))
    herm = q @ np.diag([3.0, 3.0, -2.0, -2.0, -2.0, 0.5]) @ np.conj(q).T
    v, w, _ = run_arrays(client, syevd_program((6, 6), np.complex128, True),
                         herm)
    np.testing.assert_allclose(w, [-2, -2, -2, 0.5, 3, 3], atol=1e-10)
    np.testing.assert_allclose(herm @ v, v * w, atol=1e-9)
    np.testing.assert_allclose(np.conj(v).T @ v, np.eye(6), atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_cusolver_syevd_as_jax_lowers_eigh_for_gpus(client, dtype, lower):
    """One name for every type; the triangle named by a `lower` flag."""
    flag = "true" if lower else "false"
    program = re.sub(r"lapack_\w+evd_ffi", "cusolver_syevd_ffi",
                     syevd_program((2, 4, 4), dtype, lower))
    program = re.sub(r"uplo = \d+\s*: ui8",
                     f"algorithm = 0 : ui8, lower = {flag}", program)
    assert "cusolver_syevd_ffi" in program and "lower =" in program
    x = sample((2, 4, 4), dtype)
    herm = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    keep = np.tril(np.ones((4, 4), bool)) if lower else \
        np.triu(np.ones((4, 4), bool))
    a = np.where(keep, herm, 77).astype(dtype)
    v, w, info = run_arrays(client, program, a)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    for i in range(2):
        np.testing.assert_allclose(w[i], np.linalg.eigvalsh(herm[i]),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(herm[i] @ v[i], v[i] * w[i],
                                   rtol=tol * 10, atol=tol * 10)
    assert not np.any(info)


def test_cusolver_qr_as_jax_lowers_it_for_gpus(client):
    program = qr_program((2, 5, 3), np.float64).replace(
        "lapack_dgeqrf_ffi", "cusolver_geqrf_ffi").replace(
        "lapack_dorgqr_ffi", "cusolver_orgqr_ffi")
    a = sample((2, 5, 3), np.float64)
    h, tau, q = run_arrays(client, program, a)
    for i in range(2):
        want_h, want_tau = np.linalg.qr(a[i], mode="raw")
        np.testing.assert_allclose(h[i], want_h.T, atol=1e-10)
        np.testing.assert_allclose(tau[i], want_tau, atol=1e-10)
        np.testing.assert_allclose(q[i], np.linalg.qr(a[i])[0], atol=1e-10)


def geqp3_program(shape, dtype):
    batch = shape[:-2]
    t = MLIR[dtype]
    a = tensor(shape, t)
    jpvt = tensor(batch + (shape[-1],), "i32")
    tau = tensor(batch + (min(shape[-2:]),), t)
    return f"""module @jit_qr {{
  func.func public @main(%arg0: {a}, %arg1: {jpvt}) -> ({a}, {jpvt}, {tau}) {{
    %0:3 = stablehlo.custom_call @lapack_{PREFIX[dtype]}geqp3_ffi(%arg0, %arg1)
        {{mhlo.backend_config = {{}}}} : ({a}, {jpvt}) -> ({a}, {jpvt}, {tau})
    return %0#0, %0#1, %0#2 : {a}, {jpvt}, {tau}
  }}
}}
"""


def pivoted_qr_reference(a, jpvt):
    """The columns ?geqp3 picks: those with a nonzero jpvt first (swapped
    forward in order), then each step the free column with the longest
    remaining part; returns the 1-based pivots."""
    a = a.astype(np.complex128)
    m, n = a.shape
    piv = np.arange(1, n + 1)
    fixed = 0
    for j in range(n):
        if jpvt[j] != 0:
            a[:, [j, fixed]] = a[:, [fixed, j]]
            piv[[j, fixed]] = piv[[fixed, j]]
            fixed += 1
    for k in range(min(m, n)):
        if k >= fixed:
            lengths = np.sum(np.abs(a[k:, k:]) ** 2, axis=0)
            p = k + int(np.argmax(lengths))
            a[:, [k, p]] = a[:, [p, k]]
            piv[[k, p]] = piv[[p, k]]
        x = a[k:, k].copy()
        alpha = x[0]
        norm = np.linalg.norm(x)
        if norm == 0:
            continue
        beta = -np.sign(alpha.real or 1) * norm
        v = x / (alpha - beta)
        v[0] = 1
        tau = (beta - alpha) / beta
        a[k:, k:] -= np.conj(tau) * np.outer(v, np.conj(v) @ a[k:, k:])
    return piv


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("shape", [(5, 4), (4, 6), (2, 6, 3), (3, 3)])
def test_geqp3_pivots_the_longest_column_first(client, dtype, shape):
    a = sample(shape, dtype)
    jpvt = np.zeros(shape[:-2] + (shape[-1],), np.int32)
    h, piv, tau = run_arrays(client, geqp3_program(shape, dtype), a, jpvt)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    k = min(shape[-2:])
    for idx in np.ndindex(*shape[:-2]):
        np.testing.assert_array_equal(piv[idx],
                                      pivoted_qr_reference(a[idx], jpvt[idx]))
        # The factors are geqrf's of the pivoted columns.
        want_h, want_tau = np.linalg.qr(
            a[idx][:, piv[idx] - 1].astype(np.complex128), mode="raw")
        np.testing.assert_allclose(h[idx], want_h.T, rtol=tol, atol=tol)
        np.testing.assert_allclose(tau[idx], want_tau[:k], rtol=tol, atol=tol)
        # R's diagonal does not grow.
        diagonal = np.abs(np.diagonal(h[idx]))
        assert np.all(diagonal[:-1] >= diagonal[1:] * (1 - 1e-4))


def test_geqp3_keeps_the_columns_jpvt_fixes_in_front(client):
    a = sample((5, 4), np.float64)
    jpvt = np.array([0, 1, 0, 1], np.int32)
    _, piv, _ = run_arrays(client, geqp3_program((5, 4), np.float64), a, jpvt)
    assert list(piv[:2]) == [2, 4]
    np.testing.assert_array_equal(piv, pivoted_qr_reference(a, jpvt))
