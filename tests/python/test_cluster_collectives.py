"""Collectives whose groups span the tasks of a cluster (Gloo between
tasks, memory within one): every collective, every group mode and every
element type against numpy on a cluster of three pjrtd processes with two
host devices each, a data-parallel training step, and tasks that never come
or die."""

from __future__ import annotations

import itertools
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon
from test_cluster import Cluster, free_ports
from test_replicated import (COLLECTIVE_CASES, MODES, all_reduce_case,
                             all_reduce_params, as_numpy, collective_case)

pytestmark = pytest.mark.filterwarnings("ignore:ml_dtypes is not installed")

DEVICES_PER_TASK = 2
# Four participants on the devices of two tasks, or of three.
PLACEMENTS = {"two-tasks": [0, 1, 2, 3], "three-tasks": [0, 2, 4, 5]}
_launch_ids = itertools.count(1000)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="pjrt.collectives.") as tmp:
        c = Cluster(pathlib.Path(tmp), devices=[DEVICES_PER_TASK] * 3)
        yield c
        c.stop()


@pytest.fixture(scope="module")
def clients(cluster: Cluster) -> Iterator[list[pjrt_client.Client]]:
    cs = [pjrt_client.connect(cluster.address(t), client_name=f"task{t}")
          for t in range(len(cluster.daemons))]
    yield cs
    for c in cs:
        c.close()


def assignment_of(placement: list[int], replicas: int, partitions: int):
    return [[placement[r * partitions + p] for p in range(partitions)]
            for r in range(replicas)]


