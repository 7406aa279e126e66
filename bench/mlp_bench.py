#!/usr/bin/env python3
"""The MLP training step (tests/data/mlp_train_step.hlo) through pjrtd
against the same step in numpy, both in float32, both timed in this run.

pjrtd's loop is written as a user writes it: each step executes on the
parameters the previous step made (dropping the old ones), then waits with
block_until_ready on each result. numpy's is the same step on arrays in
memory, on the BLAS numpy loads (OpenBLAS after `make bench-deps`). A
second metric sets that loop against one call per step that waits for the
run (Execute with wait=True): one round trip plus the math. Prints
{"benchmarks": [metric, ...]}; ratio > 1 means pjrtd is faster.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time

import numpy as np

import pjrt_client
from timing import blas_name

REPO = pathlib.Path(__file__).resolve().parents[1]
# numpy's step is the one the MLP test checks pjrtd against.
sys.path.insert(0, str(REPO / "tests" / "python"))
import mlp_reference  # noqa: E402
HLO = REPO / "tests" / "data" / "mlp_train_step.hlo"
BATCH, IN, HIDDEN, OUT = (mlp_reference.BATCH, mlp_reference.IN,
                          mlp_reference.HIDDEN, mlp_reference.OUT)


def inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((IN, HIDDEN)) / 28).astype(np.float32),
        (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        (rng.standard_normal((HIDDEN, OUT)) / 12).astype(np.float32),
        (0.1 * rng.standard_normal(OUT)).astype(np.float32),
        rng.standard_normal((BATCH, IN)).astype(np.float32),
        rng.integers(0, OUT, size=BATCH).astype(np.int32),
    ]


def median_times(fns, runs: int) -> list[float]:
    """Median seconds of each of `fns`, called in turn `runs` times, so
    that all see the same machine (whose speed drifts). The order rotates
    from one round to the next: each follows each of the others as often
    (OpenBLAS's threads, for one, spin for a while after numpy's step and
    slow down whatever comes next)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for run in range(runs):
        for i in range(len(fns)):
            k = (run + i) % len(fns)
            start = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    args = inputs()
    blas = blas_name()
    with pjrt_client.connect(client_name="mlp_bench") as client:
        exe = client.compile(HLO.read_text())
        params = [client.put(a) for a in args[:4]]
        data = [client.put(a) for a in args[4:]]

        def step():
            nonlocal params
            results = exe.execute(params + data)
            for r in results:
                r.block_until_ready()
            params = results[:4]

        def one_call():
            exe.execute(params + data, wait=True)

        def numpy_step():
            mlp_reference.train_step(*args)

        numpy_seconds, pjrtd_seconds, one_call_seconds = median_times(
            [numpy_step, step, one_call], runs=300)
    metrics = [{
        "metric": "mlp_train_step_steps_per_second",
        "unit": "steps/s",
        "value": 1.0 / pjrtd_seconds,
        "baseline": f"numpy_same_step_float32 on {blas}",
        "baseline_value": 1.0 / numpy_seconds,
        "ratio": numpy_seconds / pjrtd_seconds,
        "goal": 1.0,
    }, {
        "metric": "mlp_user_loop_vs_one_call_steps_per_second",
        "unit": "steps/s",
        "value": 1.0 / pjrtd_seconds,
        "baseline": "one Execute call per step that waits for the run",
        "baseline_value": 1.0 / one_call_seconds,
        "ratio": one_call_seconds / pjrtd_seconds,
        "goal": 0.9,
    }]
    print(json.dumps({"benchmarks": metrics}))


if __name__ == "__main__":
    main()
