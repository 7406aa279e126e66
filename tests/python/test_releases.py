"""Dropped buffers and executables are released without a call of their
own (carried by the next Execute, or flushed in the background), and still
all freed when the client closes, exits or crashes; small reads and fetched
results come in one unary reply, bit-identical to streamed downloads."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest

import pjrt_client
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, session_pb2,
                                        session_pb2_grpc)
from programs import ADD_ONE

# Several results of different types and sizes, one of them large.
MANY = """HloModule many
add {
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  ROOT r = f32[] add(a, c)
}
ENTRY e {
  x = f32[300000] parameter(0)
  two = f32[] constant(2)
  b = f32[300000] broadcast(two), dimensions={}
  y = f32[300000] multiply(x, b)
  zero = f32[] constant(0)
  s = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  i = s32[300000] convert(y)
  h = f16[300000] convert(x)
  ROOT t = (f32[], f32[300000], s32[300000], f16[300000]) tuple(s, y, i, h)
}
"""


def session_info(observer, public_id: int):
    """The daemon's view of one session, asked through another client
    (which has nothing to flush)."""
    stub = session_pb2_grpc.SessionsStub(observer._channel)
    response = stub.ListSessions(session_pb2.ListSessionsRequest(),
                                 timeout=30)
    for s in response.sessions:
        if s.public_id == public_id:
            return s
    return None


def wait_for(predicate, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.01)


def test_a_loop_that_drops_each_step_costs_no_delete_calls(address):
    with pjrt_client.connect(address) as c, \
            pjrt_client.connect(address) as observer:
        step = c.compile(ADD_ONE)
        x = c.put(np.zeros(4, np.float32))
        calls = []
        real = c._session.buffers.DeleteBuffers
        # Count the calls the client makes to delete buffers.
        c._session.buffers.DeleteBuffers = _Counting(real, calls)
        for _ in range(200):
            x = step.execute([x])[0]
        np.testing.assert_array_equal(x.to_numpy(), np.full(4, 200.0))
        assert calls == []  # every drop rode on the next Execute
        # The daemon holds this step's result and at most the previous one
        # (dropped after the last Execute): not 200 buffers.
        assert session_info(observer, c.session_id).buffer_count <= 2


class _Counting:
    def __init__(self, method, calls: list) -> None:
        self._method = method
        self._calls = calls

    def __call__(self, *args, **kwargs):
        self._calls.append(args)
        return self._method(*args, **kwargs)

    def future(self, *args, **kwargs):
        self._calls.append(args)
        return self._method.future(*args, **kwargs)


def test_dropped_buffers_are_flushed_without_further_calls(address):
    with pjrt_client.connect(address) as c, \
            pjrt_client.connect(address) as observer:
        buffers = [c.put(np.arange(8, dtype=np.int32)) for _ in range(5)]
        exe = c.compile(ADD_ONE)
        assert session_info(observer, c.session_id).buffer_count == 5
        del buffers, exe
        gc.collect()
        # No further call from the client: the background flush frees them.
        wait_for(lambda: session_info(observer, c.session_id)
                 .buffer_count == 0, "freeing 5 dropped buffers")
        wait_for(lambda: session_info(observer, c.session_id)
                 .executable_count == 0, "dropping the executable")


def test_many_dropped_buffers_go_in_one_batch(address):
    with pjrt_client.connect(address) as c, \
            pjrt_client.connect(address) as observer:
        buffers = [c.put(np.float32(i)) for i in range(200)]
        calls = []
        real = c._session.buffers.DeleteBuffers
        c._session.buffers.DeleteBuffers = _Counting(real, calls)
        del buffers
        gc.collect()
        wait_for(lambda: session_info(observer, c.session_id)
                 .buffer_count == 0, "freeing 200 dropped buffers")
        # Batches of up to 64 handles, not one call per buffer.
        assert 1 <= len(calls) <= 8


def test_stats_count_no_dropped_buffer(address):
    with pjrt_client.connect(address) as c:
        before = c.stats()["buffer_count"]
        b = c.put(np.zeros(1000, np.float32))
        assert c.stats()["buffer_count"] == before + 1
        del b
        gc.collect()
        assert c.stats()["buffer_count"] == before


def test_explicit_delete_is_immediate(address):
    with pjrt_client.connect(address) as c, \
            pjrt_client.connect(address) as observer:
        b = c.put(np.zeros(16, np.float32))
        assert session_info(observer, c.session_id).buffer_count == 1
        b.delete()
        assert session_info(observer, c.session_id).buffer_count == 0


def test_a_release_of_a_buffer_already_gone_is_passed_over(address):
    with pjrt_client.connect(address) as c:
        step = c.compile(ADD_ONE)
        x = c.put(np.zeros(4, np.float32))
        keep = c.put(np.ones(4, np.float32))
        # A handle deleted meanwhile (by the program through another
        # object) must not make the next Execute fail, nor keep the other
        # releases from happening.
        alias = c.buffer(keep.handle)
        keep.delete()
        del alias
        gc.collect()
        y = step.execute([x])[0]
        np.testing.assert_array_equal(y.to_numpy(), np.ones(4))


def test_skip_unknown_deletes_known_handles(client):
    a = client.put(np.zeros(4, np.float32))
    b = client.put(np.zeros(4, np.float32))
    handle_a = a.handle
    a._finalizer.detach()
    client._session.buffers.DeleteBuffers(
        buffer_pb2.DeleteBuffersRequest(session_id=client._session.id,
                                        handles=[handle_a, 0x1234, handle_a],
                                        skip_unknown=True), timeout=30)
    with pytest.raises(pjrt_client.NotFoundError):
        client.buffer(handle_a)
    # Without skip_unknown, one unknown handle deletes nothing.
    with pytest.raises(grpc.RpcError) as raised:
        client._session.buffers.DeleteBuffers(
            buffer_pb2.DeleteBuffersRequest(session_id=client._session.id,
                                            handles=[b.handle, 0x1234]),
            timeout=30)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "0x1234" in raised.value.details()
    assert client.buffer(b.handle).shape == (4,)


_DROPPER = """
import gc, os, sys
import numpy as np
import pjrt_client
c = pjrt_client.connect(sys.argv[1])
step = c.compile('''{program}''')
x = c.put(np.zeros(4, np.float32))
big = [c.put(np.zeros(1 << 16, np.float32)) for _ in range(20)]
for _ in range(10):
    x = step.execute([x])[0]
