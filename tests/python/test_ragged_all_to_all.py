"""ragged-all-to-all through a real pjrtd with four host devices, against
a NumPy reference written from XLA's semantics: update u to the group's
member j (entry j * U + u of the offset and size vectors) sends rows
[input_offsets, + send_sizes) of the sender's input to rows from
output_offsets on of j's output; rows nothing arrives at keep the
output's values. One update per member and several, groups, partitions
with a channel id, and the verifier's errors."""

from __future__ import annotations

import pathlib
import tempfile
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon

DEVICES = 4
RNG = np.random.default_rng(20261207)


@pytest.fixture(scope="module")
def client() -> Iterator[pjrt_client.Client]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        d = Daemon(workdir, "--platform", "host", "--host-devices",
                   str(DEVICES), "--listen", f"unix://{workdir}/pjrtd.sock")
        with pjrt_client.connect(d.addresses[0],
                                 client_name="pytest-ragged-a2a") as c:
            yield c
        assert d.stop() == 0, d.log_path.read_text()


def reference(inputs, outputs, in_off, send, out_off, groups):
    results = [o.copy() for o in outputs]
    for group in groups:
        updates = len(in_off[group[0]]) // len(group)
        for s in group:
            for j, r in enumerate(group):
                for u in range(updates):
                    i = j * updates + u
                    n = send[s][i]
                    results[r][out_off[s][i]:out_off[s][i] + n] = \
                        inputs[s][in_off[s][i]:in_off[s][i] + n]
    return results


