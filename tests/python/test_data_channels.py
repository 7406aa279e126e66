"""Data channels: raw TCP connections of a session that carry an array's
bytes beside its Download or Upload call (daemon/data_channel.h)."""

from __future__ import annotations

import pathlib
import socket
import struct
import tempfile
import threading
import time

import grpc
import numpy as np
import pytest

import pjrt_client
from pjrt_client._proto.pjrt.v1 import buffer_pb2, types_pb2
from conftest import Daemon

MAGIC = b"PJRTDCH1"


@pytest.fixture
def tcp(daemon):
    return daemon.addresses[1]


def tcp_client(address: str, **kwargs) -> pjrt_client.Client:
    return pjrt_client.connect(address, shared_memory=False, **kwargs)


def open_channel(client) -> tuple[socket.socket, int]:
    """Opens a channel of `client`'s session by hand: (socket, handle)."""
    ticket = client._session.buffers.OpenDataChannel(
        buffer_pb2.OpenDataChannelRequest(session_id=client._session.id),
        timeout=10)
    assert len(ticket.token) == 16
    sock = socket.create_connection(("127.0.0.1", ticket.port), timeout=10)
    sock.sendall(MAGIC + ticket.token)
    reply = receive(sock, 16)
    assert reply[:8] == MAGIC
    return sock, struct.unpack("<Q", reply[8:])[0], ticket


