"""Hostile-input sweep over every RPC that pjrtd serves to its clients.

The RPCs are enumerated from the protobuf service descriptors, so that an RPC
added later is swept without touching this file. Requests are built (in
hostile_requests.py) from the message descriptors, field by field, and
encoded on the wire by hand, so that values that the Python protobuf runtime
refuses (an int32 of 2**63-1, a negative uint32, an enum of 999, invalid
UTF-8) still reach the daemon:

* one field hostile at a time, the others sane (recursively for nested
  messages, to a bounded depth);
* a few all-hostile messages drawn with a fixed seed;
* a few malformed encodings (garbage, truncation, invalid UTF-8, an unknown
  field);
* for client-streaming RPCs, short sequences of such messages.

"Sane" means that the request names a real session (opened through the
Sessions service) and real buffers, executables and regions of it, so that
the sweep gets past the session and handle lookups.

For every RPC the test asserts that no call ends with UNKNOWN (an uncaught
exception in the daemon) or INTERNAL (unless justified below), that the
daemon is still alive and answers Ping, and that a buffer of a "victim"
session, opened by another client before the sweep, is still intact.
Calls that run into this test's own deadline are reported as warnings: they
may be hangs.

The module starts its own pjrtd, with the flags of conftest's `daemon`
fixture, and starts it again when a call crashes it: the crash is reported
as a failure of that RPC, and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pathlib
import tempfile
import time
import warnings
from typing import Any, Callable, Iterator

import grpc
import numpy as np
import pytest
from google.protobuf import descriptor as pb_descriptor

import pjrt_client
from conftest import MEMORY_LIMIT, Daemon
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, buffer_pb2_grpc,
                                        executable_pb2,
                                        executable_pb2_grpc, server_pb2,
                                        server_pb2_grpc, session_pb2,
                                        session_pb2_grpc, types_pb2)
from pjrt_client._shm import register_memfd
from hostile_requests import (ADD_HLO, ALL_REDUCE_HLO, CALL_TIMEOUT,
                              EXPECTED_SERVICES, FD, HUGE_RESULT_HLO,
                              HUGE_RESULTS, JUSTIFIED_INTERNAL,
                              LONG_LIVED_STREAMS, MAX_STREAM_MESSAGES, METHODS,
                              NOT_SERVED_TO_CLIENTS, PROTOCOL_VERSION,
                              REGION_SIZE, REPLICATED_HLO, SERVICES, TUPLE_HLO,
                              Case, _method_id, _raw, cases_of, message_class,
                              resolve)


# --- the hostile session ----------------------------------------------------

def _upload(stub: buffer_pb2_grpc.BuffersStub, session_id: int,
            array: np.ndarray, device_id: int) -> int:
    """Uploads ``array``; returns the buffer's handle."""
    wire = {np.dtype(np.float32): types_pb2.DTYPE_F32,
            np.dtype(np.uint8): types_pb2.DTYPE_U8}[array.dtype]
    header = buffer_pb2.UploadHeader(
        session_id=session_id, device_id=device_id,
        shape=types_pb2.ArrayShape(dtype=wire, dims=list(array.shape)))
    requests = [buffer_pb2.UploadRequest(header=header)]
    if array.nbytes:
        requests.append(buffer_pb2.UploadRequest(chunk=array.tobytes()))
    return stub.Upload(iter(requests), timeout=30).handle


def _register_region(socket_name: str, session_id: int) -> int:
    """Registers a sealed memfd of REGION_SIZE bytes; returns its handle."""
    fd = os.memfd_create("hostile", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, REGION_SIZE)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return register_memfd(socket_name, session_id, fd, REGION_SIZE,
                              "hostile")
    finally:
        os.close(fd)


