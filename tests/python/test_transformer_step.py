"""A transformer-style training step written as JAX prints it (embedding
gather, dots, softmax, layer norm, scatter-add gradient; see
examples/transformer_step.py), in StableHLO (tests/data/transformer_step.mlir,
as jax.jit(f).lower(x).as_text() prints it) and in HLO text
(tests/data/transformer_step.hlo), run through the Python client and through
`pjrtctl run`, against the same step in numpy; the two formats give
bit-identical results."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import PJRTCTL
from hlo_harness import run, to_wire

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "examples"))
import transformer_step  # noqa: E402

SIZES = dict(tokens=256, vocab=300, width=32, layers=2)
DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"
FILES = {"hlo": DATA / "transformer_step.hlo",
         "stablehlo": DATA / "transformer_step.mlir"}


def assert_close(outputs, expected):
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        assert got.shape == want.shape
        # 1e-4 relative to the output's scale (a sum of float32 terms in
        # another order differs by rounding, not by more).
        scale = max(np.max(np.abs(want)), 1e-30)
        assert np.max(np.abs(got - want)) <= 1e-4 * scale


@pytest.mark.parametrize("dialect", sorted(FILES))
def test_the_checked_in_programs_are_what_the_generator_writes(dialect):
    assert FILES[dialect].read_text() == transformer_step.program(
        **SIZES, dialect=dialect)


@pytest.mark.parametrize("dialect", sorted(FILES))
def test_the_step_matches_numpy_through_the_python_client(client, dialect):
    program = FILES[dialect].read_text()
    args = transformer_step.inputs(**SIZES)
    types = ["f32"] * (len(args) - 2) + ["s32", "f32"]
    outputs = run(client, program, list(zip(types, args)))
    assert_close(outputs, transformer_step.numpy_step(args, SIZES["layers"]))


@pytest.mark.parametrize("address", ["unix"], indirect=True)
def test_both_formats_give_bit_identical_results(client):
    args = transformer_step.inputs(**SIZES, seed=3)
    types = ["f32"] * (len(args) - 2) + ["s32", "f32"]
    # Each compiled afresh and run once (see test_mlp.py).
    results = []
    for d in ("hlo", "stablehlo"):
        executable = client.compile(FILES[d].read_text(),
                                    collective_timeout=17.0)
        outputs = executable.execute([to_wire(t, a) for t, a in
                                      zip(types, args)])
        results.append([o.to_numpy() for o in outputs])
    hlo, stablehlo = results
    for a, b in zip(hlo, stablehlo):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_two_steps_reduce_the_loss(client):
    program = transformer_step.program(**SIZES)
    args = transformer_step.inputs(**SIZES)
    types = ["f32"] * (len(args) - 2) + ["s32", "f32"]
    first = run(client, program, list(zip(types, args)))
    second = run(client, program,
                 list(zip(types, first[:-1] + args[-2:])))
    assert second[-1] < first[-1]


@pytest.mark.parametrize("address", ["unix"], indirect=True)
@pytest.mark.parametrize("dialect", sorted(FILES))
def test_the_step_matches_numpy_through_pjrtctl_run(address, tmp_path,
                                                    dialect):
    program = FILES[dialect]
    args = transformer_step.inputs(**SIZES)
    command = [str(PJRTCTL), "--address", address, "run", str(program),
               "--output-dir", str(tmp_path / "out")]
    for i, a in enumerate(args):
        np.save(tmp_path / f"in{i}.npy", a)
        command += ["--input", str(tmp_path / f"in{i}.npy")]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    outputs = [np.load(tmp_path / "out" / f"out{i}.npy")
               for i in range(len(args) - 1)]
    assert_close(outputs, transformer_step.numpy_step(args, SIZES["layers"]))
