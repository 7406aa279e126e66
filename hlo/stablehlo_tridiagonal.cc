// The StableHLO translator's tridiagonal solves, as JAX lowers
// lax.linalg.tridiagonal_solve: lapack_?gtsv_ffi for CPUs (the solution and
// info, with the three diagonals LAPACK overwrites) and cusparse_gtsv2_ffi /
// hipsparse_gtsv2_ffi for GPUs (the solution only). Both are computed as
// LAPACK's ?gtsv does: Gaussian elimination with partial pivoting between
// adjacent rows (a row swap brings a second superdiagonal) in an HLO loop
// over the rows, then back substitution in a second loop.
//
// The diagonals are JAX's: dl, d and du of one length m, dl[0] and du[m-1]
// unused; row i of the matrix is dl[i], d[i], du[i] at columns i-1, i, i+1.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

bool Translator::IsTridiagonalTarget(absl::string_view target) {
  if (target == "cusparse_gtsv2_ffi" || target == "hipsparse_gtsv2_ffi") {
    return true;
  }
  return target.size() == 16 && absl::StartsWith(target, "lapack_") &&
         LapackType(target[7]) != PrimitiveType::kInvalid &&
         target.substr(8) == "gtsv_ffi";
}

absl::Status Translator::Gtsv(Builder* b, const Operation& op,
                              absl::string_view target,
                              const std::vector<Value>& in) {
  UseFfiAttributes(op);
  const bool lapack = absl::StartsWith(target, "lapack_");
  const PrimitiveType type =
      LinalgCallType(target, in.empty() ? nullptr : &in[0].shape);
  bool fits = in.size() == 4 && type != PrimitiveType::kInvalid;
  for (size_t i = 0; fits && i < 4; ++i) {
    fits = in[i].shape.IsArray() && in[i].shape.element_type() == type;
  }
  const Shape& rhs = fits ? in[3].shape : Shape();
  if (fits) {
    // Diagonals [..., m]; right-hand sides [..., m, n].
    fits = rhs.rank() >= 2;
    for (size_t i = 0; fits && i < 3; ++i) {
      const Shape& diagonal = in[i].shape;
      fits = diagonal.rank() == rhs.rank() - 1 &&
             std::equal(diagonal.dimensions().begin(),
                        diagonal.dimensions().end(), rhs.dimensions().begin());
    }
  }
  if (!fits) {
    return Invalid(
        op, absl::StrFormat("%s takes the diagonals dl, d, du [..., m] and "
                            "right-hand sides b [..., m, n], all %s; got %d "
                            "operand(s)%s",
                            target,
                            lapack ? std::string(PrimitiveTypeName(type))
                                   : "f32, f64, c64 or c128",
                            in.size(), FirstOperandText(in)));
  }
  const int64_t nb = rhs.rank() - 2;
  const int64_t m = rhs.dimensions(nb), n = rhs.dimensions(nb + 1);
  const std::vector<int64_t> batch(rhs.dimensions().begin(),
                                   rhs.dimensions().begin() + nb);
  const Shape diag = in[0].shape;
  const Shape info(PrimitiveType::kS32, batch);
  const std::vector<Shape> want =
      lapack ? std::vector<Shape>{diag, diag, diag, rhs, info}
             : std::vector<Shape>{rhs};
  PJRT_RETURN_IF_ERROR(ExpectResults(op, target, rhs, want));
  if (NoResultElements(op)) return DefineZeros(b, op);
  if (m == 0) {
    if (!lapack) return Define(b, op, {in[3]});
    return Define(
        b, op,
        {in[0], in[1], in[2], in[3], Value{EmitZeros(b, &op, info), info}});
  }
  const PrimitiveType real = RealPartType(type);
  const bool complex = IsComplex(type);
  const Shape s32(PrimitiveType::kS32, {});
  const Shape each(type, batch), each_pred(PrimitiveType::kPred, batch);
  const Shape each_real(real, batch);
  const std::vector<int64_t> batch_dims = FirstDimensions(nb);
  // lower[i] = A[i + 1, i] (dl moved down one) and du with du[m-1] = 0:
  // LAPACK's DL and DU, padded to m.
  std::vector<std::string> padding(nb, "0_0");
  padding.push_back("0_1");
  std::vector<std::string> limits;
  for (int64_t d : batch) limits.push_back(absl::StrCat("[0:", d, "]"));
  const auto last_slice = [&](int64_t from, int64_t to) {
    std::vector<std::string> l = limits;
    l.push_back(absl::StrCat("[", from, ":", to, "]"));
    return absl::StrCat("slice={", absl::StrJoin(l, ", "), "}");
  };
  const Shape shorter(type, [&] {
    std::vector<int64_t> d = batch;
    d.push_back(m - 1);
    return d;
  }());
  const std::string pad = absl::StrCat("padding=", absl::StrJoin(padding, "x"));
  const std::string lower =
      Emit(b, &op, diag, "pad",
           {Emit(b, &op, shorter, "slice", {in[0].name}, last_slice(1, m)),
            EmitZero(b, &op, type)},
           pad);
  const std::string upper =
      Emit(b, &op, diag, "pad",
           {Emit(b, &op, shorter, "slice", {in[2].name}, last_slice(0, m - 1)),
            EmitZero(b, &op, type)},
           pad);
  // |x| as ?gtsv compares pivots: |re| + |im| for complex.
  const auto magnitude = [&](Builder* x, const std::string& v) {
    if (!complex) return Emit(x, nullptr, each_real, "abs", {v});
    return Emit(x, nullptr, each_real, "add",
                {Emit(x, nullptr, each_real, "abs",
                      {Emit(x, nullptr, each_real, "real", {v})}),
                 Emit(x, nullptr, each_real, "abs",
                      {Emit(x, nullptr, each_real, "imag", {v})})});
  };
  // Element k of a [..., m] vector: [...]; rows k.. of b: [..., rows, n].
  const auto at = [&](Builder* x, const std::string& v, const std::string& k,
                      const std::string& zero) {
    std::vector<int64_t> sizes = batch;
    sizes.push_back(1);
    std::vector<std::string> operands = {v};
    for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
    operands.push_back(k);
    return Emit(x, nullptr, each, "reshape",
                {Emit(x, nullptr, Shape(type, sizes), "dynamic-slice", operands,
                      absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))});
  };
  const auto rows_at = [&](Builder* x, const std::string& v, int64_t count,
                           const std::string& k, const std::string& zero) {
    std::vector<int64_t> sizes = batch;
    sizes.insert(sizes.end(), {count, n});
    std::vector<std::string> operands = {v};
    for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
    operands.push_back(k);
    operands.push_back(zero);
    return Emit(x, nullptr, Shape(type, sizes), "dynamic-slice", operands,
                absl::StrCat("dynamic_slice_sizes=", Braced(sizes)));
  };
  const auto put = [&](Builder* x, const Shape& shape, const std::string& v,
                       const std::vector<std::string>& pieces,
                       const std::string& k, const std::string& zero) {
    // pieces: one [...] value per position k, k + 1, ... of the last
    // dimension.
    std::vector<int64_t> sizes = batch;
    sizes.push_back(static_cast<int64_t>(pieces.size()));
    std::vector<std::string> spread;
    std::vector<int64_t> one = batch;
    one.push_back(1);
    for (const std::string& p : pieces) {
      spread.push_back(Emit(x, nullptr, Shape(type, one), "reshape", {p}));
    }
    const std::string joined =
        spread.size() == 1
            ? spread[0]
            : Emit(x, nullptr, Shape(type, sizes), "concatenate", spread,
                   absl::StrCat("dimensions={", nb, "}"));
    std::vector<std::string> operands = {v, joined};
    for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
    operands.push_back(k);
    return Emit(x, nullptr, shape, "dynamic-update-slice", operands);
  };
  const auto spread_rows = [&](Builder* x, const std::string& v,
                               const Shape& to) {
    return Emit(x, nullptr, to, "broadcast", {v},
                absl::StrCat("dimensions=", Braced(batch_dims)));
  };
  const Shape row(type, [&] {
    std::vector<int64_t> d = batch;
    d.insert(d.end(), {1, n});
    return d;
  }());
  const Shape two_rows(type, [&] {
    std::vector<int64_t> d = batch;
    d.insert(d.end(), {2, n});
    return d;
  }());
  // The loop body being written, and an op in it.
  Builder* x = nullptr;
  const auto e = [&](const Shape& shape, absl::string_view opcode,
                     const std::vector<std::string>& operands,
                     absl::string_view attributes = "") {
    return Emit(x, nullptr, shape, opcode, operands, attributes);
  };
  // Elimination: (i, lower, d, upper, b, info), i = 0 .. m - 2.
  std::string l_final = lower, d_final = in[1].name, u_final = upper,
              b_final = in[3].name, info_final = EmitZeros(b, &op, info);
  if (m > 1) {
    const Shape state = Shape::Tuple({s32, diag, diag, diag, rhs, info});
    const std::string cond_name =
        CountingCondition(state, m - 1, "gtsv_elimination_cond");
    Builder body;
    x = &body;
    {
      const std::vector<std::string> in_state =
          StartLoopBody(x, state, "gtsv_elimination_body");
      const std::string &i = in_state[0], &lo = in_state[1], &dd = in_state[2],
                        &up = in_state[3], &bb = in_state[4],
                        &inf = in_state[5];
      const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
      const std::string i1 =
          e(s32, "add", {i, EmitLine(x, nullptr, s32, "constant", "1")});
      const std::string di = at(x, dd, i, zero), di1 = at(x, dd, i1, zero);
      const std::string li = at(x, lo, i, zero);
      const std::string ui = at(x, up, i, zero), ui1 = at(x, up, i1, zero);
      const std::string pair = rows_at(x, bb, 2, i, zero);
      const auto row_of = [&](int64_t r) {
        std::vector<std::string> l = limits;
        l.push_back(absl::StrCat("[", r, ":", r + 1, "]"));
        l.push_back(absl::StrCat("[0:", n, "]"));
        return e(row, "slice", {pair},
                 absl::StrCat("slice={", absl::StrJoin(l, ", "), "}"));
      };
      const std::string bi = row_of(0), bi1 = row_of(1);
      const std::string zeros_each = EmitZeros(x, nullptr, each);
      // Swap rows i and i + 1 where |d[i]| < |lower[i]|.
      const std::string swap =
          e(each_pred, "compare", {magnitude(x, di), magnitude(x, li)},
            "direction=LT");
      const std::string pivot_zero =
          e(each_pred, "and",
            {e(each_pred, "not", {swap}),
             e(each_pred, "compare", {di, zeros_each}, "direction=EQ")});
      const std::string one_each =
          AsTyped(x, nullptr,
                  e(each_real, "broadcast",
                    {EmitLine(x, nullptr, Shape(real, {}), "constant", "1")},
                    "dimensions={}"),
                  each);
      const std::string keep_fact =
          e(each, "select",
            {pivot_zero, zeros_each,
             e(each, "divide",
               {li, e(each, "select", {pivot_zero, one_each, di})})});
      const std::string swap_fact =
          e(each, "divide", {di, e(each, "select", {swap, li, one_each})});
      const auto mul = [&](const std::string& a, const std::string& c) {
        return e(each, "multiply", {a, c});
      };
      const auto sub = [&](const std::string& a, const std::string& c) {
        return e(each, "subtract", {a, c});
      };
      const auto pick = [&](const std::string& if_swap,
                            const std::string& if_not) {
        return e(each, "select", {swap, if_swap, if_not});
      };
      const std::string new_di = pick(li, di);
      const std::string new_di1 =
          pick(sub(ui, mul(swap_fact, di1)), sub(di1, mul(keep_fact, ui)));
      const std::string new_li = pick(ui1, zeros_each);
      const std::string new_ui = pick(di1, ui);
      const std::string new_ui1 =
          pick(e(each, "negate", {mul(swap_fact, ui1)}), ui1);
      const auto spread_each = [&](const std::string& v) {
        return spread_rows(x, v, row);
      };
      const std::string swap_rows =
          e(row.WithElementType(PrimitiveType::kPred), "broadcast", {swap},
            absl::StrCat("dimensions=", Braced(batch_dims)));
      const std::string new_bi = e(row, "select", {swap_rows, bi1, bi});
      const std::string new_bi1 =
          e(row, "select",
            {swap_rows,
             e(row, "subtract",
               {bi, e(row, "multiply", {spread_each(swap_fact), bi1})}),
             e(row, "subtract",
               {bi1, e(row, "multiply", {spread_each(keep_fact), bi})})});
      std::vector<std::string> b_operands = {
          bb, e(two_rows, "concatenate", {new_bi, new_bi1},
                absl::StrCat("dimensions={", nb, "}"))};
      for (int64_t d = 0; d < nb; ++d) b_operands.push_back(zero);
      b_operands.push_back(i);
      b_operands.push_back(zero);
      const std::string b2 = e(rhs, "dynamic-update-slice", b_operands);
      // info: the first zero pivot, 1-based.
      const std::string first = e(
          each_pred, "and",
          {pivot_zero, e(each_pred, "compare",
                         {inf, EmitZeros(x, nullptr, info)}, "direction=EQ")});
      const std::string info2 =
          e(info, "select",
            {first, e(info, "broadcast", {i1}, "dimensions={}"), inf});
      MarkRoot(x, e(state, "tuple",
                    {i1, put(x, diag, lo, {new_li}, i, zero),
                     put(x, diag, dd, {new_di, new_di1}, i, zero),
                     put(x, diag, up, {new_ui, new_ui1}, i, zero), b2, info2}));
    }
    const std::string body_name = Finish(&body);
    const std::string loop =
        Emit(b, &op, state, "while",
             {Emit(b, &op, state, "tuple",
                   {EmitLine(b, &op, s32, "constant", "0"), lower, in[1].name,
                    upper, in[3].name, info_final})},
             absl::StrCat("condition=%", cond_name, ", body=%", body_name));
    l_final = Emit(b, &op, diag, "get-tuple-element", {loop}, "index=1");
    d_final = Emit(b, &op, diag, "get-tuple-element", {loop}, "index=2");
    u_final = Emit(b, &op, diag, "get-tuple-element", {loop}, "index=3");
    b_final = Emit(b, &op, rhs, "get-tuple-element", {loop}, "index=4");
    info_final = Emit(b, &op, info, "get-tuple-element", {loop}, "index=5");
  }
  // info: m where the last pivot is zero, if none was before.
  const std::string last_zero =
      Emit(b, &op, each_pred, "and",
           {Emit(b, &op, each_pred, "compare",
                 {at(b, d_final,
                     EmitLine(b, &op, s32, "constant", absl::StrCat(m - 1)),
                     EmitLine(b, &op, s32, "constant", "0")),
                  EmitZeros(b, &op, each)},
                 "direction=EQ"),
            Emit(b, &op, each_pred, "compare",
                 {info_final, EmitZeros(b, &op, info)}, "direction=EQ")});
  info_final = Emit(b, &op, info, "select",
                    {last_zero,
                     Emit(b, &op, info, "broadcast",
                          {EmitLine(b, &op, s32, "constant", absl::StrCat(m))},
                          "dimensions={}"),
                     info_final});
  // Back substitution, i = m - 1 down to 0: x[i] = (b[i] - upper[i] x[i+1]
  // - lower[i] x[i+2]) / d[i], on b padded with two rows of zeros.
  std::vector<int64_t> padded_dims = batch;
  padded_dims.insert(padded_dims.end(), {m + 2, n});
  const Shape padded(type, padded_dims);
  std::vector<std::string> row_padding(nb, "0_0");
  row_padding.push_back("0_2");
  row_padding.push_back("0_0");
  const std::string start =
      Emit(b, &op, padded, "pad", {b_final, EmitZero(b, &op, type)},
           absl::StrCat("padding=", absl::StrJoin(row_padding, "x")));
  const Shape state = Shape::Tuple({s32, padded, diag, diag, diag});
  const std::string cond_name =
      CountingCondition(state, m, "gtsv_substitution_cond");
  Builder body;
  x = &body;
  {
    const std::vector<std::string> in_state =
        StartLoopBody(x, state, "gtsv_substitution_body");
    const std::string &j = in_state[0], &xs = in_state[1], &lo = in_state[2],
                      &dd = in_state[3], &up = in_state[4];
    const std::string zero = EmitLine(x, nullptr, s32, "constant", "0");
    const std::string i =
        e(s32, "subtract",
          {EmitLine(x, nullptr, s32, "constant", absl::StrCat(m - 1)), j});
    const std::string three = rows_at(x, xs, 3, i, zero);
    const auto row_of = [&](int64_t r) {
      std::vector<std::string> l = limits;
      l.push_back(absl::StrCat("[", r, ":", r + 1, "]"));
      l.push_back(absl::StrCat("[0:", n, "]"));
      return e(row, "slice", {three},
               absl::StrCat("slice={", absl::StrJoin(l, ", "), "}"));
    };
    const auto spread = [&](const std::string& v) {
      return spread_rows(x, at(x, v, i, zero), row);
    };
    const std::string solved =
        e(row, "divide",
          {e(row, "subtract",
             {e(row, "subtract",
                {row_of(0), e(row, "multiply", {spread(up), row_of(1)})}),
              e(row, "multiply", {spread(lo), row_of(2)})}),
           spread(dd)});
    std::vector<std::string> operands = {xs, solved};
    for (int64_t d = 0; d < nb; ++d) operands.push_back(zero);
    operands.push_back(i);
    operands.push_back(zero);
    MarkRoot(x,
             e(state, "tuple",
               {e(s32, "add", {j, EmitLine(x, nullptr, s32, "constant", "1")}),
                e(padded, "dynamic-update-slice", operands), lo, dd, up}));
  }
  const std::string body_name = Finish(&body);
  const std::string loop =
      Emit(b, &op, state, "while",
           {Emit(b, &op, state, "tuple",
                 {EmitLine(b, &op, s32, "constant", "0"), start, l_final,
                  d_final, u_final})},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name));
  std::vector<std::string> solution_limits = limits;
  solution_limits.push_back(absl::StrCat("[0:", m, "]"));
  solution_limits.push_back(absl::StrCat("[0:", n, "]"));
  const Value solution{
      Emit(b, &op, rhs, "slice",
           {Emit(b, &op, padded, "get-tuple-element", {loop}, "index=1")},
           absl::StrCat("slice={", absl::StrJoin(solution_limits, ", "), "}")),
      rhs};
  if (!lapack) return Define(b, op, {solution});
  // The diagonals as ?gtsv leaves them: U's diagonal in d, its first and
  // second superdiagonals in du and dl (dl[0] and du[m-1] untouched).
  const Shape one_long(type, [&] {
    std::vector<int64_t> d = batch;
    d.push_back(1);
    return d;
  }());
  const std::string along = absl::StrCat("dimensions={", nb, "}");
  const std::string dl_out = m == 1
                                 ? in[0].name
                                 : Emit(b, &op, diag, "concatenate",
                                        {Emit(b, &op, one_long, "slice",
                                              {in[0].name}, last_slice(0, 1)),
                                         Emit(b, &op, shorter, "slice",
                                              {l_final}, last_slice(0, m - 1))},
                                        along);
  const std::string du_out =
      m == 1 ? in[2].name
             : Emit(b, &op, diag, "concatenate",
                    {Emit(b, &op, shorter, "slice", {u_final},
                          last_slice(0, m - 1)),
                     Emit(b, &op, one_long, "slice", {in[2].name},
                          last_slice(m - 1, m))},
                    along);
  return Define(b, op,
                {Value{dl_out, diag}, Value{d_final, diag}, Value{du_out, diag},
                 solution, Value{info_final, info}});
}

}  // namespace pjrt::hlo::stablehlo_internal