x.block_until_ready()
del big
gc.collect()
print(c.session_id, flush=True)
sys.stdin.readline()
if sys.argv[2] == "crash":
    os._exit(3)
if sys.argv[2] == "close":
    c.close()
sys.exit(0)
"""


@pytest.mark.parametrize("how", ["close", "exit", "crash"])
def test_dropped_buffers_are_freed_when_the_client_goes(address, how):
    with pjrt_client.connect(address) as observer:
        child = subprocess.Popen(
            [sys.executable, "-c", _DROPPER.format(program=ADD_ONE),
             address, how],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            public_id = int(child.stdout.readline())
            # Twenty dropped buffers may still wait to be released.
            assert session_info(observer, public_id) is not None
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        wait_for(lambda: session_info(observer, public_id) is None,
                 f"the session ending after the client's {how}")


def test_small_reads_are_one_unary_call(client):
    data = np.arange(1000, dtype=np.float64)
    b = client.put(data)
    streamed = []
    real = client._session.buffers.Download
    client._session.buffers.Download = _Counting(real, streamed)
    np.testing.assert_array_equal(b.to_numpy(), data)
    assert streamed == []
    out = b.to_numpy()
    out[0] = 5.0  # a fresh, writable array each time
    assert b.to_numpy()[0] == 0.0


def test_read_buffer_refuses_a_large_array(client):
    b = client.put(np.zeros((1 << 20) // 4 + 1, np.float32))
    with pytest.raises(grpc.RpcError) as raised:
        client._session.buffers.ReadBuffer(
            buffer_pb2.DownloadRequest(session_id=client._session.id,
                                       handle=b.handle), timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "1048580 bytes" in raised.value.details()
    assert "Download" in raised.value.details()


def _streamed(buffer) -> bytes:
    """The buffer's bytes through the Download stream."""
    return bytes(buffer._stream_download())


def test_fetched_results_are_bit_identical_to_streamed_ones(client):
    exe = client.compile(MANY)
    rng = np.random.default_rng(7)
    x = rng.standard_normal(300000).astype(np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 65504.5]
    fetched = exe.execute([x], fetch=True)
    # The results fit the 1 MiB in order as long as they do: the scalar and
    # the first 1.2 MB array do not both fit, so only the scalar and the
    # f16 array (600 kB) come inline.
    inline = [r._data is not None for r in fetched]
    assert inline == [True, False, False, True]
    plain = exe.execute([x])
    for f, p in zip(fetched, plain):
        streamed = _streamed(p)
        if f._data is not None:
            assert f._data == streamed
        assert f.to_numpy().tobytes() == streamed


def test_a_fetched_result_is_ready_and_read_without_a_call(client):
    exe = client.compile(ADD_ONE)
    x = client.put(np.zeros(4, np.float32))
    y = exe.execute([x], fetch=True)[0]
    reads = []
    client._session.buffers.ReadBuffer = _Counting(
        client._session.buffers.ReadBuffer, reads)
    assert y.is_ready()
    np.testing.assert_array_equal(y.to_numpy(), np.ones(4))
    assert reads == []


def _fresh(text: str) -> str:
    """`text` under a module name never compiled before: an executable
    that has not run yet (the daemon's compile cache shares equal texts)."""
    first, rest = text.split("\n", 1)
    return f"{first}_{os.urandom(8).hex()}\n{rest}"


def test_results_of_one_run_wait_once(client):
    # The program's first run: it goes on the device's stream, and the
    # reply comes before it ends (unless it is that quick).
    exe = client.compile(_fresh(MANY))
    results = exe.execute([np.ones(300000, np.float32)])
    came_ready = results[0]._run.ready
    waits = []
    real = client._session.buffers.BlockUntilReady
    client._session.buffers.BlockUntilReady = _Counting(real, waits)
    for r in results:
        r.block_until_ready()
    assert len(waits) == (0 if came_ready else 1)
    assert results[0].to_numpy() == np.float32(300000)


