"""Fault tests: clients SIGKILLed in the middle of an upload, a download, a
pipelined execution stream, a shared-memory transfer and a cross-host
transfer; a cluster task SIGKILLed mid-transfer and restarted; the daemon
SIGTERMed under load; allocation and kernel failures injected at random
points. In every case the daemon stays healthy, another session's buffers
stay intact, and the memory of whatever died is freed."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from stress_util import (BINARY, BUILD, UNARY, Daemon, expected, program,
                         random_array, same_bits, wait_until)

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from test_cluster import Cluster  # noqa: E402

FAULT_CLIENT = HERE / "fault_client.py"


def start_daemon(workdir: pathlib.Path, *extra: str,
                 env: dict[str, str] | None = None) -> Daemon:
    return Daemon(workdir, "--platform", "host", "--host-devices", "2",
                  "--memory-limit", str(2 << 30),
                  "--listen", f"unix://{workdir}/pjrtd.sock",
                  "--listen", "127.0.0.1:0", *extra, env=env)


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="pjrt-faults.") as tmp:
        d = start_daemon(pathlib.Path(tmp))
        yield d
        assert d.stop() == 0, d.log_path.read_text()


class Victim:
    """A session of another client, with data on both devices, that no
    fault may touch."""

    def __init__(self, address: str) -> None:
        self.client = pjrt_client.connect(address, client_name="victim")
        rng = np.random.default_rng(7)
        self.data = [rng.standard_normal(1 << 20).astype(np.float32),
                     rng.integers(0, 255, 64 << 10, dtype=np.uint8),
                     rng.standard_normal((3, 5)).astype(np.float64)]
        self.buffers = [self.client.put(x, device=i % 2)
                        for i, x in enumerate(self.data)]

    def check(self) -> None:
        for b, x in zip(self.buffers, self.data):
            assert same_bits(b.to_numpy(), x), "the victim's data changed"


@pytest.fixture(scope="module")
def victim(daemon) -> Iterator[Victim]:
    v = Victim(daemon.addresses[1])
    yield v
    v.client.close()


def device_bytes(client) -> list[int]:
    return [d["bytes_in_use"] for d in client.stats()["devices"]]


def healthy(address: str) -> None:
    """A new client can upload, run and read back."""
    with pjrt_client.connect(address, client_name="health") as c:
        x = np.arange(1024, dtype=np.float32)
        exe = c.compile(program("add", "f32", (1024,)))
        (y,) = exe.execute([c.put(x), c.put(x)])
        assert same_bits(y.to_numpy(), x + x)


def run_fault_client(mode: str, address: str, *args: str,
                     wait_for_line: str = "mid") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(BUILD / "python"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(FAULT_CLIENT), mode, address,
                             *args], stdout=subprocess.PIPE, env=env,
                            text=True)
    line = proc.stdout.readline().strip()
    if line != wait_for_line:
        proc.kill()
        raise AssertionError(f"fault_client {mode} printed {line!r}, exit "
                             f"code {proc.wait()}")
    return proc


@pytest.mark.parametrize("mode,via", [("upload", 1), ("download", 1),
                                      ("execute-stream", 1), ("region", 0)])
def test_a_client_killed_mid_operation_leaves_nothing_behind(
        daemon, victim, mode, via):
    with pjrt_client.connect(daemon.addresses[1], client_name="obs") as obs:
        baseline = device_bytes(obs)
        sessions = obs.stats()["session_count"]
        regions = obs.stats()["region_count"]
        proc = run_fault_client(mode, daemon.addresses[via])
        # The daemon holds the dying client's memory now.
        if mode in ("upload", "download"):
            assert device_bytes(obs)[0] >= baseline[0] + (512 << 20)
        proc.kill()
        proc.wait()
        wait_until(lambda: device_bytes(obs) == baseline
                   and obs.stats()["session_count"] == sessions, 30,
                   f"the memory of a client killed mid-{mode} freed")
        assert obs.stats()["region_count"] == regions
        victim.check()
        healthy(daemon.addresses[0])


def test_the_daemon_sigtermed_under_load_exits_0_and_never_reports_half_work(
        tmp_path):
    config = tmp_path / "pjrtd.toml"
    config.write_text("shutdown_timeout_seconds = 5\n")
    d = start_daemon(tmp_path, "--config", str(config))
    stop = threading.Event()
    verified = []
    wrong = []

    def work(index: int) -> None:
        rng = np.random.default_rng(index)
        try:
            with pjrt_client.connect(d.addresses[index % 2],
                                     client_name=f"busy-{index}") as c:
                exe = c.compile(program("multiply", "f32", (256, 256)))
                while not stop.is_set():
                    x = random_array(rng, "f32", (256, 256))
                    (y,) = exe.execute([c.put(x), c.put(x)])
                    got = y.to_numpy()
                    # A result handed back as a success is complete.
                    if same_bits(got, expected("multiply", x, x)):
                        verified.append(1)
                    else:
                        wrong.append(index)
        except pjrt_client.Error:
            pass  # the daemon went away: expected once it is told to stop

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    wait_until(lambda: len(verified) >= 50, 60, "the load to get going")
    start = time.monotonic()
    d.process.send_signal(signal.SIGTERM)
    code = d.process.wait(timeout=60)
    took = time.monotonic() - start
    stop.set()
    for t in threads:
        t.join(timeout=60)
    print(f"SIGTERM under load: exit code {code} after {took:.2f} s, "
          f"{len(verified)} results verified, {len(wrong)} wrong")
    assert code == 0, d.log_path.read_text()[-3000:]
    # Within the shutdown timeout (5 s): once the grace period is over the
    # daemon cancels what still runs, so the exit cannot wait longer.
    assert took < 5, (f"the daemon took {took:.1f} s to stop:\n"
                      + d.log_path.read_text()[-3000:])
    assert not wrong, f"clients {wrong} read a wrong result"


def test_injected_allocation_and_kernel_failures_are_errors_and_free_all(
        tmp_path):
    d = start_daemon(tmp_path, env={
        "PJRT_FAULT_INJECTION": "allocation=0.05,kernel=0.1,seed=3"})
    injected = []
    wrong = []
    unexpected = []
    lock = threading.Lock()

    def note(e: pjrt_client.Error) -> None:
        with lock:
            (injected if "injected failure" in str(e)
             else unexpected).append(repr(e))

    def work(index: int) -> None:
        rng = np.random.default_rng(100 + index)
        with pjrt_client.connect(d.addresses[index % 2],
                                 client_name=f"faulty-{index}") as c:
            for _ in range(30):
                dtype = str(rng.choice(["f32", "s32"]))
                shape = (int(rng.choice([1, 16, 300])),)
                op = str(rng.choice(list(BINARY) + list(UNARY)))
                try:
                    x = random_array(rng, dtype, shape)
                    a = c.put(x, device=int(rng.integers(0, 2)))
                    exe = c.compile(program(op, dtype, shape))
                    args = [a] if op in UNARY else [a, a]
                    (y,) = exe.execute(args, device=a.device)
                    if rng.random() < 0.3:
                        y = y.copy_to((a.device.id + 1) % 2)
                    got = y.to_numpy()
                except pjrt_client.Error as e:
                    note(e)
                    continue
                if not same_bits(got, expected(op, *([x] * len(args)))):
                    with lock:
                        wrong.append(f"client {index}: {op} {dtype}{shape}")

    # A session whose data is in place before the faults begin (its own
    # uploads may meet an injected failure too: they are retried).
    victim_client = pjrt_client.connect(d.addresses[1], client_name="victim")
    victim_data = [np.arange(1 << 16, dtype=np.float32),
                   np.arange(300, dtype=np.int32)]
    victim_buffers = []
    for i, x in enumerate(victim_data):
        for _ in range(20):
            try:
                victim_buffers.append(victim_client.put(x, device=i % 2))
                victim_buffers[-1].block_until_ready()
                break
            except pjrt_client.Error:
                victim_buffers = victim_buffers[:i]
    victim_bytes = device_bytes(victim_client)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with pjrt_client.connect(d.addresses[0], client_name="obs") as obs:
        wait_until(lambda: device_bytes(obs) == victim_bytes
                   and obs.stats()["session_count"] == 2, 30,
                   "every faulty client's memory freed")
        obs.ping()
    for b, x in zip(victim_buffers, victim_data, strict=True):
        for _ in range(20):  # a read may meet an injected failure too
            try:
                got = b.to_numpy()
                break
            except pjrt_client.Error as e:
                assert "injected failure" in str(e), e
        assert same_bits(got, x), "the victim's data changed"
    victim_client.close()
    print(f"fault injection: {len(injected)} injected failures reported as "
          f"errors, {len(wrong)} wrong results, {len(unexpected)} other "
          f"errors")
    assert injected, "no failure was injected"
    assert not unexpected, unexpected[:5]
    assert not wrong, wrong[:5]
    assert d.stop() == 0, d.log_path.read_text()[-3000:]


@pytest.fixture
def pair(tmp_path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, devices=[1, 1])
    yield c
    for daemon in c.daemons:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()


def test_a_client_killed_mid_cross_host_transfer_leaves_both_tasks_clean(pair):
    receiver = pjrt_client.connect(pair.address(1), client_name="receiver")
    sender_obs = pjrt_client.connect(pair.address(0), client_name="obs")
    (r,), (descriptor,) = receiver.make_cross_host_receive_buffers(
        [("u8", (256 << 20,))], device=1)
    proc = run_fault_client("cross-host", pair.address(0), descriptor.hex(),
                            wait_for_line="sending")
    wait_until(lambda: receiver.stats()["cross_host_bytes_received"] > 0
               or proc.poll() is not None, 60, "the transfer to start")
    proc.kill()
    proc.wait()
    # The receive completes (the daemon finished the copy) or fails; what
    # it reports as ready is whole.
    try:
        got = r.to_numpy()
        assert got.min() == 1 and got.max() == 1, "a half-written receive"
    except pjrt_client.Error:
        pass
    r.delete()
    wait_until(lambda: device_bytes(sender_obs) == [0]
               and sender_obs.stats()["session_count"] == 1, 30,
               "the killed sender's memory freed")
    wait_until(lambda: device_bytes(receiver) == [0], 30,
               "the receive's memory freed")
    assert receiver.stats()["cross_host_receives_pending"] == 0
    healthy(pair.address(0))
    healthy(pair.address(1))
    receiver.close()
    sender_obs.close()


def test_a_task_killed_mid_transfer_restarts_and_transfers_again(pair):
    receiver = pjrt_client.connect(pair.address(1), client_name="receiver")
    x = np.arange(64 << 20, dtype=np.uint32)
    (r,), (descriptor,) = receiver.make_cross_host_receive_buffers(
        [x], device=1)
    sender = pjrt_client.connect(pair.address(0), client_name="sender")
    b = sender.put(x, device=0)
    thread = threading.Thread(
        target=lambda: pytest.raises(pjrt_client.Error,
                                     b.copy_to_remote_device, descriptor))
    thread.start()
    wait_until(lambda: receiver.stats()["cross_host_bytes_received"] > 0,
               60, "the transfer to start")
    pair.daemons[0].process.kill()
    pair.daemons[0].process.wait()
    thread.join(timeout=60)
    with pytest.raises(pjrt_client.Error):
        r.to_numpy()
    r.delete()
    assert device_bytes(receiver) == [0]
    # The task comes back, rejoins, and a new transfer arrives whole.
    restarted = pair.restart(0)
    restarted.wait_ready()
    sender = pjrt_client.connect(restarted.addresses[0], client_name="again")
    (r2,), (d2,) = receiver.make_cross_host_receive_buffers([x], device=1)
    with sender.put(x, device=0) as b2:
        b2.copy_to_remote_device(d2)
    assert same_bits(r2.to_numpy(), x)
    r2.delete()
    assert device_bytes(receiver) == [0]
    sender.close()
    receiver.close()
