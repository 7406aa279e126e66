// The StableHLO translator's singular value decompositions, as JAX lowers
// jnp.linalg.svd: lapack_?gesdd_ffi and lapack_?gesvd_ffi for CPUs,
// cusolver_gesvd_ffi and cusolver_gesvdj_ffi for GPUs (hipSOLVER's names
// alike). Every one is computed the same way: one-sided Jacobi (Hestenes)
// rotations of the columns of the matrix, or of its adjoint when it is wide,
// in an HLO loop (JacobiColumns: disjoint pairs at once, in a round-robin
// order, until a sweep finds every pair of columns orthogonal to the type's
// precision, at most 30 sweeps), after scaling it by its largest magnitude.
// JacobiEigen gives eigh the same loop. The singular values are the columns'
// lengths, sorted descending with their columns; V is the product of the
// rotations; U is the Householder QR's Q of the rotated columns, each column
// turned by the phase of R's diagonal, which also completes U to a square
// one where the full matrices are asked for and gives orthonormal columns
// for zero singular values.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {
namespace {

constexpr int64_t kMaxSweeps = 30;

std::vector<int64_t> With(std::vector<int64_t> dims,
                          std::initializer_list<int64_t> more) {
  dims.insert(dims.end(), more.begin(), more.end());
  return dims;
}

}  // namespace

bool Translator::IsSvdTarget(absl::string_view target) {
  for (absl::string_view library : {"cusolver_", "hipsolver_"}) {
    if (absl::StartsWith(target, library)) {
      const absl::string_view routine = target.substr(library.size());
      return routine == "gesvd_ffi" || routine == "gesvdj_ffi";
    }
  }
  if (target.size() != 17 || !absl::StartsWith(target, "lapack_") ||
      !absl::EndsWith(target, "_ffi") ||
      LapackType(target[7]) == PrimitiveType::kInvalid) {
    return false;
  }
  const absl::string_view routine = target.substr(8, 5);
  return routine == "gesdd" || routine == "gesvd";
}

absl::Status Translator::Svd(Builder* b, const Operation& op,
                             absl::string_view target,
                             const std::vector<Value>& in) {
  UseFfiAttributes(op);
  const bool lapack = absl::StartsWith(target, "lapack_");
  // gesvdj gives V where the others give its adjoint.
  const bool gives_v = absl::EndsWith(target, "gesvdj_ffi");
  const PrimitiveType type =
      LinalgCallType(target, in.empty() ? nullptr : &in[0].shape);
  if (in.size() != 1 || !in[0].shape.IsArray() || in[0].shape.rank() < 2 ||
      type == PrimitiveType::kInvalid || in[0].shape.element_type() != type) {
    return Invalid(op,
                   absl::StrFormat("%s takes one %s matrix [..., m, n]; got "
                                   "%d operand(s)%s",
                                   target,
                                   lapack ? std::string(PrimitiveTypeName(type))
                                          : "f32, f64, c64 or c128",
                                   in.size(), FirstOperandText(in)));
  }
  const Shape& a = in[0].shape;
  const int64_t nb = a.rank() - 2;
  const int64_t m = a.dimensions(nb), n = a.dimensions(nb + 1);
  const int64_t k = std::min(m, n);
  const std::vector<int64_t> batch(a.dimensions().begin(),
                                   a.dimensions().begin() + nb);
  // LAPACK's mode: all of U and V^H ('A'), their first k columns and rows
  // ('S'), or neither ('N', whose U and V^H JAX still gives a shape and
  // drops). cuSOLVER's calls say it with flags; gesvd's `transposed` one
  // swaps U and V^H among the results, and without `compute_uv` they are
  // scalars.
  bool full = true, transposed = false, vectors = true;
  char mode = 'A';
  if (lapack) {
    PJRT_ASSIGN_OR_RETURN(mode, ConfigLetter(op, target, "mode", "ASN"));
    full = mode != 'S';
  } else {
    PJRT_ASSIGN_OR_RETURN(full, ConfigFlag(op, "full_matrices", true));
    if (!gives_v) {
      PJRT_ASSIGN_OR_RETURN(vectors, ConfigFlag(op, "compute_uv", true));
      PJRT_ASSIGN_OR_RETURN(transposed, ConfigFlag(op, "transposed", false));
    }
  }
  const auto wanted = [&](bool full_shapes) {
    const Shape s(RealPartType(type), With(batch, {k}));
    const Shape u = vectors ? Shape(type, With(batch, {m, full_shapes ? m : k}))
                            : Shape(type, {});
    const Shape v = !vectors ? Shape(type, {})
                    : gives_v
                        ? Shape(type, With(batch, {n, full_shapes ? n : k}))
                        : Shape(type, With(batch, {full_shapes ? n : k, n}));
    const Shape info(PrimitiveType::kS32, batch);
    return transposed ? std::vector<Shape>{a, s, v, u, info}
                      : std::vector<Shape>{a, s, u, v, info};
  };
  std::vector<Shape> want = wanted(full);
  if (mode == 'N' && op.result_types != want &&
      op.result_types == wanted(false)) {
    full = false;
    want = wanted(false);
  }
  PJRT_RETURN_IF_ERROR(ExpectResults(op, target, a, want));
  if (NoResultElements(op)) return DefineZeros(b, op);
  if (k > kMaxJacobiColumns) {
    return Invalid(op,
                   absl::StrFormat("%s of %s: pjrtd decomposes matrices "
                                   "of at most %d columns and rows",
                                   target, a.ToString(), kMaxJacobiColumns));
  }
  SvdParts parts = JacobiSvd(b, op, in[0], full);
  const Value info{EmitZeros(b, &op, want[4]), want[4]};
  if (!vectors) {
    const Value none{EmitZeros(b, &op, Shape(type, {})), Shape(type, {})};
    return Define(b, op, {in[0], parts.s, none, none, info});
  }
  const Value second = gives_v ? parts.v : Adjoint(b, op, parts.v);
  if (transposed) return Define(b, op, {in[0], parts.s, second, parts.u, info});
  return Define(b, op, {in[0], parts.s, parts.u, second, info});
}

