"""The fast paths against a real daemon: shared-memory regions (lifetime,
bounds, sessions, registration checks, the fallback to streaming) and
pipelined runs on the ordered execution stream."""

from __future__ import annotations

import fcntl
import gc
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import pjrt_client
from pjrt_client import _shm
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, executable_pb2,
                                        types_pb2)
from conftest import PLATFORM, Daemon
from programs import ADD_ONE


MIB = 1 << 20


def daemon_maps(daemon: Daemon, name: str) -> int:
    """How many of the daemon's mappings come from memfds called `name`."""
    maps = pathlib.Path(f"/proc/{daemon.process.pid}/maps").read_text()
    return maps.count(f"/memfd:{name} ")


@pytest.fixture
def local(daemon: Daemon):
    with pjrt_client.connect(daemon.addresses[0],
                             client_name="fast-paths") as c:
        yield c


# --- regions -------------------------------------------------------------


def test_the_daemon_offers_a_region_socket_beside_its_own(local, daemon):
    assert "buffers.shared_memory" in local.info()["capabilities"]
    # A path socket next to the main one, with its permissions: who may not
    # reach the daemon may not register regions either.
    main = daemon.addresses[0].removeprefix("unix://")
    assert local._info.region_socket == main + ".regions"
    region_socket = os.stat(local._info.region_socket)
    assert stat.S_ISSOCK(region_socket.st_mode)
    assert stat.S_IMODE(region_socket.st_mode) == \
        stat.S_IMODE(os.stat(main).st_mode)


@pytest.mark.parametrize("zero_copy", [False, True])
def test_arrays_in_a_region_go_both_ways_bit_exact(local, zero_copy):
    region = local.create_region(8 * MIB, "pytest-roundtrip")
    src = region.array((512, 1024), np.float32)
    src[...] = np.random.default_rng(1).standard_normal(src.shape)
    buffer = local.put(src, zero_copy=zero_copy)
    assert buffer.shape == (512, 1024) and buffer.dtype == np.float32
    out = region.array((512, 1024), np.float32, offset=4 * MIB)
    assert buffer.to_numpy(out=out) is out
    np.testing.assert_array_equal(out, src)
    # A plain read agrees.
    np.testing.assert_array_equal(buffer.to_numpy(), src)
    buffer.delete()
    region.unregister()


def test_a_copied_upload_lets_the_slice_be_reused_at_once(local):
    region = local.create_region(MIB, "pytest-reuse")
    a = region.array(1024, np.int32)
    a[...] = 7
    first = local.put(a)
    a[...] = 9  # after the call returns the daemon has its own copy
    second = local.put(a)
    assert (first.to_numpy() == 7).all()
    assert (second.to_numpy() == 9).all()


def test_a_zero_copy_buffer_is_the_region_itself(local):
    region = local.create_region(MIB, "pytest-alias")
    a = region.array(256, np.float32)
    a[...] = 1
    buffer = local.put(a, zero_copy=True)
    a[...] = 5  # the contract says not to; it shows there was no copy
    assert (buffer.to_numpy() == 5).all()


def test_unregister_while_in_use_is_refused(local):
    region = local.create_region(MIB, "pytest-in-use")
    a = region.array(1024, np.float32)
    buffer = local.put(a, zero_copy=True)
    listed = {r["handle"]: r for r in local.regions()}
    assert listed[region.handle]["uses"] == 1
    assert listed[region.handle]["nbytes"] == MIB
    assert listed[region.handle]["name"] == "pytest-in-use"
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match=r"in use by 1 transfer\(s\) or zero-copy"):
        region.unregister()
    assert region.is_registered
    buffer.delete()
    region.unregister()
    assert not region.is_registered
    assert region.handle not in {r["handle"] for r in local.regions()}


def test_a_region_stays_mapped_for_its_zero_copy_buffers(daemon):
    name = "pytest-outlives"
    with pjrt_client.connect(daemon.addresses[0]) as c:
        region = c.create_region(MIB, name)
        a = region.array(1024, np.float32)
        a[...] = 3
        buffer = c.put(a, zero_copy=True)
        other = c.put(np.ones(4, np.float32))
        (y,) = c.compile(ADD_ONE).execute([other])
        assert daemon_maps(daemon, name) == 1
    # The session closed: its buffers, and with them the mapping, went.
    gc.collect()
    assert daemon_maps(daemon, name) == 0
    del buffer, y


