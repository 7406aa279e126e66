"""HLO text's custom calls to LAPACK and cuSOLVER, as XLA prints the
jnp.linalg calls of a JAX program (typed FFI calls, their attributes in
backend_config={...}), through a real pjrtd: each runs the computations the
StableHLO translator makes of the same call, and a mistake in one is
reported at the instruction."""
import numpy as np
import pytest

import pjrt_client
from hlo_harness import run_arrays
from test_lapack_calls import lu_reference, sample

RNG = np.random.default_rng(20261207)


def one_call(target, a_shape, results, config="{}", extra_params=()):
    """ENTRY: parameter(s), the custom call, and its results as a tuple of
    get-tuple-elements (or the one array)."""
    rank = a_shape.count(",") + 1
    # Row-major in, column-major where LAPACK reads it, as XLA lays it out.
    row_major = "{" + ",".join(str(d) for d in reversed(range(rank))) + "}"
    column_major = "{" + ",".join(
        str(d) for d in [rank - 2, rank - 1, *reversed(range(rank - 2))]) + "}"
    params = [f"  p0 = {a_shape}{row_major} parameter(0)"]
    names = ["p0"]
    for i, shape in enumerate(extra_params, start=1):
        params.append(f"  p{i} = {shape} parameter({i})")
        names.append(f"p{i}")
    if len(results) == 1:
        body = (f"  ROOT call = {results[0]} custom-call({', '.join(names)}), "
                f"custom_call_target=\"{target}\", "
                f"api_version=API_VERSION_TYPED_FFI, backend_config={config}")
    else:
        tuple_shape = "(" + ", ".join(results) + ")"
        lines = [f"  call = {tuple_shape} custom-call({', '.join(names)}), "
                 f"custom_call_target=\"{target}\", "
                 f"operand_layout_constraints={{{a_shape}{column_major}}}, "
                 f"output_to_operand_aliasing={{{{0}}: (0, {{}})}}, "
                 f"api_version=API_VERSION_TYPED_FFI, "
                 f"backend_config={config}"]
        for i, shape in enumerate(results):
            lines.append(f"  r{i} = {shape} get-tuple-element(call), "
                         f"index={i}")
        refs = ", ".join(f"r{i}" for i in range(len(results)))
        lines.append(f"  ROOT out = {tuple_shape} tuple({refs})")
        body = "\n".join(lines)
    return "HloModule jit_linalg\n\nENTRY main {\n" + "\n".join(params) + \
        "\n" + body + "\n}\n"


def test_getrf_as_xla_prints_it(client):
    a = sample((5, 5), np.float64)
    program = one_call("lapack_dgetrf_ffi", "f64[5,5]",
                       ["f64[5,5]", "s32[5]", "s32[]"])
    lu, piv, info = run_arrays(client, program, a)
    want_lu, want_piv, want_info = lu_reference(a)
    np.testing.assert_allclose(lu, want_lu, atol=1e-12)
    np.testing.assert_array_equal(piv, want_piv)
    assert info == want_info


@pytest.mark.parametrize("config", ["{uplo = 76 : ui8}",
                                    '"{uplo = 76 : ui8}"'])
def test_potrf_reads_its_triangle_from_backend_config(client, config):
    """Bare, as XLA prints it, or written as a string."""
    x = sample((4, 4), np.float32)
    spd = (x @ x.T + 4 * np.eye(4)).astype(np.float32)
    program = one_call("lapack_spotrf_ffi", "f32[4,4]", ["f32[4,4]", "s32[]"],
                       config=config)
    factor, info = run_arrays(client, program, spd)
    np.testing.assert_allclose(np.tril(factor), np.linalg.cholesky(spd),
                               rtol=1e-5, atol=1e-5)
    assert info == 0


def test_syevd_and_heevd_as_xla_prints_them(client):
    x = sample((2, 4, 4), np.complex64)
    herm = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    program = one_call("lapack_cheevd_ffi", "c64[2,4,4]",
                       ["c64[2,4,4]", "f32[2,4]", "s32[2]"],
                       config="{mode = 86 : ui8, uplo = 76 : ui8}")
    v, w, info = run_arrays(client, program, herm)
    for i in range(2):
        np.testing.assert_allclose(w[i], np.linalg.eigvalsh(herm[i]),
                                   atol=1e-4)
        np.testing.assert_allclose(herm[i] @ v[i], v[i] * w[i], atol=1e-4)
    assert not np.any(info)


