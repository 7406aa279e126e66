"""pjrtctl against the test daemon: commands whose state outlives one call
(put and get within a kept session), checked against the daemon's state."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pty
import re
import subprocess
import tomllib

import numpy as np
import pytest

import pjrt_client
from conftest import PJRTCTL, REPO, Daemon


def ctl(address: str, *args: str, json_output: bool = True
        ) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PJRTCTL), "--address", address,
         *(["--json"] if json_output else []), *args],
        capture_output=True, text=True, timeout=60)


def kept_sessions(address: str) -> dict[int, dict]:
    """pjrtctl's kept sessions, by public id (`pjrtctl sessions --json`)."""
    listing = json.loads(ctl(address, "sessions").stdout)["sessions"]
    return {s["public_id"]: s for s in listing
            if s["client_name"] == "pjrtctl" and not s["attached"]}


def test_put_keep_then_get_round_trips_and_stays(daemon, tmp_path):
    address = daemon.addresses[0]
    before = kept_sessions(address)
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    np.save(tmp_path / "x.npy", x)
    put = ctl(address, "put", str(tmp_path / "x.npy"), "--keep",
              "--device", "1")
    assert put.returncode == 0, put.stderr
    doc = json.loads(put.stdout)
    assert doc["kept"] is True and doc["device"] == 1
    assert (doc["dtype"], doc["dims"], doc["bytes"]) == ("s16", [2, 3, 4],
                                                         48)
    token, handle = doc["session"], doc["handle"]

    got = ctl(address, "get", handle, "--session", token, "-o",
              str(tmp_path / "y.npy"))
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["shape"] == "s16[2,3,4]"
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x)

    # A second put joins the same session; both buffers are there.
    np.save(tmp_path / "z.npy", np.ones(5, np.float32))
    again = ctl(address, "put", str(tmp_path / "z.npy"), "--session", token)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["session"] == token
    new = [s for i, s in kept_sessions(address).items() if i not in before]
    assert len(new) == 1 and new[0]["buffer_count"] == 2, new

    # The same, as tables.
    text = ctl(address, "get", handle, "--session", token, "-o",
               str(tmp_path / "w.npy"), json_output=False)
    assert text.returncode == 0 and "wrote" in text.stdout
    assert handle in text.stdout


def test_put_without_keep_frees_the_buffer(daemon, tmp_path):
    address = daemon.addresses[0]
    np.save(tmp_path / "x.npy", np.zeros(1000, np.float64))
    with pjrt_client.connect(address) as c:
        before = c.stats()["buffer_count"]
        put = ctl(address, "put", str(tmp_path / "x.npy"),
                  json_output=False)
        assert put.returncode == 0, put.stderr
        assert "pass --keep" in put.stdout
        assert c.stats()["buffer_count"] == before


@pytest.mark.parametrize("args, code, message", [
    (["get", "0x12", "--session", "0xzz", "-o", "out.npy"], 2,
     "is not a hexadecimal token"),
    (["get", "nothex", "--session", "0x1", "-o", "out.npy"], 2,
     "handle 'nothex'"),
    (["get", "0x12", "--session", "0x1234", "-o", "out.npy"], 1,
     "session 0x1234"),
])
def test_get_errors_say_what_is_wrong(daemon, tmp_path, args, code, message):
    result = ctl(daemon.addresses[0], *args, json_output=False)
    assert result.returncode == code
    assert message in result.stderr


def test_get_of_an_unknown_handle_is_not_found(daemon, tmp_path):
    address = daemon.addresses[0]
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    token = json.loads(ctl(address, "put", str(tmp_path / "x.npy"),
                           "--keep").stdout)["session"]
    result = ctl(address, "get", "0x12", "--session", token, "-o",
                 str(tmp_path / "y.npy"))
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "NOT_FOUND"


def test_a_mistyped_command_is_named_as_no_command(daemon):
    result = ctl(daemon.addresses[0], "devies", json_output=False)
    assert result.returncode == 2
    assert "'devies' is not a command" in result.stderr


