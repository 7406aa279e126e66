"""StableHLO's interpreter tests as pjrtd programs.

Each file under tests/data/stablehlo/interpret (StableHLO's interpreter tests,
as openxla/stablehlo's stablehlo/tests/interpret has them) holds functions
separated by `// -----`; a test function builds its inputs with constants and
states what it expects with `check.*` ops. Each test function becomes one
program here: every `check.expect_eq_const %x, dense<...> : T` (or
`_almost_eq_const`) becomes a constant of the expected value, and the function
returns each checked value beside its expected one, so that the comparison
happens in the test (exact for `eq`, within 1e-4 for `almost_eq`, within
the stated units in the last place for `expect_close`, as StableHLO's
checker does).

Functions that need what a single program cannot give (the interpreter's
`interpreter.run_parallel` and probes) are cases too:
they report why they cannot run. The list of cases that do not pass, and
why, lives in tests/data/stablehlo/interpret_skips.txt; the test
regenerates it with PJRT_WRITE_STABLEHLO_SKIPS=1.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
# StableHLO's interpreter tests: the repository's copy of openxla/stablehlo's
# stablehlo/tests/interpret.
INTERPRET = REPO / "tests" / "data" / "stablehlo" / "interpret"
SKIPS = REPO / "tests" / "data" / "stablehlo" / "interpret_skips.txt"

# The element types narrower than 16 bits (pjrtd returns their codes).
_NARROW_FLOAT = re.compile(r"(?<=[<x])f[468]E\w+(?=>)")

# StableHLO's checker compares "almost equal" values within this.
TOLERANCE = 1e-4


@dataclasses.dataclass
class Case:
    """One test function of one chunk of one file."""

    name: str          # "add.mlir:3:add_op_test_si4" (file, chunk, function)
    program: str       # the rewritten chunk, the test function as @main
    checks: list[str]  # "eq" or "almost", one per (value, expected) pair
    reason: str = ""   # why it cannot be a program, if it cannot
    # interpreter.run_parallel: `program` returns the parallel program's
    # inputs, then one expected value per check; `parallel` is the program
    # every device runs (replicas x partitions); check i compares result
    # checked[i] (the flattened results of every device, replica-major).
    parallel: str = ""
    replicas: int = 0
    partitions: int = 0
    inputs: int = 0
    checked: list[int] = dataclasses.field(default_factory=list)


_COMMENT = re.compile(r"//[^\n]*")
_FUNC = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@([\w.$-]+)\s*\(")


def _statement_end(text: str, start: int) -> int:
    """End (exclusive) of the check statement starting at ``start``: past
    the `: type` that follows its operands at bracket depth 0."""
    depth = 0
    i = start
    seen_colon = False
    while i < len(text):
        c = text[i]
        if c in "[<({":
            depth += 1
        elif c in "]>)}":
            depth -= 1
        elif c == ":" and depth == 0:
            seen_colon = True
        elif c == "\n" and depth == 0 and seen_colon:
            return i
        i += 1
    return i


def _functions(chunk: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every func.func in the chunk (end is past its
    closing brace)."""
    out = []
    for m in _FUNC.finditer(chunk):
        # The body's braces: from the first '{' after the signature's ')'.
        depth = 0
        i = m.end() - 1
        # Skip the signature's parentheses.
        paren = 0
        while i < len(chunk):
            if chunk[i] == "(":
                paren += 1
            elif chunk[i] == ")":
                paren -= 1
                if paren == 0:
                    break
            i += 1
        body = chunk.index("{", i)
        j = body
        while j < len(chunk):
            if chunk[j] == "{":
                depth += 1
            elif chunk[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out.append((m.group(1), m.start(), j + 1))
    return out


def _rewrite(function: str, name: str) -> tuple[str, list[str], str]:
    """The test function with its checks turned into returned values."""
    returned: list[str] = []
    types: list[str] = []
    checks: list[str] = []
    out = []
    pos = 0
    counter = 0
    for m in re.finditer(r"check\.(\w+)", function):
        if m.start() < pos:
            continue
        end = _statement_end(function, m.start())
        statement = _COMMENT.sub("", function[m.start():end]).strip()
        kind = m.group(1)
        out.append(function[pos:m.start()])
        pos = end
        if kind in ("expect_eq_const", "expect_almost_eq_const"):
            sm = re.match(r"check\.\w+\s+(%[\w#.$-]+)\s*,\s*(.*)$", statement,
                          re.S)
            if not sm:
                return "", [], f"cannot read {statement[:60]!r}"
            value, rest = sm.group(1), sm.group(2).strip()
            # A tolerance: "..., tolerance = X : T" or "... : T {tolerance
            # = X : f64}".
            tolerance = re.search(r"\{\s*tolerance\s*=\s*([\d.e+-]+)\s*"
                                  r"(:\s*\w+)?\s*\}$", rest)
            if tolerance:
                rest = rest[:tolerance.start()].strip()
            else:
                tolerance = re.search(r",\s*tolerance\s*=\s*([\d.e+-]+)\s*$",
                                      rest[:rest.rindex(":")])
                if tolerance:
                    rest = (rest[:tolerance.start()] +
                            rest[tolerance.end():])
            # rest is "dense<...> : T"
            colon = rest.rindex(":")
            ty = rest[colon + 1:].strip()
            expected = f"%__expected{counter}"
            counter += 1
            out.append(f"{expected} = stablehlo.constant {rest.strip()}")
            narrow = _NARROW_FLOAT.search(ty)
            if kind == "expect_almost_eq_const" and narrow:
                # Narrow floats come back as codes: their values are
                # compared, as f32 (which holds each exactly).
                wide = ty[:narrow.start()] + "f32" + ty[narrow.end():]
                pair = []
                for operand in (value, expected):
                    pair.append(f"%__value{counter}_{len(pair)}")
                    out.append(f"\n  {pair[-1]} = stablehlo.convert "
                               f"{operand} : ({ty}) -> {wide}")
                value, expected, ty = pair[0], pair[1], wide
            returned += [value, expected]
            types += [ty, ty]
            checks.append("eq" if kind == "expect_eq_const" else
                          f"almost:{tolerance.group(1)}" if tolerance
                          else "almost")
        elif kind == "expect_close":
            # check.expect_close %a, %b, max_ulp_difference = N
            # [, min_ulp_difference = M] : T, T
            sm = re.match(r"check\.\w+\s+(%[\w#.$-]+)\s*,\s*(%[\w#.$-]+)\s*"
                          r"((?:,\s*\w+\s*=\s*\d+\s*)*):\s*(.*)$",
                          statement, re.S)
            if not sm:
                return "", [], f"cannot read {statement[:60]!r}"
            limits = dict(re.findall(r"(\w+)\s*=\s*(\d+)", sm.group(3)))
            written = sm.group(4)
            tys = ([t.strip() for t in written.split(",")]
                   if written.count("tensor") > 1 else [written.strip()] * 2)
            returned += [sm.group(1), sm.group(2)]
            types += tys[:2]
            checks.append(f"ulp:{limits.get('max_ulp_difference', 0)}:"
                          f"{limits.get('min_ulp_difference', 0)}")
        elif kind in ("expect_eq", "expect_almost_eq"):
            sm = re.match(r"check\.\w+\s+(%[\w#.$-]+)\s*,\s*(%[\w#.$-]+)\s*"
                          r"(?:,\s*tolerance\s*=\s*([\d.e+-]+)\s*)?:"
                          r"\s*(.*)$", statement, re.S)
            if not sm:
                return "", [], f"cannot read {statement[:60]!r}"
            written = sm.group(4)
            tys = ([t.strip() for t in written.split(",")]
                   if written.count("tensor") > 1 else [written.strip()] * 2)
            returned += [sm.group(1), sm.group(2)]
            types += tys[:2]
            checks.append("eq" if kind == "expect_eq" else
                          f"almost:{sm.group(3)}" if sm.group(3) else "almost")
        else:
            return "", [], f"uses check.{kind}, which only the interpreter has"
    out.append(function[pos:])
    body = "".join(out)
    if "interpreter." in body:
        word = re.search(r"interpreter\.\w+", body).group(0)
        return "", [], f"uses {word}, which only the interpreter has"
    if not returned:
        return "", [], "checks nothing"
    ret = (f"func.return {', '.join(returned)} : {', '.join(types)}")
    body, n = re.subn(r"func\.return\s*\n", ret + "\n", body, count=1)
    if n == 0:
        body, n = re.subn(r"\breturn\s*\n", ret + "\n", body, count=1)
    if n == 0:
        return "", [], "has no plain return to rewrite"
    # The signature: no results before, the checked values now.
    body = re.sub(rf"@{re.escape(name)}\s*\(\s*\)\s*(->\s*\(\s*\))?",
                  f"@main() -> ({', '.join(types)})", body, count=1)
    return body, checks, ""


_RUN_PARALLEL = re.compile(
    r"(%[\w.$-]+):(\d+)\s*=\s*\"interpreter\.run_parallel\"\(([^)]*)\)\s*"
    r"\{\s*programs\s*=\s*(\[.*?\]\])\s*\}\s*:\s*\(([^)]*)\)\s*->\s*"
    r"\(([^)]*)\)", re.S)


def _parallel(chunk: str, functions, start: int, end: int,
              case_name: str) -> Case:
    """A test function that runs programs on several devices."""
    function = chunk[start:end]
    m = _RUN_PARALLEL.search(function)
    if not m:
        return Case(case_name, "", [],
                    "uses interpreter.run_parallel in a form this harness "
                    "does not read")
    results, count, operands = m.group(1), int(m.group(2)), m.group(3)
    grid = [re.findall(r"@([\w.$-]+)", row)
            for row in re.findall(r"\[([^\[\]]*)\]", m.group(4))]
    names = {n for row in grid for n in row}
    if len(names) != 1 or len({len(row) for row in grid}) != 1:
        return Case(case_name, "", [], "runs different programs on different "
                                       "devices (interpreter.run_parallel)")
    (program_name,) = names
    replicas, partitions = len(grid), len(grid[0])
    input_types = [t.strip() for t in m.group(5).split(",") if t.strip()]
    inputs = [o.strip() for o in operands.split(",") if o.strip()]
    # The setup program: everything but the parallel run, returning its
    # inputs, then the expected values.
    setup = function[:m.start()] + function[m.end():]
    returned, types, checks, checked = list(inputs), list(input_types), [], []
    out, pos, counter = [], 0, 0
    for c in re.finditer(r"check\.(\w+)", setup):
        if c.start() < pos:
            continue
        stop = _statement_end(setup, c.start())
        statement = _COMMENT.sub("", setup[c.start():stop]).strip()
        out.append(setup[pos:c.start()])
        pos = stop
        sm = re.match(r"check\.(expect_eq_const|expect_almost_eq_const)\s+"
                      + re.escape(results) + r"#(\d+)\s*,\s*(.*)$",
                      statement, re.S)
        if not sm:
            return Case(case_name, "", [], "checks a parallel run in a form "
                                           "this harness does not read")
        rest = sm.group(3).strip()
        ty = rest[rest.rindex(":") + 1:].strip()
        out.append(f"%__expected{counter} = stablehlo.constant {rest}")
        returned.append(f"%__expected{counter}")
        types.append(ty)
        counter += 1
        checks.append("eq" if sm.group(1) == "expect_eq_const" else "almost")
        checked.append(int(sm.group(2)))
    out.append(setup[pos:])
    body = "".join(out)
    ret = f"func.return {', '.join(returned)} : {', '.join(types)}"
    body, n = re.subn(r"func\.return\b[^\n]*\n", ret + "\n", body, count=1)
    if n == 0 or not returned:
        return Case(case_name, "", [], "has no return to rewrite")
    name = _FUNC.match(chunk, start).group(1)
    body = re.sub(rf"@{re.escape(name)}\s*\(\s*\)\s*(->\s*\([^)]*\))?",
                  f"@main() -> ({', '.join(types)})", body, count=1)
    # The parallel program: the chunk's other functions, the program run on
    # every device as @main.
    parts = []
    for other, s, e in functions:
        if s == start:
            continue
        text = chunk[s:e]
        if other == program_name:
            text = re.sub(rf"@{re.escape(other)}\b", "@main", text, count=1)
        parts.append(text)
    parallel = (f"module @parallel attributes {{mhlo.num_replicas = "
                f"{replicas} : i32, mhlo.num_partitions = {partitions} : "
                f"i32}} {{\n" + "\n".join(parts) + "\n}\n")
    if count != replicas * partitions * max(1, len(checked) and 1) and \
            count % (replicas * partitions) != 0:
        return Case(case_name, "", [], "has results this harness cannot "
                                       "place on devices")
    return Case(case_name, body, checks, parallel=parallel,
                replicas=replicas, partitions=partitions,
                inputs=len(inputs), checked=checked)


def cases() -> list[Case]:
    """Every test function of every interpreter test file, in order."""
    out: list[Case] = []
    for path in sorted(INTERPRET.glob("*.mlir")):
        text = path.read_text()
        for index, chunk in enumerate(re.split(r"^// -----\s*$", text,
                                               flags=re.M)):
            functions = _functions(chunk)
            tests = [f for f in functions if "check." in chunk[f[1]:f[2]]]
            for name, start, end in tests:
                case_name = f"{path.name}:{index}:{name}"
                if "interpreter.run_parallel" in chunk[start:end]:
                    out.append(_parallel(chunk, functions, start, end,
                                         case_name))
                    continue
                body, checks, reason = _rewrite(chunk[start:end], name)
                if reason:
                    out.append(Case(case_name, "", [], reason))
                    continue
                # The other functions stay as helpers; another @main is
                # renamed, and the other tests' checks are dropped with
                # them (they are their own cases).
                parts = []
                last = 0
                for other, s, e in functions:
                    parts.append(chunk[last:s])
                    last = e
                    if s == start:
                        parts.append(body)
                    elif other in [t[0] for t in tests]:
                        continue
                    else:
                        parts.append(chunk[s:e].replace("@main(", "@main_(")
                                     if other == "main" else chunk[s:e])
                parts.append(chunk[last:])
                program = "".join(parts)
                out.append(Case(case_name, program, checks))
    return out


def compare(kind: str, got: np.ndarray, want: np.ndarray) -> str:
    """"" when ``got`` passes the check against ``want``, else why not."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} where {want.shape} was expected"
    if kind.startswith("ulp:"):
        return _compare_ulps(kind, got, want)
    tolerance = TOLERANCE
    if kind.startswith("almost:"):
        kind, tolerance = "almost", float(kind.split(":")[1])
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        a = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        b = want.astype(a.dtype)
        if kind == "eq":
            same = np.array_equal(a, b, equal_nan=True)
        else:
            same = bool(np.all(np.isclose(a, b, rtol=0, atol=tolerance,
                                          equal_nan=True) |
                               np.isclose(a, b, rtol=tolerance, atol=0,
                                          equal_nan=True)))
    else:
        same = np.array_equal(got, want)
    if same:
        return ""
    return (f"got {np.array2string(got.reshape(-1)[:16], threshold=16)} "
            f"where {np.array2string(want.reshape(-1)[:16], threshold=16)} "
            f"was expected")


def _compare_ulps(kind: str, got: np.ndarray, want: np.ndarray) -> str:
    """check.expect_close: the floats' distance in units in the last place
    (how many representable values lie between them) within [min, max]."""
    _, most, least = kind.split(":")
    if got.dtype != want.dtype or got.dtype.kind != "f":
        return f"expect_close compares floats of one type, not {got.dtype}"
    ints = np.dtype(f"int{8 * got.dtype.itemsize}")

    def ordered(x):
        # Sign-magnitude bits to one increasing integer line.
        bits = x.view(ints).astype(np.int64)
        top = np.int64(1) << (8 * x.dtype.itemsize - 1)
        return np.where(bits < 0, -(bits & (top - 1)), bits)

    distance = np.abs(ordered(got) - ordered(want))
    bad = (distance > int(most)) | (distance < int(least))
    both_nan = np.isnan(got) & np.isnan(want)
    if not np.any(bad & ~both_nan):
        return ""
    return (f"got {got.reshape(-1)[:16]} where {want.reshape(-1)[:16]} was "
            f"expected within {least} to {most} ulps (off by "
            f"{distance.reshape(-1)[:16]})")


def read_skips() -> dict[str, str]:
    """The checked-in list: case name -> reason."""
    skips = {}
    if SKIPS.exists():
        for line in SKIPS.read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            skips[name] = reason.strip()
    return skips


def write_skips(skips: dict[str, str]) -> None:
    SKIPS.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# StableHLO interpreter tests (tests/data/stablehlo/interpret) "
             "that",
             "# pjrtd does not pass, and why. Generated by",
             "#   PJRT_WRITE_STABLEHLO_SKIPS=1 pytest "
             "tests/python/test_stablehlo.py -k interpret",
             "# and checked by the same test: a case listed here must fail "
             "this way, and",
             "# every case not listed must pass.",
             "# <file>:<chunk>:<function> <reason>"]
    for name in sorted(skips, key=_order):
        lines.append(f"{name} {skips[name]}")
    SKIPS.write_text("\n".join(lines) + "\n")


def _order(name: str) -> tuple[str, int, str]:
    file, chunk, function = name.split(":")
    return file, int(chunk), function
