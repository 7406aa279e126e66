#!/usr/bin/env python3
"""Runs pjrtd's benchmarks and prints one JSON document.

Each benchmark prints {"benchmarks": [metric, ...]} where a metric has its
value, the baseline measured in the same run, and the ratio. This script
starts the daemon the client benchmarks need, runs them all and merges their
metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time


def run_json(argv: list[str], env: dict[str, str] | None = None) -> list:
    out = subprocess.run(argv, check=True, capture_output=True, text=True,
                         env=env)
    return json.loads(out.stdout)["benchmarks"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    metrics = run_json([str(build / "bin" / "compiler_bench")])
    # The CUDA backend's (built with the CUDA Toolkit; without a GPU it
    # measures only the NVRTC compile times).
    if (build / "bin" / "gpu_bench").exists():
        metrics += run_json([str(build / "bin" / "gpu_bench")])

    with tempfile.TemporaryDirectory(prefix="pjrt-bench.") as tmp:
        address_file = pathlib.Path(tmp) / "addresses"
        daemon = subprocess.Popen(
            [str(build / "bin" / "pjrtd"), "--platform", "host",
             "--listen", f"unix://{tmp}/pjrtd.sock",
             "--listen", "127.0.0.1:0",
             "--address-file", str(address_file), "--log-level", "warn"])
        try:
            deadline = time.monotonic() + 30
            while not address_file.exists():
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pjrtd did not start")
                time.sleep(0.01)
            addresses = address_file.read_text().split()
            env = dict(os.environ, PJRTD_ADDRESS=addresses[0],
                       PJRTD_TCP_ADDRESS=addresses[1],
                       PJRT_BUILD_DIR=str(build.resolve()))
            here = pathlib.Path(__file__).parent
            for script in sorted(here.glob("*_bench.py")):
                metrics += run_json([sys.executable, str(script)], env=env)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
    print(json.dumps({"benchmarks": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
