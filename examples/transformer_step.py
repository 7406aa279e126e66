"""A training step of a small transformer-style model, as HLO text or as
StableHLO, each written the way JAX prints it (gather for the embedding
lookup, dot_general, softmax and layer norm from reduce/broadcast, the
embedding gradient as a scatter-add), and the same step in numpy.

    x = E[ids]                                   embedding lookup
    for each layer (W, U):
        h = layer_norm(x)                        no affine parameters
        p = softmax(h @ W)                       over features
        x = x + p @ U                            residual
    loss = 0.5 * sum((x - target)^2) / tokens
    every parameter -= lr * its gradient

Usage: python3 transformer_step.py OUT.hlo|OUT.mlir [tokens vocab width
layers] writes the program (StableHLO for .mlir, as jax.jit(f).lower(x)
.as_text() prints it; HLO text otherwise); the tests and bench/ import this
module.
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
        self.constants: dict[float, str] = {}

    def op(self, shape: str, text: str) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"  {name} = {shape} {text}")
        return name

    def param(self, index: int, shape: str) -> str:
        return self.op(shape, f"parameter({index})")

    def const(self, value: float) -> str:
        # One constant per value, as JAX emits them.
        if value not in self.constants:
            self.constants[value] = self.op("f32[]", f"constant({value!r})")
        return self.constants[value]

    def bcast(self, x: str, shape: str, dims: str = "") -> str:
        return self.op(shape, f"broadcast({x}), dimensions={{{dims}}}")

    def bin(self, kind: str, shape: str, a: str, b: str) -> str:
        return self.op(shape, f"{kind}({a}, {b})")

    def unary(self, kind: str, shape: str, x: str) -> str:
        return self.op(shape, f"{kind}({x})")

    def reshape(self, shape: str, x: str) -> str:
        return self.op(shape, f"reshape({x})")

    def dot(self, shape: str, a: str, b: str, lc: int, rc: int) -> str:
        return self.op(shape, f"dot({a}, {b}), lhs_contracting_dims={{{lc}}}, "
                              f"rhs_contracting_dims={{{rc}}}")

    def reduce(self, x: str, shape: str, dims: str, kind: str) -> str:
        init = self.const(0.0 if kind == "add" else float("-inf"))
        return self.op(shape, f"reduce({x}, {init}), dimensions={{{dims}}}, "
                              f"to_apply=region_{kind}")

    def row_reduce(self, x: str, n: int, kind: str) -> str:
        return self.reduce(x, f"f32[{n}]", "1", kind)

    def row_mean(self, x: str, n: int, d: int) -> str:
        s = self.row_reduce(x, n, "add")
        return self.bin("multiply", f"f32[{n}]", s,
                        self.bcast(self.const(1.0 / d), f"f32[{n}]"))

    def gather_rows(self, shape: str, table: str, ids: str, d: int) -> str:
        return self.op(shape, f"gather({table}, {ids}), offset_dims={{1}}, "
                              f"collapsed_slice_dims={{0}}, "
                              f"start_index_map={{0}}, index_vector_dim=1, "
                              f"slice_sizes={{1,{d}}}")

    def scatter_add_rows(self, shape: str, base: str, ids: str,
                         rows: str) -> str:
        return self.op(shape, f"scatter({base}, {ids}, {rows}), "
                              "update_window_dims={1}, "
                              "inserted_window_dims={0}, "
                              "scatter_dims_to_operand_dims={0}, "
                              "index_vector_dim=1, to_apply=region_add")

    def finish(self, outputs: list[tuple[str, str]]) -> str:
        out_shapes = ", ".join(shape for _, shape in outputs)
        names = ", ".join(name for name, _ in outputs)
        body = "\n".join(self.lines)
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
  ROOT out = ({out_shapes}) tuple({names})
}}
"""


def tensor(shape: str) -> str:
    """The StableHLO type of an HLO shape: f32[2,3] -> tensor<2x3xf32>."""
    element, dims = shape[:-1].split("[")
    element = {"s32": "i32", "pred": "i1"}.get(element, element)
    return "tensor<" + "".join(f"{d}x" for d in dims.split(",") if d) + \
        element + ">"


def mlir_float(value: float) -> str:
    """An f32 value as MLIR prints it: 1.000000e-01, 0xFF800000 for -inf."""
    if value == float("-inf"):
        return "0xFF800000"
    f32 = np.float32(value)
    text = f"{float(f32):.6e}"
    if np.float32(text) == f32:
        return text
    return repr(float(f32)).replace("e", "E")


