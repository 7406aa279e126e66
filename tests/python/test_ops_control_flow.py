"""Control flow on a real pjrtd: while (tuple state, nested, in called
computations, a loop that never ends), conditional (pred and indexed, an
index out of range), call, fusion, map, async wrappers, tokens and the
placement custom-calls, and the errors for malformed ones."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pjrt_client
from hlo_harness import run

ADD_F32 = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

FORI_LOOP = """
HloModule fori
body {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  keep = f32[4] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  fi = f32[] convert(i)
  bi = f32[4] broadcast(fi), dimensions={}
  x1 = f32[4] add(x, bi)
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, x1, keep)
}
cond {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%d)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4]) tuple(zero, x, x)
  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  i = s32[] get-tuple-element(w), index=0
  r = f32[4] get-tuple-element(w), index=1
  k = f32[4] get-tuple-element(w), index=2
  ROOT out = (s32[], f32[4], f32[4]) tuple(i, r, k)
}
"""


@pytest.mark.parametrize("trips", [0, 1, 7, 1000])
def test_fori_loop_with_tuple_state_matches_python(client, trips):
    x = np.array([1, 2, 3, 4], np.float32)
    i, r, k = run(client, FORI_LOOP % trips, [("f32", x)])
    assert i == trips
    np.testing.assert_array_equal(r, x + sum(range(trips)))
    np.testing.assert_array_equal(k, x)  # passed through untouched


def test_nested_loops_inside_a_called_computation(client):
    program = """
HloModule nested
inner_body {
  p = (s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  acc = s32[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  ROOT t = (s32[], s32[]) tuple(s32[] add(j, one), s32[] add(acc, j))
}
inner_cond {
  p = (s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(j, s32[] constant(10)), direction=LT
}
outer_body {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  total = s32[] get-tuple-element(p), index=1
  start = (s32[], s32[]) tuple(i, s32[] constant(0))
  w = (s32[], s32[]) while(start), condition=inner_cond, body=inner_body
  got = s32[] get-tuple-element(w), index=1
  i1 = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], s32[]) tuple(i1, s32[] add(total, got))
}
outer_cond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
sum_loops {
  z = s32[] parameter(0)
  init = (s32[], s32[]) tuple(z, z)
  w = (s32[], s32[]) while(init), condition=outer_cond, body=outer_body
  ROOT r = s32[] get-tuple-element(w), index=1
}
ENTRY e {
  z = s32[] parameter(0)
  ROOT c = s32[] call(z), to_apply=sum_loops
}
"""
    (out,) = run(client, program, [("s32", np.int32(0))])
    assert out == sum(sum(range(i, 10)) for i in range(5))


COND = """
HloModule cond
neg {
  x = f32[3] parameter(0)
  ROOT n = f32[3] negate(x)
}
twice {
  x = f32[3] parameter(0)
  ROOT d = f32[3] add(x, x)
}
ident {
  t = (f32[3], s32[]) parameter(0)
  ROOT x = f32[3] get-tuple-element(t), index=0
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[3] parameter(1)
  t = (f32[3], s32[]) tuple(x, i)
  ROOT c = f32[3] conditional(i, x, x, t),
    branch_computations={neg, twice, ident}
}
"""


@pytest.mark.parametrize("index,factor", [(0, -1), (1, 2), (2, 1),
                                          (3, 1), (-1, 1), (99, 1)])
def test_indexed_conditional_out_of_range_takes_the_last_branch(
        client, index, factor):
    x = np.array([1, -2, 3], np.float32)
    (out,) = run(client, COND, [("s32", np.int32(index)), ("f32", x)])
    np.testing.assert_array_equal(out, x * factor)


@pytest.mark.parametrize("pred", [True, False])
def test_pred_conditional(client, pred):
    program = """
HloModule c
t {
  x = s32[] parameter(0)
  ROOT y = s32[] add(x, s32[] constant(100))
}
f {
  x = s32[] parameter(0)
  ROOT y = s32[] negate(x)
}
ENTRY e {
  p = pred[] parameter(0)
  x = s32[] parameter(1)
  ROOT c = s32[] conditional(p, x, x), true_computation=t, false_computation=f
}
"""
    (out,) = run(client, program, [("pred", np.bool_(pred)),
                                   ("s32", np.int32(5))])
    assert out == (105 if pred else -5)


def test_map_fusion_call_and_async_wrappers_run_their_computations(client):
    program = """
HloModule m
fmax {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] maximum(a, b)
  ROOT r = f32[] multiply(m, m)
}
fused {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
%s
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  m = f32[4] map(x, y), dimensions={0}, to_apply=fmax
  f = f32[4] fusion(m), kind=kLoop, calls=fused
  s = ((f32[4]), f32[4], s32[]) async-start(f), calls=fused
  u = ((f32[4]), f32[4], s32[]) async-update(s)
  d = f32[4] async-done(u)
  cs = (f32[4], f32[4], u32[]) copy-start(d)
  cd = f32[4] copy-done(cs)
  tok = token[] after-all()
  dep = f32[4] add-dependency(cd, tok)
  ar = f32[4] all-reduce-start(dep), replica_groups={}, to_apply=add
  ard = f32[4] all-reduce-done(ar)
  h = f32[4] custom-call(ard), custom_call_target="MoveToHost"
  ROOT p = f32[4] custom-call(h),
    custom_call_target="annotate_device_placement"
}
""" % ADD_F32
    x = np.array([1, -5, 3, 0], np.float32)
    y = np.array([2, -1, -3, -1], np.float32)
    (out,) = run(client, program, [("f32", x), ("f32", y)])
    np.testing.assert_array_equal(out, np.maximum(x, y) ** 2)


def test_unknown_custom_call_targets_are_unimplemented_by_name(client):
    program = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="my_kernel"
}
"""
    with pytest.raises(pjrt_client.UnimplementedError, match="my_kernel"):
        client.compile(program)