def test_a_program_whose_runs_are_short_comes_back_ready(client):
    # Once its runs have been short, a run of the program goes on the
    # calling thread of the daemon while the device is idle, and the reply
    # says its results are ready: waiting for them or reading them costs no
    # further call than the read.
    exe = client.compile(_fresh(MANY))
    x = client.put(np.ones(300000, np.float32))
    # "Lately" is a moving average of run times: a first run slowed by a
    # busy machine counts for a few runs, then fades. Each run shortens it;
    # a few dozen short runs bring any start below the limit.
    for _ in range(40):
        exe.execute([x], wait=True)
        results = exe.execute([x])
        if results[0]._run.ready:
            break
    assert results[0]._run.ready  # as the reply said
    waits = []
    real = client._session.buffers.BlockUntilReady
    client._session.buffers.BlockUntilReady = _Counting(real, waits)
    for r in results:
        r.block_until_ready()
    assert waits == []
    np.testing.assert_array_equal(results[1].to_numpy(),
                                  np.full(300000, 2, np.float32))


def test_a_streamed_request_cannot_fetch(client):
    from pjrt_client._proto.pjrt.v1 import executable_pb2
    exe = client.compile(ADD_ONE)
    x = client.put(np.zeros(4, np.float32))
    request = executable_pb2.ExecuteRequest(
        session_id=client._session.id, executable_handle=exe.handle,
        argument_handles=[x.handle], result_handles=[12345],
        options=executable_pb2.ExecuteOptions(fetch_results=True))
    call = client._session.executables.ExecuteStream(iter([request]),
                                                     timeout=30)
    with pytest.raises(grpc.RpcError) as raised:
        list(call)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fetch_results is for Execute" in raised.value.details()


def test_a_large_read_lends_its_staging_region_until_its_views_go(address):
    if not address.startswith("unix"):
        pytest.skip("shared memory is for clients on the daemon's host")
    with pjrt_client.connect(address) as c:
        data = np.arange(8 << 20, dtype=np.int32)  # 32 MiB
        b = c.put(data)
        if not c.uses_shared_memory:
            pytest.skip("the daemon offers no shared memory")
        a = b.to_numpy()
        np.testing.assert_array_equal(a, data)
        view = a[::3]
        del a
        gc.collect()
        # The view still holds the region: a second read takes another one
        # and leaves the view's bytes alone.
        zeros = c.put(np.zeros_like(data)).to_numpy()
        assert not zeros.any()
        np.testing.assert_array_equal(view, data[::3])
        view[0] = -1  # the caller's own memory
        free_before = len(c._staging._free)
        del view, zeros
        gc.collect()
        assert len(c._staging._free) == free_before + 2
        again = b.to_numpy()
        np.testing.assert_array_equal(again, data)


DONATE = """HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  b = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, b)
}
"""


def test_a_fetched_result_once_donated_is_gone(client):
    exe = client.compile(DONATE)
    assert exe.donated_parameters == [0]
    y = exe.execute([np.zeros(4, np.float32)], fetch=True)[0]
    np.testing.assert_array_equal(y.to_numpy(), np.ones(4))
    z = exe.execute([y])[0]
    np.testing.assert_array_equal(z.to_numpy(), np.full(4, 2.0))
    # What the client had fetched is not an answer any more.
    with pytest.raises(pjrt_client.FailedPreconditionError, match="donated"):
        y.to_numpy()
    with pytest.raises(pjrt_client.FailedPreconditionError, match="donated"):
        y.block_until_ready()


def test_a_batched_stream_counts_requests_not_messages(client):
    from pjrt_client._proto.pjrt.v1 import executable_pb2
    exe = client.compile(ADD_ONE)
    x = client.put(np.zeros(4, np.float32))
    handles = [1001, 1002, 1003]

    def request(argument: int, result: int):
        return executable_pb2.ExecuteRequest(
            session_id=client._session.id, executable_handle=exe.handle,
            argument_handles=[argument], result_handles=[result])

    batches = [
        executable_pb2.ExecuteBatch(requests=[
            request(x.handle, handles[0]), request(handles[0], handles[1])]),
        executable_pb2.ExecuteBatch(),  # empty messages are allowed
        executable_pb2.ExecuteBatch(requests=[
            request(handles[1], handles[2]),
            request(0x5eed, 1004)]),  # no such argument: fails
    ]
    call = client._session.executables.ExecuteStreamBatched(
        iter(batches), timeout=30)
    acknowledged = []
    with pytest.raises(grpc.RpcError) as raised:
        for reply in call:
            acknowledged.append(reply.sequence)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert raised.value.details().startswith("stream request 3: ")
    assert not acknowledged or max(acknowledged) <= 2
    # The three requests before it stand.
    np.testing.assert_array_equal(client.buffer(handles[2]).to_numpy(),
                                  np.full(4, 3.0))
