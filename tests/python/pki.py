"""Certificates for the TLS tests, made with Debian's openssl command."""
from __future__ import annotations

import pathlib
import subprocess


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
