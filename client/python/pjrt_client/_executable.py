"""Executable: a compiled program, run on one device or many."""

from __future__ import annotations

import weakref
from typing import Any, Sequence, TYPE_CHECKING

import numpy as np

from pjrt_client import _dtypes
from pjrt_client._stream import ExecuteStream
from pjrt_client._errors import (FailedPreconditionError, InvalidArgumentError,
                                 ResourceExhaustedError)
from pjrt_client._proto.pjrt.v1 import buffer_pb2, executable_pb2
from pjrt_client._common import (_array_shape, ArrayShape, _call, Device,
                                 _device_id, _random_handles, _Run)
from pjrt_client._buffer import Buffer

if TYPE_CHECKING:
    from pjrt_client._client import Client


def _exact(value: Any, dtype: Any, index: int, expected: Any) -> np.ndarray:
    """Python values as an array of the parameter's integer type, refusing
    those it cannot hold (2**40 for s32, 2.5, NaN) instead of wrapping or
    truncating them; other types as numpy converts them."""
    if dtype is None or np.dtype(dtype).kind not in "iu":
        return np.asarray(value, dtype=dtype)
    raw = np.asarray(value)
    if raw.dtype.kind == "b":
        return raw.astype(dtype)
    try:
        with np.errstate(invalid="ignore"):
            array = raw.astype(dtype)
        exact = raw.dtype.kind in "iuf" and np.array_equal(
            array.astype(np.float64 if raw.dtype.kind == "f" else raw.dtype),
            raw)
    except (OverflowError, TypeError, ValueError):
        exact = False
    if not exact:
        raise InvalidArgumentError(
            f"argument {index} does not fit parameter {index}'s type "
            f"{expected}: {value!r}")
    return array


def _check_sequence(args: Any) -> None:
    """One argument per parameter: a lone array or buffer is a mistake (a
    2-D array would pass as one argument per row)."""
    if isinstance(args, (Buffer, np.ndarray)):
        raise TypeError("args must be a sequence with one argument per "
                        "parameter, not a single "
                        f"{type(args).__name__}; pass [x] for one")