def test_closing_the_session_frees_its_regions(daemon):
    name = "pytest-close"
    before = pjrt_client.connect(daemon.addresses[0])
    baseline = before.stats()
    with pjrt_client.connect(daemon.addresses[0]) as c:
        c.create_region(2 * MIB, name)
        c.create_region(3 * MIB, name)
        stats = before.stats()
        assert stats["region_count"] == baseline["region_count"] + 2
        assert stats["region_bytes"] == baseline["region_bytes"] + 5 * MIB
        assert daemon_maps(daemon, name) == 2
    stats = before.stats()
    assert stats["region_count"] == baseline["region_count"]
    assert stats["region_bytes"] == baseline["region_bytes"]
    assert daemon_maps(daemon, name) == 0
    before.close()


def test_out_of_bounds_offsets_are_rejected(local):
    region = local.create_region(MIB, "pytest-bounds")
    stub, sid = local._session.buffers, local._session.id
    shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_F32, dims=[1024])
    for offset in (MIB - 4095, MIB, -1, 1 << 62):
        with pytest.raises(pjrt_client.InvalidArgumentError,
                           match=f"offset {offset} \\+ 4096 bytes lies "
                                 f"outside the region of {MIB} bytes"):
            pjrt_client._client._call(
                stub.UploadFromRegion,
                buffer_pb2.UploadFromRegionRequest(
                    session_id=sid, region_handle=region.handle,
                    offset=offset, shape=shape))
    buffer = local.put(np.zeros(1024, np.float32))
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="lies outside the region"):
        pjrt_client._client._call(
            stub.DownloadToRegion,
            buffer_pb2.DownloadToRegionRequest(
                session_id=sid, handle=buffer.handle,
                region_handle=region.handle, offset=MIB - 100))
    # The largest offset that fits works.
    info = pjrt_client._client._call(
        stub.UploadFromRegion,
        buffer_pb2.UploadFromRegionRequest(
            session_id=sid, region_handle=region.handle,
            offset=MIB - 4096, shape=shape))
    assert info.size_bytes == 4096
    # Nothing of the refused calls holds the region.
    assert {r["handle"]: r["uses"] for r in local.regions()}[
        region.handle] == 0
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="does not fit the region"):
        region.array(MIB, np.float32)


def test_a_region_of_another_session_is_unknown(daemon, local):
    region = local.create_region(MIB, "pytest-theirs")
    with pjrt_client.connect(daemon.addresses[0]) as other:
        shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_U8, dims=[16])
        with pytest.raises(pjrt_client.NotFoundError,
                           match=f"region handle {region.handle:#x} is not "
                                 f"a region of this session"):
            pjrt_client._client._call(
                other._session.buffers.UploadFromRegion,
                buffer_pb2.UploadFromRegionRequest(
                    session_id=other._session.id,
                    region_handle=region.handle, offset=0, shape=shape))
        with pytest.raises(pjrt_client.NotFoundError):
            pjrt_client._client._call(
                other._session.buffers.UnregisterRegion,
                buffer_pb2.UnregisterRegionRequest(
                    session_id=other._session.id,
                    region_handle=region.handle))
    # Still ours.
    assert region.handle in {r["handle"] for r in local.regions()}


def register(local, fd: int, size: int, session_id: int | None = None):
    return _shm.register_memfd(
        local._info.region_socket,
        local._session.id if session_id is None else session_id, fd, size,
        "pytest-raw")


def test_registration_refuses_what_could_hurt_the_daemon(local, tmp_path):
    # Not sealed: the client could shrink it under the daemon's mapping.
    fd = os.memfd_create("pytest-unsealed", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, MIB)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="not sealed against shrinking.*F_SEAL_SHRINK"):
        register(local, fd, MIB)
    # Sealed, but smaller than claimed.
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=f"size_bytes is {2 * MIB} but its memfd holds "
                             f"only {MIB} bytes"):
        register(local, fd, 2 * MIB)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="size_bytes is 0; it must be positive"):
        register(local, fd, 0)
    # An unknown session.
    with pytest.raises(pjrt_client.NotFoundError):
        register(local, fd, MIB, session_id=12345)
    os.close(fd)
    # A plain file is not a memfd.
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * 4096)
    with open(path, "rb") as f:
        with pytest.raises(pjrt_client.InvalidArgumentError,
                           match="not a memfd"):
            register(local, f.fileno(), 4096)
    # The daemon still serves.
    np.testing.assert_array_equal(
        local.put(np.arange(3)).to_numpy(), np.arange(3))