class Pool:
    """The hostile client's session and its real buffers, executables and
    region; rebuilt (in a new session) whenever the sweep destroys some."""

    def __init__(self, channel: grpc.Channel, victim_public_id: int,
                 victim_handle: int) -> None:
        self.sessions = session_pb2_grpc.SessionsStub(channel)
        self.buffers = buffer_pb2_grpc.BuffersStub(channel)
        self.executables = executable_pb2_grpc.ExecutablesStub(channel)
        self.server = server_pb2_grpc.ServerStub(channel)
        info = self.server.GetServerInfo(server_pb2.GetServerInfoRequest(),
                                         timeout=30)
        self.region_socket = info.region_socket
        self.victim_public_id = victim_public_id
        self.victim_handle = victim_handle
        self.closed_sessions: list[int] = []
        self.session_id = 0
        self.rebuilds = 0
        closed = self._open()
        self.closed_sessions.append(closed)
        self.sessions.CloseSession(
            session_pb2.CloseSessionRequest(session_id=closed), timeout=30)
        self._build()

    def _open(self) -> int:
        response = self.sessions.OpenSession(session_pb2.OpenSessionRequest(
            client_name="hostile-sweep", protocol_version=PROTOCOL_VERSION),
            timeout=30)
        self.public_id = response.public_id
        return response.session_id

    def _compile(self, hlo: str, **options: Any) -> int:
        return self.executables.Compile(executable_pb2.CompileRequest(
            session_id=self.session_id, hlo_text=hlo,
            options=executable_pb2.CompileOptions(**options)),
            timeout=60).executable_handle

    def _receive(self, timeout: float) -> tuple[int, bytes]:
        response = self.buffers.MakeCrossHostReceiveBuffers(
            buffer_pb2.MakeCrossHostReceiveBuffersRequest(
                session_id=self.session_id, device_id=0,
                timeout_seconds=timeout,
                shapes=[types_pb2.ArrayShape(dtype=types_pb2.DTYPE_F32,
                                             dims=[3])]), timeout=30)
        return response.buffers[0].handle, response.descriptors[0]

    def _build(self) -> None:
        self.session_id = self._open()
        sid, stub = self.session_id, self.buffers
        three = np.arange(1, 4, dtype=np.float32)
        h = {"a": _upload(stub, sid, three, 0),
             "b": _upload(stub, sid, three * 2, 0),
             "c": _upload(stub, sid, three * 3, 1),
             "empty": _upload(stub, sid, np.zeros(0, np.float32), 0),
             "scalar": _upload(stub, sid, np.float32(7).reshape(()), 0),
             "u8": _upload(stub, sid, np.arange(5, dtype=np.uint8), 2),
             "element": _upload(stub, sid, three, 0)}
        second = _upload(stub, sid, three, 0)
        h["tuple"] = stub.MakeTuple(buffer_pb2.MakeTupleRequest(
            session_id=sid, handles=[h["element"], second]),
            timeout=30).handle
        h["errored"], self.cancelled_descriptor = self._receive(60)
        stub.CancelCrossHostReceives(buffer_pb2.CancelCrossHostReceivesRequest(
            session_id=sid, handles=[h["errored"]]), timeout=30)
        self.buffer_handles = h
        # Kept apart from the buffers checked: a receive that stays unready
        # (for 10 minutes), and its descriptor.
        self.pending_buffer, self.descriptor = self._receive(600)
        self.stale_buffer = _upload(stub, sid, three, 0)
        stub.DeleteBuffers(buffer_pb2.DeleteBuffersRequest(
            session_id=sid, handles=[self.stale_buffer]), timeout=30)
        self.region_handle = self.stale_region_handle = 0
        if self.region_socket:
            self.region_handle = _register_region(self.region_socket, sid)
            self.stale_region_handle = _register_region(self.region_socket,
                                                        sid)
            stub.UnregisterRegion(buffer_pb2.UnregisterRegionRequest(
                session_id=sid, region_handle=self.stale_region_handle),
                timeout=30)
        self.executable_handles = {
            "add": self._compile(ADD_HLO),
            "portable": self._compile(ADD_HLO, portable=True),
            "tuple": self._compile(TUPLE_HLO),
            "replicated": self._compile(REPLICATED_HLO),
            "all_reduce": self._compile(ALL_REDUCE_HLO,
                                        collective_timeout_seconds=0.5),
        }
        self._build_hostile_extras()
        self.stale_executable = self._compile(
            ADD_HLO.replace("hostile_add", "hostile_gone"))
        self.executables.DeleteExecutable(
            executable_pb2.DeleteExecutableRequest(
                session_id=sid, executable_handle=self.stale_executable),
            timeout=30)
        self.executable_floor = self._executable_count()

    def _build_hostile_extras(self) -> None:
        """Real handles of things a careful client would not make: a tuple
        holding one buffer twice, a tuple of a tuple, programs whose result
        size overflows, and the result of one. Best effort: a daemon that
        refuses to make one leaves its handle 0 (itself a hostile value)."""
        sid, h = self.session_id, self.buffer_handles
        three = np.arange(1, 4, dtype=np.float32)

        def attempt(make: Callable[[], int]) -> int:
            try:
                return make()
            except grpc.RpcError:
                return 0

        once = _upload(self.buffers, sid, three, 0)
        h["tuple_of_one_twice"] = attempt(lambda: self.buffers.MakeTuple(
            buffer_pb2.MakeTupleRequest(session_id=sid, handles=[once, once]),
            timeout=30).handle)
        inner = attempt(lambda: self.buffers.MakeTuple(
            buffer_pb2.MakeTupleRequest(
                session_id=sid, handles=[_upload(self.buffers, sid, three,
                                                 0)]), timeout=30).handle)
        h["tuple_of_a_tuple"] = attempt(lambda: self.buffers.MakeTuple(
            buffer_pb2.MakeTupleRequest(session_id=sid, handles=[inner]),
            timeout=30).handle)
        for name, dims in HUGE_RESULTS.items():
            self.executable_handles[name] = attempt(
                lambda: self._compile(HUGE_RESULT_HLO.format(name=name,
                                                             dims=dims)))
        h["overflowed"] = attempt(lambda: self.executables.Execute(
            executable_pb2.ExecuteRequest(
                session_id=sid,
                executable_handle=self.executable_handles[
                    "overflowing_result"],
                argument_handles=[h["a"], h["b"]],
                options=executable_pb2.ExecuteOptions(wait_until_ready=True)),
            timeout=30).results[0].handle)
        for name in [n for n, handle in h.items() if not handle]:
            del h[name]  # so that the pool check does not trip on it

    def _executable_count(self) -> int:
        listing = self.sessions.ListSessions(
            session_pb2.ListSessionsRequest(), timeout=30)
        for info in listing.sessions:
            if info.public_id == self.public_id:
                return info.executable_count
        raise LookupError("the hostile session is gone")

    def check(self) -> None:
        """Rebuilds the pool if the last call closed the session or deleted
        a buffer, an executable or the region; makes a new unready receive
        buffer if the last one was filled or cancelled."""
        try:
            self.sessions.KeepAlive(session_pb2.KeepAliveRequest(
                session_id=self.session_id), timeout=30)
            self.buffers.GetReadyState(buffer_pb2.GetReadyStateRequest(
                session_id=self.session_id,
                handles=list(self.buffer_handles.values())), timeout=30)
            pending = self.buffers.GetReadyState(
                buffer_pb2.GetReadyStateRequest(
                    session_id=self.session_id,
                    handles=[self.pending_buffer]), timeout=30)
            if pending.states[0].ready:  # filled or cancelled by the sweep
                self.pending_buffer, self.descriptor = self._receive(600)
            count = self._executable_count()
            if count < self.executable_floor:
                raise LookupError("an executable is gone")
            self.executable_floor = count
            if self.region_handle:
                regions = self.buffers.ListRegions(
                    buffer_pb2.ListRegionsRequest(
                        session_id=self.session_id), timeout=30)
                if self.region_handle not in [
                        r.region_handle for r in regions.regions]:
                    raise LookupError("the region is gone")
        except (grpc.RpcError, LookupError):
            self.rebuild()

    def rebuild(self) -> None:
        self.close()
        self.closed_sessions.append(self.session_id)
        self.rebuilds += 1
        self._build()

    def close(self) -> None:
        try:
            self.sessions.CloseSession(session_pb2.CloseSessionRequest(
                session_id=self.session_id), timeout=30)
        except grpc.RpcError:
            pass  # closed by the sweep already


