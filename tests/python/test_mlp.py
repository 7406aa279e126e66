"""A JAX-style MLP training step, as JAX prints it in both formats:
tests/data/mlp_train_step.mlir as ``jax.jit(train_step).lower(...)
.as_text()`` prints it (StableHLO) and tests/data/mlp_train_step.hlo as
``as_text(dialect="hlo")`` does, run through the Python client and through
``pjrtctl run``, against the same step written in numpy; the two formats
give bit-identical results.

The step: two dense layers with relu, softmax cross-entropy against one-hot
labels, backpropagation written out, and SGD with a learning rate of 0.01.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np
import pytest

import mlp_reference
import pjrt_client
from conftest import PJRTCTL, REPO

HLO = REPO / "tests" / "data" / "mlp_train_step.hlo"
STABLEHLO = REPO / "tests" / "data" / "mlp_train_step.mlir"
PROGRAMS = {"hlo": HLO, "stablehlo": STABLEHLO}
BATCH, IN, HIDDEN, OUT = (mlp_reference.BATCH, mlp_reference.IN,
                          mlp_reference.HIDDEN, mlp_reference.OUT)

# Tolerances. The program computes in float32 and the reference in float64
# from the same float32 inputs, so the results differ by float32 rounding
# (about 6e-8 relative per operation, accumulated over sums of up to 784
# products in a different order): 1e-5 relative is a hundred times that.
# Elements whose value is near zero (a bias element and its small update
# nearly cancelling) have no meaningful relative error; below 1e-7 in
# absolute terms (ten times float32's epsilon times the O(0.01) size of the
# parameters) a difference is rounding noise.
RTOL = 1e-5
ATOL = 1e-7


def make_inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((IN, HIDDEN)) / np.sqrt(IN)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, OUT)) / np.sqrt(HIDDEN)).astype(
        np.float32)
    b2 = (0.1 * rng.standard_normal(OUT)).astype(np.float32)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    labels = rng.integers(0, OUT, size=BATCH).astype(np.int32)
    return [w1, b1, w2, b2, x, labels]


def train_step_reference(w1, b1, w2, b2, x, labels):
    """The step in float64 numpy: (new w1, b1, w2, b2), loss, and the
    hidden pre-activations (to check that none sits on relu's kink)."""
    w1, b1, w2, b2, x = (a.astype(np.float64) for a in (w1, b1, w2, b2, x))
    return mlp_reference.train_step(w1, b1, w2, b2, x, labels)


def check_step(outputs: list[np.ndarray], inputs: list[np.ndarray]) -> None:
    new, loss, z1 = train_step_reference(*inputs)
    # float32 and float64 must agree on which hidden units are active.
    assert np.abs(z1).min() > 1e-4, "the inputs put a unit on relu's kink"
    names = ["w1", "b1", "w2", "b2"]
    for name, got, want, old in zip(names, outputs[:4], new, inputs[:4]):
        assert got.dtype == np.float32 and got.shape == old.shape, name
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                   err_msg=f"new {name}")
        # The update itself (the gradient) is right, not just the
        # parameter it is added to: the parameter dominates the sum.
        np.testing.assert_allclose(old - got, old - want, rtol=2e-3,
                                   atol=1e-8, err_msg=f"update of {name}")
    assert outputs[4].shape == () and outputs[4].dtype == np.float32
    np.testing.assert_allclose(outputs[4], loss, rtol=RTOL, err_msg="loss")


@pytest.fixture(scope="module")
def mlp_client(daemon):
    with pjrt_client.connect(daemon.addresses[0],
                             client_name="test_mlp") as c:
        yield c


@pytest.mark.parametrize("program_format", sorted(PROGRAMS))
def test_signature_is_the_train_step(mlp_client, program_format):
    executable = mlp_client.compile(PROGRAMS[program_format].read_text())
    assert executable.name == "jit_train_step"
    assert [str(s) for s in executable.parameter_shapes] == [
        "f32[784,128]", "f32[128]", "f32[128,10]", "f32[10]", "f32[64,784]",
        "s32[64]"]
    assert [str(s) for s in executable.result_shapes] == [
        "f32[784,128]", "f32[128]", "f32[128,10]", "f32[10]", "f32[]"]
    assert executable.result_is_tuple


