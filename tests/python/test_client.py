"""The pjrt_client package against a real pjrtd."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pjrt_client
from conftest import MEMORY_LIMIT

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.float16, np.float32,
          np.float64]


def random_array(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype,
                            endpoint=True)
    return rng.standard_normal(size=shape).astype(dtype)


def bytes_in_use(client, device=0):
    return client.stats()["devices"][device]["bytes_in_use"]


def await_bytes_in_use(client, expected, timeout=20.0, device=0):
    """Polls stats until the daemon has freed what it must free."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bytes_in_use(client, device) == expected:
            return True
        time.sleep(0.05)
    return bytes_in_use(client, device) == expected


def test_devices_lists_the_three_host_devices(client):
    devices = client.devices()
    assert [d.id for d in devices] == [0, 1, 2]
    assert all(d.platform == "host" and d.addressable for d in devices)
    assert all(d.memory_bytes == MEMORY_LIMIT for d in devices)
    assert str(devices[1]) == "host:1"
    # Host devices never fail for good.
    assert all(d.healthy and d.unhealthy_reason == "" for d in devices)


def test_info_reports_the_protocol(client):
    info = client.info()
    assert info["protocol_version_min"] <= pjrt_client.PROTOCOL_VERSION
    assert info["protocol_version_max"] >= pjrt_client.PROTOCOL_VERSION
    assert info["platform"] == "host"
    assert info["addressable_device_count"] == 3
    # The compiler of the platform's programs.
    assert info["backend"].startswith("host: fused loops")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype(client, dtype):
    x = random_array(dtype, (4, 5), seed=3)
    b = client.put(x, device=2)
    assert b.shape == (4, 5)
    assert b.dtype == np.dtype(dtype)
    assert b.device.id == 2
    assert b.nbytes == x.nbytes
    y = b.to_numpy()
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)


def test_round_trip_bf16(client):
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0000], dtype=np.uint16)
    try:
        import ml_dtypes
        x = bits.view(ml_dtypes.bfloat16)
        b = client.put(x)
        assert b.dtype_name == "bf16"
        np.testing.assert_array_equal(b.to_numpy().view(np.uint16), bits)
    except ImportError:
        b = client.put(bits, bf16=True)
        assert b.dtype_name == "bf16"
        with pytest.warns(UserWarning, match="ml_dtypes"):
            y = b.to_numpy()
        np.testing.assert_array_equal(y, bits)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_scalars_and_zero_size_arrays(client, dtype):
    s = random_array(dtype, (), seed=5)[()]
    b = client.put(s)
    assert b.shape == ()
    np.testing.assert_array_equal(b.to_numpy(), np.asarray(s))
    empty = client.put(np.zeros((0, 3), dtype=dtype))
    assert empty.shape == (0, 3) and empty.nbytes == 0
    assert empty.to_numpy().shape == (0, 3)


def test_non_contiguous_and_big_endian_arrays(client):
    x = np.arange(60, dtype=np.float32).reshape(6, 10)[::2, 1::3]
    np.testing.assert_array_equal(client.put(x).to_numpy(), x)
    be = np.arange(10, dtype=">i4")
    np.testing.assert_array_equal(client.put(be).to_numpy(), be)
    np.testing.assert_array_equal(client.put([[1.5, 2.5]]).to_numpy(),
                                  np.array([[1.5, 2.5]]))


def test_round_trip_256_mib(client):
    x = np.arange(64 << 20, dtype=np.float32)
    before = bytes_in_use(client)
    b = client.put(x)
    assert bytes_in_use(client) == before + (256 << 20)
    np.testing.assert_array_equal(np.asarray(b), x)
    b.delete()
    assert bytes_in_use(client) == before


def test_copy_to_another_device(client):
    x = random_array(np.int64, (100,), seed=9)
    b = client.put(x, device=0)
    c = b.copy_to(client.devices()[2])
    assert c.device.id == 2
    np.testing.assert_array_equal(c.to_numpy(), x)


def test_ready_and_describe(client):
    b = client.put(np.ones(3))
    assert b.block_until_ready() is b
    assert b.is_ready()
    info = b.describe()
    assert info.ready and info.size_bytes == 24


# --- errors ---------------------------------------------------------------

def test_unknown_device_is_invalid_argument(client):
    with pytest.raises(pjrt_client.InvalidArgumentError, match="device 9"):
        client.put(np.zeros(2), device=9)
    # Also a ValueError, as Python code expects.
    with pytest.raises(ValueError):
        client.put(np.zeros(2), device=9)


def test_unsupported_dtype_is_a_type_error(client):
    with pytest.raises(TypeError, match="object"):
        client.put(np.array(["a", None], dtype=object))


def test_over_the_memory_limit_is_resource_exhausted(client):
    huge = np.zeros(MEMORY_LIMIT + 1, dtype=np.uint8)  # not touched: lazy
    with pytest.raises(pjrt_client.ResourceExhaustedError) as e:
        client.put(huge)
    assert str(MEMORY_LIMIT + 1) in e.value.message
    assert isinstance(e.value, pjrt_client.Error)


