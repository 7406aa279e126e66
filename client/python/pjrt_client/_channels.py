"""Data channels (protocol revision 7): plain TCP connections to the daemon,
beside the gRPC channel, that carry a large array's bytes raw.

Through gRPC a 256 MiB array crosses as 256 messages, each copied into and
out of protobuf and HTTP/2 frames and handled by Python: a fifth of what
one TCP connection carries. A data channel carries nothing but the bytes,
straight from the numpy array into the socket and from the socket into the
numpy array; the gRPC call beside it carries the header and the status.
See daemon/data_channel.h for the handshake.

The daemon offers channels beside plaintext TCP listeners only; a client
that cannot use one (unix socket, TLS, an older daemon, a firewall in the
way) streams its arrays through gRPC as before.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from typing import Any

import grpc

from pjrt_client._errors import Error, from_rpc_error
from pjrt_client._proto.pjrt.v1 import buffer_pb2

MAGIC = b"PJRTDCH1"
# Channels a client keeps open at once (the daemon allows 8 per session);
# a transfer that finds them all busy streams through gRPC instead.
MAX_CHANNELS = 4
# How long connecting to the channel port may take before the client gives
# up on channels and streams instead.
_CONNECT_TIMEOUT = 5.0
# How often a blocked transfer looks whether its gRPC call ended.
_POLL_SECONDS = 0.1
# Bytes handed to one send() call.
_SEND_PIECE = 16 << 20


def channel_host(address: str) -> str | None:
    """The host a TCP target names ("127.0.0.1:7070", "[::1]:7070",
    "dns:///host:7070", "ipv4:10.0.0.1:7070"); None for a unix socket."""
    if address.startswith(("unix:", "unix-abstract:", "vsock:")):
        return None
    for prefix in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if address.startswith(prefix):
            address = address[len(prefix):]
            break
    address = address.split(",")[0]
    host, sep, _ = address.rpartition(":")
    if not sep or not host:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


class DataChannel:
    """One connected channel: a socket and its handle in the session."""

    def __init__(self, sock: socket.socket, handle: int) -> None:
        self.sock = sock
        self.handle = handle

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _wait(self, writable: bool, call: Any, done: int, total: int,
              what: str) -> None:
        """Waits until the socket is ready; raises when the gRPC call
        ended meanwhile (the daemon failed the transfer)."""
        while True:
            if writable:
                _, ready, _ = select.select([], [self.sock], [],
                                            _POLL_SECONDS)
            else:
                ready, _, _ = select.select([self.sock], [], [],
                                            _POLL_SECONDS)
            if ready:
                return
            if call.done():
                _raise_call_error(call, writable, what, done, total)

    def receive_into(self, view: memoryview, call: Any, what: str) -> None:
        """Fills `view` from the channel; `call` is the transfer's gRPC
        call, whose error explains a channel that ends early."""
        total = len(view)
        got = 0
        while got < total:
            try:
                n = self.sock.recv_into(view[got:], total - got)
            except BlockingIOError:
                self._wait(False, call, got, total, what)
                continue
            except OSError as e:
                _raise_call_error(call, False, what, got, total, str(e))
            if n == 0:
                _raise_call_error(call, False, what, got, total,
                                  "the daemon closed the channel")
            got += n

    def send_all(self, view: memoryview, call: Any, what: str) -> None:
        total = len(view)
        sent = 0
        while sent < total:
            try:
                n = self.sock.send(view[sent:sent + _SEND_PIECE])
            except BlockingIOError:
                self._wait(True, call, sent, total, what)
                continue
            except OSError as e:
                _raise_call_error(call, True, what, sent, total, str(e))
            sent += n


def finish_call(call: Any, upload: bool) -> Any:
    """Waits for the end of a transfer's gRPC call: an upload's reply, or
    the end of a download's stream (after its header); raises the call's
    error."""
    if upload:
        return call.result()
    for _ in call:
        raise Error("the daemon sent chunks beside a data channel")
    return None


def _raise_call_error(call: Any, upload: bool, what: str, done: int,
                      total: int, why: str = "") -> None:
    """Raises the daemon's reason for a transfer that ended early: its gRPC
    call's error when it has one, else what the channel saw."""
    try:
        finish_call(call, upload)
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None
    raise Error(f"{what} ended after {done} of {total} bytes over data "
                f"channel: {why or 'the call ended first'}")


class DataChannels:
    """The client's pool of channels, opened on first use."""

    def __init__(self, address: str, session: Any, enabled: bool) -> None:
        self._host = channel_host(address) if enabled else None
        self._session = session
        self._lock = threading.Lock()
        self._idle: list[DataChannel] = []
        self._open = 0
        # Why channels are not used (None while they may be).
        self.unavailable: str | None = None
        if not enabled:
            self.unavailable = "turned off (data_channels=False)"
        elif self._host is None:
            self.unavailable = "the daemon is reached over a unix socket"

    def take(self) -> DataChannel | None:
        """An idle channel, a new one, or None (stream instead)."""
        with self._lock:
            if self.unavailable is not None:
                return None
            if self._idle:
                return self._idle.pop()
            if self._open >= MAX_CHANNELS:
                return None
            self._open += 1
        channel = None
        try:
            channel = self._connect()
        finally:
            if channel is None:
                with self._lock:
                    self._open -= 1
        return channel

    def give_back(self, channel: DataChannel) -> None:
        with self._lock:
            if self.unavailable is None:
                self._idle.append(channel)
                return
            self._open -= 1
        channel.close()

    def discard(self, channel: DataChannel) -> None:
        """Forgets a channel whose transfer failed (the daemon ended it)."""
        channel.close()
        with self._lock:
            self._open -= 1

    def close(self) -> None:
        with self._lock:
            self.unavailable = self.unavailable or "the client is closed"
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for channel in idle:
            channel.close()

    def _give_up(self, why: str) -> None:
        with self._lock:
            self.unavailable = why

    def _connect(self) -> DataChannel | None:
        try:
            ticket = self._session.buffers.OpenDataChannel(
                buffer_pb2.OpenDataChannelRequest(session_id=self._session.id),
                timeout=_CONNECT_TIMEOUT)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                            grpc.StatusCode.UNIMPLEMENTED):
                self._give_up(e.details() or str(e.code()))
            return None
        try:
            sock = socket.create_connection((self._host, ticket.port),
                                            timeout=_CONNECT_TIMEOUT)
        except OSError as e:
            # A firewall, or a daemon listening on another interface.
            self._give_up(f"cannot connect to {self._host} port "
                          f"{ticket.port}: {e}")
            return None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(MAGIC + ticket.token)
            reply = b""
            while len(reply) < 16:
                piece = sock.recv(16 - len(reply))
                if not piece:
                    break
                reply += piece
        except OSError:
            sock.close()
            return None
        if len(reply) >= 8 and reply[:8] != MAGIC:
            sock.close()
            self._give_up(f"the daemon's channel port {ticket.port} did not "
                          f"answer as one")
            return None
        if len(reply) < 16:
            sock.close()  # closed or slow (the daemon is busy): stream
            return None
        (handle,) = struct.unpack("<Q", reply[8:])
        if handle == 0:
            sock.close()  # refused (too many channels): stream this time
            return None
        sock.setblocking(False)
        return DataChannel(sock, handle)
