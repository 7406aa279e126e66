"""_Session: the daemon-side session behind a Client."""

from __future__ import annotations

import collections
import threading
from typing import Any

import grpc

from pjrt_client._errors import Error, from_rpc_error
from pjrt_client._proto.pjrt.v1 import (buffer_pb2, buffer_pb2_grpc,
                                        executable_pb2, executable_pb2_grpc,
                                        session_pb2, session_pb2_grpc)
from pjrt_client._common import (_call, _CALL_TIMEOUT, PROTOCOL_VERSION,
                                 _RELEASE_BATCH, _RELEASE_BYTES,
                                 _RELEASE_INTERVAL, WHOLE_CLUSTER_VERSION)


class _Session:
    """The daemon-side session behind a Client; buffers point at it."""

    def __init__(self, channel: grpc.Channel, client_name: str,
                 attach: bool, whole_cluster: bool = False) -> None:
        self._sessions = session_pb2_grpc.SessionsStub(channel)
        self.buffers = buffer_pb2_grpc.BuffersStub(channel)
        self.executables = executable_pb2_grpc.ExecutablesStub(channel)
        # Bulk transfers with the chunks' messages as raw bytes: no
        # protobuf copy of each MiB on the way (see _chunk_payload).
        self.raw_download = channel.unary_stream(
            "/pjrt.v1.Buffers/Download",
            request_serializer=buffer_pb2.DownloadRequest.SerializeToString,
            response_deserializer=None)
        self.raw_upload = channel.stream_unary(
            "/pjrt.v1.Buffers/Upload", request_serializer=None,
            response_deserializer=buffer_pb2.BufferInfo.FromString)
        response = _call(self._sessions.OpenSession,
                         session_pb2.OpenSessionRequest(
                             client_name=client_name,
                             protocol_version=(WHOLE_CLUSTER_VERSION
                                               if whole_cluster
                                               else PROTOCOL_VERSION),
                             whole_cluster=whole_cluster))
        self.id: int = response.session_id
        self.public_id: int = response.public_id
        self.closed = False
        self._lock = threading.Lock()
        # Handles the program dropped (appended by finalizers, which may run
        # on any thread at any moment: deques, no locks), with the bytes of
        # the buffers among them.
        self._dropped_buffers: collections.deque[int] = collections.deque()
        self._dropped_executables: collections.deque[int] = \
            collections.deque()
        self._dropped_bytes = 0
        self._takes = 0  # how often a request took the dropped handles
        self._flushes: set[Any] = set()
        self._flusher: threading.Thread | bool | None = None
        # Reentrant: a finalizer may run while this thread starts the
        # flusher (creating a thread allocates, which may collect).
        self._flusher_lock = threading.RLock()
        self._wake = threading.Event()
        self._attach_call = None
        if attach:
            call = self._sessions.Attach(
                session_pb2.AttachRequest(session_id=self.id))
            try:
                next(call)  # the daemon confirms the attachment
            except grpc.RpcError as e:
                raise from_rpc_error(e) from None
            self._attach_call = call

    # --- handles the program dropped -------------------------------------

    def drop_buffer(self, handle: int, nbytes: int) -> None:
        """Frees a garbage-collected Buffer's handle: carried by the next
        Execute, or sent in a batch by the flusher (a finalizer must not
        wait for the daemon)."""
        if self.closed:
            return  # the daemon freed it with the session
        self._dropped_buffers.append(handle)
        self._dropped_bytes += nbytes
        self._dropped()

    def drop_executable(self, handle: int) -> None:
        if self.closed:
            return
        self._dropped_executables.append(handle)
        self._dropped()

    def _dropped(self) -> None:
        try:
            if len(self._dropped_buffers) + len(self._dropped_executables) \
                    >= _RELEASE_BATCH or self._dropped_bytes >= _RELEASE_BYTES:
                self.flush_releases(wait=False)
            elif self._flusher is None:
                self._start_flusher()
        except Exception:  # noqa: BLE001 - called by finalizers
            pass  # the channel is closed: the session went with it

    @property
    def has_releases(self) -> bool:
        """Whether what the program dropped may still hold daemon memory:
        queued, or being deleted by a flush in flight."""
        return bool(self._dropped_buffers or self._dropped_executables or
                    self._flushes)

    def take_releases(self) -> tuple[list[int], list[int]]:
        """Empties the queues of dropped handles (for a request to carry
        them)."""
        buffers: list[int] = []
        executables: list[int] = []
        try:
            while True:
                buffers.append(self._dropped_buffers.popleft())
        except IndexError:
            pass
        try:
            while True:
                executables.append(self._dropped_executables.popleft())
        except IndexError:
            pass
        if buffers:
            self._dropped_bytes = 0
        self._takes += 1
        return buffers, executables

    def flush_releases(self, wait: bool) -> None:
        """Sends the dropped handles now; ``wait``: until the daemon has
        freed them, and those that flushes in flight are deleting."""
        if self.closed:
            return
        if wait:
            for call in list(self._flushes):
                try:
                    call.result()
                except (grpc.RpcError, grpc.FutureCancelledError):
                    pass  # gone already, or the session is
        buffers, executables = self.take_releases()
        calls = []
        if buffers:
            calls.append(self.buffers.DeleteBuffers.future(
                buffer_pb2.DeleteBuffersRequest(session_id=self.id,
                                                handles=buffers,
                                                skip_unknown=True),
                timeout=_CALL_TIMEOUT))
        for handle in executables:
            calls.append(self.executables.DeleteExecutable.future(
                executable_pb2.DeleteExecutableRequest(
                    session_id=self.id, executable_handle=handle),
                timeout=_CALL_TIMEOUT))
        for call in calls:
            if wait:
                try:
                    call.result()
                except grpc.RpcError:
                    pass  # gone already, or the session is
            else:
                # A future dropped before it is done cancels its call.
                self._flushes.add(call)
                call.add_done_callback(self._flushes.discard)

    def _start_flusher(self) -> None:
        with self._flusher_lock:
            if self._flusher is not None or self.closed:
                return
            self._flusher = True  # being started
            thread = threading.Thread(target=self._flush_loop,
                                      name="pjrt-release", daemon=True)
            thread.start()
            self._flusher = thread

    def _flush_loop(self) -> None:
        # Handles dropped while Executes keep coming ride on them; those
        # that no Execute took for a whole interval are sent (so each waits
        # at most two intervals).
        seen = None
        while not self._wake.wait(_RELEASE_INTERVAL):
            if not self.has_releases:
                seen = None
            elif seen == self._takes:
                try:
                    self.flush_releases(wait=False)
                except Exception:  # noqa: BLE001 - the channel closed
                    return  # with the session, which frees them all
                seen = None
            else:
                seen = self._takes

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._wake.set()
        try:
            _call(self._sessions.CloseSession,
                  session_pb2.CloseSessionRequest(session_id=self.id))
        except Error:
            pass  # the daemon is gone, or closed the session already
        finally:
            if self._attach_call is not None:
                self._attach_call.cancel()
                self._attach_call = None