def test_deleted_buffer_cannot_be_used(client):
    b = client.put(np.zeros(4))
    b.delete()
    b.delete()  # idempotent
    assert b.is_deleted
    with pytest.raises(pjrt_client.FailedPreconditionError, match="deleted"):
        b.to_numpy()


def test_foreign_handles_are_not_found(address, client):
    with pjrt_client.connect(address, client_name="other") as other:
        theirs = other.put(np.zeros(4))
        with pytest.raises(pjrt_client.NotFoundError) as e:
            client.buffer(theirs.handle)
        assert "not a buffer of this session" in e.value.message
        assert e.value.code.name == "NOT_FOUND"


def test_unreachable_daemon_is_unavailable(tmp_path):
    with pytest.raises(pjrt_client.UnavailableError, match="nobody.sock"):
        pjrt_client.connect(f"unix://{tmp_path}/nobody.sock", timeout=0.5)


def test_address_comes_from_the_environment(monkeypatch, address):
    monkeypatch.setenv("PJRTD_ADDRESS", address)
    assert pjrt_client.resolve_address() == address
    with pjrt_client.connect() as c:
        assert c.address == address
    monkeypatch.delenv("PJRTD_ADDRESS")
    assert pjrt_client.resolve_address() == pjrt_client.DEFAULT_ADDRESS


@pytest.mark.parametrize("bad", ["garbage", "127.0.0.1", "127.0.0.1:99999",
                                 "http://localhost:7070", "[::1]7070",
                                 "::1:7070", "localhost:+1", "[]:80"])
def test_an_address_that_names_no_daemon_is_refused_at_once(bad):
    # gRPC would resolve it as a name for the whole timeout.
    start = time.monotonic()
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="is neither unix:///path/name.sock nor "
                             "host:port"):
        pjrt_client.connect(bad, timeout=30)
    assert time.monotonic() - start < 10


def test_addresses_grpc_knows_are_taken_as_they_are():
    for good in ["127.0.0.1:7070", "[::1]:0", "localhost:1", "unix:///x",
                 "dns:///h:1", "ipv4:10.0.0.1:7070", "passthrough:///h:1"]:
        pjrt_client._common.check_address(good)


def test_a_tls_file_that_is_not_pem_is_refused_by_name(tmp_path):
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello\n")
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=f"the TLS CA file {not_pem} holds no PEM"):
        pjrt_client.connect("127.0.0.1:1", tls_ca=str(not_pem), timeout=1)


# --- freeing ------------------------------------------------------------

def test_garbage_collected_buffers_are_freed_on_the_daemon(client):
    before = bytes_in_use(client)
    b = client.put(np.zeros(1 << 20, dtype=np.uint8))
    assert bytes_in_use(client) == before + (1 << 20)
    del b
    gc.collect()
    assert bytes_in_use(client) == before


def test_with_block_deletes_the_buffer(client):
    before = bytes_in_use(client)
    with client.put(np.zeros(1000, dtype=np.uint8)) as b:
        assert bytes_in_use(client) == before + 1000
    assert b.is_deleted
    assert bytes_in_use(client) == before


def test_closing_the_client_frees_its_session(address, client):
    before = bytes_in_use(client)
    other = pjrt_client.connect(address)
    kept = other.put(np.zeros(4096, dtype=np.uint8))
    assert bytes_in_use(client) == before + 4096
    other.close()
    assert bytes_in_use(client) == before
    del kept


