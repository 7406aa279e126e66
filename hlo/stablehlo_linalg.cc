// The StableHLO translator's LAPACK and cuSOLVER custom calls, as JAX lowers
// LU, Cholesky and triangular solves: lapack_?getrf_ffi and
// cusolver_getrf_ffi (LU with partial pivoting), lapack_?potrf_ffi
// (Cholesky), lapack_?trsm_ffi (HLO's triangular-solve) and
// cu_lu_pivots_to_permutation,
// each computed by HLO of its own (a loop over the columns for getrf, HLO's
// cholesky for potrf, a loop of swaps for the permutation) with the
// library's outputs: the factors where it writes them, 1-based pivots, and
// info. hipSOLVER's names are the same calls.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {
void Translator::UseFfiAttributes(const Operation& op) {
  Attr(op, {"api_version"});
  Attr(op, {"operand_layouts"});
  Attr(op, {"result_layouts"});
  Attr(op, {"output_operand_aliases"});
  Attr(op, {"mhlo.backend_config", "backend_config"});
}

std::string Translator::FirstOperandText(const std::vector<Value>& in) {
  return in.empty() ? std::string()
                    : absl::StrCat(", the first ", in[0].shape.ToString());
}

absl::StatusOr<char> Translator::ConfigLetter(const Operation& op,
                                              absl::string_view target,
                                              absl::string_view name,
                                              absl::string_view allowed) {
  const Attribute* config = Attr(op, {"mhlo.backend_config", "backend_config"});
  const Attribute* f = config != nullptr && config->kind == AttrKind::kDict
                           ? Field(*config, name)
                           : nullptr;
  if (f == nullptr) {
    return Invalid(op, absl::StrFormat("%s needs %s in its backend_config, "
                                       "one of the characters %s as a ui8; it "
                                       "has none",
                                       target, name, allowed));
  }
  PJRT_ASSIGN_OR_RETURN(const int64_t v, IntOf(op, *f, name));
  if (v <= 0 || v > 127 ||
      allowed.find(static_cast<char>(v)) == absl::string_view::npos) {
    return Invalid(op, absl::StrFormat("%s needs %s in its backend_config, "
                                       "one of the characters %s as a ui8; "
                                       "got %d",
                                       target, name, allowed, v));
  }
  return static_cast<char>(v);
}

bool Translator::NoResultElements(const Operation& op) {
  for (const Shape& shape : op.result_types) {
    if (!shape.IsArray() || shape.ElementCount() != 0) return false;
  }
  return true;
}

absl::Status Translator::DefineZeros(Builder* b, const Operation& op) {
  std::vector<Value> zeros;
  for (const Shape& shape : op.result_types) {
    zeros.push_back(Value{EmitZeros(b, &op, shape), shape});
  }
  return Define(b, op, std::move(zeros));
}

absl::Status Translator::ExpectResults(const Operation& op,
                                       absl::string_view target,
                                       const Shape& operand,
                                       const std::vector<Shape>& want) {
  if (op.result_types == want) return absl::OkStatus();
  return Invalid(
      op, absl::StrFormat("%s of %s gives %s, not %s", target,
                          operand.ToString(), Shape::Tuple(want).ToString(),
                          Shape::Tuple(op.result_types).ToString()));
}

absl::StatusOr<bool> Translator::ConfigFlag(const Operation& op,
                                            absl::string_view name,
                                            bool otherwise) {
  const Attribute* config = Attr(op, {"mhlo.backend_config", "backend_config"});
  const Attribute* f = config != nullptr && config->kind == AttrKind::kDict
                           ? Field(*config, name)
                           : nullptr;
  if (f == nullptr) return otherwise;
  PJRT_ASSIGN_OR_RETURN(int64_t v, IntOf(op, *f, name));
  return v != 0;
}

std::string Translator::AsTyped(Builder* b, const Operation* origin,
                                const std::string& v, const Shape& shape) {
  if (!IsComplex(shape.element_type())) return v;
  const Shape part = shape.WithElementType(RealPartType(shape.element_type()));
  return Emit(b, origin, shape, "complex", {v, EmitZeros(b, origin, part)});
}

