#!/usr/bin/env python3
"""The client-daemon wire, measured by `pjrtctl bench` (C++ client) over
loopback TCP, against baselines measured in this run:

- upload and download of 256 MiB through the chunked gRPC streams against
  the same bytes over one raw loopback TCP connection;
- the round trip of a tiny execution (enqueue, wait for the result) against
  an empty RPC.

Needs PJRTD_TCP_ADDRESS (host:port of a running pjrtd). Prints
{"benchmarks": [metric, ...]}; for bandwidths ratio = pjrtd / TCP, for the
round trip ratio = empty RPC / execute round trip (1 would be free).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

from loopback import raw_tcp_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
SIZE = 256 << 20
RUNS = 5


def main() -> int:
    address = os.environ["PJRTD_TCP_ADDRESS"]
    out = subprocess.run(
        [str(BUILD / "bin" / "pjrtctl"), "--address", address, "--json",
         "bench", "--size", str(SIZE), "--transfers", str(RUNS),
         "--calls", "500"],
        check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    data = os.urandom(SIZE)
    tcp = SIZE / statistics.median(raw_tcp_seconds(data)
                                   for _ in range(RUNS))
    metrics = []
    for direction in ("upload", "download"):
        value = doc[direction]["median"]
        metrics.append({
            "metric": f"stream_{direction}_256MiB_GBps",
            "unit": "GB/s",
            "value": value / 1e9,
            "baseline": "raw TCP stream of the same bytes over loopback",
            "baseline_value": tcp / 1e9,
            "ratio": value / tcp,
            "goal": 0.5,
        })
    empty = doc["empty_call"]["median"]
    execute = doc["execute_round_trip"]["median"]
    metrics.append({
        "metric": "execute_round_trip_us",
        "unit": "us",
        "value": execute,
        "baseline": "empty RPC (Ping)",
        "baseline_value": empty,
        "ratio": empty / execute,
        "goal": 1 / 1.5,
    })
    print(json.dumps({"benchmarks": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