# --- calling ----------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """How one call ended. ``code`` is a grpc status code name, or
    CANCELLED_BY_TEST (a server stream this test stopped reading), or
    DAEMON_DIED."""
    method: str
    case: Case
    code: str
    details: str
    seconds: float
    #: UNKNOWN or INTERNAL errors bound to buffers that the responses
    #: describe (a run that failed that way, e.g. an exception in a kernel).
    bound: list[str] = dataclasses.field(default_factory=list)

    @property
    def client_deadline(self) -> bool:
        """Whether the call ran into this test's own deadline."""
        return self.code == "DEADLINE_EXCEEDED" and \
            self.seconds >= CALL_TIMEOUT - 0.25

    @property
    def bad(self) -> bool:
        if self.code in ("UNKNOWN", "DAEMON_DIED") or self.bound:
            return True
        return self.code == "INTERNAL" and not any(
            j.covers(self.method, self.case.kind, self.details)
            for j in JUSTIFIED_INTERNAL)

    def __str__(self) -> str:
        details = self.details if self.code == "DAEMON_DIED" else \
            self.details.replace("\n", " ")
        if len(details) > 300 and self.code != "DAEMON_DIED":
            details = details[:300] + "..."
        bound = f" (bound to results: {'; '.join(self.bound)})" \
            if self.bound else ""
        return (f"{_method_id(self.method)} {self.case.label}: {self.code} "
                f"after {self.seconds:.2f}s: {details}{bound}")


