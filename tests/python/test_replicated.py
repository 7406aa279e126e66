"""Replicated and partitioned execution, donation and tuples, on a daemon
with four host devices."""

from __future__ import annotations

import json
import pathlib
import subprocess
import tempfile
import time
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from conftest import PJRTCTL, Daemon

DEVICES = 4

# bf16 results come back as uint16 bit patterns without ml_dtypes (as_numpy
# widens them); the client's warning about it is expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:ml_dtypes is not installed")


@pytest.fixture(scope="module")
def daemon4() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        d = Daemon(workdir, "--platform", "host", "--host-devices",
                   str(DEVICES), "--memory-limit", str(1 << 30),
                   "--listen", f"unix://{workdir}/pjrtd.sock")
        yield d
        assert d.stop() == 0, d.log_path.read_text()


@pytest.fixture
def client(daemon4: Daemon) -> Iterator[pjrt_client.Client]:
    with pjrt_client.connect(daemon4.addresses[0],
                             client_name="pytest-replicated") as c:
        yield c


def bytes_in_use(client, device):
    return client.stats()["devices"][device]["bytes_in_use"]


def await_bytes_in_use(client, device, expected, timeout=20.0):
    """Polls stats until the daemon has freed what it must free (frees are
    ordered after the device's work, so they may trail the results)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bytes_in_use(client, device) == expected:
            return True
        time.sleep(0.02)
    return bytes_in_use(client, device) == expected


# --- data-parallel SGD

GLOBAL_BATCH = 32
LEARNING_RATE = 0.1


def sgd_step_hlo(replicas: int) -> str:
    """One SGD step of a 4-8-2 tanh MLP on a mean squared error, with the
    gradients summed over the replicas (all-reduce; the identity for one
    replica). The parameters are donated to the updated ones."""
    b = GLOBAL_BATCH // replicas
    scale = 2.0 / (GLOBAL_BATCH * 2)  # d/dy of the mean over N x 2 errors
    aliases = ", ".join(f"{{{i}}}: ({i}, {{}}, may-alias)" for i in range(4))
    return f"""
HloModule sgd_step, replica_count={replicas},
    input_output_alias={{ {aliases} }}

