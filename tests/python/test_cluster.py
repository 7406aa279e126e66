"""Clusters of real pjrtd processes on loopback: membership, global device
ids, cross-host receives and copies to remote devices, and every way a
descriptor or a peer can be wrong."""

from __future__ import annotations

import gc
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from conftest import PJRTCTL, Daemon
from pki import make_ca, make_cert
from pjrt_client._proto.pjrt.v1 import cluster_pb2

MEMORY_LIMIT = 2 << 30


def free_ports(n: int) -> list[int]:
    """Ports the kernel just handed out (and took back) for loopback."""
    sockets = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def write_secret(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


class Cluster:
    """One pjrtd per task, started together, each with its own socket."""

    def __init__(self, workdir: pathlib.Path, devices: list[int],
                 secrets: list[str] | None = None,
                 extra: list[list[str]] | None = None) -> None:
        self.peers = [f"127.0.0.1:{p}" for p in free_ports(len(devices))]
        self.daemons: list[Daemon] = []
        self.args: list[list[str]] = []
        secrets = secrets or ["cluster-secret-0123456789"] * len(devices)
        for task, count in enumerate(devices):
            d = workdir / f"task{task}"
            d.mkdir()
            secret = write_secret(d / "secret", secrets[task])
            args = ["--platform", "host", "--host-devices", str(count),
                    "--memory-limit", str(MEMORY_LIMIT),
                    "--listen", f"unix://{d}/pjrtd.sock",
                    "--task-id", str(task), "--cluster", ",".join(self.peers),
                    "--cluster-secret-file", str(secret),
                    *(extra[task] if extra else [])]
            self.args.append(args)
            self.daemons.append(Daemon(d, *args, wait=False))
        for daemon in self.daemons:
            daemon.wait_ready()

    def restart(self, task: int, *replace: str) -> Daemon:
        """Starts task `task` again (its old process must be gone), with
        the flags in `replace` (flag, value, flag, value...) set anew."""
        args = list(self.args[task])
        for flag, value in zip(replace[::2], replace[1::2]):
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
        old = self.daemons[task]
        old.address_file.unlink(missing_ok=True)
        self.daemons[task] = Daemon(old.workdir, *args, wait=False)
        return self.daemons[task]

    def address(self, task: int) -> str:
        return self.daemons[task].addresses[0]

    def stop(self) -> None:
        for daemon in self.daemons:
            if daemon.process.poll() is None:
                assert daemon.stop() == 0, daemon.log_path.read_text()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="pjrt.cluster.") as tmp:
        c = Cluster(pathlib.Path(tmp), devices=[2, 1, 3])
        yield c
        c.stop()


@pytest.fixture(scope="module")
def clients(cluster: Cluster) -> Iterator[list[pjrt_client.Client]]:
    cs = [pjrt_client.connect(cluster.address(t), client_name=f"task{t}")
          for t in range(3)]
    yield cs
    for c in cs:
        c.close()


def send(src: pjrt_client.Client, dst: pjrt_client.Client, array: np.ndarray,
         src_device: int, dst_device: int) -> pjrt_client.Buffer:
    """Moves `array` from src_device (of src's task) to dst_device."""
    (received,), (descriptor,) = dst.make_cross_host_receive_buffers(
        [array], device=dst_device)
    assert not received.is_ready()
    with src.put(array, device=src_device) as b:
        result = b.copy_to_remote_device(descriptor)
    assert result["bytes"] == array.nbytes
    return received


# --- membership ------------------------------------------------------------


def test_every_task_numbers_every_device_alike(clients):
    listings = [c.devices() for c in clients]
    table = [[(d.id, d.task_id, d.local_hardware_id) for d in devices]
             for devices in listings]
    assert table[0] == table[1] == table[2]
    assert table[0] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 2, 0),
                        (4, 2, 1), (5, 2, 2)]
    for task, devices in enumerate(listings):
        assert [d.id for d in devices if d.addressable] == \
            [d.id for d in devices if d.task_id == task]


def test_info_names_the_task_and_the_cluster_size(clients):
    for task, c in enumerate(clients):
        info = c.info()
        assert (info["task_id"], info["task_count"]) == (task, 3)
        assert "buffers.cross_host" in info["capabilities"]