Value Translator::Adjoint(Builder* b, const Operation& op, const Value& a) {
  const int64_t nb = a.shape.rank() - 2;
  std::vector<int64_t> swap = FirstDimensions(nb);
  swap.push_back(nb + 1);
  swap.push_back(nb);
  std::vector<int64_t> dims(a.shape.dimensions().begin(),
                            a.shape.dimensions().end());
  std::swap(dims[nb], dims[nb + 1]);
  const Shape s(a.shape.element_type(), dims);
  const std::string t = Emit(b, &op, s, "transpose", {a.name},
                             absl::StrCat("dimensions=", Braced(swap)));
  if (!IsComplex(s.element_type())) return Value{t, s};
  const Shape part = s.WithElementType(RealPartType(s.element_type()));
  return Value{
      Emit(b, &op, s, "complex",
           {Emit(b, &op, part, "real", {t}),
            Emit(b, &op, part, "negate", {Emit(b, &op, part, "imag", {t})})}),
      s};
}

// The ops the Jacobi loops write, in the computation `x` names (the
// translated function's, where the op is the origin, or a loop's).
struct Translator::JacobiEmitter {
  Translator* t;
  const Operation* op;
  Builder* main;
  std::vector<int64_t> batch;
  PrimitiveType type;

  const Operation* Origin(Builder* x) const { return x == main ? op : nullptr; }
  PrimitiveType Real() const { return RealPartType(type); }
  std::string Op(Builder* x, const Shape& shape, absl::string_view opcode,
                 const std::vector<std::string>& operands,
                 absl::string_view attributes = "") {
    return t->Emit(x, Origin(x), shape, opcode, operands, attributes);
  }
  // `v` [batch..., extra...] broadcast to `to` along the batch dimensions
  // and `extra`.
  std::string Spread(Builder* x, const std::string& v, const Shape& to,
                     std::vector<int64_t> extra) {
    std::vector<int64_t> d =
        FirstDimensions(static_cast<int64_t>(batch.size()));
    d.insert(d.end(), extra.begin(), extra.end());
    return Op(x, to, "broadcast", {v}, absl::StrCat("dimensions=", Braced(d)));
  }
  std::string Full(Builder* x, const std::string& scalar, const Shape& to) {
    return Op(x, to, "broadcast", {scalar}, "dimensions={}");
  }
  std::string Constant(Builder* x, PrimitiveType ty, absl::string_view text) {
    return t->EmitLine(x, Origin(x), Shape(ty, {}), "constant", text);
  }
  std::string Typed(Builder* x, const std::string& v, const Shape& shape) {
    return t->AsTyped(x, Origin(x), v, shape);
  }
  std::string Conj(Builder* x, const std::string& v, const Shape& shape) {
    return t->Conjugate(x, Origin(x), v, shape);
  }
  std::string Squares(Builder* x, const std::string& v, const Shape& shape) {
    return t->MagnitudeSquared(x, Origin(x), v, shape);
  }
  std::string SumOver(Builder* x, const std::string& v, const Shape& to,
                      int64_t dim) {
    return Op(x, to, "reduce",
              {v, t->EmitZero(x, Origin(x), to.element_type())},
              absl::StrFormat("dimensions={%d}, to_apply=%%%s", dim,
                              t->AddComputation(to.element_type())));
  }
  // The identity [batch..., n, n] of the type.
  std::string Identity(Builder* x, int64_t n) {
    const int64_t nb = static_cast<int64_t>(batch.size());
    const Shape index(PrimitiveType::kS32, With(batch, {n, n}));
    return Typed(
        x,
        Op(x, index.WithElementType(Real()), "convert",
           {Op(x, index.WithElementType(PrimitiveType::kPred), "compare",
               {Op(x, index, "iota", {}, absl::StrCat("iota_dimension=", nb)),
                Op(x, index, "iota", {},
                   absl::StrCat("iota_dimension=", nb + 1))},
               "direction=EQ")}),
        Shape(type, With(batch, {n, n})));
  }
  // The columns of `m` [batch..., rows, n] in the order `columns` [n] (s32)
  // names.
  std::string Columns(Builder* x, const std::string& m, const Shape& shape,
                      const std::string& columns) {
    const int64_t nb = static_cast<int64_t>(batch.size());
    const int64_t n = shape.dimensions(nb + 1);
    const std::string indices =
        Op(x, Shape(PrimitiveType::kS32, {n, 1}), "reshape", {columns});
    std::vector<int64_t> sizes = batch;
    sizes.insert(sizes.end(), {shape.dimensions(nb), 1});
    return Op(x, shape, "gather", {m, indices},
              absl::StrFormat("offset_dims=%s, collapsed_slice_dims={%d}, "
                              "start_index_map={%d}, index_vector_dim=1, "
                              "slice_sizes=%s",
                              Braced(FirstDimensions(nb + 1)), nb + 1, nb + 1,
                              Braced(sizes)));
  }
};

