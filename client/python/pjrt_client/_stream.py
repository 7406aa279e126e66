"""The client's ordered execution stream (pipelined dispatch)."""

from __future__ import annotations

import queue
import threading
from typing import Any

import grpc

from pjrt_client._errors import Error, from_rpc_error
from pjrt_client._proto.pjrt.v1 import buffer_pb2, executable_pb2

# Buffers freed while their run was in flight are deleted in batches of this
# many once the daemon has run it (one call per batch, not per buffer).
_DELETE_BATCH = 64
# Requests per message of a batched stream, at most.
_MAX_BATCH = 256


class ExecuteStream:
    """One ExecuteStream call: requests go out in order without waiting;
    a thread reads the replies. The first failing request ends the stream;
    its error is raised by the next send and by every wait for a request at
    or after it."""

    def __init__(self, session: Any, batched: bool = True) -> None:
        self._session = session
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._sent = 0
        self._acked = -1
        self._error: Error | None = None
        self._ended = False
        self._deferred: list[tuple[int, int]] = []
        # Argument Buffers of requests not yet run, kept alive (so that a
        # dropped one is not deleted before the daemon has used it).
        self._holds: dict[int, list[Any]] = {}
        # Batched (revision 6): the requests queued while the previous
        # message was on its way go out in one message. gRPC sends a
        # stream's messages one at a time, each waiting for the one before.
        self._call = (
            session.executables.ExecuteStreamBatched(self._batches())
            if batched else
            session.executables.ExecuteStream(self._generate()))
        self._reader = threading.Thread(target=self._read,
                                        name="pjrt-execute-stream",
                                        daemon=True)
        self._reader.start()

    def _generate(self):
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _batches(self):
        while True:
            request = self._requests.get()
            if request is None:
                return
            batch = [request]
            end = False
            while len(batch) < _MAX_BATCH:
                try:
                    request = self._requests.get_nowait()
                except queue.Empty:
                    break
                if request is None:
                    end = True
                    break
                batch.append(request)
            yield executable_pb2.ExecuteBatch(requests=batch)
            if end:
                return

    @property
    def error(self) -> Error | None:
        """Why the stream ended early, if it did."""
        return self._error

    @property
    def ended(self) -> bool:
        return self._ended

    def send(self, request: executable_pb2.ExecuteRequest,
             holds: list[Any] | None = None) -> int:
        """Queues ``request``, keeping ``holds`` alive until it has run;
        returns its sequence number."""
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._ended:
                raise Error("the execution stream has ended")
            sequence = self._sent
            self._sent += 1
            if holds:
                self._holds[sequence] = holds
            self._requests.put(request)
        return sequence

    @property
    def last_sent(self) -> int:
        """Sequence number of the latest request (-1 before the first)."""
        return self._sent - 1

    def wait(self, sequence: int) -> None:
        """Returns once request ``sequence`` has run; raises the stream's
        error if it failed at or before it."""
        with self._cond:
            while self._acked < sequence and self._error is None \
                    and not self._ended:
                self._cond.wait()
            if self._acked >= sequence:
                return
            if self._error is not None:
                raise self._error
            raise Error(f"the execution stream ended before request "
                        f"{sequence} ran")

    def is_done(self, sequence: int) -> bool:
        with self._cond:
            return self._acked >= sequence

    def defer_delete(self, sequence: int, handle: int) -> None:
        """Deletes ``handle`` (a result or temporary of request
        ``sequence``) once that request has run."""
        batch = None
        with self._cond:
            if self._ended:
                if sequence <= self._acked:
                    batch = [handle]
                # else: never registered.
            else:
                self._deferred.append((sequence, handle))
                if len(self._deferred) >= _DELETE_BATCH:
                    batch = self._take_deletable()
        if batch:
            self._delete(batch)

    def flush_deletes(self) -> None:
        """Deletes now every deferred handle whose request has run (they
        otherwise go in batches of _DELETE_BATCH)."""
        with self._cond:
            batch = self._take_deletable()
        self._delete(batch)

    def _take_deletable(self) -> list[int]:
        ready = [h for s, h in self._deferred if s <= self._acked]
        self._deferred = [(s, h) for s, h in self._deferred
                          if s > self._acked]
        return ready

    def _delete(self, handles: list[int]) -> None:
        if self._session.closed or not handles:
            return
        try:
            self._session.buffers.DeleteBuffers(
                buffer_pb2.DeleteBuffersRequest(session_id=self._session.id,
                                                handles=handles),
                timeout=60)
        except grpc.RpcError:
            pass  # the session is gone, and the buffers with it

    def _read(self) -> None:
        error: Error | None = None
        try:
            for response in self._call:
                batch = None
                released = None
                with self._cond:
                    self._acked = response.sequence
                    self._cond.notify_all()
                    if len(self._deferred) >= _DELETE_BATCH:
                        batch = self._take_deletable()
                    # One reply acknowledges every request up to its
                    # sequence number.
                    released = []
                    while self._holds:
                        first = next(iter(self._holds))
                        if first > response.sequence:
                            break
                        released.append(self._holds.pop(first))
                # Dropping the holds may delete buffers: outside the lock.
                del released
                if batch:
                    self._delete(batch)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                error = from_rpc_error(e)
        with self._cond:
            self._error = error
            self._ended = True
            batch = self._take_deletable()
            self._deferred = []
            holds, self._holds = self._holds, {}
            self._cond.notify_all()
        del holds
        self._delete(batch)

    def close(self) -> None:
        """Ends the stream after the requests sent; waits for them."""
        with self._cond:
            if self._ended:
                return
        self._requests.put(None)
        self._reader.join()
