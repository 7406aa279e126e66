"""Singular value decompositions as JAX lowers jnp.linalg.svd: StableHLO
custom calls to lapack_?gesdd_ffi and lapack_?gesvd_ffi (CPUs),
cusolver_gesvd_ffi and cusolver_gesvdj_ffi (GPUs), through a real pjrtd.
Checked as LAPACK's results are defined, not bit for bit (the vectors of
an SVD are unique only up to a phase per column): singular values against
NumPy's, descending; U and V^H orthonormal; U S V^H the matrix."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays
from test_lapack_calls import MLIR, PREFIX, sample, tensor

REAL = {"f32": "f32", "f64": "f64", "complex<f32>": "f32",
        "complex<f64>": "f64"}
TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12,
       np.complex128: 1e-12}


def svd_program(shape, dtype, mode, target=None, config=None,
                gives_v=False, swap=False):
    """One call and its results but the overwritten matrix: (s, u, vt or
    v, info); `swap` names gesvd's transposed form, giving vt before u."""
    batch = tuple(shape[:-2])
    m, n = shape[-2:]
    k = min(m, n)
    full = mode == "A"
    t = MLIR[dtype]
    a = tensor(shape, t)
    s = tensor(batch + (k,), REAL[t])
    u = tensor(batch + (m, m if full else k), t)
    if gives_v:
        v = tensor(batch + (n, n if full else k), t)
    else:
        v = tensor(batch + (n if full else k, n), t)
    info = tensor(batch, "i32")
    target = target or f"lapack_{PREFIX[dtype]}gesdd_ffi"
    config = config or f"mode = {ord(mode)} : ui8"
    first, second = (v, u) if swap else (u, v)
    return f"""module @jit_svd {{
  func.func public @main(%arg0: {a}) -> ({s}, {first}, {second}, {info}) {{
    %0:5 = stablehlo.custom_call @{target}(%arg0)
        {{mhlo.backend_config = {{{config}}}, output_operand_aliases =
        [#stablehlo.output_operand_alias<output_tuple_indices = [0],
        operand_index = 0, operand_tuple_indices = []>]}} :
        ({a}) -> ({a}, {s}, {first}, {second}, {info})
    return %0#1, %0#2, %0#3, %0#4 : {s}, {first}, {second}, {info}
  }}
}}
"""


def check_svd(a, s, u, vt, full, tol):
    """LAPACK's contract on every matrix of the batch."""
    m, n = a.shape[-2:]
    k = min(m, n)
    assert u.shape[-2:] == (m, m if full else k)
    assert vt.shape[-2:] == (n if full else k, n)
    for idx in np.ndindex(*a.shape[:-2]):
        x = a[idx].astype(np.complex128)
        want = np.linalg.svd(x, compute_uv=False)
        scale = max(want.max(initial=0), 1)
        np.testing.assert_allclose(s[idx], want, rtol=0, atol=tol * scale)
        assert np.all(np.diff(s[idx]) <= 0), s[idx]
        uu, vv = u[idx], vt[idx]
        np.testing.assert_allclose(uu.conj().T @ uu, np.eye(uu.shape[1]),
                                   atol=tol * 10)
        np.testing.assert_allclose(vv @ vv.conj().T, np.eye(vv.shape[0]),
                                   atol=tol * 10)
        np.testing.assert_allclose((uu[:, :k] * s[idx]) @ vv[:k], x,
                                   atol=tol * 10 * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 4),
                                   (2, 1, 3, 5), (1, 1), (7, 1)])
@pytest.mark.parametrize("mode", ["A", "S"])
def test_gesdd_factors_every_matrix(client, dtype, shape, mode):
    a = sample(shape, dtype)
    s, u, vt, info = run_arrays(client, svd_program(shape, dtype, mode), a)
    assert s.dtype == np.dtype(np.float32 if dtype in (np.float32,
                                                       np.complex64)
                               else np.float64)
    check_svd(a, s, u, vt, mode == "A", TOL[dtype])
    assert not np.any(info)


def test_gesdd_without_vectors_still_gives_their_shapes(client):
    """mode N: JAX gives U and V^H a shape (full or not) and drops them."""
    a = sample((5, 3), np.float64)
    for full in (True, False):
        program = svd_program((5, 3), np.float64, "A" if full else "S",
                              config="mode = 78 : ui8")
        s, u, vt, _ = run_arrays(client, program, a)
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False),
                                   atol=1e-12)
        assert u.shape == ((5, 5) if full else (5, 3))


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (5, 5)])
def test_rank_deficient_and_zero_matrices_keep_orthonormal_vectors(
        client, shape):
    """Zero singular values (a zero column after the rotations) still get
    orthonormal singular vectors, as LAPACK's do."""
    rng = np.random.default_rng(3)
    m, n = shape
    low = rng.standard_normal((m, 1)) @ rng.standard_normal((1, n))
    for a in (np.zeros(shape), np.ones(shape), low):
        for mode in "AS":
            s, u, vt, _ = run_arrays(
                client, svd_program(shape, np.float64, mode), a)
            assert np.all(np.isfinite(u)) and np.all(np.isfinite(vt))
            check_svd(a, s, u, vt, mode == "A", 1e-12)