def test_cluster_status_reaches_every_peer(clients):
    tasks = clients[1].cluster_status()
    assert [t["task_id"] for t in tasks] == [0, 1, 2]
    assert [t["self"] for t in tasks] == [False, True, False]
    assert all(t["reachable"] for t in tasks), tasks
    assert [t["device_count"] for t in tasks] == [2, 1, 3]


def test_another_tasks_device_is_named_as_such(clients):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="device 3 belongs to task 2"):
        clients[0].put(np.zeros(4, np.float32), device=3)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="device 9 does not exist"):
        clients[0].put(np.zeros(4, np.float32), device=9)


# --- transfers ---------------------------------------------------------------


def random_array(dtype: str, shape: tuple[int, ...],
                 rng: np.random.Generator) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        return rng.integers(info.min, info.max, shape, dtype=dtype,
                            endpoint=True)
    # Every bit pattern, NaNs and infinities included.
    raw = rng.integers(0, 256, (*shape, np.dtype(dtype).itemsize),
                       dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64",
                                   "uint8", "uint16", "uint32", "uint64",
                                   "float16", "float32", "float64"])
def test_arrays_move_between_tasks_bit_exactly(clients, dtype):
    rng = np.random.default_rng(abs(hash(dtype)) % 1000)
    x = random_array(dtype, (3, 5, 7), rng)
    received = send(clients[0], clients[2], x, src_device=1, dst_device=4)
    y = received.to_numpy()
    assert received.device.id == 4
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.tobytes() == x.tobytes()


def test_scalars_and_empty_arrays_move(clients):
    for x in (np.float32(2.5).reshape(()), np.zeros((0, 3), np.int32)):
        received = send(clients[1], clients[0], x, src_device=2, dst_device=0)
        np.testing.assert_array_equal(received.to_numpy(), x)


def test_a_256_mib_array_moves_bit_exactly(clients):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**32, 64 << 20, dtype=np.uint32).view(np.float32)
    received = send(clients[2], clients[1], x, src_device=5, dst_device=2)
    y = received.to_numpy()
    assert y.tobytes() == x.tobytes()
    received.delete()


def test_one_call_makes_several_receives(clients):
    xs = [np.arange(6, dtype=np.int32).reshape(2, 3),
          np.ones(10, np.float64), np.array([True, False])]
    received, descriptors = clients[1].make_cross_host_receive_buffers(
        [("s32", (2, 3)), (np.float64, (10,)), xs[2]], device=2)
    assert len(set(descriptors)) == 3
    for x, descriptor in zip(xs, descriptors):
        with clients[0].put(x) as b:
            b.copy_to_remote_device(descriptor)
    for x, r in zip(xs, received):
        np.testing.assert_array_equal(r.to_numpy(), x)


def test_a_task_can_receive_from_itself_over_its_peer_channel(clients):
    x = np.arange(12, dtype=np.float32)
    received = send(clients[2], clients[2], x, src_device=3, dst_device=5)
    np.testing.assert_array_equal(received.to_numpy(), x)


def test_receive_buffers_are_counted_until_their_data_arrives(clients):
    before = clients[0].stats()
    (r,), (d,) = clients[0].make_cross_host_receive_buffers(
        [("f32", (1024,))], device=0)
    assert clients[0].stats()["cross_host_receives_pending"] == \
        before["cross_host_receives_pending"] + 1
    with clients[1].put(np.ones(1024, np.float32), device=2) as b:
        b.copy_to_remote_device(d)
    after = clients[0].stats()
    assert after["cross_host_receives_pending"] == \
        before["cross_host_receives_pending"]
    assert after["cross_host_bytes_received"] == \
        before["cross_host_bytes_received"] + 4096
    r.delete()


# --- descriptors that must be refused ---------------------------------------


def decode(descriptor: bytes) -> cluster_pb2.CrossHostDescriptor:
    assert descriptor[:4] == b"PJXD"
    d = cluster_pb2.CrossHostDescriptor()
    d.ParseFromString(descriptor[4:])
    return d


def encode(d: cluster_pb2.CrossHostDescriptor) -> bytes:
    return b"PJXD" + d.SerializeToString()


