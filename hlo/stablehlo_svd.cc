// The StableHLO translator's singular value decompositions, as JAX lowers
// jnp.linalg.svd: lapack_?gesdd_ffi and lapack_?gesvd_ffi for CPUs,
// cusolver_gesvd_ffi and cusolver_gesvdj_ffi for GPUs (hipSOLVER's names
// alike). Every one is computed the same way: one-sided Jacobi (Hestenes)
// rotations of the columns of the matrix, or of its adjoint when it is wide,
// in an HLO loop (pairs p < q in order, until a sweep finds every pair of
// columns orthogonal to the type's precision, at most 30 sweeps), after
// scaling it by its largest magnitude. The singular values are the columns'
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
  // swaps U and V^H among the results.
  bool full = true, transposed = false;
  char mode = 'A';
  if (lapack) {
    PJRT_ASSIGN_OR_RETURN(mode, ConfigLetter(op, target, "mode", "ASN"));
    full = mode != 'S';
  } else {
    PJRT_ASSIGN_OR_RETURN(full, ConfigFlag(op, "full_matrices", true));
    PJRT_RETURN_IF_ERROR(ConfigFlag(op, "compute_uv", true).status());
    if (!gives_v) {
      PJRT_ASSIGN_OR_RETURN(transposed, ConfigFlag(op, "transposed", false));
    }
  }
  const auto wanted = [&](bool full_shapes) {
    const Shape s(RealPartType(type), With(batch, {k}));
    const Shape u(type, With(batch, {m, full_shapes ? m : k}));
    const Shape v(type, gives_v ? With(batch, {n, full_shapes ? n : k})
                                : With(batch, {full_shapes ? n : k, n}));
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
  if (op.result_types != want) {
    return Invalid(
        op, absl::StrFormat("%s of %s gives %s, not %s", target, a.ToString(),
                            Shape::Tuple(want).ToString(),
                            Shape::Tuple(op.result_types).ToString()));
  }
  SvdParts parts = JacobiSvd(b, op, in[0], full);
  const Value second = gives_v ? parts.v : Adjoint(b, op, parts.v);
  const Value info{EmitZeros(b, &op, want[4]), want[4]};
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
  const auto origin = [&](Builder* x) { return x == b ? &op : nullptr; };
  const auto emit = [&](Builder* x, const Shape& shape,
                        absl::string_view opcode,
                        const std::vector<std::string>& operands,
                        absl::string_view attributes = "") {
    return Emit(x, origin(x), shape, opcode, operands, attributes);
  };
  const auto spread = [&](Builder* x, const std::string& v, const Shape& to,
                          std::vector<int64_t> extra) {
    std::vector<int64_t> d = batch_dims;
    d.insert(d.end(), extra.begin(), extra.end());
    return emit(x, to, "broadcast", {v},
                absl::StrCat("dimensions=", Braced(d)));
  };
  const auto full_of = [&](Builder* x, const std::string& scalar,
                           const Shape& to) {
    return emit(x, to, "broadcast", {scalar}, "dimensions={}");
  };
  const auto constant = [&](Builder* x, PrimitiveType t,
                            absl::string_view text) {
    return EmitLine(x, origin(x), Shape(t, {}), "constant", text);
  };
  const auto typed = [&](Builder* x, const std::string& v, const Shape& shape) {
    return AsTyped(x, origin(x), v, shape);
  };
  const auto conj = [&](Builder* x, const std::string& v, const Shape& shape) {
    return Conjugate(x, origin(x), v, shape);
  };
  const auto squares = [&](Builder* x, const std::string& v,
                           const Shape& shape) {
    return MagnitudeSquared(x, origin(x), v, shape);
  };
  const auto sum_over = [&](Builder* x, const std::string& v, const Shape& to,
                            int64_t dim) {
    return emit(x, to, "reduce", {v, EmitZero(x, origin(x), to.element_type())},
                absl::StrFormat("dimensions={%d}, to_apply=%%%s", dim,
                                AddComputation(to.element_type())));
  };
  // Scaled by its largest magnitude (1 for a zero matrix), so that sums of
  // squares neither overflow nor underflow.
  const Shape s_real = s.WithElementType(real);
  const std::string largest =
      emit(b, each_real, "reduce",
           {emit(b, s_real, "abs", {w.name}), EmitZero(b, &op, real)},
           absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb, nb + 1,
                           MaxComputation(real)));
  const std::string scale =
      emit(b, each_real, "select",
           {emit(b, each_pred, "compare",
                 {largest, EmitZeros(b, &op, each_real)}, "direction=EQ"),
            full_of(b, constant(b, real, "1"), each_real), largest});
  const std::string scaled =
      emit(b, s, "divide", {w.name, typed(b, spread(b, scale, s_real, {}), s)});
  const Shape v_index = vs.WithElementType(PrimitiveType::kS32);
  const std::string eye =
      typed(b,
            emit(b, vs.WithElementType(real), "convert",
                 {emit(b, vs.WithElementType(PrimitiveType::kPred), "compare",
                       {emit(b, v_index, "iota", {},
                             absl::StrCat("iota_dimension=", nb)),
                        emit(b, v_index, "iota", {},
                             absl::StrCat("iota_dimension=", nb + 1))},
                       "direction=EQ")}),
            vs);
  std::string rotated = scaled, v_final = eye;
  const int64_t pairs = cols * (cols - 1) / 2;
  if (pairs > 0) {
    const Shape table(PrimitiveType::kS32, {pairs});
    // (count, columns, V, rotated this sweep, done, p of each pair, q).
    const Shape state = Shape::Tuple({s32, s, vs, flag, flag, table, table});
    Builder cond;
    cond.computation.name = NewName("svd_cond");
    {
      const std::string p = EmitLine(&cond, nullptr, state, "parameter", "0");
      MarkRoot(
          &cond,
          emit(&cond, flag, "and",
               {emit(&cond, flag, "compare",
                     {emit(&cond, s32, "get-tuple-element", {p}, "index=0"),
                      constant(&cond, PrimitiveType::kS32,
                               absl::StrCat(kMaxSweeps * pairs))},
                     "direction=LT"),
                emit(&cond, flag, "not",
                     {emit(&cond, flag, "get-tuple-element", {p},
                           "index=4")})}));
    }
    const std::string cond_name = Finish(&cond);
    Builder body;
    Builder* x = &body;
    {
      const std::vector<std::string> in_state =
          StartLoopBody(x, state, "svd_body");
      const std::string &i = in_state[0], &mat = in_state[1],
                        &vec = in_state[2], &moved = in_state[3],
                        &pt = in_state[5], &qt = in_state[6];
      const std::string zero = constant(x, PrimitiveType::kS32, "0");
      const std::string r =
          emit(x, s32, "remainder",
               {i, constant(x, PrimitiveType::kS32, absl::StrCat(pairs))});
      const auto pick = [&](const std::string& t) {
        return emit(x, s32, "reshape",
                    {emit(x, Shape(PrimitiveType::kS32, {1}), "dynamic-slice",
                          {t, r}, "dynamic_slice_sizes={1}")});
      };
      const std::string pp = pick(pt), qq = pick(qt);
      // Column `at` of `m` [..., len, cols]: [..., len].
      const auto column = [&](const std::string& mm, const Shape& shape,
                              const std::string& at) {
        const int64_t len = shape.dimensions(nb);
        std::vector<std::string> operands = {mm};
        for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
        operands.push_back(zero);
        operands.push_back(at);
        const std::vector<int64_t> sizes = With(batch, {len, 1});
        return emit(
            x, Shape(type, With(batch, {len})), "reshape",
            {emit(x, Shape(type, sizes), "dynamic-slice", operands,
                  absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
      };
      const Shape line(type, With(batch, {rows}));
      const std::string bp = column(mat, s, pp), bq = column(mat, s, qq);
      const std::string alpha =
          sum_over(x, squares(x, bp, line), each_real, nb);
      const std::string beta = sum_over(x, squares(x, bq, line), each_real, nb);
      const std::string gamma = sum_over(
          x, emit(x, line, "multiply", {conj(x, bp, line), bq}), each, nb);
      // The rotation zeroing gamma: of the columns p and q (q turned by the
      // phase of gamma's conjugate where complex, making gamma |gamma|).
      const std::string g =
          complex ? emit(x, each_real, "abs", {gamma}) : gamma;
      const auto scalar = [&](absl::string_view text) {
        return full_of(x, constant(x, real, text), each_real);
      };
      const std::string one = scalar("1"), zero_r = scalar("0");
      const double eps = real == PrimitiveType::kF32 ? std::ldexp(1.0, -23)
                                                     : std::ldexp(1.0, -52);
      const std::string tolerance =
          scalar(absl::StrFormat("%.17g", eps * static_cast<double>(rows)));
      const std::string need =
          emit(x, each_pred, "compare",
               {emit(x, each_real, "abs", {g}),
                emit(x, each_real, "multiply",
                     {tolerance, emit(x, each_real, "multiply",
                                      {emit(x, each_real, "sqrt", {alpha}),
                                       emit(x, each_real, "sqrt", {beta})})})},
               "direction=GT");
      // zeta = (beta - alpha) / 2g; t = sign(zeta) / (|zeta| +
      // sqrt(1 + zeta^2)), the root taken as |zeta| sqrt(1 + zeta^-2) where
      // |zeta| > 1; c = 1 / sqrt(1 + t^2); s = c t.
      const std::string safe_g = emit(x, each_real, "select", {need, g, one});
      const std::string zeta =
          emit(x, each_real, "divide",
               {emit(x, each_real, "subtract", {beta, alpha}),
                emit(x, each_real, "multiply", {scalar("2"), safe_g})});
      const std::string size = emit(x, each_real, "abs", {zeta});
      const std::string big =
          emit(x, each_pred, "compare", {size, one}, "direction=GT");
      const std::string inverse = emit(x, each_real, "divide", {one, zeta});
      const std::string root = emit(
          x, each_real, "select",
          {big,
           emit(x, each_real, "multiply",
                {size, emit(x, each_real, "sqrt",
                            {emit(x, each_real, "add",
                                  {one, emit(x, each_real, "multiply",
                                             {inverse, inverse})})})}),
           emit(x, each_real, "sqrt",
                {emit(x, each_real, "add",
                      {one, emit(x, each_real, "multiply", {zeta, zeta})})})});
      const std::string t_raw = emit(
          x, each_real, "divide",
          {emit(x, each_real, "select",
                {emit(x, each_pred, "compare", {zeta, zero_r}, "direction=GE"),
                 one, emit(x, each_real, "negate", {one})}),
           emit(x, each_real, "add", {size, root})});
      const std::string t = emit(x, each_real, "select", {need, t_raw, zero_r});
      const std::string c = emit(
          x, each_real, "divide",
          {one, emit(x, each_real, "sqrt",
                     {emit(x, each_real, "add",
                           {one, emit(x, each_real, "multiply", {t, t})})})});
      const std::string sn = emit(x, each_real, "multiply", {t, c});
      // The phase q is turned by: conj(gamma) / |gamma|, 1 where no
      // rotation is needed.
      std::string phase;
      if (complex) {
        phase = emit(x, each, "select",
                     {need,
                      emit(x, each, "divide",
                           {conj(x, gamma, each), typed(x, safe_g, each)}),
                      typed(x, one, each)});
      }
      // Columns p and q of a matrix [..., len, cols] rotated.
      const auto rotate = [&](const std::string& mm, const Shape& shape) {
        const Shape line_of(type, With(batch, {shape.dimensions(nb)}));
        const Shape index = shape.WithElementType(PrimitiveType::kS32);
        const Shape pred = shape.WithElementType(PrimitiveType::kPred);
        const std::string cp = spread(x, column(mm, shape, pp), shape, {nb});
        std::string cq = column(mm, shape, qq);
        if (complex) {
          cq =
              emit(x, line_of, "multiply", {cq, spread(x, phase, line_of, {})});
        }
        cq = spread(x, cq, shape, {nb});
        const std::string cb =
            typed(x, spread(x, c, shape.WithElementType(real), {}), shape);
        const std::string sb =
            typed(x, spread(x, sn, shape.WithElementType(real), {}), shape);
        const std::string all_cols =
            emit(x, index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
        const std::string col_p =
            emit(x, pred, "compare", {all_cols, full_of(x, pp, index)},
                 "direction=EQ");
        const std::string col_q =
            emit(x, pred, "compare", {all_cols, full_of(x, qq, index)},
                 "direction=EQ");
        const std::string new_p = emit(x, shape, "subtract",
                                       {emit(x, shape, "multiply", {cb, cp}),
                                        emit(x, shape, "multiply", {sb, cq})});
        const std::string new_q = emit(x, shape, "add",
                                       {emit(x, shape, "multiply", {sb, cp}),
                                        emit(x, shape, "multiply", {cb, cq})});
        return emit(
            x, shape, "select",
            {col_p, new_p, emit(x, shape, "select", {col_q, new_q, mm})});
      };
      const std::string mat2 = rotate(mat, s);
      const std::string vec2 = rotate(vec, vs);
      // Whether any matrix rotated this sweep; a sweep that rotated none
      // ends the loop.
      const std::string any =
          nb == 0 ? emit(x, flag, "reshape", {need})
                  : emit(x, flag, "reduce",
                         {need, constant(x, PrimitiveType::kPred, "false")},
                         absl::StrFormat(
                             "dimensions=%s, to_apply=%%%s", Braced(batch_dims),
                             ScalarComputation(PrimitiveType::kPred, "or")));
      const std::string moved2 = emit(x, flag, "or", {moved, any});
      const std::string sweep_end =
          emit(x, flag, "compare",
               {r, constant(x, PrimitiveType::kS32, absl::StrCat(pairs - 1))},
               "direction=EQ");
      const std::string done =
          emit(x, flag, "and", {sweep_end, emit(x, flag, "not", {moved2})});
      const std::string moved3 =
          emit(x, flag, "and", {moved2, emit(x, flag, "not", {sweep_end})});
      MarkRoot(
          x,
          emit(x, state, "tuple",
               {emit(x, s32, "add", {i, constant(x, PrimitiveType::kS32, "1")}),
                mat2, vec2, moved3, done, pt, qt}));
    }
    const std::string body_name = Finish(&body);
    const auto [table_p, table_q] = JacobiPairs(b, op, cols);
    const std::string no = constant(b, PrimitiveType::kPred, "false");
    const std::string loop =
        emit(b, state, "while",
             {emit(b, state, "tuple",
                   {constant(b, PrimitiveType::kS32, "0"), scaled, eye, no, no,
                    table_p, table_q})},
             absl::StrCat("condition=%", cond_name, ", body=%", body_name));
    rotated = emit(b, s, "get-tuple-element", {loop}, "index=1");
    v_final = emit(b, vs, "get-tuple-element", {loop}, "index=2");
  }
  // The columns' lengths, descending, with their columns and V's.
  const Shape lengths(real, With(batch, {cols}));
  const std::string keys_of = sum_over(b, squares(b, rotated, s), lengths, nb);
  Builder greater;
  greater.computation.name = NewName("svd_greater");
  {
    const Shape key(real, {});
    const std::string k0 = EmitLine(&greater, nullptr, key, "parameter", "0");
    const std::string k1 = EmitLine(&greater, nullptr, key, "parameter", "1");
    EmitLine(&greater, nullptr, Shape(type, {}), "parameter", "2");
    EmitLine(&greater, nullptr, Shape(type, {}), "parameter", "3");
    MarkRoot(&greater, Emit(&greater, nullptr, flag, "compare", {k0, k1},
                            "direction=GT"));
  }
  const std::string greater_name = Finish(&greater);
  const auto sorted = [&](const std::string& mm, const Shape& shape) {
    const Shape pair = Shape::Tuple({shape.WithElementType(real), shape});
    const std::string result =
        emit(b, pair, "sort",
             {spread(b, keys_of, shape.WithElementType(real), {nb + 1}), mm},
             absl::StrFormat("dimensions={%d}, is_stable=true, to_apply=%%%s",
                             nb + 1, greater_name));
    return emit(b, shape, "get-tuple-element", {result}, "index=1");
  };
  const std::string columns = sorted(rotated, s);
  const Value v_sorted{sorted(v_final, vs), vs};
  const std::string values =
      emit(b, lengths, "multiply",
           {emit(b, lengths, "sqrt",
                 {sum_over(b, squares(b, columns, s), lengths, nb)}),
            spread(b, scale, lengths, {})});
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
        Value{emit(b, padded, "pad", {factors.name, EmitZero(b, &op, type)},
                   absl::StrCat("padding=", absl::StrJoin(padding, "x"))),
              padded};
  }
  const Value q = Orgqr(b, op, reflectors, tau);
  const Shape s_index = s.WithElementType(PrimitiveType::kS32);
  const std::string diagonal =
      sum_over(b,
               emit(b, s, "select",
                    {emit(b, s.WithElementType(PrimitiveType::kPred), "compare",
                          {emit(b, s_index, "iota", {},
                                absl::StrCat("iota_dimension=", nb)),
                           emit(b, s_index, "iota", {},
                                absl::StrCat("iota_dimension=", nb + 1))},
                          "direction=EQ"),
                     factors.name, EmitZeros(b, &op, s)}),
               Shape(type, With(batch, {cols})), nb);
  const Shape diag_shape(type, With(batch, {cols}));
  const Shape diag_real = diag_shape.WithElementType(real);
  const std::string magnitude = emit(b, diag_real, "abs", {diagonal});
  const std::string is_zero =
      emit(b, diag_shape.WithElementType(PrimitiveType::kPred), "compare",
           {magnitude, EmitZeros(b, &op, diag_real)}, "direction=EQ");
  const std::string ones =
      typed(b, full_of(b, constant(b, real, "1"), diag_real), diag_shape);
  const std::string phases = emit(
      b, diag_shape, "select",
      {is_zero, ones,
       emit(b, diag_shape, "divide",
            {diagonal,
             typed(b,
                   emit(b, diag_real, "select",
                        {is_zero, full_of(b, constant(b, real, "1"), diag_real),
                         magnitude}),
                   diag_shape)})});
  std::string column_phases = phases;
  const Shape q_phase(type, With(batch, {q_cols}));
  if (q_cols > cols) {
    std::vector<std::string> padding(nb, "0_0");
    padding.push_back(absl::StrCat("0_", q_cols - cols));
    column_phases = emit(b, q_phase, "pad",
                         {phases, complex ? constant(b, type, "(1, 0)")
                                          : constant(b, type, "1")},
                         absl::StrCat("padding=", absl::StrJoin(padding, "x")));
  }
  const Value u_w{emit(b, q.shape, "multiply",
                       {q.name, spread(b, column_phases, q.shape, {nb + 1})}),
                  q.shape};
  const Value s_out{values, lengths};
  if (tall) return {s_out, u_w, v_sorted};
  return {s_out, v_sorted, u_w};
}

}  // namespace pjrt::hlo::stablehlo_internal
