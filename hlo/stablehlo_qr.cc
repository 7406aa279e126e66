// The StableHLO translator's QR calls, as JAX lowers jnp.linalg.qr:
// lapack_?geqrf_ffi and cusolver_geqrf_ffi (Householder QR: R above the
// diagonal, the reflectors below it and their scales tau) and
// lapack_?orgqr_ffi / lapack_?ungqr_ffi / cusolver_orgqr_ffi (Q from the
// reflectors), each an HLO loop over the columns doing what LAPACK's
// unblocked ?geqr2 and ?org2r do. hipSOLVER's names are the same calls.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {
namespace {

// The type a message names: the call's, or any a solver takes.
std::string TypeWords(bool solver, PrimitiveType type) {
  if (solver) return "f32, f64, c64 or c128";
  return std::string(PrimitiveTypeName(type));
}

}  // namespace

bool Translator::IsLapackQrTarget(absl::string_view target) {
  if (target == "cusolver_geqrf_ffi" || target == "cusolver_orgqr_ffi" ||
      target == "hipsolver_geqrf_ffi" || target == "hipsolver_orgqr_ffi") {
    return true;
  }
  if (target.size() != 17 || !absl::StartsWith(target, "lapack_") ||
      !absl::EndsWith(target, "_ffi")) {
    return false;
  }
  const absl::string_view routine = target.substr(7, 6);
  return routine == "sgeqrf" || routine == "dgeqrf" || routine == "cgeqrf" ||
         routine == "zgeqrf" || routine == "sorgqr" || routine == "dorgqr" ||
         routine == "cungqr" || routine == "zungqr" || routine == "sgeqp3" ||
         routine == "dgeqp3" || routine == "cgeqp3" || routine == "zgeqp3";
}

absl::Status Translator::LapackQr(Builder* b, const Operation& op,
                                  absl::string_view target,
                                  const std::vector<Value>& in) {
  UseFfiAttributes(op);
  // LAPACK's names carry the type; cuSOLVER's and hipSOLVER's take the
  // operand's.
  const bool solver = !absl::StartsWith(target, "lapack_");
  // geqp3 (QR with column pivoting) takes and gives the pivots too.
  const bool pivoted = absl::StrContains(target, "geqp3");
  const bool factor = pivoted || absl::StrContains(target, "geqrf");
  const PrimitiveType type =
      LinalgCallType(target, in.empty() ? nullptr : &in[0].shape);
  const size_t operands = factor && !pivoted ? 1 : 2;
  bool fits = in.size() == operands && in[0].shape.IsArray() &&
              in[0].shape.rank() >= 2 && in[0].shape.element_type() == type;
  std::vector<Shape> want;
  if (fits) {
    const Shape& a = in[0].shape;
    const int64_t nb = a.rank() - 2;
    std::vector<int64_t> tau(a.dimensions().begin(),
                             a.dimensions().begin() + nb);
    if (pivoted) {
      std::vector<int64_t> columns = tau;
      columns.push_back(a.dimensions(nb + 1));
      const Shape jpvt(PrimitiveType::kS32, columns);
      fits = in[1].shape == jpvt;
      tau.push_back(std::min(a.dimensions(nb), a.dimensions(nb + 1)));
      want = {a, jpvt, Shape(type, tau)};
    } else if (factor) {
      tau.push_back(std::min(a.dimensions(nb), a.dimensions(nb + 1)));
      want = {a, Shape(type, tau)};
    } else {
      // tau: [..., k] with k <= n <= m.
      const Shape& t = in[1].shape;
      fits = t.IsArray() && t.rank() == nb + 1 && t.element_type() == type &&
             std::equal(tau.begin(), tau.end(), t.dimensions().begin()) &&
             t.dimensions(nb) <= a.dimensions(nb + 1) &&
             a.dimensions(nb + 1) <= a.dimensions(nb);
      want = {a};
    }
  }
  if (!fits || op.result_types != want) {
    return Invalid(
        op, absl::StrFormat(
                "%s takes %s and gives %s of its shape; got %d operand(s)%s",
                target,
                pivoted  ? absl::StrCat("one ", TypeWords(solver, type),
                                        " matrix [..., m, n] and s32 pivots "
                                         "[..., n]")
                : factor ? absl::StrCat("one ", TypeWords(solver, type),
                                        " matrix [..., m, n]")
                         : absl::StrCat("reflectors [..., m, n] (n <= m) and "
                                        "their scales [..., k] (k <= n) of ",
                                        TypeWords(solver, type)),
                pivoted  ? "the factors, pivots and tau"
                : factor ? "the factors and tau"
                         : "Q",
                in.size(), FirstOperandText(in)));
  }
  if (NoResultElements(op)) return DefineZeros(b, op);
  if (pivoted) {
    Value jpvt = in[1];
    auto [factors, tau] = Geqrf(b, op, in[0], &jpvt);
    return Define(b, op, {factors, jpvt, tau});
  }
  if (factor) {
    auto [factors, tau] = Geqrf(b, op, in[0]);
    return Define(b, op, {factors, tau});
  }
  return Define(b, op, {Orgqr(b, op, in[0], in[1])});
}

