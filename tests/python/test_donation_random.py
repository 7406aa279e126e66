"""Donation under random programs: results that are parameters, updates of
parameters in place, loops over parameters and the same value returned
twice, with random parameters donated to random results. Every result must
equal what numpy computes, and every parameter not donated must keep its
value: whatever the compiler writes where a donated parameter lies, no
other result and no other parameter may see it."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

N = 8  # elements of every array
PARAMS = 3
# Programs per run; PJRT_DONATION_SEEDS=5000 for a longer search.
SEEDS = int(os.environ.get("PJRT_DONATION_SEEDS", 200))


class Program:
    """A random program over PARAMS f32[N] parameters."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines = [f"  p{i} = f32[{N}] parameter({i})"
                      for i in range(PARAMS)]
        self.loops: list[str] = []
        # Each value: (its name, how numpy computes it from the inputs).
        self.values = [(f"p{i}", lambda xs, i=i: xs[i])
                       for i in range(PARAMS)]
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def add(self, line: str, name: str, value) -> None:
        self.lines.append(f"  {name} = {line}")
        self.values.append((name, value))

    def grow(self) -> None:
        """Adds one value computed from earlier ones."""
        rng = self.rng
        (a, fa), (b, fb) = rng.choice(self.values), rng.choice(self.values)
        kind = rng.randrange(9)
        if kind == 0:
            c = rng.randrange(1, 9)
            n = self.name("add")
            self.add(f"f32[{N}] add({a}, f32[{N}] broadcast("
                     f"f32[] constant({c})), dimensions={{}})", n,
                     lambda xs: fa(xs) + c)
        elif kind == 1:
            at, c = rng.randrange(N), rng.randrange(10, 99)

            def update(xs, at=at, c=c):
                y = fa(xs).copy()
                y[at] = c
                return y
            n = self.name("dus")
            self.add(f"f32[{N}] dynamic-update-slice({a}, "
                     f"f32[1] constant({{{c}}}), s32[] constant({at}))", n,
                     update)
        elif kind == 2:
            n = self.name("copy")
            self.add(f"f32[{N}] copy({a})", n, fa)
        elif kind == 3:
            n = self.name("rev")
            self.add(f"f32[{N}] reverse({a}), dimensions={{0}}", n,
                     lambda xs: fa(xs)[::-1])
        elif kind == 4:
            n = self.name("sub")
            self.add(f"f32[{N}] subtract({a}, {b})", n,
                     lambda xs: fa(xs) - fb(xs))
        elif kind == 5:
            # The same value as both loop states, now and then.
            if rng.random() < 0.3:
                b, fb = a, fa
            self.loop_add(a, fa, b, fb)
        elif kind == 6:
            n = self.name("view")
            self.add(f"f32[{N}] reshape(f32[2,{N // 2}] reshape({a}))", n, fa)
        elif kind == 7:
            h = N // 2
            n = self.name("cat")
            self.add(f"f32[{N}] concatenate(f32[{h}] slice({a}), "
                     f"slice={{[{h}:{N}]}}, f32[{h}] slice({b}), "
                     f"slice={{[0:{h}]}}), dimensions={{0}}", n,
                     lambda xs: np.concatenate([fa(xs)[h:], fb(xs)[:h]]))
        else:
            self.loop_update(a, fa)

    def loop_add(self, a, fa, b, fb) -> None:
        """while (i < 3) { x += y }: x is updated, y passes through."""
        body, cond, n = self.name("body"), self.name("cond"), self.name("w")
        self.loops.append(f"""
{body} {{
  s = (s32[], f32[{N}], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[{N}] get-tuple-element(s), index=1
  y = f32[{N}] get-tuple-element(s), index=2
  j = s32[] add(i, s32[] constant(1))
  z = f32[{N}] add(x, y)
  ROOT t = (s32[], f32[{N}], f32[{N}]) tuple(j, z, y)
}}

{cond} {{
  s = (s32[], f32[{N}], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT c = pred[] compare(i, s32[] constant(3)), direction=LT
}}""")
        self.lines.append(
            f"  {n} = (s32[], f32[{N}], f32[{N}]) while("
            f"(s32[], f32[{N}], f32[{N}]) tuple(s32[] constant(0), {a}, {b})),"
            f" condition={cond}, body={body}")
        self.add(f"f32[{N}] get-tuple-element({n}), index=1", n + "x",
                 lambda xs: fa(xs) + 3 * fb(xs))
        self.add(f"f32[{N}] get-tuple-element({n}), index=2", n + "y", fb)

    def loop_update(self, a, fa) -> None:
        """while (i < 4) { x[i] = i; i += 1 }: state updated in place."""
        body, cond, n = self.name("body"), self.name("cond"), self.name("u")
        self.loops.append(f"""
{body} {{
  s = (s32[], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[{N}] get-tuple-element(s), index=1
  v = f32[1] broadcast(f32[] convert(i)), dimensions={{}}
  y = f32[{N}] dynamic-update-slice(x, v, i)
  j = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], f32[{N}]) tuple(j, y)
}}

{cond} {{
  s = (s32[], f32[{N}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT c = pred[] compare(i, s32[] constant(4)), direction=LT
}}""")

        def updated(xs):
            y = fa(xs).copy()
            y[:4] = np.arange(4)
            return y
        self.lines.append(
            f"  {n} = (s32[], f32[{N}]) while((s32[], f32[{N}]) tuple("
            f"s32[] constant(0), {a})), condition={cond}, body={body}")
        self.add(f"f32[{N}] get-tuple-element({n}), index=1", n + "x",
                 updated)

    def text(self, results: list[int], aliases: dict[int, int]) -> str:
        names = [self.values[r][0] for r in results]
        shapes = ", ".join([f"f32[{N}]"] * len(results))
        alias = ", ".join(f"{{{r}}}: ({p}, {{}}, may-alias)"
                          for r, p in sorted(aliases.items()))
        header = "HloModule donate_random"
        if alias:
            header += f", input_output_alias={{ {alias} }}"
        return "\n".join([
            header, *self.loops, "", "ENTRY e {", *self.lines,
            f"  ROOT r = ({shapes}) tuple({', '.join(names)})", "}"])


