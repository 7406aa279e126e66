"""StableHLO programs through a real pjrtd: StableHLO's own interpreter
tests (with the checked-in list of those pjrtd does not pass, and why),
and the errors a StableHLO program gets."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon
from hlo_harness import from_wire
from stablehlo_interpret import (INTERPRET, cases, compare, read_skips,
                                 write_skips)

WRITE_SKIPS = os.environ.get("PJRT_WRITE_STABLEHLO_SKIPS") == "1"


def _reason(error: Exception) -> str:
    """An error's first line without its line and column (which move when
    a test file is edited)."""
    first = str(error).splitlines()[0]
    return re.sub(r"line \d+, column \d+: ", "", first)


def _values(executable, args=()) -> list[np.ndarray]:
    outputs = executable.execute(list(args))
    try:
        return [from_wire(b) for b in outputs]
    finally:
        for b in outputs:
            b.delete()


def _run(client, case) -> str:
    """"" if the case passes, else why not."""
    if case.reason:
        return case.reason
    try:
        executable = client.compile(case.program)
    except pjrt_client.Error as e:
        return _reason(e)
    try:
        values = _values(executable)
    except pjrt_client.Error as e:
        return "run failed: " + _reason(e)
    finally:
        executable.delete()
    if case.parallel:
        return _run_parallel(client, case, values)
    for i, kind in enumerate(case.checks):
        why = compare(kind, values[2 * i], values[2 * i + 1])
        if why:
            return f"wrong result: check {i}: {why}"
    return ""


def _run_parallel(client, case, values) -> str:
    """Runs case.parallel on replicas x partitions devices with the inputs
    the setup program computed, and checks the results."""
    inputs, expected = values[:case.inputs], values[case.inputs:]
    devices = case.replicas * case.partitions
    try:
        executable = client.compile(case.parallel)
    except pjrt_client.Error as e:
        return _reason(e)
    try:
        per_device = case.inputs // devices
        args = [inputs[d * per_device:(d + 1) * per_device]
                for d in range(devices)]
        outputs = executable.execute_replicated(args)
        results = []
        for device_outputs in outputs:
            results += [from_wire(b) for b in device_outputs]
            for b in device_outputs:
                b.delete()
    except pjrt_client.Error as e:
        return "run failed: " + _reason(e)
    finally:
        executable.delete()
    for i, (kind, index) in enumerate(zip(case.checks, case.checked)):
        why = compare(kind, results[index], expected[i])
        if why:
            return f"wrong result: check {i}: {why}"
    return ""


@pytest.fixture(scope="module")
def interpreter_client(tmp_path_factory):
    """A daemon of its own with 8 host devices: the interpreter's parallel
    tests run on up to 6."""
    workdir = tmp_path_factory.mktemp("stablehlo")
    d = Daemon(workdir, "--platform", "host", "--host-devices", "8",
               "--memory-limit", str(1 << 28),
               "--listen", f"unix://{workdir}/pjrtd.sock")
    try:
        with pjrt_client.connect(d.addresses[0],
                                 client_name="stablehlo") as c:
            yield c
    finally:
        assert d.stop() == 0, d.log_path.read_text()


def test_interpreter_tests_pass_or_are_listed_with_their_reason(
        interpreter_client):
    client = interpreter_client
    assert len(list(INTERPRET.glob("*.mlir"))) == 104
    all_cases = cases()
    assert len(all_cases) > 500
    outcomes = {case.name: _run(client, case) for case in all_cases}
    failed = {name: why for name, why in outcomes.items() if why}
    if WRITE_SKIPS:
        write_skips(failed)
    skips = read_skips()
    problems = []
    for name, why in outcomes.items():
        listed = skips.get(name)
        if listed is None and why:
            problems.append(f"{name} fails: {why}")
        elif listed is not None and listed != why:
            problems.append(f"{name} is listed as '{listed}' but "
                            + (f"now: {why}" if why else "passes"))
    for name in skips:
        if name not in outcomes:
            problems.append(f"{name} is listed but is no case")
    passed = sum(1 for why in outcomes.values() if not why)
    print(f"{passed} of {len(outcomes)} interpreter test functions pass")
    assert not problems, "\n".join(problems[:50])
    # Refusals only: a case pjrtd runs must give the right answer.
    assert not [n for n, w in failed.items() if w.startswith("wrong")]


def test_the_quick_start_program_runs(client):
    """examples/quickstart.py's program: relu(x) + 1 as JAX's as_text()
    prints it, which the README's quick start shows."""
    import sys
    sys.path.insert(0, str(INTERPRET.parents[3] / "examples"))
    import quickstart
    executable = client.compile(quickstart.RELU_PLUS_ONE)
    assert executable.name == "jit_f"
    (y,) = executable.execute([np.float32([-2, -0.5, 0, 1.5])])
    np.testing.assert_array_equal(y.to_numpy(), [1, 1, 1, 2.5])


