"""Tenants: authentication by token, authorization, quotas, audit lines.

One daemon for the module, started with a tenants file of two users and
an admin whose tokens come from `pjrtctl token new`.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import signal
import subprocess
import tempfile
import threading
import time
from typing import Iterator

import grpc
import numpy as np
import pytest

import pjrt_client
from conftest import PJRTCTL, PJRTD, Daemon
from programs import ADD_ONE
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, buffer_pb2_grpc,
                                        executable_pb2, server_pb2,
                                        server_pb2_grpc, session_pb2,
                                        session_pb2_grpc, types_pb2)

QUOTA_BYTES = 1 << 20


# A few milliseconds of work on the host platform (about 3.5 ms on CI's
# kind of machine).
MATMUL = """HloModule matmul
ENTRY main {
  x = f32[512,512] parameter(0)
  ROOT y = f32[512,512] dot(x, x), lhs_contracting_dims={1},
      rhs_contracting_dims={0}
}
"""


def new_token() -> dict[str, str]:
    out = subprocess.run([str(PJRTCTL), "--json", "token", "new"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


class Tenants:
    def __init__(self, daemon: Daemon, tokens: dict[str, str],
                 tenants_file: pathlib.Path) -> None:
        self.daemon = daemon
        self.tenants_file = tenants_file
        self.tokens = tokens
        self.unix = daemon.addresses[0]
        self.tcp = daemon.addresses[1]

    def connect(self, who: str, **kwargs) -> pjrt_client.Client:
        return pjrt_client.connect(self.tcp, token=self.tokens[who],
                                   client_name=who, **kwargs)

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.tcp)

    @staticmethod
    def metadata(token: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {token}")]


@pytest.fixture(scope="module")
def tenants() -> Iterator[Tenants]:
    made = {name: new_token() for name in ("alice", "bob", "root")}
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        tenants_file = workdir / "tenants.toml"
        tenants_file.write_text(f"""
[[tenant]]
name = "alice"
role = "user"
token_sha256 = "{made['alice']['token_sha256']}"
[tenant.quota]
device_memory = {QUOTA_BYTES}
sessions = 3
executables = 2

[[tenant]]
name = "bob"
token_sha256 = "{made['bob']['token_sha256']}"
[tenant.quota]
compile_cache_entries = 2

[[tenant]]
name = "root"
role = "admin"
token_sha256 = "{made['root']['token_sha256']}"