def launch(clients, hlo: str, assignment, arguments=None, launch_id=None,
           tasks=None, **compile_options):
    """Compiles `hlo` on every task that owns a device of `assignment` (or
    on `tasks`) and launches it there at once with one launch id, as one
    client per task does (multi-controller). `arguments` maps a device id
    to its argument list. Returns each device's results by device id, and
    each task's error if its call failed."""
    owners = tasks if tasks is not None else sorted(
        {d // DEVICES_PER_TASK for row in assignment for d in row})
    executables = {t: clients[t].compile(hlo, device_assignment=assignment,
                                         **compile_options)
                   for t in owners}
    launch_id = launch_id if launch_id is not None else next(_launch_ids)
    results: dict[int, list[pjrt_client.Buffer]] = {}
    errors: dict[int, Exception] = {}

    def run(task: int) -> None:
        exe = executables[task]
        lists = [(arguments or {}).get(d.id, [])
                 for d in exe.addressable_devices]
        try:
            outs = exe.execute_replicated(lists, launch_id=launch_id)
            for device, out in zip(exe.addressable_devices, outs):
                for b in out:
                    b.block_until_ready()
                results[device.id] = out
        except pjrt_client.Error as e:
            errors[task] = e

    threads = [threading.Thread(target=run, args=(t,)) for t in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def results_by_participant(results, assignment):
    return [results[d][0] for row in assignment for d in row]


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
@pytest.mark.parametrize(
    "kind,dtype,groups,dim,pairs", COLLECTIVE_CASES,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(COLLECTIVE_CASES)])
@pytest.mark.parametrize("mode", MODES)
def test_collectives_across_tasks_match_numpy(clients, kind, dtype, groups,
                                              dim, pairs, mode, placement):
    hlo, (replicas, partitions), wants = collective_case(
        kind, dtype, groups, dim, pairs, mode)
    assignment = assignment_of(PLACEMENTS[placement], replicas, partitions)
    results, errors = launch(clients, hlo, assignment)
    assert not errors, errors
    for i, got in enumerate(results_by_participant(results, assignment)):
        got = as_numpy(got)
        np.testing.assert_array_equal(got, wants[i].astype(got.dtype),
                                      err_msg=f"participant {i}")


@pytest.mark.parametrize("op,dtype,a,b,m,offset,quarter,groups",
                         all_reduce_params())
def test_all_reduce_across_three_tasks_takes_every_type(
        clients, op, dtype, a, b, m, offset, quarter, groups):
    hlo, wants = all_reduce_case(op, dtype, a, b, m, offset, quarter, groups)
    assignment = assignment_of(PLACEMENTS["three-tasks"], len(wants), 1)
    results, errors = launch(clients, hlo, assignment)
    assert not errors, errors
    for r, got in enumerate(results_by_participant(results, assignment)):
        got = as_numpy(got)
        np.testing.assert_array_equal(got, wants[r].astype(got.dtype),
                                      err_msg=f"replica {r}")


ALL_REDUCE_6 = """
HloModule ar6, replica_count=6, input_output_alias={ {}: (0, {}, may-alias) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[N] parameter(0)
  ROOT ar = f32[N] all-reduce(x), replica_groups={}, to_apply=add
}"""


def test_a_large_donated_all_reduce_over_every_device_is_exact(clients):
    """Six replicas on three tasks, 4 MiB each, donated (the output is the
    input's memory): integers, so that every order of summing is exact."""
    n = 1 << 20
    hlo = ALL_REDUCE_6.replace("[N]", f"[{n}]")
    assignment = [[d] for d in range(6)]
    rng = np.random.default_rng(5)
    inputs = [rng.integers(-1000, 1000, n).astype(np.float32)
              for _ in range(6)]
    arguments = {d: [clients[d // DEVICES_PER_TASK].put(inputs[d], device=d)]
                 for d in range(6)}
    results, errors = launch(clients, hlo, assignment, arguments)
    assert not errors, errors
    want = sum(inputs)
    for d in range(6):
        np.testing.assert_array_equal(results[d][0].to_numpy(), want)
        with pytest.raises(pjrt_client.Error, match="donated|deleted"):
            arguments[d][0].to_numpy()


def test_collectives_within_and_across_tasks_in_one_program(clients):
    """One program, two all-reduces: one whose groups stay in each task
    (memory only), one over every device (across tasks)."""
    hlo = """
HloModule mixed, replica_count=6
add { a = s32[] parameter(0)  b = s32[] parameter(1)
      ROOT s = s32[] add(a, b) }
ENTRY e {
  r = u32[] replica-id()
  x = s32[] convert(r)
  inner = s32[] all-reduce(x), replica_groups={{0,1},{2,3},{4,5}}, to_apply=add
  ROOT outer = s32[] all-reduce(inner), replica_groups={}, to_apply=add
}"""
    assignment = [[d] for d in range(6)]
    results, errors = launch(clients, hlo, assignment)
    assert not errors, errors
    for d in range(6):
        assert int(results[d][0].to_numpy()) == 2 * sum(range(6))


def test_a_loop_meets_across_tasks_once_per_iteration(clients):
    """A while loop whose body all-reduces over every device of three
    tasks, each iteration its own exchange, and an all-gather within each
    task's pair."""
    hlo = """
HloModule loop, replica_count=6
add { a = s32[] parameter(0)  b = s32[] parameter(1)
      ROOT s = s32[] add(a, b) }
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[] get-tuple-element(s), index=1
  total = s32[] all-reduce(x), replica_groups={}, to_apply=add
  x1 = s32[1] reshape(x)
  pair = s32[2] all-gather(x1), dimensions={0},
      replica_groups={{0,1},{2,3},{4,5}}
  first = s32[1] slice(pair), slice={[0:1]}
  f = s32[] reshape(first)
  y = s32[] add(total, f)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], s32[]) tuple(j, y)
}
ENTRY e {
  r = u32[] replica-id()
  x = s32[] convert(r)
  zero = s32[] constant(0)
  s = (s32[], s32[]) tuple(zero, x)
  w = (s32[], s32[]) while(s), condition=cond, body=body
  ROOT y = s32[] get-tuple-element(w), index=1
}"""
    assignment = [[d] for d in range(6)]
    results, errors = launch(clients, hlo, assignment)
    assert not errors, errors
    x = list(range(6))
    for _ in range(4):
        total = sum(x)
        x = [total + x[r - r % 2] for r in range(6)]
    for d in range(6):
        assert int(results[d][0].to_numpy()) == x[d], d


def test_launches_from_one_client_per_task_are_told_apart_by_launch_id(
        clients):
    """Two launches of one program at once: their exchanges do not mix."""
    hlo = ALL_REDUCE_6.replace("[N]", "[64]")
    assignment = [[d] for d in range(6)]
    outs = []

    def one(value: float) -> None:
        arguments = {d: [np.full(64, value * (d + 1), np.float32)]
                     for d in range(6)}
        outs.append((value, launch(clients, hlo, assignment, arguments)))

    threads = [threading.Thread(target=one, args=(v,)) for v in (1.0, 100.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for value, (results, errors) in outs:
        assert not errors, errors
        for d in range(6):
            np.testing.assert_array_equal(results[d][0].to_numpy(),
                                          np.full(64, value * 21, np.float32))


# --- a data-parallel training step -------------------------------------------

IN, HIDDEN, OUT = 32, 16, 10
LR = 0.01


def mlp_step_hlo(batch: int, total: int, replicas: int) -> str:
    """The MLP step of bench/mlp_bench.py on a batch of `batch` rows, its
    loss and gradients scaled for a global batch of `total` rows and summed
    over `replicas` replicas by all-reduce: every replica ends with the
    parameters that one step on the whole batch gives."""
    scale = repr(float(np.float32(-1.0 / total)))
    BI, BH, BO = f"[{batch},{IN}]", f"[{batch},{HIDDEN}]", f"[{batch},{OUT}]"
    IH, HO = f"[{IN},{HIDDEN}]", f"[{HIDDEN},{OUT}]"
    B, H, O_ = f"[{batch}]", f"[{HIDDEN}]", f"[{OUT}]"

    def dot(lhs, rhs):
        return (f"lhs_contracting_dims={{{lhs}}}, "
                f"rhs_contracting_dims={{{rhs}}}")

    return f"""
HloModule dp_mlp, replica_count={replicas}
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT c = f32[] add(a, b) }}
max {{ a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT c = f32[] maximum(a, b) }}
ENTRY step {{
  w1 = f32{IH} parameter(0)
  b1 = f32{H} parameter(1)
  w2 = f32{HO} parameter(2)
  b2 = f32{O_} parameter(3)
  x = f32{BI} parameter(4)
  labels = s32{B} parameter(5)
  xw = f32{BH} dot(x, w1), {dot(1, 0)}
  b1b = f32{BH} broadcast(b1), dimensions={{1}}
  z1 = f32{BH} add(xw, b1b)
  zero = f32[] constant(0)
  zeros = f32{BH} broadcast(zero), dimensions={{}}
  h = f32{BH} maximum(z1, zeros)
  hw = f32{BO} dot(h, w2), {dot(1, 0)}
  b2b = f32{BO} broadcast(b2), dimensions={{1}}
  logits = f32{BO} add(hw, b2b)
  ninf = f32[] constant(-inf)
  mx = f32{B} reduce(logits, ninf), dimensions={{1}}, to_apply=max
  mxb = f32{BO} broadcast(mx), dimensions={{0}}
  shifted = f32{BO} subtract(logits, mxb)
  e = f32{BO} exponential(shifted)
  s = f32{B} reduce(e, zero), dimensions={{1}}, to_apply=add
  sb = f32{BO} broadcast(s), dimensions={{0}}
  logs = f32{BO} log(sb)
  logp = f32{BO} subtract(shifted, logs)
  classes = s32{BO} iota(), iota_dimension=1
  lb = s32{BO} broadcast(labels), dimensions={{0}}
  hit = pred{BO} compare(lb, classes), direction=EQ
  one = f32[] constant(1)
  ones = f32{BO} broadcast(one), dimensions={{}}
  zbo = f32{BO} broadcast(zero), dimensions={{}}
  onehot = f32{BO} select(hit, ones, zbo)
  picked = f32{BO} multiply(onehot, logp)
  total = f32[] reduce(picked, zero), dimensions={{0,1}}, to_apply=add
  scale = f32[] constant({scale})
  local_loss = f32[] multiply(total, scale)
  loss = f32[] all-reduce(local_loss), replica_groups={{}}, to_apply=add
  scb = f32{BO} broadcast(scale), dimensions={{}}
  dlogp = f32{BO} multiply(onehot, scb)
  p = f32{BO} divide(e, sb)
  dsum = f32{B} reduce(dlogp, zero), dimensions={{1}}, to_apply=add
  dsumb = f32{BO} broadcast(dsum), dimensions={{0}}
  pd = f32{BO} multiply(p, dsumb)
  dlogits = f32{BO} subtract(dlogp, pd)
  db2l = f32{O_} reduce(dlogits, zero), dimensions={{0}}, to_apply=add
  dw2l = f32{HO} dot(h, dlogits), {dot(0, 0)}
  dh = f32{BH} dot(dlogits, w2), {dot(1, 1)}
  positive = pred{BH} compare(z1, zeros), direction=GT
  dz1 = f32{BH} select(positive, dh, zeros)
  db1l = f32{H} reduce(dz1, zero), dimensions={{0}}, to_apply=add
  dw1l = f32{IH} dot(x, dz1), {dot(0, 0)}
  dw1 = f32{IH} all-reduce(dw1l), replica_groups={{}}, to_apply=add
  db1 = f32{H} all-reduce(db1l), replica_groups={{}}, to_apply=add
  dw2 = f32{HO} all-reduce(dw2l), replica_groups={{}}, to_apply=add
  db2 = f32{O_} all-reduce(db2l), replica_groups={{}}, to_apply=add
  lr = f32[] constant({LR})
  lr1 = f32{IH} broadcast(lr), dimensions={{}}
  lr2 = f32{H} broadcast(lr), dimensions={{}}
  lr3 = f32{HO} broadcast(lr), dimensions={{}}
  lr4 = f32{O_} broadcast(lr), dimensions={{}}
  u1 = f32{IH} multiply(lr1, dw1)
  u2 = f32{H} multiply(lr2, db1)
  u3 = f32{HO} multiply(lr3, dw2)
  u4 = f32{O_} multiply(lr4, db2)
  w1n = f32{IH} subtract(w1, u1)
  b1n = f32{H} subtract(b1, u2)
  w2n = f32{HO} subtract(w2, u3)
  b2n = f32{O_} subtract(b2, u4)
  ROOT out = (f32{IH}, f32{H}, f32{HO}, f32{O_}, f32[])
    tuple(w1n, b1n, w2n, b2n, loss)
}}
"""


def mlp_inputs(total: int):
    rng = np.random.default_rng(3)
    params = [(rng.standard_normal((IN, HIDDEN)) / 6).astype(np.float32),
              (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
              (rng.standard_normal((HIDDEN, OUT)) / 4).astype(np.float32),
              (0.1 * rng.standard_normal(OUT)).astype(np.float32)]
    x = rng.standard_normal((total, IN)).astype(np.float32)
    labels = rng.integers(0, OUT, size=total).astype(np.int32)
    return params, x, labels


def test_a_data_parallel_step_over_three_tasks_equals_one_step_on_the_batch(
        clients):
    """3 tasks x 2 devices, one client per task, each replica on its sixth
    of the batch; gradients summed across tasks by all-reduce. Every
    replica's new parameters and loss equal the single-device step on the
    concatenated batch (to float reassociation)."""
    per_device, replicas = 8, 6
    total = per_device * replicas
    params, x, labels = mlp_inputs(total)
    assignment = [[d] for d in range(replicas)]
    arguments = {d: params + [x[d * per_device:(d + 1) * per_device],
                              labels[d * per_device:(d + 1) * per_device]]
                 for d in range(replicas)}
    results, errors = launch(
        clients, mlp_step_hlo(per_device, total, replicas), assignment,
        arguments)
    assert not errors, errors

    single = clients[0].compile(mlp_step_hlo(total, total, 1))
    want = [b.to_numpy() for b in single.execute(params + [x, labels])]
    assert want[4] > 0  # the loss
    for d in range(replicas):
        got = [b.to_numpy() for b in results[d]]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6,
                                       err_msg=f"device {d}")
        # Every replica holds the same parameters, bit for bit.
        for g, first in zip(got, [b.to_numpy() for b in results[0]]):
            np.testing.assert_array_equal(g, first)


# --- tasks that do not come, or die ------------------------------------------

PAIR_SUM = (ALL_REDUCE_6.replace("replica_count=6", "replica_count=2")
            .replace(", input_output_alias={ {}: (0, {}, may-alias) }", "")
            .replace("[N]", "[4]"))


@pytest.fixture
def pair(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, devices=[1, 1])
    yield c
    for d in c.daemons:
        if d.process.poll() is None:
            d.process.kill()
            d.process.wait()


def pair_launch(cluster: Cluster, tasks, timeout: float, value: float = 1.0):
    """The two-replica sum, launched by one client per task of `tasks`."""
    cs = {t: pjrt_client.connect(cluster.address(t)) for t in tasks}
    try:
        arguments = {d: [np.full(4, value * (d + 1), np.float32)]
                     for d in range(2)}
        results, errors = launch(cs, PAIR_SUM, [[0], [1]], arguments,
                                 tasks=tasks, collective_timeout=timeout)
        values = {d: r[0].to_numpy() for d, r in results.items()}
        return values, errors
    finally:
        for c in cs.values():
            c.close()


def test_a_task_that_never_launches_is_named_within_the_timeout(pair):
    start = time.monotonic()
    _, errors = pair_launch(pair, tasks=[0], timeout=1.5)
    elapsed = time.monotonic() - start
    assert isinstance(errors[0], pjrt_client.DeadlineExceededError)
    assert "task 1 did not arrive within 1.5s" in str(errors[0])
    assert elapsed < 15
    # The devices stay usable: the next launch, with both tasks, runs.
    values, errors = pair_launch(pair, tasks=[0, 1], timeout=10)
    assert not errors, errors
    for d in range(2):
        np.testing.assert_array_equal(values[d], np.full(4, 3.0, np.float32))


def test_a_killed_task_fails_its_peers_and_rejoins_after_a_restart(pair):
    values, errors = pair_launch(pair, tasks=[0, 1], timeout=10)
    assert not errors, errors  # connections made
    outcome = {}

    def survive() -> None:
        outcome["values"], outcome["errors"] = pair_launch(
            pair, tasks=[0], timeout=3)

    survivor = threading.Thread(target=survive)
    survivor.start()
    # Task 1 dies while task 0 waits for it at the collective (or just
    # before task 0 arrives: either way task 0 must fail naming it).
    pair.daemons[1].process.send_signal(signal.SIGKILL)
    pair.daemons[1].process.wait()
    survivor.join()
    error = outcome["errors"][0]
    assert "task 1" in str(error), error
    # Task 1 comes back (a new incarnation): the next launch connects anew.
    pair.restart(1).wait_ready()
    values, errors = pair_launch(pair, tasks=[0, 1], timeout=10, value=2.0)
    assert not errors, errors
    for d in range(2):
        np.testing.assert_array_equal(values[d], np.full(4, 6.0, np.float32))


def test_without_task_zero_a_launch_fails_at_once_naming_it(pair):
    """Task 0 keeps the rendezvous: with it gone, task 1's collective fails
    without waiting out its timeout."""
    values, errors = pair_launch(pair, tasks=[0, 1], timeout=10)
    assert not errors, errors
    pair.daemons[0].process.send_signal(signal.SIGKILL)
    pair.daemons[0].process.wait()
    start = time.monotonic()
    _, errors = pair_launch(pair, tasks=[1], timeout=60)
    assert time.monotonic() - start < 30
    assert isinstance(errors[1], pjrt_client.UnavailableError)
    assert "task 0 (the cluster's exchange directory) did not answer" in \
        str(errors[1])


# --- Kubernetes --------------------------------------------------------------

MANIFEST = (pathlib.Path(__file__).resolve().parents[2] / "deploy" /
            "kubernetes" / "pjrtd.yaml")


def test_the_kubernetes_manifest_lists_every_pod_as_a_task():
    import yaml
    documents = list(yaml.safe_load_all(MANIFEST.read_text()))
    service = next(d for d in documents if d["kind"] == "Service")
    stateful = next(d for d in documents if d["kind"] == "StatefulSet")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert stateful["spec"]["serviceName"] == service["metadata"]["name"]
    assert (stateful["spec"]["template"]["metadata"]["labels"].items()
            >= service["spec"]["selector"].items())
    peers = next(p["port"] for p in service["spec"]["ports"]
                 if p["name"] == "peers")
    args = stateful["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--task-id-from-hostname" in args
    cluster = next(a.split("=", 1)[1] for a in args
                   if a.startswith("--cluster="))
    name, service_name = (stateful["metadata"]["name"],
                          service["metadata"]["name"])
    assert cluster.split(",") == [
        f"{name}-{i}.{service_name}:{peers}"
        for i in range(stateful["spec"]["replicas"])]


def test_task_ids_come_from_the_host_names_of_statefulset_pods(tmp_path):
    """Two tasks whose host names are pjrtd-0 and pjrtd-1 (each in a UTS
    namespace of its own), started with --task-id-from-hostname and the same
    flags otherwise, as the manifest starts them."""
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare --uts is not permitted here: "
                    + probe.stderr.decode().strip())
    peers = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    secret = tmp_path / "secret"
    secret.write_text("kubernetes-secret-0123456789\n")
    secret.chmod(0o600)
    daemons = []
    # The task ids come from the host names, whatever order they start in.
    for pod in (1, 0):
        d = tmp_path / f"pod{pod}"
        d.mkdir()
        wrapper = ["unshare", "--uts", "sh", "-c",
                   f'hostname pjrtd-{pod} && exec "$@"', "sh"]
        daemons.append(Daemon(
            d, "--platform", "host", "--listen", f"unix://{d}/pjrtd.sock",
            "--task-id-from-hostname", "--cluster", peers,
            "--cluster-secret-file", str(secret), wait=False,
            wrapper=wrapper))
    try:
        for daemon in daemons:
            daemon.wait_ready()
        for pod, daemon in zip((1, 0), daemons):
            with pjrt_client.connect(daemon.addresses[0]) as client:
                mine = [d.id for d in client.devices() if d.addressable]
                assert mine == [pod]
                assert client.info()["task_id"] == pod
    finally:
        for daemon in daemons:
            daemon.stop()


def test_the_readmes_data_parallel_example_runs_as_written(cluster):
    readme = (pathlib.Path(__file__).resolve().parents[2] /
              "README.md").read_text()
    blocks = readme.split("```python\n")[1:]
    example = next(b.split("```")[0] for b in blocks if "dp_sum" in b)
    # Devices 0-3 are those of tasks 0 and 1, two each.
    runs = [subprocess.Popen(
        [sys.executable, "-c",
         example.replace("localhost:7070", cluster.address(task))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for task in (0, 1)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert out.split() == ["6.0"] * 3


def test_the_readmes_single_controller_example_runs_as_written(cluster):
    readme = (pathlib.Path(__file__).resolve().parents[2] /
              "README.md").read_text()
    blocks = readme.split("```python\n")[1:]
    example = next(b.split("```")[0] for b in blocks if "dp_step" in b)
    run = subprocess.run(
        [sys.executable, "-c",
         example.replace("localhost:7070", cluster.address(0))],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[1. 2. 3. 4.]"


# --- the exchange directory on the peer channel ------------------------------

SECRET = "cluster-secret-0123456789"  # test_cluster.Cluster's default


def peer_stub(cluster: Cluster, task: int):
    import grpc
    from pjrt_client._proto.pjrt.v1 import cluster_pb2_grpc
    channel = grpc.insecure_channel(cluster.peers[task])
    return channel, cluster_pb2_grpc.PeerStub(channel)


def test_the_directory_answers_only_peers_and_only_on_task_zero(cluster):
    import grpc
    from pjrt_client._proto.pjrt.v1 import cluster_pb2
    secret = [("x-pjrt-cluster-secret", SECRET)]
    channel, zero = peer_stub(cluster, 0)
    with channel:
        set_request = cluster_pb2.StoreSetRequest(key="k", value=b"v")
        with pytest.raises(grpc.RpcError) as e:
            zero.StoreSet(set_request, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        zero.StoreSet(set_request, metadata=secret, timeout=10)
        got = zero.StoreGet(cluster_pb2.StoreGetRequest(keys=["k", "gone"],
                                                        timeout_ms=10),
                            metadata=secret, timeout=10)
        assert list(got.missing) == ["gone"] and not got.values
        with pytest.raises(grpc.RpcError) as e:
            zero.StoreSet(cluster_pb2.StoreSetRequest(key="k" * 2000),
                          metadata=secret, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as e:
            zero.Meet(cluster_pb2.MeetRequest(id="m", task_id=2,
                                              tasks=[0, 1], timeout_ms=10),
                      metadata=secret, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "include the caller (task 2)" in e.value.details()
    channel, one = peer_stub(cluster, 1)
    with channel:
        with pytest.raises(grpc.RpcError) as e:
            one.StoreSet(set_request, metadata=secret, timeout=10)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "task 0 does" in e.value.details()


# --- one client drives the whole cluster (single controller) -----------------

@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[pjrt_client.Client]:
    c = pjrt_client.connect(cluster.address(0), client_name="controller",
                            whole_cluster=True)
    yield c
    c.close()


def sessions_of(cluster: Cluster, task: int) -> list:
    import grpc
    from pjrt_client._proto.pjrt.v1 import session_pb2, session_pb2_grpc
    with grpc.insecure_channel(cluster.address(task)) as channel:
        return list(session_pb2_grpc.SessionsStub(channel).ListSessions(
            session_pb2.ListSessionsRequest(), timeout=10).sessions)


def test_one_client_puts_and_reads_back_on_every_task(controller):
    rng = np.random.default_rng(5)
    # Small (inline reads) and larger than a chunk, a staging region and a
    # data channel's threshold (streamed through the daemon to the task).
    for shape in [(3, 4), (600, 1000)]:
        for device in range(3 * DEVICES_PER_TASK):
            a = rng.standard_normal(shape).astype(np.float32)
            b = controller.put(a, device=device)
            assert b.device.id == device
            np.testing.assert_array_equal(b.to_numpy(), a)
            out = np.empty_like(a)
            np.testing.assert_array_equal(b.to_numpy(out=out), a)
            b.delete()


def test_one_execute_replicated_runs_a_program_on_every_task(controller):
    """One call launches an all-reduce over all six devices of the three
    tasks; every result stays on its device and reads back."""
    hlo = ALL_REDUCE_6.replace("[N]", "[5]").replace(
        ", input_output_alias={ {}: (0, {}, may-alias) }", "")
    exe = controller.compile(hlo, device_assignment=[[d] for d in range(6)])
    assert [d.id for d in exe.addressable_devices] == list(range(6))
    inputs = [np.arange(5, dtype=np.float32) * (d + 1) for d in range(6)]
    outs = exe.execute_replicated([[x] for x in inputs])
    want = sum(inputs)
    for d, out in enumerate(outs):
        assert out[0].device.id == d
        np.testing.assert_array_equal(out[0].to_numpy(), want)
    # Again with the arguments already on their devices, and the results
    # fed back in: a loop that stays on the devices.
    args = [[controller.put(x, device=d)] for d, x in enumerate(inputs)]
    for _ in range(3):
        args = exe.execute_replicated(args)
    want = sum(inputs) * 6 * 6
    for out in args:
        np.testing.assert_array_equal(out[0].to_numpy(), want)


def test_a_whole_cluster_program_defaults_to_the_clusters_devices(
        controller):
    """Without an assignment, a six-replica program runs on devices 0-5 of
    the three tasks; one whose assignment names no device of the client's
    own task runs too."""
    hlo = ALL_REDUCE_6.replace("[N]", "[2]").replace(
        ", input_output_alias={ {}: (0, {}, may-alias) }", "")
    exe = controller.compile(hlo)
    assert [d.id for d in exe.addressable_devices] == list(range(6))
    outs = exe.execute_replicated(
        [[np.full(2, d, np.float32)] for d in range(6)])
    for out in outs:
        np.testing.assert_array_equal(out[0].to_numpy(), np.full(2, 15.0))
    elsewhere = controller.compile(
        hlo.replace("replica_count=6", "replica_count=2"),
        device_assignment=[[5], [2]])
    assert [d.id for d in elsewhere.addressable_devices] == [5, 2]
    outs = elsewhere.execute_replicated(
        [[np.full(2, 1.0, np.float32)], [np.full(2, 2.0, np.float32)]])
    assert [o[0].device.id for o in outs] == [5, 2]
    np.testing.assert_array_equal(outs[1][0].to_numpy(), np.full(2, 3.0))
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="device 5 is task 2's: run it there with "
                             "ExecuteReplicated"):
        elsewhere.execute([np.ones(2, np.float32)], device=5)


def test_a_data_parallel_step_driven_from_one_client_equals_one_step(
        controller, clients):
    """The MLP step of the multi-controller test above, launched by one
    client for all three tasks."""
    per_device, replicas = 8, 6
    total = per_device * replicas
    params, x, labels = mlp_inputs(total)
    exe = controller.compile(mlp_step_hlo(per_device, total, replicas),
                             device_assignment=[[d] for d in range(replicas)])
    lists = [params + [x[d * per_device:(d + 1) * per_device],
                       labels[d * per_device:(d + 1) * per_device]]
             for d in range(replicas)]
    outs = exe.execute_replicated(lists)
    single = clients[0].compile(mlp_step_hlo(total, total, 1))
    want = [b.to_numpy() for b in single.execute(params + [x, labels])]
    first = [b.to_numpy() for b in outs[0]]
    for d, out in enumerate(outs):
        got = [b.to_numpy() for b in out]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6,
                                       err_msg=f"device {d}")
        for g, f in zip(got, first):
            np.testing.assert_array_equal(g, f)


def test_a_whole_cluster_session_lives_on_every_task_and_ends_with_it(
        cluster):
    # This client's sessions on each task: its own on task 1, a proxy named
    # after it on the others. (Counting all sessions would race with the
    # proxies of earlier tests' sessions, which the keeper closes within a
    # second or two of their end.)
    def sessions_of_this_client() -> list[int]:
        return [sum(1 for s in sessions_of(cluster, t)
                    if s.client_name == "from-one"
                    or s.client_name.endswith("(from-one)"))
                for t in range(3)]
    assert sessions_of_this_client() == [0, 0, 0]
    c = pjrt_client.connect(cluster.address(1), client_name="from-one",
                            whole_cluster=True)
    buffers = [c.put(np.ones(4, np.float32), device=d) for d in (0, 4)]
    # Task 1's session has a proxy on tasks 0 and 2, listed by whose it is.
    names = [s.client_name for s in sessions_of(cluster, 2)]
    assert any(n.startswith("task 1 session ") and n.endswith("(from-one)")
               for n in names), names
    assert sessions_of_this_client() == [1, 1, 1]

    def held_on_two() -> int:
        return sum(s.buffer_count for s in sessions_of(cluster, 2)
                   if s.client_name.endswith("(from-one)"))
    assert held_on_two() == 1
    buffers[1].delete()
    assert held_on_two() == 0
    c.close()
    # The proxies close once the session has ended (the keeper looks every
    # second).
    deadline = time.monotonic() + 30
    while (left := sessions_of_this_client()) != [0, 0, 0]:
        assert time.monotonic() < deadline, \
            f"the proxies outlived the session: {left} left on tasks 0-2"
        time.sleep(0.2)


def test_ready_states_come_from_every_task_in_order(controller):
    import grpc
    from pjrt_client._proto.pjrt.v1 import buffer_pb2
    buffers = [controller.put(np.full(3, d, np.float32), device=d)
               for d in (4, 0, 2, 5)]
    handles = [b._handle for b in buffers]
    states = controller._session.buffers.GetReadyState(
        buffer_pb2.GetReadyStateRequest(session_id=controller._session.id,
                                        handles=handles), timeout=30).states
    assert [s.handle for s in states] == handles
    assert all(s.ready and s.error_code == 0 for s in states)
    with pytest.raises(grpc.RpcError) as e:
        controller._session.buffers.GetReadyState(
            buffer_pb2.GetReadyStateRequest(
                session_id=controller._session.id, handles=handles + [12345]),
            timeout=30)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "0x3039" in e.value.details()


def test_whole_cluster_mistakes_are_named(controller, clients):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="belongs to task 1.*whole_cluster"):
        clients[0].put(np.ones(2, np.float32), device=2)
    remote = controller.put(np.ones(5, np.float32), device=3)
    one = controller.compile(ALL_REDUCE_6.replace("[N]", "[5]").replace(
        "replica_count=6", "replica_count=1").replace(
        ", input_output_alias={ {}: (0, {}, may-alias) }", ""))
    # Execute runs on this task's devices; the buffer is task 1's.
    with pytest.raises(
            pjrt_client.FailedPreconditionError,
            match=f"{remote._handle:#x} lives on a device of task 1"):
        one.execute([remote], device=0)
    exe = controller.compile(
        ALL_REDUCE_6.replace("[N]", "[5]").replace(
            ", input_output_alias={ {}: (0, {}, may-alias) }", ""),
        device_assignment=[[d] for d in range(6)])
    local = controller.put(np.ones(5, np.float32), device=0)
    lists = [[controller.put(np.ones(5, np.float32), device=d)]
             for d in range(6)]
    lists[4] = [local]
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="device 4 .*is on task 0, not on task 2"):
        exe.execute_replicated(lists)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="got 2 argument lists"):
        exe.execute_replicated(lists[:2])


def test_one_client_names_a_dead_task_and_reaches_it_after_a_restart(pair):
    c = pjrt_client.connect(pair.address(0), whole_cluster=True)
    try:
        def run(exe):
            return exe.execute_replicated(
                [[np.ones(4, np.float32)], [np.full(4, 2.0, np.float32)]])

        exe = c.compile(PAIR_SUM, device_assignment=[[0], [1]],
                        collective_timeout=5)
        outs = run(exe)
        np.testing.assert_array_equal(outs[1][0].to_numpy(), np.full(4, 3.0))
        old = c.put(np.ones(4, np.float32), device=1)
        pair.daemons[1].process.send_signal(signal.SIGKILL)
        pair.daemons[1].process.wait()
        with pytest.raises(pjrt_client.UnavailableError,
                           match="task 1 .* is unavailable"):
            c.put(np.ones(4, np.float32), device=1)
        with pytest.raises(pjrt_client.UnavailableError, match="task 1"):
            run(exe)
        pair.restart(1).wait_ready()
        # The task's new incarnation gets a new proxy; what the old one
        # held went with the old process.
        b = c.put(np.full(4, 7.0, np.float32), device=1)
        np.testing.assert_array_equal(b.to_numpy(), np.full(4, 7.0))
        with pytest.raises(pjrt_client.Error,
                           match=f"{old._handle:#x} is not a buffer"):
            old.to_numpy()
        with pytest.raises(pjrt_client.FailedPreconditionError,
                           match="part on task 1 went when task 1 restarted"):
            run(exe)
        exe = c.compile(PAIR_SUM, device_assignment=[[0], [1]],
                        collective_timeout=5)
        outs = run(exe)
        np.testing.assert_array_equal(outs[0][0].to_numpy(), np.full(4, 3.0))
    finally:
        c.close()


def test_a_proxy_belongs_to_its_sessions_tenant(tmp_path):
    """With tenants, a whole-cluster session's part on another task is its
    tenant's there, under that tenant's quotas; a tenant the other task
    does not have is refused by name."""
    from test_tenants import new_token
    made = {name: new_token() for name in ("alice", "bob")}
    quota = 1 << 16

    def tenants_file(task: int, names) -> str:
        path = tmp_path / f"tenants{task}.toml"
        path.write_text("".join(f"""
[[tenant]]
name = "{n}"
token_sha256 = "{made[n]['token_sha256']}"
[tenant.quota]
device_memory = {quota}
""" for n in names))
        path.chmod(0o600)
        return str(path)

    extra = [["--tenants", tenants_file(0, ["alice", "bob"]),
              "--listen", "127.0.0.1:0"],
             ["--tenants", tenants_file(1, ["alice"])]]
    c = Cluster(tmp_path, devices=[1, 1], extra=extra)
    try:
        tcp = c.daemons[0].addresses[1]
        alice = pjrt_client.connect(tcp, token=made["alice"]["token"],
                                    whole_cluster=True)
        half = np.zeros(quota // 8, np.float32)
        kept = [alice.put(half, device=1), alice.put(half, device=1)]
        with pytest.raises(pjrt_client.ResourceExhaustedError,
                           match="quota.device_memory"):
            alice.put(half, device=1)
        np.testing.assert_array_equal(kept[1].to_numpy(), half)
        bob = pjrt_client.connect(tcp, token=made["bob"]["token"],
                                  whole_cluster=True)
        with pytest.raises(pjrt_client.PermissionDeniedError,
                           match='tenant "bob" of task 0.s session is not one '
                                 "of this task's tenants"):
            bob.put(half, device=1)
        bob.close()
        alice.close()
    finally:
        c.stop()


def test_proxy_calls_answer_only_peers(cluster):
    """The calls another task makes for a whole-cluster session need the
    cluster secret, like every peer call."""
    import grpc
    from pjrt_client._proto.pjrt.v1 import (buffer_pb2, cluster_pb2,
                                            session_pb2)
    channel, one = peer_stub(cluster, 1)
    with channel:
        calls = [
            (one.OpenProxySession,
             cluster_pb2.OpenProxySessionRequest(origin_task_id=0)),
            (one.KeepProxySessions, cluster_pb2.KeepProxySessionsRequest()),
            (one.CloseProxySession, session_pb2.CloseSessionRequest()),
            (one.ProxyDescribeBuffer, buffer_pb2.DescribeBufferRequest()),
        ]
        for call, request in calls:
            with pytest.raises(grpc.RpcError) as e:
                call(request, timeout=10)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # With it, a proxy opens, answers for itself only, and closes.
        secret = [("x-pjrt-cluster-secret", SECRET)]
        opened = one.OpenProxySession(
            cluster_pb2.OpenProxySessionRequest(origin_task_id=0,
                                                client_name="probe"),
            metadata=secret, timeout=10)
        with pytest.raises(grpc.RpcError) as e:
            one.ProxyDescribeBuffer(buffer_pb2.DescribeBufferRequest(
                session_id=opened.session_id, handle=1234),
                metadata=secret, timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        kept = one.KeepProxySessions(cluster_pb2.KeepProxySessionsRequest(
            session_ids=[opened.session_id, 99]), metadata=secret, timeout=10)
        assert list(kept.gone) == [99]
        one.CloseProxySession(
            session_pb2.CloseSessionRequest(session_id=opened.session_id),
            metadata=secret, timeout=10)
