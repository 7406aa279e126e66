#!/usr/bin/env python3
"""Single-controller launch latency across a cluster, against the same
launch made by one client per task, both measured in this run.

Starts a cluster of three pjrtd tasks (one host device each) on 127.0.0.1.
pjrtd's time is one whole-cluster client's execute_replicated of a tiny
program (x + 1 on f32[4], one replica per task, its arguments already on
their devices) until every result is ready: one call to task 0, which
forwards each other task's part over the peer channel. The baseline is the
same launch made by three clients in parallel, one per task, with a shared
launch id (multi-controller). Ratio = multi-controller time /
single-controller time (goal: at most 1.5x, ratio >= 0.67).

Then flat against hierarchical, for collectives across tasks: an all-reduce
of 64 MiB of f32 over four devices, on two tasks of two devices (this
daemon's way: a task's devices meet in memory, one Gloo rank per task)
against four tasks of one device (flat: every device a rank of Gloo's
ring), both launched by one whole-cluster client. Ratio = flat time /
hierarchical time (goal >= 1: hierarchical is kept only while it is no
slower). Prints {"benchmarks": [metrics]}.
"""

from __future__ import annotations

import contextlib
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
from typing import Iterator

import numpy as np

import pjrt_client
from loopback import free_ports

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
TASKS = 3
RUNS = 200

TINY = """
HloModule tiny, replica_count=3
ENTRY e {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, ones)
}"""
ASSIGNMENT = [[t] for t in range(TASKS)]

ALL_REDUCE_BYTES = 64 << 20
RUNS_ALL_REDUCE = 5
ALL_REDUCE_4 = f"""
HloModule all_reduce_4, replica_count=4
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }}
ENTRY e {{
  x = f32[{ALL_REDUCE_BYTES // 4}] parameter(0)
  ROOT y = f32[{ALL_REDUCE_BYTES // 4}] all-reduce(x), replica_groups={{}},
      to_apply=add
}}"""


def single_controller_seconds(controller) -> float:
    exe = controller.compile(TINY, device_assignment=ASSIGNMENT)
    args = [[controller.put(np.zeros(4, np.float32), device=t)]
            for t in range(TASKS)]
    times = []
    for run in range(RUNS + 10):
        start = time.perf_counter()
        outs = exe.execute_replicated(args)
        for (out,) in outs:
            out.block_until_ready()
        if run >= 10:  # warm-up: connections, proxies
            times.append(time.perf_counter() - start)
        if run == 0:
            for (out,) in outs:
                assert np.array_equal(out.to_numpy(), np.ones(4))
        for (out,) in outs:
            out.delete()
    return statistics.median(times)


def multi_controller_seconds(clients) -> float:
    executables = [c.compile(TINY, device_assignment=ASSIGNMENT)
                   for c in clients]
    args = [c.put(np.zeros(4, np.float32), device=t)
            for t, c in enumerate(clients)]
    times = []
    start_barrier = threading.Barrier(TASKS + 1)
    done_barrier = threading.Barrier(TASKS + 1)
    launch_id = [0]

    def worker(task: int) -> None:
        for _ in range(RUNS + 10):
            start_barrier.wait()
            (out,), = executables[task].execute_replicated(
                [[args[task]]], launch_id=launch_id[0])
            out.block_until_ready()
            out.delete()
            done_barrier.wait()

    threads = [threading.Thread(target=worker, args=(t,))
               for t in range(TASKS)]
    for t in threads:
        t.start()
    for run in range(RUNS + 10):
        launch_id[0] = 1000 + run
        start_barrier.wait()
        start = time.perf_counter()
        done_barrier.wait()
        if run >= 10:
            times.append(time.perf_counter() - start)
    for t in threads:
        t.join()
    return statistics.median(times)