def test_ill_conditioned_singular_values_to_working_precision(client):
    rng = np.random.default_rng(4)
    q1, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    q2, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    want = 10.0 ** -np.arange(8)
    a = q1 @ np.diag(want) @ q2
    s, u, vt, _ = run_arrays(client, svd_program((8, 8), np.float64, "A"), a)
    np.testing.assert_allclose(s, want, rtol=0, atol=1e-14)
    check_svd(a, s, u, vt, True, 1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_extreme_magnitudes_are_scaled_first(client, dtype):
    """Sums of squares of 1e30 would overflow f32, of 1e-30 underflow."""
    base = sample((3, 4), dtype)
    for magnitude in (1e30, 1e-30):
        a = (base * np.float32(magnitude)).astype(dtype)
        s, u, vt, _ = run_arrays(client, svd_program((3, 4), dtype, "A"), a)
        want = np.linalg.svd(base.astype(np.complex128), compute_uv=False)
        np.testing.assert_allclose(s / magnitude, want, rtol=1e-5)
        check_svd(base, s / np.float32(magnitude), u, vt, True, 2e-5)


def test_gesvd_takes_the_same_call(client):
    a = sample((3, 6, 4), np.float32)
    program = svd_program((3, 6, 4), np.float32, "S",
                          target="lapack_sgesvd_ffi")
    s, u, vt, _ = run_arrays(client, program, a)
    check_svd(a, s, u, vt, False, 2e-5)


@pytest.mark.parametrize("full", [True, False])
def test_cusolver_gesvdj_gives_v_itself(client, full):
    a = sample((2, 6, 4), np.complex128)
    flag = "true" if full else "false"
    program = svd_program(
        (2, 6, 4), np.complex128, "A" if full else "S",
        target="cusolver_gesvdj_ffi", gives_v=True,
        config=f"compute_uv = true, full_matrices = {flag}")
    s, u, v, _ = run_arrays(client, program, a)
    check_svd(a, s, u, np.conj(np.swapaxes(v, -1, -2)), full, 1e-12)


def test_cusolver_gesvd_transposed_gives_vt_before_u(client):
    """JAX's wide-matrix form: the results' U and V^H slots swapped."""
    a = sample((3, 7), np.float64)
    program = svd_program(
        (3, 7), np.float64, "A", target="cusolver_gesvd_ffi", swap=True,
        config="compute_uv = true, full_matrices = true, transposed = true")
    s, vt, u, _ = run_arrays(client, program, a)
    check_svd(a, s, u, vt, True, 1e-12)


def test_svd_calls_of_the_wrong_form_are_refused(client):
    program = svd_program((4, 4), np.float64, "A").replace(
        "lapack_dgesdd_ffi", "lapack_sgesdd_ffi")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "lapack_sgesdd_ffi takes one f32 matrix [..., m, n]; got 1 " \
        "operand(s), the first f64[4,4]" in str(e.value)
    program = svd_program((4, 4), np.float64, "A", config="mode = 79 : ui8")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "lapack_dgesdd_ffi needs mode in its backend_config, one of the " \
        "characters ASN as a ui8; got 79" in str(e.value)
    # A thin U where mode A asks for a square one.
    program = svd_program((5, 3), np.float64, "S", config="mode = 65 : ui8")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert "lapack_dgesdd_ffi of f64[5,3] gives (f64[5,3], f64[3], " \
        "f64[5,5], f64[3,3], s32[]), not" in str(e.value)


def test_cusolver_gesvd_without_vectors_gives_scalars_for_them(client):
    """JAX's GPU lowering of svd(compute_uv=False) (gesvd): U and V^H are
    rank-0 placeholders."""
    program = """module @jit_svd {
  func.func public @main(%arg0: tensor<5x3xf32>) -> tensor<3xf32> {
    %0:5 = stablehlo.custom_call @cusolver_gesvd_ffi(%arg0)
        {mhlo.backend_config = {compute_uv = false, full_matrices = false,
        transposed = false}} : (tensor<5x3xf32>) -> (tensor<5x3xf32>,
        tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<i32>)
    return %0#1 : tensor<3xf32>
  }
}
"""
    a = sample((5, 3), np.float32)
    s, = run_arrays(client, program, a)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False),
                               rtol=1e-5)


def test_an_empty_batch_runs_no_loop(client):
    """A batch of none (an empty vmap) gives empty results at once, however
    large its matrices are said to be."""
    shape = (0, 1 << 22, 1 << 22)
    program = svd_program(shape, np.float32, "S")
    s, u, vt, info = run_arrays(client, program,
                                np.zeros(0, np.float32).reshape(shape))
    assert s.shape == (0, 1 << 22) and u.shape == shape and info.shape == (0,)


def test_a_matrix_too_large_to_decompose_is_refused(client):
    program = svd_program((1 << 21, 1 << 21), np.float32, "S")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("lapack_sgesdd_ffi of f32[2097152,2097152]: pjrtd decomposes "
            "matrices of at most 1048576 columns and rows") in str(e.value)
