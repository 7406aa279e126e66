"""A training step of a small transformer-style model, as HLO text written
the way JAX prints it (gather for the embedding lookup, dot_general,
softmax and layer norm from reduce/broadcast, the embedding gradient as a
scatter-add), and the same step in numpy.

    x = E[ids]                                   embedding lookup
    for each layer (W, U):
        h = layer_norm(x)                        no affine parameters
        p = softmax(h @ W)                       over features
        x = x + p @ U                            residual
    loss = 0.5 * sum((x - target)^2) / tokens
    every parameter -= lr * its gradient

Usage: python3 transformer_step.py OUT.hlo [tokens vocab width layers]
writes the program; the tests and bench/ import this module.
"""

from __future__ import annotations

import sys

import numpy as np

EPS = 1e-5


class Hlo:
    """Emits one HLO computation's instructions, naming them v0, v1, ..."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def op(self, shape: str, text: str) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"  {name} = {shape} {text}")
        return name

    def const(self, value: float) -> str:
        return self.op("f32[]", f"constant({value!r})")

    def bcast(self, x: str, shape: str, dims: str = "") -> str:
        return self.op(shape, f"broadcast({x}), dimensions={{{dims}}}")

    def bin(self, kind: str, shape: str, a: str, b: str) -> str:
        return self.op(shape, f"{kind}({a}, {b})")

    def dot(self, shape: str, a: str, b: str, lc: int, rc: int) -> str:
        return self.op(shape, f"dot({a}, {b}), lhs_contracting_dims={{{lc}}}, "
                              f"rhs_contracting_dims={{{rc}}}")

    def row_reduce(self, x: str, n: int, kind: str) -> str:
        init = self.const(0.0 if kind == "add" else float("-inf"))
        return self.op(f"f32[{n}]", f"reduce({x}, {init}), dimensions={{1}}, "
                                    f"to_apply=region_{kind}")

    def row_mean(self, x: str, n: int, d: int) -> str:
        s = self.row_reduce(x, n, "add")
        return self.bin("multiply", f"f32[{n}]", s,
                        self.bcast(self.const(1.0 / d), f"f32[{n}]"))


def program(tokens: int, vocab: int, width: int, layers: int,
            lr: float = 0.1) -> str:
    n, d, v = tokens, width, vocab
    nd, dd, vd = f"f32[{n},{d}]", f"f32[{d},{d}]", f"f32[{v},{d}]"
    b = Hlo()
    params = ["E"] + [f"{k}{i}" for i in range(layers) for k in ("W", "U")]
    shapes = {"E": vd}
    shapes.update({p: dd for p in params[1:]})
    names = {}
    for i, p in enumerate(params):
        names[p] = b.op(shapes[p], f"parameter({i})")
    ids = b.op(f"s32[{n}]", f"parameter({len(params)})")
    target = b.op(nd, f"parameter({len(params) + 1})")
    ids2 = b.op(f"s32[{n},1]", f"reshape({ids})")
    x = b.op(nd, f"gather({names['E']}, {ids2}), offset_dims={{1}}, "
                 f"collapsed_slice_dims={{0}}, start_index_map={{0}}, "
                 f"index_vector_dim=1, slice_sizes={{1,{d}}}")
    saved = []
    for i in range(layers):
        mu = b.row_mean(x, n, d)
        xc = b.bin("subtract", nd, x, b.bcast(mu, nd, "0"))
        var = b.row_mean(b.bin("multiply", nd, xc, xc), n, d)
        rstd = b.op(f"f32[{n}]", "rsqrt(" + b.bin(
            "add", f"f32[{n}]", var, b.bcast(b.const(EPS), f"f32[{n}]")) + ")")
        h = b.bin("multiply", nd, xc, b.bcast(rstd, nd, "0"))
        z = b.dot(nd, h, names[f"W{i}"], 1, 0)
        zmax = b.row_reduce(z, n, "max")
        e = b.op(nd, "exponential(" + b.bin(
            "subtract", nd, z, b.bcast(zmax, nd, "0")) + ")")
        p = b.bin("divide", nd, e, b.bcast(b.row_reduce(e, n, "add"), nd, "0"))
        saved.append((h, rstd, p))
        x = b.bin("add", nd, x, b.dot(nd, p, names[f"U{i}"], 1, 0))
    diff = b.bin("subtract", nd, x, target)
    sq = b.bin("multiply", nd, diff, diff)
    total = b.op("f32[]", f"reduce({sq}, {b.const(0.0)}), dimensions={{0,1}}, "
                          "to_apply=region_add")
    loss = b.bin("multiply", "f32[]", total, b.const(0.5 / n))
    g = b.bin("multiply", nd, diff, b.bcast(b.const(1.0 / n), nd))
    grads = {}
    for i in reversed(range(layers)):
        h, rstd, p = saved[i]
        grads[f"U{i}"] = b.dot(dd, p, g, 0, 0)
        dp = b.dot(nd, g, names[f"U{i}"], 1, 1)
        s = b.row_reduce(b.bin("multiply", nd, dp, p), n, "add")
        centred = b.bin("subtract", nd, dp, b.bcast(s, nd, "0"))
        dz = b.bin("multiply", nd, p, centred)
        grads[f"W{i}"] = b.dot(dd, h, dz, 0, 0)
        dh = b.dot(nd, dz, names[f"W{i}"], 1, 1)
        m1 = b.bcast(b.row_mean(dh, n, d), nd, "0")
        m2 = b.bcast(b.row_mean(b.bin("multiply", nd, dh, h), n, d), nd, "0")
        inner = b.bin("subtract", nd, b.bin("subtract", nd, dh, m1),
                      b.bin("multiply", nd, h, m2))
        g = b.bin("add", nd, g, b.bin("multiply", nd, inner,
                                      b.bcast(rstd, nd, "0")))
    zeros = b.bcast(b.const(0.0), vd)
    grads["E"] = b.op(vd, f"scatter({zeros}, {ids2}, {g}), "
                          "update_window_dims={1}, inserted_window_dims={0}, "
                          "scatter_dims_to_operand_dims={0}, "
                          "index_vector_dim=1, to_apply=region_add")
    lr_c = b.const(lr)
    outs = []
    for p in params:
        step = b.bin("multiply", shapes[p], grads[p], b.bcast(lr_c, shapes[p]))
        outs.append(b.bin("subtract", shapes[p], names[p], step))
    out_shapes = ", ".join([shapes[p] for p in params] + ["f32[]"])
    body = "\n".join(b.lines)
    return f"""HloModule jit_train_step

