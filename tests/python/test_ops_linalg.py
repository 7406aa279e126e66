"""triangular-solve and cholesky against numpy's solvers, through a real
pjrtd (the ``cl`` client of conftest.py): every flag, f32, f64, c64 and
c128, batches, and garbage in the triangle the op must not read."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pjrt_client

DTYPES = {"f32": (np.float32, 2e-4), "f64": (np.float64, 1e-10),
          "c64": (np.complex64, 2e-4), "c128": (np.complex128, 1e-10)}


def random(rng: np.random.Generator, dtype, shape) -> np.ndarray:
    values = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def execute(cl, hlo: str, *args: np.ndarray) -> np.ndarray:
    executable = cl.compile(hlo)
    try:
        (out,) = executable.execute(list(args))
        try:
            return out.to_numpy()
        finally:
            out.delete()
    finally:
        executable.delete()


def shape(ty: str, dims) -> str:
    return f"{ty}[{','.join(map(str, dims))}]"


def triangle(m: np.ndarray, lower: bool, k: int = 0) -> np.ndarray:
    return np.tril(m, -k) if lower else np.triu(m, k)


SOLVES = list(itertools.product(sorted(DTYPES), [True, False], [True, False],
                                ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"],
                                [False, True]))


@pytest.mark.parametrize("ty,left,lower,transpose,unit", SOLVES)
def test_triangular_solve_matches_numpy(cl, ty, left, lower, transpose, unit):
    dtype, rtol = DTYPES[ty]
    rng = np.random.default_rng([len(ty), left, lower, len(transpose), unit])
    batch, m, n = 2, 5, 3
    garbage = random(rng, dtype, (batch, m, m)) * 100
    # The named triangle, well conditioned; the other one (and, with
    # unit_diagonal, the diagonal) holds garbage the op must not read.
    a = triangle(random(rng, dtype, (batch, m, m)), lower)
    a = a + np.eye(m, dtype=dtype) * 4
    used = a.copy()
    if unit:
        used = triangle(a, lower, 1) + np.eye(m, dtype=dtype)
        a = triangle(a, lower, 1) + np.eye(m, dtype=dtype) * garbage
    a = a + triangle(garbage, not lower, 1)
    b = random(rng, dtype, (batch, m, n) if left else (batch, n, m))
    op = {"NO_TRANSPOSE": lambda x: x,
          "TRANSPOSE": lambda x: np.swapaxes(x, -1, -2),
          "ADJOINT": lambda x: np.conj(np.swapaxes(x, -1, -2))}[transpose]
    if left:
        want = np.linalg.solve(op(used), b)
    else:  # x op(a) = b: op(a)^T x^T = b^T
        want = np.swapaxes(
            np.linalg.solve(np.swapaxes(op(used), -1, -2),
                            np.swapaxes(b, -1, -2)), -1, -2)
    flags = (f"left_side={str(left).lower()}, lower={str(lower).lower()}, "
             f"unit_diagonal={str(unit).lower()}, transpose_a={transpose}")
    hlo = f"""HloModule ts
ENTRY e {{
  a = {shape(ty, a.shape)} parameter(0)
  b = {shape(ty, b.shape)} parameter(1)
  ROOT x = {shape(ty, b.shape)} triangular-solve(a, b), {flags}
}}
"""
    got = execute(cl, hlo, a, b)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


CHOLESKYS = list(itertools.product(sorted(DTYPES), [True, False]))


@pytest.mark.parametrize("ty,lower", CHOLESKYS)
def test_cholesky_matches_numpy_and_zeroes_the_other_triangle(cl, ty, lower):
    dtype, rtol = DTYPES[ty]
    rng = np.random.default_rng([len(ty), lower])
    batch, n = 3, 6
    r = random(rng, dtype, (batch, n, n))
    spd = r @ np.conj(np.swapaxes(r, -1, -2)) + n * np.eye(n, dtype=dtype)
    want = np.linalg.cholesky(spd)  # lower
    if not lower:
        want = np.conj(np.swapaxes(want, -1, -2))
    garbage = random(rng, dtype, (batch, n, n)) * 100
    a = triangle(spd, lower) + triangle(garbage, not lower, 1)
    hlo = f"""HloModule chol
ENTRY e {{
  a = {shape(ty, a.shape)} parameter(0)
  ROOT l = {shape(ty, a.shape)} cholesky(a), lower={str(lower).lower()}
}}
"""
    got = execute(cl, hlo, a)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10)
    assert not triangle(got, not lower, 1).any()


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan(cl):
    a = np.array([[4, 0, 0], [2, -5, 0], [1, 1, 9]], dtype=np.float32)
    hlo = """HloModule chol
ENTRY e {
  a = f32[3,3] parameter(0)
  ROOT l = f32[3,3] cholesky(a), lower=true
}
"""
    got = execute(cl, hlo, a)
    assert got[0, 0] == 2 and got[1, 0] == 1
    assert np.isnan(got[1, 1]) and np.isnan(got[2, 2])


@pytest.mark.parametrize("program,error,message", [
    ("a = s32[3,3] parameter(0)\n  b = s32[3,1] parameter(1)\n"
     "  ROOT x = s32[3,1] triangular-solve(a, b), left_side=true",
     pjrt_client.InvalidArgumentError,
     r"a s32\[3,3\] must be of a floating-point or complex type"),
    ("a = f32[3,3] parameter(0)\n  b = f32[2,3] parameter(1)\n"
     "  ROOT x = f32[2,3] triangular-solve(a, b), left_side=true",
     pjrt_client.InvalidArgumentError,
     r"a f32\[3,3\] is 3 x 3, but b f32\[2,3\] has 2 rows"),
    ("a = f32[3,3] parameter(0)\n  b = f32[3,1] parameter(1)\n"
     "  ROOT x = f32[3,1] triangular-solve(a, b), left_side=true, "
     "transpose_a=CONJUGATE",
     pjrt_client.InvalidArgumentError,
     "transpose_a=CONJUGATE is not one of NO_TRANSPOSE, TRANSPOSE, ADJOINT"),
    ("a = f32[3,2] parameter(0)\n  ROOT l = f32[3,2] cholesky(a)",
     pjrt_client.InvalidArgumentError,
     r"a f32\[3,2\] must be square in its last two dimensions"),
    ("a = f16[2,2] parameter(0)\n  ROOT l = f16[2,2] cholesky(a), lower=1",
     pjrt_client.InvalidArgumentError, "lower=1"),
    ("a = f16[2,2] parameter(0)\n  ROOT l = f16[2,2] cholesky(a), lower=true",
     pjrt_client.UnimplementedError,
     "cholesky of f16 is not supported by the host compiler yet"),
])
def test_bad_linear_algebra_is_refused_naming_what_is_wrong(
        cl, program, error, message):
    with pytest.raises(error, match=message):
        cl.compile(f"HloModule bad\nENTRY e {{\n  {program}\n}}\n")
