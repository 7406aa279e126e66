"""pjrt-hlo, the offline compiler and differential runner: what it prints,
writes and exits with, for the host backend and (compiled without a GPU)
the CUDA backend."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from conftest import BUILD

PJRT_HLO = BUILD / "bin" / "pjrt-hlo"

PROGRAM = """
HloModule scale_and_sum

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  a = f32[4,8] parameter(0)
  k = f32[8] parameter(1)
  kb = f32[4,8] broadcast(k), dimensions={1}
  m = f32[4,8] multiply(a, kb)
  e = f32[4,8] exponential(m)
  z = f32[] constant(0)
  r = f32[4] reduce(e, z), dimensions={1}, to_apply=add
  ROOT t = (f32[4,8], f32[4]) tuple(e, r)
}
"""


def hlo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PJRT_HLO), *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "p.hlo"
    path.write_text(PROGRAM)
    return path


def test_compile_for_host_lists_the_steps(program):
    out = hlo("compile", str(program), "--platform", "host")
    assert out.returncode == 0, out.stderr
    assert "loop" in out.stdout and "reduce" in out.stdout


def test_compile_for_cuda_needs_no_gpu_and_dumps_source_and_cubin(
        program, tmp_path):
    out = hlo("compile", str(program), "--platform", "cuda", "--cuda-arch",
              "sm_80", "--dump", str(tmp_path / "dump"))
    if "no CUDA backend" in out.stderr:
        pytest.skip("built without the CUDA Toolkit")
    assert out.returncode == 0, out.stderr
    assert "launches for sm_80" in out.stdout
    # Every kernel with its launch shape and ptxas's register count.
    assert "kernel pj_loop_" in out.stdout
    assert "registers" in out.stdout
    assert "reduce f32[4,8,1] to [4,1] (add)" in out.stdout
    source = (tmp_path / "dump" / "kernels.cu").read_text()
    assert 'extern "C" __global__' in source
    cubin = (tmp_path / "dump" / "kernels.sm_80.cubin").read_bytes()
    assert cubin[:4] == b"\x7fELF"


def test_compile_refuses_an_unknown_architecture_by_name(program):
    out = hlo("compile", str(program), "--platform", "cuda", "--cuda-arch",
              "sm_7")
    if "no CUDA backend" in out.stderr:
        pytest.skip("built without the CUDA Toolkit")
    assert out.returncode != 0
    assert "sm_7" in out.stderr and "sm_90" in out.stderr


def test_run_on_host_writes_results_that_match_numpy(program, tmp_path):
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    k = np.linspace(-1, 1, 8, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "k.npy", k)
    out = hlo("run", str(program), "--platform", "host",
              "--input", str(tmp_path / "a.npy"),
              "--input", str(tmp_path / "k.npy"),
              "--output-dir", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    e = np.load(tmp_path / "out" / "result_0.npy")
    r = np.load(tmp_path / "out" / "result_1.npy")
    np.testing.assert_allclose(e, np.exp(a * k), rtol=1e-5)
    np.testing.assert_allclose(r, np.exp(a * k).sum(axis=1), rtol=1e-5)


def test_run_compares_platforms_element_by_element(program):
    out = hlo("run", str(program), "--platform", "host", "--compare-with",
              "host", "--seed", "3")
    assert out.returncode == 0, out.stderr
    assert "result 0: f32[4,8] matches host (0 of 32 elements differ" \
        in out.stdout
    assert "result 1: f32[4] matches host" in out.stdout


def test_run_compares_programs_that_draw_random_numbers(tmp_path):
    # Each run takes a fresh execution seed; `run` starts both platforms'
    # seeds alike, so that rng's draws compare too.
    path = tmp_path / "rng.hlo"
    path.write_text("""HloModule r
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[64] rng(a, b), distribution=rng_uniform
}
""")
    out = hlo("run", str(path), "--platform", "host", "--compare-with",
              "host")
    assert out.returncode == 0, out.stderr
    assert "result 0: f32[64] matches host (0 of 64 elements differ" \
        in out.stdout


def test_run_names_a_wrong_number_of_inputs(program, tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((4, 8), np.float32))
    out = hlo("run", str(program), "--input", str(tmp_path / "a.npy"))
    assert out.returncode == 2
    assert "takes 2 parameter(s); got 1 --input file(s)" in out.stderr


def test_results_do_not_depend_on_how_many_threads_the_host_has(tmp_path):
    # The same program on a machine of 1, 2 or 3 cores (PJRT_HOST_THREADS)
    # gives the same bits: a narrow product cut into one piece per thread
    # and a sum of few long rows split by the pool's size used to differ.
    path = tmp_path / "threads.hlo"
    path.write_text("""HloModule threads
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  a = f32[1536,1024] parameter(0)
  b = f32[1024,10] parameter(1)
  d = f32[1536,10] dot(a, b), lhs_contracting_dims={1},
      rhs_contracting_dims={0}
  s = f32[4,262144] parameter(2)
  z = f32[] constant(0)
  r = f32[4] reduce(s, z), dimensions={1}, to_apply=add
  ROOT t = (f32[1536,10], f32[4]) tuple(d, r)
}
""")
    results = []
    for threads in (1, 2, 3):
        out = subprocess.run(
            [str(PJRT_HLO), "run", str(path), "--output-dir",
             str(tmp_path / str(threads))], capture_output=True, text=True,
            timeout=120, env={**os.environ, "PJRT_HOST_THREADS": str(threads)})
        assert out.returncode == 0, out.stderr
        results.append([np.load(tmp_path / str(threads) / f"result_{i}.npy")
                        for i in range(2)])
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            assert got.tobytes() == want.tobytes()


def test_run_refuses_random_inputs_larger_than_the_host(tmp_path):
    # Made in host memory: refused before any is taken (a scatter's 344 GB
    # of inputs used to end in std::bad_alloc).
    path = tmp_path / "huge.hlo"
    path.write_text("""HloModule huge