std::string Translator::KeyOrderComputation(PrimitiveType key,
                                            PrimitiveType value,
                                            absl::string_view direction) {
  Builder order;
  order.computation.name = NewName("key_order");
  const std::string k0 =
      EmitLine(&order, nullptr, Shape(key, {}), "parameter", "0");
  const std::string k1 =
      EmitLine(&order, nullptr, Shape(key, {}), "parameter", "1");
  EmitLine(&order, nullptr, Shape(value, {}), "parameter", "2");
  EmitLine(&order, nullptr, Shape(value, {}), "parameter", "3");
  MarkRoot(&order,
           Emit(&order, nullptr, Shape(PrimitiveType::kPred, {}), "compare",
                {k0, k1}, absl::StrCat("direction=", direction)));
  return Finish(&order);
}

// One-sided Jacobi: the columns of `w` [batch..., rows, cols] rotated in
// pairs until every two are orthogonal to the type's precision, and the
// product of the rotations V [batch..., cols, cols], so that w V is the
// rotated columns. Each step rotates cols / 2 disjoint pairs at once (a
// round-robin schedule: player cols' - 1 meets k, and (k + i) mod
// (cols' - 1) meets (k - i) mod (cols' - 1), with cols' the count made even
// by a column of zeros, which never rotates); cols' - 1 steps make a sweep,
// in which every pair meets once. A sweep in which no pair needed a
// rotation ends the loop; at most 30 sweeps.
std::pair<std::string, std::string> Translator::JacobiColumns(
    JacobiEmitter& e, const std::string& w, const Shape& s) {
  Builder* b = e.main;
  const PrimitiveType type = e.type, real = e.Real();
  const bool complex = IsComplex(type);
  const std::vector<int64_t>& batch = e.batch;
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t rows = s.dimensions(nb), cols = s.dimensions(nb + 1);
  const int64_t even = cols + cols % 2, half = even / 2;
  const Shape vs(type, With(batch, {cols, cols}));
  if (cols < 2) return {w, e.Identity(b, cols)};
  const Shape padded(type, With(batch, {rows, even}));
  const Shape vp(type, With(batch, {even, even}));
  std::string start = w;
  if (even != cols) {
    std::vector<std::string> padding(nb + 1, "0_0");
    padding.push_back("0_1");
    start = e.Op(b, padded, "pad", {w, EmitZero(b, e.op, type)},
                 absl::StrCat("padding=", absl::StrJoin(padding, "x")));
  }
  const Shape s32(PrimitiveType::kS32, {});
  const Shape flag(PrimitiveType::kPred, {});
  const int64_t steps = even - 1;
  // (count, columns, V, rotated this sweep, done).
  const Shape state = Shape::Tuple({s32, padded, vp, flag, flag});
  Builder cond;
  cond.computation.name = NewName("jacobi_cond");
  {
    const std::string p = EmitLine(&cond, nullptr, state, "parameter", "0");
    MarkRoot(
        &cond,
        e.Op(&cond, flag, "and",
             {e.Op(&cond, flag, "compare",
                   {e.Op(&cond, s32, "get-tuple-element", {p}, "index=0"),
                    e.Constant(&cond, PrimitiveType::kS32,
                               absl::StrCat(kMaxSweeps * steps))},
                   "direction=LT"),
              e.Op(&cond, flag, "not",
                   {e.Op(&cond, flag, "get-tuple-element", {p}, "index=4")})}));
  }
  const std::string cond_name = Finish(&cond);
  Builder body;
  Builder* x = &body;
  {
    const std::vector<std::string> in_state =
        StartLoopBody(x, state, "jacobi_body");
    const std::string &i = in_state[0], &mat = in_state[1], &vec = in_state[2],
                      &moved = in_state[3];
    const auto s32_constant = [&](int64_t v) {
      return e.Constant(x, PrimitiveType::kS32, absl::StrCat(v));
    };
    const Shape halves(PrimitiveType::kS32, {half});
    const auto all = [&](const std::string& scalar, const Shape& shape) {
      return e.Full(x, scalar, shape);
    };
    const std::string k = e.Op(x, s32, "remainder", {i, s32_constant(steps)});
    const std::string j = e.Op(x, halves, "iota", {}, "iota_dimension=0");
    const std::string last = all(s32_constant(steps), halves);
    const std::string ks = all(k, halves);
    const std::string up =
        e.Op(x, halves, "remainder", {e.Op(x, halves, "add", {ks, j}), last});
    const std::string down = e.Op(
        x, halves, "remainder",
        {e.Op(x, halves, "add", {e.Op(x, halves, "subtract", {ks, j}), last}),
         last});
    const std::string first_pair =
        e.Op(x, Shape(PrimitiveType::kPred, {half}), "compare",
             {j, all(s32_constant(0), halves)}, "direction=EQ");
    const std::string one_end = e.Op(x, halves, "select", {first_pair, ks, up});
    const std::string other_end =
        e.Op(x, halves, "select", {first_pair, last, down});
    const std::string ps = e.Op(x, halves, "minimum", {one_end, other_end});
    const std::string qs = e.Op(x, halves, "maximum", {one_end, other_end});
    const Shape order_shape(PrimitiveType::kS32, {even});
    const std::string order =
        e.Op(x, order_shape, "concatenate", {ps, qs}, "dimensions={0}");
    // The inverse order: the positions sorted by the column each holds.
    const std::string back = e.Op(
        x, order_shape, "get-tuple-element",
        {e.Op(x, Shape::Tuple({order_shape, order_shape}), "sort",
              {order, e.Op(x, order_shape, "iota", {}, "iota_dimension=0")},
              absl::StrCat("dimensions={0}, to_apply=%",
                           KeyOrderComputation(PrimitiveType::kS32,
                                               PrimitiveType::kS32, "LT")))},
        "index=1");
    // P and Q: the first and second columns of each pair, [..., len, half].
    const auto halves_of = [&](const std::string& m, const Shape& shape) {
      const int64_t len = shape.dimensions(nb);
      const std::string ordered = e.Columns(x, m, shape, order);
      const Shape part(type, With(batch, {len, half}));
      std::vector<std::string> limits;
      for (int64_t d : batch) limits.push_back(absl::StrCat("[0:", d, "]"));
      limits.push_back(absl::StrCat("[0:", len, "]"));
      std::vector<std::string> p_limits = limits, q_limits = limits;
      p_limits.push_back(absl::StrCat("[0:", half, "]"));
      q_limits.push_back(absl::StrCat("[", half, ":", even, "]"));
      return std::make_pair(
          e.Op(x, part, "slice", {ordered},
               absl::StrCat("slice={", absl::StrJoin(p_limits, ", "), "}")),
          e.Op(x, part, "slice", {ordered},
               absl::StrCat("slice={", absl::StrJoin(q_limits, ", "), "}")));
    };
    const auto [bp, bq] = halves_of(mat, padded);
    const Shape pair_part(type, With(batch, {rows, half}));
    const Shape each(type, With(batch, {half}));
    const Shape each_real = each.WithElementType(real);
    const Shape each_pred = each.WithElementType(PrimitiveType::kPred);
    const std::string alpha =
        e.SumOver(x, e.Squares(x, bp, pair_part), each_real, nb);
    const std::string beta =
        e.SumOver(x, e.Squares(x, bq, pair_part), each_real, nb);
    const std::string gamma = e.SumOver(
        x, e.Op(x, pair_part, "multiply", {e.Conj(x, bp, pair_part), bq}), each,
        nb);
    // The rotation zeroing gamma: of the columns p and q (q turned by the
    // phase of gamma's conjugate where complex, making gamma |gamma|).
    const std::string g = complex ? e.Op(x, each_real, "abs", {gamma}) : gamma;
    const auto scalar = [&](absl::string_view text) {
      return all(e.Constant(x, real, text), each_real);
    };
    const auto op1 = [&](absl::string_view opcode, const std::string& a) {
      return e.Op(x, each_real, opcode, {a});
    };
    const auto op2 = [&](absl::string_view opcode, const std::string& a,
                         const std::string& c) {
      return e.Op(x, each_real, opcode, {a, c});
    };
    const std::string one = scalar("1"), zero_r = scalar("0");
    const double eps = real == PrimitiveType::kF32 ? std::ldexp(1.0, -23)
                                                   : std::ldexp(1.0, -52);
    const std::string tolerance =
        scalar(absl::StrFormat("%.17g", eps * static_cast<double>(rows)));
    const std::string need =
        e.Op(x, each_pred, "compare",
             {op1("abs", g),
              op2("multiply", tolerance,
                  op2("multiply", op1("sqrt", alpha), op1("sqrt", beta)))},
             "direction=GT");
    // zeta = (beta - alpha) / 2g; t = sign(zeta) / (|zeta| + sqrt(1 +
    // zeta^2)), the root taken as |zeta| sqrt(1 + zeta^-2) where |zeta| > 1;
    // c = 1 / sqrt(1 + t^2); s = c t.
    const std::string safe_g = e.Op(x, each_real, "select", {need, g, one});
    const std::string zeta = op2("divide", op2("subtract", beta, alpha),
                                 op2("multiply", scalar("2"), safe_g));
    const std::string size = op1("abs", zeta);
    const std::string inverse = op2("divide", one, zeta);
    const std::string root = e.Op(
        x, each_real, "select",
        {e.Op(x, each_pred, "compare", {size, one}, "direction=GT"),
         op2("multiply", size,
             op1("sqrt", op2("add", one, op2("multiply", inverse, inverse)))),
         op1("sqrt", op2("add", one, op2("multiply", zeta, zeta)))});
    const std::string t_raw =
        op2("divide",
            e.Op(x, each_real, "select",
                 {e.Op(x, each_pred, "compare", {zeta, zero_r}, "direction=GE"),
                  one, op1("negate", one)}),
            op2("add", size, root));
    const std::string t = e.Op(x, each_real, "select", {need, t_raw, zero_r});
    const std::string c =
        op2("divide", one, op1("sqrt", op2("add", one, op2("multiply", t, t))));
    const std::string sn = op2("multiply", t, c);
    // The phase q is turned by: conj(gamma) / |gamma|, 1 where no rotation
    // is needed.
    std::string phase;
    if (complex) {
      phase = e.Op(x, each, "select",
                   {need,
                    e.Op(x, each, "divide",
                         {e.Conj(x, gamma, each), e.Typed(x, safe_g, each)}),
                    e.Typed(x, one, each)});
    }
    // The pairs of a matrix [..., len, even] rotated, back in place.
    const auto rotate = [&](const std::string& m, const Shape& shape) {
      const int64_t len = shape.dimensions(nb);
      const Shape part(type, With(batch, {len, half}));
      auto [p_cols, q_cols] = halves_of(m, shape);
      if (complex) {
        q_cols = e.Op(x, part, "multiply",
                      {q_cols, e.Spread(x, phase, part, {nb + 1})});
      }
      const std::string cb = e.Typed(
          x, e.Spread(x, c, part.WithElementType(real), {nb + 1}), part);
      const std::string sb = e.Typed(
          x, e.Spread(x, sn, part.WithElementType(real), {nb + 1}), part);
      const std::string new_p = e.Op(x, part, "subtract",
                                     {e.Op(x, part, "multiply", {cb, p_cols}),
                                      e.Op(x, part, "multiply", {sb, q_cols})});
      const std::string new_q = e.Op(x, part, "add",
                                     {e.Op(x, part, "multiply", {sb, p_cols}),
                                      e.Op(x, part, "multiply", {cb, q_cols})});
      return e.Columns(x,
                       e.Op(x, shape, "concatenate", {new_p, new_q},
                            absl::StrCat("dimensions={", nb + 1, "}")),
                       shape, back);
    };
    const std::string mat2 = rotate(mat, padded);
    const std::string vec2 = rotate(vec, vp);
    // Whether any pair of any matrix rotated this sweep; a sweep that
    // rotated none ends the loop.
    const std::string any = e.Op(
        x, flag, "reduce", {need, e.Constant(x, PrimitiveType::kPred, "false")},
        absl::StrFormat("dimensions=%s, to_apply=%%%s",
                        Braced(FirstDimensions(nb + 1)),
                        ScalarComputation(PrimitiveType::kPred, "or")));
    const std::string moved2 = e.Op(x, flag, "or", {moved, any});
    const std::string sweep_end =
        e.Op(x, flag, "compare", {k, s32_constant(steps - 1)}, "direction=EQ");
    const std::string done =
        e.Op(x, flag, "and", {sweep_end, e.Op(x, flag, "not", {moved2})});
    const std::string moved3 =
        e.Op(x, flag, "and", {moved2, e.Op(x, flag, "not", {sweep_end})});
    MarkRoot(x, e.Op(x, state, "tuple",
                     {e.Op(x, s32, "add", {i, s32_constant(1)}), mat2, vec2,
                      moved3, done}));
  }
  const std::string body_name = Finish(&body);
  const std::string no = e.Constant(b, PrimitiveType::kPred, "false");
  const std::string loop =
      e.Op(b, state, "while",
           {e.Op(b, state, "tuple",
                 {e.Constant(b, PrimitiveType::kS32, "0"), start,
                  e.Identity(b, even), no, no})},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  std::string rotated = e.Op(b, padded, "get-tuple-element", {loop}, "index=1");
  std::string v = e.Op(b, vp, "get-tuple-element", {loop}, "index=2");
  if (even != cols) {
    std::vector<std::string> limits;
    for (int64_t d : batch) limits.push_back(absl::StrCat("[0:", d, "]"));
    std::vector<std::string> r_limits = limits, v_limits = limits;
    r_limits.push_back(absl::StrCat("[0:", rows, "]"));
    r_limits.push_back(absl::StrCat("[0:", cols, "]"));
    v_limits.push_back(absl::StrCat("[0:", cols, "]"));
    v_limits.push_back(absl::StrCat("[0:", cols, "]"));
    rotated = e.Op(b, s, "slice", {rotated},
                   absl::StrCat("slice={", absl::StrJoin(r_limits, ", "), "}"));
    v = e.Op(b, vs, "slice", {v},
             absl::StrCat("slice={", absl::StrJoin(v_limits, ", "), "}"));
  }
  return {rotated, v};
}

std::pair<std::string, std::string> Translator::JacobiEigen(
    Builder* b, const Operation& op, const std::string& hermitian,
    const Shape& s) {
  const PrimitiveType type = s.element_type(), real = RealPartType(type);
  const int64_t nb = s.rank() - 2, n = s.dimensions(nb);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  JacobiEmitter e{this, &op, b, batch, type};
  const Shape each_real(real, batch);
  const Shape s_real = s.WithElementType(real);
  // Scaled by its largest magnitude, then shifted by its Frobenius norm
  // (at least its largest eigenvalue's magnitude): a positive semidefinite
  // matrix with the same eigenvectors, whose columns one-sided Jacobi makes
  // orthogonal with them.
  const std::string largest =
      e.Op(b, each_real, "reduce",
           {e.Op(b, s_real, "abs", {hermitian}), EmitZero(b, &op, real)},
           absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb, nb + 1,
                           MaxComputation(real)));
  const std::string scale =
      e.Op(b, each_real, "select",
           {e.Op(b, each_real.WithElementType(PrimitiveType::kPred), "compare",
                 {largest, EmitZeros(b, &op, each_real)}, "direction=EQ"),
            e.Full(b, e.Constant(b, real, "1"), each_real), largest});
  const std::string scaled =
      e.Op(b, s, "divide",
           {hermitian, e.Typed(b, e.Spread(b, scale, s_real, {}), s)});
  const std::string norm =
      e.Op(b, each_real, "sqrt",
           {e.Op(b, each_real, "reduce",
                 {e.Squares(b, scaled, s), EmitZero(b, &op, real)},
                 absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb,
                                 nb + 1, AddComputation(real)))});
  const std::string shifted = e.Op(
      b, s, "add",
      {scaled,
       e.Op(b, s, "multiply",
            {e.Identity(b, n), e.Typed(b, e.Spread(b, norm, s_real, {}), s)})});
  const auto [columns, vectors] = JacobiColumns(e, shifted, s);
  (void)columns;
  // Each eigenvalue as its vector's Rayleigh quotient, v^H A v, of the
  // matrix as given.
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  const std::string product = e.Op(
      b, s, "dot", {hermitian, vectors},
      absl::StrFormat("lhs_batch_dims=%s, rhs_batch_dims=%s, "
                      "lhs_contracting_dims={%d}, rhs_contracting_dims={%d}",
                      Braced(batch_dims), Braced(batch_dims), nb + 1, nb));
  const std::string quotient =
      e.Op(b, s, "multiply", {e.Conj(b, vectors, s), product});
  const std::string values = e.SumOver(
      b, IsComplex(type) ? e.Op(b, s_real, "real", {quotient}) : quotient,
      Shape(real, With(batch, {n})), nb);
  return {values, vectors};
}

