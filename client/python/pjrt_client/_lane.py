"""Execute lanes (protocol revision 8): Execute calls over a unix socket
of the session, for clients on the daemon's host.

A unary gRPC call costs this process ~150 us of CPU before the daemon
does anything, more than the math of a small training step; a lane's
call is one write and one read (docs/architecture.md, *Execute lanes*).
Every message is a 4-byte little-endian length and a protobuf message:
an ExecuteLaneHello then ExecuteRequests one way, ExecuteLaneReplies the
other, in order.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from typing import Any

import grpc

from pjrt_client._errors import (DeadlineExceededError, UnavailableError,
                                 error_for_code)
from pjrt_client._proto.pjrt.v1 import executable_pb2, types_pb2

# The first protocol revision with lanes.
LANE_PROTOCOL_VERSION = types_pb2.PROTOCOL_REVISION_EXECUTE_LANES
# Lanes a client holds at most (the daemon's max_execute_lanes_per_session
# is 4 by default); a call beyond them goes through gRPC.
_MAX_LANES = 4
_MAX_MESSAGE_BYTES = 4 << 20
_CODES = {c.value[0]: c for c in grpc.StatusCode}
_LENGTH = struct.Struct("<I")


def _address(name: str) -> str:
    # A leading '@' names an abstract socket.
    return "\0" + name[1:] if name.startswith("@") else name


def _receive(sock: socket.socket, size: int) -> bytes:
    data = sock.recv(size)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        if not data:
            raise ConnectionResetError("the daemon closed the execute lane")
        data = sock.recv(size - got)
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _read_reply(sock: socket.socket) -> executable_pb2.ExecuteLaneReply:
    (length,) = _LENGTH.unpack(_receive(sock, 4))
    if length > _MAX_MESSAGE_BYTES:
        raise ConnectionResetError(
            f"the daemon's reply claims {length} bytes, more than a lane's "
            f"{_MAX_MESSAGE_BYTES}")
    return executable_pb2.ExecuteLaneReply.FromString(_receive(sock, length))


class ExecuteLanes:
    """The lanes of one session: opened on first use, kept for reuse, one
    call at a time each. ``call`` answers None when no lane can be had (the
    daemon offers none, cannot be reached, or refuses one now): the caller
    then uses gRPC."""

    def __init__(self, socket_name: str, session: Any,
                 timeout: float) -> None:
        self._name = socket_name
        self._session = session
        self._timeout = timeout
        self._lock = threading.Lock()
        self._idle: list[socket.socket] = []
        self._open = 0
        self._pid = os.getpid()
        self.calls = 0  # requests answered on a lane (for tests)

    @property
    def offered(self) -> bool:
        """Whether lanes may be used (the daemon offers them and one could
        be opened, or none was tried yet)."""
        return bool(self._name)

    def close(self) -> None:
        """Closes the idle lanes; a lane in use closes when its call ends,
        and none opens any more."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._name = ""
        for sock in idle:
            sock.close()

    def _take(self) -> socket.socket | None:
        with self._lock:
            if not self._name:
                return None
            if self._pid != os.getpid():
                # A forked child shares its parent's sockets: never use them.
                self._idle, self._open, self._pid = [], 0, os.getpid()
            if self._idle:
                return self._idle.pop()
            if self._open >= _MAX_LANES:
                return None
            self._open += 1
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self._timeout)
            sock.connect(_address(self._name))
        except OSError:
            # Out of reach (another host, another network namespace): gRPC,
            # from now on.
            sock.close()
            with self._lock:
                self._open -= 1
                self._name = ""
            return None
        try:
            hello = executable_pb2.ExecuteLaneHello(
                session_id=self._session.id,
                protocol_version=LANE_PROTOCOL_VERSION).SerializeToString()
            sock.sendall(_LENGTH.pack(len(hello)) + hello)
            reply = _read_reply(sock)
        except OSError:
            # Turned away before the hello (the daemon has all the lanes it
            # serves): this call goes through gRPC.
            sock.close()
            with self._lock:
                self._open -= 1
            return None
        if reply.error_code != 0:
            # Refused (too many lanes, say): this call goes through gRPC.
            sock.close()
            with self._lock:
                self._open -= 1
            return None
        return sock

    def _give_back(self, sock: socket.socket) -> None:
        with self._lock:
            if self._name and self._pid == os.getpid():
                self._idle.append(sock)
                return
            self._open -= 1
        sock.close()

    def _lose(self) -> None:
        with self._lock:
            self._open -= 1

    def call(self, request: Any) -> Any:
        """The ExecuteResponse of ``request``, or None when it was not sent
        (call gRPC instead). Raises the daemon's error as a gRPC call
        would."""
        sock = self._take()
        if sock is None:
            return None
        payload = request.SerializeToString()
        try:
            sock.sendall(_LENGTH.pack(len(payload)) + payload)
        except OSError:
            # The daemon closed the lane before reading the request (its
            # session closed, or it is stopping): gRPC says which.
            sock.close()
            self._lose()
            return None
        try:
            reply = _read_reply(sock)
        except socket.timeout:
            sock.close()
            self._lose()
            raise DeadlineExceededError(
                f"pjrtd did not answer an Execute within {self._timeout:g}s "
                f"(execute lane)") from None
        except OSError as e:
            sock.close()
            self._lose()
            raise UnavailableError(
                f"pjrtd closed the execute lane while an Execute was in "
                f"flight ({e}); the daemon is stopping or the session "
                f"closed, and whether the run was enqueued is unknown"
            ) from None
        self._give_back(sock)
        self.calls += 1
        if reply.error_code != 0:
            raise error_for_code(
                _CODES.get(reply.error_code, grpc.StatusCode.UNKNOWN),
                reply.error_message)
        return reply.response