sum {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY step {{
  w1 = f32[4,8] parameter(0)
  b1 = f32[8] parameter(1)
  w2 = f32[8,2] parameter(2)
  b2 = f32[2] parameter(3)
  x = f32[{b},4] parameter(4)
  t = f32[{b},2] parameter(5)
  z = f32[{b},8] dot(x, w1),
    lhs_contracting_dims={{1}},
    rhs_contracting_dims={{0}}
  b1b = f32[{b},8] broadcast(b1), dimensions={{1}}
  z1 = f32[{b},8] add(z, b1b)
  h = f32[{b},8] tanh(z1)
  y0 = f32[{b},2] dot(h, w2),
    lhs_contracting_dims={{1}},
    rhs_contracting_dims={{0}}
  b2b = f32[{b},2] broadcast(b2), dimensions={{1}}
  y = f32[{b},2] add(y0, b2b)
  d = f32[{b},2] subtract(y, t)
  k = f32[] constant({scale!r})
  kb = f32[{b},2] broadcast(k), dimensions={{}}
  gy = f32[{b},2] multiply(d, kb)
  gw2 = f32[8,2] dot(h, gy),
    lhs_contracting_dims={{0}},
    rhs_contracting_dims={{0}}
  zero = f32[] constant(0)
  gb2 = f32[2] reduce(gy, zero), dimensions={{0}}, to_apply=sum
  gh = f32[{b},8] dot(gy, w2),
    lhs_contracting_dims={{1}},
    rhs_contracting_dims={{1}}
  hh = f32[{b},8] multiply(h, h)
  one = f32[] constant(1)
  oneb = f32[{b},8] broadcast(one), dimensions={{}}
  dt = f32[{b},8] subtract(oneb, hh)
  gz = f32[{b},8] multiply(gh, dt)
  gw1 = f32[4,8] dot(x, gz),
    lhs_contracting_dims={{0}},
    rhs_contracting_dims={{0}}
  gb1 = f32[8] reduce(gz, zero), dimensions={{0}}, to_apply=sum
  sw1 = f32[4,8] all-reduce(gw1), replica_groups={{}}, to_apply=sum
  sw2 = f32[8,2] all-reduce(gw2), replica_groups={{}}, to_apply=sum
  sb = (f32[8], f32[2]) all-reduce(gb1, gb2), replica_groups={{}}, to_apply=sum
  sb1 = f32[8] get-tuple-element(sb), index=0
  sb2 = f32[2] get-tuple-element(sb), index=1
  lr = f32[] constant({LEARNING_RATE!r})
  lw1 = f32[4,8] broadcast(lr), dimensions={{}}
  lb1 = f32[8] broadcast(lr), dimensions={{}}
  lw2 = f32[8,2] broadcast(lr), dimensions={{}}
  lb2 = f32[2] broadcast(lr), dimensions={{}}
  uw1 = f32[4,8] multiply(lw1, sw1)
  ub1 = f32[8] multiply(lb1, sb1)
  uw2 = f32[8,2] multiply(lw2, sw2)
  ub2 = f32[2] multiply(lb2, sb2)
  nw1 = f32[4,8] subtract(w1, uw1)
  nb1 = f32[8] subtract(b1, ub1)
  nw2 = f32[8,2] subtract(w2, uw2)
  nb2 = f32[2] subtract(b2, ub2)
  ROOT out = (f32[4,8], f32[8], f32[8,2], f32[2]) tuple(nw1, nb1, nw2, nb2)
}}
"""


def sgd_step_numpy(params, x, t):
    w1, b1, w2, b2 = (p.astype(np.float64) for p in params)
    x, t = x.astype(np.float64), t.astype(np.float64)
    h = np.tanh(x @ w1 + b1)
    y = h @ w2 + b2
    gy = (y - t) * (2.0 / t.size)
    gz = (gy @ w2.T) * (1 - h * h)
    grads = (x.T @ gz, gz.sum(0), h.T @ gy, gy.sum(0))
    return [p - LEARNING_RATE * g for p, g in zip((w1, b1, w2, b2), grads)]


def test_data_parallel_sgd_equals_the_full_batch_step(client):
    rng = np.random.default_rng(5)
    params = [rng.standard_normal(s).astype(np.float32) * 0.5
              for s in ((4, 8), (8,), (8, 2), (2,))]
    x = rng.standard_normal((GLOBAL_BATCH, 4)).astype(np.float32)
    t = rng.standard_normal((GLOBAL_BATCH, 2)).astype(np.float32)
    steps = 3

    single = client.compile(sgd_step_hlo(1))
    assert single.donated_parameters == [0, 1, 2, 3]
    state = [client.put(p, device=0) for p in params]
    xs, ts = client.put(x, device=0), client.put(t, device=0)
    for _ in range(steps):
        state = single.execute(state + [xs, ts])
    expected = [b.to_numpy() for b in state]

    reference = params
    for _ in range(steps):
        reference = sgd_step_numpy(reference, x, t)
    for got, want in zip(expected, reference):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    parallel = client.compile(sgd_step_hlo(DEVICES))
    assert parallel.num_replicas == DEVICES
    devices = [d.id for d in parallel.addressable_devices]
    assert devices == list(range(DEVICES))
    shard = GLOBAL_BATCH // DEVICES
    per_device = []
    for d in devices:
        per_device.append(
            [client.put(p, device=d) for p in params]
            + [client.put(x[d * shard:(d + 1) * shard], device=d),
               client.put(t[d * shard:(d + 1) * shard], device=d)])
    before = [bytes_in_use(client, d) for d in devices]
    for _ in range(steps):
        results = parallel.execute_replicated(per_device)
        per_device = [r + args[4:] for r, args in zip(results, per_device)]
    for r, d in enumerate(devices):
        got = [b.to_numpy() for b in per_device[r][:4]]
        for g, want in zip(got, expected):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
        # Every replica applied the same reduced gradients.
        for g, first in zip(got, (b.to_numpy() for b in per_device[0][:4])):
            np.testing.assert_array_equal(g, first)
        # The updated parameters live in the donated ones' memory.
        assert await_bytes_in_use(client, d, before[r])


# --- every collective against numpy

INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]
NUMPY = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32,
         "s64": np.int64, "u8": np.uint8, "u16": np.uint16,
         "u32": np.uint32, "u64": np.uint64, "f16": np.float16,
         "bf16": np.float32, "f32": np.float32, "f64": np.float64}


def as_numpy(buffer: pjrt_client.Buffer) -> np.ndarray:
    """The buffer's values; bf16 widened to f32 exactly."""
    a = buffer.to_numpy()
    if buffer.dtype_name == "bf16":
        bits = a.view(np.uint16) if a.dtype.itemsize == 2 else a
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return a


ID_HLO = {
    "replica": "  idu = u32[] replica-id()\n",
    "partition": "  idu = u32[] partition-id()\n",
    # replica * num_partitions + partition, with 2 partitions.
    "flattened": ("  rid = u32[] replica-id()\n"
                  "  pid = u32[] partition-id()\n"
                  "  two = u32[] constant(2)\n"
                  "  r2 = u32[] multiply(rid, two)\n"
                  "  idu = u32[] add(r2, pid)\n"),
}


def input_hlo(dtype: str, a: int, b: int, m: int, offset: int,
              quarter: bool, ids: str) -> str:
    """HLO for x = T[4,8] with x.flat[i] = (a*i + b*id) % m + offset
    (times 0.25 if quarter), from the participant's id."""
    def s32(name, value):
        return (f"  {name}s = s32[] constant({value})\n"
                f"  {name} = s32[32] broadcast({name}s), dimensions={{}}\n")
    text = ID_HLO[ids]
    text += "  ids = s32[] convert(idu)\n"
    text += "  idb = s32[32] broadcast(ids), dimensions={}\n"
    text += "  io = s32[32] iota(), iota_dimension=0\n"
    text += s32("ka", a) + s32("kb", b) + s32("km", m) + s32("ko", offset)
    text += "  t1 = s32[32] multiply(io, ka)\n"
    text += "  t2 = s32[32] multiply(idb, kb)\n"
    text += "  t3 = s32[32] add(t1, t2)\n"
    text += "  t4 = s32[32] remainder(t3, km)\n"
    text += "  t5 = s32[32] add(t4, ko)\n"
    text += f"  xc = {dtype}[32] convert(t5)\n"
    flat = "xc"
    if quarter:
        text += (f"  q = {dtype}[] constant(0.25)\n"
                 f"  qb = {dtype}[32] broadcast(q), dimensions={{}}\n"
                 f"  xq = {dtype}[32] multiply(xc, qb)\n")
        flat = "xq"
    text += f"  x = {dtype}[4,8] reshape({flat})\n"
    return text


def input_numpy(dtype: str, a, b, m, offset, quarter, id_) -> np.ndarray:
    v = (a * np.arange(32) + b * id_) % m + offset
    if dtype == "pred":
        return (v != 0).reshape(4, 8)
    x = v.astype(np.float64) * (0.25 if quarter else 1.0)
    return x.astype(NUMPY[dtype]).reshape(4, 8)


def group_of(groups, n, id_):
    for g in groups or [list(range(n))]:
        if id_ in g:
            return g
    raise AssertionError(f"{id_} in no group of {groups}")


def groups_hlo(groups) -> str:
    if not groups:
        return "{}"
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}"
                          for g in groups) + "}"


