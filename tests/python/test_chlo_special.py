"""CHLO's special functions as JAX emits them (jax.scipy.special's gammaln,
digamma, erfc, i1e, zeta, polygamma; jnp.nextafter, isinf, conj), against
Python's math module, closed forms and references computed here in
extended precision."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from hlo_harness import run_arrays

MLIR_TYPES = {np.float16: "f16", np.float32: "f32", np.float64: "f64",
              np.complex64: "complex<f32>"}
# Relative error allowed: a few units in the last place of each type.
RTOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}


def call(cl, name: str, *args: np.ndarray, result: str | None = None):
    """chlo.<name> of `args` (one shape and type), in generic form."""
    n = args[0].size
    ty = f"tensor<{n}x{MLIR_TYPES[args[0].dtype.type]}>"
    out = f"tensor<{n}x{result}>" if result else ty
    params = ", ".join(f"%a{i}: {ty}" for i in range(len(args)))
    operands = ", ".join(f"%a{i}" for i in range(len(args)))
    types = ", ".join([ty] * len(args))
    program = f"""func.func @main({params}) -> {out} {{
  %0 = "chlo.{name}"({operands}) : ({types}) -> {out}
  return %0 : {out}
}}
"""
    (got,) = run_arrays(cl, program, *args)
    return got


def check(got, want, dtype, what, atol=0.0):
    want = np.asarray(want, np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)],
                                  want[~finite & ~np.isnan(want)].astype(
                                      dtype), err_msg=what)
    tiny = {np.float16: 1e-7, np.float32: 1e-38, np.float64: 1e-300}[dtype]
    tiny = max(atol, tiny)
    np.testing.assert_allclose(got[finite].astype(np.float64), want[finite],
                               rtol=RTOL[dtype], atol=tiny, err_msg=what)


LGAMMA_POINTS = [0.001, 0.1, 0.5, 0.9999, 1, 1.5, 2, 2.5, 3.7, 10, 57.3,
                 171.6, 1e5, 1e10, 1e300, -0.5, -1.5, -2.25, -10.1, -100.3,
                 -0.001]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma_matches_pythons(cl, dtype):
    with np.errstate(over="ignore"):  # 1e300 is inf in f32
        x = np.array(LGAMMA_POINTS, dtype)
    want = [math.lgamma(float(v)) if math.isfinite(float(v)) else math.inf
            for v in x]
    # Near its zeros at 1 and 2 lgamma's error is absolute (Lanczos'
    # sum, as XLA's), a few units of 1e-15.
    check(call(cl, "lgamma", x), want, dtype, "lgamma", atol=4e-15)


def test_lgamma_poles_infinities_and_nan(cl):
    x = np.array([0, -1, -2, -50, np.inf, -np.inf, np.nan, 1e306],
                 np.float64)
    got = call(cl, "lgamma", x)
    assert list(got[:6]) == [np.inf] * 6
    assert np.isnan(got[6])
    assert got[7] == np.inf  # past f64's range


def test_lgamma_in_f16_rounds_from_f64(cl):
    x = np.array([0.25, 1.5, 4.5, 10.0, -2.5], np.float16)
    want = [math.lgamma(float(v)) for v in x]
    check(call(cl, "lgamma", x), want, np.float16, "lgamma f16")


def digamma_reference(x: float) -> float:
    """Recurrence up past 10, then the asymptotic series (Decimal);
    reflection below 1/2."""
    if x < 0.5:
        return digamma_reference(1 - x) - math.pi / math.tan(math.pi * x)
    getcontext().prec = 40
    v, shift = Decimal(x), Decimal(0)
    while v < 20:
        shift -= 1 / v
        v += 1
    bernoulli = [Decimal(1) / 6, Decimal(-1) / 30, Decimal(1) / 42,
                 Decimal(-1) / 30, Decimal(5) / 66, Decimal(-691) / 2730,
                 Decimal(7) / 6]
    series = v.ln() - 1 / (2 * v)
    for k, b in enumerate(bernoulli, start=1):
        series -= b / (2 * k * v ** (2 * k))
    return float(series + shift)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_digamma_matches_the_reference(cl, dtype):
    x = np.array([0.001, 0.25, 0.5, 1, 1.4616321449683623, 2, 3.5, 10, 100,
                  1e6, -0.5, -1.25, -3.75, -10.1], dtype)
    want = [digamma_reference(float(v)) for v in x]
    got = call(cl, "digamma", x)
    # Near its zero at 1.4616 digamma's relative error grows: absolute
    # there.
    np.testing.assert_allclose(got[4], 0, atol=1e-6)
    keep = np.arange(len(x)) != 4
    check(got[keep], np.array(want)[keep], dtype, "digamma")
    assert abs(float(call(cl, "digamma", np.array([1.0]))[0]) +
               0.5772156649015329) < 1e-15


def test_digamma_is_nan_at_its_poles(cl):
    got = call(cl, "digamma",
               np.array([0, -1, -7, -np.inf, np.inf], np.float64))
    assert np.isnan(got[:4]).all() and got[4] == np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erfc_matches_pythons_into_the_tail(cl, dtype):
    x = np.array([0, 0.1, -0.1, 0.5, 1, 1.9999, 2, 2.5, 3, 5, 9, 15, 26.5,
                  -1, -3, -30, np.inf, -np.inf], dtype)
    want = [math.erfc(float(v)) for v in x]
    if dtype == np.float32:
        # f32 keeps what its range holds: erfc(15) and beyond underflow.
        want = [w if w > 1e-38 or w == 0 else 0.0 for w in want]
    check(call(cl, "erfc", x), want, dtype, "erfc")


def i1e_reference(x: float) -> float:
    getcontext().prec = 60
    v = Decimal(abs(x))
    half, k = v / 2, 0
    term = half
    total = term
    while term > total * Decimal(10) ** -50:
        k += 1
        term = term * half * half / (k * (k + 1))
        total += term
    value = float(total * (-v).exp())
    return -value if x < 0 else value


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_i1e_matches_the_power_series(cl, dtype):
    x = np.array([0, 1e-3, 0.5, 1, 5, 12, 19.9, 20, 20.1, 35, 80, -2, -50],
                 dtype)
    want = [i1e_reference(float(v)) for v in x]
    check(call(cl, "bessel_i1e", x), want, dtype, "bessel_i1e")
    big = call(cl, "bessel_i1e", np.array([1e4, 1e8], np.float64))
    np.testing.assert_allclose(big, [1 / math.sqrt(2 * math.pi * v) *
                                     (1 - 3 / (8 * v)) for v in (1e4, 1e8)],
                               rtol=1e-8)


ZETA_3 = 1.2020569031595942


def test_zeta_matches_its_closed_forms(cl):
    s = np.array([2, 4, 2, 2, 3, 2, 6], np.float64)
    q = np.array([1, 1, 0.5, 2, 1, 3, 1], np.float64)
    want = [math.pi ** 2 / 6, math.pi ** 4 / 90, math.pi ** 2 / 2,
            math.pi ** 2 / 6 - 1, ZETA_3, math.pi ** 2 / 6 - 1.25,
            math.pi ** 6 / 945]
    check(call(cl, "zeta", s, q), want, np.float64, "zeta")
    f32 = call(cl, "zeta", s.astype(np.float32), q.astype(np.float32))
    check(f32, want, np.float32, "zeta f32")


def test_zeta_domain(cl):
    s = np.array([1, 0.5, 2, 2, 2.5], np.float64)
    q = np.array([1, 1, 0, -3, -0.5], np.float64)
    got = call(cl, "zeta", s, q)
    assert got[0] == np.inf and np.isnan(got[1])
    assert got[2] == np.inf and got[3] == np.inf and np.isnan(got[4])


def test_polygamma_matches_its_closed_forms(cl):
    n = np.array([0, 1, 1, 2, 3, 1], np.float64)
    x = np.array([1, 1, 0.5, 1, 1, 10], np.float64)
    trigamma_10 = math.pi ** 2 / 6 - sum(1 / k ** 2 for k in range(1, 10))
    want = [-0.5772156649015329, math.pi ** 2 / 6, math.pi ** 2 / 2,
            -2 * ZETA_3, math.pi ** 4 / 15, trigamma_10]
    check(call(cl, "polygamma", n, x), want, np.float64, "polygamma")
    bad = call(cl, "polygamma", np.array([-1, 1.5], np.float64),
               np.array([1, 1], np.float64))
    assert np.isnan(bad).all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_next_after_matches_numpy(cl, dtype):
    info = np.finfo(dtype)
    x = np.array([1, 1, 0, 0, -0.0, -1, info.max, info.max, np.inf,
                  info.tiny, 2, np.nan, 1, 3], dtype)
    y = np.array([2, 0, 1, -1, 1, -2, np.inf, 0, 0, 0, 2, 1, np.nan, 3],
                 dtype)
    got = call(cl, "next_after", x, y)
    with np.errstate(over="ignore"):  # max toward inf
        want = np.nextafter(x, y)
    np.testing.assert_array_equal(got.view(f"u{x.itemsize}")[~np.isnan(want)],
                                  want.view(f"u{x.itemsize}")[
                                      ~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()


def test_is_inf_and_its_signed_forms(cl):
    x = np.array([np.inf, -np.inf, 0, np.nan, 1e38, -1], np.float32)
    for name, want in [("is_inf", np.isinf(x)),
                       ("is_pos_inf", np.isposinf(x)),
                       ("is_neg_inf", np.isneginf(x))]:
        got = call(cl, name, x, result="i1")
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_conj_negates_the_imaginary_part_and_keeps_reals(cl):
    z = np.array([1 + 2j, -3 - 0.5j, 0j], np.complex64)
    np.testing.assert_array_equal(call(cl, "conj", z), np.conj(z))
    x = np.array([1.5, -2], np.float32)
    np.testing.assert_array_equal(call(cl, "conj", x), x)
