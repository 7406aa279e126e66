#!/usr/bin/env python3
"""The client-daemon wire, measured by `pjrtctl bench` (C++ client) against
a daemon on this host over loopback TCP, with baselines measured in this
run:

- 256 MiB host-to-device and device-to-host through a shared-memory region
  (the array already lives in the region) against memcpy of the same bytes
  between the same pages, timed by pjrtctl in the same process;
- the same over data channels (or the chunked gRPC streams where the
  daemon offers none) against the same bytes over one raw loopback TCP
  connection between two processes;
- the empty RPC against a raw TCP one-byte round trip;
- the round trip of a tiny execution (one call that replies once the result
  is ready) against the empty RPC;
- a loop of 10,000 dependent steps of that program (each result is the next
  step's argument): pipelined on the ordered execution stream against one
  Execute call per step;
- that loop with one call per step (each step drops the previous result)
  against the execution round trip, and a 16-byte read against the empty
  RPC.

Needs PJRTD_TCP_ADDRESS (host:port of a running pjrtd on this host). Prints
{"benchmarks": [metric, ...]}; every ratio is "higher is better": pjrtd /
baseline for bandwidths and rates, baseline / pjrtd for latencies.
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

from loopback import raw_tcp_round_trip_seconds, raw_tcp_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
SIZE = 256 << 20
RUNS = 5
CALLS = 1000
STEPS = 10000


def main() -> int:
    address = os.environ["PJRTD_TCP_ADDRESS"]
    out = subprocess.run(
        [str(BUILD / "bin" / "pjrtctl"), "--address", address, "--json",
         "bench", "--size", str(SIZE), "--transfers", str(RUNS),
         "--calls", str(CALLS), "--steps", str(STEPS)],
        check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    if "shared_memory_skipped" in doc:
        raise RuntimeError("shared memory was not measured: "
                           + doc["shared_memory_skipped"])
    # pjrtctl times memcpy of the same bytes between the same region pages.
    memcpy = doc["memcpy"]["median"]
    data = os.urandom(SIZE)
    tcp = SIZE / statistics.median(raw_tcp_seconds(data)
                                   for _ in range(RUNS))
    tcp_rtt = statistics.median(raw_tcp_round_trip_seconds(CALLS)) * 1e6

    metrics = []
    for direction, name in (("upload", "host_to_device"),
                            ("download", "device_to_host")):
        value = doc[f"{direction}_shared_memory"]["median"]
        metrics.append({
            "metric": f"shared_memory_{name}_256MiB_GBps",
            "unit": "GB/s",
            "value": value / 1e9,
            "baseline": "memcpy of the same bytes",
            "baseline_value": memcpy / 1e9,
            "ratio": value / memcpy,
            "goal": 0.6,
        })
    # Over TCP the C++ client moves arrays over data channels (pjrtd
    # offers them on loopback), else through the gRPC stream.
    path = "channel" if doc["transfers_over"] == "data channels" \
        else "stream"
    for direction in ("upload", "download"):
        value = doc[direction]["median"]
        metrics.append({
            "metric": f"cpp_{path}_{direction}_256MiB_GBps",
            "unit": "GB/s",
            "value": value / 1e9,
            "baseline": "raw TCP stream of the same bytes between two "
                        "processes over loopback",
            "baseline_value": tcp / 1e9,
            "ratio": value / tcp,
            "goal": 0.5,
        })
    empty = doc["empty_call"]["median"]
    metrics.append({
        "metric": "empty_rpc_us",
        "unit": "us",
        "value": empty,
        "baseline": "raw TCP one-byte round trip over loopback",
        "baseline_value": tcp_rtt,
        "ratio": tcp_rtt / empty,
    })
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
    read = doc["read_16_bytes"]["median"]
    metrics.append({
        "metric": "cpp_read_16_bytes_us",
        "unit": "us",
        "value": read,
        "baseline": "empty RPC (Ping)",
        "baseline_value": empty,
        "ratio": empty / read,
    })
    pipelined = doc["loop_pipelined"]["median"]
    synchronous = doc["loop_synchronous"]["median"]
    metrics.append({
        "metric": "cpp_drop_loop_step_us",
        "unit": "us",
        "value": 1e6 / synchronous,
        "baseline": "execute round trip (one call, result ready)",
        "baseline_value": execute,
        "ratio": execute / (1e6 / synchronous),
        "goal": 1 / 1.2,
    })
    metrics.append({
        "metric": f"dependent_loop_{STEPS}_steps_per_s",
        "unit": "steps/s",
        "value": pipelined,
        "baseline": "the same loop with one Execute call per step",
        "baseline_value": synchronous,
        "ratio": pipelined / synchronous,
        "goal": 3.0,
    })
    print(json.dumps({"benchmarks": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