MULHI_TYPES = {"i8": np.int8, "ui8": np.uint8, "i16": np.int16,
               "ui16": np.uint16, "i32": np.int32, "ui32": np.uint32,
               "i64": np.int64, "ui64": np.uint64}


@pytest.mark.parametrize("mlir_type", sorted(MULHI_TYPES))
def test_chlo_mulhi_is_the_high_half_of_the_whole_product(client, mlir_type):
    """chlo.mulhi against Python's unbounded integers, the extremes of each
    type among random values (64 bits: through 32-bit halves)."""
    dtype = MULHI_TYPES[mlir_type]
    info = np.iinfo(dtype)
    rng = np.random.default_rng(len(mlir_type) * 17 + info.bits)

    edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2,
             info.min + 1 if info.min < 0 else info.max - 1]

    def draws():
        return list(rng.integers(info.min, info.max, 64, endpoint=True,
                                 dtype=dtype))
    a = np.array(edges * 6 + draws(), dtype=dtype)
    b = np.array([e for e in edges for _ in range(6)] + draws(), dtype=dtype)
    n = a.size
    program = f"""func.func @main(%a: tensor<{n}x{mlir_type}>,
                 %b: tensor<{n}x{mlir_type}>) -> tensor<{n}x{mlir_type}> {{
  %0 = "chlo.mulhi"(%a, %b) : (tensor<{n}x{mlir_type}>,
       tensor<{n}x{mlir_type}>) -> tensor<{n}x{mlir_type}>
  return %0 : tensor<{n}x{mlir_type}>
}}
"""
    executable = client.compile(program)
    (out,) = executable.execute([a, b])
    got = out.to_numpy()
    bits = info.bits
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist()):
        high = (x * y) >> bits  # floor: the signed high half
        if info.min == 0:
            high &= (1 << bits) - 1
        assert g == high, f"mulhi({x}, {y}) = {g}, want {high}"


def test_dynamic_ops_with_constant_shape_operands_run_as_static_ones(client):
    """real_dynamic_slice and dynamic_pad whose shape operands are integer
    constants run as slice and pad; a shape operand computed at run time is
    refused naming it."""
    program = """func.func @main(%x: tensor<6x4xf32>) -> tensor<2x6xf32> {
  %start = stablehlo.constant dense<[1, 0]> : tensor<2xi64>
  %limit = stablehlo.constant dense<[5, 4]> : tensor<2xi64>
  %step = stablehlo.constant dense<[2, 1]> : tensor<2xi64>
  %s = stablehlo.real_dynamic_slice %x, %start, %limit, %step
    : (tensor<6x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
    -> tensor<2x4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %low = stablehlo.constant dense<[0, 2]> : tensor<2xi64>
  %high = stablehlo.constant dense<0> : tensor<2xi64>
  %p = stablehlo.dynamic_pad %s, %zero, %low, %high, %high
    : (tensor<2x4xf32>, tensor<f32>, tensor<2xi64>, tensor<2xi64>,
       tensor<2xi64>) -> tensor<2x6xf32>
  return %p : tensor<2x6xf32>
}
"""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    (out,) = client.compile(program).execute([x])
    np.testing.assert_array_equal(out.to_numpy(),
                                  np.pad(x[1:5:2], [(0, 0), (2, 0)]))
    computed = """func.func @main(%x: tensor<4xf32>, %low: tensor<1xi64>)
    -> tensor<6xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %none = stablehlo.constant dense<0> : tensor<1xi64>
  %p = stablehlo.dynamic_pad %x, %zero, %low, %none, %none
    : (tensor<4xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>,
       tensor<1xi64>) -> tensor<6xf32>
  return %p : tensor<6xf32>
}
"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match=r"edge_padding_low \(operand 2, %low\) must be "
                             r"an integer constant"):
        client.compile(computed)


def test_collective_broadcast_bounds_its_groups(client):
    """A collective_broadcast becomes a permute per place in its longest
    group: a group past 1024 processes is refused naming its size."""
    ids = ", ".join(str(i) for i in range(1025))
    program = f"""func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %0 = "stablehlo.collective_broadcast"(%x) {{
    replica_groups = dense<[[{ids}]]> : tensor<1x1025xi64>
  }} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}}
