"""Execute lanes: Execute calls over a unix socket of the session
(daemon/execute_lane.h), against a real pjrtd: what the clients use on
their own, what a hostile connection gets, and that a lane belongs to its
session alone."""

from __future__ import annotations

import os
import re
import select
import socket
import stat
import struct
import threading
import time

import numpy as np
import pytest

import pjrt_client
from pjrt_client._proto.pjrt.v1 import executable_pb2
from conftest import Daemon
from programs import ADD_ONE


STEP = """HloModule step
ENTRY main {
  x = f32[64,32] parameter(0)
  w = f32[32,16] parameter(1)
  d = f32[64,16] dot(x, w), lhs_contracting_dims={1},
    rhs_contracting_dims={0}
  t = f32[64,16] tanh(d)
  z = f32[] constant(0)
  s = f32[] reduce(t, z), dimensions={0,1}, to_apply=add
  ROOT r = (f32[64,16], f32[]) tuple(t, s)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


@pytest.fixture
def local(daemon: Daemon):
    with pjrt_client.connect(daemon.addresses[0],
                             client_name="lanes") as c:
        yield c


def lane_count(client: pjrt_client.Client) -> int:
    return client.stats()["execute_lane_count"]


def send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def receive(sock: socket.socket) -> executable_pb2.ExecuteLaneReply | None:
    """The next reply, or None when the daemon closed the lane."""
    header = b""
    while len(header) < 4:
        part = sock.recv(4 - len(header))
        if not part:
            return None
        header += part
    (length,) = struct.unpack("<I", header)
    body = b""
    while len(body) < length:
        part = sock.recv(length - len(body))
        if not part:
            return None
        body += part
    return executable_pb2.ExecuteLaneReply.FromString(body)


def open_lane(client: pjrt_client.Client, session_id: int | None = None,
              version: int = 8) -> tuple[socket.socket,
                                         executable_pb2.ExecuteLaneReply]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(client._info.execute_lane_socket)
    hello = executable_pb2.ExecuteLaneHello(
        session_id=client._session.id if session_id is None else session_id,
        protocol_version=version)
    send(sock, hello.SerializeToString())
    return sock, receive(sock)


def request_for(client, exe, args) -> executable_pb2.ExecuteRequest:
    return executable_pb2.ExecuteRequest(
        session_id=client._session.id, executable_handle=exe._handle,
        argument_handles=[a.handle for a in args], device_id=0,
        options=executable_pb2.ExecuteOptions(keep_tuple_result=False,
                                              fetch_results=True))


def test_the_daemon_offers_a_lane_socket_beside_its_own(local, daemon):
    assert "executables.lane" in local.info()["capabilities"]
    # Beside the main socket, with its permissions: who may not reach the
    # daemon may not open lanes either.
    main = daemon.addresses[0].removeprefix("unix://")
    assert local._info.execute_lane_socket == main + ".lanes"
    lane_socket = os.stat(local._info.execute_lane_socket)
    assert stat.S_ISSOCK(lane_socket.st_mode)
    assert stat.S_IMODE(lane_socket.st_mode) == \
        stat.S_IMODE(os.stat(main).st_mode)


def test_execute_goes_over_a_lane_bit_identical_to_grpc(daemon):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    outputs = {}
    for lanes in (True, False):
        with pjrt_client.connect(daemon.addresses[0],
                                 execute_lanes=lanes) as c:
            exe = c.compile(STEP)
            args = [c.put(x), c.put(w)]
            before = c._lanes.calls
            plain = [r.to_numpy() for r in exe.execute(args)]
            waited = [r.to_numpy() for r in exe.execute(args, wait=True)]
            fetched = [r.to_numpy() for r in exe.execute(args, fetch=True)]
            assert c.uses_execute_lanes == lanes
            assert c._lanes.calls - before == (3 if lanes else 0)
            if lanes:
                assert lane_count(c) >= 1
            outputs[lanes] = plain + waited + fetched
    for a, b in zip(outputs[True], outputs[False]):
        assert a.tobytes() == b.tobytes()


def test_a_dependent_loop_over_a_lane_drops_its_buffers(local):
    exe = local.compile(ADD_ONE)
    x = local.put(np.zeros(4, np.float32))
    before = local.stats()["buffer_count"]
    calls = local._lanes.calls
    for _ in range(200):
        x = exe.execute([x])[0]
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 200, np.float32))
    assert local._lanes.calls - calls == 200
    # The dropped steps rode on the lane's requests: x alone is left.
    assert local.stats()["buffer_count"] == before


def test_lane_errors_are_those_of_grpc(daemon):
    messages = {}
    for lanes in (True, False):
        with pjrt_client.connect(daemon.addresses[0],
                                 execute_lanes=lanes) as c:
            exe = c.compile(ADD_ONE)
            gone = c.put(np.zeros(4, np.float32))
            gone.delete()
            with pytest.raises(pjrt_client.InvalidArgumentError) as few:
                exe.execute([])
            wrong = c.put(np.zeros(5, np.float32))
            with pytest.raises(pjrt_client.InvalidArgumentError) as shape:
                exe.execute([wrong])
            with pytest.raises(pjrt_client.FailedPreconditionError) as dead:
                exe.execute([gone])
            messages[lanes] = [re.sub(r"0x[0-9a-f]+", "HANDLE", str(e.value))
                               for e in (few, shape, dead)]
    assert messages[True] == messages[False]


def test_a_lane_serves_its_own_session_alone(daemon, local):
    with pjrt_client.connect(daemon.addresses[0]) as other:
        exe = other.compile(ADD_ONE)
        x = other.put(np.arange(4, dtype=np.float32))
        sock, hello = open_lane(local)
        with sock:
            assert hello.error_code == 0
            # The other session's request, on this session's lane: as if
            # that session did not exist.
            request = request_for(other, exe, [x])
            send(sock, request.SerializeToString())
            reply = receive(sock)
            assert reply.error_code == 5  # NOT_FOUND
            assert f"session {other._session.id:#x} is not open" in \
                reply.error_message
            # The lane still serves its own session.
            mine = local.compile(ADD_ONE)
            y = local.put(np.arange(4, dtype=np.float32))
            send(sock, request_for(local, mine, [y]).SerializeToString())
            reply = receive(sock)
            assert reply.error_code == 0
            data = reply.response.results[0].data
            np.testing.assert_array_equal(np.frombuffer(data, np.float32),
                                          np.arange(1, 5, dtype=np.float32))
        np.testing.assert_array_equal(exe.execute([x])[0].to_numpy(),
                                      np.arange(1, 5, dtype=np.float32))


@pytest.mark.parametrize("session_id, version, code, words", [
    (0x1234, 8, 5, "is not open"),
    (None, 7, 3, "revision 8"),
])
def test_a_hello_is_checked(local, session_id, version, code, words):
    sock, reply = open_lane(local, session_id, version)
    with sock:
        assert reply.error_code == code
        assert words in reply.error_message
        assert receive(sock) is None  # the daemon closed the lane


def test_what_is_not_a_lane_message_never_hurts_the_daemon(local):
    path = local._info.execute_lane_socket
    # Not a hello: an answer, then the end.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        send(sock, b"\xff" * 12)
        reply = receive(sock)
        assert reply.error_code == 3 and "ExecuteLaneHello" in \
            reply.error_message
        assert receive(sock) is None
    # A length beyond the limit, for a hello and after one.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(struct.pack("<I", 0xFFFFFFFF))
        reply = receive(sock)
        assert reply.error_code == 3 and "4294967295" in reply.error_message
        assert receive(sock) is None
    sock, hello = open_lane(local)
    with sock:
        assert hello.error_code == 0
        # Not an ExecuteRequest: an error, and the lane stays open.
        send(sock, b"\x0a\xff\xff\xff")
        reply = receive(sock)
        assert reply.error_code == 3 and "not an ExecuteRequest" in \
            reply.error_message
        send(sock, b"")  # an empty request: no executable 0
        assert receive(sock).error_code == 5
        sock.sendall(struct.pack("<I", (4 << 20) + 1))
        reply = receive(sock)
        assert reply.error_code == 3 and "at most 4194304 bytes" in \
            reply.error_message
        assert receive(sock) is None
    # A message cut short, then silence: the daemon drops it at the end.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(struct.pack("<I", 100) + b"abc")
    exe = local.compile(ADD_ONE)
    out = exe.execute([np.zeros(4, np.float32)])[0].to_numpy()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


def test_a_silent_connection_is_dropped_after_two_seconds(local):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(local._info.execute_lane_socket)
        start = time.monotonic()
        assert sock.recv(16) == b""
        assert 1.5 < time.monotonic() - start < 10


def test_a_hello_sent_a_byte_at_a_time_still_ends_in_two_seconds(local):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(local._info.execute_lane_socket)
        start = time.monotonic()
        sock.sendall(struct.pack("<I", 40))
        closed = False
        for _ in range(40):  # 40 bytes at 4 a second: 10 s if let be
            try:
                sock.sendall(b"\x00")
            except OSError:
                closed = True
                break
            readable, _, _ = select.select([sock], [], [], 0.25)
            if readable and sock.recv(16) == b"":
                closed = True
                break
        assert closed
        assert time.monotonic() - start < 5


def test_lanes_per_session_are_bounded(local):
    lanes = []
    try:
        for _ in range(4):
            sock, reply = open_lane(local)
            lanes.append(sock)
            assert reply.error_code == 0
        sock, reply = open_lane(local)
        lanes.append(sock)
        assert reply.error_code == 8  # RESOURCE_EXHAUSTED
        assert "max_execute_lanes_per_session" in reply.error_message
        # The client's own calls go through gRPC meanwhile.
        exe = local.compile(ADD_ONE)
        calls = local._lanes.calls
        out = exe.execute([np.zeros(4, np.float32)])[0].to_numpy()
        np.testing.assert_array_equal(out, np.ones(4, np.float32))
        assert local._lanes.calls == calls
    finally:
        for sock in lanes:
            sock.close()
    # Once lanes are free again, the client takes one.
    deadline = time.monotonic() + 10
    while lane_count(local) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)  # polling the daemon's count, with a deadline
    exe.execute([np.zeros(4, np.float32)])
    assert local._lanes.calls == calls + 1
    assert local.uses_execute_lanes


def test_closing_the_session_ends_its_lanes(daemon):
    c = pjrt_client.connect(daemon.addresses[0])
    sock, reply = open_lane(c)
    with sock:
        assert reply.error_code == 0
        c.close()
        # The reaper ends the lanes of closed sessions once a second.
        sock.settimeout(10)
        assert sock.recv(16) == b""


def test_threads_share_the_lanes_and_grpc(local):
    exe = local.compile(ADD_ONE)
    errors = []

    def work(k: int) -> None:
        try:
            x = local.put(np.full(4, k, np.float32))
            for _ in range(50):
                x = exe.execute([x])[0]
            np.testing.assert_array_equal(x.to_numpy(),
                                          np.full(4, k + 50, np.float32))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_daemon_without_lanes_is_called_through_grpc(tmp_path):
    config = tmp_path / "pjrtd.toml"
    config.write_text("max_execute_lanes = 0\n")
    d = Daemon(tmp_path, "--platform", "host", "--config", str(config),
               "--listen", f"unix://{tmp_path}/pjrtd.sock")
    try:
        with pjrt_client.connect(d.addresses[0]) as c:
            assert "executables.lane" not in c.info()["capabilities"]
            assert not c.uses_execute_lanes
            exe = c.compile(ADD_ONE)
            out = exe.execute([np.zeros(4, np.float32)])[0].to_numpy()
            np.testing.assert_array_equal(out, np.ones(4, np.float32))
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_a_forked_child_does_not_share_its_parents_lanes(local):
    exe = local.compile(ADD_ONE)
    exe.execute([np.zeros(4, np.float32)])  # opens a lane
    parents = list(local._lanes._idle)  # kept open in the child too
    assert parents
    pid = os.fork()
    if pid == 0:
        # The child opens a lane of its own (of the same session).
        sock = local._lanes._take()
        os._exit(2 if sock is None else
                 1 if sock.fileno() in [p.fileno() for p in parents] else 0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    out = exe.execute([np.zeros(4, np.float32)])[0].to_numpy()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


def test_a_waiting_request_ends_when_its_client_hangs_up(local):
    # Its argument waits for data from another task that never comes: the
    # run waits, until the lane's client goes away.
    (pending,), _ = local.make_cross_host_receive_buffers([("f32", (4,))])
    exe = local.compile(ADD_ONE)
    before = lane_count(local)
    sock, hello = open_lane(local)
    assert hello.error_code == 0
    request = request_for(local, exe, [pending])
    request.options.fetch_results = False
    request.options.wait_until_ready = True
    send(sock, request.SerializeToString())
    assert lane_count(local) == before + 1
    sock.close()
    deadline = time.monotonic() + 10
    while lane_count(local) != before:
        assert time.monotonic() < deadline, "the lane's thread still waits"
        time.sleep(0.01)  # polling the daemon's count, with a deadline
    # The session is unharmed.
    out = exe.execute([np.zeros(4, np.float32)])[0].to_numpy()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))