class StableHlo(Hlo):
    """The same step as jax.jit(f).lower(x).as_text() prints it: one
    func.func with %0, %1, ... values, %cst_N constants, reduce in its
    `applies` form, gather and scatter in the generic form."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: dict[str, str] = {}
        self.arguments: list[str] = []
        self.regions = 0

    def _emit(self, shape: str, text: str, name: str | None = None) -> str:
        if name is None:
            name = f"%{self.count}"
            self.count += 1
        self.shapes[name] = shape
        self.lines.append(f"    {name} = {text}")
        return name

    def param(self, index: int, shape: str) -> str:
        name = f"%arg{index}"
        self.shapes[name] = shape
        self.arguments.append(f"{name}: {tensor(shape)}")
        return name

    def const(self, value: float) -> str:
        if value in self.constants:
            return self.constants[value]
        count = len(self.constants)
        name = "%cst" if not count else f"%cst_{count - 1}"
        self.constants[value] = name
        return self._emit("f32[]", f"stablehlo.constant dense<"
                                   f"{mlir_float(value)}> : tensor<f32>", name)

    def bcast(self, x: str, shape: str, dims: str = "") -> str:
        dims_list = dims.replace(",", ", ")
        return self._emit(shape, f"stablehlo.broadcast_in_dim {x}, "
                                 f"dims = [{dims_list}] : "
                                 f"({tensor(self.shapes[x])}) -> "
                                 f"{tensor(shape)}")

    def bin(self, kind: str, shape: str, a: str, b: str) -> str:
        return self._emit(shape, f"stablehlo.{kind} {a}, {b} : "
                                 f"{tensor(shape)}")

    def unary(self, kind: str, shape: str, x: str) -> str:
        return self._emit(shape, f"stablehlo.{kind} {x} : {tensor(shape)}")

    def reshape(self, shape: str, x: str) -> str:
        return self._emit(shape, f"stablehlo.reshape {x} : "
                                 f"({tensor(self.shapes[x])}) -> "
                                 f"{tensor(shape)}")

    def dot(self, shape: str, a: str, b: str, lc: int, rc: int) -> str:
        return self._emit(shape, f"stablehlo.dot_general {a}, {b}, "
                                 f"contracting_dims = [{lc}] x [{rc}], "
                                 f"precision = [DEFAULT, DEFAULT] : "
                                 f"({tensor(self.shapes[a])}, "
                                 f"{tensor(self.shapes[b])}) -> "
                                 f"{tensor(shape)}")

    def reduce(self, x: str, shape: str, dims: str, kind: str) -> str:
        init = self.const(0.0 if kind == "add" else float("-inf"))
        op = "add" if kind == "add" else "maximum"
        dims_list = dims.replace(",", ", ")
        return self._emit(shape, f"stablehlo.reduce({x} init: {init}) "
                                 f"applies stablehlo.{op} across dimensions "
                                 f"= [{dims_list}] : "
                                 f"({tensor(self.shapes[x])}, tensor<f32>) "
                                 f"-> {tensor(shape)}")

    def gather_rows(self, shape: str, table: str, ids: str, d: int) -> str:
        return self._emit(shape, f'"stablehlo.gather"({table}, {ids}) '
                                 f"<{{dimension_numbers = #stablehlo.gather<"
                                 f"offset_dims = [1], collapsed_slice_dims = "
                                 f"[0], start_index_map = [0], "
                                 f"index_vector_dim = 1>, indices_are_sorted "
                                 f"= false, slice_sizes = "
                                 f"array<i64: 1, {d}>}}>"
                                 f" : ({tensor(self.shapes[table])}, "
                                 f"{tensor(self.shapes[ids])}) -> "
                                 f"{tensor(shape)}")

    def scatter_add_rows(self, shape: str, base: str, ids: str,
                         rows: str) -> str:
        a, b = f"%arg{100 + 2 * self.regions}", f"%arg{101 + 2 * self.regions}"
        self.regions += 1
        name = f"%{self.count}"
        self.count += 1
        self.shapes[name] = shape
        self.lines += [
            f'    {name} = "stablehlo.scatter"({base}, {ids}, {rows}) '
            f"<{{indices_are_sorted = false, scatter_dimension_numbers = "
            f"#stablehlo.scatter<update_window_dims = [1], "
            f"inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
            f"index_vector_dim = 1>, unique_indices = false}}> ({{",
            f"    ^bb0({a}: tensor<f32>, {b}: tensor<f32>):",
            f"      %{self.count} = stablehlo.add {a}, {b} : tensor<f32>",
            f"      stablehlo.return %{self.count} : tensor<f32>",
            f"    }}) : ({tensor(self.shapes[base])}, "
            f"{tensor(self.shapes[ids])}, {tensor(self.shapes[rows])}) -> "
            f"{tensor(shape)}"]
        self.count += 1
        return name

    def finish(self, outputs: list[tuple[str, str]]) -> str:
        results = ", ".join(
            f'{tensor(shape)} {{jax.result_info = "[{i}]"}}'
            for i, (_, shape) in enumerate(outputs))
        names = ", ".join(name for name, _ in outputs)
        types = ", ".join(tensor(shape) for _, shape in outputs)
        body = "\n".join(self.lines)
        attributes = ("{mhlo.num_partitions = 1 : i32, "
                      "mhlo.num_replicas = 1 : i32}")
        return f"""module @jit_train_step attributes {attributes} {{
  func.func public @main({", ".join(self.arguments)}) -> ({results}) {{
{body}
    return {names} : {types}
  }}
}}
"""


def program(tokens: int, vocab: int, width: int, layers: int,
            lr: float = 0.1, dialect: str = "hlo") -> str:
    """The step as HLO text (dialect="hlo") or as StableHLO
    (dialect="stablehlo"), each as JAX prints it."""
    n, d, v = tokens, width, vocab
    nd, dd, vd = f"f32[{n},{d}]", f"f32[{d},{d}]", f"f32[{v},{d}]"
    b = Hlo() if dialect == "hlo" else StableHlo()
    params = ["E"] + [f"{k}{i}" for i in range(layers) for k in ("W", "U")]
    shapes = {"E": vd}
    shapes.update({p: dd for p in params[1:]})
    names = {}
    for i, p in enumerate(params):
        names[p] = b.param(i, shapes[p])
    ids = b.param(len(params), f"s32[{n}]")
    target = b.param(len(params) + 1, nd)
    ids2 = b.reshape(f"s32[{n},1]", ids)
    x = b.gather_rows(nd, names["E"], ids2, d)
    saved = []
    for i in range(layers):
        mu = b.row_mean(x, n, d)
        xc = b.bin("subtract", nd, x, b.bcast(mu, nd, "0"))
        var = b.row_mean(b.bin("multiply", nd, xc, xc), n, d)
        rstd = b.unary("rsqrt", f"f32[{n}]", b.bin(
            "add", f"f32[{n}]", var, b.bcast(b.const(EPS), f"f32[{n}]")))
        h = b.bin("multiply", nd, xc, b.bcast(rstd, nd, "0"))
        z = b.dot(nd, h, names[f"W{i}"], 1, 0)
        zmax = b.row_reduce(z, n, "max")
        e = b.unary("exponential", nd, b.bin(
            "subtract", nd, z, b.bcast(zmax, nd, "0")))
        p = b.bin("divide", nd, e, b.bcast(b.row_reduce(e, n, "add"), nd, "0"))
        saved.append((h, rstd, p))
        x = b.bin("add", nd, x, b.dot(nd, p, names[f"U{i}"], 1, 0))
    diff = b.bin("subtract", nd, x, target)
    sq = b.bin("multiply", nd, diff, diff)
    total = b.reduce(sq, "f32[]", "0,1", "add")
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
    grads["E"] = b.scatter_add_rows(vd, zeros, ids2, g)
    lr_c = b.const(lr)
    outs = []
    for p in params:
        step = b.bin("multiply", shapes[p], grads[p], b.bcast(lr_c, shapes[p]))
        outs.append((b.bin("subtract", shapes[p], names[p], step), shapes[p]))
    return b.finish(outs + [(loss, "f32[]")])


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


def main(argv: list[str]) -> int:
    usage = ("usage: transformer_step.py OUT.hlo|OUT.mlir "
             "[tokens vocab width layers]")
    if len(argv) not in (2, 6):
        print(usage, file=sys.stderr)
        return 2
    try:
        sizes = [int(a) for a in argv[2:]] or [512, 1000, 64, 2]
    except ValueError as e:
        print(f"{usage}\nthe sizes are whole numbers: {e}", file=sys.stderr)
        return 2
    if min(sizes) < 1:
        print(f"{usage}\nthe sizes are positive: {sizes}", file=sys.stderr)
        return 2
    with open(argv[1], "w") as f:
        f.write(program(*sizes, dialect="stablehlo"
                        if argv[1].endswith(".mlir") else "hlo"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