"""
    with pytest.raises(pjrt_client.UnimplementedError,
                       match="a group of 1025 processes; at most 1024"):
        client.compile(program)


def test_collective_reduce_keeps_each_groups_result_at_its_first(
        interpreter_client):
    """Three replicas, one group [2, 1]: replica 2 gets the group's sum,
    replica 1 zeros, replica 0 (in no group) zeros."""
    program = """module @m attributes {mhlo.num_replicas = 3 : i32} {
  func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {
    %0 = "stablehlo.collective_reduce"(%x) ({
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %s = stablehlo.add %a, %b : tensor<i32>
        stablehlo.return %s : tensor<i32>
    }) {replica_groups = dense<[[2, 1]]> : tensor<1x2xi64>}
      : (tensor<3xi32>) -> tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}
"""
    client = interpreter_client
    inputs = [np.array([1, 2, 3], np.int32) * (10 ** r) for r in range(3)]
    executable = client.compile(program)
    try:
        outputs = executable.execute_replicated([[x] for x in inputs])
        got = [from_wire(out[0]) for out in outputs]
    finally:
        executable.delete()
    np.testing.assert_array_equal(got[0], np.zeros(3, np.int32))
    np.testing.assert_array_equal(got[1], np.zeros(3, np.int32))
    np.testing.assert_array_equal(got[2], inputs[1] + inputs[2])


def test_bitcast_convert_packs_i1_bits_least_significant_first(client):
    """StableHLO's i1 is one bit: f32[3] <-> i1[3, 32] and i1[2, 16] ->
    i16[2], bit 0 first, against numpy's little-endian bit order."""
    program = """func.func @main(%x: tensor<3xf32>, %b: tensor<2x16xi1>)
    -> (tensor<3x32xi1>, tensor<3xf32>, tensor<2xi16>) {
  %bits = stablehlo.bitcast_convert %x : (tensor<3xf32>) -> tensor<3x32xi1>
  %back = stablehlo.bitcast_convert %bits
    : (tensor<3x32xi1>) -> tensor<3xf32>
  %w = stablehlo.bitcast_convert %b : (tensor<2x16xi1>) -> tensor<2xi16>
  return %bits, %back, %w : tensor<3x32xi1>, tensor<3xf32>, tensor<2xi16>
}
"""
    x = np.array([1.5, -0.0, np.float32(3.1e-39)], np.float32)
    b = np.array([[1, 0, 1, 1] * 4, [0] * 15 + [1]], bool)
    executable = client.compile(program)
    try:
        bits, back, w = [o.to_numpy() for o in executable.execute([x, b])]
    finally:
        executable.delete()
    want = np.unpackbits(x.view(np.uint8), bitorder="little").reshape(3, 32)
    np.testing.assert_array_equal(bits, want.astype(bool))
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32))
    packed = np.packbits(b, axis=1, bitorder="little").view(np.int16)
    np.testing.assert_array_equal(w, packed.reshape(2))


def test_collective_broadcast_with_roots_chosen_at_run_time(
        interpreter_client):
    """has_dynamic_root: four replicas in groups [3, 1] and [0, 2]; the
    roots (places in the group) are a parameter: operand 0 from place 1,
    operand 1 from place 0, bits kept (-0.0 and a NaN payload)."""
    program = """module @m attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<2xf32>, %y: tensor<i32>, %r: tensor<2xi32>)
      -> (tensor<2xf32>, tensor<i32>) {
    %0:2 = "stablehlo.collective_broadcast"(%x, %y, %r) {
      replica_groups = dense<[[3, 1], [0, 2]]> : tensor<2x2xi64>,
      has_dynamic_root
    } : (tensor<2xf32>, tensor<i32>, tensor<2xi32>)
      -> (tensor<2xf32>, tensor<i32>)
    return %0#0, %0#1 : tensor<2xf32>, tensor<i32>
  }
}
"""
    client = interpreter_client
    nan = np.array([0x7fc01234], np.uint32).view(np.float32)[0]
    xs = [np.array([r, -0.0 if r == 1 else nan], np.float32)
          for r in range(4)]
    ys = [np.array(100 + r, np.int32) for r in range(4)]
    roots = np.array([1, 0], np.int32)
    executable = client.compile(program)
    try:
        outputs = executable.execute_replicated(
            [[xs[r], ys[r], roots] for r in range(4)])
        got = [[from_wire(b) for b in out] for out in outputs]
    finally:
        executable.delete()
    # Group [3, 1]: place 1 is replica 1, place 0 replica 3; group [0, 2]:
    # place 1 is replica 2, place 0 replica 0.
    for r, (x_from, y_from) in {0: (2, 0), 2: (2, 0), 1: (1, 3),
                                3: (1, 3)}.items():
        np.testing.assert_array_equal(got[r][0].view(np.uint32),
                                      xs[x_from].view(np.uint32))
        assert got[r][1] == ys[y_from]