# (reduction, dtypes, a, b, m, offset for signed and float types, quarter)
ALL_REDUCE_CASES = [
    ("add", INT_TYPES + FLOAT_TYPES, 3, 5, 7, 0, True),
    ("multiply", INT_TYPES + FLOAT_TYPES, 1, 1, 3, 1, False),
    ("maximum", INT_TYPES + FLOAT_TYPES, 5, 3, 11, -5, True),
    ("minimum", INT_TYPES + FLOAT_TYPES, 5, 3, 11, -5, True),
    ("and", ["pred"] + INT_TYPES, 3, 5, 16, 0, False),
    ("or", ["pred"] + INT_TYPES, 3, 5, 16, 0, False),
]
NUMPY_REDUCE = {"add": np.add, "multiply": np.multiply,
                "maximum": np.maximum, "minimum": np.minimum,
                "and": np.bitwise_and, "or": np.bitwise_or}
GROUPS = [None, [[0, 1], [2, 3]], [[0, 2], [1, 3]], [[3, 2, 1, 0]]]


def all_reduce_params():
    n = 0
    for op, dtypes, a, b, m, offset, quarter in ALL_REDUCE_CASES:
        for dtype in dtypes:
            signed = dtype[0] in "sf"
            # Spread the group layouts over the cases.
            yield pytest.param(op, dtype, a, b, m, offset if signed else 0,
                               quarter and dtype[0] == "f",
                               GROUPS[n % len(GROUPS)],
                               id=f"{op}-{dtype}-groups{n % len(GROUPS)}")
            n += 1


def all_reduce_case(op, dtype, a, b, m, offset, quarter, groups):
    """An all-reduce over DEVICES replicas: its HLO and each replica's
    expected result."""
    scalar = "pred" if dtype == "pred" else dtype
    hlo = (f"HloModule ar_{op}_{dtype}, replica_count={DEVICES}\n"
           f"red {{ a = {scalar}[] parameter(0)  b = {scalar}[] "
           f"parameter(1)  ROOT r = {scalar}[] {op}(a, b) }}\n"
           f"ENTRY e {{\n"
           + input_hlo(dtype, a, b, m, offset, quarter, "replica")
           + f"  ROOT ar = {dtype}[4,8] all-reduce(x), replica_groups="
           f"{groups_hlo(groups)}, to_apply=red\n}}\n")
    inputs = [input_numpy(dtype, a, b, m, offset, quarter, r)
              for r in range(DEVICES)]
    wants = []
    for r in range(DEVICES):
        members = group_of(groups, DEVICES, r)
        want = inputs[members[0]]
        for q in members[1:]:
            want = NUMPY_REDUCE[op](want, inputs[q])
        wants.append(want)
    return hlo, wants


@pytest.mark.parametrize("op,dtype,a,b,m,offset,quarter,groups",
                         all_reduce_params())
def test_all_reduce_matches_numpy(client, op, dtype, a, b, m, offset,
                                  quarter, groups):
    hlo, wants = all_reduce_case(op, dtype, a, b, m, offset, quarter, groups)
    e = client.compile(hlo)
    results = e.execute_replicated([[] for _ in range(DEVICES)])
    for r in range(DEVICES):
        got = as_numpy(results[r][0])
        np.testing.assert_array_equal(got, wants[r].astype(got.dtype),
                                      err_msg=f"replica {r}")


def expected_collective(kind, inputs, groups, dim, pairs, id_):
    n = len(inputs)
    if kind == "collective-permute":
        sources = [s for s, t in pairs if t == id_]
        return (inputs[sources[0]].copy() if sources
                else np.zeros_like(inputs[id_]))
    members = group_of(groups, n, id_)
    mine = members.index(id_)
    if kind == "all-gather":
        return np.concatenate([inputs[q] for q in members], axis=dim)
    if kind == "reduce-scatter":
        total = sum(inputs[q].astype(np.float64) for q in members)
        return np.split(total, len(members), axis=dim)[mine]
    if kind == "all-to-all":
        return np.concatenate(
            [np.split(inputs[q], len(members), axis=dim)[mine]
             for q in members], axis=dim)
    raise AssertionError(kind)


def collective_hlo(kind, dtype, groups, size, dim, pairs, extra):
    """The collective's instruction; `size` participants per group."""
    g = size
    out = [4, 8]
    if kind == "all-gather":
        out[dim] *= g
    elif kind == "reduce-scatter":
        out[dim] //= g
    shape = f"{dtype}[{out[0]},{out[1]}]"
    if kind == "collective-permute":
        attrs = "source_target_pairs=" + groups_hlo(pairs)
    else:
        attrs = f"replica_groups={groups_hlo(groups)}, dimensions={{{dim}}}"
    if kind == "reduce-scatter":
        attrs += ", to_apply=red"
    return f"  ROOT c = {shape} {kind}(x), {attrs}{extra}\n"