@contextlib.contextmanager
def cluster(devices: list[int]) -> Iterator[list[str]]:
    """A cluster of len(devices) tasks on loopback, task t with devices[t]
    host devices; yields each task's client address."""
    with tempfile.TemporaryDirectory(prefix="pjrt-bench-launch.") as tmp:
        root = pathlib.Path(tmp)
        secret = root / "secret"
        secret.write_text("bench-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        peers = ",".join(f"127.0.0.1:{p}" for p in free_ports(len(devices)))
        daemons = []
        for task, count in enumerate(devices):
            daemons.append(subprocess.Popen(
                [str(BUILD / "bin" / "pjrtd"), "--platform", "host",
                 "--host-devices", str(count),
                 "--listen", f"unix://{root}/task{task}.sock",
                 "--address-file", str(root / f"task{task}.addr"),
                 "--task-id", str(task), "--cluster", peers,
                 "--cluster-secret-file", str(secret),
                 "--log-level", "error"]))
        try:
            deadline = time.monotonic() + 60
            for task in range(len(devices)):
                while not (root / f"task{task}.addr").exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not start")
                    time.sleep(0.01)
            yield [f"unix://{root}/task{t}.sock" for t in range(len(devices))]
        finally:
            for d in daemons:
                d.send_signal(signal.SIGTERM)
                d.wait(timeout=30)


def all_reduce_seconds(devices: list[int]) -> float:
    """Median seconds of an all-reduce of ALL_REDUCE_BYTES over four
    participants on the devices of `devices` (tasks x devices each)."""
    with cluster(devices) as addresses:
        c = pjrt_client.connect(addresses[0], whole_cluster=True)
        exe = c.compile(ALL_REDUCE_4)
        rng = np.random.default_rng(2)
        inputs = [rng.integers(-100, 100, ALL_REDUCE_BYTES // 4)
                  .astype(np.float32) for _ in range(4)]
        args = [[c.put(x, device=d)] for d, x in enumerate(inputs)]
        times = []
        for run in range(RUNS_ALL_REDUCE + 1):
            start = time.perf_counter()
            outs = exe.execute_replicated(args)
            for (out,) in outs:
                out.block_until_ready()
            if run > 0:  # the first run connects the tasks
                times.append(time.perf_counter() - start)
            if run == RUNS_ALL_REDUCE:
                assert np.array_equal(outs[3][0].to_numpy(), sum(inputs))
            for (out,) in outs:
                out.delete()
        c.close()
    return statistics.median(times)


def main() -> int:
    with cluster([1] * TASKS) as addresses:
        clients = [pjrt_client.connect(a) for a in addresses]
        controller = pjrt_client.connect(addresses[0], whole_cluster=True)
        # Alternate, so that both see the same machine.
        multi, single = [], []
        for _ in range(3):
            multi.append(multi_controller_seconds(clients))
            single.append(single_controller_seconds(controller))
        controller.close()
        for c in clients:
            c.close()
    pjrtd = statistics.median(single)
    baseline = statistics.median(multi)
    hierarchical = all_reduce_seconds([2, 2])
    flat = all_reduce_seconds([1, 1, 1, 1])
    print(json.dumps({"benchmarks": [{
        "metric": "single_controller_launch_3_tasks_tiny_us",
        "unit": "us",
        "value": pjrtd * 1e6,
        "baseline": "the same launch by one client per task, in parallel",
        "baseline_value": baseline * 1e6,
        # At most 1.5x the multi-controller time.
        "ratio": baseline / pjrtd,
        "goal": 1 / 1.5,
    }, {
        "metric": "all_reduce_64MiB_4_devices_on_2_tasks_GBps",
        "unit": "GB/s",
        "value": ALL_REDUCE_BYTES / hierarchical / 1e9,
        "baseline": "the same all-reduce flat: 4 tasks of one device, each "
                    "a rank of Gloo's ring",
        "baseline_value": ALL_REDUCE_BYTES / flat / 1e9,
        # Hierarchical (devices of a task meet in memory, one rank per
        # task) is kept if it is no slower than flat.
        "ratio": flat / hierarchical,
        "goal": 1.0,
    }]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
