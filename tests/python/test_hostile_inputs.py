"""One client against the others: each way a single program or request once
let a client read or overwrite another session's memory, take the daemon
down, pin its threads, or grow its memory without bound. Every test checks
that the refusal comes at once with the right status and a clear message,
that the daemon stays healthy, and that a victim session's data is intact.

The daemon of this module runs with small limits (see LIMITS), so that
reaching them is quick; tests that stop a daemon start their own.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterator

import grpc
import numpy as np
import pytest

import pjrt_client
from conftest import Daemon
from pjrt_client._proto.pjrt.v1 import buffer_pb2, executable_pb2

LIMITS = """
queue_ahead = 2
max_sessions = 64
max_regions_per_session = 8
max_regions = 20
max_waiting_calls_per_session = 4
max_collective_timeout_seconds = 120
max_program_bytes = "4MiB"
compile_cache_bytes = "1MiB"
"""


def start_daemon(workdir: pathlib.Path, extra_config: str = "") -> Daemon:
    config = workdir / "limits.toml"
    config.write_text(LIMITS + extra_config)
    return Daemon(workdir, "--platform", "host", "--host-devices", "2",
                  "--memory-limit", str(1 << 30), "--config", str(config),
                  "--listen", f"unix://{workdir}/pjrtd.sock")


@pytest.fixture(scope="module")
def daemon_h() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        d = start_daemon(pathlib.Path(tmp))
        yield d
        assert d.stop() == 0, d.log_path.read_text()


@pytest.fixture
def attacker(daemon_h: Daemon) -> Iterator[pjrt_client.Client]:
    with pjrt_client.connect(daemon_h.addresses[0],
                             client_name="attacker") as c:
        yield c


@pytest.fixture
def victim(daemon_h: Daemon) -> Iterator[tuple[Any, ...]]:
    """A second session with a buffer on each device, and its contents."""
    with pjrt_client.connect(daemon_h.addresses[0], client_name="victim") as c:
        data = np.arange(1 << 16, dtype=np.float32) * 3 + 1
        buffers = [c.put(data, device=d) for d in (0, 1)]
        yield c, buffers, data
        for b in buffers:
            np.testing.assert_array_equal(b.to_numpy(), data)
        c.ping()


# Set by scripts/test-sanitize when the daemon is built with
# AddressSanitizer: its quarantine holds freed memory, so RSS says nothing
# about what the daemon released (LeakSanitizer checks at its exit).
SANITIZED = os.environ.get("PJRT_SANITIZED") == "1"


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid`."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def threads(pid: int) -> int:
    """The threads of process `pid`."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads")


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Polls `condition` until it holds or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- sizes that overflow -----------------------------------------------------

WRAPPING_BROADCAST = """
HloModule wrap
ENTRY e {
  c = f32[] constant(7)
  b = f32[1024,18014398509481985] broadcast(c), dimensions={}
  ROOT s = f32[1,1048576] slice(b), slice={[0:1], [0:1048576]}
}
"""

WRAPPING_UPDATE = """
HloModule wrap_update
ENTRY e {
  c = f32[] constant(7)
  b = f32[1024,18014398509481985] broadcast(c), dimensions={}
  u = f32[1,1048576] parameter(0)
  z = s64[] constant(0)
  ROOT d = f32[1024,18014398509481985] dynamic-update-slice(b, u, z, z)
}
"""

ZERO_BYTE_BROADCAST = """
HloModule zero_bytes
ENTRY e {
  c = f32[] constant(7)
  b = f32[4294967296,4294967296] broadcast(c), dimensions={}
  ROOT s = f32[1,1048576] slice(b), slice={[0:1], [0:1048576]}
}
"""


@pytest.mark.parametrize("text", [WRAPPING_BROADCAST, WRAPPING_UPDATE,
                                  ZERO_BYTE_BROADCAST])
def test_shapes_whose_size_overflows_are_refused_before_anything_runs(
        attacker, victim, text):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="too large") as e:
        attacker.compile(text)
    assert "line 5" in str(e.value)
    attacker.ping()