COLLECTIVE_CASES = [
    # kind, dtype, groups, dimension, source_target_pairs
    ("all-gather", "f32", None, 0, None),
    ("all-gather", "s8", [[0, 1], [2, 3]], 1, None),
    ("all-gather", "bf16", [[3, 0], [1, 2]], 0, None),
    ("all-gather", "pred", None, 1, None),
    ("reduce-scatter", "f32", None, 0, None),
    ("reduce-scatter", "s32", [[0, 2], [1, 3]], 1, None),
    ("reduce-scatter", "f64", [[1, 0], [3, 2]], 1, None),
    ("reduce-scatter", "u16", None, 1, None),
    ("all-to-all", "f32", None, 0, None),
    ("all-to-all", "u64", [[0, 1], [2, 3]], 1, None),
    ("all-to-all", "f16", [[2, 0], [3, 1]], 0, None),
    ("collective-permute", "f32", None, 0, [[0, 1], [1, 2], [2, 3], [3, 0]]),
    ("collective-permute", "s64", None, 0, [[0, 3], [3, 0]]),
    ("collective-permute", "bf16", None, 0, [[2, 1]]),
]


MODES = ["cross-replica", "replica-and-partition", "global-ids"]


def collective_case(kind, dtype, groups, dim, pairs, mode):
    """A collective over DEVICES participants in one of XLA's group
    modes: its HLO, the launch's replicas x partitions, and each
    participant's expected result (by flattened id)."""
    permute = kind == "collective-permute"
    hlo_groups, want_groups, want_pairs = groups, groups, pairs
    if mode == "cross-replica":
        header, ids, extra = f"replica_count={DEVICES}", "replica", ""
    elif mode == "replica-and-partition":
        header, ids = "replica_count=2, num_partitions=2", "flattened"
        extra = ", channel_id=1"
        if permute:
            # Partition p of each replica sends to the other partition.
            hlo_groups = want_groups = None
            pairs = [[0, 1], [1, 0]]
            want_pairs = [[0, 1], [1, 0], [2, 3], [3, 2]]
        elif kind == "all-to-all":
            # With a channel id an all-to-all works across partitions (its
            # groups list partition ids), as XLA and StableHLO define it.
            hlo_groups = None if groups is None else [[0, 1]]
            want_groups = [[0, 1], [2, 3]]
        elif groups is not None:
            hlo_groups, want_groups = [[0], [1]], [[0, 1], [2, 3]]
        else:
            # Every replica, in every partition, partition by partition:
            # (r0 p0), (r1 p0), (r0 p1), (r1 p1).
            want_groups = [[0, 2, 1, 3]]
    elif permute:
        # Cross-partition over four partitions of one replica.
        header, ids, extra = f"num_partitions={DEVICES}", "partition", \
            ", channel_id=1"
    else:
        header, ids = "replica_count=2, num_partitions=2", "flattened"
        extra = ", channel_id=1, use_global_device_ids=true"
    quarter = dtype[0] == "f" or dtype == "bf16"
    a, b, m, offset = (1, 1, 2, 0) if dtype == "pred" else (3, 7, 13, 0)
    hlo = (f"HloModule coll, {header}\n"
           f"red {{ a = {dtype}[] parameter(0)  b = {dtype}[] "
           f"parameter(1)  ROOT r = {dtype}[] add(a, b) }}\n"
           "ENTRY e {\n" + input_hlo(dtype, a, b, m, offset, quarter, ids)
           + collective_hlo(kind, dtype, hlo_groups,
                            len(want_groups[0]) if want_groups else DEVICES,
                            dim, pairs, extra)
           + "}\n")
    inputs = [input_numpy(dtype, a, b, m, offset, quarter, i)
              for i in range(DEVICES)]
    wants = [expected_collective(kind, inputs, want_groups, dim, want_pairs, i)
             for i in range(DEVICES)]
    shape = {"replica": (DEVICES, 1), "partition": (1, DEVICES),
             "flattened": (2, 2)}[ids]
    return hlo, shape, wants


@pytest.mark.parametrize(
    "kind,dtype,groups,dim,pairs", COLLECTIVE_CASES,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(COLLECTIVE_CASES)])
@pytest.mark.parametrize("mode", MODES)
def test_collective_matches_numpy(client, kind, dtype, groups, dim, pairs,
                                  mode):
    """The group modes of XLA: replica ids without a channel id; with one,
    replica ids that take all their partitions along, or flattened ids
    (replica * partitions + partition) with use_global_device_ids;
    collective-permute with a channel id pairs partitions."""
    hlo, _, wants = collective_case(kind, dtype, groups, dim, pairs, mode)
    e = client.compile(hlo)
    results = e.execute_replicated([[] for _ in range(DEVICES)])
    for i in range(DEVICES):
        got = as_numpy(results[i][0])
        np.testing.assert_array_equal(got, wants[i].astype(got.dtype),
                                      err_msg=f"participant {i}")