def test_a_registration_without_a_descriptor_is_refused(local):
    import socket
    request = buffer_pb2.RegisterRegionRequest(session_id=local._session.id,
                                               size_bytes=MIB)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(_shm._socket_address(local._info.region_socket))
        s.send(request.SerializeToString())
        reply = buffer_pb2.RegisterRegionResponse.FromString(s.recv(4096))
    assert reply.region_handle == 0
    assert "exactly one file descriptor" in reply.error_message


@pytest.mark.parametrize("shared_memory", [True, False])
def test_large_transfers_use_shared_memory_only_when_allowed(
        daemon, shared_memory):
    with pjrt_client.connect(daemon.addresses[1],  # TCP, same host
                             shared_memory=shared_memory) as c:
        data = np.random.default_rng(2).integers(
            0, 1 << 30, size=(3 * MIB) // 4, dtype=np.int32)
        buffer = c.put(data)
        np.testing.assert_array_equal(buffer.to_numpy(), data)
        assert c.uses_shared_memory is shared_memory
        staging = [r for r in c.regions() if r["name"] == "pjrt-staging"]
        assert len(staging) == (1 if shared_memory else 0)


# --- put() keeps its staging region as the buffer --------------------------

BIG = _shm.ADOPT_THRESHOLD
ADD_ONE_BIG = ("HloModule add_one_big, "
               "input_output_alias={ {}: (0, {}, may-alias) }\n") + f"""
ENTRY main {{
  x = f32[{BIG // 4}] parameter(0)
  one = f32[] constant(1)
  ones = f32[{BIG // 4}] broadcast(one), dimensions={{}}
  ROOT y = f32[{BIG // 4}] add(x, ones)
}}
"""


def random_bytes(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, BIG, dtype=np.uint8)


def adopted(c) -> list[int]:
    """The handles of the staging regions buffers keep."""
    return [region.handle for region, _ in c._staging._adopted]


def uses(c, handle: int) -> int:
    return {r["handle"]: r["uses"] for r in c.regions()}[handle]


def staging_regions(c) -> set[int]:
    return {r["handle"] for r in c.regions() if r["name"] == "pjrt-staging"}


@pytest.mark.skipif(PLATFORM != "host", reason="the daemon aliases host "
                    "memory only on the host platform")
def test_a_large_put_is_one_copy_into_a_region_the_buffer_keeps(daemon):
    before = daemon_maps(daemon, "pjrt-staging")
    with pjrt_client.connect(daemon.addresses[0]) as c:
        in_use = c.stats()["devices"][0]["bytes_in_use"]
        data = random_bytes(1)
        buffer = c.put(data)
        (region,) = adopted(c)
        assert uses(c, region) == 1
        # Counted as memory of the device, though it lives in the region.
        assert c.stats()["devices"][0]["bytes_in_use"] == in_use + BIG
        np.testing.assert_array_equal(buffer.to_numpy(), data)
        buffer.delete()
        assert uses(c, region) == 0
        assert c.stats()["devices"][0]["bytes_in_use"] == in_use
        # A loop of puts and deletes keeps reusing the regions it has (the
        # download took one too): no new one.
        regions = staging_regions(c)
        for seed in range(2, 6):
            data = random_bytes(seed)
            buffer = c.put(data)
            assert len(adopted(c)) == 1
            assert set(adopted(c)) <= regions
            np.testing.assert_array_equal(buffer.to_numpy(), data)
            buffer.delete()
        assert staging_regions(c) == regions
    gc.collect()
    assert daemon_maps(daemon, "pjrt-staging") == before


@pytest.mark.skipif(PLATFORM != "host", reason="the daemon aliases host "
                    "memory only on the host platform")
def test_kept_buffers_regions_are_not_written_again(local):
    data = [random_bytes(seed) for seed in range(10, 16)]
    kept = [local.put(d) for d in data]
    # At most two regions are kept by buffers at once; the rest of the
    # puts copied through one more, which stays warm for the next.
    assert len(adopted(local)) == 2
    assert len(staging_regions(local)) == 3
    for handle in adopted(local):
        assert uses(local, handle) == 1
    for buffer, d in zip(kept, data):
        np.testing.assert_array_equal(buffer.to_numpy(), d)
    # Dropped without delete(): its region comes back once the daemon has
    # freed the buffer, which the next put makes sure of.
    first = adopted(local)[0]
    regions = staging_regions(local)
    del kept[0]
    gc.collect()
    again = local.put(data[0])
    assert len(adopted(local)) == 2  # so the first came back
    assert uses(local, first) == (1 if first in adopted(local) else 0)
    assert staging_regions(local) == regions
    np.testing.assert_array_equal(again.to_numpy(), data[0])
    for buffer, d in zip(kept, data[1:]):
        np.testing.assert_array_equal(buffer.to_numpy(), d)


def test_a_donated_region_stays_with_the_result(local):
    exe = local.compile(ADD_ONE_BIG)
    assert exe.donated_parameters == [0]
    x = np.random.default_rng(3).standard_normal(BIG // 4, dtype=np.float32)
    (y,) = exe.execute([local.put(x)])
    # The argument's memory may be the result's now: a put must not write
    # it while the result lives.
    other = np.full(BIG // 4, 7, np.float32)
    z = local.put(other)
    np.testing.assert_array_equal(y.to_numpy(), x + 1)
    np.testing.assert_array_equal(z.to_numpy(), other)
    y.delete()
    w = local.put(x)
    np.testing.assert_array_equal(w.to_numpy(), x)
    np.testing.assert_array_equal(z.to_numpy(), other)


def test_the_memory_limit_bounds_buffers_kept_in_regions(tmp_path):
    d = Daemon(tmp_path, "--platform", "host", "--host-devices", "1",
               "--memory-limit", str(BIG + BIG // 2),
               "--listen", f"unix://{tmp_path}/p.sock")
    try:
        with pjrt_client.connect(d.addresses[0]) as c:
            first = c.put(random_bytes(20))  # kept in its region
            assert c.stats()["devices"][0]["bytes_in_use"] == BIG
            # Copied into device memory (the one region is kept): the
            # allocator has no room.
            with pytest.raises(pjrt_client.ResourceExhaustedError,
                               match=f"cannot allocate {BIG} bytes"):
                c.put(random_bytes(21))
            first.delete()
            small = c.put(np.zeros(BIG // 2 + MIB, np.uint8))  # copied
            # Kept in a region again: the charge has no room either.
            with pytest.raises(pjrt_client.ResourceExhaustedError,
                               match=f"cannot hold {BIG} bytes"):
                c.put(random_bytes(22))
            small.delete()
            data = random_bytes(23)
            np.testing.assert_array_equal(c.put(data).to_numpy(), data)
            assert c.stats()["devices"][0]["bytes_in_use"] == 0
    finally:
        assert d.stop() == 0


def test_small_arrays_never_touch_shared_memory(local):
    local.put(np.ones(100, np.float32)).to_numpy()
    assert local.regions() == []


def test_a_daemon_without_shared_memory_streams(tmp_path):
    d = Daemon(tmp_path, "--platform", "host", "--no-shared-memory",
               "--listen", f"unix://{tmp_path}/p.sock")
    try:
        with pjrt_client.connect(d.addresses[0]) as c:
            assert c._info.region_socket == ""
            assert "buffers.shared_memory" not in c.info()["capabilities"]
            with pytest.raises(pjrt_client.UnavailableError,
                               match="--no-shared-memory"):
                c.create_region(MIB)
            data = np.arange(MIB, dtype=np.float32)
            np.testing.assert_array_equal(c.put(data).to_numpy(), data)
            assert not c.uses_shared_memory
    finally:
        assert d.stop() == 0


def test_a_client_that_cannot_reach_the_region_socket_streams(local):
    # What a client on another host meets: the daemon names a socket that
    # does not exist where the client runs.
    local._info.region_socket = "@pjrtd-regions-elsewhere-%d" % os.getpid()
    data = np.arange(2 * MIB, dtype=np.uint8)
    buffer = local.put(data)
    np.testing.assert_array_equal(buffer.to_numpy(), data)
    assert not local.uses_shared_memory
    with pytest.raises(pjrt_client.UnavailableError,
                       match="not on this host"):
        local.create_region(MIB)


REMOTE_CLIENT = """
import sys
import numpy as np
import pjrt_client
with pjrt_client.connect(sys.argv[1]) as c:
    data = np.arange(4 << 20, dtype=np.uint8)
    np.testing.assert_array_equal(c.put(data).to_numpy(), data)
    print("shared" if c.uses_shared_memory else "streamed")
"""


@pytest.mark.skipif(shutil.which("unshare") is None
                    or subprocess.run(["unshare", "-rn", "true"]).returncode
                    != 0, reason="cannot make a network namespace here")
def test_a_client_in_another_network_namespace_shares_memory(daemon):
    # The unix socket path reaches the daemon from another network
    # namespace, and so does the region socket beside it: the client is on
    # the same host, and shares memory with the daemon. (An abstract socket,
    # used when the daemon has no unix socket, would not be reachable.)
    result = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", REMOTE_CLIENT,
         daemon.addresses[0]],
        capture_output=True, text=True, timeout=120, env=os.environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "shared"


def test_the_cpp_client_moves_a_npy_through_shared_memory(daemon, tmp_path):
    # pjrtctl put/get use the C++ client's automatic path.
    data = np.random.default_rng(3).standard_normal(MIB).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    pjrtctl = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", "build")) / \
        "bin" / "pjrtctl"
    put = subprocess.run(
        [str(pjrtctl), "--address", daemon.addresses[0], "--json", "put",
         str(tmp_path / "x.npy"), "--keep"],
        capture_output=True, text=True, timeout=60)
    assert put.returncode == 0, put.stderr
    import json
    doc = json.loads(put.stdout)
    get = subprocess.run(
        [str(pjrtctl), "--address", daemon.addresses[0], "get",
         str(doc["handle"]), "--session", str(doc["session"]),
         "-o", str(tmp_path / "y.npy")],
        capture_output=True, text=True, timeout=60)
    assert get.returncode == 0, get.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), data)


# --- pipelined runs -------------------------------------------------------


def test_a_pipelined_loop_of_dependent_steps_is_exact(local):
    step = local.compile(ADD_ONE)
    x = local.put(np.arange(4, dtype=np.float32))
    for _ in range(1000):
        (x,) = step.execute([x], pipelined=True)
    np.testing.assert_array_equal(x.to_numpy(),
                                  np.arange(4, dtype=np.float32) + 1000)


def test_pipelined_runs_leave_no_buffers_behind(daemon):
    with pjrt_client.connect(daemon.addresses[0]) as c:
        step = c.compile(ADD_ONE)
        x = c.put(np.zeros(4, np.float32))
        for _ in range(500):
            (x,) = step.execute([x], pipelined=True)
        x.block_until_ready()
        c.synchronize()
        # Steps dropped while the stream ran are deleted in batches once
        # they have run (the last batch on its way as the acknowledgement
        # that covers it arrives); at most one batch can then still be
        # waiting. Without the deletions all 500 would be there.

        def session_buffers():
            return next(s for s in daemon_sessions(c)
                        if s["public_id"] == c.session_id)["buffers"]
        deadline = time.monotonic() + 10
        while session_buffers() > 1 + 64 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert session_buffers() <= 1 + 64


def daemon_sessions(c):
    from pjrt_client._proto.pjrt.v1 import session_pb2, session_pb2_grpc
    stub = session_pb2_grpc.SessionsStub(c._channel)
    response = stub.ListSessions(session_pb2.ListSessionsRequest())
    return [{"public_id": s.public_id, "buffers": s.buffer_count}
            for s in response.sessions]


def test_an_error_in_a_pipelined_run_reaches_the_first_read(local):
    step = local.compile(ADD_ONE)
    x = local.put(np.zeros(4, np.float32))
    (good,) = step.execute([x], pipelined=True)
    wrong = local.put(np.zeros(5, np.float32))
    (bad,) = step.execute([wrong], pipelined=True)
    (later,) = step.execute([bad], pipelined=True)
    # The run before the bad one stands.
    np.testing.assert_array_equal(good.to_numpy(), np.ones(4, np.float32))
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"stream request 1: .*argument 0"):
        later.to_numpy()
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="stream request 1"):
        bad.block_until_ready()
    # The next pipelined run reports the failure once, then a new stream
    # takes over.
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="stream request 1"):
        step.execute([good], pipelined=True)
    (again,) = step.execute([good], pipelined=True)
    np.testing.assert_array_equal(again.to_numpy(), np.full(4, 2, np.float32))