std::string Translator::Conjugate(Builder* b, const Operation* origin,
                                  const std::string& v, const Shape& shape) {
  if (!IsComplex(shape.element_type())) return v;
  const Shape part = shape.WithElementType(RealPartType(shape.element_type()));
  return Emit(
      b, origin, shape, "complex",
      {Emit(b, origin, part, "real", {v}),
       Emit(b, origin, part, "negate", {Emit(b, origin, part, "imag", {v})})});
}

std::string Translator::MagnitudeSquared(Builder* b, const Operation* origin,
                                         const std::string& v,
                                         const Shape& shape) {
  if (!IsComplex(shape.element_type())) {
    return Emit(b, origin, shape, "multiply", {v, v});
  }
  const Shape part = shape.WithElementType(RealPartType(shape.element_type()));
  const std::string re = Emit(b, origin, part, "real", {v});
  const std::string im = Emit(b, origin, part, "imag", {v});
  return Emit(b, origin, part, "add",
              {Emit(b, origin, part, "multiply", {re, re}),
               Emit(b, origin, part, "multiply", {im, im})});
}

std::vector<std::string> Translator::StartLoopBody(Builder* x,
                                                   const Shape& state,
                                                   absl::string_view name) {
  x->computation.name = NewName(name);
  const std::string p = EmitLine(x, nullptr, state, "parameter", "0");
  std::vector<std::string> elements;
  for (size_t i = 0; i < state.tuple_shapes().size(); ++i) {
    elements.push_back(Emit(x, nullptr, state.tuple_shapes()[i],
                            "get-tuple-element", {p},
                            absl::StrCat("index=", i)));
  }
  return elements;
}

std::string Translator::CountingCondition(const Shape& state, int64_t limit,
                                          absl::string_view name) {
  Builder cond;
  cond.computation.name = NewName(name);
  const Shape s32(PrimitiveType::kS32, {});
  const std::string p = EmitLine(&cond, nullptr, state, "parameter", "0");
  MarkRoot(
      &cond,
      Emit(&cond, nullptr, Shape(PrimitiveType::kPred, {}), "compare",
           {Emit(&cond, nullptr, s32, "get-tuple-element", {p}, "index=0"),
            EmitLine(&cond, nullptr, s32, "constant", absl::StrCat(limit))},
           "direction=LT"));
  return Finish(&cond);
}

bool Translator::IsLapackTarget(absl::string_view target) {
  if (target == "cusolver_getrf_ffi" || target == "hipsolver_getrf_ffi" ||
      target == "cu_lu_pivots_to_permutation" ||
      target == "hip_lu_pivots_to_permutation") {
    return true;
  }
  if (target.size() < 12 || !absl::StartsWith(target, "lapack_") ||
      !absl::EndsWith(target, "_ffi") ||
      LapackType(target[7]) == PrimitiveType::kInvalid) {
    return false;
  }
  const absl::string_view routine = target.substr(8, target.size() - 12);
  return routine == "getrf" || routine == "potrf" || routine == "trsm";
}

absl::Status Translator::LapackCall(Builder* b, const Operation& op,
                                    absl::string_view target,
                                    const std::vector<Value>& in) {
  UseFfiAttributes(op);
  if (absl::EndsWith(target, "_lu_pivots_to_permutation")) {
    return PivotsToPermutation(b, op, target, in);
  }
  if (target.substr(8, target.size() - 12) == "trsm") {
    return Trsm(b, op, target, in);
  }
  // LAPACK's names carry the type; cuSOLVER's and hipSOLVER's take the
  // operand's (a float or complex one).
  const bool solver = !absl::StartsWith(target, "lapack_");
  const bool lu = solver || target.substr(8, 5) == "getrf";
  const PrimitiveType type =
      LinalgCallType(target, in.size() == 1 ? &in[0].shape : nullptr);
  const bool supported =
      type == PrimitiveType::kF32 || type == PrimitiveType::kF64 ||
      type == PrimitiveType::kC64 || type == PrimitiveType::kC128;
  if (in.size() != 1 || !in[0].shape.IsArray() || in[0].shape.rank() < 2 ||
      in[0].shape.element_type() != type || !supported) {
    return Invalid(
        op,
        absl::StrFormat(
            "%s takes one %s matrix (or a batch of them); got %d "
            "operand(s)%s",
            target, solver ? "f32, f64, c64 or c128" : PrimitiveTypeName(type),
            in.size(), FirstOperandText(in)));
  }
  const Shape& a = in[0].shape;
  const int64_t nb = a.rank() - 2;
  const int64_t m = a.dimensions(nb), n = a.dimensions(nb + 1);
  const std::vector<int64_t> batch(a.dimensions().begin(),
                                   a.dimensions().begin() + nb);
  const Shape info(PrimitiveType::kS32, batch);
  std::vector<Shape> want = {a};
  if (lu) {
    std::vector<int64_t> pivots = batch;
    pivots.push_back(std::min(m, n));
    want.push_back(Shape(PrimitiveType::kS32, pivots));
  }
  want.push_back(info);
  PJRT_RETURN_IF_ERROR(ExpectResults(op, target, a, want));
  if (NoResultElements(op)) return DefineZeros(b, op);
  if (lu) return Getrf(b, op, in[0]);
  PJRT_ASSIGN_OR_RETURN(const char uplo,
                        ConfigLetter(op, target, "uplo", "LU"));
  if (m != n) {
    return Invalid(op, absl::StrFormat("%s factors square matrices, not %s",
                                       target, a.ToString()));
  }
  return Potrf(b, op, in[0], uplo == 'L');
}