@pytest.fixture
def receive(clients):
    """A fresh f32[16] receive on task 1 and a matching buffer on task 0."""
    (r,), (descriptor,) = clients[1].make_cross_host_receive_buffers(
        [("f32", (16,))], device=2)
    b = clients[0].put(np.arange(16, dtype=np.float32), device=0)
    yield r, descriptor, b
    b.delete()
    r.delete()


def test_the_descriptor_says_what_it_names(receive, clients):
    r, descriptor, _ = receive
    d = decode(descriptor)
    assert (d.version, d.task_id, d.device_id) == (1, 1, 2)
    assert list(d.shape.dims) == [16] and len(d.token) == 16
    assert d.expires_unix_micros > time.time() * 1e6


@pytest.mark.parametrize("garbage", [b"", b"junk", b"PJXD\xff\xff\xff",
                                     b"PJXD"])
def test_malformed_descriptors_are_refused(receive, garbage):
    _, _, b = receive
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="malformed descriptor"):
        b.copy_to_remote_device(garbage)


def test_a_truncated_descriptor_is_refused(receive):
    _, descriptor, b = receive
    with pytest.raises(pjrt_client.InvalidArgumentError, match="malformed"):
        b.copy_to_remote_device(descriptor[:-5])


def test_a_descriptor_of_another_version_is_refused(receive):
    _, descriptor, b = receive
    d = decode(descriptor)
    d.version = 2
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="descriptor version 2"):
        b.copy_to_remote_device(encode(d))


def test_a_forged_token_is_refused_and_the_receive_survives(receive):
    r, descriptor, b = receive
    d = decode(descriptor)
    d.token = os.urandom(16)
    with pytest.raises(pjrt_client.PermissionDeniedError, match="forged"):
        b.copy_to_remote_device(encode(d))
    # The real descriptor still works.
    b.copy_to_remote_device(descriptor)
    np.testing.assert_array_equal(r.to_numpy(), np.arange(16))


def test_a_forged_receive_id_is_refused(receive):
    _, descriptor, b = receive
    d = decode(descriptor)
    d.receive_id ^= 0x5A5A
    with pytest.raises(pjrt_client.PermissionDeniedError,
                       match="never made receive"):
        b.copy_to_remote_device(encode(d))


def test_an_altered_shape_is_refused(receive, clients):
    _, descriptor, _ = receive
    d = decode(descriptor)
    d.shape.dims[:] = [4, 4]
    with clients[0].put(np.zeros((4, 4), np.float32)) as b2:
        with pytest.raises(pjrt_client.PermissionDeniedError,
                           match="altered"):
            b2.copy_to_remote_device(encode(d))


def test_a_reused_descriptor_is_refused(receive):
    _, descriptor, b = receive
    b.copy_to_remote_device(descriptor)
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="already been used"):
        b.copy_to_remote_device(descriptor)


def test_a_shape_mismatch_is_refused_before_sending(receive, clients):
    _, descriptor, _ = receive
    with clients[0].put(np.zeros(8, np.float32)) as b2:
        with pytest.raises(pjrt_client.InvalidArgumentError,
                           match=r"is f32\[8\].*receive.*f32\[16\]"):
            b2.copy_to_remote_device(descriptor)


def test_a_descriptor_for_an_unknown_task_is_refused(receive):
    _, descriptor, b = receive
    d = decode(descriptor)
    d.task_id = 7
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="names task 7.*tasks 0 to 2"):
        b.copy_to_remote_device(encode(d))


def test_a_descriptor_from_an_earlier_run_is_refused(receive):
    _, descriptor, b = receive
    d = decode(descriptor)
    d.incarnation ^= 1
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="earlier run of task 1"):
        b.copy_to_remote_device(encode(d))


def test_an_expired_receive_fails_its_buffer_and_its_descriptor(clients):
    (r,), (descriptor,) = clients[1].make_cross_host_receive_buffers(
        [("f32", (16,))], device=2, timeout=0.2)
    # The receive ends by itself; its buffer reports why.
    with pytest.raises(pjrt_client.DeadlineExceededError,
                       match="expired at .* before any data arrived"):
        r.to_numpy()
    with clients[0].put(np.zeros(16, np.float32)) as b:
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="expired"):
            b.copy_to_remote_device(descriptor)