def test_a_combined_collective_permute_moves_every_operand(client):
    """collective-permute of three operands (XLA's combined form): each
    result is its operand permuted by the same pairs; replica 0 receives
    nothing and gets zeros."""
    e = client.compile(f"""
HloModule combined, replica_count={DEVICES}
ENTRY e {{
  a = f32[2,3] parameter(0)
  b = s32[4] parameter(1)
  c = u8[] parameter(2)
  ROOT p = (f32[2,3], s32[4], u8[]) collective-permute(a, b, c),
      source_target_pairs={{{{0,1}},{{1,2}},{{2,3}}}}
}}""")
    inputs = [[np.full((2, 3), r + 0.5, np.float32),
               np.arange(4, dtype=np.int32) * (r + 1),
               np.uint8(10 * r + 1)] for r in range(DEVICES)]
    results = e.execute_replicated(inputs)
    sources = {1: 0, 2: 1, 3: 2}
    for r in range(DEVICES):
        got = [b.to_numpy() for b in results[r]]
        for k in range(3):
            want = (inputs[sources[r]][k] if r in sources
                    else np.zeros_like(inputs[r][k]))
            np.testing.assert_array_equal(got[k], want,
                                          err_msg=f"replica {r} result {k}")


def test_all_to_all_in_its_tuple_form_sends_operand_k_to_member_k(client):
    """XLA's all-to-all without dimensions: member q's result k is member
    k's operand q, within each group (listed out of order here)."""
    groups = [[1, 2], [3, 0]]
    e = client.compile(f"""
HloModule tuple_all_to_all, replica_count={DEVICES}
ENTRY e {{
  a = s32[2,3] parameter(0)
  b = s32[2,3] parameter(1)
  ROOT t = (s32[2,3], s32[2,3]) all-to-all(a, b),
      replica_groups={{{{1,2}},{{3,0}}}}
}}""")
    inputs = [[np.arange(6, dtype=np.int32).reshape(2, 3) + 100 * r + 10 * k
               for k in range(2)] for r in range(DEVICES)]
    results = e.execute_replicated(inputs)
    for group in groups:
        for q, replica in enumerate(group):
            got = [b.to_numpy() for b in results[replica]]
            for k, sender in enumerate(group):
                np.testing.assert_array_equal(
                    got[k], inputs[sender][q],
                    err_msg=f"replica {replica} result {k}")


@pytest.mark.parametrize("groups,message", [
    (", replica_groups={{0,1},{2,3}}", r"needs groups of 3; \{0,1\} has 2"),
    ("", "over one group of all 4 replicas needs 4 operands"),
])
def test_all_to_all_tuple_form_needs_one_operand_per_member(client, groups,
                                                            message):
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(f"""
HloModule bad, replica_count=4
ENTRY e {{
  a = f32[2] parameter(0)
  ROOT t = (f32[2], f32[2], f32[2]) all-to-all(a, a, a){groups}
}}""")


@pytest.mark.parametrize("groups", [[[1, 0], [2, 3]], [[2, 0, 1]]])
def test_collective_broadcast_sends_each_groups_first_operand(client,
                                                              groups):
    """Every member of a group gets its first member's operand; a replica
    in no group gets zeros."""
    text = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups)
    e = client.compile(f"""
HloModule cb, replica_count={DEVICES}
ENTRY e {{
  x = f32[3] parameter(0)
  ROOT cb = f32[3] collective-broadcast(x), replica_groups={{{text}}}
}}""")
    inputs = [[np.array([r, -0.0, r + 0.25], np.float32)]
              for r in range(DEVICES)]
    results = e.execute_replicated(inputs)
    for r in range(DEVICES):
        group = next((g for g in groups if r in g), None)
        want = (inputs[group[0]][0] if group is not None
                else np.zeros(3, np.float32))
        got = results[r][0].to_numpy()
        # Bit for bit: -0.0 stays negative.
        np.testing.assert_array_equal(got.view(np.uint32),
                                      want.view(np.uint32),
                                      err_msg=f"replica {r}")


def test_replica_and_partition_ids_come_from_the_assignment(client):
    e = client.compile("""
HloModule ids, replica_count=2, num_partitions=2
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}""", device_assignment=[[3, 1], [0, 2]])
    assert e.device_assignment == [[3, 1], [0, 2]]
    assert [d.id for d in e.addressable_devices] == [3, 1, 0, 2]
    results = e.execute_replicated([[]] * DEVICES)
    got = [(int(r.to_numpy()), int(p.to_numpy()), r.device.id)
           for r, p in results]
    assert got == [(0, 0, 3), (0, 1, 1), (1, 0, 0), (1, 1, 2)]


def test_all_reduce_into_donated_inputs_stays_correct(client):
    """Each member writes its chunk of the sum into every output; with the
    inputs donated those outputs are the peers' inputs."""
    e = client.compile("""
HloModule inplace, replica_count=4,
    input_output_alias={ {}: (0, {}, may-alias) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[100003] parameter(0)
  ROOT ar = f32[100003] all-reduce(x), replica_groups={}, to_apply=add
}""")
    assert e.donated_parameters == [0]
    rng = np.random.default_rng(11)
    inputs = [rng.integers(-1000, 1000, 100003).astype(np.float32)
              for _ in range(DEVICES)]
    buffers = [[client.put(x, device=d)] for d, x in enumerate(inputs)]
    before = [bytes_in_use(client, d) for d in range(DEVICES)]
    results = e.execute_replicated(buffers)
    want = inputs[0] + inputs[1] + inputs[2] + inputs[3]
    for d in range(DEVICES):
        np.testing.assert_array_equal(results[d][0].to_numpy(), want)
        assert await_bytes_in_use(client, d, before[d])


# --- compile options

AR_HLO = """
HloModule ar4, replica_count=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  ROOT ar = f32[3] all-reduce(x), replica_groups={}, to_apply=add
}"""