def test_keep_and_session_together_are_a_usage_error(daemon, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    result = ctl(daemon.addresses[0], "put", str(tmp_path / "x.npy"),
                 "--keep", "--session", "0x1", json_output=False)
    assert result.returncode == 2
    assert "give one of them" in result.stderr


# --- bash completion ---------------------------------------------------------

COMPLETION = REPO / "cli" / "pjrtctl.bash"


def complete(words: list[str], cwd: pathlib.Path | None = None) -> list[str]:
    """What the completion offers for the last of `words`."""
    script = (f"source {COMPLETION}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              "_pjrtctl\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run(["bash", "--norc", "-c", script], cwd=cwd,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return sorted(w for w in out.stdout.split("\n") if w)


def help_text(*args: str) -> str:
    out = subprocess.run([str(PJRTCTL), *args, "--help"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    return out.stdout


def test_completion_knows_every_command():
    text = help_text()
    commands = re.findall(r"^  ([a-z]+) {2,}", text.split("Subcommands:")[1],
                          re.MULTILINE)
    assert "transfer" in commands and "put" in commands
    assert set(complete(["pjrtctl", ""])) >= set(commands)
    assert complete(["pjrtctl", "tr"]) == ["transfer"]
    assert complete(["pjrtctl", "--json", "de"]) == ["devices"]


def test_completion_knows_every_flag_of_every_command():
    text = help_text()
    commands = re.findall(r"^  ([a-z]+) {2,}", text.split("Subcommands:")[1],
                          re.MULTILINE)
    for command in commands:
        flags = set(re.findall(r"(--[a-z][a-z-]*)", help_text(command)))
        offered = set(complete(["pjrtctl", command, "--"]))
        assert flags <= offered, (command, flags - offered)


def test_completion_offers_the_files_a_command_takes(tmp_path):
    for name in ("a.npy", "b.hlo", "c.txt", "d.mlir"):
        (tmp_path / name).write_text("")
    assert complete(["pjrtctl", "put", ""], cwd=tmp_path) == ["a.npy"]
    assert complete(["pjrtctl", "run", ""], cwd=tmp_path) == ["b.hlo",
                                                              "d.mlir"]
    assert complete(["pjrtctl", "compile", "d"], cwd=tmp_path) == ["d.mlir"]
    assert complete(["pjrtctl", "run", "b.hlo", "--input", ""],
                    cwd=tmp_path) == ["a.npy"]


# --- bench -------------------------------------------------------------------


def test_bench_reports_min_median_max_of_each_measure(daemon):
    address = daemon.addresses[0]
    with pjrt_client.connect(address) as c:
        sessions = c.stats()["session_count"]
        result = ctl(address, "bench", "--size", "1MiB", "--calls", "20",
                     "--transfers", "2")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert (doc["transfer_bytes"], doc["calls"]) == (1 << 20, 20)
        for name, unit in [("empty_call", "us"), ("upload", "bytes/s"),
                           ("download", "bytes/s"),
                           ("execute_round_trip", "us"),
                           ("read_16_bytes", "us")]:
            m = doc[name]
            assert m["unit"] == unit
            assert 0 < m["min"] <= m["median"] <= m["max"], (name, m)
        # Over the unix socket the arrays stream; runs go over lanes.
        assert doc["transfers_over"] == "gRPC stream"
        assert doc["executes_over"] == "execute lanes"
        # It cleans up after itself.
        assert c.stats()["session_count"] == sessions
    tcp = ctl(daemon.addresses[1], "bench", "--size", "1MiB", "--calls", "2",
              "--transfers", "1")
    assert tcp.returncode == 0, tcp.stderr
    assert json.loads(tcp.stdout)["transfers_over"] == "data channels"
    table = ctl(address, "bench", "--size", "64KiB", "--calls", "5",
                "--transfers", "1", json_output=False)
    assert table.returncode == 0, table.stderr
    for name in ("empty_call", "upload", "download", "execute_round_trip"):
        assert name in table.stdout


def test_bench_refuses_a_bad_size(daemon):
    result = ctl(daemon.addresses[0], "bench", "--size", "lots",
                 json_output=False)
    assert result.returncode == 2
    assert "--size 'lots'" in result.stderr
    # More than the host could hold: said before any memory is taken (it
    # used to end in std::bad_alloc).
    result = ctl(daemon.addresses[0], "bench", "--size", "100TiB",
                 json_output=False)
    assert result.returncode == 2
    assert "--size 100 TiB needs about four times that in host memory" in (
        result.stderr)


# --- progress on a terminal ------------------------------------------------


def run_in_pty(argv: list[str]) -> tuple[int, str]:
    """Runs argv with its stdout on a pseudo-terminal; returns the exit
    status and everything it wrote there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=120)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def big_npy(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("big") / "big.npy"
    np.save(path, np.ones(256 << 20, np.uint8))
    return path


def test_a_large_put_shows_a_progress_bar_on_a_terminal(daemon, big_npy):
    code, out = run_in_pty([str(PJRTCTL), "--address", daemon.addresses[0],
                            "put", str(big_npy)])
    assert code == 0, out
    assert "\rupload [" in out
    # The terminal turns "\n" into "\r\n"; the bar's last drawing is the
    # last segment that shows it.
    final = [part for part in out.split("\r") if "upload [" in part][-1]
    assert "#" * 30 in final
    assert "100%" in final and "256 MiB / 256 MiB" in final, final
    assert re.search(r"[\d.]+ [KMG]?i?B/s", final), final
    assert "uploaded" in out


def test_no_progress_bar_in_a_pipe_or_for_small_arrays(daemon, big_npy,
                                                       tmp_path):
    piped = ctl(daemon.addresses[0], "put", str(big_npy), json_output=False)
    assert piped.returncode == 0 and "\r" not in piped.stdout
    np.save(tmp_path / "small.npy", np.ones(1 << 20, np.uint8))
    code, out = run_in_pty([str(PJRTCTL), "--address", daemon.addresses[0],
                            "put", str(tmp_path / "small.npy")])
    assert code == 0 and "\r" not in out.replace("\r\n", "\n"), out


# --- closing another client's session -------------------------------------


@pytest.fixture(scope="module")
def admin_daemon(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("admin")
    d = Daemon(workdir, "--platform", "host", "--listen",
               f"unix://{workdir}/pjrtd.sock", "--admin-token-file",
               str(workdir / "admin.token"))
    yield d
    assert d.stop() == 0
    # The token goes with the daemon.
    assert not (workdir / "admin.token").exists()


def test_the_admin_token_file_is_private(admin_daemon):
    path = admin_daemon.workdir / "admin.token"
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(path.read_text().strip()) == 32


def test_an_admin_closes_another_clients_session(admin_daemon):
    address = admin_daemon.addresses[0]
    victim = pjrt_client.connect(address, client_name="victim")
    b = victim.put(np.ones(1000, np.float32))
    public_id = victim.session_id
    result = ctl(address, "sessions", "--close", str(public_id),
                 "--admin-token-file", str(admin_daemon.workdir /
                                           "admin.token"))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["closed"] == public_id
    assert int(doc["buffers_freed"]) == 1
    assert int(doc["bytes_freed"]) == 4000
    listing = json.loads(ctl(address, "sessions").stdout)["sessions"]
    assert public_id not in [s["public_id"] for s in listing]
    with pytest.raises(pjrt_client.Error, match="not open"):
        b.to_numpy()
    victim.close()


def test_a_wrong_or_missing_admin_token_is_refused(admin_daemon, tmp_path):
    address = admin_daemon.addresses[0]
    with pjrt_client.connect(address) as c:
        wrong = tmp_path / "wrong.token"
        wrong.write_text("0" * 32)
        result = ctl(address, "sessions", "--close", str(c.session_id),
                     "--admin-token-file", str(wrong))
        assert result.returncode == 1
        assert json.loads(result.stdout)["error"]["code"] == \
            "PERMISSION_DENIED"
        result = ctl(address, "sessions", "--close", str(c.session_id),
                     "--admin-token-file", str(tmp_path / "missing"),
                     json_output=False)
        assert result.returncode == 1
        assert "cannot read the admin token file" in result.stderr
        c.ping()  # still open


def test_closing_an_unknown_session_is_not_found(admin_daemon):
    result = ctl(admin_daemon.addresses[0], "sessions", "--close", "99999",
                 "--admin-token-file",
                 str(admin_daemon.workdir / "admin.token"),
                 json_output=False)
    assert result.returncode == 1
    assert "no open session has id 99999" in result.stderr


def test_token_new_prints_a_tenant_entry_that_reads_back_as_given():
    for name in ['a"b', "back\\slash", "caf\u00e9", "x" * 64]:
        out = subprocess.run([str(PJRTCTL), "token", "new", "--name", name],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        entry = out.stdout[out.stdout.index("[[tenant]]"):]
        tenant = tomllib.loads(entry)["tenant"][0]
        assert set(tenant) == {"name", "role", "token_sha256"}
        assert tenant["name"] == name and tenant["role"] == "user"
    for name, message in [("", "has 0 characters"),
                          ("x" * 65, "has 65 characters"),
                          ('a"\nrole = "admin', "control character 0x0a")]:
        out = subprocess.run([str(PJRTCTL), "token", "new", "--name", name],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stdout
        assert message in out.stderr
        assert "[[tenant]]" not in out.stdout
    out = subprocess.run([str(PJRTCTL).encode(), b"token", b"new", b"--name",
                          b"caf\xe9"], capture_output=True, timeout=60)
    assert out.returncode == 2
    assert b"--name is not UTF-8: byte 0xe9 at line 1, column 4" in out.stderr


@pytest.mark.parametrize("args, message", [
    (["sessions", "--close", "0"], "--close: '0' is not a whole number of 1 "
                                   "or more"),
    # A value past int64 was taken as its largest value.
    (["sessions", "--close", "99999999999999999999"],
     "'99999999999999999999' is not a whole number of 1 or more"),
    (["--timeout", "nan", "info"], "--timeout: 'nan' is not a number above 0"),
    (["--timeout", "abc", "info"], "--timeout: 'abc' is not a number above 0"),
    (["top", "--frames", "-1"], "'-1' is not a whole number from 0 to "
                                "2147483647"),
    (["top", "--interval", "0.01"], "'0.01' is not a number from 0.05 to "
                                    "3600"),
    (["bench", "--calls", "1.5"], "'1.5' is not a whole number from 1 to "
                                  "1000000"),
    (["health", "--wait", "-1"], "'-1' is not a number of 0 or more"),
])
def test_option_values_out_of_range_are_named_with_the_range(
        args, message):
    out = subprocess.run([str(PJRTCTL), *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert message in out.stderr
    assert "000000000000" not in out.stderr  # no 300-digit range ends


@pytest.mark.parametrize("args, message", [
    (["frobnicate"], "'frobnicate' is not a command"),
    (["sessions", "--close", "0"], "'0' is not a whole number"),
    (["compile"], "FILE is required"),
])
def test_a_usage_error_with_json_is_a_json_error_document(args, message):
    out = subprocess.run([str(PJRTCTL), "--json", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "INVALID_ARGUMENT"
    assert message in error["message"]


def test_health_of_an_unreachable_daemon_reads_as_other_errors(tmp_path):
    result = ctl(f"unix://{tmp_path}/nobody.sock", "health")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["healthy"] is False and doc["status"] == "UNREACHABLE"
    assert doc["error"]["code"] == "UNAVAILABLE"
    assert "nobody.sock" in doc["error"]["message"]


def test_an_address_or_ca_file_that_cannot_work_is_refused_at_once(
        tmp_path):
    # gRPC resolved such an address as a name for the whole timeout, and
    # logged its PEM parser's errors before failing as if no daemon ran.
    result = ctl("127.0.0.1:99999", "info", json_output=False)
    assert result.returncode == 1
    assert "address '127.0.0.1:99999' is neither" in result.stderr
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello\n")
    result = subprocess.run(
        [str(PJRTCTL), "--address", "127.0.0.1:1", "--tls-ca", str(not_pem),
         "info"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"the TLS CA file {not_pem} holds no PEM block" in result.stderr
    assert "ssl_transport_security" not in result.stderr


def test_a_program_that_is_not_utf8_is_refused_by_byte(daemon, tmp_path):
    program = tmp_path / "bad.hlo"
    program.write_bytes(b"HloModule m\nENTRY \xff")
    result = ctl(daemon.addresses[0], "compile", str(program),
                 json_output=False)
    assert result.returncode == 1
    assert ("the program text is not UTF-8: byte 0xff at line 2, column 7"
            in result.stderr)
    assert "libprotobuf" not in result.stderr


def test_admin_calls_are_off_without_a_token_file(daemon, tmp_path):
    token = tmp_path / "t"
    token.write_text("0" * 32)
    result = ctl(daemon.addresses[0], "sessions", "--close", "1",
                 "--admin-token-file", str(token), json_output=False)
    assert result.returncode == 1
    assert "admin calls are off" in result.stderr


# --- every command, both output modes ----------------------------------------

ADD_HLO = """HloModule add
ENTRY main {
  x = f32[3] parameter(0)
  ROOT y = f32[3] add(x, x)
}
"""


def command_args(name: str, tmp: pathlib.Path, address: str) -> list[str]:
    """Arguments that make `name` do real work against the test daemon."""
    (tmp / "add.hlo").write_text(ADD_HLO)
    np.save(tmp / "v.npy", np.arange(3, dtype=np.float32))
    if name == "get":
        put = json.loads(ctl(address, "put", str(tmp / "v.npy"),
                             "--keep").stdout)
        return ["get", put["handle"], "--session", put["session"], "-o",
                str(tmp / "got.npy")]
    return {
        "info": ["info"], "devices": ["devices"], "health": ["health"],
        "stats": ["stats"], "sessions": ["sessions"],
        "top": ["top", "--interval", "0.1"],
        "compile": ["compile", str(tmp / "add.hlo")],
        "run": ["run", str(tmp / "add.hlo"), "--input", str(tmp / "v.npy"),
                "--output-dir", str(tmp / "out")],
        "put": ["put", str(tmp / "v.npy")],
        "bench": ["bench", "--size", "4KiB", "--calls", "3",
                  "--transfers", "1"],
        "token": ["token", "new", "--name", "ci"],
    }[name]


def check_json(name: str, doc: dict, client: pjrt_client.Client,
               tmp: pathlib.Path) -> None:
    """The command's JSON agrees with what the daemon says directly."""
    if name == "info":
        info = client.info()
        for key in ("build_version", "platform", "backend", "task_id",
                    "task_count", "pid", "protocol_version_max"):
            assert doc[key] == info[key], key
        assert info["backend"].startswith(info["platform"] + ": ")
    elif name == "devices":
        assert [(d["id"], d["kind"], d["memory_bytes"]) for d in
                doc["devices"]] == [(d.id, d.kind, d.memory_bytes)
                                    for d in client.devices()]
    elif name == "health":
        assert doc["healthy"] is True and doc["status"] == "SERVING"
        # Every device of the daemon, each working.
        assert [(d["id"], d["healthy"]) for d in doc["devices"]] == \
            [(d.id, True) for d in client.devices()]
        assert [t["task_id"] for t in doc["tasks"]] == [0]
    elif name == "stats":
        stats = client.stats()
        assert [d["device_id"] for d in doc["devices"]] == \
            [d["device_id"] for d in stats["devices"]]
        assert [d["bytes_limit"] for d in doc["devices"]] == \
            [d["bytes_limit"] for d in stats["devices"]]
        assert doc["compile_cache"]["capacity"] == \
            stats["compile_cache"]["capacity"]
    elif name == "sessions":
        assert client.session_id in [s["public_id"] for s in doc["sessions"]]
    elif name == "top":
        assert client.session_id in [s["public_id"] for s in doc["sessions"]]
        assert [d["device_id"] for d in doc["devices"]] == \
            [d["device_id"] for d in client.stats()["devices"]]
        assert all(0 <= d["utilization"] <= 1 for d in doc["devices"])
        assert doc["interval_seconds"] >= 0.1
        assert "pjrt.v1.Server/GetStats" in [r["method"] for r in doc["rpcs"]]
    elif name == "compile":
        exe = client.compile(ADD_HLO)
        assert doc["fingerprint"] == exe.fingerprint
        assert doc["results"][0]["shape"] == "f32[3]"
    elif name == "run":
        out = np.load(doc["outputs"][0]["file"])
        np.testing.assert_array_equal(out, 2 * np.arange(3))
    elif name == "put":
        assert doc["kept"] is False and doc["shape"] == "f32[3]"
    elif name == "get":
        np.testing.assert_array_equal(np.load(tmp / "got.npy"),
                                      np.arange(3))
        assert doc["shape"] == "f32[3]"
    elif name == "bench":
        assert doc["transfer_bytes"] == 4096
    elif name == "token":
        # 256 random bits, kept in the tenants file only as a salted hash.
        token = doc["token"]
        assert re.fullmatch(r"[0-9a-f]{64}", token)
        salt, digest = doc["token_sha256"].split("$")
        assert digest == hashlib.sha256((salt + token).encode()).hexdigest()
    else:
        raise AssertionError(f"no check for {name}")


# `transfer` needs a cluster: tests/python/test_cluster.py runs it.
LOCAL_COMMANDS = ["info", "devices", "health", "stats", "top", "sessions",
                  "compile", "run", "put", "get", "bench", "token"]


def test_the_list_covers_every_command():
    text = help_text().split("Subcommands:")[1]
    commands = set(re.findall(r"^  ([a-z]+) {2,}", text, re.MULTILINE))
    assert commands == set(LOCAL_COMMANDS) | {"transfer"}


@pytest.mark.parametrize("name", LOCAL_COMMANDS)
def test_every_command_in_both_output_modes(daemon, tmp_path, name):
    address = daemon.addresses[0]
    with pjrt_client.connect(address) as client:
        result = ctl(address, *command_args(name, tmp_path, address))
        assert result.returncode == 0, result.stderr
        check_json(name, json.loads(result.stdout), client, tmp_path)
        text = ctl(address, *command_args(name, tmp_path, address),
                   json_output=False)
        assert text.returncode == 0, text.stderr
        assert text.stdout.strip() and not text.stdout.lstrip(
            ).startswith("{")


@pytest.mark.parametrize("name", LOCAL_COMMANDS + ["transfer"])
def test_every_command_has_help_with_an_example(name):
    assert "Example: pjrtctl " + name in help_text(name)


def test_put_refuses_an_empty_session_a_stray_lease_and_an_empty_token(
        daemon, tmp_path):
    np.save(tmp_path / "x.npy", np.ones(3, np.float32))
    x = str(tmp_path / "x.npy")
    for args, message in [
            (["put", x, "--session", ""], "--session is empty"),
            (["put", x, "--lease", "60"], "--lease sets the lease of the "
                                          "session --keep makes")]:
        result = ctl(daemon.addresses[0], *args, json_output=False)
        assert result.returncode == 2, result.stdout
        assert message in result.stderr
    empty = tmp_path / "token"
    empty.write_text("\n")
    result = subprocess.run(
        [str(PJRTCTL), "--address", daemon.addresses[0], "--token-file",
         str(empty), "info"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"the token file {empty} is empty" in result.stderr


def test_an_output_folder_that_cannot_be_made_is_named_by_what_failed(
        daemon, tmp_path):
    program = tmp_path / "one.hlo"
    program.write_text("HloModule one\nENTRY e {\n"
                       "  ROOT c = f32[] constant(1)\n}\n")
    in_the_way = tmp_path / "file"
    in_the_way.write_text("")
    result = ctl(daemon.addresses[0], "run", str(program), "--output-dir",
                 str(in_the_way / "out"))
    assert result.returncode == 2
    error = json.loads(result.stdout)["error"]
    # Not a permission: a file is where a folder would go.
    assert error["code"] == "FAILED_PRECONDITION", error
    assert f"cannot create {in_the_way / 'out'}" in error["message"]


def test_run_reads_and_writes_complex_int4_and_f8_npy_files(daemon,
                                                            tmp_path):
    # complex as numpy's complex types (big-endian too); s4 as int8 values,
    # f8 as uint8 codes.
    program = tmp_path / "types.hlo"
    program.write_text("""HloModule types
ENTRY e {
  z = c64[3] parameter(0)
  q = s4[5] parameter(1)
  f = f8e4m3fn[2] parameter(2)
  one = s4[] constant(1)
  ROOT t = (c64[3], s4[5], f8e4m3fn[2]) tuple(c64[3] multiply(z, z),
      s4[5] add(q, s4[5] broadcast(one), dimensions={}),
      f8e4m3fn[2] add(f, f))
}""")
    z = np.array([1 + 2j, -1j, 0.5], np.complex64)
    np.save(tmp_path / "z.npy", z.astype(">c8"))
    np.save(tmp_path / "q.npy", np.array([7, -8, 0, 3, -1], np.int8))
    np.save(tmp_path / "f.npy", np.array([0x38, 0x40], np.uint8))  # 1, 2
    out = tmp_path / "out"
    result = ctl(daemon.addresses[0], "run", str(program),
                 "--input", str(tmp_path / "z.npy"),
                 "--input", str(tmp_path / "q.npy"),
                 "--input", str(tmp_path / "f.npy"),
                 "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(np.load(out / "out0.npy"), z * z)
    np.testing.assert_array_equal(np.load(out / "out1.npy"),
                                  [-8, -7, 1, 4, 0])
    np.testing.assert_array_equal(np.load(out / "out2.npy"), [0x40, 0x48])
    np.save(tmp_path / "bad.npy", np.array([9, 0, 0, 0, 0], np.int8))
    refused = ctl(daemon.addresses[0], "run", str(program),
                  "--input", str(tmp_path / "z.npy"),
                  "--input", str(tmp_path / "bad.npy"),
                  "--input", str(tmp_path / "f.npy"))
    assert refused.returncode != 0
    assert "outside the range of s4" in refused.stdout