Translator::SvdParts Translator::JacobiSvd(Builder* b, const Operation& op,
                                           const Value& a, bool full) {
  const PrimitiveType type = a.shape.element_type(), real = RealPartType(type);
  const bool complex = IsComplex(type);
  const int64_t nb = a.shape.rank() - 2;
  const int64_t m = a.shape.dimensions(nb), n = a.shape.dimensions(nb + 1);
  // The columns rotated are those of a tall matrix: a, or its adjoint.
  const bool tall = m >= n;
  const int64_t rows = std::max(m, n), cols = std::min(m, n);
  const std::vector<int64_t> batch(a.shape.dimensions().begin(),
                                   a.shape.dimensions().begin() + nb);
  const Value w = tall ? a : Adjoint(b, op, a);
  const Shape s = w.shape;  // [..., rows, cols]
  const Shape vs(type, With(batch, {cols, cols}));
  const Shape each(type, batch), each_real(real, batch);
  const Shape each_pred(PrimitiveType::kPred, batch);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape flag(PrimitiveType::kPred, {});
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  JacobiEmitter e{this, &op, b, batch, type};
  // Scaled by its largest magnitude (1 for a zero matrix), so that sums of
  // squares neither overflow nor underflow.
  const Shape s_real = s.WithElementType(real);
  const std::string largest =
      e.Op(b, each_real, "reduce",
           {e.Op(b, s_real, "abs", {w.name}), EmitZero(b, &op, real)},
           absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb, nb + 1,
                           MaxComputation(real)));
  const std::string scale =
      e.Op(b, each_real, "select",
           {e.Op(b, each_pred, "compare",
                 {largest, EmitZeros(b, &op, each_real)}, "direction=EQ"),
            e.Full(b, e.Constant(b, real, "1"), each_real), largest});
  const std::string scaled = e.Op(
      b, s, "divide", {w.name, e.Typed(b, e.Spread(b, scale, s_real, {}), s)});
  const auto [rotated, v_final] = JacobiColumns(e, scaled, s);
  // The columns' lengths, descending, with their columns and V's.
  const Shape lengths(real, With(batch, {cols}));
  const std::string keys_of =
      e.SumOver(b, e.Squares(b, rotated, s), lengths, nb);
  const std::string greater_name = KeyOrderComputation(real, type, "GT");
  const auto sorted = [&](const std::string& mm, const Shape& shape) {
    const Shape pair = Shape::Tuple({shape.WithElementType(real), shape});
    const std::string result =
        e.Op(b, pair, "sort",
             {e.Spread(b, keys_of, shape.WithElementType(real), {nb + 1}), mm},
             absl::StrFormat("dimensions={%d}, is_stable=true, to_apply=%%%s",
                             nb + 1, greater_name));
    return e.Op(b, shape, "get-tuple-element", {result}, "index=1");
  };
  const std::string columns = sorted(rotated, s);
  const Value v_sorted{sorted(v_final, vs), vs};
  const std::string values =
      e.Op(b, lengths, "multiply",
           {e.Op(b, lengths, "sqrt",
                 {e.SumOver(b, e.Squares(b, columns, s), lengths, nb)}),
            e.Spread(b, scale, lengths, {})});
  // U: the QR's Q of the sorted columns, square where asked for, column j
  // turned by R[j, j]'s phase.
  auto [factors, tau] = Geqrf(b, op, Value{columns, s});
  const int64_t q_cols = full ? rows : cols;
  Value reflectors = factors;
  if (q_cols > cols) {
    std::vector<std::string> padding(nb + 1, "0_0");
    padding.push_back(absl::StrCat("0_", q_cols - cols));
    const Shape padded(type, With(batch, {rows, q_cols}));
    reflectors =
        Value{e.Op(b, padded, "pad", {factors.name, EmitZero(b, &op, type)},
                   absl::StrCat("padding=", absl::StrJoin(padding, "x"))),
              padded};
  }
  const Value q = Orgqr(b, op, reflectors, tau);
  const Shape s_index = s.WithElementType(PrimitiveType::kS32);
  const std::string diagonal = e.SumOver(
      b,
      e.Op(b, s, "select",
           {e.Op(b, s.WithElementType(PrimitiveType::kPred), "compare",
                 {e.Op(b, s_index, "iota", {},
                       absl::StrCat("iota_dimension=", nb)),
                  e.Op(b, s_index, "iota", {},
                       absl::StrCat("iota_dimension=", nb + 1))},
                 "direction=EQ"),
            factors.name, EmitZeros(b, &op, s)}),
      Shape(type, With(batch, {cols})), nb);
  const Shape diag_shape(type, With(batch, {cols}));
  const Shape diag_real = diag_shape.WithElementType(real);
  const std::string magnitude = e.Op(b, diag_real, "abs", {diagonal});
  const std::string is_zero =
      e.Op(b, diag_shape.WithElementType(PrimitiveType::kPred), "compare",
           {magnitude, EmitZeros(b, &op, diag_real)}, "direction=EQ");
  const std::string ones =
      e.Typed(b, e.Full(b, e.Constant(b, real, "1"), diag_real), diag_shape);
  const std::string phases = e.Op(
      b, diag_shape, "select",
      {is_zero, ones,
       e.Op(b, diag_shape, "divide",
            {diagonal,
             e.Typed(
                 b,
                 e.Op(b, diag_real, "select",
                      {is_zero, e.Full(b, e.Constant(b, real, "1"), diag_real),
                       magnitude}),
                 diag_shape)})});
  std::string column_phases = phases;
  const Shape q_phase(type, With(batch, {q_cols}));
  if (q_cols > cols) {
    std::vector<std::string> padding(nb, "0_0");
    padding.push_back(absl::StrCat("0_", q_cols - cols));
    column_phases = e.Op(b, q_phase, "pad",
                         {phases, complex ? e.Constant(b, type, "(1, 0)")
                                          : e.Constant(b, type, "1")},
                         absl::StrCat("padding=", absl::StrJoin(padding, "x")));
  }
  const Value u_w{e.Op(b, q.shape, "multiply",
                       {q.name, e.Spread(b, column_phases, q.shape, {nb + 1})}),
                  q.shape};
  const Value s_out{values, lengths};
  if (tall) return {s_out, u_w, v_sorted};
  return {s_out, v_sorted, u_w};
}

}  // namespace pjrt::hlo::stablehlo_internal