def test_vanished_process_has_its_memory_returned(address, client):
    before = bytes_in_use(client)
    script = textwrap.dedent(f"""
        import sys, time, numpy as np, pjrt_client
        c = pjrt_client.connect({address!r})
        b = c.put(np.zeros(8 << 20, dtype=np.uint8))
        print("uploaded", flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "uploaded"
        assert bytes_in_use(client) == before + (8 << 20)
        child.kill()
        child.wait(timeout=10)
        assert await_bytes_in_use(client, before)
    finally:
        child.kill()
        child.wait()


def test_to_numpy_async_overlaps_reads_and_keeps_errors(client):
    arrays = [np.full((256, 256), i, np.float32) for i in range(6)]
    buffers = [client.put(a) for a in arrays]
    futures = [b.to_numpy_async() for b in buffers]
    for a, f in zip(arrays, futures):
        np.testing.assert_array_equal(f.result(timeout=60), a)
    gone = client.put(np.zeros(3, np.float32))
    future = gone.to_numpy_async()
    future.result(timeout=60)
    gone.delete()
    with pytest.raises(pjrt_client.FailedPreconditionError):
        gone.to_numpy_async()


def test_to_numpy_async_reports_the_error_bound_to_the_buffer(address):
    with pjrt_client.connect(address) as c:
        (r,), _ = c.make_cross_host_receive_buffers([("f32", (4,))])
        assert c.cancel_cross_host_receives([r]) == 1
        with pytest.raises(pjrt_client.CancelledError, match="cancelled"):
            r.to_numpy_async().result(timeout=60)


def test_every_public_name_has_a_docstring_and_type_hints():
    import inspect
    missing = []
    for name in pjrt_client.__all__:
        obj = getattr(pjrt_client, name)
        if not inspect.isclass(obj) and not callable(obj):
            continue  # constants
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            function = member.fget if isinstance(member, property) else member
            if not callable(function):
                continue
            if not (function.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
            signature = inspect.signature(function)
            if signature.return_annotation is inspect.Signature.empty:
                missing.append(f"{name}.{attr} returns no type")
            for p in list(signature.parameters.values())[1:]:
                if p.annotation is inspect.Parameter.empty:
                    missing.append(f"{name}.{attr}({p.name}) has no type")
    assert not missing, missing
    manual = pydoc_text()
    for section in ("connect", "Client", "Buffer", "Executable",
                    "make_cross_host_receive_buffers", "to_numpy_async"):
        assert section in manual


def pydoc_text() -> str:
    import pydoc
    return pydoc.render_doc(pjrt_client, renderer=pydoc.plaintext)


# --- arguments and errors a user gets wrong --------------------------------

BF16_DOUBLE = """HloModule bf
ENTRY e {
  p = bf16[3] parameter(0)
  ROOT r = bf16[3] add(p, p)
}"""


@pytest.mark.filterwarnings("ignore:ml_dtypes is not installed")
def test_bf16_parameters_take_python_floats_and_f64_arrays(client):
    """Rounded to nearest even, with or without ml_dtypes."""
    e = client.compile(BF16_DOUBLE)
    for value in ([1.5, 2.25, 3.0], np.array([1.5, 2.25, 3.0]),
                  np.float32([1.5, 2.25, 3.0])):
        (r,) = e.execute([value])
        np.testing.assert_array_equal(r.to_numpy().view(np.uint16),
                                      [0x4040, 0x4090, 0x40C0])
    with pytest.raises(TypeError, match="float64"):
        client.put(np.float64([1.5]), as_type="bf16")


def test_integer_parameters_refuse_values_they_cannot_hold(client):
    e = client.compile("HloModule m\nENTRY e {\n  p = s32[] parameter(0)\n"
                       "  ROOT r = s32[] add(p, p)\n}")
    assert int(e.execute([21])[0].to_numpy()) == 42
    assert int(e.execute([2.0])[0].to_numpy()) == 4
    for bad in (2 ** 40, 2.5, float("nan")):
        with pytest.raises(pjrt_client.InvalidArgumentError,
                           match="does not fit parameter 0's type s32"):
            e.execute([bad])


def test_sub_byte_uploads_refuse_values_out_of_range(client):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="s4 holds -8..7; element 1 is 9"):
        client.put(np.int8([1, 9]), as_type="s4")
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="u4 holds 0..15; element 0 is 16"):
        client.put(np.uint8([16]), as_type="u4")
    b = client.put(np.int8([-8, 7]), as_type="s4")
    np.testing.assert_array_equal(b.to_numpy(), [-8, 7])


def test_one_array_for_args_is_a_type_error_not_one_row_each(client):
    from programs import ADD_ONE
    e = client.compile(ADD_ONE)
    with pytest.raises(TypeError, match="pass \\[x\\] for one"):
        e.execute(np.float32([[1, 2, 3], [4, 5, 6]]))


def test_a_donated_buffer_is_settled_with_its_error(client):
    e = client.compile("""HloModule d, input_output_alias={ {}: (0, {}) }
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] add(p, p)
}""")
    x = client.put(np.ones(4, np.float32))
    e.execute([x])
    assert x.is_ready()  # a loop waiting for it ends
    with pytest.raises(pjrt_client.FailedPreconditionError, match="donated"):
        x.to_numpy()


def test_a_closed_clients_calls_raise_failed_precondition(daemon):
    with pjrt_client.connect(daemon.addresses[0]) as c:
        x = c.put(np.ones(3, np.float32))
    for call in (x.to_numpy, x.is_ready, lambda: x.copy_to(1), c.stats,
                 c.devices, c.ping):
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="closed"):
            call()


def test_dropped_pipelined_results_are_freed_by_synchronize(daemon):
    """Not only in batches of 64: once the runs are done and the results
    dropped, synchronize() (and stats()) free them on the daemon."""
    from programs import ADD_ONE
    with pjrt_client.connect(daemon.addresses[0]) as c:
        step = c.compile(ADD_ONE)
        before = c.stats()["buffer_count"]
        x = c.put(np.zeros(4, np.float32))
        for _ in range(10):
            (x,) = step.execute([x], pipelined=True)
        np.testing.assert_array_equal(x.to_numpy(), np.full(4, 10))
        x.delete()
        c.synchronize()
        assert c.stats()["buffer_count"] == before


def test_a_second_daemon_cannot_take_a_served_tcp_port(daemon, tmp_path):
    """Refused, as a served unix socket is (with SO_REUSEPORT both would
    serve it, each getting some of the clients)."""
    from conftest import PJRTD
    taken = daemon.addresses[1]
    second = subprocess.run(
        [str(PJRTD), "--platform", "host", "--listen", taken,
         "--address-file", str(tmp_path / "addresses")],
        capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert "could not listen" in second.stderr
    assert not (tmp_path / "addresses").exists()
    with pjrt_client.connect(taken) as c:
        c.ping()