def failed_after_enqueue(client, device):
    """A buffer on `device` whose producer fails after it was enqueued: a
    lone part of an all-reduce that waits half a second for peers that
    never come."""
    lone = client.compile(AR_HLO, collective_timeout=0.5)
    (failed,) = lone.execute_sharded([np.ones(3, np.float32)], device,
                                     launch_id=424242)
    return failed


def test_a_replica_whose_input_failed_fails_the_collective_for_all(client):
    """Its kernel does not run on the failed input's memory (stale bytes,
    another session's even): every peer fails at once naming it, instead of
    summing those bytes without an error."""
    e = client.compile(AR_HLO, collective_timeout=30)
    bad = failed_after_enqueue(client, 2)
    args = [[client.put(np.full(3, 10.0 ** d, np.float32), device=d)]
            if d != 2 else [bad] for d in range(DEVICES)]
    start = time.monotonic()
    results = e.execute_replicated(args)
    for d, (r,) in enumerate(results):
        with pytest.raises(pjrt_client.Error) as error:
            r.to_numpy()
        if d != 2:
            assert "replica 2 partition 0 failed" in str(error.value)
            assert "an argument of its run failed" in str(error.value)
    assert time.monotonic() - start < 20  # not the 30 s timeout


def test_a_run_on_an_input_that_failed_does_not_run(client):
    """A loop whose trip count comes from a failed buffer does not loop on
    whatever its memory holds: the run fails with the input's error at
    once, and the device stays free."""
    count = client.compile(f"""
HloModule n, replica_count={DEVICES}
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }}
ENTRY e {{
  x = f32[3] parameter(0)
  ar = f32[3] all-reduce(x), replica_groups={{}}, to_apply=add
  v = f32[1] slice(ar), slice={{[0:1]}}
  ROOT n = s32[] convert(f32[] reshape(v))
}}""", collective_timeout=0.5)
    (n,) = count.execute_sharded([np.full(3, 2e9, np.float32)], 1,
                                 launch_id=434343)
    loop = client.compile("""
HloModule spin
body {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  ROOT t = (s32[], s32[]) tuple(s32[] add(i, s32[] constant(1)), n)
}
cond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  n = s32[] parameter(0)
  w = (s32[], s32[]) while((s32[], s32[]) tuple(s32[] constant(0), n)),
      condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w), index=0
}""")
    (r,) = loop.execute([n])
    with pytest.raises(pjrt_client.DeadlineExceededError):
        r.to_numpy()
    # The device is not held by a loop over a stale count.
    add = client.compile(NEGATE_ONE)
    start = time.monotonic()
    (y,) = add.execute([np.ones(3, np.float32)], device=1)
    np.testing.assert_array_equal(y.to_numpy(), -np.ones(3))
    assert time.monotonic() - start < 10


NEGATE_ONE = """HloModule neg
ENTRY e {
  x = f32[3] parameter(0)
  ROOT y = f32[3] negate(x)
}"""


@pytest.mark.parametrize("assignment,message", [
    ([[0], [1], [2]], "number of replicas 3 disagrees"),
    ([[0], [1], [1], [2]], "device 1 appears twice"),
    ([[0], [1], [2], [9]], "device 9 does not exist"),
    ([[0, 1], [2]], "every row as long"),
])
def test_bad_device_assignments_say_what_is_wrong(client, assignment,
                                                  message):
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(AR_HLO, device_assignment=assignment)


def test_replica_count_must_agree_with_the_header(client):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="replica_count=4"):
        client.compile(AR_HLO, num_replicas=2)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="5 devices"):
        client.compile(AR_HLO.replace(", replica_count=4", ""),
                       num_replicas=5)


def test_portable_executables_run_on_any_device(client):
    e = client.compile("""
HloModule neg
ENTRY e { x = f32[2] parameter(0)  ROOT n = f32[2] negate(x) }""",
                       portable=True)
    assert e.portable and e.device_assignment == []
    for d in range(DEVICES):
        (y,) = e.execute_portable([np.array([1, -2], np.float32)], device=d)
        assert y.device.id == d
        np.testing.assert_array_equal(y.to_numpy(), [-1, 2])
    with pytest.raises(pjrt_client.InvalidArgumentError, match="portable"):
        client.compile(AR_HLO).execute_portable([np.zeros(3, np.float32)],
                                                device=0)


# --- failures never hang

def test_a_bad_argument_on_one_replica_fails_the_launch_naming_it(client):
    e = client.compile(AR_HLO)
    good = [np.ones(3, np.float32)]
    args = [good, good, [np.ones(4, np.float32)], good]
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=r"replica 2 partition 0: argument 0 has shape "
                             r"f32\[4\]"):
        e.execute_replicated(args)
    # Nothing ran, nothing leaked, and the next launch works.
    results = e.execute_replicated([good] * DEVICES)
    for r in results:
        np.testing.assert_array_equal(r[0].to_numpy(), [4, 4, 4])


