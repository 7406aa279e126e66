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


class Daemon:
    """A pjrtd child process and the addresses it listens on."""

    def __init__(self, workdir: pathlib.Path, *args: str,
                 wait: bool = True) -> None:
        self.workdir = workdir
        self.address_file = workdir / "addresses"
        self.log_path = workdir / "pjrtd.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [str(PJRTD), *args, "--address-file", str(self.address_file)],
            stdout=subprocess.DEVNULL, stderr=self._log)
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
        d = Daemon(workdir, "--platform", "host", "--host-devices", "3",
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