absl::Status Translator::Trsm(Builder* b, const Operation& op,
                              absl::string_view target,
                              const std::vector<Value>& in) {
  // (a, b[, alpha]) -> alpha * op(a)^-1 b (left side) or b op(a)^-1:
  // side, uplo, trans_x and diag are characters in the backend config.
  const PrimitiveType type = LapackType(target[7]);
  const bool shapes_fit =
      (in.size() == 2 || in.size() == 3) && in[0].shape.IsArray() &&
      in[1].shape.IsArray() && in[0].shape.rank() >= 2 &&
      in[0].shape.rank() == in[1].shape.rank() &&
      in[0].shape.element_type() == type &&
      in[1].shape.element_type() == type &&
      (in.size() == 2 || in[2].shape == Shape(type, {})) &&
      op.result_types.size() == 1 && op.result_types[0] == in[1].shape;
  if (!shapes_fit) {
    return Invalid(
        op, absl::StrFormat("%s takes a triangular %s matrix a, a right-hand "
                            "side b of its rank (and a scalar alpha) and "
                            "gives b's shape; got %d operand(s)%s",
                            target, PrimitiveTypeName(type), in.size(),
                            FirstOperandText(in)));
  }
  const auto letter = [&](absl::string_view name, absl::string_view allowed) {
    return ConfigLetter(op, target, name, allowed);
  };
  PJRT_ASSIGN_OR_RETURN(const char side, letter("side", "LR"));
  PJRT_ASSIGN_OR_RETURN(const char uplo, letter("uplo", "LU"));
  PJRT_ASSIGN_OR_RETURN(const char trans, letter("trans_x", "NTC"));
  PJRT_ASSIGN_OR_RETURN(const char diag, letter("diag", "NU"));
  const Shape& shape = in[1].shape;
  std::string x =
      Emit(b, &op, shape, "triangular-solve", {in[0].name, in[1].name},
           absl::StrFormat("left_side=%s, lower=%s, unit_diagonal=%s, "
                           "transpose_a=%s",
                           side == 'L' ? "true" : "false",
                           uplo == 'L' ? "true" : "false",
                           diag == 'U' ? "true" : "false",
                           trans == 'N'   ? "NO_TRANSPOSE"
                           : trans == 'T' ? "TRANSPOSE"
                                          : "ADJOINT"));
  if (in.size() == 3) {
    x = Emit(
        b, &op, shape, "multiply",
        {Emit(b, &op, shape, "broadcast", {in[2].name}, "dimensions={}"), x});
  }
  return Define(b, op, {Value{x, shape}});
}