def test_pipelined_results_feed_plain_calls(local):
    step = local.compile(ADD_ONE)
    (a,) = step.execute([np.zeros(4, np.float32)], pipelined=True)
    (b,) = step.execute([a])  # waits for the stream to make `a`
    np.testing.assert_array_equal(b.to_numpy(), np.full(4, 2, np.float32))
    c = a.copy_to(0)
    np.testing.assert_array_equal(c.to_numpy(), np.ones(4, np.float32))
    a.delete()
    (d,) = step.execute([b], pipelined=True)
    del b  # dropped while its consumer may still be queued
    np.testing.assert_array_equal(d.to_numpy(), np.full(4, 3, np.float32))


def test_result_handles_chosen_by_the_client_are_checked(local):
    step = local.compile(ADD_ONE)
    x = local.put(np.zeros(4, np.float32))
    stub, sid = local._session.executables, local._session.id

    def run(handles, **options):
        return pjrt_client._client._call(
            stub.Execute, executable_pb2.ExecuteRequest(
                session_id=sid, executable_handle=step.handle,
                argument_handles=[x.handle], device_id=0,
                result_handles=handles,
                options=executable_pb2.ExecuteOptions(**options)))

    response = run([0x1234567])
    assert response.results[0].handle == 0x1234567
    result = local.buffer(0x1234567)  # owns it now
    np.testing.assert_array_equal(result.to_numpy(), np.ones(4, np.float32))
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"result handle 0 \(0x1234567\) is already in "
                             r"use"):
        run([0x1234567])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=f"result handle 0 \\({x.handle:#x}\\) is "
                             f"already in use"):
        run([x.handle])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="result handle 0 is 0"):
        run([0])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="has 1 results; got 2 result_handles"):
        run([5, 6])
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="keep_tuple_result"):
        run([7], keep_tuple_result=True)


