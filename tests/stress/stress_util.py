"""What the load and fault tests share: a daemon of their own, the
workload's programs, and checks that a daemon is healthy and has freed a
session's memory."""

from __future__ import annotations

import os
import pathlib
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

from conftest import BUILD, Daemon, PJRTD  # noqa: E402,F401

# PJRT_STRESS_PROFILE=long (`make stress`) runs the long profile; `make
# test` runs the short one.
PROFILE = os.environ.get("PJRT_STRESS_PROFILE", "short")
# Set by scripts/test-sanitize when the daemon is built with
# AddressSanitizer: its quarantine holds freed memory, so RSS says nothing
# about leaks there (LeakSanitizer does, at the daemon's exit).
SANITIZED = os.environ.get("PJRT_SANITIZED") == "1"

DTYPES = {"f32": np.float32, "s32": np.int32, "u8": np.uint8,
          "f64": np.float64}
BINARY = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum}
UNARY = {"negate": np.negative}


def program(op: str, dtype: str, shape: tuple[int, ...]) -> str:
    """An element-wise HLO program: `op` of one or two parameters."""
    t = f"{dtype}[{','.join(map(str, shape))}]"
    params = ["a"] if op in UNARY else ["a", "b"]
    lines = [f"  {p} = {t} parameter({i})" for i, p in enumerate(params)]
    lines.append(f"  ROOT r = {t} {op}({', '.join(params)})")
    return f"HloModule {op}_{dtype}\nENTRY e {{\n" + "\n".join(lines) + "\n}\n"


def expected(op: str, *args: np.ndarray) -> np.ndarray:
    fn = UNARY.get(op) or BINARY[op]
    with np.errstate(all="ignore"):
        return fn(*args)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (NaN payloads and the sign of zero included)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).view(np.uint8).tobytes()
            == np.ascontiguousarray(b).view(np.uint8).tobytes())


def random_array(rng: np.random.Generator, dtype: str,
                 shape: tuple[int, ...]) -> np.ndarray:
    np_type = DTYPES[dtype]
    if np.issubdtype(np_type, np.floating):
        return rng.standard_normal(shape).astype(np_type)
    info = np.iinfo(np_type)
    return rng.integers(info.min, info.max, size=shape, endpoint=True,
                        dtype=np_type)


def wait_until(condition: Callable[[], Any], timeout: float,
               what: str) -> Any:
    """Polls `condition` until it returns a true value; fails naming `what`
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.02)


def memory_freed(client, sessions: int = 1) -> dict[str, Any] | None:
    """The stats when nothing but `sessions` sessions (the caller's among
    them) holds memory, buffers or programs' arguments: every device's
    bytes_in_use is 0."""
    stats = client.stats()
    if (stats["session_count"] == sessions and stats["buffer_count"] == 0
            and all(d["bytes_in_use"] == 0 and d["num_allocs"] == 0
                    for d in stats["devices"])):
        return stats
    return None


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")