def test_a_failed_replica_fails_its_peers_within_the_timeout(client):
    e = client.compile(AR_HLO, collective_timeout=1)
    x = np.ones(3, np.float32)
    buffers = [client.put(x, device=d) for d in range(DEVICES)]
    # Replica 1's input is deleted after the others have been launched:
    # the sharded calls for replicas 0, 2 and 3 run, replica 1's is refused,
    # and the peers must give up at the all-reduce instead of hanging.
    start = time.monotonic()
    outs = [e.execute_sharded([buffers[d]], d, launch_id=1234)
            for d in (0, 2, 3)]
    buffers[1].delete()
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="deleted"):
        e.execute_sharded([buffers[1]], 1, launch_id=1234)
    for (y,) in outs:
        with pytest.raises(pjrt_client.DeadlineExceededError,
                           match=r"all-reduce %ar \(line 7\): replica 1 "
                                 r"partition 0 did not arrive within 1s"):
            y.block_until_ready()
    assert time.monotonic() - start < 20
    # The daemon is fine.
    results = e.execute_replicated([[x]] * DEVICES)
    np.testing.assert_array_equal(results[3][0].to_numpy(), [4, 4, 4])


def test_sharded_calls_with_one_launch_id_form_one_launch(client):
    e = client.compile(AR_HLO)
    outs = [e.execute_sharded([np.full(3, d, np.float32)], d, launch_id=99)
            for d in reversed(range(DEVICES))]
    for (y,) in outs:
        np.testing.assert_array_equal(y.to_numpy(), [6, 6, 6])
    with pytest.raises(pjrt_client.InvalidArgumentError, match="launch_id"):
        e.execute_sharded([np.ones(3, np.float32)], 0, launch_id=0)


# --- donation

DONATING_HLO = """
HloModule donate, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  w = f32[262144] parameter(0)
  g = f32[262144] parameter(1)
  s = f32[262144] multiply(g, g)
  n = f32[262144] subtract(w, s)
  ROOT t = (f32[262144], f32[262144]) tuple(n, s)
}"""
MIB = 1 << 20


def test_donation_frees_no_more_and_no_less_than_it_should(client):
    e = client.compile(DONATING_HLO)
    assert e.donated_parameters == [0]
    w = client.put(np.full(262144, 3, np.float32), device=1)
    g = client.put(np.full(262144, 1, np.float32), device=1)
    before = bytes_in_use(client, 1)
    n, s = e.execute([w, g])
    np.testing.assert_array_equal(n.to_numpy()[:3], [2, 2, 2])
    # One new MiB (s); n took w's MiB.
    assert await_bytes_in_use(client, 1, before + MIB)
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="donated"):
        w.to_numpy()
    with pytest.raises(pjrt_client.FailedPreconditionError,
                       match="donated"):
        e.execute([w, g])
    # Deleting the donated handle frees nothing: its memory is n's now.
    w.delete()
    assert bytes_in_use(client, 1) == before + MIB
    n.delete()
    s.delete()
    assert await_bytes_in_use(client, 1, before - MIB)


def test_non_donatable_parameters_are_copied(client):
    e = client.compile(DONATING_HLO, non_donatable_parameters=[0])
    assert e.donated_parameters == []
    w = client.put(np.full(262144, 3, np.float32), device=2)
    g = client.put(np.full(262144, 1, np.float32), device=2)
    before = bytes_in_use(client, 2)
    n, s = e.execute([w, g])
    np.testing.assert_array_equal(n.to_numpy()[:2], [2, 2])
    np.testing.assert_array_equal(w.to_numpy()[:2], [3, 3])
    assert await_bytes_in_use(client, 2, before + 2 * MIB)


@pytest.mark.parametrize("parameter", [2, -1])
def test_non_donatable_parameters_must_name_a_parameter(client, parameter):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match=f"non_donatable_parameters names parameter "
                             f"{parameter}, but the program has 2"):
        client.compile(DONATING_HLO, non_donatable_parameters=[parameter])


@pytest.mark.parametrize("update", [
    "y = f32[4096] add(x, b)",
    "r = f32[8] slice(b), slice={[0:8]}\n"
    "  y = f32[4096] dynamic-update-slice(x, r, s32[] constant(8))",
])
def test_a_donated_parameter_returned_beside_its_update_keeps_its_value(
        client, update):
    """The update may be written where the donated x lies only if nothing
    still reads x: here the second result is x itself."""
    e = client.compile(f"""
HloModule beside, input_output_alias={{ {{0}}: (0, {{}}, may-alias) }}
ENTRY e {{
  x = f32[4096] parameter(0)
  b = f32[4096] broadcast(f32[] constant(1)), dimensions={{}}
  {update}
  ROOT t = (f32[4096], f32[4096]) tuple(y, x)
}}""")
    assert e.donated_parameters == [0]
    x = np.arange(4096, dtype=np.float32)
    y, kept = e.execute([client.put(x)])
    np.testing.assert_array_equal(kept.to_numpy(), x)
    want = x + 1 if "add" in update else np.concatenate(
        [x[:8], np.ones(8, np.float32), x[16:]])
    np.testing.assert_array_equal(y.to_numpy(), want)


@pytest.mark.parametrize("first", [
    "f32[8] dynamic-update-slice(p0, f32[1] constant({5}), s32[] constant(2))",
    "f32[8] copy(p1)",
])
def test_donated_parameters_returned_as_each_others_results_keep_their_values(
        client, first):
    """Both parameters donated, each result in the other's memory (an update
    of p0 or p1 itself as result 0, p0 as result 1): a copy into one
    parameter's memory must not be read as the other result."""
    aliases = "{ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }"
    e = client.compile(f"""
HloModule crossed, input_output_alias={aliases}
ENTRY e {{
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  r0 = {first}
  ROOT t = (f32[8], f32[8]) tuple(r0, p0)
}}""")
    assert e.donated_parameters == [0, 1]
    a = np.arange(8, dtype=np.float32)
    b = -np.arange(8, dtype=np.float32) - 1
    r0, r1 = e.execute([client.put(a), client.put(b)])
    np.testing.assert_array_equal(r1.to_numpy(), a)
    want = b if "copy" in first else np.where(np.arange(8) == 2, 5, a)
    np.testing.assert_array_equal(r0.to_numpy(), want)


