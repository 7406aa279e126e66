"""Shared-memory regions: the fast path for clients on the daemon's host."""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import threading
import weakref
from typing import Any

import numpy as np

import grpc

from pjrt_client._errors import (Error, InvalidArgumentError, UnavailableError,
                                 error_for_code)
from pjrt_client._proto.pjrt.v1 import buffer_pb2

# Arrays smaller than this go over the stream even when shared memory
# works: one message costs less than a copy into the staging region.
SHM_THRESHOLD = 1 << 20
# Staging regions are at least this large, so that most arrays fit the
# first one made.
_STAGING_MIN = 64 << 20
# Staging regions kept for reuse.
_STAGING_KEEP = 4
# Alignment of arrays made in a region (the daemon's zero-copy alignment).
ALIGNMENT = 64
# Arrays of at least this many bytes that a download brings through a
# staging region are handed out in the region itself (the region goes back
# to the pool when the array and every view of it are gone): no second
# copy, and pages already faulted in.
LEASE_THRESHOLD = 16 << 20
# Arrays of at least this many bytes that put() copies into a staging
# region keep the region as the buffer's memory where the daemon can alias
# it (the host platform): the daemon copies nothing. The region comes back
# to the pool once the daemon holds no use of it.
ADOPT_THRESHOLD = 32 << 20
# Adopted regions a client may have in use at once (see take_for_put).
_ADOPT_MAX = 2
# madvise advice (Linux 5.14) that faults a range in for writing; Python
# 3.11's mmap module has no name for it.
_MADV_POPULATE_WRITE = 23
# Copies of at least this many bytes into a staging region run on several
# threads (numpy releases the GIL while it copies).
_PARALLEL_COPY = 8 << 20
_copy_pool: Any = None
_copy_lock = threading.Lock()


