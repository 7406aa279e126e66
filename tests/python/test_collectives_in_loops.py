"""Collectives inside while bodies and conditional branches (a scan over
layers that gathers each layer's shards, a loop that sums across replicas
every step), on a real pjrtd with three host devices, against NumPy: every
run of a body meets its peers' run of the same iteration."""
from __future__ import annotations

import numpy as np
import pytest

REPLICAS = 3
RNG = np.random.default_rng(20261206)

SUM = """add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }"""


def replicated(client, hlo, per_replica):
    """Each replica's results, given each replica's arguments."""
    if len(client.devices()) < REPLICAS:
        pytest.skip(f"needs {REPLICAS} devices")
    e = client.compile(hlo)
    try:
        results = e.execute_replicated(per_replica)
        return [[b.to_numpy() for b in r] for r in results]
    finally:
        e.delete()


def test_a_loop_sums_across_replicas_every_iteration(cl):
    # fori_loop(0, 5, lambda i, x: psum(x) * 0.25 + i): a trip count known
    # at compile time.
    hlo = f"""HloModule m, replica_count={REPLICAS}
{SUM}
cond {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  r = f32[4] all-reduce(x), replica_groups={{}}, to_apply=add
  q = f32[] constant(0.25)
  qs = f32[4] broadcast(q), dimensions={{}}
  f = f32[] convert(i)
  fs = f32[4] broadcast(f), dimensions={{}}
  m = f32[4] multiply(r, qs)
  y = f32[4] add(m, fs)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[4]) tuple(j, y)
}}
ENTRY e {{
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(s), condition=cond, body=body
  ROOT y = f32[4] get-tuple-element(w), index=1
}}"""
    xs = [RNG.standard_normal(4).astype(np.float32) for _ in range(REPLICAS)]
    results = replicated(cl, hlo, [[x] for x in xs])
    want = list(xs)
    for i in range(5):
        total = want[0] + want[1] + want[2]
        want = [total * np.float32(0.25) + np.float32(i)] * REPLICAS
    for r in range(REPLICAS):
        np.testing.assert_allclose(results[r][0], want[r], rtol=1e-6,
                                   err_msg=f"replica {r}")


def test_a_scan_over_layers_gathers_shards_and_scatters_sums(cl):
    # As a sharded scan over layers: each iteration all-gathers every
    # replica's shard, computes, and reduce-scatters the result back into
    # shards; the trip count comes from an argument (read each iteration).
    hlo = f"""HloModule m, replica_count={REPLICAS}
{SUM}
cond {{
  s = (s32[], f32[2], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=2
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[2], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[2] get-tuple-element(s), index=1
  n = s32[] get-tuple-element(s), index=2
  full = f32[6] all-gather(v), dimensions={{0}}, replica_groups={{}}
  sq = f32[6] multiply(full, full)
  rs = f32[2] reduce-scatter(sq), dimensions={{0}}, replica_groups={{}},
      to_apply=add
  k = f32[] constant(0.25)
  ks = f32[2] broadcast(k), dimensions={{}}
  w = f32[2] multiply(rs, ks)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[2], s32[]) tuple(j, w, n)
}}
ENTRY e {{
  v = f32[2] parameter(0)
  n = s32[] parameter(1)
  zero = s32[] constant(0)
  s = (s32[], f32[2], s32[]) tuple(zero, v, n)
  l = (s32[], f32[2], s32[]) while(s), condition=cond, body=body
  ROOT y = f32[2] get-tuple-element(l), index=1
}}"""
    shards = [RNG.uniform(-1, 1, 2).astype(np.float32)
              for _ in range(REPLICAS)]
    n = np.array(4, np.int32)
    results = replicated(cl, hlo, [[v, n] for v in shards])
    want = list(shards)
    for _ in range(4):
        full = np.concatenate(want)
        sq = full * full
        want = [(REPLICAS * sq[2 * r:2 * r + 2]) * np.float32(0.25)
                for r in range(REPLICAS)]
    for r in range(REPLICAS):
        np.testing.assert_allclose(results[r][0], want[r], rtol=1e-5,
                                   err_msg=f"replica {r}")


def test_nested_loops_and_a_branch_meet_their_peers_in_order(cl):
    # An outer loop of 2 around an inner loop of 3 all-reduces, a
    # conditional whose taken branch all-gathers, and collectives before
    # and after the loops: every meeting pairs the same iteration.
    hlo = f"""HloModule m, replica_count={REPLICAS}
{SUM}
inner_cond {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
inner_body {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3] get-tuple-element(s), index=1
  r = f32[3] all-reduce(x), replica_groups={{}}, to_apply=add
  third = f32[] constant(0.5)
  ts = f32[3] broadcast(third), dimensions={{}}
  y = f32[3] multiply(r, ts)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[3]) tuple(j, y)
}}
outer_cond {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
outer_body {{
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  is = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(is), condition=inner_cond, body=inner_body
  y = f32[3] get-tuple-element(w), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[3]) tuple(j, y)
}}
gather {{
  x = f32[3] parameter(0)
  g = f32[9] all-gather(x), dimensions={{0}}, replica_groups={{}}
  ROOT s = f32[3] slice(g), slice={{[3:6]}}
}}
keep {{
  x = f32[3] parameter(0)
  ROOT n = f32[3] negate(x)
}}
ENTRY e {{
  x = f32[3] parameter(0)
  p = pred[] parameter(1)
  a = f32[3] all-reduce(x), replica_groups={{}}, to_apply=add
  zero = s32[] constant(0)
  s = (s32[], f32[3]) tuple(zero, a)
  w = (s32[], f32[3]) while(s), condition=outer_cond, body=outer_body
  y = f32[3] get-tuple-element(w), index=1
  c = f32[3] conditional(p, y, y), true_computation=gather,
      false_computation=keep
  ROOT b = f32[3] all-reduce(c), replica_groups={{}}, to_apply=add
}}"""
    xs = [RNG.standard_normal(3).astype(np.float32) for _ in range(REPLICAS)]
    for taken in (True, False):
        p = np.array(taken)
        results = replicated(cl, hlo, [[x, p] for x in xs])
        v = [sum(xs)] * REPLICAS
        for _ in range(2 * 3):
            v = [sum(v) * np.float32(0.5)] * REPLICAS
        # Every replica holds the same values: replica 1's slice of the
        # gather is them; the other branch negates them.
        c = v[1] if taken else -v[0]
        for r in range(REPLICAS):
            np.testing.assert_allclose(results[r][0], REPLICAS * c,
                                       rtol=1e-5,
                                       err_msg=f"replica {r}, {taken}")
