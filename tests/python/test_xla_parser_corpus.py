"""The modules of XLA's own parser tests (tests/data/hlo-corpus/parser) on a
real pjrtd: every one compiles, or is refused with the reason listed here
(ops pjrtd does not run, and forms XLA's verifier itself rejects). Those
that compute something run against numpy: the legacy dynamic-slice forms,
domains and tuple constants (and get-dimension-size, which the corpus
lacks)."""

from __future__ import annotations

import pathlib
import tempfile
from typing import Iterator

import numpy as np
import pytest

import pjrt_client
from conftest import Daemon
from hlo_harness import run

PARSER = (pathlib.Path(__file__).resolve().parents[1] / "data" /
          "hlo-corpus" / "parser")
ALL = sorted(p.name for p in PARSER.glob("*.hlo"))

UNKNOWN_TARGET = "is not supported; pjrtd runs TopK"

# The most replicas a module of the corpus asks for.
DEVICES = 32

# Module -> (error class, words of the message). Everything else compiles.
REFUSED = {
    # XLA's verifier rejects these too: after-all takes tokens only.
    # With one replica (the modules say no more) these collectives cannot
    # fit their shapes or groups, as XLA would find when compiling them.
    "AllGather.hlo": (pjrt_client.InvalidArgumentError,
                      "do not fit a group of 1 participants"),
    "AllGatherWithLayout.hlo": (pjrt_client.InvalidArgumentError,
                                "do not fit a group of 1 participants"),
    "ReduceScatter.hlo": (pjrt_client.InvalidArgumentError,
                          "names replica 1, but the launch has 1"),
    "AddDependency.hlo": (pjrt_client.InvalidArgumentError,
                          "after-all takes tokens"),
    "AfterAllWithMultipleOperands.hlo": (pjrt_client.InvalidArgumentError,
                                         "after-all takes tokens"),
    # Forms of collectives pjrtd does not run.
    "CollectivePermuteInPlaceUpdate.hlo": (
        pjrt_client.InvalidArgumentError, "is (s32[], s32[])"),
    "CollectivePermuteInPlaceUpdate3D.hlo": (
        pjrt_client.InvalidArgumentError, "is (s32[], s32[], s32[])"),
    "CollectivePermuteInPlaceUpdateMultipleReadWrite.hlo": (
        pjrt_client.InvalidArgumentError, "%input_offset"),
    "CollectivePermuteInPlaceUpdateTupleMultipleReadWrite.hlo": (
        pjrt_client.InvalidArgumentError, "%tuple.input"),
    "CollectivePermuteStartAndDoneInplaceUpdate.hlo": (
        pjrt_client.InvalidArgumentError, "collective-permute-start of one"),
    "CollectivePermuteTupleInPlaceUpdate.hlo": (
        pjrt_client.InvalidArgumentError, "%tuple.input"),
    # Host transfers: a daemon's programs have no infeed, outfeed, send or
    # recv.
    "InfeedOutfeed.hlo": (pjrt_client.UnimplementedError, "op 'infeed'"),
    "SendRecv.hlo": (pjrt_client.UnimplementedError, "op 'recv'"),
    "SendRecvWithHostTransfer.hlo": (pjrt_client.UnimplementedError,
                                     "op 'recv'"),
    "SendRecvWoChannelID.hlo": (pjrt_client.UnimplementedError, "op 'recv'"),
    # Asynchronous custom calls, and custom-call targets that name code
    # outside the program.
    "AsyncOpsWithSyntaxSugar.hlo": (pjrt_client.UnimplementedError,
                                    "op 'custom-call-start'"),
    "AsyncOpsWithSyntaxSugarAndThreadName.hlo": (
        pjrt_client.UnimplementedError, "op 'custom-call-start'"),
    "HloComputationWithParallelThreadName.hlo": (
        pjrt_client.UnimplementedError, "op 'custom-call-start'"),
    "ConvolutionDynamic.hlo": (pjrt_client.UnimplementedError,
                               "DynamicConvolutionForward"),
}
for name in ["CustomCall.hlo", "CustomCallWithAliasing.hlo",
             "CustomCallWithBackendConfigInCurlyBraces.hlo",
             "CustomCallWithHasSideEffect.hlo",
             "CustomCallWithLayoutConstraints.hlo",
             "CustomCallWithLayoutConstraintsNoOperands.hlo",
             "CustomCallWithLayoutConstraintsTupleShapes.hlo",
             "CustomCallWithLiteral.hlo", "CustomCallWithLiteralR0.hlo",
             "CustomCallWithLiteralTuple.hlo", "CustomCallWithOpaque.hlo",
             "CustomCallWithSchedule.hlo",
             "CustomCallWithStatusReturningVersion.hlo",
             "CustomCallWithUnknownDimLabels.hlo",
             "CustomCallWithWindowAndDimLabelsAndFeatureGroupCount.hlo",
             "CustumCallMultipleComps.hlo", "CustumCallSingleComp.hlo"]:
    REFUSED[name] = (pjrt_client.UnimplementedError, UNKNOWN_TARGET)