ENTRY main {
  a = f32[1048576,1048576] parameter(0)
  ROOT n = f32[1048576,1048576] negate(a)
}
""")
    out = hlo("run", str(path))
    assert out.returncode == 1
    assert "the random inputs of huge would take 4 TiB of host memory" in (
        out.stderr)
    assert "give --input files" in out.stderr


def test_run_names_an_input_that_does_not_fit(program, tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((4, 8), np.float32))
    np.save(tmp_path / "k.npy", np.zeros((9,), np.float32))
    out = hlo("run", str(program), "--input", str(tmp_path / "a.npy"),
              "--input", str(tmp_path / "k.npy"))
    assert out.returncode == 2
    assert "input 1" in out.stderr and "f32[8]" in out.stderr


def test_run_on_cuda_without_a_gpu_says_so(program):
    out = hlo("run", str(program), "--platform", "cuda")
    if out.returncode == 0:
        pytest.skip("this machine has a GPU")
    assert out.returncode == 1
    assert "no CUDA GPU is visible" in out.stderr or \
        "CUDA platform" in out.stderr or \
        "built without the CUDA Toolkit" in out.stderr


@pytest.mark.parametrize("args", [
    [], ["--bogus"], ["frobnicate"], ["compile"],
    ["compile", "p.hlo", "--platform", "tpu"],
    ["run", "p.hlo", "--seed", "abc"],
])
def test_a_bad_command_line_is_a_usage_error(args):
    # Exit 2 as for every usage error of ours, not CLI11's codes (100+).
    out = hlo(*args)
    assert out.returncode == 2, out.stderr
    assert out.stderr


def test_version_and_help_end_well():
    out = hlo("--version")
    assert out.returncode == 0 and out.stdout.startswith("pjrt-hlo ")
    out = hlo("--help")
    assert out.returncode == 0 and "compile" in out.stdout


def test_a_program_that_does_not_parse_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2] negate(y)\n}\n")
    out = hlo("compile", str(bad))
    assert out.returncode == 2
    assert "bad.hlo" in out.stderr


STABLEHLO = """module @scale {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> \
tensor<4xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""


def test_convert_prints_the_hlo_a_stablehlo_program_becomes(tmp_path):
    source = tmp_path / "scale.mlir"
    source.write_text(STABLEHLO)
    result = hlo("convert", str(source))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("HloModule scale")
    assert "multiply(" in result.stdout and "ENTRY %main" in result.stdout
    # What it prints is a program pjrt-hlo runs, with the same results.
    converted = tmp_path / "scale.hlo"
    converted.write_text(result.stdout)
    x = np.array([1, -2, 3.5, 0], np.float32)
    np.save(tmp_path / "x.npy", x)
    for program, out in ((source, "a"), (converted, "b")):
        run = hlo("run", str(program), "--platform", "host", "--input",
                  str(tmp_path / "x.npy"), "--output-dir", str(tmp_path / out))
        assert run.returncode == 0, run.stderr
    a = np.load(tmp_path / "a" / "result_0.npy")
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(a, np.load(tmp_path / "b" / "result_0.npy"))


def test_convert_errors_point_into_the_stablehlo_text(tmp_path):
    source = tmp_path / "bad.mlir"
    source.write_text(STABLEHLO.replace("stablehlo.multiply", "stablehlo.mul"))
    result = hlo("convert", str(source))
    assert result.returncode == 1
    assert "line 5, column 10: stablehlo.mul" in result.stderr
    assert "UNIMPLEMENTED" in result.stderr