def test_gesdd_as_xla_prints_it(client):
    a = sample((6, 4), np.float32)
    program = one_call("lapack_sgesdd_ffi", "f32[6,4]",
                       ["f32[6,4]", "f32[4]", "f32[6,6]", "f32[4,4]", "s32[]"],
                       config="{mode = 65 : ui8}")
    _, s, u, vt, info = run_arrays(client, program, a)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False),
                               rtol=1e-5)
    np.testing.assert_allclose((u[:, :4] * s) @ vt, a, atol=1e-5)
    np.testing.assert_allclose(u.T @ u, np.eye(6), atol=1e-5)
    assert info == 0


def test_qr_pair_and_a_call_inside_a_called_computation(client):
    """geqrf, then orgqr on its results, both in a computation the entry
    calls: every computation's library calls are replaced."""
    program = """HloModule jit_qr

qr {
  a = f64[5,3]{1,0} parameter(0)
  f = (f64[5,3]{0,1}, f64[3]{0}) custom-call(a),
    custom_call_target="lapack_dgeqrf_ffi",
    api_version=API_VERSION_TYPED_FFI, backend_config={}
  h = f64[5,3] get-tuple-element(f), index=0
  tau = f64[3] get-tuple-element(f), index=1
  ROOT q = f64[5,3]{0,1} custom-call(h, tau),
    custom_call_target="lapack_dorgqr_ffi",
    api_version=API_VERSION_TYPED_FFI, backend_config={}
}

ENTRY main {
  p = f64[5,3] parameter(0)
  ROOT q = f64[5,3] call(p), to_apply=qr
}
"""
    a = sample((5, 3), np.float64)
    q = run_arrays(client, program, a)[0]
    want, _ = np.linalg.qr(a)
    np.testing.assert_allclose(q, want, atol=1e-12)


def test_a_library_call_of_the_wrong_form_is_reported_at_the_instruction(
        client):
    program = one_call("lapack_sgesdd_ffi", "f32[4,4]",
                       ["f32[4,4]", "f32[4]", "f32[4,4]", "f32[4,4]", "s32[]"],
                       config="{mode = 1 : ui8}")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("line 5, column 3: %call: lapack_sgesdd_ffi needs mode in its "
            "backend_config, one of the characters ASN as a ui8; got 1") \
        in str(e.value)
    program = one_call("lapack_dgetrf_ffi", "f32[5,5]",
                       ["f32[5,5]", "s32[5]", "s32[]"])
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("%call: lapack_dgetrf_ffi takes one f64 matrix (or a batch of "
            "them); got 1 operand(s), the first f32[5,5]") in str(e.value)


def test_other_custom_call_targets_are_still_refused_by_name(client):
    program = one_call("lapack_sgesvj_ffi", "f32[4,4]", ["f32[4,4]"])
    with pytest.raises(pjrt_client.UnimplementedError) as e:
        client.compile(program)
    assert ('custom-call target "lapack_sgesvj_ffi" is not supported; pjrtd '
            "runs TopK, the LAPACK and cuSOLVER calls") in str(e.value)


def test_a_backend_config_that_is_not_one_dictionary_is_refused(client):
    """Nothing of the config may end the one-call program it is written
    into."""
    for config in ['"{uplo = 76 : ui8}} {"', "L", '"{a = \\"}\\"}}"']:
        program = one_call("lapack_spotrf_ffi", "f32[4,4]",
                           ["f32[4,4]", "s32[]"], config=config)
        with pytest.raises(pjrt_client.InvalidArgumentError) as e:
            client.compile(program)
        assert (f"line 5, column 3: %call: backend_config {config} is not "
                "one dictionary of attributes, like {uplo = 76 : ui8}") \
            in str(e.value), str(e.value)


def test_two_calls_alike_run_once_each(client):
    """Calls of one target, types and config share their computations;
    each still computes its own operand."""
    program = """HloModule two_lu

ENTRY main {
  a = f64[3,3] parameter(0)
  b = f64[3,3] parameter(1)
  fa = (f64[3,3], s32[3], s32[]) custom-call(a),
    custom_call_target="lapack_dgetrf_ffi", backend_config={}
  fb = (f64[3,3], s32[3], s32[]) custom-call(b),
    custom_call_target="lapack_dgetrf_ffi", backend_config={}
  la = f64[3,3] get-tuple-element(fa), index=0
  lb = f64[3,3] get-tuple-element(fb), index=0
  ROOT out = (f64[3,3], f64[3,3]) tuple(la, lb)
}
"""
    a, b = sample((3, 3), np.float64), sample((3, 3), np.float64)
    la, lb = run_arrays(client, program, a, b)
    np.testing.assert_allclose(la, lu_reference(a)[0], atol=1e-12)
    np.testing.assert_allclose(lb, lu_reference(b)[0], atol=1e-12)
