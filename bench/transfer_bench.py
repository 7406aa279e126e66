#!/usr/bin/env python3
"""Task-to-task transfer bandwidth over loopback against a raw TCP stream of
the same bytes, both measured in this run.

Starts a cluster of two pjrtd tasks on 127.0.0.1. pjrtd's time is one
CopyToRemoteDevice of a 256 MiB buffer already on task 0's device into a
receive buffer made on task 1, until every byte has arrived; the baseline
is the same bytes sent over one loopback TCP connection from a bytes object
into a preallocated buffer (recv_into). Prints {"benchmarks": [metric]};
ratio = pjrtd's bandwidth / raw TCP's (goal >= 0.5).

The same cluster then runs an all-reduce of 256 MiB of f32 across the two
tasks (one device each, one client per task launching its replica with a
shared launch id; Gloo between the tasks): its algorithm bandwidth (bytes
reduced / time from launch to both results ready) against the same raw TCP
stream (goal >= 0.5).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import pjrt_client
from loopback import free_ports, raw_tcp_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
SIZE = 256 << 20
RUNS = 5

ALL_REDUCE = f"""
HloModule all_reduce_256MiB, replica_count=2
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }}
ENTRY e {{
  x = f32[{SIZE // 4}] parameter(0)
  ROOT y = f32[{SIZE // 4}] all-reduce(x), replica_groups={{}}, to_apply=add
}}"""


def all_reduce_seconds(clients) -> float:
    """Median seconds of an all-reduce of SIZE bytes across the two tasks,
    each task's replica launched by its own client at once."""
    executables = [c.compile(ALL_REDUCE, device_assignment=[[0], [1]])
                   for c in clients]
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-100, 100, SIZE // 4).astype(np.float32)
              for _ in clients]
    sources = [c.put(x, device=t) for t, (c, x) in
               enumerate(zip(clients, inputs))]
    times = []
    for run in range(RUNS + 1):
        results = [None, None]

        def launch(task: int) -> None:
            (out,), = executables[task].execute_replicated(
                [[sources[task]]], launch_id=500 + run)
            out.block_until_ready()
            results[task] = out

        threads = [threading.Thread(target=launch, args=(t,))
                   for t in range(2)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if run > 0:  # the first run connects the tasks
            times.append(time.perf_counter() - start)
        if run == RUNS:
            want = inputs[0] + inputs[1]
            for out in results:
                assert np.array_equal(out.to_numpy(), want)
        for out in results:
            out.delete()
    return statistics.median(times)


def bandwidth_metric(name: str, seconds: float, raw: float) -> dict:
    """SIZE bytes in `seconds` against the raw TCP stream's `raw`."""
    return {
        "metric": name,
        "unit": "GB/s",
        "value": SIZE / seconds / 1e9,
        "baseline": "raw TCP stream of the same bytes over loopback",
        "baseline_value": SIZE / raw / 1e9,
        "ratio": raw / seconds,
        "goal": 0.5,
    }


def main() -> int:
    data = np.random.default_rng(0).integers(0, 256, SIZE, dtype=np.uint8)
    raw = statistics.median(raw_tcp_seconds(data.tobytes())
                            for _ in range(RUNS))
    with tempfile.TemporaryDirectory(prefix="pjrt-bench-cluster.") as tmp:
        root = pathlib.Path(tmp)
        secret = root / "secret"
        secret.write_text("bench-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        peers = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
        daemons = []
        for task in range(2):
            daemons.append(subprocess.Popen(
                [str(BUILD / "bin" / "pjrtd"), "--platform", "host",
                 "--listen", f"unix://{root}/task{task}.sock",
                 "--address-file", str(root / f"task{task}.addr"),
                 "--task-id", str(task), "--cluster", peers,
                 "--cluster-secret-file", str(secret),
                 "--log-level", "warn"]))
        try:
            deadline = time.monotonic() + 60
            for task in range(2):
                while not (root / f"task{task}.addr").exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not start")
                    time.sleep(0.01)
            sender = pjrt_client.connect(f"unix://{root}/task0.sock")
            receiver = pjrt_client.connect(f"unix://{root}/task1.sock")
            source = sender.put(data, device=0)
            times = []
            for i in range(RUNS + 1):
                (r,), (d,) = receiver.make_cross_host_receive_buffers(
                    [data], device=1)
                start = time.perf_counter()
                source.copy_to_remote_device(d)
                r.block_until_ready()
                if i > 0:  # the first run sets up the peer connection
                    times.append(time.perf_counter() - start)
                if i == RUNS:
                    assert np.array_equal(r.to_numpy(), data)
                r.delete()
            pjrtd = statistics.median(times)
            source.delete()
            all_reduce = all_reduce_seconds([sender, receiver])
            sender.close()
            receiver.close()
        finally:
            for d in daemons:
                d.send_signal(signal.SIGTERM)
                d.wait(timeout=30)
    metrics = [bandwidth_metric(name, seconds, raw) for name, seconds in (
        ("task_to_task_transfer_256MiB_loopback_GBps", pjrtd),
        ("all_reduce_256MiB_f32_two_tasks_loopback_GBps", all_reduce))]
    print(json.dumps({"benchmarks": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
