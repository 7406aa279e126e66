"""TLS on TCP listeners, and mutual TLS naming a tenant, with certificates
made by the test (Debian's openssl)."""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon
from pki import make_ca, make_cert, make_expired_cert

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_cert(d, "ca", "server", "/CN=localhost", server=True)
    make_cert(d, "ca", "alice", "/CN=alice")
    make_cert(d, "other-ca", "mallory", "/CN=alice")
    make_expired_cert(d, "ca", "expired-server", "/CN=localhost", server=True)
    make_expired_cert(d, "ca", "expired-alice", "/CN=alice")
    tenants = d / "tenants.toml"
    tenants.write_text('[[tenant]]\nname = "alice"\n'
                       'cert_subject = "CN=alice"\n')
    tenants.chmod(0o600)
    return d


def start(pki: pathlib.Path, workdir: pathlib.Path, *extra: str) -> Daemon:
    return Daemon(workdir, "--platform", "host", "--listen", "127.0.0.1:0",
                  "--tls-cert", str(pki / "server.crt"),
                  "--tls-key", str(pki / "server.key"), *extra)


def test_tls_serves_clients_that_trust_its_ca(pki, tmp_path):
    d = start(pki, tmp_path)
    try:
        with pjrt_client.connect(d.addresses[0],
                                 tls_ca=str(pki / "ca.crt")) as c:
            x = c.put(np.arange(3, dtype=np.float32))
            np.testing.assert_array_equal(x.to_numpy(), [0, 1, 2])
        # Plaintext to a TLS port never connects.
        with pytest.raises(pjrt_client.UnavailableError):
            pjrt_client.connect(d.addresses[0], timeout=2)
        # A client that trusts another CA refuses the daemon.
        with pytest.raises(pjrt_client.UnavailableError):
            pjrt_client.connect(d.addresses[0], timeout=2,
                                tls_ca=str(pki / "other-ca.crt"))
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_mutual_tls_names_the_tenant_by_certificate(pki, tmp_path):
    d = start(pki, tmp_path, "--tls-client-ca", str(pki / "ca.crt"),
              "--tenants", str(pki / "tenants.toml"))
    try:
        with pjrt_client.connect(d.addresses[0], tls_ca=str(pki / "ca.crt"),
                                 tls_cert=str(pki / "alice.crt"),
                                 tls_key=str(pki / "alice.key")) as c:
            c.put(np.ones(2, np.float32))
        assert 'event=session_opened tenant="alice"' in d.log_path.read_text()
        # No client certificate, or one another CA signed: no handshake.
        with pytest.raises(pjrt_client.Error):
            pjrt_client.connect(d.addresses[0], timeout=2,
                                tls_ca=str(pki / "ca.crt"))
        with pytest.raises(pjrt_client.Error):
            pjrt_client.connect(d.addresses[0], timeout=2,
                                tls_ca=str(pki / "ca.crt"),
                                tls_cert=str(pki / "mallory.crt"),
                                tls_key=str(pki / "mallory.key"))
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_expired_certificates_are_refused(pki, tmp_path):
    d = Daemon(tmp_path, "--platform", "host", "--listen", "127.0.0.1:0",
               "--tls-cert", str(pki / "expired-server.crt"),
               "--tls-key", str(pki / "expired-server.key"))
    try:
        with pytest.raises(pjrt_client.UnavailableError):
            pjrt_client.connect(d.addresses[0], timeout=2,
                                tls_ca=str(pki / "ca.crt"))
    finally:
        assert d.stop() == 0, d.log_path.read_text()
    mutual = tmp_path / "mutual"
    mutual.mkdir()
    d = start(pki, mutual, "--tls-client-ca", str(pki / "ca.crt"),
              "--tenants", str(pki / "tenants.toml"))
    try:
        with pytest.raises(pjrt_client.Error):
            pjrt_client.connect(d.addresses[0], timeout=2,
                                tls_ca=str(pki / "ca.crt"),
                                tls_cert=str(pki / "expired-alice.crt"),
                                tls_key=str(pki / "expired-alice.key"))
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_a_renewed_certificate_is_served_without_dropping_sessions(
        pki, tmp_path):
    """The daemon re-reads its certificate files when they change (and
    SIGHUP reloads what it can): new clients see the new certificate, open
    sessions go on."""
    served = tmp_path / "tls"
    served.mkdir()
    for name in ("server.crt", "server.key"):
        shutil.copy(pki / name, served / name)
    d = Daemon(tmp_path, "--platform", "host", "--listen", "127.0.0.1:0",
               "--tls-cert", str(served / "server.crt"),
               "--tls-key", str(served / "server.key"))
    try:
        old = pjrt_client.connect(d.addresses[0], tls_ca=str(pki / "ca.crt"))
        x = old.put(np.arange(4, dtype=np.float32))
        make_cert(pki, "other-ca", "renewed", "/CN=localhost", server=True)
        # Key first, then certificate, each replaced in one step.
        for name in ("key", "crt"):
            (served / f"next.{name}").write_bytes(
                (pki / f"renewed.{name}").read_bytes())
            os.replace(served / f"next.{name}", served / f"server.{name}")
        d.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while True:
            try:
                pjrt_client.connect(d.addresses[0], timeout=1,
                                    tls_ca=str(pki / "other-ca.crt")).close()
                break
            except pjrt_client.UnavailableError:
                assert time.monotonic() < deadline, "renewal not served"
        # The session opened before the renewal still works.
        np.testing.assert_array_equal(x.to_numpy(), [0, 1, 2, 3])
        old.close()
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_tls_needs_both_files(pki, tmp_path):
    out = subprocess.run([str(Daemon.binary()), "--listen", "127.0.0.1:0",
                          "--tls-cert", str(pki / "server.crt")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "--tls-key" in out.stderr
