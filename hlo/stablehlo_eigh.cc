// The StableHLO translator's symmetric eigensolver call, as JAX lowers
// jnp.linalg.eigh for CPUs: lapack_ssyevd_ffi and lapack_dsyevd_ffi, computed
// by cyclic Jacobi rotations in an HLO loop (rows p < q in order, until the
// off-diagonal part is below the type's epsilon times the whole, at most 30
// sweeps), the eigenvalues then sorted ascending with their vectors, as
// LAPACK returns them; lapack_cheevd_ffi and lapack_zheevd_ffi alike, each
// complex a[p, q] first made real by turning row and column q by its phase.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

std::pair<std::string, std::string> Translator::JacobiPairs(Builder* b,
                                                            const Operation& op,
                                                            int64_t n) {
  std::vector<std::string> ps, qs;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t q = p + 1; q < n; ++q) {
      ps.push_back(absl::StrCat(p));
      qs.push_back(absl::StrCat(q));
    }
  }
  const Shape table(PrimitiveType::kS32, {n * (n - 1) / 2});
  return {EmitLine(b, &op, table, "constant",
                   absl::StrCat("{", absl::StrJoin(ps, ","), "}")),
          EmitLine(b, &op, table, "constant",
                   absl::StrCat("{", absl::StrJoin(qs, ","), "}"))};
}

bool Translator::IsLapackEighTarget(absl::string_view target) {
  return target == "lapack_ssyevd_ffi" || target == "lapack_dsyevd_ffi" ||
         target == "lapack_cheevd_ffi" || target == "lapack_zheevd_ffi" ||
         target == "cusolver_syevd_ffi" || target == "hipsolver_syevd_ffi";
}

