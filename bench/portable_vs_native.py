"""The portable build's host compiler against a -march=native build of the
same source, on this machine.

  python3 bench/portable_vs_native.py [BUILD_DIR] [--native-dir DIR] [--runs N]

BUILD_DIR (default build) is the portable build (the default: x86-64-v2
binaries that load the kernel module of the CPU's level). The native build
is configured in --native-dir (default BUILD_DIR-native) with
-DPJRT_NATIVE_ARCH=ON, and only compiler_bench is built there. Both
compiler_bench binaries then run in turn, --runs times each (default 3);
for every metric the median of the portable build's values is divided by
the median of the native build's. Prints one JSON object like the other
benchmarks: the metric, its value, the native build's value as the
baseline, the ratio and the goal (0.95: dispatching at run time may cost
at most 5%).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOAL = 0.95
# The metrics the portable build must keep: the ones whose hot loops are
# the dispatched kernels (the others measure memory copies or the parser).
METRICS = ("matmul_f32_1024_gflops", "matmul_f64_1024_gflops",
           "fused_elementwise_chain8_64MiB_GBps")


def build_native(native_dir: pathlib.Path, jobs: int) -> pathlib.Path:
    if not (native_dir / "build.ninja").exists():
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(native_dir), "-G",
                        "Ninja", "-DPJRT_NATIVE_ARCH=ON"],
                       check=True, stdout=subprocess.DEVNULL)
    # The build's progress to stderr: stdout is the JSON.
    subprocess.run(["cmake", "--build", str(native_dir), "-j", str(jobs),
                    "--target", "compiler_bench"], check=True,
                   stdout=sys.stderr)
    return native_dir / "bin" / "compiler_bench"


def run(binary: pathlib.Path) -> dict:
    out = subprocess.run([str(binary)], check=True, capture_output=True,
                         text=True).stdout
    return {m["metric"]: m["value"] for m in json.loads(out)["benchmarks"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--native-dir")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    build_dir = pathlib.Path(args.build_dir).resolve()
    cache = (build_dir / "CMakeCache.txt").read_text()
    if "PJRT_NATIVE_ARCH:BOOL=ON" in cache:
        print(f"{build_dir} is a native build: give the portable one",
              file=sys.stderr)
        return 2
    native_dir = pathlib.Path(args.native_dir or f"{build_dir}-native")
    native = build_native(native_dir.resolve(), args.jobs)
    portable = build_dir / "bin" / "compiler_bench"
    values: dict[str, dict[str, list[float]]] = {"portable": {}, "native": {}}
    for _ in range(args.runs):
        for name, binary in (("portable", portable), ("native", native)):
            for metric, value in run(binary).items():
                values[name].setdefault(metric, []).append(value)
    benchmarks = []
    for metric in METRICS:
        ours = statistics.median(values["portable"][metric])
        base = statistics.median(values["native"][metric])
        benchmarks.append({"metric": f"portable_{metric}",
                           "value": ours,
                           "baseline": "native_build",
                           "baseline_value": base,
                           "ratio": ours / base,
                           "goal": GOAL})
    print(json.dumps({"benchmarks": benchmarks}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