def copy_bytes(dst: np.ndarray, src: np.ndarray) -> None:
    """np.copyto of two flat uint8 arrays of one size, on several threads
    when large: one core's copy is bounded by the misses it keeps in
    flight."""
    global _copy_pool
    n = dst.nbytes
    workers = min(os.cpu_count() or 1, 8, max(1, n // (4 << 20)))
    if n < _PARALLEL_COPY or workers == 1:
        np.copyto(dst, src)
        return
    with _copy_lock:
        if _copy_pool is None:
            import concurrent.futures
            _copy_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(os.cpu_count() or 1, 8),
                thread_name_prefix="pjrt-copy")
    bounds = [(n * i // workers) & ~4095 for i in range(workers)] + [n]
    futures = [_copy_pool.submit(np.copyto, dst[a:b], src[a:b])
               for a, b in zip(bounds[1:-1], bounds[2:])]
    np.copyto(dst[:bounds[1]], src[:bounds[1]])
    for f in futures:
        f.result()


class _Lease:
    """The memory of an array handed out in a staging region: every view
    of the array keeps this object (its numpy base) alive; when the last
    goes, the region goes back to the pool."""

    def __init__(self, pool: "StagingPool", region: "Region",
                 nbytes: int) -> None:
        self._pool = pool
        self._region = region
        self.__array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "version": 3,
            "data": (region._base, False)}

    def __del__(self) -> None:
        self._pool.give_back(self._region)


def _socket_address(name: str) -> str:
    # A leading '@' names an abstract socket.
    return "\0" + name[1:] if name.startswith("@") else name


def register_memfd(socket_name: str, session_id: int, fd: int, size: int,
                   name: str) -> int:
    """Hands ``fd`` to the daemon's region socket; returns the handle.

    Raises OSError when the socket cannot be reached (the daemon is on
    another host, or in another network namespace), and the daemon's error
    when it refuses the region.
    """
    request = buffer_pb2.RegisterRegionRequest(session_id=session_id,
                                               size_bytes=size, name=name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(10)
        s.connect(_socket_address(socket_name))
        socket.send_fds(s, [request.SerializeToString()], [fd])
        reply = s.recv(4096)
    response = buffer_pb2.RegisterRegionResponse.FromString(reply)
    if response.region_handle == 0:
        code = next((c for c in grpc.StatusCode
                     if c.value[0] == response.error_code),
                    grpc.StatusCode.UNKNOWN)
        raise error_for_code(code, response.error_message)
    return response.region_handle


class Region:
    """Memory shared with the daemon, registered in the client's session.

    Made by :meth:`Client.create_region`. Arrays made with :meth:`array`
    live in it; :meth:`Client.put` of such an array and
    :meth:`Buffer.to_numpy` with ``out=`` such an array move the bytes
    through the shared memory, with one copy on the daemon (none with
    ``put(..., zero_copy=True)`` on the host platform).

    The region is unregistered by :meth:`unregister`, and with the client's
    session. Its memory stays valid while arrays made from it exist.
    """

    def __init__(self, client: Any, size: int, name: str) -> None:
        if size <= 0:
            raise InvalidArgumentError(
                f"a region needs a positive size; got {size}")
        socket_name = client._info.region_socket
        if not socket_name:
            raise UnavailableError(
                f"pjrtd at {client.address} does not accept shared-memory "
                f"regions (it runs with --no-shared-memory, or is older)")
        fd = os.memfd_create(name or "pjrt-region",
                             os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                        | fcntl.F_SEAL_SEAL)
            self._mmap = mmap.mmap(fd, size)
            try:
                self._handle = register_memfd(socket_name, client._session.id,
                                              fd, size, name)
            except OSError as e:
                self._mmap.close()
                raise UnavailableError(
                    f"cannot reach pjrtd's region socket {socket_name!r} "
                    f"({e.strerror or e}); the daemon is not on this host "
                    f"(or not in this network namespace)") from None
        finally:
            os.close(fd)
        self._client = client
        self._session = client._session
        self._size = size
        self._name = name
        self._bytes = np.frombuffer(self._mmap, dtype=np.uint8)
        self._base = self._bytes.ctypes.data
        self._unregistered = False

    @property
    def handle(self) -> int:
        """The region's handle in the session."""
        return self._handle

    @property
    def nbytes(self) -> int:
        """The region's size in bytes."""
        return self._size

    @property
    def name(self) -> str:
        """The name given at creation (shown by :meth:`Client.regions`)."""
        return self._name

    def __repr__(self) -> str:
        return (f"Region({self._name!r}, {self._size} bytes, "
                f"handle={self._handle:#x})")

    def array(self, shape: Any, dtype: Any, offset: int = 0) -> np.ndarray:
        """A numpy array of ``shape`` and ``dtype`` over the region's bytes
        from ``offset`` (which should be a multiple of 64 for zero copy)."""
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dtype.itemsize
        if offset < 0 or offset + nbytes > self._size:
            raise InvalidArgumentError(
                f"an array of {nbytes} bytes at offset {offset} does not "
                f"fit the region of {self._size} bytes")
        return self._bytes[offset:offset + nbytes].view(dtype).reshape(shape)

    def offset_of(self, array: np.ndarray) -> int | None:
        """Where a C-contiguous ``array`` lies in the region, or None if it
        does not lie wholly inside."""
        if self._unregistered or not array.flags.c_contiguous:
            return None
        address = array.ctypes.data
        if address < self._base or \
                address + array.nbytes > self._base + self._size:
            return None
        return address - self._base

    def unregister(self) -> None:
        """Forgets the region on the daemon. Idempotent.

        Raises:
            FailedPreconditionError: a transfer or a zero-copy buffer still
                uses the region (delete those buffers first).
        """
        if self._unregistered or self._session.closed:
            self._unregistered = True
            return
        from pjrt_client._client import _call
        _call(self._session.buffers.UnregisterRegion,
              buffer_pb2.UnregisterRegionRequest(session_id=self._session.id,
                                                 region_handle=self._handle))
        self._unregistered = True

    @property
    def is_registered(self) -> bool:
        """False after :meth:`unregister` or once the client closed."""
        return not self._unregistered and not self._session.closed


def _gone(ref: Any) -> bool:
    """Whether the buffer behind ``ref`` (a weak reference, or None for
    one never known) is deleted or collected."""
    buffer = ref() if ref is not None else None
    return buffer is None or buffer.is_deleted


class StagingPool:
    """Regions a client copies ordinary arrays through, made on demand."""

    def __init__(self, client: Any) -> None:
        self._client = client
        # Reentrant: a lent array's last view may be collected, giving its
        # region back, while this thread holds the lock.
        self._lock = threading.RLock()
        self._free: list[Region] = []
        # Regions that became a buffer's memory, with a weak reference to
        # the buffer: at most _ADOPT_MAX (see take_for_put).
        self._adopted: list[tuple[Region, Any]] = []
        # None: not tried yet; False: shared memory does not work here.
        self._works: bool | None = None if client._info.region_socket \
            else False

    @property
    def usable(self) -> bool:
        return self._works is not False

    def take(self, nbytes: int) -> Region | None:
        """A region of at least ``nbytes`` for the caller alone, or None
        when shared memory does not work with this daemon."""
        return self._take(nbytes)[0]

    def _take(self, nbytes: int) -> tuple[Region | None, bool]:
        """take(), and whether the region was made for this call."""
        if self._works is False:
            return None, False
        with self._lock:
            for i, region in enumerate(self._free):
                if region.nbytes >= nbytes:
                    return self._free.pop(i), False
        size = max(_STAGING_MIN, (nbytes + (1 << 20) - 1) & ~((1 << 20) - 1))
        try:
            region = Region(self._client, size, "pjrt-staging")
        except UnavailableError:
            self._works = False
            return None, False
        except Error:
            # The daemon refused it (e.g. too many regions): stream instead.
            return None, False
        self._works = True
        # Fault every page in now, not during the first transfer: the
        # kernel's populate first, then a write to each page, took a fresh
        # 256 MiB region 415-440 ms on a virtual machine where the writes
        # alone took 740-1020 (each first write of a page is a fault).
        try:
            region._mmap.madvise(_MADV_POPULATE_WRITE)
        except OSError:
            pass  # a kernel before 5.14
        region._bytes[::mmap.PAGESIZE] = 0
        return region, True

    def take_for_put(self, nbytes: int,
                     can_alias: bool) -> tuple[Region | None, bool]:
        """A region for put() to copy ``nbytes`` into, and whether the
        buffer should keep it as its memory (then hand it to
        :meth:`adopted`, else to :meth:`give_back`).

        Fresh memory costs a fault per page, far more than the copy into
        it, so a region is made to be adopted only when none is adopted,
        and a warm one is adopted while fewer than _ADOPT_MAX are: a
        program that keeps its buffers ends up copying through one warm
        region rather than filling a fresh one for each, and one that puts
        and drops arrays (beside a few it keeps) reuses warm regions with
        one copy.
        """
        if not can_alias or nbytes < ADOPT_THRESHOLD:
            return self.take(nbytes), False
        outstanding = self._reclaim()
        region, fresh = self._take(nbytes)
        adopt = (region is not None and region.nbytes <= 2 * nbytes and
                 (outstanding == 0 or
                  (not fresh and outstanding < _ADOPT_MAX)))
        return region, adopt

    def adopted(self, region: Region, buffer: Any) -> None:
        """``region`` (from take_for_put) is ``buffer``'s memory now, or
        may be (``buffer`` None: the upload failed after the daemon may
        have made the buffer)."""
        ref = weakref.ref(buffer) if buffer is not None else None
        with self._lock:
            self._adopted.append((region, ref))

    def _reclaim(self) -> int:
        """Gives adopted regions the daemon no longer uses back to the
        pool; returns how many stay adopted."""
        with self._lock:
            if not any(_gone(ref) for _, ref in self._adopted):
                return len(self._adopted)
        session = self._client._session
        if session.closed:
            return len(self._adopted)
        from pjrt_client._client import _call
        try:
            # Buffers the program dropped are freed first.
            if session.has_releases:
                session.flush_releases(wait=True)
            listed = _call(session.buffers.ListRegions,
                           buffer_pb2.ListRegionsRequest(
                               session_id=session.id))
        except Error:
            return len(self._adopted)
        uses = {r.region_handle: r.uses for r in listed.regions}
        with self._lock:
            kept, freed = [], []
            for region, ref in self._adopted:
                if _gone(ref) and uses.get(region.handle, 1) == 0:
                    freed.append(region)
                else:
                    kept.append((region, ref))
            self._adopted = kept
        for region in freed:
            self.give_back(region)
        return len(kept)

    def lend(self, region: Region, nbytes: int) -> np.ndarray:
        """The first ``nbytes`` of ``region`` (taken from this pool) as a
        flat uint8 array that gives the region back when it and its views
        are gone."""
        return np.asarray(_Lease(self, region, nbytes))

    def give_back(self, region: Region) -> None:
        with self._lock:
            if len(self._free) < _STAGING_KEEP and region.is_registered:
                self._free.append(region)
                return
        try:
            region.unregister()
        except Error:
            pass
