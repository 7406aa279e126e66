"""TLS on TCP listeners, and mutual TLS naming a tenant, with certificates
made by the test (Debian's openssl)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command")


def openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_ca(directory: pathlib.Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.crt", cwd=directory)


def make_cert(directory: pathlib.Path, ca: str, name: str, subject: str,
              days: str = "2", server: bool = False) -> None:
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    extensions = directory / f"{name}.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                          if server else "extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", days,
            "-extfile", extensions.name, "-out", f"{name}.crt", cwd=directory)


def make_expired_cert(directory: pathlib.Path, ca: str, name: str,
                      subject: str, server: bool = False) -> None:
    """A certificate that expired in 2020 (openssl ca sets any dates)."""
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    extension = ("subjectAltName=IP:127.0.0.1,DNS:localhost" if server
                 else "extendedKeyUsage=clientAuth")
    (directory / "ca.cnf").write_text(f"""
[ca]
default_ca = the_ca
[the_ca]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
x509_extensions = extensions
[any]
commonName = supplied
[extensions]
{extension}
""")
    openssl("ca", "-batch", "-config", "ca.cnf", "-in", f"{name}.csr",
            "-out", f"{name}.crt", "-cert", f"{ca}.crt", "-keyfile",
            f"{ca}.key", "-startdate", "20200101000000Z", "-enddate",
            "20200102000000Z", "-notext", cwd=directory)


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


def test_tls_needs_both_files(pki, tmp_path):
    out = subprocess.run([str(Daemon.binary()), "--listen", "127.0.0.1:0",
                          "--tls-cert", str(pki / "server.crt")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "--tls-key" in out.stderr
