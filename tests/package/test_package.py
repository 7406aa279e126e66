"""pjrtd's packages (`make test-package`): the Debian package's contents,
its binaries run from a folder it was unpacked into (`dpkg -x`), an
out-of-tree CMake project that finds and links the C++ client it installs,
and the pjrt_client wheel installed into a fresh virtual environment."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))


def package(kind: str) -> pathlib.Path:
    out = subprocess.run([str(REPO / "scripts" / "package"), kind, str(BUILD)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return pathlib.Path(out.stdout.split()[-1])


@pytest.fixture(scope="module")
def deb() -> pathlib.Path:
    return package("deb")


@pytest.fixture(scope="module")
def root(deb: pathlib.Path) -> Iterator[pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="pjrt-deb.") as tmp:
        subprocess.run(["dpkg", "-x", str(deb), tmp], check=True, timeout=120)
        yield pathlib.Path(tmp)


def native_build() -> bool:
    """Whether the build is -march=native (it has no kernel modules)."""
    cache = pathlib.Path(os.environ["PJRT_BUILD_DIR"]) / "CMakeCache.txt"
    return "PJRT_NATIVE_ARCH:BOOL=ON" in cache.read_text()


@pytest.fixture(scope="module")
def daemon_dir() -> Iterator[pathlib.Path]:
    """The unpacked pjrtd's socket and log."""
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        yield pathlib.Path(tmp)


@pytest.fixture(scope="module")
def daemon(root: pathlib.Path, daemon_dir: pathlib.Path) -> Iterator[str]:
    """The unpacked pjrtd, serving a socket of its own."""
    address = f"unix://{daemon_dir}/pjrtd.sock"
    addresses = daemon_dir / "addresses"
    log_path = daemon_dir / "pjrtd.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [str(root / "usr/bin/pjrtd"), "--platform", "host",
             "--listen", address, "--metrics-listen", "127.0.0.1:0",
             "--compile-cache-dir", "", "--address-file", str(addresses)],
            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 30
        while not addresses.exists():
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "pjrtd did not start"
            time.sleep(0.02)
        yield address
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_the_deb_holds_a_host_s_service_and_both_clients(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True,
                             capture_output=True, text=True).stdout
    paths = {line.split()[-1] for line in listing.splitlines()}
    # Symbolic links print as "name -> target".
    paths |= {line.split()[-3] for line in listing.splitlines()
              if " -> " in line}
    for path in (
            "./usr/bin/pjrtd", "./usr/bin/pjrtctl", "./usr/bin/pjrt-hlo",
            "./usr/lib/systemd/system/pjrtd.service",
            "./usr/lib/sysusers.d/pjrtd.conf", "./etc/pjrtd/pjrtd.toml",
            "./usr/share/bash-completion/completions/pjrtctl",
            "./usr/lib/libpjrt_client.so",
            "./usr/include/pjrt/pjrt_client/client.h",
            "./usr/include/pjrt/pjrt_client/types.h",
            "./usr/lib/cmake/pjrt_client/pjrt_clientConfig.cmake",
            "./usr/lib/cmake/pjrt_client/pjrt_clientConfigVersion.cmake",
            "./usr/lib/pjrtd/python/pjrt_client/__init__.py",
            "./usr/lib/pjrtd/python/pjrt_client/_proto/pjrt/v1/server_pb2.py",
            "./usr/lib/python3/dist-packages/pjrt_client.pth",
            "./usr/share/doc/pjrtd/README.md"):
        assert path in paths, f"{path} is not in the package"
    # The client's headers speak in its own types: no generated code.
    assert not [p for p in paths if p.endswith(".pb.h")]
    if not native_build():
        for level in ("v3", "v4"):
            path = f"./usr/lib/pjrtd/libpjrt_host_x86-64-{level}.so"
            assert path in paths, f"{path} is not in the package"
    # Nothing of the build machine, no tests or benchmarks.
    assert not [p for p in paths if "test" in p.rsplit("/", 1)[-1]
                or "bench" in p]
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends"],
        check=True, capture_output=True, text=True).stdout
    assert "Package: pjrtd" in fields
    for dependency in ("libgrpc++1.51", "libmicrohttpd12", "python3-grpcio"):
        assert dependency in fields
    control = subprocess.run(["dpkg-deb", "-I", str(deb), "conffiles"],
                             check=True, capture_output=True, text=True)
    assert control.stdout.split() == ["/etc/pjrtd/pjrtd.toml"]


