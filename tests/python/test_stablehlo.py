"""StableHLO programs through a real pjrtd: StableHLO's own interpreter
tests (with the checked-in list of those pjrtd does not pass, and why),
and the errors a StableHLO program gets."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import pjrt_client
from hlo_harness import from_wire
from stablehlo_interpret import (INTERPRET, cases, compare, read_skips,
                                 write_skips)

WRITE_SKIPS = os.environ.get("PJRT_WRITE_STABLEHLO_SKIPS") == "1"


def _reason(error: Exception) -> str:
    """An error's first line without its line and column (which move when
    a test file is edited)."""
    first = str(error).splitlines()[0]
    return re.sub(r"line \d+, column \d+: ", "", first)


def _run(client, case) -> str:
    """"" if the case passes, else why not."""
    if case.reason:
        return case.reason
    try:
        executable = client.compile(case.program)
    except pjrt_client.Error as e:
        return _reason(e)
    try:
        outputs = executable.execute([])
        try:
            values = [from_wire(b) for b in outputs]
        finally:
            for b in outputs:
                b.delete()
    except pjrt_client.Error as e:
        return "run failed: " + _reason(e)
    finally:
        executable.delete()
    for i, kind in enumerate(case.checks):
        why = compare(kind, values[2 * i], values[2 * i + 1])
        if why:
            return f"wrong result: check {i}: {why}"
    return ""


@pytest.mark.skipif(not INTERPRET.exists(),
                    reason="../shared/reference/stablehlo is not present")
@pytest.mark.parametrize("address", ["unix"], indirect=True)
def test_interpreter_tests_pass_or_are_listed_with_their_reason(client):
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