def test_a_cancelled_receive_fails_its_buffer_and_its_descriptor(clients):
    (r1, r2), (d1, d2) = clients[1].make_cross_host_receive_buffers(
        [("f32", (16,)), ("f32", (16,))], device=2)
    assert clients[1].cancel_cross_host_receives([r1]) == 1
    assert clients[1].cancel_cross_host_receives([r1]) == 0
    with pytest.raises(pjrt_client.CancelledError, match="cancelled"):
        r1.to_numpy()
    with clients[0].put(np.ones(16, np.float32)) as b:
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="was cancelled"):
            b.copy_to_remote_device(d1)
        b.copy_to_remote_device(d2)
    np.testing.assert_array_equal(r2.to_numpy(), np.ones(16))


def test_deleting_a_receive_buffer_cancels_it_and_frees_its_memory(clients):
    # Buffers of earlier tests that only a garbage collection would free
    # must not be freed half way through the measurement.
    gc.collect()
    before = clients[1].stats()["devices"][0]["bytes_in_use"]
    (r,), (d,) = clients[1].make_cross_host_receive_buffers(
        [("u8", (1 << 20,))], device=2)
    in_use = clients[1].stats()["devices"][0]["bytes_in_use"]
    assert in_use >= before + (1 << 20)
    r.delete()
    with clients[0].put(np.zeros(1 << 20, np.uint8)) as b:
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="cancelled: its buffer was deleted"):
            b.copy_to_remote_device(d)
    assert clients[1].stats()["devices"][0]["bytes_in_use"] == before


def test_the_senders_bound_error_is_reported_not_sent(clients):
    (r,), (d,) = clients[1].make_cross_host_receive_buffers(
        [("f32", (4,))], device=2)
    with clients[0].put(np.zeros(4, np.float32)) as b:
        b.delete()
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="deleted"):
            b.copy_to_remote_device(d)
    r.delete()


def test_a_single_task_daemon_refuses_remote_copies(daemon):
    with pjrt_client.connect(daemon.addresses[0]) as c:
        with c.put(np.zeros(4, np.float32)) as b:
            with pytest.raises(pjrt_client.FailedPreconditionError,
                               match="not part of a cluster"):
                b.copy_to_remote_device(b"PJXD")


# --- peers that fail ---------------------------------------------------------


@pytest.fixture
def pair() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="pjrt.pair.") as tmp:
        c = Cluster(pathlib.Path(tmp), devices=[1, 1])
        yield c
        for daemon in c.daemons:
            if daemon.process.poll() is None:
                daemon.process.kill()
                daemon.process.wait()


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


LARGE_COPY_BYTES = 256 << 20


def start_large_copy(sender, receiver):
    """Starts copying LARGE_COPY_BYTES from `sender`'s device 0 to
    `receiver`'s device 1 on a thread and returns once bytes flow: the
    receive buffer, the sent buffer, the thread, and a dict that holds the
    copy's error (under "error") once it has one."""
    x = np.ones(LARGE_COPY_BYTES, np.uint8)
    (r,), (d,) = receiver.make_cross_host_receive_buffers([x], device=1)
    b = sender.put(x, device=0)
    outcome: dict[str, BaseException] = {}

    def copy() -> None:
        try:
            b.copy_to_remote_device(d)
        except BaseException as e:  # noqa: B902 - the caller checks it
            outcome["error"] = e

    thread = threading.Thread(target=copy)
    thread.start()
    wait_for(lambda: receiver.stats()["cross_host_bytes_received"] > 0,
             "the transfer to start")
    return r, b, thread, outcome


def stop_and_kill(daemon) -> None:
    """Stops `daemon` at once (mid-transfer), then kills it."""
    daemon.process.send_signal(signal.SIGSTOP)
    daemon.process.kill()
    daemon.process.wait()


