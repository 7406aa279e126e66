"""Loopback helpers shared by the benchmarks: free ports, and the raw TCP
baselines that the wire benchmarks compare against."""

from __future__ import annotations

import socket
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


def raw_tcp_seconds(data: bytes) -> float:
    """One transfer of `data` over a fresh loopback TCP connection, from a
    bytes object into a preallocated buffer (recv_into), until the receiver
    has every byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    sink = bytearray(len(data))

    def receive() -> None:
        conn, _ = server.accept()
        view = memoryview(sink)
        got = 0
        while got < len(sink):
            n = conn.recv_into(view[got:], len(sink) - got)
            if n == 0:
                break
            got += n
        conn.sendall(b"k")
        conn.close()

    thread = threading.Thread(target=receive)
    thread.start()
    client = socket.create_connection(server.getsockname())
    start = time.perf_counter()
    client.sendall(data)
    client.recv(1)  # the receiver has every byte
    seconds = time.perf_counter() - start
    client.close()
    thread.join()
    server.close()
    assert sink[:64] == data[:64]
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