region_add {{
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  ROOT s = f32[] add(a, c)
}}

region_max {{
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  ROOT m = f32[] maximum(a, c)
}}

ENTRY main {{
{body}
  ROOT out = ({out_shapes}) tuple({", ".join(outs + [loss])})
}}
"""


def inputs(tokens: int, vocab: int, width: int, layers: int,
           seed: int = 0) -> list[np.ndarray]:
    """Parameters, ids and targets, in the program's parameter order."""
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal((vocab, width)).astype(np.float32)]
    for _ in range(layers):
        for _ in range(2):
            out.append((rng.standard_normal((width, width)) /
                        np.sqrt(width)).astype(np.float32))
    out.append(rng.integers(0, vocab, tokens).astype(np.int32))
    out.append(rng.standard_normal((tokens, width)).astype(np.float32))
    return out


def numpy_step(args: list[np.ndarray], layers: int,
               lr: float = 0.1) -> list[np.ndarray]:
    """The same step in numpy (float32): new parameters, then the loss."""
    E, rest = args[0], args[1:]
    weights = [(rest[2 * i], rest[2 * i + 1]) for i in range(layers)]
    ids, target = rest[2 * layers], rest[2 * layers + 1]
    n, d = target.shape
    x = E[ids]
    saved = []
    for W, U in weights:
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + EPS)
        h = xc * rstd
        z = h @ W
        e = np.exp(z - z.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        saved.append((h, rstd, p))
        x = x + p @ U
    diff = x - target
    loss = np.float32(0.5 / n) * (diff * diff).sum()
    g = diff / np.float32(n)
    grads = []
    for (W, U), (h, rstd, p) in reversed(list(zip(weights, saved))):
        dU = p.T @ g
        dp = g @ U.T
        dz = p * (dp - (dp * p).sum(-1, keepdims=True))
        dW = h.T @ dz
        dh = dz @ W.T
        g = g + (dh - dh.mean(-1, keepdims=True) -
                 h * (dh * h).mean(-1, keepdims=True)) * rstd
        grads.insert(0, (dW, dU))
    dE = np.zeros_like(E)
    np.add.at(dE, ids, g)
    out = [E - np.float32(lr) * dE]
    for (W, U), (dW, dU) in zip(weights, grads):
        out += [W - np.float32(lr) * dW, U - np.float32(lr) * dU]
    return [o.astype(np.float32) for o in out] + [np.float32(loss)]


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[2:]] or [512, 1000, 64, 2]
    with open(sys.argv[1], "w") as f:
        f.write(program(*sizes))