def test_killing_the_receiver_mid_transfer_leaves_the_sender_healthy(pair):
    sender = pjrt_client.connect(pair.address(0))
    receiver = pjrt_client.connect(pair.address(1))
    baseline = sender.stats()["devices"][0]["bytes_in_use"]
    _, b, thread, outcome = start_large_copy(sender, receiver)
    # Stop the receiver once bytes flow, so the transfer cannot finish, then
    # kill it.
    stop_and_kill(pair.daemons[1])
    thread.join(timeout=60)
    assert not thread.is_alive()
    error = outcome.get("error")
    assert isinstance(error, pjrt_client.UnavailableError), error
    assert "copy to task 1" in str(error)
    assert f"of {LARGE_COPY_BYTES} bytes" in str(error)
    # The sender still works and keeps exactly its own buffer.
    np.testing.assert_array_equal(b.to_numpy()[:8], np.ones(8))
    assert (sender.stats()["devices"][0]["bytes_in_use"]
            == baseline + LARGE_COPY_BYTES)
    b.delete()
    assert sender.stats()["devices"][0]["bytes_in_use"] == baseline
    status = sender.cluster_status(timeout=0.5)
    assert status[1]["reachable"] is False and status[1]["error"]
    sender.close()


def test_a_sender_that_goes_away_never_makes_the_receive_ready(pair):
    receiver = pjrt_client.connect(pair.address(1))
    sender = pjrt_client.connect(pair.address(0))
    r, _, thread, outcome = start_large_copy(sender, receiver)
    stop_and_kill(pair.daemons[0])
    with pytest.raises(pjrt_client.UnavailableError,
                       match=r"stopped after \d+ of 268435456 bytes"):
        r.to_numpy()
    thread.join(timeout=60)
    # The sender's own call failed too (its daemon is gone).
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), pjrt_client.Error), outcome
    # The receiver stays healthy.
    assert receiver.stats()["cross_host_receives_pending"] == 0
    with receiver.put(np.arange(3)) as c:
        np.testing.assert_array_equal(c.to_numpy(), np.arange(3))
    receiver.close()


def test_an_unreachable_receiver_fails_the_send(pair):
    sender = pjrt_client.connect(pair.address(0))
    receiver = pjrt_client.connect(pair.address(1))
    (r,), (d,) = receiver.make_cross_host_receive_buffers(
        [("f32", (4,))], device=1)
    pair.daemons[1].process.kill()
    pair.daemons[1].process.wait()
    with sender.put(np.zeros(4, np.float32)) as b:
        with pytest.raises(pjrt_client.UnavailableError,
                           match=r"copy to task 1 \(127\.0\.0\.1:\d+\)"):
            b.copy_to_remote_device(d)
    sender.close()


def test_a_restarted_task_rejoins_and_its_old_descriptors_are_refused(pair):
    sender = pjrt_client.connect(pair.address(0))
    receiver = pjrt_client.connect(pair.address(1))
    (_,), (old_descriptor,) = receiver.make_cross_host_receive_buffers(
        [("f32", (4,))], device=1)
    receiver.close()
    assert pair.daemons[1].stop() == 0
    restarted = pair.restart(1)
    restarted.wait_ready()
    receiver = pjrt_client.connect(restarted.addresses[0])
    assert [d.id for d in receiver.devices() if d.addressable] == [1]
    with sender.put(np.arange(4, dtype=np.float32)) as b:
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="earlier run of task 1"):
            b.copy_to_remote_device(old_descriptor)
        (r,), (d,) = receiver.make_cross_host_receive_buffers(
            [("f32", (4,))], device=1)
        b.copy_to_remote_device(d)
    np.testing.assert_array_equal(r.to_numpy(), np.arange(4))
    receiver.close()
    sender.close()


def test_a_task_that_comes_back_with_other_devices_is_refused(pair):
    assert pair.daemons[1].stop() == 0
    restarted = pair.restart(1, "--host-devices", "3", "--cluster-timeout",
                             "5")
    assert restarted.process.wait(timeout=60) == 1
    log = restarted.log_path.read_text()
    assert "comes back with 3 host device(s)" in log, log


def start_failing(workdir: pathlib.Path, args: list[str]
                  ) -> subprocess.Popen:
    log = open(workdir / "pjrtd.log", "w")
    return subprocess.Popen([str(Daemon.binary()), *args],
                            stdout=subprocess.DEVNULL, stderr=log)


