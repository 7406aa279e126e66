#!/usr/bin/env python3
"""The paths a Python user takes by default, each against a baseline timed
in this run on this machine:

- a loop ``x = exe.execute([x])[0]`` (each step drops the previous result)
  against the same calls keeping every result (no deletes at all), and
  against a bare gRPC echo call (bench/echo_server.cc) from Python;
- ``to_numpy()`` and ``put()`` of 256 MiB over loopback TCP (a client
  without shared memory), over data channels (the default) and through
  the gRPC streams, against the same bytes over one raw TCP connection
  between two processes;
- ``to_numpy()`` of a 16-byte result against the echo call;
- a pipelined dependent loop of 10,000 steps against the C++ client's
  (``pjrtctl bench``) in the same run;
- the default ``put()`` and ``to_numpy()`` of 256 MiB of a client on the
  daemon's host (shared memory) against a warm memcpy (numpy copyto between
  two arrays already touched);
- f32 matmul 2048^3 and 4096^3 (one Execute with wait) against numpy's
  ``@`` on the BLAS numpy loads (OpenBLAS after ``make bench-deps``).

Needs PJRTD_ADDRESS (unix socket of a running pjrtd on this host),
PJRTD_TCP_ADDRESS and PJRT_BUILD_DIR. Prints {"benchmarks": [metric, ...]};
every ratio is "higher is better".
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

import pjrt_client
from loopback import raw_tcp_seconds
from timing import blas_name, median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
SIZE = 256 << 20
RUNS = 5
STEPS = 2000
PIPELINED_STEPS = 10000

ADD_ONE = """HloModule client_bench
ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, ones)
}
"""

MATMUL = """HloModule matmul_{n}
ENTRY main {{
  a = f32[{n},{n}] parameter(0)
  b = f32[{n},{n}] parameter(1)
  ROOT c = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}},
      rhs_contracting_dims={{0}}
}}
"""


def per_step(fn, steps: int) -> float:
    """Median over runs of the seconds per step of `fn(steps)`."""
    return median_seconds(lambda: fn(steps)) / steps


class EchoServer:
    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="pjrt-echo.")
        path = pathlib.Path(self._tmp.name) / "address"
        self.process = subprocess.Popen(
            [str(BUILD / "bin" / "echo_server"), str(path)])
        deadline = time.monotonic() + 30
        while not path.exists():
            if self.process.poll() is not None or \
                    time.monotonic() > deadline:
                raise RuntimeError("echo_server did not start")
            time.sleep(0.01)
        self.address = path.read_text().strip()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self._tmp.cleanup()


def echo_seconds(address: str, calls: int) -> float:
    """Seconds per unary call of 16 bytes to the echo server."""
    channel = grpc.insecure_channel(address)
    echo = channel.unary_unary("/bench.Echo/Echo")
    payload = b"\0" * 16
    for _ in range(100):
        echo(payload)

    def run(n: int) -> None:
        for _ in range(n):
            echo(payload)
    seconds = per_step(run, calls)
    channel.close()
    return seconds


def metric(name, unit, value, baseline, baseline_value, ratio, goal=None):
    m = {"metric": name, "unit": unit, "value": value,
         "baseline": baseline, "baseline_value": baseline_value,
         "ratio": ratio}
    if goal is not None:
        m["goal"] = goal
    return m


def loops(client, echo: float) -> list:
    exe = client.compile(ADD_ONE)
    x0 = np.arange(4, dtype=np.float32)

    def dropping(n: int) -> None:
        x = client.put(x0)
        for _ in range(n):
            x = exe.execute([x])[0]
        x.block_until_ready()

    def keeping(n: int) -> None:
        x = client.put(x0)
        kept = []
        for _ in range(n):
            x = exe.execute([x])[0]
            kept.append(x)
        x.block_until_ready()
        client.delete(kept)

    drop = per_step(dropping, STEPS)
    keep = per_step(keeping, STEPS)
    small = client.put(x0)
    small.to_numpy()

    def read(n: int) -> None:
        for _ in range(n):
            small.to_numpy()
    tiny = per_step(read, STEPS)
    return [
        metric("python_drop_loop_step_us", "us", drop * 1e6,
               "the same Execute calls keeping every result (no deletes)",
               keep * 1e6, keep / drop, goal=1 / 1.2),
        metric("python_drop_loop_vs_echo_step_us", "us", drop * 1e6,
               "a unary gRPC echo call from Python (bench/echo_server)",
               echo * 1e6, echo / drop),
        metric("python_to_numpy_16B_us", "us", tiny * 1e6,
               "a unary gRPC echo call from Python (bench/echo_server)",
               echo * 1e6, echo / tiny),
    ]


def pipelined(client, address: str) -> list:
    exe = client.compile(ADD_ONE)

    def run(n: int) -> None:
        x = client.put(np.zeros(4, np.float32))
        for _ in range(n):
            x = exe.execute([x], pipelined=True)[0]
        assert x.to_numpy()[0] == n

    seconds = median_seconds(lambda: run(PIPELINED_STEPS), runs=3)
    out = subprocess.run(
        [str(BUILD / "bin" / "pjrtctl"), "--address", address, "--json",
         "bench", "--size", str(1 << 20), "--transfers", "1",
         "--calls", "100", "--steps", str(PIPELINED_STEPS)],
        check=True, capture_output=True, text=True)
    cpp = json.loads(out.stdout)["loop_pipelined"]["median"]
    python = PIPELINED_STEPS / seconds
    return [metric(f"python_pipelined_loop_{PIPELINED_STEPS}_steps_per_s",
                   "steps/s", python,
                   "the C++ client's pipelined loop (pjrtctl bench)", cpp,
                   python / cpp, goal=0.5)]


def once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def transfers_tcp(tcp_address: str) -> list:
    data = np.frombuffer(os.urandom(SIZE), dtype=np.uint8)
    raw = data.tobytes()
    out = []
    for channels in (True, False):
        with pjrt_client.connect(tcp_address, shared_memory=False,
                                 data_channels=channels) as c:
            buffer = c.put(data)
            assert np.array_equal(buffer.to_numpy(), data)
            assert c.uses_data_channels == channels
            raw_tcp_seconds(raw)
            # Interleaved, round by round: this machine's loopback speed
            # drifts within seconds.
            tcp, down, up = [], [], []
            for _ in range(2 * RUNS + 1):
                tcp.append(raw_tcp_seconds(raw))
                down.append(once(buffer.to_numpy))
                up.append(once(lambda: c.put(data).delete()))
            del buffer
        path = "" if channels else "_grpc_stream"
        baseline = ("raw TCP stream of the same bytes between two processes "
                    "over loopback")
        tcp_rate = SIZE / statistics.median(tcp)
        out += [
            metric(f"python_to_numpy_tcp{path}_256MiB_GBps", "GB/s",
                   SIZE / statistics.median(down) / 1e9, baseline,
                   tcp_rate / 1e9,
                   statistics.median(t / d for t, d in zip(tcp, down)),
                   goal=0.7 if channels else None),
            metric(f"python_put_tcp{path}_256MiB_GBps", "GB/s",
                   SIZE / statistics.median(up) / 1e9, baseline,
                   tcp_rate / 1e9,
                   statistics.median(t / u for t, u in zip(tcp, up)),
                   goal=0.8 if channels else None),
        ]
    return out


def transfers_shm(client) -> list:
    data = np.frombuffer(os.urandom(SIZE), dtype=np.uint8).copy()
    target = np.empty_like(data)
    target.fill(0)
    buffer = client.put(data)
    if not client.uses_shared_memory:
        raise RuntimeError("shared memory did not work with the daemon")
    # Warm: the staging regions exist, the daemon's memory is mapped.
    buffer.to_numpy()
    client.put(data).delete()
    # Interleaved, round by round, as the TCP rows are.
    memcpy, down, up = [], [], []
    for _ in range(2 * RUNS + 1):
        memcpy.append(once(lambda: np.copyto(target, data)))
        down.append(once(buffer.to_numpy))
        up.append(once(lambda: client.put(data).delete()))
    del buffer
    baseline = "warm memcpy of the same bytes (numpy copyto)"
    memcpy_rate = SIZE / statistics.median(memcpy)
    return [
        metric("python_shared_memory_put_256MiB_GBps", "GB/s",
               SIZE / statistics.median(up) / 1e9, baseline,
               memcpy_rate / 1e9,
               statistics.median(m / u for m, u in zip(memcpy, up)),
               goal=0.8),
        metric("python_shared_memory_to_numpy_256MiB_GBps", "GB/s",
               SIZE / statistics.median(down) / 1e9, baseline,
               memcpy_rate / 1e9,
               statistics.median(m / d for m, d in zip(memcpy, down)),
               goal=0.8),
    ]


def matmuls(client) -> list:
    blas = blas_name()
    out = []
    rng = np.random.default_rng(0)
    for n in (2048, 4096):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        exe = client.compile(MATMUL.format(n=n))
        da, db = client.put(a), client.put(b)
        runs = 5 if n == 2048 else 3

        def run() -> None:
            exe.execute([da, db], wait=True)
        pjrtd = median_seconds(run, runs)
        numpy = median_seconds(lambda: a @ b, runs)
        flops = 2.0 * n ** 3
        out.append(metric(f"matmul_f32_{n}_GFLOPs", "GFLOP/s",
                          flops / pjrtd / 1e9,
                          f"numpy a @ b on {blas}", flops / numpy / 1e9,
                          numpy / pjrtd, goal=1.0))
    return out


def main() -> int:
    address = os.environ["PJRTD_ADDRESS"]
    tcp_address = os.environ["PJRTD_TCP_ADDRESS"]
    echo_server = EchoServer()
    try:
        echo = echo_seconds(echo_server.address, STEPS)
    finally:
        echo_server.close()
    metrics = []
    with pjrt_client.connect(address, client_name="client_bench") as c:
        metrics += loops(c, echo)
        metrics += pipelined(c, address)
        metrics += transfers_shm(c)
        metrics += matmuls(c)
    metrics += transfers_tcp(tcp_address)
    print(json.dumps({"benchmarks": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