absl::Status Translator::Syevd(Builder* b, const Operation& op,
                               absl::string_view target,
                               const std::vector<Value>& in) {
  UseFfiAttributes(op);
  const PrimitiveType type =
      LinalgCallType(target, in.empty() ? nullptr : &in[0].shape);
  const PrimitiveType real = RealPartType(type);
  const bool lapack = absl::StartsWith(target, "lapack_");
  const bool complex = IsComplex(type);
  bool fits = in.size() == 1 && in[0].shape.IsArray() &&
              in[0].shape.rank() >= 2 && in[0].shape.element_type() == type;
  std::vector<Shape> want;
  if (fits) {
    const Shape& a = in[0].shape;
    const int64_t nb = a.rank() - 2;
    std::vector<int64_t> batch(a.dimensions().begin(),
                               a.dimensions().begin() + nb);
    std::vector<int64_t> values = batch;
    values.push_back(a.dimensions(nb));
    fits = a.dimensions(nb) == a.dimensions(nb + 1);
    want = {a, Shape(real, values), Shape(PrimitiveType::kS32, batch)};
  }
  if (!fits || op.result_types != want) {
    return Invalid(
        op, absl::StrFormat("%s takes one square %s matrix [..., n, n] and "
                            "gives (vectors, values [..., n], info); got %d "
                            "operand(s)%s",
                            target,
                            lapack ? std::string(PrimitiveTypeName(type))
                                   : "f32, f64, c64 or c128",
                            in.size(), FirstOperandText(in)));
  }
  // The vectors are computed whatever the mode. LAPACK names the triangle
  // read by a letter, cuSOLVER by a flag.
  char uplo = 'L';
  if (lapack) {
    PJRT_ASSIGN_OR_RETURN(uplo, ConfigLetter(op, target, "uplo", "LU"));
  } else {
    PJRT_ASSIGN_OR_RETURN(const bool lower, ConfigFlag(op, "lower", true));
    uplo = lower ? 'L' : 'U';
  }
  const Shape& s = in[0].shape;
  const int64_t nb = s.rank() - 2, n = s.dimensions(nb);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  std::vector<int64_t> value_dims = batch;
  value_dims.push_back(n);
  const Shape values(real, value_dims);
  const Shape info(PrimitiveType::kS32, batch);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape pred = s.WithElementType(PrimitiveType::kPred);
  const Shape index = s.WithElementType(PrimitiveType::kS32);
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  const std::string spread_batch =
      absl::StrCat("dimensions=", Braced(batch_dims));
  // The matrix the triangle `uplo` names, made whole.
  const std::string rows =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb));
  const std::string cols =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
  const std::string whole =
      Emit(b, &op, s, "select",
           {Emit(b, &op, pred, "compare", {rows, cols},
                 uplo == 'L' ? "direction=GE" : "direction=LE"),
            in[0].name, Adjoint(b, op, in[0]).name});
  const std::string on_diagonal =
      Emit(b, &op, pred, "compare", {rows, cols}, "direction=EQ");
  // A Hermitian matrix's diagonal is real: LAPACK reads no imaginary part.
  const Shape s_real = s.WithElementType(real);
  const std::string hermitian =
      complex ? Emit(b, &op, s, "select",
                     {on_diagonal,
                      AsTyped(b, &op, Emit(b, &op, s_real, "real", {whole}), s),
                      whole})
              : whole;
  const std::string eye =
      AsTyped(b, &op, Emit(b, &op, s_real, "convert", {on_diagonal}), s);
  std::string a_final = hermitian, v_final = eye;
  const int64_t pairs = n * (n - 1) / 2;
  if (pairs > 0) {
    const Shape table(PrimitiveType::kS32, {pairs});
    const auto [p_table, q_table] = JacobiPairs(b, op, n);
    const Shape flag(PrimitiveType::kPred, {});
    const Shape state = Shape::Tuple({s32, s, s, flag, table, table});
    constexpr int64_t kMaxSweeps = 30;
    Builder cond;
    cond.computation.name = NewName("syevd_cond");
    {
      const std::string p = EmitLine(&cond, nullptr, state, "parameter", "0");
      const std::string i =
          Emit(&cond, nullptr, s32, "get-tuple-element", {p}, "index=0");
      const std::string done =
          Emit(&cond, nullptr, flag, "get-tuple-element", {p}, "index=3");
      MarkRoot(&cond,
               Emit(&cond, nullptr, flag, "and",
                    {Emit(&cond, nullptr, flag, "compare",
                          {i, EmitLine(&cond, nullptr, s32, "constant",
                                       absl::StrCat(kMaxSweeps * pairs))},
                          "direction=LT"),
                     Emit(&cond, nullptr, flag, "not", {done})}));
    }
    const std::string cond_name = Finish(&cond);
    Builder body;
    body.computation.name = NewName("syevd_body");
    Builder* x = &body;
    {
      const auto op_ = [&](const Shape& shape, absl::string_view opcode,
                           const std::vector<std::string>& operands,
                           absl::string_view attributes = "") {
        return Emit(x, nullptr, shape, opcode, operands, attributes);
      };
      const std::string p = EmitLine(x, nullptr, state, "parameter", "0");
      const std::string i = op_(s32, "get-tuple-element", {p}, "index=0");
      const std::string mat = op_(s, "get-tuple-element", {p}, "index=1");
      const std::string vec = op_(s, "get-tuple-element", {p}, "index=2");
      const std::string pt = op_(table, "get-tuple-element", {p}, "index=4");
      const std::string qt = op_(table, "get-tuple-element", {p}, "index=5");
      const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
      const std::string r =
          op_(s32, "remainder",
              {i, EmitLine(x, nullptr, s32, "constant", absl::StrCat(pairs))});
      const auto pick = [&](const std::string& t) {
        return op_(s32, "reshape",
                   {op_(Shape(PrimitiveType::kS32, {1}), "dynamic-slice",
                        {t, r}, "dynamic_slice_sizes={1}")});
      };
      const std::string pp = pick(pt), qq = pick(qt);
      const Shape each(type, batch);
      const auto element = [&](const std::string& m, const std::string& row,
                               const std::string& col) {
        std::vector<int64_t> sizes = batch;
        sizes.insert(sizes.end(), {1, 1});
        std::vector<std::string> operands = {m};
        for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
        operands.push_back(row);
        operands.push_back(col);
        return op_(each, "reshape",
                   {op_(Shape(type, sizes), "dynamic-slice", operands,
                        absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
      };
      const Shape each_real(real, batch);
      const auto real_part = [&](const std::string& v) {
        return complex ? op_(each_real, "real", {v}) : v;
      };
      const std::string app = real_part(element(mat, pp, pp));
      const std::string aqq = real_part(element(mat, qq, qq));
      const std::string apq = element(mat, pp, qq);
      // A Hermitian a[p, q] is made real first: row q turned by its phase,
      // column q by the conjugate (D^H A D, D = diag(..., d at q, ...) with
      // d = conj(apq) / |apq|), then rotated as a real one.
      const std::string g = complex ? op_(each_real, "abs", {apq}) : apq;
      const Shape each_pred(PrimitiveType::kPred, batch);
      const auto scalar = [&](absl::string_view text) {
        return op_(each_real, "broadcast",
                   {EmitLine(x, nullptr, Shape(real, {}), "constant", text)},
                   "dimensions={}");
      };
      const std::string one = scalar("1"), two = scalar("2"),
                        zero_t = scalar("0");
      const std::string is_zero =
          op_(each_pred, "compare", {g, zero_t}, "direction=EQ");
      // theta = (aqq - app) / (2 apq); t = sign(theta) / (|theta| +
      // sqrt(theta^2 + 1)); c = 1 / sqrt(t^2 + 1); s = t c.
      const std::string theta = op_(each_real, "divide",
                                    {op_(each_real, "subtract", {aqq, app}),
                                     op_(each_real, "multiply", {two, g})});
      const std::string root =
          op_(each_real, "sqrt",
              {op_(each_real, "add",
                   {op_(each_real, "multiply", {theta, theta}), one})});
      const std::string t_raw =
          op_(each_real, "divide",
              {op_(each_real, "select",
                   {op_(each_pred, "compare", {theta, zero_t}, "direction=GE"),
                    one, op_(each_real, "negate", {one})}),
               op_(each_real, "add", {op_(each_real, "abs", {theta}), root})});
      const std::string t = op_(each_real, "select", {is_zero, zero_t, t_raw});
      const std::string c =
          op_(each_real, "divide",
              {one, op_(each_real, "sqrt",
                        {op_(each_real, "add",
                             {op_(each_real, "multiply", {t, t}), one})})});
      const std::string sn = op_(each_real, "multiply", {t, c});
      const std::string cb =
          AsTyped(x, nullptr, op_(s_real, "broadcast", {c}, spread_batch), s);
      const std::string sb =
          AsTyped(x, nullptr, op_(s_real, "broadcast", {sn}, spread_batch), s);
      // d spread over the matrix, and its conjugate.
      std::string d, d_conj;
      if (complex) {
        const std::string phase =
            op_(each, "select",
                {is_zero, AsTyped(x, nullptr, one, each),
                 op_(each, "divide",
                     {Conjugate(x, nullptr, apq, each),
                      AsTyped(x, nullptr,
                              op_(each_real, "select", {is_zero, one, g}),
                              each)})});
        d = op_(s, "broadcast", {phase}, spread_batch);
        d_conj = Conjugate(x, nullptr, d, s);
      }
      const auto turned = [&](const std::string& v, const std::string& by) {
        return complex ? op_(s, "multiply", {v, by}) : v;
      };
      const std::string all_rows =
          op_(index, "iota", {}, absl::StrCat("iota_dimension=", nb));
      const std::string all_cols =
          op_(index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
      const std::string pa = op_(index, "broadcast", {pp}, "dimensions={}");
      const std::string qa = op_(index, "broadcast", {qq}, "dimensions={}");
      const std::string row_p =
          op_(pred, "compare", {all_rows, pa}, "direction=EQ");
      const std::string row_q =
          op_(pred, "compare", {all_rows, qa}, "direction=EQ");
      const std::string col_p =
          op_(pred, "compare", {all_cols, pa}, "direction=EQ");
      const std::string col_q =
          op_(pred, "compare", {all_cols, qa}, "direction=EQ");
      std::vector<int64_t> row_dims = batch;
      row_dims.push_back(n);
      const Shape line(type, row_dims);
      // Row or column `at` of m, spread back over the matrix along `along`.
      const auto slice_spread = [&](const std::string& m, const std::string& at,
                                    bool row) {
        std::vector<int64_t> sizes = batch;
        if (row) {
          sizes.insert(sizes.end(), {1, n});
        } else {
          sizes.insert(sizes.end(), {n, 1});
        }
        std::vector<std::string> operands = {m};
        for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
        operands.push_back(row ? at : zero);
        operands.push_back(row ? zero : at);
        const std::string v =
            op_(line, "reshape",
                {op_(Shape(type, sizes), "dynamic-slice", operands,
                     absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
        std::vector<int64_t> d = batch_dims;
        d.push_back(row ? nb + 1 : nb);
        return op_(s, "broadcast", {v}, absl::StrCat("dimensions=", Braced(d)));
      };
      // c * x - s * y and s * x + c * y.
      const auto rotate = [&](const std::string& xv, const std::string& yv,
                              bool first) {
        return first ? op_(s, "subtract",
                           {op_(s, "multiply", {cb, xv}),
                            op_(s, "multiply", {sb, yv})})
                     : op_(s, "add",
                           {op_(s, "multiply", {sb, xv}),
                            op_(s, "multiply", {cb, yv})});
      };
      // J^T A: rows p and q.
      const std::string rp = slice_spread(mat, pp, true);
      const std::string rq = turned(slice_spread(mat, qq, true), d_conj);
      const std::string a1 =
          op_(s, "select",
              {row_p, rotate(rp, rq, true),
               op_(s, "select", {row_q, rotate(rp, rq, false), mat})});
      // (J^T A) J: columns p and q; a'[p, q] = a'[q, p] = 0.
      const std::string cp = slice_spread(a1, pp, false);
      const std::string cq = turned(slice_spread(a1, qq, false), d);
      const std::string a2 =
          op_(s, "select",
              {col_p, rotate(cp, cq, true),
               op_(s, "select", {col_q, rotate(cp, cq, false), a1})});
      const std::string off_pair = op_(
          pred, "or",
          {op_(pred, "and", {row_p, col_q}), op_(pred, "and", {row_q, col_p})});
      const std::string a3 = op_(
          s, "select",
          {off_pair,
           op_(s, "broadcast", {EmitZero(x, nullptr, type)}, "dimensions={}"),
           a2});
      // V J: columns p and q.
      const std::string vp = slice_spread(vec, pp, false);
      const std::string vq = turned(slice_spread(vec, qq, false), d);
      const std::string v2 =
          op_(s, "select",
              {col_p, rotate(vp, vq, true),
               op_(s, "select", {col_q, rotate(vp, vq, false), vec})});
      // Converged when, in every matrix, the off-diagonal squares sum to at
      // most eps^2 times all squares.
      const std::string squares = MagnitudeSquared(x, nullptr, a3, s);
      const std::string diagonal =
          op_(pred, "compare", {all_rows, all_cols}, "direction=EQ");
      const std::string off =
          op_(s_real, "select",
              {diagonal,
               op_(s_real, "broadcast", {EmitZero(x, nullptr, real)},
                   "dimensions={}"),
               squares});
      const std::string sum_dims =
          absl::StrFormat("dimensions={%d,%d}, to_apply=%%%s", nb, nb + 1,
                          AddComputation(real));
      const std::string off_sum =
          op_(each_real, "reduce", {off, EmitZero(x, nullptr, real)}, sum_dims);
      const std::string all_sum = op_(
          each_real, "reduce", {squares, EmitZero(x, nullptr, real)}, sum_dims);
      const char* eps2 = real == PrimitiveType::kF32 ? "1.4210855e-14"
                                                     : "4.930380657631324e-32";
      const std::string small =
          op_(each_pred, "compare",
              {off_sum, op_(each_real, "multiply", {all_sum, scalar(eps2)})},
              "direction=LE");
      const std::string converged =
          nb == 0 ? op_(flag, "reshape", {small})
                  : op_(flag, "reduce",
                        {small, EmitLine(x, nullptr, flag, "constant", "true")},
                        absl::StrFormat(
                            "dimensions=%s, to_apply=%%%s", Braced(batch_dims),
                            ScalarComputation(PrimitiveType::kPred, "and")));
      MarkRoot(
          x,
          op_(state, "tuple",
              {op_(s32, "add", {i, EmitLine(x, nullptr, s32, "constant", "1")}),
               a3, v2, converged, pt, qt}));
    }
    const std::string body_name = Finish(&body);
    const std::string loop = Emit(
        b, &op, state, "while",
        {Emit(b, &op, state, "tuple",
              {EmitLine(b, &op, s32, "constant", "0"), hermitian, eye,
               EmitLine(b, &op, flag, "constant", "false"), p_table, q_table})},
        absl::StrCat("condition=%", cond_name, ", body=%", body_name));
    a_final = Emit(b, &op, s, "get-tuple-element", {loop}, "index=1");
    v_final = Emit(b, &op, s, "get-tuple-element", {loop}, "index=2");
  }
  // The eigenvalues (the diagonal) ascending, their vectors' columns along:
  // sorted along the columns with each column's value as the key.
  const std::string diagonal_values =
      Emit(b, &op, values, "reduce",
           {Emit(b, &op, s_real, "select",
                 {on_diagonal,
                  complex ? Emit(b, &op, s_real, "real", {a_final}) : a_final,
                  EmitZeros(b, &op, s_real)}),
            EmitZero(b, &op, real)},
           absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                           AddComputation(real)));
  std::vector<int64_t> key_dims = batch_dims;
  key_dims.push_back(nb + 1);
  const std::string keys = Emit(b, &op, s_real, "broadcast", {diagonal_values},
                                absl::StrCat("dimensions=", Braced(key_dims)));
  Builder less;
  less.computation.name = NewName("syevd_less");
  {
    const Shape key(real, {});
    const std::string k0 = EmitLine(&less, nullptr, key, "parameter", "0");
    const std::string k1 = EmitLine(&less, nullptr, key, "parameter", "1");
    EmitLine(&less, nullptr, Shape(type, {}), "parameter", "2");
    EmitLine(&less, nullptr, Shape(type, {}), "parameter", "3");
    MarkRoot(&less, Emit(&less, nullptr, Shape(PrimitiveType::kPred, {}),
                         "compare", {k0, k1}, "direction=LT"));
  }
  const std::string less_name = Finish(&less);
  const Shape sorted_pair = Shape::Tuple({s_real, s});
  const std::string sorted =
      Emit(b, &op, sorted_pair, "sort", {keys, v_final},
           absl::StrFormat("dimensions={%d}, is_stable=true, to_apply=%%%s",
                           nb + 1, less_name));
  const std::string sorted_keys =
      Emit(b, &op, s_real, "get-tuple-element", {sorted}, "index=0");
  const std::string vectors =
      Emit(b, &op, s, "get-tuple-element", {sorted}, "index=1");
  // Every row of the sorted keys holds the values: the first one.
  std::vector<int64_t> first_row = batch;
  first_row.insert(first_row.end(), {1, n});
  std::vector<std::string> limits;
  for (int64_t d : batch) limits.push_back(absl::StrCat("[0:", d, "]"));
  limits.push_back(n > 0 ? "[0:1]" : "[0:0]");
  limits.push_back(absl::StrCat("[0:", n, "]"));
  if (n == 0) first_row[nb] = 0;
  const std::string sorted_values =
      Emit(b, &op, values, "reshape",
           {Emit(b, &op, Shape(real, first_row), "slice", {sorted_keys},
                 absl::StrCat("slice={", absl::StrJoin(limits, ", "), "}"))});
  return Define(b, op,
                {Value{vectors, s}, Value{sorted_values, values},
                 Value{EmitZeros(b, &op, info), info}});
}

}  // namespace pjrt::hlo::stablehlo_internal
