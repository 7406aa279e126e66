"""Timing helpers shared by the Python benchmarks."""

from __future__ import annotations

import statistics
import time

import numpy as np


def median_seconds(fn, runs: int = 5) -> float:
    """Median seconds of `runs` calls of `fn`, after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def blas_name() -> str:
    """The BLAS library numpy has loaded (after a matmul)."""
    a = np.ones((64, 64), np.float32)
    a @ a
    with open("/proc/self/maps") as maps:
        text = maps.read()
    for name in ("openblas", "blis", "mkl", "atlas"):
        if name in text:
            return name
    return "reference BLAS"