def receive(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        piece = sock.recv(size - len(out))
        assert piece, f"the channel ended after {len(out)} of {size} bytes"
        out += piece
    return bytes(out)


def hello(port: int, token: bytes) -> int:
    """The handle the daemon answers to a hello with `token` (0: refused)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(MAGIC + token)
        reply = receive(s, 16)
    assert reply[:8] == MAGIC
    return struct.unpack("<Q", reply[8:])[0]


def special_floats(n: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n).astype(np.float32)
    x[:5] = [np.nan, np.inf, -np.inf, -0.0, 1e-45]
    return x


# Sizes around the 1 MiB threshold and the daemon's 4 MiB pieces.
SIZES = [1 << 20, (4 << 20) - 1, 4 << 20, (9 << 20) + 3]


@pytest.mark.parametrize("size", SIZES)
def test_channel_transfers_are_bit_identical_to_streamed_ones(tcp, size):
    data = np.frombuffer(np.random.default_rng(size).bytes(size), np.uint8)
    with tcp_client(tcp) as fast, \
            tcp_client(tcp, data_channels=False) as slow:
        b = fast.put(data)
        assert fast.uses_data_channels
        assert not slow.uses_data_channels
        s = slow.put(data)
        assert np.array_equal(b.to_numpy(), data)
        assert np.array_equal(s.to_numpy(), data)
        # Each side reads what the other uploaded, by its own path.
        assert slow.buffer(s.handle).to_numpy().tobytes() == data.tobytes()
        assert b.to_numpy().tobytes() == s.to_numpy().tobytes()


def test_floats_cross_a_channel_bit_for_bit(tcp):
    x = special_floats(3 << 18).reshape(3, -1)
    with tcp_client(tcp) as c:
        b = c.put(x)
        out = b.to_numpy()
        assert c.uses_data_channels
    assert out.dtype == np.float32 and out.shape == x.shape
    assert out.tobytes() == x.tobytes()


def test_a_channel_serves_transfer_after_transfer(tcp):
    with tcp_client(tcp) as c:
        for i in range(5):
            x = np.full(1 << 19, i, np.float32)
            assert np.array_equal(c.put(x).to_numpy(), x)
        assert len(c._channels._idle) == 1  # one channel, reused


def test_concurrent_transfers_each_take_a_channel(tcp):
    with tcp_client(tcp) as c:
        arrays = [np.full(1 << 20, i, np.int32) for i in range(4)]
        buffers = [c.put(a) for a in arrays]
        futures = [b.to_numpy_async() for b in buffers]
        for a, f in zip(arrays, futures):
            assert np.array_equal(f.result(), a)
        assert 1 <= len(c._channels._idle) <= 4


def test_unix_socket_clients_use_no_channels(daemon):
    with pjrt_client.connect(daemon.addresses[0], shared_memory=False) as c:
        x = np.arange(1 << 19, dtype=np.float32)
        assert np.array_equal(c.put(x).to_numpy(), x)
        assert not c.uses_data_channels


def test_a_channel_belongs_to_its_session(tcp):
    with tcp_client(tcp) as mine, tcp_client(tcp) as other:
        sock, handle, _ = open_channel(mine)
        assert handle != 0
        b = other.put(np.ones(1 << 18, np.float32))
        with pytest.raises(grpc.RpcError) as raised:
            list(other._session.buffers.Download(
                buffer_pb2.DownloadRequest(session_id=other._session.id,
                                           handle=b.handle,
                                           channel_handle=handle),
                timeout=10))
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        assert f"{handle:#x}" in raised.value.details()
        # Nothing crossed the channel, which still serves its own session.
        mine_buffer = mine.put(np.arange(1 << 18, dtype=np.float32))
        call = mine._session.buffers.Download(
            buffer_pb2.DownloadRequest(session_id=mine._session.id,
                                       handle=mine_buffer.handle,
                                       channel_handle=handle), timeout=10)
        header = next(call)
        assert header.header.size_bytes == 1 << 20
        got = receive(sock, 1 << 20)
        assert np.array_equal(np.frombuffer(got, np.float32),
                              np.arange(1 << 18, dtype=np.float32))
        assert list(call) == []
        sock.close()


def test_a_token_opens_one_channel_only(tcp):
    with tcp_client(tcp) as c:
        sock, handle, ticket = open_channel(c)
        assert handle != 0
        assert hello(ticket.port, ticket.token) == 0
        assert hello(ticket.port, bytes(16)) == 0
        sock.close()


def test_garbage_on_the_channel_port_harms_nothing(tcp):
    with tcp_client(tcp) as c:
        port = c._session.buffers.OpenDataChannel(
            buffer_pb2.OpenDataChannelRequest(session_id=c._session.id),
            timeout=10).port
        for payload in (b"", b"GET / HTTP/1.1\r\n\r\n" + bytes(64),
                        MAGIC, b"x" * 24):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.settimeout(10)
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    reply = s.recv(64)
                except OSError:
                    reply = b""  # the daemon closed it first: fine
            assert reply in (b"", MAGIC + bytes(8))
        x = np.arange(1 << 19, dtype=np.float32)
        assert np.array_equal(c.put(x).to_numpy(), x)


def test_an_upload_cut_short_leaves_nothing_and_ends_the_channel(tcp):
    with tcp_client(tcp) as c:
        before = c.stats()["devices"][0]["bytes_in_use"]
        sock, handle, _ = open_channel(c)
        shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_F32,
                                     dims=[1 << 20])
        header = buffer_pb2.UploadHeader(session_id=c._session.id,
                                         shape=shape, device_id=0,
                                         channel_handle=handle)
        call = c._session.buffers.Upload.future(
            iter([buffer_pb2.UploadRequest(header=header)]), timeout=30)
        sock.sendall(bytes(1000))
        sock.close()  # 1000 of 4 MiB
        with pytest.raises(grpc.RpcError) as raised:
            call.result()
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "after 1000 of 4194304 bytes" in raised.value.details()
        assert c.stats()["devices"][0]["bytes_in_use"] == before
        # The channel is gone from the session.
        with pytest.raises(grpc.RpcError) as raised:
            c._session.buffers.Upload(
                iter([buffer_pb2.UploadRequest(header=header)]), timeout=10)
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_chunk_beside_a_channel_is_refused(tcp):
    with tcp_client(tcp) as c:
        sock, handle, _ = open_channel(c)
        shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_U8, dims=[16])
        header = buffer_pb2.UploadHeader(session_id=c._session.id,
                                         shape=shape, device_id=0,
                                         channel_handle=handle)
        call = c._session.buffers.Upload.future(
            iter([buffer_pb2.UploadRequest(header=header),
                  buffer_pb2.UploadRequest(chunk=bytes(16))]), timeout=30)
        sock.sendall(bytes(16))
        with pytest.raises(grpc.RpcError) as raised:
            call.result()
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "header alone" in raised.value.details()
        sock.close()


def test_a_failed_download_ends_the_channel_and_the_client_recovers(tcp):
    with tcp_client(tcp) as c:
        x = np.arange(1 << 20, dtype=np.float32)
        b = c.put(x)
        channel = c._channels.take()
        # A download of an unknown handle over it: refused, channel ended.
        with pytest.raises(pjrt_client.NotFoundError):
            pjrt_client.Buffer._download_over_channel(
                _Stub(b, 0x1234), channel, np.empty(4, np.uint8))
        assert channel.sock.fileno() == -1  # the client closed its end
        assert np.array_equal(b.to_numpy(), x)  # over a new channel
        assert c.uses_data_channels


class _Stub:
    """Enough of a Buffer for _download_over_channel, with another handle."""

    def __init__(self, buffer, handle: int) -> None:
        self._session = buffer._session
        self._client = buffer._client
        self._handle = handle


def test_closing_the_session_ends_its_channels(tcp):
    with tcp_client(tcp) as watcher:
        before = watcher.stats()["data_channel_count"]
        c = tcp_client(tcp)
        sock, handle, _ = open_channel(c)
        assert handle != 0
        assert watcher.stats()["data_channel_count"] == before + 1
        c.close()
        sock.settimeout(10)
        assert sock.recv(1) == b""  # the daemon closed its end
        sock.close()
        # Gone from the daemon's count once the session let go of it.
        deadline = time.monotonic() + 10
        while watcher.stats()["data_channel_count"] != before:
            assert time.monotonic() < deadline, "the channel is still counted"
            time.sleep(0.01)


def test_a_daemon_without_channels_says_why_and_clients_stream():
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        d = Daemon(pathlib.Path(tmp), "--platform", "host",
                   "--listen", "127.0.0.1:0", "--no-data-channels")
        try:
            with tcp_client(d.addresses[0]) as c:
                with pytest.raises(grpc.RpcError) as raised:
                    c._session.buffers.OpenDataChannel(
                        buffer_pb2.OpenDataChannelRequest(
                            session_id=c._session.id), timeout=10)
                assert raised.value.code() == \
                    grpc.StatusCode.FAILED_PRECONDITION
                assert "--no-data-channels" in raised.value.details()
                x = np.arange(1 << 19, dtype=np.float32)
                assert np.array_equal(c.put(x).to_numpy(), x)
                assert not c.uses_data_channels
        finally:
            assert d.stop() == 0


def test_a_session_holds_at_most_its_limit_of_channels():
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        config = pathlib.Path(tmp) / "pjrtd.toml"
        config.write_text("max_data_channels_per_session = 2\n")
        d = Daemon(pathlib.Path(tmp), "--platform", "host",
                   "--listen", "127.0.0.1:0", "--config", str(config))
        try:
            with tcp_client(d.addresses[0]) as c:
                first = open_channel(c)
                second = open_channel(c)
                assert first[1] != 0 and second[1] != 0
                third = open_channel(c)
                assert third[1] == 0  # refused: the session holds two
                # Once one ends, there is room again.
                first[0].close()
                fourth = open_channel(c)
                assert fourth[1] != 0
                # The client falls back to streams when refused.
                x = np.arange(1 << 19, dtype=np.float32)
                assert np.array_equal(c.put(x).to_numpy(), x)
                for s in (second[0], third[0], fourth[0]):
                    s.close()
        finally:
            assert d.stop() == 0


def test_a_stalled_transfer_does_not_hold_other_transfers(tcp):
    with tcp_client(tcp) as c:
        sock, handle, _ = open_channel(c)
        big = c.put(np.zeros(16 << 20, np.uint8))
        call = c._session.buffers.Download(
            buffer_pb2.DownloadRequest(session_id=c._session.id,
                                       handle=big.handle,
                                       channel_handle=handle), timeout=60)
        next(call)  # the daemon now writes to a socket nobody reads
        done = threading.Event()

        def others() -> None:
            x = np.arange(1 << 19, dtype=np.float32)
            assert np.array_equal(c.put(x).to_numpy(), x)
            done.set()

        thread = threading.Thread(target=others)
        thread.start()
        thread.join(timeout=60)
        assert done.is_set()
        call.cancel()  # the daemon's transfer ends with the call
        sock.close()


def test_an_upload_whose_bytes_arrive_first_survives_a_new_channel(tcp):
    # The client sends an upload's bytes as its call starts; a channel the
    # session opens meanwhile must not take them for an abandoned one.
    with tcp_client(tcp) as c:
        sock, handle, _ = open_channel(c)
        x = np.arange(1 << 10, dtype=np.float32)
        sock.sendall(x.tobytes())
        other, other_handle, _ = open_channel(c)
        assert other_handle != 0
        shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_F32,
                                     dims=[x.size])
        header = buffer_pb2.UploadHeader(session_id=c._session.id,
                                         shape=shape, device_id=0,
                                         channel_handle=handle)
        info = c._session.buffers.Upload(
            iter([buffer_pb2.UploadRequest(header=header)]), timeout=30)
        assert np.array_equal(c.buffer(info.handle).to_numpy(), x)
        sock.close()
        other.close()


def test_a_session_may_hold_sixteen_unused_tokens(tcp):
    with tcp_client(tcp) as c:
        request = buffer_pb2.OpenDataChannelRequest(session_id=c._session.id)
        for _ in range(16):
            c._session.buffers.OpenDataChannel(request, timeout=10)
        with pytest.raises(grpc.RpcError) as raised:
            c._session.buffers.OpenDataChannel(request, timeout=10)
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "16 data channel tokens" in raised.value.details()
        # Another session is not held up by them.
        with tcp_client(tcp) as other:
            x = np.arange(1 << 19, dtype=np.float32)
            assert np.array_equal(other.put(x).to_numpy(), x)
            assert other.uses_data_channels
