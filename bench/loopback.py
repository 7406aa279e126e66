"""Loopback helpers shared by the benchmarks: free ports, and the raw TCP
baselines that the wire benchmarks compare against."""

from __future__ import annotations

import atexit
import socket
import struct
import subprocess
import sys
import threading
import time


def free_ports(n: int) -> list[int]:
    """Ports the kernel just handed out (and took back) on 127.0.0.1."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


# The receiving end of the raw TCP baseline, run in its own process as the
# daemon is: it takes one connection per transfer, reads the announced
# number of bytes into one preallocated, already touched buffer, and
# answers one byte once it has them all.
_RECEIVER = r"""
import socket, struct, sys
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
print(server.getsockname()[1], flush=True)
sink = bytearray(0)
while True:
    conn, _ = server.accept()
    header = conn.recv(8, socket.MSG_WAITALL)
    if len(header) < 8:
        break
    (size,) = struct.unpack("<q", header)
    if len(sink) < size:
        sink = bytearray(size)  # zero-filled: its pages are touched now
    view = memoryview(sink)
    got = 0
    while got < size:
        n = conn.recv_into(view[got:size], size - got)
        if n == 0:
            break
        got += n
    conn.sendall(b"k")
    conn.close()
"""


class _Receiver:
    """The receiver process, started on first use and kept for the run."""

    process = None
    port = 0
    largest = 0  # the size of the buffer the receiver has touched

    @classmethod
    def address(cls) -> tuple[str, int]:
        if cls.process is None or cls.process.poll() is not None:
            cls.process = subprocess.Popen(
                [sys.executable, "-c", _RECEIVER], stdout=subprocess.PIPE,
                text=True)
            cls.port = int(cls.process.stdout.readline())
            cls.largest = 0
            atexit.register(cls.stop)
        return ("127.0.0.1", cls.port)

    @classmethod
    def stop(cls) -> None:
        if cls.process is not None and cls.process.poll() is None:
            # An empty connection ends the loop.
            socket.create_connection(("127.0.0.1", cls.port)).close()
            cls.process.wait(timeout=10)


def raw_tcp_seconds(data: bytes) -> float:
    """One transfer of `data` over a fresh loopback TCP connection to
    another process (as a client and the daemon are), from a bytes object
    into a preallocated buffer there (recv_into), until the receiver has
    every byte. Two threads of one process would measure Python's lock
    handover between them instead: on a virtual machine that was a fifth of
    what two processes reach."""
    address = _Receiver.address()
    if len(data) > _Receiver.largest:
        # A first transfer of this size lets the receiver allocate (and
        # touch) its buffer outside the timed one.
        _send(address, data)
        _Receiver.largest = len(data)
    return _send(address, data)


def _send(address: tuple[str, int], data: bytes) -> float:
    client = socket.create_connection(address)
    client.sendall(struct.pack("<q", len(data)))
    start = time.perf_counter()
    client.sendall(data)
    client.recv(1)  # the receiver has every byte
    seconds = time.perf_counter() - start
    client.close()
    return seconds


def raw_tcp_round_trip_seconds(count: int) -> list[float]:
    """`count` one-byte request/reply exchanges over one loopback TCP
    connection (TCP_NODELAY), each timed on its own."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def echo() -> None:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while conn.recv(1):
            conn.sendall(b"r")
        conn.close()

    thread = threading.Thread(target=echo)
    thread.start()
    client = socket.create_connection(server.getsockname())
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        client.sendall(b"q")
        client.recv(1)
        times.append(time.perf_counter() - start)
    client.close()
    thread.join()
    server.close()
    return times