def test_a_streamed_request_without_result_handles_ends_the_stream(local):
    step = local.compile(ADD_ONE)
    x = local.put(np.zeros(4, np.float32))
    request = executable_pb2.ExecuteRequest(
        session_id=local._session.id, executable_handle=step.handle,
        argument_handles=[x.handle], device_id=0)
    call = local._session.executables.ExecuteStream(iter([request]))
    with pytest.raises(Exception) as info:
        list(call)
    assert "stream request 0: a streamed Execute must carry result_handles" \
        in str(info.value)


def test_an_open_execution_stream_does_not_hold_up_shutdown(tmp_path):
    config = tmp_path / "pjrtd.toml"
    config.write_text("shutdown_timeout_seconds = 60\n")
    d = Daemon(tmp_path, "--platform", "host", "--config", str(config),
               "--listen", f"unix://{tmp_path}/p.sock")
    c = pjrt_client.connect(d.addresses[0])
    step = c.compile(ADD_ONE)
    (x,) = step.execute([np.zeros(4, np.float32)], pipelined=True)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))
    start = time.monotonic()
    assert d.stop() == 0
    assert time.monotonic() - start < 20  # not the 60 s deadline
    with pytest.raises(pjrt_client.Error):
        step.execute([x], pipelined=True)
        c.synchronize()
    c.close()


def test_pjrtctl_bench_measures_the_fast_paths(daemon):
    pjrtctl = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", "build")) / \
        "bin" / "pjrtctl"
    result = subprocess.run(
        [str(pjrtctl), "--address", daemon.addresses[1], "--json", "bench",
         "--size", "1MiB", "--calls", "5", "--transfers", "2",
         "--steps", "300"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    import json
    doc = json.loads(result.stdout)
    for name in ("upload_shared_memory", "download_shared_memory"):
        assert doc[name]["unit"] == "bytes/s" and doc[name]["min"] > 0
    for name in ("loop_synchronous", "loop_pipelined"):
        assert doc[name]["unit"] == "steps/s" and doc[name]["median"] > 0
    assert doc["steps"] == 300