def test_the_same_buffer_cannot_be_donated_and_read(client):
    e = client.compile(DONATING_HLO)
    w = client.put(np.ones(262144, np.float32), device=0)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="same buffer"):
        e.execute([w, w])
    np.testing.assert_array_equal(w.to_numpy()[:2], [1, 1])


# --- tuples

TUPLE_HLO = """
HloModule tup
ENTRY e {
  p = (f32[2], s32[3]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  b = s32[3] get-tuple-element(p), index=1
  s = f32[2] add(a, a)
  ROOT t = (f32[2], s32[3]) tuple(s, b)
}"""


def test_a_tuple_parameter_takes_its_elements_or_a_tuple_buffer(client):
    e = client.compile(TUPLE_HLO)
    assert e.parameter_is_tuple
    assert [str(s) for s in e.parameter_shapes] == ["f32[2]", "s32[3]"]
    a, b = np.array([1, 2], np.float32), np.array([7, 8, 9], np.int32)
    s, c = e.execute([a, b])
    np.testing.assert_array_equal(s.to_numpy(), [2, 4])
    np.testing.assert_array_equal(c.to_numpy(), b)

    tup = client.make_tuple([client.put(a), client.put(b)])
    assert tup.is_tuple and len(tup.elements) == 2
    (whole,) = e.execute([tup], arguments_are_tupled=True,
                         untuple_result=False)
    assert whole.is_tuple
    got_s, got_c = whole.to_numpy()
    np.testing.assert_array_equal(got_s, [2, 4])
    np.testing.assert_array_equal(got_c, b)
    np.testing.assert_array_equal(whole.elements[1].to_numpy(), b)
    with pytest.raises(pjrt_client.InvalidArgumentError, match="tuple"):
        np.asarray(whole)
    # Deleting a tuple deletes its elements.
    count = client.stats()["buffer_count"]
    whole.delete()
    assert client.stats()["buffer_count"] == count - 3


def test_tuple_misuse_is_explained(client):
    e = client.compile(TUPLE_HLO)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="pass its 2 elements"):
        e.execute([np.ones(2, np.float32)])
    x, y = client.put(np.ones(2, np.float32), device=0), \
        client.put(np.ones(2, np.float32), device=1)
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="must share a device"):
        client.make_tuple([x, y])


# --- pjrtctl

def test_pjrtctl_runs_every_replica_and_writes_one_folder_each(
        daemon4, tmp_path):
    program = tmp_path / "ar.hlo"
    program.write_text("""
HloModule ar
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  r = u32[] replica-id()
  rf = f32[] convert(r)
  rb = f32[3] broadcast(rf), dimensions={}
  y = f32[3] add(x, rb)
  ROOT ar = f32[3] all-reduce(y), replica_groups={}, to_apply=add
}""")
    np.save(tmp_path / "x.npy", np.array([1, 2, 3], np.float32))
    out = tmp_path / "out"
    result = subprocess.run(
        [str(PJRTCTL), "--address", daemon4.addresses[0], "--json", "run",
         str(program), "--replicas", "4", "--input", str(tmp_path / "x.npy"),
         "--output-dir", str(out)],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["num_replicas"] == 4 and doc["devices"] == [0, 1, 2, 3]
    for r in range(4):
        got = np.load(out / f"replica{r}_partition0" / "out0.npy")
        # sum over r of (x + r) = 4x + 6
        np.testing.assert_array_equal(got, [10, 14, 18])
    assert len(doc["outputs"]) == 4

    two = subprocess.run(
        [str(PJRTCTL), "--address", daemon4.addresses[0], "run",
         str(program), "--replicas", "2", "--partitions", "2", "--device",
         "1", "--input", str(tmp_path / "x.npy")],
        capture_output=True, text=True, timeout=60)
    assert two.returncode == 2, two.stdout
    assert "--device applies to single-device programs" in two.stderr


def test_async_collective_pairs_run_as_their_collectives(client):
    hlo = f"""HloModule async_pairs, replica_count={DEVICES}
ENTRY e {{
  id = u32[] replica-id()
  f = f32[] convert(id)
  x = f32[2] broadcast(f), dimensions={{}}
  gs = (f32[2], f32[{2 * DEVICES}]) all-gather-start(x), replica_groups={{}},
    dimensions={{0}}
  g = f32[{2 * DEVICES}] all-gather-done(gs)
  ps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(x),
    source_target_pairs={{{",".join(
        f"{{{r},{(r + 1) % DEVICES}}}" for r in range(DEVICES))}}}
  p = f32[2] collective-permute-done(ps)
  ROOT t = (f32[{2 * DEVICES}], f32[2]) tuple(g, p)
}}
"""
    e = client.compile(hlo)
    results = e.execute_replicated([[] for _ in range(DEVICES)])
    gathered = np.repeat(np.arange(DEVICES, dtype=np.float32), 2)
    for r in range(DEVICES):
        np.testing.assert_array_equal(as_numpy(results[r][0]), gathered)
        np.testing.assert_array_equal(as_numpy(results[r][1]),
                                      np.full(2, (r - 1) % DEVICES,
                                              np.float32))
