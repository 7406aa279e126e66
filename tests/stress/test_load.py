"""The load test: many concurrent clients, over the unix socket and TCP,
doing a mix of uploads, compiles, executions, downloads, copies and
deletes, with every result checked bit for bit. Afterwards the daemon has
freed every byte, and its resident memory is back within a margin of what
it was after the first rounds of the same work (allocator pools, gRPC's
arenas and the compile cache are full by then; a leak keeps growing).
Warming up takes more than one round of the short profile: malloc's
per-thread arenas still grew by 3 to 16 MiB from the first round to the
second, then stayed within 1 MiB over four more.

`make test` runs the short profile (three rounds of 64 clients x 12
operations); `make stress` the long one (three rounds of 64 x 400)."""

from __future__ import annotations

import concurrent.futures
import pathlib
import tempfile
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

import pjrt_client
from stress_util import (BINARY, PROFILE, SANITIZED, UNARY, Daemon,
                         expected, memory_freed, program, random_array,
                         rss_bytes, same_bits, wait_until)

CLIENTS = 64
OPERATIONS = {"short": 12, "long": 400}[PROFILE]
DEVICES = 2
# Growth of the daemon's resident memory allowed from the end of the second
# round to the end of the last.
RSS_MARGIN = 16 << 20


@dataclass
class Tally:
    operations: int = 0
    wrong: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str) -> None:
        with self.lock:
            self.operations += 1
            self.counts[kind] = self.counts.get(kind, 0) + 1


def client_work(address: str, index: int, operations: int,
                tally: Tally) -> None:
    rng = np.random.default_rng(1000 + index)
    live: list[tuple[pjrt_client.Buffer, np.ndarray]] = []
    programs: dict[str, pjrt_client.Executable] = {}

    def check(buffer, want: np.ndarray, what: str) -> None:
        got = buffer.to_numpy()
        if not same_bits(got, want):
            with tally.lock:
                tally.wrong.append(f"client {index}: {what}: {buffer.shape} "
                                   f"{buffer.dtype_name}")

    with pjrt_client.connect(address, client_name=f"load-{index}") as c:
        for _ in range(operations):
            kind = rng.choice(["upload", "download", "execute", "copy",
                               "delete"], p=[.3, .2, .3, .1, .1])
            if not live or (kind == "delete" and len(live) < 2):
                kind = "upload"
            if kind == "upload":
                dtype = str(rng.choice(["f32", "s32", "u8", "f64"]))
                if rng.random() < 0.03:
                    shape = (1024, 1024)  # 1 to 8 MiB: shared memory on unix
                else:
                    shape = tuple(int(rng.choice([1, 3, 17, 64, 256]))
                                  for _ in range(int(rng.integers(0, 3))))
                data = random_array(rng, dtype, shape)
                device = int(rng.integers(0, DEVICES))
                live.append((c.put(data, device=device), data))
            elif kind == "download":
                buffer, want = live[int(rng.integers(len(live)))]
                check(buffer, want, "download")
            elif kind == "execute":
                a, a_data = live[int(rng.integers(len(live)))]
                op = str(rng.choice(list(BINARY) + list(UNARY)))
                key = f"{op}/{a.dtype_name}/{a.shape}"
                if key not in programs:
                    programs[key] = c.compile(program(op, a.dtype_name,
                                                      a.shape))
                args = [a]
                if op in BINARY:
                    partners = [(b, d) for b, d in live
                                if b.shape == a.shape
                                and b.dtype_name == a.dtype_name
                                and b.device.id == a.device.id]
                    b, b_data = partners[int(rng.integers(len(partners)))]
                    args.append(b)
                    want = expected(op, a_data, b_data)
                else:
                    want = expected(op, a_data)
                (result,) = programs[key].execute(args, device=a.device)
                live.append((result, want))
                if rng.random() < 0.5:
                    check(result, want, f"execute {op}")
            elif kind == "copy":
                buffer, want = live[int(rng.integers(len(live)))]
                target = (buffer.device.id + 1) % DEVICES
                copy = buffer.copy_to(target)
                live.append((copy, want))
            else:
                i = int(rng.integers(len(live)))
                live[i][0].delete()
                live.pop(i)
            tally.count(str(kind))
        for buffer, want in live:
            check(buffer, want, "final read")


def run_round(addresses: list[str], operations: int) -> Tally:
    tally = Tally()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(client_work, addresses[i % 2], i, operations,
                               tally) for i in range(CLIENTS)]
        for f in futures:
            try:
                f.result()
            except Exception as e:  # a client's error is a failure too
                tally.errors.append(repr(e))
    return tally


@pytest.fixture(scope="module")
def load_daemon():
    with tempfile.TemporaryDirectory(prefix="pjrt-load.") as tmp:
        workdir = pathlib.Path(tmp)
        d = Daemon(workdir, "--platform", "host",
                   "--host-devices", str(DEVICES),
                   "--memory-limit", str(1 << 30),
                   "--listen", f"unix://{workdir}/pjrtd.sock",
                   "--listen", "127.0.0.1:0")
        yield d
        assert d.stop() == 0, d.log_path.read_text()


def test_many_clients_over_unix_and_tcp_get_right_results_and_leak_nothing(
        load_daemon):
    addresses = load_daemon.addresses
    pid = load_daemon.process.pid
    with pjrt_client.connect(addresses[0], client_name="observer") as obs:
        warm_up = [run_round(addresses, OPERATIONS) for _ in range(2)]
        for first in warm_up:
            assert not first.errors, first.errors[:5]
            assert not first.wrong, first.wrong[:5]
        wait_until(lambda: memory_freed(obs), 30,
                   "the first rounds' memory freed")
        rss_before = rss_bytes(pid)

        tally = run_round(addresses, OPERATIONS)
        assert not tally.errors, tally.errors[:5]
        assert not tally.wrong, tally.wrong[:5]
        assert tally.operations == CLIENTS * OPERATIONS

        stats = wait_until(lambda: memory_freed(obs), 30,
                           "every client's memory freed")
        rss_after = rss_bytes(pid)
        leaked = sum(d["bytes_in_use"] for d in stats["devices"])
        print(f"load test ({PROFILE}): {CLIENTS} clients, 3 rounds of "
              f"{tally.operations} operations {tally.counts}, wrong results "
              f"{sum(len(r.wrong) for r in [*warm_up, tally])}, device bytes "
              f"leaked {leaked}, daemon RSS "
              f"{rss_before / 2**20:.1f} MiB after the second round, "
              f"{rss_after / 2**20:.1f} MiB after the third")
        assert leaked == 0
        if not SANITIZED:
            assert rss_after - rss_before <= RSS_MARGIN, (
                f"the daemon's RSS grew by {(rss_after - rss_before) >> 20} "
                f"MiB over the run (allowed: {RSS_MARGIN >> 20} MiB)")