def random_case(seed: int):
    rng = random.Random(seed)
    program = Program(rng)
    for _ in range(rng.randrange(1, 6)):
        program.grow()
    # Results favour the latest values and the parameters themselves.
    pool = list(range(len(program.values)))
    results = [rng.choice(pool[-3:] if rng.random() < 0.5 else pool)
               for _ in range(rng.randrange(1, 5))]
    # Each donated parameter to a distinct result.
    donated = rng.sample(range(PARAMS), rng.randrange(0, PARAMS + 1))
    targets = rng.sample(range(len(results)), min(len(donated), len(results)))
    aliases = dict(zip(targets, donated))
    return program, results, aliases


@pytest.mark.parametrize("seed", range(SEEDS))
def test_donated_and_kept_parameters_and_results_match_numpy(cl, seed):
    program, results, aliases = random_case(seed)
    text = program.text(results, aliases)
    e = cl.compile(text)
    assert sorted(e.donated_parameters) == sorted(aliases.values()), text
    inputs = [np.arange(N, dtype=np.float32) * (i + 1) + 100 * i
              for i in range(PARAMS)]
    buffers = [cl.put(x) for x in inputs]
    got = e.execute(buffers)
    for k, r in enumerate(results):
        np.testing.assert_array_equal(
            got[k].to_numpy(), program.values[r][1](inputs),
            err_msg=f"result {k} of\n{text}")
    for i, b in enumerate(buffers):
        if i not in aliases.values():
            np.testing.assert_array_equal(
                b.to_numpy(), inputs[i],
                err_msg=f"kept parameter {i} of\n{text}")