@pytest.fixture(scope="module")
def client() -> Iterator[pjrt_client.Client]:
    with tempfile.TemporaryDirectory(prefix="pjrt.") as tmp:
        workdir = pathlib.Path(tmp)
        d = Daemon(workdir, "--platform", "host", "--host-devices",
                   str(DEVICES), "--memory-limit", str(1 << 30),
                   "--listen", f"unix://{workdir}/pjrtd.sock")
        try:
            with pjrt_client.connect(d.addresses[0],
                                     client_name="pytest-parser-corpus") as c:
                yield c
        finally:
            assert d.stop() == 0, d.log_path.read_text()


def text(name: str) -> str:
    return (PARSER / name).read_text()


def test_the_parser_corpus_is_all_there():
    assert len(ALL) == 165
    assert set(REFUSED) <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_every_module_compiles_or_is_refused_by_name(client, name):
    if name in REFUSED:
        error, words = REFUSED[name]
        with pytest.raises(error) as e:
            client.compile(text(name))
        assert words in str(e.value)
        return
    client.compile(text(name)).delete()


def test_dynamic_slice_with_its_indices_in_one_vector(client):
    # XLA's legacy form: one s32[3] of start indices, clamped as ever.
    x = np.arange(2 * 2 * 258, dtype=np.int32).reshape(2, 2, 258)
    (out,) = run(client, text("DynamicSlice.hlo"),
                 [("s32", x), ("s32", np.array([7], np.int32))])
    np.testing.assert_array_equal(out, x)  # the slice is the whole array


def test_dynamic_update_slice_with_its_indices_in_one_vector(client):
    x = np.arange(25, dtype=np.int32).reshape(1, 1, 25, 1)
    u = np.array([-1, -2], np.int32).reshape(1, 1, 2, 1)
    for start, at in [(3, 3), (24, 23), (-5, 0)]:  # clamped into range
        (out,) = run(client, text("DynamicUpdateSlice.hlo"),
                     [("s32", x), ("s32", u),
                      ("s32", np.array([0, 0, start, 0], np.int32))])
        want = x.copy()
        want[0, 0, at:at + 2, 0] = [-1, -2]
        np.testing.assert_array_equal(out, want, err_msg=f"start {start}")


def test_a_domain_passes_its_operand_through(client):
    (out,) = run(client, text("DomainParsing.hlo"),
                 [("f32", np.float32(2.5))])
    assert out == np.float32(2.5)


def test_a_tuple_constant_is_its_elements(client):
    a, b = run(client, text("TupleConstant.hlo"), [])
    np.testing.assert_array_equal(a, np.array([[1], [2]], np.float32))
    np.testing.assert_array_equal(b, np.array([2, 42], np.float32))


def test_a_tuple_constant_feeds_other_ops(client):
    (out,) = run(client, """HloModule tuple_constant_use
ENTRY e {
  c = (s32[2], (f32[], s32[2])) constant(({1, 2}, (0.5, {30, 40})))
  inner = (f32[], s32[2]) get-tuple-element(c), index=1
  x = s32[2] get-tuple-element(c), index=0
  y = s32[2] get-tuple-element(inner), index=1
  ROOT s = s32[2] add(x, y)
}
""", [])
    np.testing.assert_array_equal(out, [31, 42])


def test_get_dimension_size_is_the_static_size(client):
    # Not among the parser's tests; JAX emits it for shape-polymorphic
    # code, which pjrtd runs with static shapes.
    sizes = run(client, """HloModule sizes
ENTRY e {
  x = f32[3,7,2] parameter(0)
  a = s32[] get-dimension-size(x), dimensions={0}
  b = s32[] get-dimension-size(x), dimensions={1}
  ROOT t = (s32[], s32[]) tuple(a, b)
}
""", [("f32", np.zeros((3, 7, 2), np.float32))])
    assert [int(s) for s in sizes] == [3, 7]


def test_a_combined_asynchronous_collective_permute_moves_each_operand(
        client):
    # Replica r + 1 receives both of replica r's operands; replica 0, which
    # no pair names as a target, receives zeros.
    exe = client.compile(text("CombinedCollectivePermuteStartAndDone.hlo"))
    assert exe.num_replicas == 4
    devices = [d.id for d in exe.addressable_devices]
    inputs = [[np.full((128, 32), 10 * r + k, np.float32) for k in range(2)]
              for r in range(4)]
    per_device = [[client.put(x, device=d) for x in inputs[r]]
                  for r, d in enumerate(devices)]
    results = exe.execute_replicated(per_device)
    for r in range(4):
        for k in range(2):
            want = (inputs[r - 1][k] if r > 0
                    else np.zeros((128, 32), np.float32))
            np.testing.assert_array_equal(results[r][k].to_numpy(), want,
                                          err_msg=f"replica {r} result {k}")
