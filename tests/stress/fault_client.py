"""A client that the fault tests SIGKILL in the middle of something.

    fault_client.py MODE ADDRESS [ARG]

It prints "mid" on its own line once the daemon is in the middle of the
operation MODE names, then waits to be killed:

  upload          a 512 MiB upload: the header and half of the chunks sent
  download        a 512 MiB download: the first chunk read
  execute-stream  a pipelined execution stream of 64 dependent runs (each
                  on the result of the one before), acknowledged at least
                  in part, the stream still open
  region          a download into a shared-memory region, waiting for the
                  result of a run that takes seconds
  cross-host      a copy of 256 MiB to the receive buffer whose descriptor
                  is ARG (hex), on another task of the cluster
"""

from __future__ import annotations

import secrets
import sys
import threading

import numpy as np

import pjrt_client
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, executable_pb2,
                                        types_pb2)

BIG = 512 << 20
CHUNK = 1 << 20
# A run of seconds on the host platform: a loop of 2^24 steps.
SLOW = """HloModule slow
cond {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(16777216)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[16] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[16] add(x, x)
  ROOT t = (s32[], f32[16]) tuple(j, y)
}
ENTRY e {
  x = f32[16] parameter(0)
  zero = s32[] constant(0)
  t0 = (s32[], f32[16]) tuple(zero, x)
  w = (s32[], f32[16]) while(t0), condition=cond, body=body
  ROOT r = f32[16] get-tuple-element(w), index=1
}
"""
ADD = """HloModule add
ENTRY e {
  a = f32[1024] parameter(0)
  ROOT r = f32[1024] add(a, a)
}
"""

forever = threading.Event()


def mid() -> None:
    print("mid", flush=True)
    forever.wait()


def upload(c: pjrt_client.Client) -> None:
    session = c._session
    shape = types_pb2.ArrayShape(dtype=types_pb2.DTYPE_U8, dims=[BIG])

    def requests():
        yield buffer_pb2.UploadRequest(header=buffer_pb2.UploadHeader(
            session_id=session.id, shape=shape, device_id=0))
        chunk = b"\x07" * CHUNK
        for _ in range(BIG // CHUNK // 2):
            yield buffer_pb2.UploadRequest(chunk=chunk)
        mid()

    session.buffers.Upload(requests())


def download(c: pjrt_client.Client) -> None:
    b = c.put(np.full(BIG, 9, np.uint8), device=0)
    b.block_until_ready()
    stream = c._session.buffers.Download(buffer_pb2.DownloadRequest(
        session_id=c._session.id, handle=b.handle))
    next(stream)
    mid()


def execute_stream(c: pjrt_client.Client) -> None:
    exe = c.compile(ADD)
    arg = c.put(np.ones(1024, np.float32), device=0)
    session = c._session

    def requests():
        previous = arg.handle
        for _ in range(64):
            result = secrets.randbits(64) | 1
            yield executable_pb2.ExecuteRequest(
                session_id=session.id, executable_handle=exe.handle,
                argument_handles=[previous], device_id=0,
                result_handles=[result])
            previous = result
        forever.wait()

    responses = session.executables.ExecuteStream(requests())
    next(responses)
    mid()


def region(c: pjrt_client.Client) -> None:
    exe = c.compile(SLOW)
    (result,) = exe.execute([np.ones(16, np.float32)], device=0)
    out = c.create_region(1 << 20).array((16,), np.float32)
    threading.Thread(target=result.to_numpy, kwargs={"out": out},
                     daemon=True).start()
    # The run takes seconds; the download waits for it in the daemon. The
    # test checks what must hold wherever the kill lands.
    forever.wait(0.2)
    mid()


def cross_host(c: pjrt_client.Client, descriptor: bytes) -> None:
    b = c.put(np.ones(256 << 20, np.uint8), device=0)
    b.block_until_ready()
    print("sending", flush=True)
    b.copy_to_remote_device(descriptor)
    mid()


def main() -> None:
    mode, address = sys.argv[1], sys.argv[2]
    with pjrt_client.connect(address, client_name=f"fault-{mode}") as c:
        if mode == "upload":
            upload(c)
        elif mode == "download":
            download(c)
        elif mode == "execute-stream":
            execute_stream(c)
        elif mode == "region":
            region(c)
        elif mode == "cross-host":
            cross_host(c, bytes.fromhex(sys.argv[3]))
        else:
            raise SystemExit(f"fault_client.py: unknown mode {mode}")


if __name__ == "__main__":
    main()