def test_a_peer_with_the_wrong_secret_is_refused(tmp_path):
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs = []
    secrets = ["the-right-secret-0123", "a-wrong-secret-4567"]
    for task, secret in enumerate(secrets):
        d = tmp_path / f"task{task}"
        d.mkdir()
        procs.append(start_failing(d, [
            "--platform", "host", "--listen", f"unix://{d}/pjrtd.sock",
            "--task-id", str(task), "--cluster", ",".join(peers),
            "--cluster-secret-file", str(write_secret(d / "s", secret)),
            "--cluster-timeout", "8"]))
    codes = [p.wait(timeout=60) for p in procs]
    logs = [(tmp_path / f"task{t}" / "pjrtd.log").read_text()
            for t in range(2)]
    # Whoever calls first is refused and gives up; neither starts serving.
    assert codes == [1, 1], logs
    assert any("wrong cluster secret" in log and "refused this task" in log
               for log in logs), logs


def test_a_peer_that_comes_up_later_is_waited_for(tmp_path):
    peers = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    daemons = []
    for task in range(2):
        d = tmp_path / f"task{task}"
        d.mkdir()
        daemons.append(Daemon(
            d, "--platform", "host", "--listen", f"unix://{d}/pjrtd.sock",
            "--task-id", str(task), "--cluster", peers,
            "--cluster-secret-file",
            str(write_secret(d / "s", "same-secret-0123456789")),
            wait=False))
        if task == 0:
            # Task 0 retries task 1 (not started yet) with backoff.
            wait_for(lambda: "waiting for task 1" in
                     daemons[0].log_path.read_text(), "task 0 to wait")
            assert not daemons[0].address_file.exists()
    for daemon in daemons:
        daemon.wait_ready()
    with pjrt_client.connect(daemons[0].addresses[0]) as c:
        assert [d.id for d in c.devices()] == [0, 1]
    for daemon in daemons:
        assert daemon.stop() == 0


def test_tasks_that_disagree_on_the_cluster_are_refused(tmp_path):
    a, b, c = [f"127.0.0.1:{p}" for p in free_ports(3)]
    procs = []
    for task, peers in enumerate([[a, b], [a, b, c]]):
        d = tmp_path / f"task{task}"
        d.mkdir()
        procs.append(start_failing(d, [
            "--platform", "host", "--listen", f"unix://{d}/pjrtd.sock",
            "--task-id", str(task), "--cluster", ",".join(peers),
            "--cluster-secret-file",
            str(write_secret(d / "s", "same-secret-0123456789")),
            "--cluster-timeout", "5"]))
    codes = [p.wait(timeout=60) for p in procs]
    logs = "".join((tmp_path / f"task{t}" / "pjrtd.log").read_text()
                   for t in range(2))
    assert codes[0] == 1 and codes[1] == 1, logs
    assert "start every task with the same list" in logs, logs


def test_a_missing_peer_ends_start_up_with_its_name(tmp_path):
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    proc = start_failing(tmp_path, [
        "--platform", "host", "--listen", f"unix://{tmp_path}/pjrtd.sock",
        "--task-id", "0", "--cluster", ",".join(peers),
        "--cluster-secret-file",
        str(write_secret(tmp_path / "s", "same-secret-0123456789")),
        "--cluster-timeout", "1"])
    assert proc.wait(timeout=60) == 1
    log = (tmp_path / "pjrtd.log").read_text()
    assert f"no answer from task 1 at {peers[1]}" in log, log


