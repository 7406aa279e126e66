"""The daemon as a service: Prometheus metrics on --metrics-listen, each
session's accounting, and gRPC reflection. One daemon for the module, with
its metrics on a port of its own."""

from __future__ import annotations

import json
import os
import pathlib
import pty
import re
import select
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Iterator

import grpc
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from prometheus_client.parser import text_string_to_metric_families

import pjrt_client
from conftest import Daemon

MATMUL = """HloModule matmul
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1},
      rhs_contracting_dims={0}
}
"""

NEGATE = """HloModule negate
ENTRY e {
  x = f32[8] parameter(0)
  ROOT n = f32[8] negate(x)
}
"""


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        d = Daemon(workdir, "--platform", "host", "--host-devices", "2",
                   "--memory-limit", str(1 << 30),
                   "--listen", f"unix://{workdir}/pjrtd.sock",
                   "--listen", "127.0.0.1:0",
                   "--metrics-listen", "127.0.0.1:0")
        yield d
        assert d.stop() == 0, d.log_path.read_text()


@pytest.fixture(scope="module")
def url(daemon: Daemon) -> str:
    with pjrt_client.connect(daemon.addresses[0]) as c:
        info = c.info()
    assert "metrics" in info["capabilities"]
    assert info["metrics_url"].startswith("http://127.0.0.1:")
    return info["metrics_url"]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels, parsed by
    prometheus_client's own parser (which rejects malformed text)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith(
            "text/plain; version=0.0.4")
        text = response.read().decode("utf-8")
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, f"{key} appears twice"
            samples[key] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples, name: str, **labels: str) -> float:
    """The sum over every sample of `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items()
               if n == name and set(labels.items()) <= set(ls))


def test_metric_names_follow_prometheus_conventions(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8")
    families = list(text_string_to_metric_families(text))
    names = {f.name for f in families}
    for family in families:
        assert family.name.startswith("pjrtd_"), family.name
        assert family.documentation, f"{family.name} has no HELP"
        if family.type == "counter":
            # The parser strips _total from a counter family's name; the
            # samples carry it.
            assert all(s.name.endswith("_total") or s.name.endswith(
                "_created") for s in family.samples), family.name
    for expected in (
            "pjrtd_device_memory_in_use_bytes",
            "pjrtd_device_memory_peak_bytes",
            "pjrtd_device_memory_reserved_bytes",
            "pjrtd_device_memory_limit_bytes", "pjrtd_device_allocations",
            "pjrtd_device_memory_fragmentation_ratio",
            "pjrtd_device_queue_depth", "pjrtd_device_executions",
            "pjrtd_device_execution_failures",
            "pjrtd_device_execution_duration_seconds",
            "pjrtd_device_busy_seconds", "pjrtd_transfer_bytes",
            "pjrtd_transfer_duration_seconds", "pjrtd_rpcs",
            "pjrtd_rpc_duration_seconds", "pjrtd_sessions", "pjrtd_buffers",
            "pjrtd_executables", "pjrtd_compile_cache_hits",
            "pjrtd_compile_cache_misses", "pjrtd_compile_cache_evictions",
            "pjrtd_compile_duration_seconds", "pjrtd_cluster_peers_up",
            "pjrtd_client_device_seconds", "pjrtd_build_info"):
        assert expected in names, f"{expected} missing from {sorted(names)}"


def test_the_grafana_dashboard_queries_only_metrics_the_daemon_exports(url):
    dashboard = json.loads((pathlib.Path(__file__).resolve().parents[2]
                            / "deploy/grafana/pjrtd-dashboard.json"
                            ).read_text())
    names = {key[0] for key in scrape(url)}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 20
    for expr in exprs:
        for name in re.findall(r"pjrtd_[a-z_]+", expr):
            assert name in names, f"{name} (in {expr}) is not exported"


def test_only_get_of_metrics_is_served(url):
    base = url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/secrets", timeout=10)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(
            url, data=b"x", method="POST"), timeout=10)
    assert e.value.code == 405


def test_metrics_agree_with_the_work_done_and_with_stats(daemon, url):
    before = scrape(url)
    uploaded = 0
    with pjrt_client.connect(daemon.addresses[1], client_name="metrics-work",
                             data_channels=False) as c:
        a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
        x = c.put(a)
        y = c.put(a.T.copy())
        uploaded += a.nbytes * 2
        matmul = c.compile(MATMUL)
        results = [matmul.execute([x, y])[0] for _ in range(3)]
        read = results[-1].to_numpy()
        np.testing.assert_allclose(read, a @ a.T, rtol=1e-5)
        stats = c.stats()
        after = scrape(url)

    # Transfers: every byte uploaded and read, through gRPC streams.
    assert (value(after, "pjrtd_transfer_bytes_total", direction="to_device",
                  path="stream")
            - value(before, "pjrtd_transfer_bytes_total",
                    direction="to_device", path="stream")) == uploaded
    assert (value(after, "pjrtd_transfer_bytes_total",
                  direction="from_device", path="stream")
            - value(before, "pjrtd_transfer_bytes_total",
                    direction="from_device", path="stream")) == read.nbytes
    # Executions: three that ran, on device 0.
    for name, expected in (("pjrtd_device_executions_total", 3),
                           ("pjrtd_device_execution_failures_total", 0)):
        assert (value(after, name, device="0", kind="cpu")
                - value(before, name, device="0", kind="cpu")) == expected
    assert (value(after, "pjrtd_device_execution_duration_seconds_count",
                  device="0", kind="cpu")
            - value(before, "pjrtd_device_execution_duration_seconds_count",
                    device="0", kind="cpu")) == 3
    assert value(after, "pjrtd_device_busy_seconds_total", device="0",
                 kind="cpu") > value(before, "pjrtd_device_busy_seconds_total",
                                     device="0", kind="cpu")
    # RPCs: by method and code, from the interceptor.
    for method, code, expected in (("Compile", "OK", 1), ("Upload", "OK", 2)):
        key = dict(service=("pjrt.v1.Executables" if method == "Compile"
                            else "pjrt.v1.Buffers"), method=method, code=code)
        assert (value(after, "pjrtd_rpcs_total", **key)
                - value(before, "pjrtd_rpcs_total", **key)) == expected
    assert (total(after, "pjrtd_rpc_duration_seconds_count",
                  method="Compile")
            - total(before, "pjrtd_rpc_duration_seconds_count",
                    method="Compile")) == 1
    # Compiles: a program new to the cache.
    assert (value(after, "pjrtd_compile_cache_misses_total")
            - value(before, "pjrtd_compile_cache_misses_total")) == 1
    assert (value(after, "pjrtd_compile_duration_seconds_count")
            - value(before, "pjrtd_compile_duration_seconds_count")) == 1
    # Memory and counts agree with GetStats, read a moment apart with
    # nothing else running.
    for device in stats["devices"]:
        labels = dict(device=str(device["device_id"]), kind="cpu")
        assert value(after, "pjrtd_device_memory_in_use_bytes",
                     **labels) == device["bytes_in_use"]
        assert value(after, "pjrtd_device_memory_limit_bytes",
                     **labels) == device["bytes_limit"]
        assert value(after, "pjrtd_device_memory_peak_bytes",
                     **labels) == device["peak_bytes_in_use"]
    assert value(after, "pjrtd_sessions") == stats["session_count"]
    assert value(after, "pjrtd_buffers") == stats["buffer_count"]
    assert value(after, "pjrtd_executables") == stats["executable_count"]
    assert value(after, "pjrtd_compile_cache_entries") == \
        stats["compile_cache"]["entries"]
    # The client's own series.
    assert value(after, "pjrtd_client_executions_total",
                 client="metrics-work") == 3
    assert value(after, "pjrtd_client_execution_failures_total",
                 client="metrics-work") == 0
    assert value(after, "pjrtd_client_transfer_bytes_total",
                 client="metrics-work", direction="to_device") == uploaded
    assert value(after, "pjrtd_client_device_seconds_total",
                 client="metrics-work") > 0
    assert value(after, "pjrtd_cluster_tasks") == 1
    assert value(after, "pjrtd_build_info", platform="host", task="0",
                 target=expected_host_isa(),
                 version=c.info()["build_version"]) == 1


def expected_host_isa() -> str:
    """The level of host kernels the daemon should run: this CPU's
    (from /proc/cpuinfo's flags), or a lower one PJRT_HOST_ISA asks for;
    "native" in a PJRT_NATIVE_ARCH build, the built-in x86-64-v2 in a
    sanitizer build (neither has modules)."""
    cache = (pathlib.Path(os.environ["PJRT_BUILD_DIR"])
             / "CMakeCache.txt").read_text()
    if "PJRT_NATIVE_ARCH:BOOL=ON" in cache:
        return "native"
    if re.search(r"^PJRT_SANITIZER:STRING=\S", cache, re.MULTILINE):
        return "x86-64-v2"
    flags: set[str] = set()
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    level = 2
    if {"avx2", "fma", "bmi1", "bmi2"} <= flags:
        level = 3
        if {"avx512f", "avx512bw", "avx512cd", "avx512dq",
                "avx512vl"} <= flags:
            level = 4
    asked = os.environ.get("PJRT_HOST_ISA", "").removeprefix("x86-64-")
    if asked in ("v2", "v3", "v4"):
        level = min(level, int(asked[1]))
    return f"x86-64-v{level}"


def test_build_info_names_the_host_kernels_level(daemon, url):
    samples = scrape(url)
    levels = [dict(labels)["target"] for (name, labels) in samples
              if name == "pjrtd_build_info"]
    assert levels == [expected_host_isa()]
    # pjrtctl info's backend line names it too.
    with pjrt_client.connect(daemon.addresses[0]) as c:
        assert f"; kernels {expected_host_isa()} (" in c.info()["backend"]


def test_shared_memory_transfers_are_counted_by_path(daemon, url):
    before = scrape(url)
    big = np.ones((512, 1024), np.float32)  # 2 MiB: above SHM_THRESHOLD
    with pjrt_client.connect(daemon.addresses[0],
                             client_name="metrics-shm") as c:
        x = c.put(big)
        assert x.to_numpy().sum() == big.size
    after = scrape(url)
    for direction in ("to_device", "from_device"):
        labels = dict(direction=direction, path="shared_memory")
        assert (value(after, "pjrtd_transfer_bytes_total", **labels)
                - value(before, "pjrtd_transfer_bytes_total", **labels)
                ) == big.nbytes, direction
        assert (value(after, "pjrtd_transfer_duration_seconds_count",
                      **labels)
                - value(before, "pjrtd_transfer_duration_seconds_count",
                        **labels)) == 1


def test_sessions_report_their_device_time_bytes_and_peak(daemon):
    with pjrt_client.connect(daemon.addresses[1], client_name="accounted",
                             data_channels=False) as c, \
            pjrt_client.connect(daemon.addresses[1],
                                client_name="idle") as idle:
        a = np.ones((64, 64), np.float32)
        x = c.put(a, device=1)
        matmul = c.compile(MATMUL)
        outs = [matmul.execute([x, x])[0] for _ in range(2)]
        outs[-1].to_numpy()
        peak = 3 * a.nbytes
        del outs
        sessions = {s["client_name"]: s for s in c.sessions()}
        mine = sessions["accounted"]
        assert mine["executions"] == 2
        assert mine["failed_executions"] == 0
        assert mine["bytes_to_device"] == a.nbytes
        assert mine["bytes_from_device"] == a.nbytes
        assert mine["peak_bytes"] == peak
        assert mine["device_times"][1] > 0
        assert mine["device_times"][0] == 0
        assert mine["device_seconds"] == pytest.approx(
            sum(mine["device_times"].values()))
        other = sessions["idle"]
        assert (other["executions"], other["bytes_to_device"],
                other["device_seconds"]) == (0, 0, 0)
        assert idle.sessions()  # a session sees the list too


def test_many_client_names_share_the_other_series(daemon, url):
    # The daemon names 16 clients; later names add to "other".
    for i in range(20):
        with pjrt_client.connect(daemon.addresses[0],
                                 client_name=f"crowd-{i}") as c:
            c.put(np.ones(4, np.float32))
    samples = scrape(url)
    clients = {dict(ls)["client"] for (n, ls) in samples
               if n == "pjrtd_client_executions_total"}
    assert len(clients) <= 17, sorted(clients)
    assert "other" in clients
    named = sum(value(samples, "pjrtd_client_transfer_bytes_total",
                      client=name, direction="to_device")
                for name in clients)
    assert named == value(samples, "pjrtd_transfer_bytes_total",
                          direction="to_device", path="stream") + value(
        samples, "pjrtd_transfer_bytes_total", direction="to_device",
        path="shared_memory") + value(
        samples, "pjrtd_transfer_bytes_total", direction="to_device",
        path="data_channel")


def test_failed_runs_are_counted(tmp_path):
    # Every kernel run of this daemon fails (test-only fault injection).
    d = Daemon(tmp_path, "--platform", "host",
               "--listen", f"unix://{tmp_path}/pjrtd.sock",
               "--metrics-listen", "127.0.0.1:0",
               env={"PJRT_FAULT_INJECTION": "kernel=1"})
    try:
        with pjrt_client.connect(d.addresses[0],
                                 client_name="unlucky") as c:
            negate = c.compile(NEGATE)
            for _ in range(2):
                result = negate.execute([c.put(np.ones(8, np.float32))])[0]
                with pytest.raises(pjrt_client.Error):
                    result.to_numpy()
            (mine,) = [s for s in c.sessions()
                       if s["client_name"] == "unlucky"]
            samples = scrape(c.info()["metrics_url"])
        assert (mine["executions"], mine["failed_executions"]) == (2, 2)
        labels = dict(device="0", kind="cpu")
        assert value(samples, "pjrtd_device_executions_total", **labels) == 2
        assert value(samples, "pjrtd_device_execution_failures_total",
                     **labels) == 2
        assert value(samples, "pjrtd_client_execution_failures_total",
                     client="unlucky") == 2
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_a_bad_metrics_address_fails_at_start(tmp_path):
    d = Daemon(tmp_path, "--platform", "host",
               "--listen", f"unix://{tmp_path}/pjrtd.sock",
               "--metrics-listen", "nowhere:port", wait=False)
    assert d.process.wait(timeout=30) == 2
    d.stop()
    log = d.log_path.read_text()
    assert '--metrics-listen "nowhere:port" is not IP:PORT' in log


# gRPC reflection (grpc.reflection.v1alpha), as grpcurl uses it: the
# messages are built from their descriptors here, so that the test needs no
# generated code.

def _reflection_messages():
    f = descriptor_pb2.FileDescriptorProto(
        name="pjrt_test_reflection.proto",
        package="grpc.reflection.v1alpha", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    req = f.message_type.add(name="ServerReflectionRequest")
    req.field.add(name="host", number=1, type=T.TYPE_STRING,
                  label=T.LABEL_OPTIONAL)
    req.field.add(name="file_containing_symbol", number=4,
                  type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    req.field.add(name="list_services", number=7, type=T.TYPE_STRING,
                  label=T.LABEL_OPTIONAL)
    fdr = f.message_type.add(name="FileDescriptorResponse")
    fdr.field.add(name="file_descriptor_proto", number=1,
                  type=T.TYPE_BYTES, label=T.LABEL_REPEATED)
    svc = f.message_type.add(name="ServiceResponse")
    svc.field.add(name="name", number=1, type=T.TYPE_STRING,
                  label=T.LABEL_OPTIONAL)
    lsr = f.message_type.add(name="ListServiceResponse")
    lsr.field.add(name="service", number=1, type=T.TYPE_MESSAGE,
                  label=T.LABEL_REPEATED,
                  type_name=".grpc.reflection.v1alpha.ServiceResponse")
    err = f.message_type.add(name="ErrorResponse")
    err.field.add(name="error_code", number=1, type=T.TYPE_INT32,
                  label=T.LABEL_OPTIONAL)
    err.field.add(name="error_message", number=2, type=T.TYPE_STRING,
                  label=T.LABEL_OPTIONAL)
    resp = f.message_type.add(name="ServerReflectionResponse")
    resp.field.add(name="valid_host", number=1, type=T.TYPE_STRING,
                   label=T.LABEL_OPTIONAL)
    resp.field.add(name="file_descriptor_response", number=4,
                   type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                   type_name=".grpc.reflection.v1alpha.FileDescriptorResponse")
    resp.field.add(name="list_services_response", number=6,
                   type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                   type_name=".grpc.reflection.v1alpha.ListServiceResponse")
    resp.field.add(name="error_response", number=7, type=T.TYPE_MESSAGE,
                   label=T.LABEL_OPTIONAL,
                   type_name=".grpc.reflection.v1alpha.ErrorResponse")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    get = factory.GetPrototype  # protobuf 3.x (Debian 12)
    return (get(pool.FindMessageTypeByName(
                "grpc.reflection.v1alpha.ServerReflectionRequest")),
            get(pool.FindMessageTypeByName(
                "grpc.reflection.v1alpha.ServerReflectionResponse")))


def _reflect(address: str, requests):
    Request, Response = _reflection_messages()
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=Response.FromString)
        return list(call(iter([Request(**r) for r in requests]), timeout=10))


def test_reflection_lists_every_service(daemon):
    (reply,) = _reflect(daemon.addresses[1], [{"list_services": "*"}])
    services = {s.name for s in reply.list_services_response.service}
    for name in ("pjrt.v1.Server", "pjrt.v1.Sessions", "pjrt.v1.Buffers",
                 "pjrt.v1.Executables", "grpc.health.v1.Health",
                 "grpc.reflection.v1alpha.ServerReflection"):
        assert name in services, sorted(services)


def test_reflection_describes_a_service(daemon):
    (reply,) = _reflect(daemon.addresses[0],
                        [{"file_containing_symbol": "pjrt.v1.Buffers"}])
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in reply.file_descriptor_response.file_descriptor_proto]
    methods = {m.name for f in files for s in f.service
               if s.name == "Buffers" for m in s.method}
    assert {"Upload", "Download", "DeleteBuffers"} <= methods


# pjrtctl: the sessions' accounting, and `top` in a terminal and a pipe.

PJRTCTL = str(Daemon.binary().parent / "pjrtctl")


def _busy_client(daemon: Daemon, name: str) -> pjrt_client.Client:
    c = pjrt_client.connect(daemon.addresses[0], client_name=name)
    x = c.put(np.ones((64, 64), np.float32))
    matmul = c.compile(MATMUL)
    for _ in range(3):
        out = matmul.execute([x, x])[0]
    out.to_numpy()
    return c


def test_pjrtctl_sessions_shows_each_sessions_use(daemon):
    with _busy_client(daemon, "ctl-accounted") as c:
        text = subprocess.run(
            [PJRTCTL, "--address", daemon.addresses[0], "sessions"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        header, *rows = text.splitlines()
        for column in ("PEAK", "RUNS", "DEVICE TIME", "IN", "OUT"):
            assert column in header
        (row,) = [r for r in rows if "ctl-accounted" in r]
        assert " 3 " in row  # runs
        doc = json.loads(subprocess.run(
            [PJRTCTL, "--address", daemon.addresses[0], "--json", "sessions"],
            capture_output=True, text=True, timeout=60, check=True).stdout)
        (mine,) = [s for s in doc["sessions"]
                   if s["public_id"] == c.session_id]
        assert mine["executions"] == 3
        assert mine["device_seconds"] > 0


def test_pjrtctl_top_in_a_pipe_prints_one_plain_frame(daemon):
    with _busy_client(daemon, "top-piped"):
        result = subprocess.run(
            [PJRTCTL, "--address", daemon.addresses[0], "top",
             "--interval", "0.1"],
            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout
    for heading in ("DEVICE", "MEMORY", "UTIL", "SESSION", "DEVICE TIME",
                    "CALLS/S"):
        assert heading in result.stdout
    assert "top-piped" in result.stdout
    assert "pjrt.v1.Server/GetStats" in result.stdout


def test_pjrtctl_top_in_a_terminal_redraws_until_q(daemon):
    with _busy_client(daemon, "top-watched"):
        pid, fd = pty.fork()
        if pid == 0:  # the child: pjrtctl on the pseudo-terminal
            os.execv(PJRTCTL, [PJRTCTL, "--address", daemon.addresses[0],
                               "top", "--interval", "0.2"])
        output = b""
        deadline = time.monotonic() + 30
        # Two frames: the second has rates.
        while output.count(b"(q quits)") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                output += os.read(fd, 65536)
        os.write(fd, b"q")
        _, status = os.waitpid(pid, 0)
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                output += chunk
        except OSError:
            pass  # the terminal closed
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    text = output.decode("utf-8", "replace")
    assert text.count("\x1b[H\x1b[2J") >= 2  # redrawn in place
    frame = text.split("\x1b[H\x1b[2J")[2]
    assert "top-watched" in frame
    assert re.search(r"\[[#.]{10,}\]", frame), frame  # memory bars
    assert "CALLS/S" in frame