@pytest.mark.parametrize("program_format", sorted(PROGRAMS))
def test_train_step_through_python_matches_numpy(mlp_client, program_format):
    inputs = make_inputs(seed=1)
    executable = mlp_client.compile(PROGRAMS[program_format].read_text(),
                                    program_format=program_format)
    outputs = [b.to_numpy() for b in executable.execute(inputs)]
    check_step(outputs, inputs)


def test_both_formats_give_bit_identical_results(mlp_client):
    # Both compiled afresh (an option of their own makes the cache key) and
    # run once, so that neither's results come from a cache.
    inputs = make_inputs(seed=5)
    results = []
    for path in (HLO, STABLEHLO):
        executable = mlp_client.compile(path.read_text(),
                                        collective_timeout=17.0)
        results.append([b.to_numpy() for b in executable.execute(inputs)])
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_runs_of_the_step_on_the_same_inputs_are_bit_identical(mlp_client):
    # The first run goes to the device's worker thread (its arguments are
    # still being uploaded); runs that wait for their results, on uploaded
    # arguments, run inline on the calling thread. Runs on other inputs go
    # between. Each thread computes in scratch memory of its own, and the
    # last bit of exp used to depend on where that lay.
    inputs = make_inputs(seed=2)
    others = make_inputs(seed=3)
    executable = mlp_client.compile(HLO.read_text(), collective_timeout=19.0)
    first = [b.to_numpy() for b in executable.execute(inputs)]
    uploaded = [mlp_client.put(a) for a in inputs]
    for _ in range(4):
        executable.execute(others, wait=True)
        again = [b.to_numpy() for b in executable.execute(uploaded, wait=True)]
        for name, got, want in zip(["w1", "b1", "w2", "b2", "loss"], again,
                                   first):
            assert got.tobytes() == want.tobytes(), name


def test_three_chained_steps_lower_the_loss(mlp_client):
    # Each step takes the previous step's parameters as buffers, without a
    # round trip through the host.
    inputs = make_inputs(seed=2)
    executable = mlp_client.compile(HLO.read_text())
    assert executable.cache_hit  # compiled by the tests above
    params = [mlp_client.put(a, device=1) for a in inputs[:4]]
    data = [mlp_client.put(a, device=1) for a in inputs[4:]]
    host = list(inputs)
    losses = []
    for _ in range(3):
        outputs = executable.execute(params + data)
        params = outputs[:4]
        losses.append(float(outputs[4].to_numpy()))
        new, loss, _ = train_step_reference(*host)
        host = [a.astype(np.float32) for a in new] + host[4:]
        np.testing.assert_allclose(losses[-1], loss, rtol=RTOL)
    assert losses[2] < losses[1] < losses[0]
    for got, want in zip(params, host[:4]):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=RTOL,
                                   atol=ATOL)


@pytest.mark.parametrize("program_format", sorted(PROGRAMS))
def test_train_step_through_pjrtctl_matches_numpy(daemon, tmp_path,
                                                  program_format):
    inputs = make_inputs(seed=3)
    names = ["w1", "b1", "w2", "b2", "x", "labels"]
    args = []
    for name, array in zip(names, inputs):
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        args += ["--input", str(path)]
    out_dir = tmp_path / "out"
    result = subprocess.run(
        [str(PJRTCTL), "--address", daemon.addresses[1], "--json", "run",
         str(PROGRAMS[program_format]), *args, "--output-dir", str(out_dir),
         "--repeat", "2"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    doc = json.loads(result.stdout)
    assert doc["name"] == "jit_train_step"
    assert doc["repeat"] == 2 and len(doc["run_seconds"]["all"]) == 2
    files = [o["file"] for o in doc["outputs"]]
    assert files == [str(out_dir / f"out{i}.npy") for i in range(5)]
    outputs = [np.load(pathlib.Path(f)) for f in files]
    check_step(outputs, inputs)


def test_pjrtctl_table_output_names_every_result(daemon, tmp_path):
    inputs = make_inputs(seed=4)
    args = []
    for i, array in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", array)
        args += ["--input", str(tmp_path / f"in{i}.npy")]
    result = subprocess.run(
        [str(PJRTCTL), "--address", daemon.addresses[0], "run", str(HLO),
         *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "jit_train_step" in result.stdout
    for shape in ["f32[784,128]", "f32[128]", "f32[128,10]", "f32[10]",
                  "f32[]"]:
        assert shape in result.stdout
    assert "runs:" in result.stdout and "median" in result.stdout