absl::Status Translator::Potrf(Builder* b, const Operation& op, const Value& a,
                               bool lower) {
  // LAPACK writes the factor into one triangle and leaves the other as it
  // was; info is the order of the first leading minor that is not positive
  // definite (a diagonal element of the factor that is not > 0), else 0.
  const Shape& s = a.shape;
  const int64_t nb = s.rank() - 2, n = s.dimensions(nb);
  const Shape pred = s.WithElementType(PrimitiveType::kPred);
  const Shape index = s.WithElementType(PrimitiveType::kS32);
  const std::string factor = Emit(b, &op, s, "cholesky", {a.name},
                                  lower ? "lower=true" : "lower=false");
  const std::string rows =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb));
  const std::string cols =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
  const std::string mine = Emit(b, &op, pred, "compare", {rows, cols},
                                lower ? "direction=GE" : "direction=LE");
  const std::string out = Emit(b, &op, s, "select", {mine, factor, a.name});
  // The diagonal, as the real part where complex.
  std::vector<int64_t> diagonal_dims(s.dimensions().begin(),
                                     s.dimensions().end() - 1);
  const PrimitiveType real_type = RealPartType(s.element_type());
  const Shape real = s.WithElementType(real_type);
  const std::string factor_real = IsComplex(s.element_type())
                                      ? Emit(b, &op, real, "real", {factor})
                                      : factor;
  const std::string zero = EmitZeros(b, &op, real);
  const std::string on_diagonal =
      Emit(b, &op, pred, "compare", {rows, cols}, "direction=EQ");
  // Off the diagonal, a positive stand-in; on it, the factor's value.
  const std::string one =
      Emit(b, &op, real, "broadcast",
           {EmitLine(b, &op, Shape(real_type, {}), "constant", "1")},
           "dimensions={}");
  const std::string values =
      Emit(b, &op, real, "select", {on_diagonal, factor_real, one});
  const std::string bad =
      Emit(b, &op, pred, "not",
           {Emit(b, &op, pred, "compare", {values, zero}, "direction=GT")});
  // The first bad column, 1-based, else n + 1: the minimum over the matrix.
  const std::string order = Emit(
      b, &op, index, "add",
      {cols,
       Emit(b, &op, index, "broadcast",
            {EmitLine(b, &op, Shape(PrimitiveType::kS32, {}), "constant", "1")},
            "dimensions={}")});
  const std::string past = EmitLine(b, &op, Shape(PrimitiveType::kS32, {}),
                                    "constant", absl::StrCat(n + 1));
  const std::string candidates = Emit(
      b, &op, index, "select",
      {bad, order, Emit(b, &op, index, "broadcast", {past}, "dimensions={}")});
  const Shape info(PrimitiveType::kS32,
                   std::vector<int64_t>(s.dimensions().begin(),
                                        s.dimensions().begin() + nb));
  const std::string first =
      Emit(b, &op, info, "reduce", {candidates, past},
           absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb, nb + 1,
                           MinComputation(PrimitiveType::kS32)));
  const std::string none =
      Emit(b, &op, info.WithElementType(PrimitiveType::kPred), "compare",
           {first, Emit(b, &op, info, "broadcast", {past}, "dimensions={}")},
           "direction=EQ");
  const std::string code =
      Emit(b, &op, info, "select", {none, EmitZeros(b, &op, info), first});
  return Define(b, op, {Value{out, s}, Value{code, info}});
}

