#!/usr/bin/env python3
"""The ops beyond element-wise loops, through pjrtd, each against a
baseline measured in the same run:

- a 3x3 f32 convolution (batch 32, 56x56, 64->64, NHWC) against a dot of
  the same FLOPs through pjrtd (the host GEMM rate);
- sort of 16M f32 keys against numpy's sort;
- a gather of 64k rows of 1024 f32 from a 256k-row table against
  numpy's take;
- a while loop of 100,000 trips of a scalar body, in microseconds per trip,
  against the goal of 2 us;
- the transformer-style training step of examples/transformer_step.py
  against the same step in numpy.

Inputs stay on the device; a run is timed until its results are ready.
Prints {"benchmarks": [metric]}; ratio > 1 means pjrtd meets or beats the
baseline.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import pjrt_client

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
import transformer_step  # noqa: E402
from timing import median_seconds  # noqa: E402


def timed_run(exe, buffers, runs: int = 5) -> float:
    def step():
        for r in exe.execute(buffers):
            r.block_until_ready()
            r.delete()
    return median_seconds(step, runs)


def metric(name, unit, value, baseline, baseline_value, ratio, goal):
    return {"metric": name, "unit": unit, "value": value,
            "baseline": baseline, "baseline_value": baseline_value,
            "ratio": ratio, "goal": goal}


def convolution(client) -> dict:
    n, hw, c = 32, 56, 64
    rng = np.random.default_rng(0)
    x = client.put(rng.standard_normal((n, hw, hw, c)).astype(np.float32))
    w = client.put(rng.standard_normal((3, 3, c, c)).astype(np.float32))
    conv = client.compile(f"""
HloModule conv
ENTRY e {{
  x = f32[{n},{hw},{hw},{c}] parameter(0)
  w = f32[3,3,{c},{c}] parameter(1)
  ROOT y = f32[{n},{hw},{hw},{c}] convolution(x, w),
    window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
}}
""")
    rows, k = n * hw * hw, 9 * c
    a = client.put(rng.standard_normal((rows, k)).astype(np.float32))
    b = client.put(rng.standard_normal((k, c)).astype(np.float32))
    gemm = client.compile(f"""
HloModule gemm
ENTRY e {{
  a = f32[{rows},{k}] parameter(0)
  b = f32[{k},{c}] parameter(1)
  ROOT d = f32[{rows},{c}] dot(a, b), lhs_contracting_dims={{1}},
    rhs_contracting_dims={{0}}
}}
""")
    flops = 2.0 * rows * k * c
    conv_rate = flops / timed_run(conv, [x, w]) / 1e9
    gemm_rate = flops / timed_run(gemm, [a, b]) / 1e9
    return metric("convolution_3x3_f32_nhwc_32x56x56x64_gflops", "GFLOP/s",
                  conv_rate, "dot_same_flops_through_pjrtd", gemm_rate,
                  conv_rate / gemm_rate, 0.6)


def sort(client) -> dict:
    n = 16 << 20
    keys = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    exe = client.compile(f"""
HloModule sort
cmp {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}}
ENTRY e {{
  x = f32[{n}] parameter(0)
  ROOT s = f32[{n}] sort(x), dimensions={{0}}, to_apply=cmp
}}
""")
    ours = timed_run(exe, [client.put(keys)], runs=3)
    theirs = median_seconds(lambda: np.sort(keys), runs=3)
    return metric("sort_16M_f32_keys_per_second", "keys/s", n / ours,
                  "numpy_sort", n / theirs, theirs / ours, 1.0)


def gather(client) -> dict:
    rows, width, picks = 256 << 10, 1024, 64 << 10
    rng = np.random.default_rng(2)
    table = rng.standard_normal((rows, width)).astype(np.float32)
    ids = rng.integers(0, rows, picks).astype(np.int32)
    exe = client.compile(f"""
HloModule take
ENTRY e {{
  t = f32[{rows},{width}] parameter(0)
  i = s32[{picks},1] parameter(1)
  ROOT g = f32[{picks},{width}] gather(t, i), offset_dims={{1}},
    collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1,
    slice_sizes={{1,{width}}}
}}
""")
    ours = timed_run(exe, [client.put(table), client.put(ids[:, None])])
    theirs = median_seconds(lambda: np.take(table, ids, axis=0))
    bytes_moved = 2.0 * picks * width * 4
    return metric("gather_64k_rows_of_1024_f32_GBps", "GB/s",
                  bytes_moved / ours / 1e9, "numpy_take",
                  bytes_moved / theirs / 1e9, theirs / ours, 1.0)


def while_loop(client) -> dict:
    trips = 100_000
    exe = client.compile(f"""
HloModule loop
body {{
  p = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[] get-tuple-element(p), index=1
  i1 = s32[] add(i, s32[] constant(1))
  x1 = f32[] multiply(x, f32[] constant(0.999))
  ROOT t = (s32[], f32[]) tuple(i1, x1)
}}
cond {{
  p = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant({trips})), direction=LT
}}
ENTRY e {{
  x = f32[] parameter(0)
  init = (s32[], f32[]) tuple(s32[] constant(0), x)
  ROOT w = (s32[], f32[]) while(init), condition=cond, body=body
}}
""")
    seconds = timed_run(exe, [client.put(np.float32(1))], runs=3)
    per_trip = seconds / trips * 1e6
    return metric("while_loop_scalar_body_us_per_trip", "us", per_trip,
                  "goal_2us", 2.0, 2.0 / per_trip, 1.0)


def training_step(client) -> dict:
    sizes = dict(tokens=2048, vocab=8000, width=256, layers=2)
    args = transformer_step.inputs(**sizes)
    exe = client.compile(transformer_step.program(**sizes))
    buffers = [client.put(a) for a in args]
    ours = timed_run(exe, buffers)
    theirs = median_seconds(
        lambda: transformer_step.numpy_step(args, sizes["layers"]))
    return metric("transformer_step_2_layers_steps_per_second", "steps/s",
                  1 / ours, "numpy_same_step_float32", 1 / theirs,
                  theirs / ours, 2.0)


def main() -> None:
    with pjrt_client.connect(client_name="ops_bench") as client:
        metrics = [convolution(client), sort(client), gather(client),
                   while_loop(client), training_step(client)]
    print(json.dumps({"benchmarks": metrics}))


if __name__ == "__main__":
    main()