class Executable:
    """A compiled HLO program of the client's session.

    Create one with :meth:`Client.compile`. It is dropped on the daemon when
    :meth:`delete` is called, when a ``with`` block using it ends, when it is
    garbage-collected, or when its client closes; runs already enqueued
    finish regardless.
    """

    def __init__(self, client: "Client",
                 response: executable_pb2.CompileResponse) -> None:
        self._client = client
        self._session = client._session
        self._handle: int = response.executable_handle
        self._name: str = response.name
        self._parameter_shapes = [_array_shape(s)
                                  for s in response.parameter_shapes]
        self._result_shapes = [_array_shape(s) for s in response.result_shapes]
        self._result_protos = list(response.result_shapes)
        # (wire dtype, dims, bytes) of each result, for pipelined runs.
        self._result_meta = []
        for shape in self._result_protos:
            count = 1
            for d in shape.dims:
                count *= d
            self._result_meta.append(
                (shape.dtype, tuple(shape.dims),
                 _dtypes.wire_nbytes(shape.dtype, count)))
        self._result_is_tuple: bool = response.result_is_tuple
        self._compile_seconds: float = response.compile_seconds
        self._cache_hit: bool = response.cache_hit
        self._fingerprint: str = response.fingerprint
        self._num_replicas: int = response.num_replicas
        self._num_partitions: int = response.num_partitions
        self._portable: bool = response.portable
        p = max(1, response.num_partitions)
        flat = list(response.device_assignment)
        self._device_assignment = [flat[i:i + p]
                                   for i in range(0, len(flat), p)]
        self._addressable_device_ids = list(response.addressable_device_ids)
        self._donated_parameters = list(response.donated_parameters)
        self._parameter_is_tuple: bool = response.parameter_is_tuple
        self._deleted = False
        self._finalizer = weakref.finalize(self, self._session.drop_executable,
                                           self._handle)
        self._finalizer.atexit = False

    @property
    def handle(self) -> int:
        """The daemon's handle for the executable (unique in the session)."""
        return self._handle

    @property
    def name(self) -> str:
        """The HloModule's name, e.g. ``'jit_train_step'``."""
        return self._name

    @property
    def parameter_shapes(self) -> list[ArrayShape]:
        """One :class:`ArrayShape` per parameter, in order."""
        return list(self._parameter_shapes)

    @property
    def result_shapes(self) -> list[ArrayShape]:
        """One :class:`ArrayShape` per result (a tuple root's elements,
        flattened in order)."""
        return list(self._result_shapes)

    @property
    def result_is_tuple(self) -> bool:
        """True when the program's root is a tuple of the results."""
        return self._result_is_tuple

    @property
    def compile_seconds(self) -> float:
        """Seconds the daemon spent compiling (or waiting for a compile of
        the same program) for this call; near zero on a cache hit."""
        return self._compile_seconds

    @property
    def cache_hit(self) -> bool:
        """True when the daemon had the program compiled already."""
        return self._cache_hit

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the program text and options (the cache key)."""
        return self._fingerprint

    @property
    def num_replicas(self) -> int:
        """Replicas the program runs as (1 if portable)."""
        return self._num_replicas

    @property
    def num_partitions(self) -> int:
        """Partitions of each replica (1 if portable)."""
        return self._num_partitions

    @property
    def portable(self) -> bool:
        """True when compiled ``portable=True``: runs on any one device."""
        return self._portable

    @property
    def device_assignment(self) -> list[list[int]]:
        """``[replica][partition]`` -> device id; empty when portable."""
        return [list(row) for row in self._device_assignment]

    @property
    def addressable_devices(self) -> list[Device]:
        """The devices :meth:`execute_replicated` takes one argument list
        for, in order (replica-major)."""
        return [self._client.device(d) for d in self._addressable_device_ids]

    @property
    def donated_parameters(self) -> list[int]:
        """Parameters whose argument buffers are donated to results (by the
        module's ``input_output_alias``): invalid after a run."""
        return list(self._donated_parameters)

    @property
    def parameter_is_tuple(self) -> bool:
        """True when the only parameter is a tuple: pass its elements (see
        :attr:`parameter_shapes`), or one tuple buffer with
        ``arguments_are_tupled=True``."""
        return self._parameter_is_tuple

    def __repr__(self) -> str:
        params = ", ".join(str(s) for s in self._parameter_shapes)
        results = ", ".join(str(s) for s in self._result_shapes)
        if self._result_is_tuple:
            results = f"({results})"
        state = "deleted" if self._deleted else f"handle={self._handle:#x}"
        return f"Executable({self._name}: ({params}) -> {results}, {state})"

    def _argument(self, index: int, value: Any, device_id: int,
                  temporaries: list[Buffer],
                  pipelined_on: ExecuteStream | None = None) -> int:
        """The handle of argument ``index``, uploading host data first."""
        if isinstance(value, Buffer):
            if pipelined_on is not None and value._pending is not None and \
                    value._pending[0] is pipelined_on:
                # The stream runs in order: no need to wait.
                value._check_alive()
            else:
                value._sync()
            return value.handle
        expected = (self._parameter_shapes[index]
                    if index < len(self._parameter_shapes) else None)
        array = value if isinstance(value, np.ndarray) else None
        if array is None:
            # Python scalars and lists take the parameter's type.
            dtype = None
            if expected is not None and expected.dtype not in (
                    "bf16", *_dtypes.MINIFLOAT_NAMES):
                dtype = expected.numpy_dtype
            array = _exact(value, dtype, index, expected)
        as_type = None
        if expected is not None and expected.dtype == "bf16":
            # (BFLOAT16 is None without ml_dtypes: numpy reads a dtype
            # compared with None as the default float64.)
            if array.dtype.kind == "f" and (_dtypes.BFLOAT16 is None or
                                            array.dtype != _dtypes.BFLOAT16):
                array = _dtypes.float_to_bf16_bits(array)
            if array.dtype == np.uint16:
                as_type = "bf16"
        elif expected is not None and \
                expected.dtype in ("s4", "u4", "s2", "u2") and \
                array.dtype.kind in "iub":
            # Integers take the parameter's sub-byte type (one per byte).
            as_type = expected.dtype
            array = array.astype(_dtypes.RAW_CODES[
                _dtypes.wire_from_name(as_type)])
        elif expected is not None and \
                expected.dtype in _dtypes.MINIFLOAT_NAMES and \
                not _dtypes.is_ml_dtype(array.dtype, expected.dtype):
            if array.dtype != np.uint8:
                raise TypeError(
                    f"parameter {index} is {expected.dtype}: pass "
                    f"ml_dtypes arrays or its uint8 codes, not {array.dtype}")
            as_type = expected.dtype  # codes
        buffer = self._client.put(array, device=device_id, as_type=as_type)
        temporaries.append(buffer)
        return buffer.handle

    def _check_alive(self) -> None:
        if self._deleted:
            raise FailedPreconditionError(
                f"executable {self._name} ({self._handle:#x}) was deleted; "
                f"compile the program again")

    def _forget_donated(self, args: Sequence[Any]) -> None:
        """Donated arguments stop answering from what this client knew of
        them (fetched bytes, readiness): the daemon says they are gone."""
        for i in self._donated_parameters:
            if i < len(args) and isinstance(args[i], Buffer):
                args[i]._data = None
                args[i]._run = None

    def _handles(self, args: Sequence[Any], device_id: int,
                 temporaries: list[Buffer],
                 pipelined_on: ExecuteStream | None = None) -> list[int]:
        _check_sequence(args)
        return [self._argument(i, a, device_id, temporaries, pipelined_on)
                for i, a in enumerate(args)]

    _OPTIONS: dict[tuple, executable_pb2.ExecuteOptions] = {}

    @staticmethod
    def _options(launch_id: int, arguments_are_tupled: bool,
                 untuple_result: bool, wait: bool = False,
                 fetch: bool = False) -> executable_pb2.ExecuteOptions:
        # Requests copy their options: one message per combination serves.
        key = (int(launch_id), bool(arguments_are_tupled),
               bool(untuple_result), bool(wait), bool(fetch))
        options = Executable._OPTIONS.get(key)
        if options is None:
            options = executable_pb2.ExecuteOptions(
                launch_id=key[0], arguments_are_tupled=key[1],
                keep_tuple_result=not key[2], wait_until_ready=key[3],
                fetch_results=key[4])
            if key[0] == 0:  # launch ids vary; keep the cache small
                Executable._OPTIONS[key] = options
        return options

    def execute(self, args: Sequence[Any],
                device: Device | int | None = None, *, launch_id: int = 0,
                arguments_are_tupled: bool = False,
                untuple_result: bool = True,
                wait: bool = False, fetch: bool = False,
                pipelined: bool = False) -> list[Buffer]:
        """Enqueues one run on one device and returns its results at once.

        Args:
            args: one argument per parameter: a :class:`Buffer` of this
                client (on ``device``), or host data (a numpy array, scalar
                or list), which is uploaded to ``device`` first. For a bf16
                parameter, host data may be uint16 bit patterns or floats
                (rounded to nearest even). With ``arguments_are_tupled``,
                one tuple buffer (see :meth:`Client.make_tuple`).
            device: where to run; default: the device of the first Buffer
                argument, else device 0. A program over several devices
                runs only the replica and partition assigned to ``device``
                (see :meth:`execute_sharded`).
            launch_id: identifies one launch over several devices.
            arguments_are_tupled: ``args`` is one tuple buffer holding the
                elements of the program's tuple parameter.
            untuple_result: a tuple root comes back as one buffer per
                element (default), else as one tuple buffer.
            wait: return only once the results are ready: one round trip
                for a run whose results are read at once (an error of the
                run is still raised by whoever reads them).
            fetch: as ``wait``, and the reply also carries the contents of
                the results (those that fit in 1 MiB together, in order):
                their ``to_numpy`` then costs no call. A step that runs and
                reads a scalar loss is one round trip.
            pipelined: return without waiting for the daemon at all: the
                run goes out on the client's ordered execution stream with
                result handles chosen here, so a loop of dependent steps
                (each feeding the next) costs no round trip per step. Any
                error, including one the daemon finds in the request
                (a wrong argument, say), is raised by the first read of a
                result of that run or a later one (``to_numpy``,
                ``block_until_ready``...), and by the next pipelined run.

        Arguments of :attr:`donated_parameters` are donated: the result
        reuses their memory and the argument buffer can no longer be used
        (compile with ``non_donatable_parameters`` to keep them).

        The results become ready when the run finishes; an error during the
        run is raised by whoever reads them (``to_numpy``,
        ``block_until_ready``).

        Raises:
            InvalidArgumentError: wrong number of arguments, or an argument
                of the wrong shape, dtype or device (the message names it).
            NotFoundError: an argument that is not a buffer of this client.
            FailedPreconditionError: a deleted executable, or a deleted or
                donated argument.
        """
        self._check_alive()
        _check_sequence(args)
        args = list(args)
        if device is None:
            device_id = next((a._device_id for a in args
                              if isinstance(a, Buffer)), None)
            if device_id is None:
                device_id = self._client._default_device_id()
        else:
            device_id = _device_id(device)
        if pipelined:
            if wait or fetch or not untuple_result:
                raise InvalidArgumentError(
                    "pipelined runs return one buffer per result without "
                    "waiting; they cannot be combined with wait=True, "
                    "fetch=True or untuple_result=False")
            return self._execute_pipelined(args, device_id, launch_id,
                                           arguments_are_tupled)
        temporaries: list[Buffer] = []
        try:
            handles = self._handles(args, device_id, temporaries)
            self._forget_donated(args)
            request = executable_pb2.ExecuteRequest(
                session_id=self._session.id, executable_handle=self._handle,
                argument_handles=handles, device_id=device_id,
                options=self._options(launch_id, arguments_are_tupled,
                                      untuple_result, wait, fetch))
            # What the program dropped goes with the run: no call of its own.
            buffers, executables = self._session.take_releases()
            request.release_buffers.extend(
                buffers + [t.handle for t in temporaries])
            request.release_executables.extend(executables)
            for buffer in temporaries:
                # The run holds its own references to uploaded arguments.
                buffer._deleted = True
                buffer._finalizer.detach()
            try:
                response = self._client._execute_call(request)
            except ResourceExhaustedError:
                # Memory or a quota may be held by what the program dropped
                # and the daemon has not freed yet: free it, then retry.
                if not (buffers or executables or
                        self._session.has_releases):
                    raise
                self._session.flush_releases(wait=True)
                del request.release_buffers[:]
                del request.release_executables[:]
                response = self._client._execute_call(request)
        finally:
            for buffer in temporaries:
                buffer.delete()  # when the request did not carry them
        return _results(self._client, response.results)

    def _execute_pipelined(self, args: list[Any], device_id: int,
                           launch_id: int,
                           arguments_are_tupled: bool) -> list[Buffer]:
        stream = self._client._execute_stream()
        temporaries: list[Buffer] = []
        handles = self._handles(args, device_id, temporaries,
                                pipelined_on=stream)
        self._forget_donated(args)
        result_handles = _random_handles.take(len(self._result_meta))
        sequence = stream.send(
            executable_pb2.ExecuteRequest(
                session_id=self._session.id, executable_handle=self._handle,
                argument_handles=handles, device_id=device_id,
                options=self._options(launch_id, arguments_are_tupled, True),
                result_handles=result_handles),
            holds=[a for a in args if isinstance(a, Buffer)])
        for buffer in temporaries:
            # Deleted once the run holds them.
            buffer._finalizer.detach()
            buffer._deleted = True
            stream.defer_delete(sequence, buffer.handle)
        pending = (stream, sequence)
        return [Buffer._pending_result(self._client, handle, dtype, dims,
                                       device_id, nbytes, pending)
                for handle, (dtype, dims, nbytes) in zip(result_handles,
                                                         self._result_meta)]

    def execute_sharded(self, args: Sequence[Any], device: Device | int, *,
                        launch_id: int, arguments_are_tupled: bool = False,
                        untuple_result: bool = True) -> list[Buffer]:
        """Runs only the replica and partition assigned to ``device``.

        The calls for every device of :attr:`device_assignment` with the
        same nonzero ``launch_id`` (from this or other clients, in any
        order, from any thread) form one launch and meet at collectives; a
        peer that never comes fails the run after the collective timeout.
        """
        if not launch_id:
            raise InvalidArgumentError(
                "execute_sharded needs a nonzero launch_id shared by the "
                "calls of every device of the launch")
        return self.execute(args, device, launch_id=launch_id,
                            arguments_are_tupled=arguments_are_tupled,
                            untuple_result=untuple_result)

    def execute_portable(self, args: Sequence[Any], device: Device | int, *,
                         arguments_are_tupled: bool = False,
                         untuple_result: bool = True) -> list[Buffer]:
        """Runs a portable executable (compiled ``portable=True``) on
        ``device``."""
        if not self._portable:
            raise InvalidArgumentError(
                f"executable {self._name} was compiled for devices "
                f"{self._addressable_device_ids}, not portable; compile it "
                f"with portable=True to run it on a device of your choice")
        return self.execute(args, device,
                            arguments_are_tupled=arguments_are_tupled,
                            untuple_result=untuple_result)

    def execute_replicated(self, per_device_args: Sequence[Sequence[Any]],
                           *, launch_id: int = 0,
                           arguments_are_tupled: bool = False,
                           untuple_result: bool = True
                           ) -> list[list[Buffer]]:
        """Runs every replica and partition at once.

        Args:
            per_device_args: one argument list per device of
                :attr:`addressable_devices`, in that order; host data is
                uploaded to the device of its list.
            launch_id: the launch's id (default: the daemon picks one).

        Returns:
            One result list per device, in the same order.

        Raises:
            InvalidArgumentError: a wrong number of lists, or a bad argument
                (the message names the replica, partition and argument).
            A run that fails on one device fails on every device: the error,
            naming the replica and partition, is bound to every result.
        """
        self._check_alive()
        lists = list(per_device_args)
        if len(lists) != len(self._addressable_device_ids):
            raise InvalidArgumentError(
                f"executable {self._name} runs on devices "
                f"{self._addressable_device_ids}; got {len(lists)} argument "
                f"lists, one per device is needed")
        temporaries: list[Buffer] = []
        try:
            arguments = [
                executable_pb2.ArgumentList(argument_handles=self._handles(
                    args, device_id, temporaries))
                for args, device_id in zip(lists,
                                           self._addressable_device_ids)
            ]
            for args in lists:
                self._forget_donated(list(args))
            response = _call(self._session.executables.ExecuteReplicated,
                             executable_pb2.ExecuteReplicatedRequest(
                                 session_id=self._session.id,
                                 executable_handle=self._handle,
                                 arguments=arguments,
                                 options=self._options(
                                     launch_id, arguments_are_tupled,
                                     untuple_result)))
        finally:
            for buffer in temporaries:
                buffer.delete()
        return [_results(self._client, r.results) for r in response.results]

    def __call__(self, *args: Any, device: Device | int | None = None
                 ) -> list[Buffer]:
        """Same as :meth:`execute` with the arguments spread out."""
        return self.execute(args, device=device)

    def delete(self) -> None:
        """Drops the executable on the daemon now. Idempotent."""
        if self._deleted:
            return
        self._deleted = True
        self._finalizer.detach()
        if self._session.closed:
            return
        _call(self._session.executables.DeleteExecutable,
              executable_pb2.DeleteExecutableRequest(
                  session_id=self._session.id,
                  executable_handle=self._handle))

    @property
    def is_deleted(self) -> bool:
        """True after :meth:`delete` (on this object)."""
        return self._deleted

    def __enter__(self) -> "Executable":
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _results(client: "Client", infos: Sequence[buffer_pb2.BufferInfo]
             ) -> list[Buffer]:
    """Buffer objects for the results of one run, sharing its state."""
    run = _Run(ready=bool(infos) and all(i.ready and not i.error_code
                                         for i in infos))
    return [Buffer(client, info, run=run) for info in infos]