def test_uploads_and_receives_of_overflowing_shapes_are_refused(attacker,
                                                                victim):
    for dims in [(1024, (1 << 54) + 1), (1 << 32, 1 << 32)]:
        with pytest.raises(pjrt_client.InvalidArgumentError,
                           match="too large"):
            attacker.make_cross_host_receive_buffers([("f32", dims)])


# --- one request must not take the daemon down ------------------------------


def test_a_long_chain_of_elementwise_ops_compiles_and_runs(attacker, victim):
    lines = ["HloModule chain", "ENTRY e {", "  v0 = f32[4] parameter(0)",
             "  one = f32[] constant(1)",
             "  ones = f32[4] broadcast(one), dimensions={}"]
    lines += [f"  v{i + 1} = f32[4] add(v{i}, ones)" for i in range(12000)]
    lines += ["  ROOT r = f32[4] copy(v12000)", "}"]
    exe = attacker.compile("\n".join(lines))
    (y,) = exe.execute([np.zeros(4, np.float32)])
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 12000, np.float32))


ADD_REGION = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}"""


def reduce_window(operand: str, out: str, window: str) -> str:
    return (f"HloModule w\n{ADD_REGION}\nENTRY e {{\n"
            f"  p = {operand} parameter(0)\n"
            f"  ROOT r = {out} reduce-window(p, f32[] constant(0)), "
            f"window={{{window}}}, to_apply=add\n}}")


def test_a_window_far_larger_than_its_operand_costs_what_the_operand_does(
        attacker, victim):
    """2^54 window positions, nearly all padding: each output visits only
    the positions that land on an element (one here), not every position
    (which took the host's compute threads for good); three 2^22 sizes,
    whose product wraps 64 bits, sum the one element they cover."""
    huge = 1 << 54
    exe = attacker.compile(reduce_window(
        "f32[1]", "f32[2]",
        f"size={huge} stride={huge} pad={huge}_{huge}"))
    start = time.monotonic()
    (y,) = exe.execute([np.full(1, 5, np.float32)])
    np.testing.assert_array_equal(y.to_numpy(), [0, 5])
    assert time.monotonic() - start < 5
    side, half = 1 << 22, 1 << 21
    exe = attacker.compile(reduce_window(
        "f32[1,1,1]", "f32[1,1,1]",
        f"size={side}x{side}x{side} "
        f"pad={half}_{half - 1}x{half}_{half - 1}x{half}_{half - 1}"))
    (y,) = exe.execute([np.full((1, 1, 1), 5, np.float32)])
    np.testing.assert_array_equal(y.to_numpy(), [[[5]]])


@pytest.mark.parametrize("window, what", [
    ("size=1 lhs_dilate=2147483648", "base dilation at most 2147483647"),
    (f"size=1 pad={1 << 57}_0", "at most 2\\^56"),
    (f"size=2 rhs_dilate={1 << 57}", "at most 2\\^56"),
])
def test_windows_past_the_kernels_bounds_are_refused(attacker, window, what):
    with pytest.raises(pjrt_client.InvalidArgumentError, match=what):
        attacker.compile(reduce_window("f32[2]", "f32[2]", window))


def test_a_long_chain_of_calls_is_refused_not_recursed(attacker, victim):
    depth = 50000
    parts = ["HloModule calls",
             f"c{depth} {{\n  ROOT p = f32[] parameter(0)\n}}"]
    for i in range(depth - 1, -1, -1):
        parts.append(f"c{i} {{\n  p = f32[] parameter(0)\n"
                     f"  ROOT r = f32[] call(p), to_apply=c{i + 1}\n}}")
    parts.append("ENTRY e {\n  p = f32[] parameter(0)\n"
                 "  ROOT r = f32[] call(p), to_apply=c0\n}")
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="more than 64 computations deep"):
        attacker.compile("\n".join(parts))


def test_regions_are_bounded_per_session_and_in_all(daemon_h, victim):
    clients = [pjrt_client.connect(daemon_h.addresses[0],
                                   client_name=f"regions-{i}")
               for i in range(3)]
    try:
        regions = [clients[0].create_region(4096) for _ in range(8)]
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="max_regions_per_session"):
            clients[0].create_region(4096)
        regions += [clients[1].create_region(4096) for _ in range(8)]
        # The victim holds none; 16 of the daemon's 20 are taken.
        regions += [clients[2].create_region(4096) for _ in range(4)]
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="max_regions"):
            clients[2].create_region(4096)
        clients[0].ping()
    finally:
        for c in clients:
            c.close()
    # Closing the sessions gave the mappings back.
    with pjrt_client.connect(daemon_h.addresses[0]) as c:
        assert wait_for(lambda: c.stats()["region_count"] == 0)
        c.create_region(4096).unregister()


# --- hangs -------------------------------------------------------------------


def pending_receive(client: pjrt_client.Client) -> pjrt_client.Buffer:
    """A receive buffer whose data never comes."""
    (buffer,), _ = client.make_cross_host_receive_buffers(
        [("f32", (4,))], device=0, timeout=600)
    return buffer


def copy_request(client: pjrt_client.Client,
                 buffer: pjrt_client.Buffer) -> buffer_pb2.CopyToDeviceRequest:
    """A CopyToDevice of `buffer` to device 1."""
    return buffer_pb2.CopyToDeviceRequest(session_id=client._session.id,
                                          handle=buffer.handle, device_id=1)


def test_a_copy_of_data_that_never_comes_honours_the_deadline(daemon_h,
                                                              attacker):
    receive = pending_receive(attacker)
    before = threads(daemon_h.process.pid)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        attacker._session.buffers.CopyToDevice(
            copy_request(attacker, receive), timeout=1)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < 5
    # The handler thread came back.
    assert wait_for(lambda: threads(daemon_h.process.pid) <= before + 2)


def test_an_execute_on_data_that_never_comes_honours_the_deadline(attacker):
    exe = attacker.compile("HloModule n\nENTRY e { x = f32[4] parameter(0)"
                           "  ROOT n = f32[4] negate(x) }")
    receive = pending_receive(attacker)
    request = executable_pb2.ExecuteRequest(
        session_id=attacker._session.id, executable_handle=exe.handle,
        argument_handles=[receive.handle], device_id=0)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        attacker._session.executables.Execute(request, timeout=1)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < 5


def test_calls_waiting_for_data_are_bounded_per_session(daemon_h, attacker,
                                                        victim):
    receive = pending_receive(attacker)
    futures = [attacker._session.buffers.CopyToDevice.future(
        copy_request(attacker, receive), timeout=30) for _ in range(4)]
    # Let the four reach the daemon and wait there.
    time.sleep(0.5)
    with pytest.raises(pjrt_client.ResourceExhaustedError,
                       match="max_waiting_calls_per_session"):
        receive.copy_to(1)
    # Another session is not affected.
    victim_client, buffers, data = victim
    np.testing.assert_array_equal(buffers[0].copy_to(1).to_numpy(), data)
    # Cancelling the receive releases the waiters at once.
    attacker.cancel_cross_host_receives([receive])
    for f in futures:
        with pytest.raises(grpc.RpcError) as e:
            f.result(timeout=10)
        assert e.value.code() != grpc.StatusCode.DEADLINE_EXCEEDED


def test_reads_waiting_for_data_count_as_waiting_calls(attacker):
    receive = pending_receive(attacker)
    request = buffer_pb2.DownloadRequest(session_id=attacker._session.id,
                                         handle=receive.handle)
    calls = [attacker._session.buffers.Download(request, timeout=30)
             for _ in range(4)]
    futures = [threading.Thread(target=lambda c=c: list_quietly(c))
               for c in calls]
    for f in futures:
        f.start()
    time.sleep(0.5)
    with pytest.raises(pjrt_client.ResourceExhaustedError,
                       match="max_waiting_calls_per_session"):
        receive.block_until_ready(timeout=5)
    attacker.cancel_cross_host_receives([receive])
    for f in futures:
        f.join(timeout=10)
        assert not f.is_alive()


def list_quietly(call: Any) -> None:
    """Reads a server stream to its end, ignoring its error."""
    try:
        list(call)
    except grpc.RpcError:
        pass


def test_a_receive_timeout_of_nan_or_beyond_the_maximum_is_refused(attacker):
    shape = pjrt_client._client._shape_proto(("f32", (4,)))
    for timeout in [float("nan"), float("inf"), 1e9, -1.0]:
        with pytest.raises(grpc.RpcError) as e:
            attacker._session.buffers.MakeCrossHostReceiveBuffers(
                buffer_pb2.MakeCrossHostReceiveBuffersRequest(
                    session_id=attacker._session.id, shapes=[shape],
                    device_id=0, timeout_seconds=timeout), timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "timeout_seconds" in e.value.details()


ALL_REDUCE = """
HloModule ar, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(x), replica_groups={}, to_apply=add
}
"""

NEGATE = """
HloModule neg
ENTRY e { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }
"""


def test_the_collective_timeout_is_capped(attacker):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"\[0, 120\]"):
        attacker.compile(ALL_REDUCE, collective_timeout=86400)


def test_a_lone_participant_holds_up_neither_the_device_nor_others(
        daemon_h, victim):
    victim_client, buffers, data = victim
    with pjrt_client.connect(daemon_h.addresses[0], client_name="lone") as c:
        exe = c.compile(ALL_REDUCE, collective_timeout=120)
        (lone,) = exe.execute_sharded([np.ones(4, np.float32)], 0,
                                      launch_id=1234)
        # The victim's work on the same device runs meanwhile.
        neg = victim_client.compile(NEGATE)
        start = time.monotonic()
        for _ in range(20):
            (y,) = neg.execute([np.ones(4, np.float32)], device=0)
            np.testing.assert_array_equal(y.to_numpy(), -np.ones(4))
        assert time.monotonic() - start < 10
        # A second session's part with the same launch id does not join
        # the first one's launch.
        exe2 = victim_client.compile(ALL_REDUCE, collective_timeout=1)
        (other,) = exe2.execute_sharded([np.full(4, 5, np.float32)], 1,
                                        launch_id=1234)
        with pytest.raises(pjrt_client.DeadlineExceededError,
                           match="did not arrive"):
            other.to_numpy()
        assert not lone.is_ready()
    # Closing the session ended the lone participant's wait: the device's
    # queue drains.
    assert wait_for(lambda: all(
        d["queue_depth"] == 0 for d in victim_client.stats()["devices"]))


def test_participants_waiting_for_peers_take_no_slot_of_ordinary_work(
        daemon_h, victim):
    # queue_ahead is 2: two lone parts fill the device's slots for runs that
    # wait for peers, not those of ordinary runs.
    victim_client, buffers, data = victim
    with pjrt_client.connect(daemon_h.addresses[0], client_name="lone") as c:
        exe = c.compile(ALL_REDUCE, collective_timeout=120)
        lone = [exe.execute_sharded([np.ones(4, np.float32)], 0,
                                    launch_id=100 + i)[0] for i in range(2)]
        neg = victim_client.compile(NEGATE)
        for _ in range(5):
            (y,) = neg.execute([np.ones(4, np.float32)], device=0)
            np.testing.assert_array_equal(y.to_numpy(), -np.ones(4))
        # A run of the lone session that reads a lone part's result waits
        # for it on the host, not on the device's compute stream.
        exe_neg = c.compile(NEGATE)
        request = executable_pb2.ExecuteRequest(
            session_id=c._session.id, executable_handle=exe_neg.handle,
            argument_handles=[lone[0].handle], device_id=0)
        with pytest.raises(grpc.RpcError) as e:
            c._session.executables.Execute(request, timeout=1)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        (y,) = neg.execute([np.ones(4, np.float32)], device=0)
        np.testing.assert_array_equal(y.to_numpy(), -np.ones(4))


def test_bad_replica_counts_and_groups_are_invalid_argument_at_once(attacker):
    for header in ["replica_count=4294967297", "replica_count=4294967295",
                   "replica_count=2147483648",
                   "replica_count=65536, num_partitions=65536"]:
        start = time.monotonic()
        with pytest.raises(pjrt_client.InvalidArgumentError):
            attacker.compile(f"HloModule m, {header}\n"
                             "ENTRY e { ROOT c = f32[] constant(1) }")
        assert time.monotonic() - start < 5
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="more than once"):
        attacker.compile(ALL_REDUCE.replace("replica_groups={}",
                                            "replica_groups={{0,0},{1}}"))


def long_chain(length: int, elements: int) -> str:
    """A program of `length` dependent element-wise ops over `elements`
    floats: seconds of work in little memory."""
    lines = ["HloModule long", "ENTRY e {",
             f"  v0 = f32[{elements}] iota(), iota_dimension=0",
             "  k = f32[] constant(0.999)",
             f"  ks = f32[{elements}] broadcast(k), dimensions={{}}"]
    lines += [f"  v{i + 1} = f32[{elements}] multiply(v{i}, ks)"
              for i in range(length)]
    lines += [f"  ROOT r = f32[{elements}] copy(v{length})", "}"]
    return "\n".join(lines)


def test_closing_a_session_cancels_its_running_execution(daemon_h, victim):
    victim_client, buffers, data = victim
    with pjrt_client.connect(daemon_h.addresses[0], client_name="long") as c:
        # Seconds of work however fast the machine (0.4 s for 1 Mi
        # elements on one of CI's kind), so that it still runs when the
        # session closes, and a victim waiting for it would wait longer
        # than the bound below.
        exe = c.compile(long_chain(20000, 1 << 24))
        (y,) = exe.execute([], device=0)
        time.sleep(0.5)
        assert not y.is_ready()
    # The victim's next run on that device does not wait for the rest.
    neg = victim_client.compile(NEGATE)
    start = time.monotonic()
    (z,) = neg.execute([np.ones(4, np.float32)], device=0)
    np.testing.assert_array_equal(z.to_numpy(), -np.ones(4))
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("what", ["long execution", "lone participant",
                                  "waits for data"])
def test_sigterm_ends_the_daemon_within_its_shutdown_timeout(what):
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        d = start_daemon(pathlib.Path(tmp), "shutdown_timeout_seconds = 1\n")
        c = pjrt_client.connect(d.addresses[0], client_name=what)
        pinned = []
        if what == "long execution":
            exe = c.compile(long_chain(20000, 1 << 20))
            exe.execute([], device=0)
        elif what == "lone participant":
            exe = c.compile(ALL_REDUCE, collective_timeout=120)
            exe.execute_sharded([np.ones(4, np.float32)], 0, launch_id=5)
        else:
            receive = pending_receive(c)
            pinned = [c._session.buffers.CopyToDevice.future(
                copy_request(c, receive)) for _ in range(3)]
        time.sleep(0.5)
        start = time.monotonic()
        d.process.send_signal(signal.SIGTERM)
        code = d.process.wait(timeout=60)
        elapsed = time.monotonic() - start
        log = d.log_path.read_text()
        for f in pinned:
            with pytest.raises(grpc.RpcError):
                f.result(timeout=10)
        c._channel.close()
        assert code == 0, log
        assert elapsed < 15, log


# --- memory outside --memory-limit ------------------------------------------


def test_tuples_of_tuples_are_bounded_in_arrays_and_depth(daemon_h, attacker):
    before = rss_bytes(daemon_h.process.pid)
    t = attacker.put(np.ones(4, np.float32))
    level = 0
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="at most 16384 are supported"):
        for level in range(22):
            t = attacker.make_tuple([t, t])
    assert level == 14  # 2^15 arrays is one level too many
    deep = attacker.put(np.ones(4, np.float32))
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="at most 32 levels"):
        for _ in range(40):
            deep = attacker.make_tuple([deep])
    attacker.ping()
    assert rss_bytes(daemon_h.process.pid) < before + (64 << 20)


def test_client_names_are_bounded_and_escaped_in_the_log(daemon_h):
    with pytest.raises(pjrt_client.InvalidArgumentError, match="at most 256"):
        pjrt_client.connect(daemon_h.addresses[0],
                            client_name="x" * (10 << 20))
    with pjrt_client.connect(daemon_h.addresses[0],
                             client_name="evil\n[info] forged line") as c:
        c.ping()
    log = daemon_h.log_path.read_text()
    assert "evil\\n[info] forged line" in log
    assert not any(line.startswith("[info] forged line")
                   for line in log.splitlines())


def test_errors_quote_a_bounded_excerpt_of_the_program(attacker):
    # A megabyte on one line, with the error at its end.
    values = ",".join(["1"] * 262144)
    text = (f"HloModule m\nENTRY e {{ ROOT c = f32[262144] constant("
            f"{{{values}, oops}}) }}")
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        attacker.compile(text)
    assert len(str(e.value)) < 4096
    attacker.ping()  # the channel is still usable


def test_programs_beyond_max_program_bytes_are_refused(attacker):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="max_program_bytes"):
        attacker.compile("HloModule m\n" + " " * (5 << 20) +
                         "ENTRY e { ROOT c = f32[] constant(1) }")


def test_memory_returns_to_baseline_after_a_session_closes(daemon_h):
    pid = daemon_h.process.pid
    # Warm up the daemon's threads and allocators once.
    with pjrt_client.connect(daemon_h.addresses[0]) as c:
        c.put(np.ones(4, np.float32)).to_numpy()
    time.sleep(1.5)
    baseline = rss_bytes(pid)
    with pjrt_client.connect(daemon_h.addresses[0], client_name="big") as c:
        regions = [c.create_region(1 << 20) for _ in range(8)]
        t = c.put(np.ones(4, np.float32))
        for _ in range(14):
            t = c.make_tuple([t, t])
        kept = [c.put(np.full(256, i, np.float32)) for i in range(2000)]
        # A large program (not kept: the cache is bounded to 1 MiB here).
        lines = ["HloModule big", "ENTRY e {", "  v0 = f32[8] parameter(0)"]
        lines += [f"  v{i + 1} = f32[8] add(v{i}, v{i})" for i in range(30000)]
        lines += ["  ROOT r = f32[8] copy(v30000)", "}"]
        c.compile("\n".join(lines))
        during = rss_bytes(pid)
        del regions, kept
    # Whatever the allocator does, the session's buffers, regions and
    # memory are gone from the daemon's books.
    with pjrt_client.connect(daemon_h.addresses[0]) as observer:
        def released() -> bool:
            s = observer.stats()
            return (s["session_count"] == 1 and s["buffer_count"] == 0
                    and s["region_count"] == 0
                    and all(d["bytes_in_use"] == 0 for d in s["devices"]))
        assert wait_for(released, timeout=10), observer.stats()
    if SANITIZED:
        return  # AddressSanitizer's quarantine keeps freed memory resident
    assert wait_for(lambda: rss_bytes(pid) < baseline + (16 << 20),
                    timeout=10), (baseline, during, rss_bytes(pid))


# --- the region socket -------------------------------------------------------

IDLE_CONNECTIONS = """
import socket, sys, time
sockets = []
for _ in range(8):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    sockets.append(s)
print("connected", flush=True)
time.sleep(30)
"""


def test_idle_connections_to_the_region_socket_hold_up_nobody(daemon_h,
                                                              attacker):
    path = attacker._info.region_socket
    assert not path.startswith("@")
    holders = [subprocess.Popen([sys.executable, "-c", IDLE_CONNECTIONS,
                                 path], stdout=subprocess.PIPE, text=True)
               for _ in range(3)]
    try:
        for h in holders:
            assert h.stdout.readline().strip() == "connected"
        start = time.monotonic()
        region = attacker.create_region(1 << 20)
        assert time.monotonic() - start < 1
        region.unregister()
    finally:
        for h in holders:
            h.kill()
            h.wait()


def test_a_peer_beyond_its_connection_bound_is_refused_at_once(attacker):
    path = attacker._info.region_socket
    held = []
    for _ in range(8):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        held.append(s)
    extra = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    extra.connect(path)
    extra.settimeout(5)
    # The daemon closes the ninth connection of this process at once.
    assert extra.recv(16) == b""
    for s in held + [extra]:
        s.close()