@pytest.mark.parametrize("body_root,message", [
    ("ROOT r = s32[] convert(f32[] parameter(0))",
     "changes the loop state from f32[] to s32[]"),
])
def test_a_loop_body_that_changes_the_state_shape_is_invalid(
        client, body_root, message):
    program = f"""
HloModule m
body {{
  {body_root}
}}
cond {{
  p = f32[] parameter(0)
  ROOT t = pred[] constant(false)
}}
ENTRY e {{
  x = f32[] parameter(0)
  ROOT w = f32[] while(x), condition=cond, body=body
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError, match=message):
        client.compile(program)


def test_a_conditional_whose_branches_disagree_is_invalid(client):
    program = """
HloModule m
a {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
b {
  x = f32[] parameter(0)
  ROOT y = s32[] convert(x)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(p, x, x), true_computation=a, false_computation=b
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="branch 1 b returns s32"):
        client.compile(program)


INFINITE = """
HloModule forever
body {
  p = s64[] parameter(0)
  ROOT n = s64[] add(p, s64[] constant(1))
}
cond {
  p = s64[] parameter(0)
  ROOT t = pred[] compare(p, s64[] constant(-1)), direction=NE
}
ENTRY e {
  ROOT w = s64[] while(s64[] constant(0)), condition=cond, body=body
}
"""


def test_a_loop_that_never_ends_stops_when_its_session_closes(address):
    looping = pjrt_client.connect(address, client_name="looper")
    exe = looping.compile(INFINITE)
    (result,) = exe.execute([], device=0)
    # Meanwhile another session computes on another device.
    with pjrt_client.connect(address, client_name="other") as other:
        loop = other.compile(FORI_LOOP % 3)
        outs = loop.execute([np.zeros(4, np.float32)], device=1)
        assert outs[0].to_numpy() == 3
    done = threading.Event()

    def close():
        looping.close()
        done.set()

    t = threading.Thread(target=close)
    t.start()
    assert done.wait(30), "closing the session did not stop the loop"
    t.join()
    # The daemon still serves.
    with pjrt_client.connect(address, client_name="after") as after:
        assert run(after, FORI_LOOP % 2,
                   [("f32", np.zeros(4, np.float32))])[0] == 2


def test_a_loop_that_never_ends_stops_when_its_results_are_deleted(client):
    exe = client.compile(INFINITE)
    (result,) = exe.execute([], device=2)
    result.delete()
    # The device is free again: the next run there completes.
    loop = client.compile(FORI_LOOP % 4)
    outs = loop.execute([np.zeros(4, np.float32)], device=2)
    assert outs[0].to_numpy() == 4


def test_deleting_a_result_that_a_later_run_reads_does_not_cancel(client):
    program = FORI_LOOP % 50
    first = client.compile(program)
    i, x, keep = first.execute([np.ones(4, np.float32)], device=2)
    # A consumer of x is enqueued before x and its siblings go.
    second = client.compile("""
HloModule twice
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] add(x, x)
}
""")
    (y,) = second.execute([x], device=2)
    for b in (i, x, keep):
        b.delete()
    np.testing.assert_array_equal(y.to_numpy(),
                                  2 * (1 + np.float32(sum(range(50)))))


def test_a_loop_threading_a_token_through_its_state(client):
    # JAX's ordered effects thread a token through scan loops.
    program = """
HloModule tokens
body {
  p = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  t = token[] get-tuple-element(p), index=1
  t1 = token[] after-all(t)
  ROOT r = (s32[], token[]) tuple(s32[] add(i, s32[] constant(1)), t1)
}
cond {
  p = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(6)), direction=LT
}
ENTRY e {
  z = s32[] parameter(0)
  init = (s32[], token[]) tuple(z, token[] after-all())
  w = (s32[], token[]) while(init), condition=cond, body=body
  ROOT i = s32[] get-tuple-element(w), index=0
}
"""
    assert run(client, program, [("s32", np.int32(2))])[0] == 6