def plan(groups, updates, rows_in, rows_out):
    """Offsets and sizes every member sends with: each sender's updates
    cut from its input in order; each receiver's rows handed out to its
    senders in order, so no two writes overlap."""
    members = len(groups[0])
    n = members * updates
    in_off = [np.zeros(n, np.int64) for _ in range(DEVICES)]
    send = [np.zeros(n, np.int64) for _ in range(DEVICES)]
    out_off = [np.zeros(n, np.int64) for _ in range(DEVICES)]
    recv = [np.zeros(n, np.int64) for _ in range(DEVICES)]
    for group in groups:
        free = {r: 0 for r in group}  # next free output row per receiver
        for s in group:
            at = 0
            for j, r in enumerate(group):
                for u in range(updates):
                    i = j * updates + u
                    room = min(rows_in - at, rows_out - free[r])
                    size = int(RNG.integers(0, max(room // 2, 0) + 1))
                    in_off[s][i], send[s][i] = at, size
                    out_off[s][i] = free[r]
                    recv[r][group.index(s) * updates + u] = size
                    at += size
                    free[r] += size
    return in_off, send, out_off, recv


def hlo_program(header, attrs, ty, in_shape, out_shape, n, meta_ty):
    meta = f"{meta_ty}[{n}]"
    return f"""HloModule ragged_a2a, {header}
ENTRY e {{
  input = {ty}[{','.join(map(str, in_shape))}] parameter(0)
  output = {ty}[{','.join(map(str, out_shape))}] parameter(1)
  input_offsets = {meta} parameter(2)
  send_sizes = {meta} parameter(3)
  output_offsets = {meta} parameter(4)
  recv_sizes = {meta} parameter(5)
  ROOT r = {ty}[{','.join(map(str, out_shape))}] ragged-all-to-all(input,
      output, input_offsets, send_sizes, output_offsets, recv_sizes){attrs}
}}
"""


def check(client, program, np_type, in_shape, out_shape, groups, updates,
          meta_np):
    """Runs `program` on every device with random rows and a random plan,
    against the reference."""
    inputs = [(RNG.integers(1, 100, in_shape) + 1000 * d).astype(np_type)
              for d in range(DEVICES)]
    outputs = [np.full(out_shape, -1).astype(np_type) for _ in range(DEVICES)]
    in_off, send, out_off, recv = plan(groups, updates, in_shape[0],
                                       out_shape[0])
    e = client.compile(program)
    try:
        results = e.execute_replicated(
            [[inputs[d], outputs[d], in_off[d].astype(meta_np),
              send[d].astype(meta_np), out_off[d].astype(meta_np),
              recv[d].astype(meta_np)] for d in range(DEVICES)])
        got = [r[0].to_numpy() for r in results]
    finally:
        e.delete()
    wants = reference(inputs, outputs, in_off, send, out_off, groups)
    for d in range(DEVICES):
        np.testing.assert_array_equal(got[d], wants[d],
                                      err_msg=f"participant {d}")
    return got, send


def run(client, header, attrs, ty, np_type, in_shape, out_shape, groups,
        updates, meta_ty="s32"):
    n = len(groups[0]) * updates
    program = hlo_program(header, attrs, ty, in_shape, out_shape, n, meta_ty)
    return check(client, program, np_type, in_shape, out_shape, groups,
                 updates, np.int32 if meta_ty == "s32" else np.int64)


def test_one_update_to_every_replica(client):
    got, send = run(client, f"replica_count={DEVICES}", ", replica_groups={}",
                    "f32", np.float32, (12, 3), (14, 3),
                    [list(range(DEVICES))], 1)
    # Something moved, and rows nothing arrived at kept their values.
    assert sum(int(s.sum()) for s in send) > 0
    assert (got[0] == -1).any()


def test_several_updates_per_member_within_groups(client):
    groups = [[0, 2], [1, 3]]
    run(client, f"replica_count={DEVICES}",
        ", replica_groups={{0,2},{1,3}}", "s32", np.int32, (16,), (16,),
        groups, 3, meta_ty="s64")


def test_groups_listed_out_of_order_and_rows_of_rank_three(client):
    groups = [[3, 1, 0, 2]]
    run(client, f"replica_count={DEVICES}", ", replica_groups={{3,1,0,2}}",
        "u8", np.uint8, (9, 2, 2), (7, 2, 2), groups, 2)


def test_partitions_with_a_channel_id(client):
    run(client, f"num_partitions={DEVICES}", ", channel_id=5",
        "f32", np.float32, (10, 4), (10, 4), [list(range(DEVICES))], 1)


def test_jax_lowering_as_a_stablehlo_custom_call(client):
    """lax.ragged_all_to_all as JAX lowers it: custom_call
    @ragged_all_to_all with the groups in its backend_config."""
    program = """module @jit_f attributes {mhlo.num_replicas = 4 : i32} {
  func.func public @main(%a: tensor<6x2xf32>, %b: tensor<8x2xf32>,
      %c: tensor<4xi32>, %d: tensor<4xi32>, %e: tensor<4xi32>,
      %f: tensor<4xi32>) -> tensor<8x2xf32> {
    %0 = stablehlo.custom_call @ragged_all_to_all(%a, %b, %c, %d, %e, %f)
        {api_version = 4 : i32, backend_config = {replica_groups =
        dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}} : (tensor<6x2xf32>,
        tensor<8x2xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>,
        tensor<4xi32>) -> tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}
"""
    check(client, program, np.float32, (6, 2), (8, 2),
          [list(range(DEVICES))], 1, np.int32)


def test_custom_call_without_groups_is_refused(client):
    program = """module @jit_f attributes {mhlo.num_replicas = 4 : i32} {
  func.func public @main(%a: tensor<6xf32>, %c: tensor<4xi32>)
      -> tensor<6xf32> {
    %0 = stablehlo.custom_call @ragged_all_to_all(%a, %a, %c, %c, %c, %c)
        {api_version = 4 : i32} : (tensor<6xf32>, tensor<6xf32>,
        tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>)
        -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert ("ragged_all_to_all needs backend_config = "
            "{replica_groups = dense<...>}") in str(e.value)


@pytest.mark.parametrize("operands,attrs,message", [
    ("f32[8,2], f32[8,3], s32[4], s32[4], s32[4], s32[4]", "",
     "the input is f32[8,2], the output f32[8,3]"),
    ("f32[8,2], f32[8,2], f32[4], s32[4], s32[4], s32[4]", "",
     "operand 2 (%p2) is f32[4]; input_offsets, send_sizes, output_offsets "
     "and recv_sizes are s32 or s64 vectors of one length"),
    ("f32[8,2], f32[8,2], s32[4], s32[4], s32[3], s32[4]", "",
     "operand 4 (%p4) is s32[3]"),
    ("f32[8,2], f32[8,2], s32[6], s32[6], s32[6], s32[6]", "",
     "over groups of 4 needs offsets and sizes with a multiple of 4 "
     "entries"),
    ("f32[8,2], f32[8,2], s32[2], s32[2], s32[2], s32[2]",
     ", replica_groups={{0,1},{2}}",
     "groups must be of one size; {0,1} has 2 members, {2} 1"),
])
def test_malformed_ragged_all_to_alls_are_refused_by_name(client, operands,
                                                          attrs, message):
    shapes = [s.strip() for s in operands.split(", ")]
    params = "\n".join(f"  p{i} = {s} parameter({i})"
                       for i, s in enumerate(shapes))
    program = f"""HloModule bad, replica_count={DEVICES}
ENTRY e {{
{params}
  ROOT r = {shapes[1]} ragged-all-to-all(p0, p1, p2, p3, p4, p5){attrs}
}}
"""
    with pytest.raises(pjrt_client.InvalidArgumentError) as e:
        client.compile(program)
    assert message in str(e.value)
    assert "%r" in str(e.value)