@pytest.mark.parametrize("args, message", [
    (["--cluster", "127.0.0.1:1,127.0.0.1:2"], "needs --cluster-secret-file"),
    (["--cluster", "127.0.0.1:1,127.0.0.1:2", "--task-id", "2"],
     "task id 2 is outside the cluster of 2"),
    (["--cluster", "127.0.0.1:1,127.0.0.1:1"], "given for both task 0"),
    (["--cluster", "unix:///x,127.0.0.1:2"], "is not host:port"),
])
def test_bad_cluster_options_are_usage_errors(tmp_path, args, message):
    proc = subprocess.run([str(Daemon.binary()), "--platform", "host",
                           "--listen", f"unix://{tmp_path}/s.sock", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_a_secret_readable_by_others_is_refused(tmp_path):
    secret = tmp_path / "s"
    secret.write_text("cluster-secret-0123456789")
    secret.chmod(0o644)
    proc = subprocess.run(
        [str(Daemon.binary()), "--platform", "host", "--listen",
         f"unix://{tmp_path}/s.sock", "--cluster",
         "127.0.0.1:1,127.0.0.1:2", "--cluster-secret-file", str(secret)],
        capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "readable by others" in proc.stderr


# --- pjrtctl -----------------------------------------------------------------


def test_pjrtctl_health_lists_the_peers(cluster):
    out = subprocess.run([str(PJRTCTL), "--address", cluster.address(0),
                          "--json", "health"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    import json
    doc = json.loads(out.stdout)
    assert [t["reachable"] for t in doc["tasks"]] == [True, True, True]


def test_pjrtctl_transfer_moves_and_verifies_an_npy(cluster, tmp_path):
    x = np.random.default_rng(3).standard_normal((33, 17)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run(
        [str(PJRTCTL), "--json", "transfer", str(tmp_path / "x.npy"),
         "--from", cluster.address(2), "--from-device", "4",
         "--to", cluster.address(0), "--to-device", "1"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    import json
    doc = json.loads(out.stdout)
    assert doc["verified"] is True and doc["bytes"] == x.nbytes
    assert (doc["from_task"], doc["to_task"]) == (2, 0)


# --- programs over the devices of several tasks ------------------------------

SHIFT_BY_REPLICA = """HloModule shift_by_replica, replica_count=2

ENTRY main {
  x = f32[4] parameter(0)
  id = u32[] replica-id()
  f = f32[] convert(id)
  b = f32[4] broadcast(f), dimensions={}
  ROOT y = f32[4] add(x, b)
}
"""

GROUP_SUM = """HloModule group_sum, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[3] parameter(0)
  ROOT y = f32[3] all-reduce(x), replica_groups=GROUPS, to_apply=add
}
"""


def test_each_task_runs_its_part_of_a_multi_task_program(clients):
    x = np.arange(4, dtype=np.float32)
    assignment = [[1], [3]]  # replica 0 on task 0, replica 1 on task 2
    outputs = {}
    for task, replica in ((0, 0), (2, 1)):
        exe = clients[task].compile(SHIFT_BY_REPLICA,
                                    device_assignment=assignment)
        assert exe.device_assignment == assignment
        assert [d.id for d in exe.addressable_devices] == [assignment[
            replica][0]]
        (out,), = exe.execute_replicated([[x]])
        assert out.device.id == assignment[replica][0]
        outputs[replica] = out.to_numpy()
    np.testing.assert_array_equal(outputs[0], x)
    np.testing.assert_array_equal(outputs[1], x + 1)


def test_a_task_without_a_device_of_the_assignment_cannot_compile(clients):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="no device of the assignment belongs to this "
                             "task"):
        clients[1].compile(SHIFT_BY_REPLICA, device_assignment=[[0], [3]])


def test_an_assignment_naming_a_device_no_task_has_is_refused(clients):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="no task of the cluster has that device"):
        clients[0].compile(SHIFT_BY_REPLICA, device_assignment=[[0], [17]])


def test_collectives_across_tasks_run(clients):
    """Groups that join devices of tasks 0 and 2 (the compile-time refusal
    is gone); test_cluster_collectives.py covers every collective."""
    program = GROUP_SUM.replace("GROUPS", "{{0,1,2,3}}")
    assignment = [[0], [1], [3], [4]]
    x = [np.full(3, r + 1, np.float32) for r in range(4)]
    exe0 = clients[0].compile(program, device_assignment=assignment)
    exe2 = clients[2].compile(program, device_assignment=assignment)
    outs = {}
    threads = [
        threading.Thread(target=lambda: outs.update(
            {0: exe0.execute_replicated([[x[0]], [x[1]]], launch_id=5)})),
        threading.Thread(target=lambda: outs.update(
            {2: exe2.execute_replicated([[x[2]], [x[3]]], launch_id=5)}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for task in (0, 2):
        for (out,) in outs[task]:
            np.testing.assert_array_equal(out.to_numpy(), np.full(3, 10.0))


def test_collectives_within_each_task_run(clients):
    program = GROUP_SUM.replace("GROUPS", "{{0,1},{2,3}}")
    assignment = [[0], [1], [3], [4]]
    x = [np.full(3, r + 1, np.float32) for r in range(4)]
    exe0 = clients[0].compile(program, device_assignment=assignment)
    exe2 = clients[2].compile(program, device_assignment=assignment)
    out0 = exe0.execute_replicated([[x[0]], [x[1]]])
    out2 = exe2.execute_replicated([[x[2]], [x[3]]])
    for (out,) in out0:
        np.testing.assert_array_equal(out.to_numpy(), np.full(3, 3.0))
    for (out,) in out2:
        np.testing.assert_array_equal(out.to_numpy(), np.full(3, 7.0))


def test_the_readmes_cluster_example_runs_as_written(cluster):
    readme = (pathlib.Path(__file__).resolve().parents[2] /
              "README.md").read_text()
    blocks = readme.split("```python\n")[1:]
    example = next(b.split("```")[0] for b in blocks
                   if "make_cross_host_receive_buffers" in b)
    # hostB's device 4 is task 2's; hostA's device 0 is task 0's.
    example = example.replace("hostB:7070", cluster.address(2)).replace(
        "hostA:7070", cluster.address(0))
    result = subprocess.run([sys.executable, "-c", example],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(float(1024 * 1024))


def test_pjrtctl_transfer_shows_progress_on_a_terminal(cluster, tmp_path):
    from test_pjrtctl import run_in_pty
    path = tmp_path / "big.npy"
    np.save(path, np.arange(64 << 20, dtype=np.float32))  # 256 MiB
    code, out = run_in_pty([str(PJRTCTL), "transfer", str(path),
                            "--from", cluster.address(0),
                            "--to", cluster.address(1)])
    assert code == 0, out
    for stage in ("upload", "transfer", "verify"):
        drawn = [p for p in out.split("\r") if p.startswith(stage)]
        assert drawn and "100%" in drawn[-1], (stage, out[-2000:])
    assert "read back and verified" in out


# --- TLS between tasks ---------------------------------------------------


@pytest.mark.skipif(shutil.which("openssl") is None,
                    reason="needs the openssl command")
def test_tasks_given_certificates_talk_over_tls(tmp_path):
    make_ca(tmp_path, "ca")
    make_ca(tmp_path, "other-ca")
    make_cert(tmp_path, "ca", "task", "/CN=localhost", server=True)
    tls = ["--tls-cert", str(tmp_path / "task.crt"),
           "--tls-key", str(tmp_path / "task.key"),
           "--cluster-tls-ca", str(tmp_path / "ca.crt")]
    c = Cluster(tmp_path, devices=[1, 1], extra=[tls, tls])
    try:
        with pjrt_client.connect(c.address(0)) as a, \
                pjrt_client.connect(c.address(1)) as b:
            array = np.arange(1000, dtype=np.float32)
            got = send(a, b, array, 0, 1)
            np.testing.assert_array_equal(got.to_numpy(), array)
        for daemon in c.daemons:
            log = daemon.log_path.read_text()
            assert "in plaintext" not in log
            # Collective data between tasks is not covered, and says so.
            assert "Gloo's TCP transport unencrypted" in log
    finally:
        c.stop()
    # A task that trusts another CA cannot reach its peers: the cluster
    # never forms.
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs = []
    for task, ca in enumerate(["ca", "other-ca"]):
        d = tmp_path / f"bad{task}"
        d.mkdir()
        procs.append(start_failing(d, [
            "--platform", "host", "--listen", f"unix://{d}/pjrtd.sock",
            "--task-id", str(task), "--cluster", ",".join(peers),
            "--cluster-secret-file",
            str(write_secret(d / "s", "same-secret-0123456789")),
            "--tls-cert", str(tmp_path / "task.crt"),
            "--tls-key", str(tmp_path / "task.key"),
            "--cluster-tls-ca", str(tmp_path / f"{ca}.crt"),
            "--cluster-timeout", "5"]))
    try:
        # Task 1 trusts another CA: it cannot reach task 0 and gives up.
        assert procs[1].wait(timeout=60) == 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=60)
    log = (tmp_path / "bad1" / "pjrtd.log").read_text()
    assert "no answer from task 0" in log, log
    assert "certificate verify failed" in log, log