def bound_errors(message: Any, path: str = "") -> list[str]:
    """UNKNOWN and INTERNAL codes in fields named error_code anywhere in a
    response, with their messages."""
    found = []
    for field, value in message.ListFields():
        where = f"{path}.{field.name}" if path else field.name
        if field.type == FD.TYPE_MESSAGE:
            values = value if field.label == FD.LABEL_REPEATED else [value]
            for i, v in enumerate(values):
                found += bound_errors(v, f"{where}[{i}]")
        elif field.name == "error_code" and value in (
                grpc.StatusCode.UNKNOWN.value[0],
                grpc.StatusCode.INTERNAL.value[0]):
            found.append(f"{where}={value}: "
                         f"{getattr(message, 'error_message', '')[:200]}")
    return found


def _stub(channel: grpc.Channel,
          method: pb_descriptor.MethodDescriptor) -> Any:
    """A callable for ``method`` that takes serialized requests."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    deserialize = message_class(method.output_type).FromString
    factory = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }[(method.client_streaming, method.server_streaming)]
    return factory(path, request_serializer=None,
                   response_deserializer=deserialize)


def call(channel: grpc.Channel, pool: "Pool",
         method: pb_descriptor.MethodDescriptor, case: Case
         ) -> tuple[Outcome, list[Any]]:
    """Sends one case; returns how it ended and the responses."""
    if method.client_streaming:
        # One memo per message: each gets its own fresh handles.
        request: Any = iter([resolve(m, pool, {}) for m in case.messages])
    else:
        request = resolve(case.messages, pool, {})
    stub = _stub(channel, method)
    start = time.monotonic()
    responses: list[Any] = []
    code, details = "OK", ""
    try:
        if not method.server_streaming:
            responses.append(stub(request, timeout=CALL_TIMEOUT))
        else:
            stream = stub(request, timeout=CALL_TIMEOUT)
            limit = 1 if method.full_name in LONG_LIVED_STREAMS \
                else MAX_STREAM_MESSAGES
            for response in stream:
                responses.append(response)
                if len(responses) >= limit:
                    stream.cancel()
                    code = "CANCELLED_BY_TEST"
                    break
    except grpc.RpcError as e:
        code, details = e.code().name, e.details() or ""
    bound = [e for r in responses for e in bound_errors(r)]
    return Outcome(method.full_name, case, code, details,
                   time.monotonic() - start, bound), responses


def log_tail(daemon: Daemon, lines: int = 15) -> str:
    try:
        return "\n".join(daemon.log_path.read_text(
            errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


# --- the daemon, the victim and the sweep -----------------------------------

#: As conftest's `daemon` fixture starts pjrtd. This module starts its own,
#: so that a crash it provokes is restarted from (and the sweep goes on),
#: instead of failing every later test of the session.
DAEMON_FLAGS = ("--platform", "host", "--host-devices", "3",
                "--memory-limit", str(MEMORY_LIMIT))
#: Daemon restarts allowed per RPC before its sweep gives up.
MAX_RESTARTS = 8


@dataclasses.dataclass
class Env:
    """One pjrtd, the victim's client and buffer, and the hostile pool."""
    daemon: Daemon
    victim: Any
    victim_buffer: Any
    victim_bytes: bytes
    channel: grpc.Channel
    pool: "Pool"

    def dead(self, wait: float = 0.0) -> bool:
        """Whether pjrtd has exited (waiting up to ``wait`` seconds)."""
        deadline = time.monotonic() + wait
        while self.daemon.process.poll() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


