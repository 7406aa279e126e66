"""Compile and execute through pjrt_client: signatures, the compile cache,
handles and their owners, and precise errors for bad programs and bad
arguments (after each of which the daemon keeps serving)."""

from __future__ import annotations

import gc
import subprocess
import sys

import grpc
import numpy as np
import pytest

import pjrt_client
from pjrt_client._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
from conftest import REPO
from pjrt_client._proto.pjrt.v1 import executable_pb2

ADD = ("HloModule jit_add, "
       "entry_computation_layout={(f32[3]{0}, f32[3]{0})->f32[3]{0}}\n"
       """
ENTRY main.4 {
  Arg_0.1 = f32[3]{0} parameter(0)
  Arg_1.2 = f32[3]{0} parameter(1)
  ROOT add.3 = f32[3]{0} add(Arg_0.1, Arg_1.2)
}
""")

SCALE_BF16 = """HloModule scale_bf16

ENTRY main {
  x = bf16[4] parameter(0)
  two = bf16[] constant(2)
  twos = bf16[4] broadcast(two), dimensions={}
  ROOT r = bf16[4] multiply(x, twos)
}
"""


def add_program(name: str) -> str:
    """ADD under another module name: a program of its own in the cache."""
    return ADD.replace("jit_add", name)


def assert_serving(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


# --- compile ----------------------------------------------------------------

def test_compile_returns_the_signature(client):
    executable = client.compile(ADD)
    assert executable.name == "jit_add"
    assert executable.parameter_shapes == [
        pjrt_client.ArrayShape("f32", (3,)),
        pjrt_client.ArrayShape("f32", (3,))]
    dtype, shape = executable.result_shapes[0]
    assert (dtype, shape) == ("f32", (3,))
    assert executable.parameter_shapes[0].numpy_dtype == np.float32
    assert not executable.result_is_tuple
    assert executable.compile_seconds >= 0
    assert len(executable.fingerprint) == 64
    int(executable.fingerprint, 16)
    assert "jit_add: (f32[3], f32[3]) -> f32[3]" in repr(executable)


def test_second_compile_from_another_client_is_a_cache_hit(address):
    program = add_program("cache_hit_" + address.split(":")[0])
    with pjrt_client.connect(address) as a, pjrt_client.connect(address) as b:
        before = a.stats()["compile_cache"]
        first = a.compile(program)
        second = b.compile(program)
        after = a.stats()["compile_cache"]
    assert not first.cache_hit
    assert second.cache_hit
    assert second.fingerprint == first.fingerprint
    assert second.compile_seconds <= first.compile_seconds
    assert after["compiles"] == before["compiles"] + 1
    assert after["hits"] >= before["hits"] + 1
    assert after["capacity"] >= 1


def test_compile_accepts_bytes_and_rejects_other_types(client):
    assert client.compile(ADD.encode()).name == "jit_add"
    with pytest.raises(TypeError, match="hlo_text must be str or bytes"):
        client.compile(42)


# --- bad programs -----------------------------------------------------------

BAD_PROGRAMS = {
    "syntax": (pjrt_client.InvalidArgumentError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  ROOT r = f32[3] add(p0, p0
}
""", ["line 6", "column 1", "\n}\n^"]),
    "type": (pjrt_client.InvalidArgumentError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  p1 = f32[4] parameter(1)
  ROOT sum = f32[3] add(p0, p1)
}
""", ["line 6", "%sum", "f32[3]", "f32[4]", "^"]),
    "unknown_op": (pjrt_client.UnimplementedError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  ROOT r = f32[3] frobnicate(p0)
}
""", ["frobnicate", "line 5"]),
    "undefined_name": (pjrt_client.InvalidArgumentError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  ROOT r = f32[3] add(p0, nowhere)
}
""", ["nowhere", "not defined", "line 5", "^"]),
    "cycle": (pjrt_client.InvalidArgumentError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  a = f32[3] add(p0, b)
  b = f32[3] add(p0, a)
  ROOT r = f32[3] negate(b)
}
""", ["depends on itself", "%a", "%b", "line 5"]),
    "parameter_gap": (pjrt_client.InvalidArgumentError, """HloModule bad

ENTRY main {
  p0 = f32[3] parameter(0)
  p2 = f32[3] parameter(2)
  ROOT r = f32[3] add(p0, p2)
}
""", ["parameter 1 is missing", "0 and 2", "line 5"]),
}


@pytest.mark.parametrize("kind", sorted(BAD_PROGRAMS))
def test_bad_program_gets_a_precise_error_and_the_daemon_keeps_serving(
        client, address, kind):
    error, text, fragments = BAD_PROGRAMS[kind]
    with pytest.raises(error) as info:
        client.compile(text)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    assert_serving(address)
    # The same client still works.
    assert client.compile(ADD).name == "jit_add"


def test_empty_program_is_invalid_argument(client):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="hlo_text is empty"):
        client.compile("\n")


def test_failed_compiles_are_not_cached(client):
    before = client.stats()["compile_cache"]
    for _ in range(2):
        with pytest.raises(pjrt_client.InvalidArgumentError):
            client.compile(BAD_PROGRAMS["syntax"][1])
    after = client.stats()["compile_cache"]
    assert after["failures"] == before["failures"] + 2
    assert after["compiles"] == before["compiles"] + 2


# --- execute ----------------------------------------------------------------

def test_execute_buffers_and_numpy_arrays(client):
    executable = client.compile(ADD)
    x = client.put(np.array([1, 2, 3], np.float32), device=2)
    # A numpy argument is uploaded to the device of the Buffer arguments.
    (y,) = executable.execute([x, np.array([10, 20, 30], np.float32)])
    assert y.device.id == 2
    np.testing.assert_array_equal(y.to_numpy(), [11, 22, 33])
    # Lists take the parameter's dtype; results can be fed back in.
    (z,) = executable(y, [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(z.to_numpy(), [11.5, 22.5, 33.5])
    (w,) = executable([1, 1, 1], [2, 2, 2], device=1)
    assert w.device.id == 1 and w.dtype == np.float32


def test_execute_takes_bf16_as_floats_or_bit_patterns(client):
    executable = client.compile(SCALE_BF16)
    assert executable.parameter_shapes[0].dtype == "bf16"
    floats = np.array([1.0, -1.5, 3.0, 0.25], np.float32)
    bits = (floats.view(np.uint32) >> 16).astype(np.uint16)
    for argument in (floats, bits):
        (y,) = executable.execute([argument])
        assert y.dtype_name == "bf16"
        with pytest.warns(UserWarning, match="ml_dtypes"):
            raw = y.to_numpy()
        values = (raw.astype(np.uint32) << 16).view(np.float32)
        np.testing.assert_array_equal(values, 2 * floats)


@pytest.mark.parametrize("args,fragments", [
    ("one", ["takes 2 argument", "got 1"]),
    ("three", ["takes 2 argument", "got 3"]),
    ("shape", ["argument 1", "f32[4]", "f32[3]"]),
    ("dtype", ["argument 0", "s32", "f32"]),
    ("device", ["argument 1", "host:2", "host:0"]),
])
def test_bad_arguments_are_invalid_argument_naming_them(client, address, args,
                                                        fragments):
    executable = client.compile(ADD)
    good = client.put(np.zeros(3, np.float32), device=0)
    arguments = {
        "one": [good],
        "three": [good, good, good],
        "shape": [good, client.put(np.zeros(4, np.float32))],
        "dtype": [client.put(np.zeros(3, np.int32)), good],
        "device": [good, client.put(np.zeros(3, np.float32), device=2)],
    }[args]
    with pytest.raises(pjrt_client.InvalidArgumentError) as info:
        executable.execute(arguments, device=0)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    assert_serving(address)


def test_unknown_device_is_invalid_argument(client):
    executable = client.compile(ADD)
    x = client.put(np.zeros(3, np.float32))
    with pytest.raises(pjrt_client.InvalidArgumentError, match="device 9"):
        executable.execute([x, x], device=9)


def raw_execute(client, session_id: int, handle: int, args: list[int]):
    return client._session.executables.Execute(
        executable_pb2.ExecuteRequest(session_id=session_id,
                                      executable_handle=handle,
                                      argument_handles=args), timeout=10)


def test_unknown_and_foreign_executables_are_not_found_alike(address):
    with pjrt_client.connect(address) as mine, \
            pjrt_client.connect(address) as theirs:
        executable = theirs.compile(ADD)
        x = mine.put(np.zeros(3, np.float32))
        errors = []
        for handle in (executable.handle, 0x5EC12E7):
            with pytest.raises(grpc.RpcError) as info:
                raw_execute(mine, mine._session.id, handle,
                            [x.handle, x.handle])
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
            errors.append(info.value.details().replace(
                f"{handle:#x}", "HANDLE"))
        assert errors[0] == errors[1]
        assert "not an executable of this session" in errors[0]
        # A buffer of another client is NOT_FOUND too, naming the argument.
        y = theirs.put(np.zeros(3, np.float32))
        own = mine.compile(ADD)
        with pytest.raises(pjrt_client.NotFoundError, match="argument 1"):
            own.execute([x, y])


def test_deleted_executable_cannot_run(client):
    executable = client.compile(ADD)
    handle = executable.handle
    x = client.put(np.zeros(3, np.float32))
    executable.delete()
    executable.delete()  # idempotent
    assert executable.is_deleted
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="was deleted"):
        executable.execute([x, x])
    with pytest.raises(grpc.RpcError) as info:
        raw_execute(client, client._session.id, handle, [x.handle, x.handle])
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_garbage_collected_executables_are_dropped(address):
    with pjrt_client.connect(address) as c:
        before = c.stats()["executable_count"]
        executables = [c.compile(ADD) for _ in range(3)]
        assert c.stats()["executable_count"] == before + 3
        del executables
        gc.collect()
        assert c.stats()["executable_count"] == before


def test_closing_the_client_drops_its_executables_and_results(address):
    with pjrt_client.connect(address) as observer:
        before = observer.stats()
        c = pjrt_client.connect(address)
        executable = c.compile(ADD)
        (y,) = executable.execute([np.ones(3, np.float32),
                                   np.ones(3, np.float32)])
        during = observer.stats()
        assert during["executable_count"] == before["executable_count"] + 1
        assert during["buffer_count"] == before["buffer_count"] + 1
        c.close()
        after = observer.stats()
        assert after["executable_count"] == before["executable_count"]
        assert after["buffer_count"] == before["buffer_count"]
        # Objects of a closed client fail cleanly on this side.
        executable.delete()
        y.delete()


def test_capabilities_include_executables(client):
    assert "executables" in client.info()["capabilities"]
    assert client.info()["protocol_version_max"] >= 2


def test_readme_python_example_runs(daemon):
    # The README's Python example, against this test's daemon.
    readme = (REPO / "README.md").read_text()
    blocks = [b.split("```")[0] for b in readme.split("```python\n")[1:]]
    example = next(b for b in blocks if "client.compile(" in b)
    example = example.replace("unix:///tmp/pjrtd.sock", daemon.addresses[0])
    result = subprocess.run([sys.executable, "-c", example],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Executable(jit_scale: (f32[2,3], f32[]) -> f32[2,3]" in \
        result.stdout
    assert "[[ 0. 10. 20.]\n [30. 40. 50.]]" in result.stdout


def test_execute_with_wait_returns_ready_results(client):
    exe = client.compile(ADD)
    x = client.put(np.arange(3, dtype=np.float32))
    (r,) = exe.execute([x, x], wait=True)
    info = r.describe()
    assert info.ready and not info.error_message
    np.testing.assert_array_equal(r.to_numpy(), [0, 2, 4])
