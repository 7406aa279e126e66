"""Fixtures: one real pjrtd per test session, reached over a unix socket and
over TCP."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import tempfile
import time
from typing import Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PJRT_BUILD_DIR", REPO / "build"))
PJRTD = BUILD / "bin" / "pjrtd"
PJRTCTL = BUILD / "bin" / "pjrtctl"
MEMORY_LIMIT = 1 << 30
# The platform the session's daemon runs: host (three virtual devices) by
# default; scripts/gpu-check sets PJRT_TEST_PLATFORM=cuda to run the suites
# on a GPU, where a test of an op the CUDA backend does not run yet is
# skipped (its compile names the op and says so).
PLATFORM = os.environ.get("PJRT_TEST_PLATFORM", "host")


class Daemon:
    """A pjrtd child process and the addresses it listens on."""

    def __init__(self, workdir: pathlib.Path, *args: str,
                 wait: bool = True,
                 env: dict[str, str] | None = None,
                 wrapper: list[str] | None = None) -> None:
        """`wrapper` runs pjrtd (its argv follows the wrapper's)."""
        self.workdir = workdir
        self.address_file = workdir / "addresses"
        self.log_path = workdir / "pjrtd.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [*(wrapper or []), str(PJRTD), *args,
             "--address-file", str(self.address_file)],
            stdout=subprocess.DEVNULL, stderr=self._log,
            env={**os.environ, **env} if env else None)
        self.addresses: list[str] = []
        if wait:
            self.wait_ready()

    @staticmethod
    def binary() -> pathlib.Path:
        return PJRTD

    def wait_ready(self) -> None:
        """Waits until the daemon serves (its address file appears)."""
        deadline = time.monotonic() + 30
        # The daemon writes the file atomically once it accepts calls.
        while not self.address_file.exists():
            if self.process.poll() is not None:
                raise RuntimeError("pjrtd exited during start-up:\n"
                                   + self.log_path.read_text())
            if time.monotonic() > deadline:
                raise RuntimeError("pjrtd did not start within 30 s:\n"
                                   + self.log_path.read_text())
            time.sleep(0.01)
        self.addresses = self.address_file.read_text().split()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self._log.close()
        return code


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        devices = (["--host-devices", "3"] if PLATFORM == "host" else
                   ["--compile-cache-dir", str(workdir / "kernels")])
        d = Daemon(workdir, "--platform", PLATFORM, *devices,
                   "--memory-limit", str(MEMORY_LIMIT),
                   "--listen", f"unix://{workdir}/pjrtd.sock",
                   "--listen", "127.0.0.1:0")
        yield d
        assert d.stop() == 0, d.log_path.read_text()


@pytest.fixture(params=["unix", "tcp"])
def address(request: pytest.FixtureRequest, daemon: Daemon) -> str:
    return daemon.addresses[0 if request.param == "unix" else 1]


@pytest.fixture
def client(address: str):
    import pjrt_client
    with pjrt_client.connect(address, client_name="pytest") as c:
        yield c


@pytest.fixture(scope="module")
def cl(request: pytest.FixtureRequest, daemon: Daemon):
    """One client for a whole module of op tests, over the unix socket,
    named after the module."""
    import pjrt_client
    with pjrt_client.connect(daemon.addresses[0],
                             client_name=request.module.__name__) as c:
        yield c


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On cuda, a test of what the CUDA backend does not run yet is a skip,
    not a failure: the error says so by name."""
    outcome = yield
    report = outcome.get_result()
    if PLATFORM == "host" or call.excinfo is None or report.passed:
        return
    text = str(call.excinfo.value)
    if "on the CUDA backend" in text or "the CUDA backend does not" in text:
        report.outcome = "skipped"
        report.longrepr = (str(item.fspath), item.location[1] or 0,
                           "Skipped: not on the CUDA backend yet: "
                           + text.splitlines()[0][:200])


# Every program the suites compile, for the CUDA compile check (make
# test-cuda-programs): with PJRT_RECORD_PROGRAMS set to a folder, each
# program the daemon accepted is written there once, named by the hash of
# its text.
RECORD_PROGRAMS = os.environ.get("PJRT_RECORD_PROGRAMS")


@pytest.fixture(scope="session", autouse=True)
def _record_programs() -> Iterator[None]:
    if not RECORD_PROGRAMS:
        yield
        return
    import functools
    import hashlib

    import pjrt_client
    folder = pathlib.Path(RECORD_PROGRAMS)
    folder.mkdir(parents=True, exist_ok=True)
    compile_program = pjrt_client.Client.compile

    @functools.wraps(compile_program)
    def recording_compile(self, hlo_text, *args, **kwargs):
        executable = compile_program(self, hlo_text, *args, **kwargs)
        text = (hlo_text.decode("utf-8") if isinstance(hlo_text, bytes)
                else hlo_text)
        name = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
        path = folder / f"{name}.hlo"
        if not path.exists():
            path.write_text(text)
        return executable

    pjrt_client.Client.compile = recording_compile
    try:
        yield
    finally:
        pjrt_client.Client.compile = compile_program