absl::Status Translator::Getrf(Builder* b, const Operation& op,
                               const Value& a) {
  const Shape& s = a.shape;
  const PrimitiveType t = s.element_type();
  const int64_t nb = s.rank() - 2;
  const int64_t m = s.dimensions(nb), n = s.dimensions(nb + 1);
  const int64_t r = std::min(m, n);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  std::vector<int64_t> pivot_dims = batch;
  pivot_dims.push_back(r);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape pivots(PrimitiveType::kS32, pivot_dims);
  const Shape info(PrimitiveType::kS32, batch);
  if (r == 0) {
    return Define(b, op,
                  {a, Value{EmitZeros(b, &op, pivots), pivots},
                   Value{EmitZeros(b, &op, info), info}});
  }
  const Shape state = Shape::Tuple({s32, s, pivots, info});
  const std::string batch_dims = Braced(FirstDimensions(nb));
  const auto with_batch = [&](std::vector<int64_t> extra) {
    std::vector<int64_t> d = FirstDimensions(nb);
    d.insert(d.end(), extra.begin(), extra.end());
    return absl::StrCat("dimensions=", Braced(d));
  };

  // The condition: k < r.
  const std::string cond_name = CountingCondition(state, r, "getrf_cond");

  // The body: column k's pivot, the row swap, the column scaled by the
  // pivot's reciprocal, the rank-1 update of the trailing matrix.
  Builder body;
  body.computation.name = NewName("getrf_body");
  Builder* x = &body;
  {
    const std::string p = EmitLine(x, nullptr, state, "parameter", "0");
    const std::string k =
        Emit(x, nullptr, s32, "get-tuple-element", {p}, "index=0");
    const std::string mat =
        Emit(x, nullptr, s, "get-tuple-element", {p}, "index=1");
    const std::string ipiv =
        Emit(x, nullptr, pivots, "get-tuple-element", {p}, "index=2");
    const std::string code =
        Emit(x, nullptr, info, "get-tuple-element", {p}, "index=3");
    const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
    const std::string one = EmitLine(x, nullptr, s32, "constant", "1");
    const auto starts = [&](const std::string& row, const std::string& col) {
      std::vector<std::string> v(nb, zero);
      v.push_back(row);
      v.push_back(col);
      return v;
    };
    std::vector<int64_t> column_dims = batch, row_dims = batch;
    column_dims.push_back(m);
    row_dims.push_back(n);
    std::vector<int64_t> slice_column = batch, slice_row = batch;
    slice_column.insert(slice_column.end(), {m, 1});
    slice_row.insert(slice_row.end(), {1, n});
    const Shape column(t, column_dims), row(t, row_dims);
    const auto dynamic = [&](const std::string& from, const Shape& to,
                             const std::vector<int64_t>& sizes,
                             const std::string& r0, const std::string& c0) {
      std::vector<std::string> operands = {from};
      for (const std::string& i : starts(r0, c0)) operands.push_back(i);
      return Emit(x, nullptr, to, "reshape",
                  {Emit(x, nullptr, Shape(t, sizes), "dynamic-slice", operands,
                        absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
    };
    // |a| for pivoting: LAPACK's i?amax takes |re| + |im| of a complex.
    const PrimitiveType rt = RealPartType(t);
    const Shape magnitude(rt, column_dims);
    const std::string col = dynamic(mat, column, slice_column, zero, k);
    std::string mag;
    if (IsComplex(t)) {
      mag = Emit(x, nullptr, magnitude, "add",
                 {Emit(x, nullptr, magnitude, "abs",
                       {Emit(x, nullptr, magnitude, "real", {col})}),
                  Emit(x, nullptr, magnitude, "abs",
                       {Emit(x, nullptr, magnitude, "imag", {col})})});
    } else {
      mag = Emit(x, nullptr, magnitude, "abs", {col});
    }
    const Shape column_index(PrimitiveType::kS32, column_dims);
    const Shape column_pred(PrimitiveType::kPred, column_dims);
    const std::string rows = Emit(x, nullptr, column_index, "iota", {},
                                  absl::StrCat("iota_dimension=", nb));
    const std::string kc =
        Emit(x, nullptr, column_index, "broadcast", {k}, "dimensions={}");
    const std::string minus_one =
        EmitLine(x, nullptr, Shape(rt, {}), "constant", "-1");
    const std::string candidates = Emit(
        x, nullptr, magnitude, "select",
        {Emit(x, nullptr, column_pred, "compare", {rows, kc}, "direction=GE"),
         mag,
         Emit(x, nullptr, magnitude, "broadcast", {minus_one},
              "dimensions={}")});
    const Shape per_matrix(rt, batch);
    const std::string largest =
        Emit(x, nullptr, per_matrix, "reduce", {candidates, minus_one},
             absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                             MaxComputation(rt)));
    // The first row holding it (a NaN column: row k itself).
    const std::string mrows =
        EmitLine(x, nullptr, s32, "constant", absl::StrCat(m));
    const std::string at_largest = Emit(
        x, nullptr, column_index, "select",
        {Emit(x, nullptr, column_pred, "compare",
              {candidates, Emit(x, nullptr, magnitude, "broadcast", {largest},
                                absl::StrCat("dimensions=", batch_dims))},
              "direction=EQ"),
         rows,
         Emit(x, nullptr, column_index, "broadcast", {mrows},
              "dimensions={}")});
    const std::string first =
        Emit(x, nullptr, info, "reduce", {at_largest, mrows},
             absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                             MinComputation(PrimitiveType::kS32)));
    const Shape info_pred(PrimitiveType::kPred, batch);
    const std::string kb =
        Emit(x, nullptr, info, "broadcast", {k}, "dimensions={}");
    const std::string piv = Emit(
        x, nullptr, info, "select",
        {Emit(x, nullptr, info_pred, "compare",
              {first,
               Emit(x, nullptr, info, "broadcast", {mrows}, "dimensions={}")},
              "direction=EQ"),
         kb, first});
    // Rows k and piv swapped: row piv of each matrix by a gather.
    std::vector<int64_t> index_dims = batch;
    index_dims.push_back(1);
    std::vector<int64_t> gather_sizes(nb, 1);
    gather_sizes.insert(gather_sizes.end(), {1, n});
    const std::string row_p =
        Emit(x, nullptr, row, "gather",
             {mat, Emit(x, nullptr, Shape(PrimitiveType::kS32, index_dims),
                        "reshape", {piv})},
             absl::StrFormat(
                 "offset_dims={%d}, collapsed_slice_dims={%d}, "
                 "start_index_map={%d}, operand_batching_dims=%s, "
                 "start_indices_batching_dims=%s, index_vector_dim=%d, "
                 "slice_sizes=%s",
                 nb, nb, nb, batch_dims, batch_dims, nb, Braced(gather_sizes)));
    const std::string row_k = dynamic(mat, row, slice_row, k, zero);
    const Shape index = s.WithElementType(PrimitiveType::kS32);
    const Shape pred = s.WithElementType(PrimitiveType::kPred);
    const std::string all_rows = Emit(x, nullptr, index, "iota", {},
                                      absl::StrCat("iota_dimension=", nb));
    const std::string all_cols = Emit(x, nullptr, index, "iota", {},
                                      absl::StrCat("iota_dimension=", nb + 1));
    const std::string ka =
        Emit(x, nullptr, index, "broadcast", {k}, "dimensions={}");
    const std::string pa = Emit(x, nullptr, index, "broadcast", {piv},
                                absl::StrCat("dimensions=", batch_dims));
    const std::string spread_row = with_batch({nb + 1});
    const std::string swapped = Emit(
        x, nullptr, s, "select",
        {Emit(x, nullptr, pred, "compare", {all_rows, ka}, "direction=EQ"),
         Emit(x, nullptr, s, "broadcast", {row_p}, spread_row),
         Emit(
             x, nullptr, s, "select",
             {Emit(x, nullptr, pred, "compare", {all_rows, pa}, "direction=EQ"),
              Emit(x, nullptr, s, "broadcast", {row_k}, spread_row), mat})});
    // The pivot, and the column below it times its reciprocal.
    std::vector<int64_t> one_by_one = batch;
    one_by_one.insert(one_by_one.end(), {1, 1});
    std::vector<std::string> pivot_at = {swapped};
    for (const std::string& i : starts(k, k)) pivot_at.push_back(i);
    const Shape per_matrix_t(t, batch);
    const std::string pivot =
        Emit(x, nullptr, per_matrix_t, "reshape",
             {Emit(x, nullptr, Shape(t, one_by_one), "dynamic-slice", pivot_at,
                   absl::StrCat("dynamic_slice_sizes=", Braced(one_by_one)))});
    const std::string nonzero =
        Emit(x, nullptr, info_pred, "compare",
             {pivot, EmitZeros(x, nullptr, per_matrix_t)}, "direction=NE");
    const std::string reciprocal =
        Emit(x, nullptr, per_matrix_t, "divide",
             {Emit(x, nullptr, per_matrix_t, "broadcast",
                   {EmitLine(x, nullptr, Shape(t, {}), "constant",
                             IsComplex(t) ? "(1, 0)" : "1")},
                   "dimensions={}"),
              pivot});
    const std::string scaled =
        Emit(x, nullptr, s, "multiply",
             {swapped, Emit(x, nullptr, s, "broadcast", {reciprocal},
                            absl::StrCat("dimensions=", batch_dims))});
    const std::string below =
        Emit(x, nullptr, pred, "compare", {all_rows, ka}, "direction=GT");
    const std::string right =
        Emit(x, nullptr, pred, "compare", {all_cols, ka}, "direction=GT");
    const std::string in_column =
        Emit(x, nullptr, pred, "and",
             {Emit(x, nullptr, pred, "and",
                   {below, Emit(x, nullptr, pred, "compare", {all_cols, ka},
                                "direction=EQ")}),
              Emit(x, nullptr, pred, "broadcast", {nonzero},
                   absl::StrCat("dimensions=", batch_dims))});
    const std::string a1 =
        Emit(x, nullptr, s, "select", {in_column, scaled, swapped});
    // The trailing matrix less the outer product of column k (below the
    // pivot) and row k (right of it).
    const std::string l = dynamic(a1, column, slice_column, zero, k);
    const std::string u = dynamic(a1, row, slice_row, k, zero);
    const std::string product =
        Emit(x, nullptr, s, "multiply",
             {Emit(x, nullptr, s, "broadcast", {l}, with_batch({nb})),
              Emit(x, nullptr, s, "broadcast", {u}, with_batch({nb + 1}))});
    const std::string a2 =
        Emit(x, nullptr, s, "select",
             {Emit(x, nullptr, pred, "and", {below, right}),
              Emit(x, nullptr, s, "subtract", {a1, product}), a1});
    // The pivot's row, 1-based, and info: the first zero pivot's column.
    std::vector<int64_t> one_pivot = batch;
    one_pivot.push_back(1);
    std::vector<std::string> update = {
        ipiv, Emit(x, nullptr, Shape(PrimitiveType::kS32, one_pivot), "reshape",
                   {Emit(x, nullptr, info, "add",
                         {piv, Emit(x, nullptr, info, "broadcast", {one},
                                    "dimensions={}")})})};
    for (int64_t i = 0; i < nb; ++i) update.push_back(zero);
    update.push_back(k);
    const std::string ipiv2 =
        Emit(x, nullptr, pivots, "dynamic-update-slice", update);
    const std::string k1 = Emit(x, nullptr, s32, "add", {k, one});
    const std::string first_zero =
        Emit(x, nullptr, info_pred, "and",
             {Emit(x, nullptr, info_pred, "not", {nonzero}),
              Emit(x, nullptr, info_pred, "compare",
                   {code, EmitZeros(x, nullptr, info)}, "direction=EQ")});
    const std::string code2 = Emit(
        x, nullptr, info, "select",
        {first_zero, Emit(x, nullptr, info, "broadcast", {k1}, "dimensions={}"),
         code});
    MarkRoot(x, Emit(x, nullptr, state, "tuple", {k1, a2, ipiv2, code2}));
  }
  const std::string body_name = Finish(&body);

  const std::string init =
      Emit(b, &op, state, "tuple",
           {EmitLine(b, &op, s32, "constant", "0"), a.name,
            EmitZeros(b, &op, pivots), EmitZeros(b, &op, info)});
  const std::string loop =
      Emit(b, &op, state, "while", {init},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  return Define(
      b, op,
      {Value{Emit(b, &op, s, "get-tuple-element", {loop}, "index=1"), s},
       Value{Emit(b, &op, pivots, "get-tuple-element", {loop}, "index=2"),
             pivots},
       Value{Emit(b, &op, info, "get-tuple-element", {loop}, "index=3"),
             info}});
}

absl::Status Translator::PivotsToPermutation(Builder* b, const Operation& op,
                                             absl::string_view target,
                                             const std::vector<Value>& in) {
  // 0-based pivots [..., r] (row i swapped with row pivots[i], in order)
  // to the permutation of [..., m] rows they make, m from the result.
  if (in.size() != 1 || !in[0].shape.IsArray() || in[0].shape.rank() < 1 ||
      in[0].shape.element_type() != PrimitiveType::kS32 ||
      op.result_types.size() != 1 ||
      op.result_types[0].rank() != in[0].shape.rank() ||
      op.result_types[0].element_type() != PrimitiveType::kS32 ||
      !std::equal(in[0].shape.dimensions().begin(),
                  in[0].shape.dimensions().end() - 1,
                  op.result_types[0].dimensions().begin())) {
    return Invalid(
        op, absl::StrFormat("%s takes s32 pivots [..., r] and gives an s32 "
                            "permutation [..., m] of the same batch; got %d "
                            "operand(s) and %d result(s)",
                            target, in.size(), op.result_types.size()));
  }
  const Shape& pivots = in[0].shape;
  const Shape& perm = op.result_types[0];
  const int64_t nb = perm.rank() - 1;
  const int64_t m = perm.dimensions(nb), r = pivots.dimensions(nb);
  const std::string identity =
      Emit(b, &op, perm, "iota", {}, absl::StrCat("iota_dimension=", nb));
  if (r == 0 || m == 0 || perm.ElementCount() == 0) {
    return Define(b, op, {Value{identity, perm}});
  }
  const std::vector<int64_t> batch(perm.dimensions().begin(),
                                   perm.dimensions().end() - 1);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape per(PrimitiveType::kS32, batch);
  const Shape state = Shape::Tuple({s32, pivots, perm});
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  const std::string cond_name = CountingCondition(state, r, "pivots_cond");
  Builder body;
  body.computation.name = NewName("pivots_body");
  Builder* x = &body;
  {
    const std::string p = EmitLine(x, nullptr, state, "parameter", "0");
    const std::string i =
        Emit(x, nullptr, s32, "get-tuple-element", {p}, "index=0");
    const std::string piv =
        Emit(x, nullptr, pivots, "get-tuple-element", {p}, "index=1");
    const std::string order =
        Emit(x, nullptr, perm, "get-tuple-element", {p}, "index=2");
    const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
    std::vector<int64_t> one = batch;
    one.push_back(1);
    const auto at = [&](const std::string& v, const std::string& where) {
      std::vector<std::string> operands = {v};
      for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
      operands.push_back(where);
      return Emit(
          x, nullptr, per, "reshape",
          {Emit(x, nullptr, Shape(PrimitiveType::kS32, one), "dynamic-slice",
                operands, absl::StrCat("dynamic_slice_sizes=", Braced(one)))});
    };
    // Row i's partner, clamped into the rows (LAPACK's are in range).
    const std::string j =
        Emit(x, nullptr, per, "clamp",
             {Emit(x, nullptr, per, "broadcast", {zero}, "dimensions={}"),
              at(piv, i),
              Emit(x, nullptr, per, "broadcast",
                   {EmitLine(x, nullptr, s32, "constant", absl::StrCat(m - 1))},
                   "dimensions={}")});
    const std::string at_i = at(order, i);
    std::vector<int64_t> sizes(nb, 1);
    sizes.push_back(1);
    const std::string at_j = Emit(
        x, nullptr, per, "gather",
        {order,
         Emit(x, nullptr, Shape(PrimitiveType::kS32, one), "reshape", {j})},
        absl::StrFormat("offset_dims={}, collapsed_slice_dims={%d}, "
                        "start_index_map={%d}, operand_batching_dims=%s, "
                        "start_indices_batching_dims=%s, index_vector_dim=%d, "
                        "slice_sizes=%s",
                        nb, nb, Braced(batch_dims), Braced(batch_dims), nb,
                        Braced(sizes)));
    const Shape pred = perm.WithElementType(PrimitiveType::kPred);
    const std::string place =
        Emit(x, nullptr, perm, "iota", {}, absl::StrCat("iota_dimension=", nb));
    const std::string spread = absl::StrCat("dimensions=", Braced(batch_dims));
    const std::string swapped = Emit(
        x, nullptr, perm, "select",
        {Emit(
             x, nullptr, pred, "compare",
             {place, Emit(x, nullptr, perm, "broadcast", {i}, "dimensions={}")},
             "direction=EQ"),
         Emit(x, nullptr, perm, "broadcast", {at_j}, spread),
         Emit(x, nullptr, perm, "select",
              {Emit(x, nullptr, pred, "compare",
                    {place, Emit(x, nullptr, perm, "broadcast", {j}, spread)},
                    "direction=EQ"),
               Emit(x, nullptr, perm, "broadcast", {at_i}, spread), order})});
    const std::string next =
        Emit(x, nullptr, s32, "add",
             {i, EmitLine(x, nullptr, s32, "constant", "1")});
    MarkRoot(x, Emit(x, nullptr, state, "tuple", {next, piv, swapped}));
  }
  const std::string body_name = Finish(&body);
  const std::string loop = Emit(
      b, &op, state, "while",
      {Emit(b, &op, state, "tuple",
            {EmitLine(b, &op, s32, "constant", "0"), in[0].name, identity})},
      absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  return Define(
      b, op,
      {Value{Emit(b, &op, perm, "get-tuple-element", {loop}, "index=2"),
             perm}});
}

}  // namespace pjrt::hlo::stablehlo_internal