// The pieces both loops use, written into one computation.
struct Translator::QrStep {
  Translator* t;
  Builder* x;
  Shape s;  // the matrix
  int64_t nb, m, n;
  std::vector<int64_t> batch;
  PrimitiveType type, real;
  std::string zero;  // s32 0

  std::string Op(const Shape& shape, absl::string_view opcode,
                 const std::vector<std::string>& operands,
                 absl::string_view attributes = "") {
    return t->Emit(x, nullptr, shape, opcode, operands, attributes);
  }
  std::string Constant(PrimitiveType ty, absl::string_view text) {
    return t->EmitLine(x, nullptr, Shape(ty, {}), "constant", text);
  }
  std::string Spread(const std::string& v, const Shape& to,
                     std::vector<int64_t> extra) {
    std::vector<int64_t> d = FirstDimensions(nb);
    d.insert(d.end(), extra.begin(), extra.end());
    return Op(to, "broadcast", {v}, absl::StrCat("dimensions=", Braced(d)));
  }
  std::string Full(const std::string& scalar, const Shape& to) {
    return Op(to, "broadcast", {scalar}, "dimensions={}");
  }
  Shape Column() const {
    std::vector<int64_t> d = batch;
    d.push_back(m);
    return Shape(type, d);
  }
  Shape Row() const {
    std::vector<int64_t> d = batch;
    d.push_back(n);
    return Shape(type, d);
  }
  Shape Each(PrimitiveType ty) const { return Shape(ty, batch); }
  // Column k of `mat`: [..., m].
  std::string ColumnAt(const std::string& mat, const std::string& k) {
    std::vector<int64_t> sizes = batch;
    sizes.insert(sizes.end(), {m, 1});
    std::vector<std::string> ops = {mat};
    for (int64_t i = 0; i < nb; ++i) ops.push_back(zero);
    ops.push_back(zero);
    ops.push_back(k);
    return Op(Column(), "reshape",
              {Op(Shape(type, sizes), "dynamic-slice", ops,
                  absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
  }
  // Element k of a [..., len] vector along its last dimension: [...].
  std::string ElementAt(const std::string& v, const std::string& k) {
    std::vector<int64_t> sizes = batch;
    sizes.push_back(1);
    std::vector<std::string> ops = {v};
    for (int64_t i = 0; i < nb; ++i) ops.push_back(zero);
    ops.push_back(k);
    return Op(Each(type), "reshape",
              {Op(Shape(type, sizes), "dynamic-slice", ops,
                  absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
  }
  std::string Conj(const std::string& v, const Shape& shape) {
    return t->Conjugate(x, nullptr, v, shape);
  }
  // mat - scale * v w^T on the columns `columns` selects: w = v^H mat.
  std::string Reflect(const std::string& mat, const std::string& v,
                      const std::string& scale, const std::string& columns) {
    const std::string vv = Spread(Conj(v, Column()), s, {nb});
    const std::string w =
        Op(Row(), "reduce",
           {Op(s, "multiply", {vv, mat}), t->EmitZero(x, nullptr, type)},
           absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                           t->AddComputation(type)));
    const std::string update =
        Op(s, "multiply",
           {Spread(scale, s, {}),
            Op(s, "multiply", {Spread(v, s, {nb}), Spread(w, s, {nb + 1})})});
    return Op(s, "select", {columns, Op(s, "subtract", {mat, update}), mat});
  }
};

std::pair<Value, Value> Translator::Geqrf(Builder* b, const Operation& op,
                                          const Value& a, Value* jpvt) {
  const Shape& s = a.shape;
  const int64_t nb = s.rank() - 2;
  const int64_t m = s.dimensions(nb), n = s.dimensions(nb + 1);
  const int64_t r = std::min(m, n);
  const PrimitiveType type = s.element_type(), real = RealPartType(type);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  std::vector<int64_t> tau_dims = batch;
  tau_dims.push_back(r);
  const Shape tau(type, tau_dims);
  const Shape s32(PrimitiveType::kS32, {});
  const bool pivoting = jpvt != nullptr;
  std::string start = a.name, start_jpvt, start_fixed;
  if (pivoting) {
    std::tie(start, start_jpvt, start_fixed) = FixColumns(b, op, a, *jpvt);
    if (r == 0) {
      *jpvt = Value{start_jpvt, jpvt->shape};
      return {Value{start, s}, Value{EmitZeros(b, &op, tau), tau}};
    }
  }
  if (r == 0) {
    return {a, Value{EmitZeros(b, &op, tau), tau}};
  }
  const Shape each_s32(PrimitiveType::kS32, batch);
  const Shape state = pivoting
                          ? Shape::Tuple({s32, s, tau, jpvt->shape, each_s32})
                          : Shape::Tuple({s32, s, tau});
  const std::string cond_name = CountingCondition(state, r, "geqrf_cond");
  Builder body;
  body.computation.name = NewName("geqrf_body");
  QrStep q{this, &body, s, nb, m, n, batch, type, real, ""};
  {
    const std::string p = EmitLine(&body, nullptr, state, "parameter", "0");
    const std::string k = q.Op(s32, "get-tuple-element", {p}, "index=0");
    std::string mat = q.Op(s, "get-tuple-element", {p}, "index=1");
    const std::string taus = q.Op(tau, "get-tuple-element", {p}, "index=2");
    q.zero = q.Constant(PrimitiveType::kS32, "0");
    // ?geqp3: the free column (past the fixed ones) with the longest part
    // from row k down comes to k first, the first of equals.
    std::string pivots;
    if (pivoting) {
      pivots = q.Op(jpvt->shape, "get-tuple-element", {p}, "index=3");
      const std::string fixed =
          q.Op(each_s32, "get-tuple-element", {p}, "index=4");
      const Shape index = s.WithElementType(PrimitiveType::kS32);
      const Shape s_real = s.WithElementType(real);
      const Shape row_real(real, [&] {
        std::vector<int64_t> d = batch;
        d.push_back(n);
        return d;
      }());
      const Shape row_index = row_real.WithElementType(PrimitiveType::kS32);
      const Shape row_pred = row_real.WithElementType(PrimitiveType::kPred);
      const std::string lower_rows =
          q.Op(s.WithElementType(PrimitiveType::kPred), "compare",
               {q.Op(index, "iota", {}, absl::StrCat("iota_dimension=", nb)),
                q.Full(k, index)},
               "direction=GE");
      const std::string lengths =
          q.Op(row_real, "reduce",
               {q.Op(s_real, "select",
                     {lower_rows, MagnitudeSquared(&body, nullptr, mat, s),
                      EmitZeros(&body, nullptr, s_real)}),
                EmitZero(&body, nullptr, real)},
               absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                               AddComputation(real)));
      const std::string columns =
          q.Op(row_index, "iota", {}, absl::StrCat("iota_dimension=", nb));
      const std::string candidate = q.Op(
          row_pred, "compare", {columns, q.Full(k, row_index)}, "direction=GE");
      const std::string masked =
          q.Op(row_real, "select",
               {candidate, lengths, q.Full(q.Constant(real, "-1"), row_real)});
      const std::string longest =
          q.Op(q.Each(real), "reduce", {masked, q.Constant(real, "-inf")},
               absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                               MaxComputation(real)));
      const std::string first = q.Op(
          each_s32, "reduce",
          {q.Op(
               row_index, "select",
               {q.Op(row_pred, "compare",
                     {masked, q.Spread(longest, row_real, {})}, "direction=EQ"),
                columns,
                q.Full(q.Constant(PrimitiveType::kS32, absl::StrCat(n)),
                       row_index)}),
           q.Constant(PrimitiveType::kS32, absl::StrCat(n))},
          absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                          MinComputation(PrimitiveType::kS32)));
      const std::string ks = q.Full(k, each_s32);
      const std::string chosen =
          q.Op(each_s32, "select",
               {q.Op(q.Each(PrimitiveType::kPred), "compare", {ks, fixed},
                     "direction=LT"),
                ks, first});
      std::tie(mat, pivots) = SwapColumns(&body, s, mat, pivots, ks, chosen);
    }
    const Shape column = q.Column();
    const Shape rows_index = column.WithElementType(PrimitiveType::kS32);
    const Shape rows_pred = column.WithElementType(PrimitiveType::kPred);
    const std::string rows =
        q.Op(rows_index, "iota", {}, absl::StrCat("iota_dimension=", nb));
    const std::string kr = q.Full(k, rows_index);
    const std::string col = q.ColumnAt(mat, k);
    const std::string below =
        q.Op(rows_pred, "compare", {rows, kr}, "direction=GT");
    const std::string x_below =
        q.Op(column, "select",
             {below, col, q.Full(EmitZero(&body, nullptr, type), column)});
    const Shape each = q.Each(type), each_real = q.Each(real);
    const Shape column_real = column.WithElementType(real);
    // |x below|^2 and alpha = a[k, k].
    const std::string squares =
        IsComplex(type) ? q.Op(column_real, "real",
                               {q.Op(column, "multiply",
                                     {x_below, q.Conj(x_below, column)})})
                        : q.Op(column, "multiply", {x_below, x_below});
    const std::string norm2 =
        q.Op(each_real, "reduce", {squares, EmitZero(&body, nullptr, real)},
             absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                             AddComputation(real)));
    // alpha: the column's element k.
    const std::string alpha_k =
        q.Op(each, "reduce",
             {q.Op(column, "select",
                   {q.Op(rows_pred, "compare", {rows, kr}, "direction=EQ"), col,
                    q.Full(EmitZero(&body, nullptr, type), column)}),
              EmitZero(&body, nullptr, type)},
             absl::StrFormat("dimensions={%d}, to_apply=%%%s", nb,
                             AddComputation(type)));
    const std::string alphr =
        IsComplex(type) ? q.Op(each_real, "real", {alpha_k}) : alpha_k;
    const std::string alphi = IsComplex(type)
                                  ? q.Op(each_real, "imag", {alpha_k})
                                  : EmitZeros(&body, nullptr, each_real);
    const std::string zero_r = EmitZeros(&body, nullptr, each_real);
    const Shape each_pred(PrimitiveType::kPred, batch);
    // H = I where there is nothing to annihilate.
    const std::string identity =
        q.Op(each_pred, "and",
             {q.Op(each_pred, "compare", {norm2, zero_r}, "direction=EQ"),
              q.Op(each_pred, "compare", {alphi, zero_r}, "direction=EQ")});
    // beta = -sign(alphr) * sqrt(alphr^2 + alphi^2 + |x|^2).
    const std::string length =
        q.Op(each_real, "sqrt",
             {q.Op(each_real, "add",
                   {q.Op(each_real, "add",
                         {q.Op(each_real, "multiply", {alphr, alphr}),
                          q.Op(each_real, "multiply", {alphi, alphi})}),
                    norm2})});
    const std::string beta =
        q.Op(each_real, "select",
             {q.Op(each_pred, "compare", {alphr, zero_r}, "direction=GE"),
              q.Op(each_real, "negate", {length}), length});
    const std::string beta_t =
        IsComplex(type) ? q.Op(each, "complex", {beta, zero_r}) : beta;
    const std::string tau_value =
        IsComplex(type)
            ? q.Op(each, "complex",
                   {q.Op(each_real, "divide",
                         {q.Op(each_real, "subtract", {beta, alphr}), beta}),
                    q.Op(each_real, "divide",
                         {q.Op(each_real, "negate", {alphi}), beta})})
            : q.Op(each, "divide",
                   {q.Op(each, "subtract", {beta, alphr}), beta});
    const std::string one_t =
        q.Constant(type, IsComplex(type) ? "(1, 0)" : "1");
    // 1 / (alpha - beta), and 1 where H = I: alpha and beta are both 0
    // for a column of zeros, whose v would otherwise be 0 * inf.
    const std::string scale =
        q.Op(each, "select",
             {identity, q.Full(one_t, each),
              q.Op(each, "divide",
                   {q.Full(one_t, each),
                    q.Op(each, "subtract", {alpha_k, beta_t})})});
    const std::string zeros_t = EmitZeros(&body, nullptr, each);
    const std::string tau_k =
        q.Op(each, "select", {identity, zeros_t, tau_value});
    const std::string v_below =
        q.Op(column, "multiply", {x_below, q.Spread(scale, column, {})});
    // v: 1 at k, the scaled x below, 0 above.
    const std::string v =
        q.Op(column, "select",
             {q.Op(rows_pred, "compare", {rows, kr}, "direction=EQ"),
              q.Full(one_t, column),
              q.Op(column, "select",
                   {below, v_below,
                    q.Full(EmitZero(&body, nullptr, type), column)})});
    const Shape index = s.WithElementType(PrimitiveType::kS32);
    const Shape pred = s.WithElementType(PrimitiveType::kPred);
    const std::string all_rows =
        q.Op(index, "iota", {}, absl::StrCat("iota_dimension=", nb));
    const std::string all_cols =
        q.Op(index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
    const std::string ka = q.Full(k, index);
    // H^H = I - conj(tau) v v^H on the columns right of k.
    const std::string right =
        q.Op(pred, "compare", {all_cols, ka}, "direction=GT");
    const std::string reflected = q.Reflect(mat, v, q.Conj(tau_k, each), right);
    // Column k: beta on the diagonal, v below (both as they were for H = I).
    const std::string new_column =
        q.Op(column, "select",
             {q.Op(rows_pred, "compare", {rows, kr}, "direction=EQ"),
              q.Spread(q.Op(each, "select", {identity, alpha_k, beta_t}),
                       column, {}),
              q.Op(column, "select",
                   {below,
                    q.Op(column, "select",
                         {q.Spread(identity, rows_pred, {}), col, v_below}),
                    col})});
    const std::string mat2 =
        q.Op(s, "select",
             {q.Op(pred, "compare", {all_cols, ka}, "direction=EQ"),
              q.Spread(new_column, s, {nb}), reflected});
    std::vector<int64_t> one = batch;
    one.push_back(1);
    std::vector<std::string> update = {
        taus, q.Op(Shape(type, one), "reshape", {tau_k})};
    for (int64_t i = 0; i < nb; ++i) update.push_back(q.zero);
    update.push_back(k);
    const std::string taus2 = q.Op(tau, "dynamic-update-slice", update);
    std::vector<std::string> next = {
        q.Op(s32, "add", {k, q.Constant(PrimitiveType::kS32, "1")}), mat2,
        taus2};
    if (pivoting) {
      next.push_back(pivots);
      next.push_back(q.Op(each_s32, "get-tuple-element", {p}, "index=4"));
    }
    MarkRoot(&body, q.Op(state, "tuple", next));
  }
  const std::string body_name = Finish(&body);
  std::vector<std::string> initial = {EmitLine(b, &op, s32, "constant", "0"),
                                      start, EmitZeros(b, &op, tau)};
  if (pivoting) {
    initial.push_back(start_jpvt);
    initial.push_back(start_fixed);
  }
  const std::string loop =
      Emit(b, &op, state, "while", {Emit(b, &op, state, "tuple", initial)},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  if (pivoting) {
    *jpvt =
        Value{Emit(b, &op, jpvt->shape, "get-tuple-element", {loop}, "index=3"),
              jpvt->shape};
  }
  return {
      Value{Emit(b, &op, s, "get-tuple-element", {loop}, "index=1"), s},
      Value{Emit(b, &op, tau, "get-tuple-element", {loop}, "index=2"), tau}};
}

std::pair<std::string, std::string> Translator::SwapColumns(
    Builder* x, const Shape& s, const std::string& mat,
    const std::string& pivots, const std::string& k, const std::string& j) {
  const int64_t nb = s.rank() - 2;
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  // Column `at` ([...]) of `m` (shape `shape`, columns last), by a sum of
  // it alone, spread back over `shape`; where `at` is, as a predicate.
  const auto take = [&](const std::string& m, const Shape& shape,
                        const std::string& at) {
    const int64_t last = shape.rank() - 1;
    const Shape index = shape.WithElementType(PrimitiveType::kS32);
    const Shape pred = shape.WithElementType(PrimitiveType::kPred);
    const std::string where =
        Emit(x, nullptr, pred, "compare",
             {Emit(x, nullptr, index, "iota", {},
                   absl::StrCat("iota_dimension=", last)),
              Emit(x, nullptr, index, "broadcast", {at},
                   absl::StrCat("dimensions=", Braced(batch_dims)))},
             "direction=EQ");
    std::vector<int64_t> rest(shape.dimensions().begin(),
                              shape.dimensions().end() - 1);
    const Shape column(shape.element_type(), rest);
    const std::string sum =
        Emit(x, nullptr, column, "reduce",
             {Emit(x, nullptr, shape, "select",
                   {where, m, EmitZeros(x, nullptr, shape)}),
              EmitZero(x, nullptr, shape.element_type())},
             absl::StrFormat("dimensions={%d}, to_apply=%%%s", last,
                             AddComputation(shape.element_type())));
    return std::make_pair(
        Emit(x, nullptr, shape, "broadcast", {sum},
             absl::StrCat("dimensions=", Braced(FirstDimensions(last)))),
        where);
  };
  const auto swap = [&](const std::string& m, const Shape& shape) {
    const auto [at_k, is_k] = take(m, shape, k);
    const auto [at_j, is_j] = take(m, shape, j);
    return Emit(
        x, nullptr, shape, "select",
        {is_k, at_j, Emit(x, nullptr, shape, "select", {is_j, at_k, m})});
  };
  std::vector<int64_t> row = batch;
  row.push_back(s.dimensions(nb + 1));
  return {swap(mat, s), swap(pivots, Shape(PrimitiveType::kS32, row))};
}

std::tuple<std::string, std::string, std::string> Translator::FixColumns(
    Builder* b, const Operation& op, const Value& a, const Value& jpvt) {
  // ?geqp3's first pass: for j in order, a column whose jpvt is nonzero is
  // swapped to the front, after the columns fixed so far; jpvt becomes the
  // 1-based columns in their new places.
  const Shape& s = a.shape;
  const int64_t nb = s.rank() - 2, n = s.dimensions(nb + 1);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape each_s32(PrimitiveType::kS32, batch);
  const Shape& pivots = jpvt.shape;
  const std::string numbers = Emit(
      b, &op, pivots, "add",
      {Emit(b, &op, pivots, "iota", {}, absl::StrCat("iota_dimension=", nb)),
       Emit(b, &op, pivots, "broadcast",
            {EmitLine(b, &op, s32, "constant", "1")}, "dimensions={}")});
  if (n == 0) return {a.name, numbers, EmitZeros(b, &op, each_s32)};
  const Shape state = Shape::Tuple({s32, s, pivots, each_s32, pivots});
  const std::string cond_name = CountingCondition(state, n, "geqp3_fix_cond");
  Builder body;
  Builder* x = &body;
  {
    const std::vector<std::string> in_state =
        StartLoopBody(x, state, "geqp3_fix_body");
    const std::string &j = in_state[0], &mat = in_state[1], &piv = in_state[2],
                      &fixed = in_state[3], &given = in_state[4];
    const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
    std::vector<int64_t> one = batch;
    one.push_back(1);
    std::vector<std::string> at = {given};
    for (int64_t d = 0; d < nb; ++d) at.push_back(zero);
    at.push_back(j);
    const std::string given_j =
        Emit(x, nullptr, each_s32, "reshape",
             {Emit(x, nullptr, Shape(PrimitiveType::kS32, one), "dynamic-slice",
                   at, absl::StrCat("dynamic_slice_sizes=", Braced(one)))});
    const std::string is_fixed = Emit(
        x, nullptr, each_s32.WithElementType(PrimitiveType::kPred), "compare",
        {given_j, EmitZeros(x, nullptr, each_s32)}, "direction=NE");
    const std::string js =
        Emit(x, nullptr, each_s32, "broadcast", {j}, "dimensions={}");
    const auto [mat2, piv2] = SwapColumns(
        x, s, mat, piv, js,
        Emit(x, nullptr, each_s32, "select", {is_fixed, fixed, js}));
    const std::string fixed2 =
        Emit(x, nullptr, each_s32, "add",
             {fixed, Emit(x, nullptr, each_s32, "convert", {is_fixed})});
    MarkRoot(x, Emit(x, nullptr, state, "tuple",
                     {Emit(x, nullptr, s32, "add",
                           {j, EmitLine(x, nullptr, s32, "constant", "1")}),
                      mat2, piv2, fixed2, given}));
  }
  const std::string body_name = Finish(&body);
  const std::string loop =
      Emit(b, &op, state, "while",
           {Emit(b, &op, state, "tuple",
                 {EmitLine(b, &op, s32, "constant", "0"), a.name, numbers,
                  EmitZeros(b, &op, each_s32), jpvt.name})},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  return {Emit(b, &op, s, "get-tuple-element", {loop}, "index=1"),
          Emit(b, &op, pivots, "get-tuple-element", {loop}, "index=2"),
          Emit(b, &op, each_s32, "get-tuple-element", {loop}, "index=3")};
}

Value Translator::Orgqr(Builder* b, const Operation& op, const Value& a,
                        const Value& tau) {
  const Shape& s = a.shape;
  const int64_t nb = s.rank() - 2;
  const int64_t m = s.dimensions(nb), n = s.dimensions(nb + 1);
  const int64_t k = tau.shape.dimensions(nb);
  const PrimitiveType type = s.element_type(), real = RealPartType(type);
  const std::vector<int64_t> batch(s.dimensions().begin(),
                                   s.dimensions().begin() + nb);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape index = s.WithElementType(PrimitiveType::kS32);
  const Shape pred = s.WithElementType(PrimitiveType::kPred);
  // Columns k.. of the identity where no reflector reaches.
  const std::string rows0 =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb));
  const std::string cols0 =
      Emit(b, &op, index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
  const std::string one0 = EmitLine(b, &op, Shape(type, {}), "constant",
                                    IsComplex(type) ? "(1, 0)" : "1");
  const std::string eye =
      Emit(b, &op, s, "select",
           {Emit(b, &op, pred, "compare", {rows0, cols0}, "direction=EQ"),
            Emit(b, &op, s, "broadcast", {one0}, "dimensions={}"),
            EmitZeros(b, &op, s)});
  const std::string start = Emit(
      b, &op, s, "select",
      {Emit(b, &op, pred, "compare",
            {cols0, Emit(b, &op, index, "broadcast",
                         {EmitLine(b, &op, s32, "constant", absl::StrCat(k))},
                         "dimensions={}")},
            "direction=GE"),
       eye, a.name});
  if (k == 0) return Value{start, s};
  const Shape state = Shape::Tuple({s32, s, tau.shape});
  const std::string cond_name = CountingCondition(state, k, "orgqr_cond");
  Builder body;
  body.computation.name = NewName("orgqr_body");
  QrStep q{this, &body, s, nb, m, n, batch, type, real, ""};
  {
    const std::string p = EmitLine(&body, nullptr, state, "parameter", "0");
    const std::string j = q.Op(s32, "get-tuple-element", {p}, "index=0");
    const std::string mat = q.Op(s, "get-tuple-element", {p}, "index=1");
    const std::string taus =
        q.Op(tau.shape, "get-tuple-element", {p}, "index=2");
    q.zero = q.Constant(PrimitiveType::kS32, "0");
    // Reflector i = k - 1 - j, last first.
    const std::string i =
        q.Op(s32, "subtract",
             {q.Constant(PrimitiveType::kS32, absl::StrCat(k - 1)), j});
    const Shape column = q.Column();
    const Shape rows_index = column.WithElementType(PrimitiveType::kS32);
    const Shape rows_pred = column.WithElementType(PrimitiveType::kPred);
    const std::string rows =
        q.Op(rows_index, "iota", {}, absl::StrCat("iota_dimension=", nb));
    const std::string ir = q.Full(i, rows_index);
    const std::string at =
        q.Op(rows_pred, "compare", {rows, ir}, "direction=EQ");
    const std::string below =
        q.Op(rows_pred, "compare", {rows, ir}, "direction=GT");
    const std::string col = q.ColumnAt(mat, i);
    const std::string zero_t = EmitZero(&body, nullptr, type);
    const std::string one_t =
        q.Constant(type, IsComplex(type) ? "(1, 0)" : "1");
    const std::string v =
        q.Op(column, "select",
             {at, q.Full(one_t, column),
              q.Op(column, "select", {below, col, q.Full(zero_t, column)})});
    const Shape each = q.Each(type);
    const std::string tau_i = q.ElementAt(taus, i);
    const std::string all_cols =
        q.Op(index, "iota", {}, absl::StrCat("iota_dimension=", nb + 1));
    const std::string ia = q.Full(i, index);
    const std::string reflected = q.Reflect(
        mat, v, tau_i, q.Op(pred, "compare", {all_cols, ia}, "direction=GT"));
    // Column i: -tau v below, 1 - tau at i, zeros above.
    const std::string new_column = q.Op(
        column, "select",
        {at,
         q.Spread(q.Op(each, "subtract", {q.Full(one_t, each), tau_i}), column,
                  {}),
         q.Op(column, "select",
              {below,
               q.Op(column, "multiply",
                    {q.Spread(q.Op(each, "negate", {tau_i}), column, {}), col}),
               q.Full(zero_t, column)})});
    const std::string mat2 =
        q.Op(s, "select",
             {q.Op(pred, "compare", {all_cols, ia}, "direction=EQ"),
              q.Spread(new_column, s, {nb}), reflected});
    MarkRoot(&body,
             q.Op(state, "tuple",
                  {q.Op(s32, "add", {j, q.Constant(PrimitiveType::kS32, "1")}),
                   mat2, taus}));
  }
  const std::string body_name = Finish(&body);
  const std::string loop =
      Emit(b, &op, state, "while",
           {Emit(b, &op, state, "tuple",
                 {EmitLine(b, &op, s32, "constant", "0"), start, tau.name})},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  return Value{Emit(b, &op, s, "get-tuple-element", {loop}, "index=1"), s};
}

}  // namespace pjrt::hlo::stablehlo_internal