[[tenant]]
name = "local"
uid = {os.getuid()}
""")
        tenants_file.chmod(0o600)
        d = Daemon(workdir, "--platform", "host", "--host-devices", "2",
                   "--tenants", str(tenants_file),
                   "--listen", f"unix://{workdir}/pjrtd.sock",
                   "--listen", "127.0.0.1:0")
        yield Tenants(d, {k: v["token"] for k, v in made.items()},
                      tenants_file)
        assert d.stop() == 0, d.log_path.read_text()


def test_a_call_without_a_credential_is_unauthenticated(tenants):
    with pytest.raises(pjrt_client.UnauthenticatedError,
                       match="admits tenants only"):
        pjrt_client.connect(tenants.tcp)
    stub = server_pb2_grpc.ServerStub(tenants.channel())
    with pytest.raises(grpc.RpcError) as e:
        stub.Ping(server_pb2.PingRequest(), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def every_client_rpc() -> list[tuple[str, bool, bool]]:
    """(path, client streaming, server streaming) of every client RPC."""
    rpcs = []
    for module in (server_pb2, session_pb2, buffer_pb2, executable_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                rpcs.append((f"/{service.full_name}/{method.name}",
                             method.client_streaming,
                             method.server_streaming))
    return rpcs


def call_raw(channel: grpc.Channel, rpc: tuple[str, bool, bool],
             metadata: list[tuple[str, str]]) -> None:
    """Calls `rpc` with an empty request (or one empty message)."""
    path, client_streaming, server_streaming = rpc
    kind = {(False, False): channel.unary_unary,
            (False, True): channel.unary_stream,
            (True, False): channel.stream_unary,
            (True, True): channel.stream_stream}[
                (client_streaming, server_streaming)]
    method = kind(path, request_serializer=lambda _: b"",
                  response_deserializer=lambda b: b)
    request = iter([b""]) if client_streaming else b""
    response = method(request, metadata=metadata, timeout=10)
    if server_streaming:
        list(response)


@pytest.mark.parametrize("credential", ["none", "wrong token", "malformed"])
def test_every_rpc_refuses_a_caller_without_a_valid_credential(
        tenants, credential):
    metadata = {"none": [],
                "wrong token": [("authorization", "Bearer " + "ab" * 32)],
                "malformed": [("authorization", "Basic dXNlcg==")]}[credential]
    channel = tenants.channel()
    rpcs = every_client_rpc()
    assert len(rpcs) >= 30
    for rpc in rpcs:
        with pytest.raises(grpc.RpcError) as e:
            call_raw(channel, rpc, metadata)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (
            rpc[0], e.value.details())


def test_a_wrong_token_is_unauthenticated_and_audited(tenants):
    with pytest.raises(pjrt_client.UnauthenticatedError,
                       match="matches no tenant"):
        pjrt_client.connect(tenants.tcp, token="0" * 64)
    log = tenants.daemon.log_path.read_text()
    assert 'audit event=auth_failed' in log
    assert 'reason="unknown token"' in log


def test_a_tenant_works_with_its_token_over_both_listeners(tenants):
    for address in (tenants.unix, tenants.tcp):
        with pjrt_client.connect(address, token=tenants.tokens["bob"]) as c:
            x = c.put(np.arange(4, dtype=np.float32))
            y = c.compile(ADD_ONE).execute([x])[0]
            np.testing.assert_array_equal(y.to_numpy(), [1, 2, 3, 4])
    assert 'audit event=session_opened tenant="bob"' in (
        tenants.daemon.log_path.read_text())


def test_another_tenants_session_and_handles_are_not_found(tenants):
    with tenants.connect("alice") as alice:
        x = alice.put(np.ones(4, np.float32))
        channel = tenants.channel()
        buffers = buffer_pb2_grpc.BuffersStub(channel)
        sessions = session_pb2_grpc.SessionsStub(channel)
        bob = tenants.metadata(tenants.tokens["bob"])
        calls = [
            lambda: buffers.DescribeBuffer(buffer_pb2.DescribeBufferRequest(
                session_id=alice.session_id, handle=x._handle),
                metadata=bob, timeout=10),
            lambda: buffers.DeleteBuffers(buffer_pb2.DeleteBuffersRequest(
                session_id=alice.session_id, handles=[x._handle]),
                metadata=bob, timeout=10),
            lambda: sessions.KeepAlive(session_pb2.KeepAliveRequest(
                session_id=alice.session_id), metadata=bob, timeout=10),
            lambda: sessions.CloseSession(session_pb2.CloseSessionRequest(
                session_id=alice.session_id), metadata=bob, timeout=10),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as e:
                call()
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            # Exactly as a session that does not exist.
            assert "is not open" in e.value.details()
        # Alice's data is untouched.
        np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))


SESSIONLESS = {"OpenSession", "ListSessions", "CloseSessionAsAdmin",
               "GetServerInfo", "ListDevices", "GetStats", "Ping",
               "GetClusterStatus"}


def request_naming(descriptor, session_id: int, handle: int) -> bytes:
    """A request of type `descriptor` whose session (and any handle) are
    the given ones."""
    from google.protobuf import symbol_database
    message = symbol_database.Default().GetSymbol(descriptor.full_name)()
    if "header" in descriptor.fields_by_name:  # UploadRequest
        message.header.session_id = session_id
    if "requests" in descriptor.fields_by_name:  # ExecuteBatch
        inner = message.requests.add(session_id=session_id,
                                     executable_handle=handle)
        inner.result_handles.append(handle)
    for field in descriptor.fields:
        if field.name == "session_id":
            setattr(message, field.name, session_id)
        elif field.name in ("handle", "executable_handle"):
            setattr(message, field.name, handle)
        elif field.name in ("handles", "result_handles"):
            getattr(message, field.name).append(handle)
    return message.SerializeToString()


def test_every_rpc_answers_another_tenants_session_as_absent(tenants):
    with tenants.connect("alice") as alice:
        x = alice.put(np.ones(4, np.float32))
        channel = tenants.channel()
        bob = tenants.metadata(tenants.tokens["bob"])
        checked = 0
        for module in (session_pb2, buffer_pb2, executable_pb2):
            for service in module.DESCRIPTOR.services_by_name.values():
                for method in service.methods:
                    if method.name in SESSIONLESS:
                        continue
                    body = request_naming(method.input_type,
                                          alice.session_id, x._handle)
                    path = f"/{service.full_name}/{method.name}"
                    kind = {(False, False): channel.unary_unary,
                            (False, True): channel.unary_stream,
                            (True, False): channel.stream_unary,
                            (True, True): channel.stream_stream}[
                        (method.client_streaming, method.server_streaming)]
                    call = kind(path, request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
                    request = (iter([body]) if method.client_streaming
                               else body)
                    with pytest.raises(grpc.RpcError) as e:
                        response = call(request, metadata=bob, timeout=10)
                        if method.server_streaming:
                            list(response)
                    assert e.value.code() == grpc.StatusCode.NOT_FOUND, (
                        path, e.value.code(), e.value.details())
                    checked += 1
        assert checked >= 20
        # Alice's buffer is untouched.
        np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))


def test_users_list_their_own_sessions_and_admins_all(tenants):
    with tenants.connect("alice"), tenants.connect("bob"):
        stub = session_pb2_grpc.SessionsStub(tenants.channel())

        def listed(who: str) -> set[str]:
            response = stub.ListSessions(
                session_pb2.ListSessionsRequest(),
                metadata=tenants.metadata(tenants.tokens[who]), timeout=10)
            return {s.tenant for s in response.sessions}

        assert listed("alice") == {"alice"}
        assert listed("bob") == {"bob"}
        assert listed("root") >= {"alice", "bob"}


def test_admin_calls_need_the_admin_role(tenants):
    with tenants.connect("alice") as alice:
        channel = tenants.channel()
        sessions = session_pb2_grpc.SessionsStub(channel)
        server = server_pb2_grpc.ServerStub(channel)
        bob = tenants.metadata(tenants.tokens["bob"])
        public_id = alice._session.public_id
        for call in (
                lambda: sessions.CloseSessionAsAdmin(
                    session_pb2.CloseSessionAsAdminRequest(
                        public_id=public_id), metadata=bob, timeout=10),
                lambda: server.GetStats(server_pb2.GetStatsRequest(),
                                        metadata=bob, timeout=10),
                lambda: server.GetClusterStatus(
                    server_pb2.GetClusterStatusRequest(), metadata=bob,
                    timeout=10)):
            with pytest.raises(grpc.RpcError) as e:
                call()
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "admin role" in e.value.details()
            assert "'bob'" in e.value.details()
        # The admin may read stats and close alice's session.
        root = tenants.metadata(tenants.tokens["root"])
        server.GetStats(server_pb2.GetStatsRequest(), metadata=root,
                        timeout=10)
        sessions.CloseSessionAsAdmin(
            session_pb2.CloseSessionAsAdminRequest(public_id=public_id),
            metadata=root, timeout=10)
        with pytest.raises(pjrt_client.NotFoundError):
            alice.put(np.ones(4, np.float32))
    assert 'audit event=admin_close admin="root"' in (
        tenants.daemon.log_path.read_text())


def test_pjrtctl_closes_a_session_as_a_tenant_of_the_admin_role(
        tenants, tmp_path):
    def close(who, public_id, *extra):
        token = tmp_path / f"{who}.token"
        token.write_text(tenants.tokens[who] + "\n")
        return subprocess.run(
            [str(PJRTCTL), "--address", tenants.tcp, "--token-file",
             str(token), "sessions", "--close", str(public_id), *extra],
            capture_output=True, text=True, timeout=60)

    with tenants.connect("alice") as alice:
        public_id = alice._session.public_id
        # No admin token file where pjrtctl looks by default: the caller's
        # role decides. bob's is not admin.
        refused = close("bob", public_id)
        assert refused.returncode == 1
        assert "admin role" in refused.stderr
        assert "no admin token was sent" in refused.stderr
        alice.ping()
        # A token file named on the command line must be there.
        empty = tmp_path / "empty.token"
        empty.write_text("")
        refused = close("root", public_id, "--admin-token-file", str(empty))
        assert refused.returncode == 1
        assert f"the admin token file {empty} is empty" in refused.stderr
        alice.ping()
        closed = close("root", public_id)
        assert closed.returncode == 0, closed.stderr
        assert f"closed session {public_id}" in closed.stdout
        with pytest.raises(pjrt_client.NotFoundError):
            alice.put(np.ones(4, np.float32))


def test_memory_quota_refuses_the_tenant_and_not_the_others(tenants):
    with tenants.connect("alice", shared_memory=False) as alice, \
            tenants.connect("bob", shared_memory=False) as bob:
        half = np.zeros(QUOTA_BYTES // 8, np.float32)  # a half of the quota
        kept = [alice.put(half, device=0), alice.put(half, device=0)]
        with pytest.raises(pjrt_client.ResourceExhaustedError) as e:
            alice.put(half, device=0)
        message = str(e.value)
        assert "quota.device_memory" in message
        assert str(QUOTA_BYTES) in message and "alice" in message
        # The quota is per device: device 1 still has room.
        alice.put(half, device=1)
        # Bob is not limited by alice's quota.
        for _ in range(4):
            bob.put(half, device=0)
        # Freed memory counts no more.
        kept[0].delete()
        alice.put(half, device=0)
    assert 'audit event=quota_refused tenant="alice"' in (
        tenants.daemon.log_path.read_text())


def test_an_upload_in_flight_counts_against_the_quota(tenants):
    """An upload's memory is the tenant's from its header on, not from its
    last byte: uploads left hanging cannot hold memory the quota does not
    see."""
    with tenants.connect("alice", shared_memory=False) as alice, \
            tenants.connect("root") as admin:
        token = tenants.tokens["alice"]
        buffers = buffer_pb2_grpc.BuffersStub(tenants.channel())
        release = threading.Event()
        size = QUOTA_BYTES * 3 // 4

        def stream():
            yield buffer_pb2.UploadRequest(header=buffer_pb2.UploadHeader(
                session_id=alice._session.id, device_id=0,
                shape=types_pb2.ArrayShape(dtype=types_pb2.DTYPE_U8,
                                           dims=[size])))
            yield buffer_pb2.UploadRequest(chunk=b"\0" * 1024)
            release.wait(timeout=60)
            yield buffer_pb2.UploadRequest(chunk=b"\0" * (size - 1024))

        def in_use() -> int:
            return admin.stats()["devices"][0]["bytes_in_use"]
        before = in_use()
        upload = buffers.Upload.future(
            stream(), metadata=tenants.metadata(token), timeout=60)
        half = np.zeros(QUOTA_BYTES // 8, np.float32)  # half of the quota
        # Once the daemon holds the upload's memory (its header arrived),
        # the quota counts it.
        deadline = time.monotonic() + 20
        while in_use() < before + size:
            assert not upload.done(), upload.exception()
            assert time.monotonic() < deadline, "the upload took no memory"
            time.sleep(0.01)
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="quota.device_memory"):
            alice.put(half, device=0)
        # Another device's memory is not this upload's.
        alice.put(half, device=1).delete()
        release.set()
        assert upload.result(timeout=30).handle != 0
        # Now its buffer counts: still no room for a half, room for an
        # eighth.
        with pytest.raises(pjrt_client.ResourceExhaustedError):
            alice.put(half, device=0)
        alice.put(np.zeros(QUOTA_BYTES // 32, np.float32), device=0)


# A loop whose state (2 MiB, twice alice's quota) lives in the run's
# scratch memory; its result is one float.
BIG_STATE = """HloModule big_state
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
body {
  s = (s32[], f32[524288]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[524288] get-tuple-element(s), index=1
  one = f32[524288] broadcast(f32[] constant(1)), dimensions={}
  y = f32[524288] add(x, one)
  j = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], f32[524288]) tuple(j, y)
}
cond {
  s = (s32[], f32[524288]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT c = pred[] compare(i, s32[] constant(3)), direction=LT
}
ENTRY e {
  z = f32[524288] broadcast(f32[] constant(0)), dimensions={}
  w = (s32[], f32[524288]) while((s32[], f32[524288]) tuple(
      s32[] constant(0), z)), condition=cond, body=body
  x = f32[524288] get-tuple-element(w), index=1
  ROOT r = f32[] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add
}"""


def test_a_runs_scratch_memory_counts_against_the_quota(tenants):
    """Memory a run takes for its intermediate values is the tenant's while
    the run lasts: a run needing more than the quota is refused up front,
    whatever the size of its results."""
    with tenants.connect("alice", shared_memory=False) as alice, \
            tenants.connect("bob", shared_memory=False) as bob:
        with pytest.raises(pjrt_client.ResourceExhaustedError) as e:
            alice.compile(BIG_STATE).execute([], device=0)
        assert "quota.device_memory" in str(e.value)
        (total,) = bob.compile(BIG_STATE).execute([], device=0)
        assert float(total.to_numpy()) == 3 * 524288
        # Nothing of the refused run stays counted.
        alice.put(np.zeros(QUOTA_BYTES // 4, np.float32), device=0)


def test_session_and_executable_quotas(tenants):
    opened = [tenants.connect("alice") for _ in range(3)]
    try:
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="quota.sessions = 3"):
            tenants.connect("alice")
        with tenants.connect("bob"):
            pass
        c = opened[0]
        kept = [c.compile(ADD_ONE), c.compile(ADD_ONE)]
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="quota.executables = 2"):
            c.compile(ADD_ONE)
        kept[0].delete()
        c.compile(ADD_ONE)
    finally:
        for c in opened:
            c.close()
    # Closed sessions give their quota back.
    with tenants.connect("alice"):
        pass


def test_pjrtctl_takes_a_token_file(tenants, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(tenants.tokens["root"] + "\n")
    token_file.chmod(0o600)
    out = subprocess.run(
        [str(PJRTCTL), "--address", tenants.tcp, "--token-file",
         str(token_file), "--json", "sessions"],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    refused = subprocess.run(
        [str(PJRTCTL), "--address", tenants.tcp, "info"],
        capture_output=True, text=True, env={**os.environ, "PJRTD_TOKEN": ""})
    assert refused.returncode != 0
    assert "UNAUTHENTICATED" in refused.stdout + refused.stderr


def test_a_tenants_file_readable_by_others_is_refused(tmp_path):
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text('[[tenant]]\nname = "a"\ntoken_sha256 = "%s"\n'
                            % ("0" * 64))
    tenants_file.chmod(0o644)
    out = subprocess.run([str(PJRTD), "--tenants", str(tenants_file),
                          "--listen", f"unix://{tmp_path}/s.sock"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "chmod 600" in out.stderr


def test_a_public_plaintext_listener_is_refused_without_insecure_tcp(tmp_path):
    out = subprocess.run([str(PJRTD), "--listen", "0.0.0.0:0"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "--insecure-tcp" in out.stderr


def test_sighup_reloads_the_tenants_file_and_keeps_sessions(tenants):
    carol = new_token()
    with tenants.connect("bob") as bob:
        x = bob.put(np.ones(4, np.float32))
        with pytest.raises(pjrt_client.UnauthenticatedError):
            pjrt_client.connect(tenants.tcp, token=carol["token"])
        original = tenants.tenants_file.read_text()
        tenants.tenants_file.write_text(
            original + f"""
[[tenant]]
name = "carol"
token_sha256 = "{carol['token_sha256']}"
""")
        try:
            tenants.daemon.process.send_signal(signal.SIGHUP)
            # The daemon reloads when it takes the signal: poll for that.
            deadline = time.monotonic() + 30
            while True:
                try:
                    pjrt_client.connect(tenants.tcp,
                                        token=carol["token"]).close()
                    break
                except pjrt_client.UnauthenticatedError:
                    assert time.monotonic() < deadline, "not reloaded"
                    time.sleep(0.05)
            # Bob's session and data survived the reload.
            np.testing.assert_array_equal(x.to_numpy(), np.ones(4))
        finally:
            tenants.tenants_file.write_text(original)
            tenants.daemon.process.send_signal(signal.SIGHUP)
    assert "audit event=tenants_reloaded" in (
        tenants.daemon.log_path.read_text())


def flood(address: str, token: str, completed, stop, threads: int,
          total: int) -> None:
    """Bob's load, in a process of its own (so that the measuring process's
    threads do not wait on this one's interpreter lock): `threads` calls
    at a time, `total` in all, each counted in `completed` once done."""
    import sys
    sys.setswitchinterval(1e-4)
    with pjrt_client.connect(address, token=token) as bob:
        x = bob.put(np.ones((512, 512), np.float32))
        matmul = bob.compile(MATMUL)
        submitted = threading.Semaphore(total)

        def runs() -> None:
            while not stop.is_set() and submitted.acquire(blocking=False):
                matmul.execute([x], wait=True)[0].delete()
                with completed.get_lock():
                    completed.value += 1

        pool = [threading.Thread(target=runs) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()


def test_a_tenant_that_queues_many_runs_does_not_starve_another(tenants):
    """Bob keeps 32 executions queued (1,000 in all); root's one run
    completes after a few of bob's, not after his whole queue. Measured as
    the count of bob's runs that complete while root's is queued and
    running, not as time."""
    context = multiprocessing.get_context("spawn")
    completed = context.Value("q", 0)
    stop = context.Event()
    bob = context.Process(target=flood, args=(
        tenants.tcp, tenants.tokens["bob"], completed, stop, 32, 1000))
    bob.start()
    try:
        with tenants.connect("root") as root:
            x = root.put(np.ones((512, 512), np.float32))
            matmul = root.compile(MATMUL)
            deadline = time.monotonic() + 60
            while completed.value < 64:  # bob's queue is full by now
                assert bob.is_alive() and time.monotonic() < deadline
                time.sleep(0.01)
            before = completed.value
            matmul.execute([x], wait=True)
            during = completed.value - before
            still_running = bob.is_alive()
    finally:
        stop.set()
        bob.join(60)
    assert bob.exitcode == 0
    # Bob still had runs queued when root's finished: it did not just
    # wait for his queue to drain.
    assert still_running
    assert during <= 10, f"{during} of bob's runs completed first"


ZEROS = """HloModule zeros
ENTRY main {
  zero = f32[] constant(0)
  ROOT z = f32[65536] broadcast(zero), dimensions={}
}
"""


def test_memory_freed_by_one_tenant_never_shows_in_anothers_buffers(
        tenants):
    """Bob's buffers of the size alice just freed, made every way a client
    can make one, show bob's contents, never alice's bytes."""
    secret = np.full(65536, 1234.5, np.float32)
    with tenants.connect("root", shared_memory=False) as alice, \
            tenants.connect("bob", shared_memory=False) as bob:
        zeros = bob.compile(ZEROS)
        mine = np.arange(65536, dtype=np.float32)
        makers = [
            lambda: zeros.execute([])[0],
            lambda: bob.put(mine, device=0),
            lambda: bob.put(mine, device=1).copy_to(0),
        ]
        for make in makers:
            for _ in range(4):
                alice.put(secret, device=0).delete()
                got = make().to_numpy()
                assert not np.any(got == 1234.5)


def test_tenants_do_not_share_compiled_programs(tenants):
    """A cache hit would tell bob that root compiled the same program."""
    program = ADD_ONE.replace("add_one", "cache_probe")
    with tenants.connect("root") as root, tenants.connect("bob") as bob:
        assert not root.compile(program).cache_hit
        assert root.compile(program).cache_hit
        assert not bob.compile(program).cache_hit
        assert bob.compile(program).cache_hit


def test_a_local_process_is_the_tenant_of_its_uid_on_the_unix_socket(
        tenants):
    with pjrt_client.connect(tenants.unix, client_name="by-uid") as c:
        np.testing.assert_array_equal(
            c.put(np.arange(3, dtype=np.float32)).to_numpy(), [0, 1, 2])
        # Its shared-memory regions are registered by a process of its uid.
        big = np.arange(1 << 19, dtype=np.float32)
        np.testing.assert_array_equal(c.put(big).to_numpy(), big)
        assert c.uses_shared_memory
    assert 'event=session_opened tenant="local"' in (
        tenants.daemon.log_path.read_text())
    # Over TCP a uid proves nothing.
    with pytest.raises(pjrt_client.UnauthenticatedError):
        pjrt_client.connect(tenants.tcp)


def test_a_tenant_keeps_its_share_of_the_compile_cache(tenants):
    programs = [ADD_ONE.replace("add_one", f"share_{i}") for i in range(3)]
    with tenants.connect("bob") as bob:
        for program in programs:
            bob.compile(program)
        # Bob's share is two programs: the oldest of his went.
        assert bob.compile(programs[2]).cache_hit
        assert not bob.compile(programs[0]).cache_hit