class Harness:
    """Starts pjrtd (again after a crash), the victim and the pool."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.starts = 0
        self.env: Env | None = None

    def current(self) -> Env:
        if self.env is None or self.env.dead():
            self._discard()
            self.env = self._start()
        return self.env

    def _start(self) -> Env:
        workdir = self.root / f"pjrtd.{self.starts}"
        workdir.mkdir()
        self.starts += 1
        daemon = Daemon(workdir, *DAEMON_FLAGS,
                        "--listen", f"unix://{workdir}/pjrtd.sock",
                        "--listen", "127.0.0.1:0")
        # The victim: another client, over TCP, with a buffer made before
        # any hostile call.
        victim = pjrt_client.connect(daemon.addresses[1],
                                     client_name="victim")
        data = np.arange(1024, dtype=np.float32)
        victim_buffer = victim.put(data)
        channel = grpc.insecure_channel(daemon.addresses[0], options=[
            ("grpc.max_receive_message_length", 64 << 20)])
        pool = Pool(channel, victim._session.public_id, victim_buffer.handle)
        return Env(daemon, victim, victim_buffer, data.tobytes(), channel,
                   pool)

    def _discard(self) -> None:
        """Forgets a daemon that died."""
        if self.env is not None:
            self.env.channel.close()
            self.env.victim.close()
            self.env = None

    def close(self) -> tuple[int | None, str]:
        """Stops the daemon; returns its exit code and log tail."""
        env, self.env = self.env, None
        if env is None or env.dead():
            return None, ""
        env.pool.close()
        env.victim.close()
        env.channel.close()
        return env.daemon.stop(), log_tail(env.daemon)


def _died(env: Env, outcome: Outcome, when: str) -> Outcome:
    return Outcome(outcome.method, outcome.case, "DAEMON_DIED",
                   f"pjrtd exited with {env.daemon.process.returncode} "
                   f"{when} (the call itself: {outcome.code} "
                   f"{outcome.details[:200]!r}); log tail:\n"
                   + log_tail(env.daemon), outcome.seconds)


def _close_new_sessions(env: Env, response: Any) -> None:
    """Closes a session that the sweep opened (OpenSession succeeded)."""
    if "session_id" in response.DESCRIPTOR.fields_by_name:
        sid = response.session_id
        if sid and sid != env.pool.session_id:
            try:
                env.pool.sessions.CloseSession(
                    session_pb2.CloseSessionRequest(session_id=sid),
                    timeout=30)
            except grpc.RpcError:
                pass


def sweep(harness: Harness,
          method: pb_descriptor.MethodDescriptor) -> list[Outcome]:
    """Sends every case of ``method``; restarts pjrtd after a crash."""
    outcomes: list[Outcome] = []
    for case in cases_of(method):
        env = harness.current()
        outcome, responses = call(env.channel, env.pool, method, case)
        if env.dead(wait=1.0 if outcome.code == "UNAVAILABLE" else 0.0):
            outcome = _died(env, outcome, "during the call")
        else:
            for response in responses:
                _close_new_sessions(env, response)
            if outcome.code in ("OK", "CANCELLED_BY_TEST",
                                "DEADLINE_EXCEEDED"):
                try:
                    env.pool.check()
                except grpc.RpcError:
                    if not env.dead(wait=1.0):
                        raise
                    outcome = _died(env, outcome, "right after the call")
        outcomes.append(outcome)
        if sum(o.code == "DAEMON_DIED" for o in outcomes) > MAX_RESTARTS:
            break
    return outcomes


# --- tests ------------------------------------------------------------------

@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        h = Harness(pathlib.Path(tmp))
        yield h
        code, log = h.close()
        assert code in (None, 0), f"pjrtd exited with {code}:\n{log}"


def assert_daemon_healthy(env: Env) -> None:
    """Alive, answers Ping, and the victim's buffer is bit-exact."""
    assert not env.dead(), log_tail(env.daemon)
    server_pb2_grpc.ServerStub(env.channel).Ping(server_pb2.PingRequest(),
                                                 timeout=10)
    got = np.asarray(env.victim_buffer.to_numpy(), dtype=np.float32)
    assert got.tobytes() == env.victim_bytes, "the victim's data changed"