def test_the_unit_names_the_installed_paths(root):
    unit = (root / "usr/lib/systemd/system/pjrtd.service").read_text()
    assert ("ExecStart=/usr/bin/pjrtd --config /etc/pjrtd/pjrtd.toml"
            in unit)
    assert str(BUILD) not in unit and str(REPO) not in unit
    pth = (root / "usr/lib/python3/dist-packages/pjrt_client.pth").read_text()
    assert pth.strip() == "/usr/lib/pjrtd/python"


def test_the_packaged_config_serves_metrics_on_loopback(root):
    config = (root / "etc/pjrtd/pjrtd.toml").read_text()
    assert 'metrics_listen = "127.0.0.1:9464"' in config


def test_the_unpacked_binaries_run(root, daemon):
    version = subprocess.run([str(root / "usr/bin/pjrtd"), "--version"],
                             capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("pjrtd ")
    health = subprocess.run([str(root / "usr/bin/pjrtctl"), "--address",
                             daemon, "health"],
                            capture_output=True, text=True, timeout=30)
    assert health.returncode == 0, health.stderr
    hlo = subprocess.run([str(root / "usr/bin/pjrt-hlo"), "--help"],
                         capture_output=True, text=True, timeout=30)
    assert hlo.returncode == 0


def test_the_unpacked_daemon_loads_the_packaged_kernel_module(
        root, daemon, daemon_dir):
    """The portable pjrtd finds its CPU's kernel module in the package
    (usr/lib/pjrtd beside usr/bin), not in the build tree."""
    if native_build():
        pytest.skip("a native build has no kernel modules")
    log = (daemon_dir / "pjrtd.log").read_text()
    line = next(x for x in log.splitlines() if "backend: host:" in x)
    if "kernels x86-64-v2 (built in)" in line:
        return  # a CPU without AVX2 needs no module
    module = re.search(r"\(module (\S+?)[;)]", line)
    assert module, line
    path = pathlib.Path(module.group(1)).resolve()
    assert path.parent == (root / "usr/lib/pjrtd").resolve(), line
    assert path.name.startswith("libpjrt_host_x86-64-v")


def test_an_out_of_tree_cmake_project_finds_and_links_the_client(
        root, daemon, tmp_path):
    configure = subprocess.run(
        ["cmake", "-S", str(REPO / "examples/cpp_client"), "-B",
         str(tmp_path), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_PREFIX_PATH={root / 'usr'}"],
        capture_output=True, text=True, timeout=300)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    build = subprocess.run(["cmake", "--build", str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run([str(tmp_path / "scale"), daemon],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["2", "4", "6", "8"]


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_quick_start(
        daemon, tmp_path):
    wheel = package("wheel")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pjrt_client/__init__.py" in names
    assert "pjrt_client/_proto/pjrt/v1/server_pb2.py" in names
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("METADATA"))).decode()
    for requirement in ("grpcio", "protobuf", "numpy"):
        assert f"Requires-Dist: {requirement}" in metadata
    venv = tmp_path / "venv"
    # Debian's grpcio, protobuf and numpy satisfy the wheel's requirements.
    subprocess.run(["/usr/bin/python3", "-m", "venv",
                    "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--no-index",
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PJRTD_ADDRESS"] = daemon
    where = subprocess.run(
        [str(venv / "bin/python"), "-c",
         "import pjrt_client; print(pjrt_client.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
    quickstart = subprocess.run(
        [str(venv / "bin/python"), str(REPO / "examples/quickstart.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert quickstart.returncode == 0, quickstart.stdout + quickstart.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