def test_every_client_service_is_swept(harness: Harness) -> None:
    """The sweep covers every service found in the protos except those on
    the allow-list, and those really are not served to clients."""
    assert EXPECTED_SERVICES <= set(SERVICES), sorted(SERVICES)
    assert set(NOT_SERVED_TO_CLIENTS) <= set(SERVICES)
    swept = {m.containing_service.full_name for m in METHODS.values()}
    assert swept == set(SERVICES) - set(NOT_SERVED_TO_CLIENTS)
    env = harness.current()
    for name in NOT_SERVED_TO_CLIENTS:
        for method in SERVICES[name].methods:
            message = _raw("empty", lambda p, m: b"")
            case = Case("empty request", [message]
                        if method.client_streaming else message)
            outcome, _ = call(env.channel, env.pool, method, case)
            assert outcome.code == "UNIMPLEMENTED", str(outcome)


@pytest.mark.parametrize("name", sorted(METHODS), ids=_method_id)
def test_hostile_rpc(harness: Harness, name: str) -> None:
    """Every hostile call of one RPC ends with a deliberate status (not
    UNKNOWN, not an unjustified INTERNAL, no crash), and afterwards the
    daemon answers Ping and the victim's data is intact."""
    outcomes = sweep(harness, METHODS[name])
    assert outcomes
    hung = [str(o) for o in outcomes if o.client_deadline]
    if hung:
        warnings.warn(f"{len(hung)} call(s) of {_method_id(name)} ran into "
                      f"the {CALL_TIMEOUT:g} s deadline:\n"
                      + "\n".join(hung))
    bad = [str(o) for o in outcomes if o.bad]
    if not any(o.code == "DAEMON_DIED" for o in outcomes[-1:]):
        assert_daemon_healthy(harness.current())
    assert not bad, (f"{len(bad)} of {len(outcomes)} calls of "
                     f"{_method_id(name)} crashed pjrtd or ended with "
                     f"UNKNOWN or an unjustified INTERNAL:\n"
                     + "\n".join(bad))
