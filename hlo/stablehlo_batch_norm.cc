// The StableHLO translator's batch_norm_training, batch_norm_inference and
// batch_norm_grad, as the spec decomposes them (the formulas of XLA's batch
// norm expander): sums over every dimension but the feature one, then
// element-wise ops with the per-feature values broadcast along it, in the
// operand's type.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

absl::StatusOr<double> Translator::FloatOf(const Operation& op,
                                           const Attribute& a,
                                           absl::string_view what) {
  double v = 0;
  if (a.kind == AttrKind::kFloat || a.kind == AttrKind::kInt) {
    if (absl::StartsWithIgnoreCase(a.text, "0x")) {
      // The bits of an f32 (or, with 16 digits, an f64).
      uint64_t bits = 0;
      if (absl::SimpleHexAtoi(a.text, &bits)) {
        if (a.text.size() > 10) {
          std::memcpy(&v, &bits, sizeof(v));
        } else {
          const uint32_t narrow = static_cast<uint32_t>(bits);
          float f = 0;
          std::memcpy(&f, &narrow, sizeof(f));
          v = f;
        }
        return v;
      }
    } else if (absl::SimpleAtod(a.text, &v)) {
      return v;
    }
  }
  return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                 absl::StrCat(op.name, ": ", what, " must be a number"));
}

absl::Status Translator::BatchNorm(Builder* b, const Operation& op,
                                   absl::string_view name) {
  const bool training = name == "batch_norm_training";
  const bool grad = name == "batch_norm_grad";
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, training ? 3 : 5));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* epsilon_attr,
                        RequireAttr(op, {"epsilon"}));
  PJRT_ASSIGN_OR_RETURN(double epsilon, FloatOf(op, *epsilon_attr, "epsilon"));
  PJRT_ASSIGN_OR_RETURN(int64_t feature,
                        Int(op, {"feature_index"}, std::nullopt));
  const Shape& x = in[0].shape;
  const PrimitiveType t = x.element_type();
  if (!x.IsArray() || !IsFloatingPoint(t)) {
    return Invalid(op, absl::StrCat("normalizes a floating-point tensor, not ",
                                    x.ToString()));
  }
  if (feature < 0 || feature >= x.rank()) {
    return Invalid(op, absl::StrFormat("feature_index %d is not a dimension "
                                       "of %s",
                                       feature, x.ToString()));
  }
  const int64_t features = x.dimensions(feature);
  const Shape per_feature(t, {features});
  for (size_t i = 1; i < in.size(); ++i) {
    // grad_output (batch_norm_grad's last operand) is shaped like the
    // operand; the others hold one value per feature.
    const Shape& want = grad && i == 4 ? x : per_feature;
    if (in[i].shape != want) {
      return Invalid(
          op, absl::StrFormat("operand %d is %s; with the operand "
                              "%s and feature_index %d it must be "
                              "%s",
                              i, in[i].shape.ToString(), x.ToString(), feature,
                              want.ToString()));
    }
  }
  // Elements per feature: the divisor of the means.
  const int64_t count = features == 0 ? 0 : x.ElementCount() / features;
  std::vector<int64_t> others;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != feature) others.push_back(d);
  }
  const bool wide = t == PrimitiveType::kF64;
  const auto scalar = [&](double v) {
    return EmitLine(b, &op, Shape(t, {}), "constant", FloatText(v, wide));
  };
  const auto full = [&](double v) {
    return Emit(b, &op, x, "broadcast", {scalar(v)}, "dimensions={}");
  };
  const auto along = [&](const std::string& v) {
    return Emit(b, &op, x, "broadcast", {v},
                absl::StrCat("dimensions={", feature, "}"));
  };
  const auto sum = [&](const std::string& v) {
    return Emit(b, &op, per_feature, "reduce", {v, scalar(0)},
                absl::StrCat("dimensions={", absl::StrJoin(others, ","),
                             "}, to_apply=%", AddComputation(t)));
  };
  const auto mean = [&](const std::string& v) {
    const std::string n =
        Emit(b, &op, per_feature, "broadcast",
             {scalar(static_cast<double>(count))}, "dimensions={}");
    return Emit(b, &op, per_feature, "divide", {sum(v), n});
  };
  const auto op2 = [&](absl::string_view opcode, const std::string& l,
                       const std::string& r) {
    return Emit(b, &op, x, opcode, {l, r});
  };
  const std::string& operand = in[0].name;
  if (grad) {
    const std::string &scale = in[1].name, &m = in[2].name,
                      &variance = in[3].name, &dy = in[4].name;
    const std::string centered = op2("subtract", operand, along(m));
    const std::string var_eps = op2("add", along(variance), full(epsilon));
    const std::string stddev = Emit(b, &op, x, "sqrt", {var_eps});
    const std::string normalized = op2("divide", centered, stddev);
    const std::string n = full(static_cast<double>(count));
    const std::string i1 = op2("multiply", dy, n);
    const std::string i2 = along(sum(dy));
    const std::string i3 = along(sum(op2("multiply", dy, centered)));
    const std::string i4 = op2("multiply", i3, centered);
    const std::string i5 = op2("divide", i4, var_eps);
    const std::string i6 = op2("subtract", op2("subtract", i1, i2), i5);
    const std::string grad_operand = op2(
        "multiply", op2("divide", op2("divide", along(scale), stddev), n), i6);
    const std::string grad_scale = sum(op2("multiply", dy, normalized));
    const std::string grad_offset = sum(dy);
    return Define(b, op,
                  {Value{grad_operand, x}, Value{grad_scale, per_feature},
                   Value{grad_offset, per_feature}});
  }
  std::string m, variance;
  if (training) {
    m = mean(operand);
    const std::string centered = op2("subtract", operand, along(m));
    variance = mean(op2("multiply", centered, centered));
  } else {
    m = in[3].name;
    variance = in[4].name;
  }
  const std::string centered = op2("subtract", operand, along(m));
  const std::string stddev =
      Emit(b, &op, x, "sqrt", {op2("add", along(variance), full(epsilon))});
  const std::string normalized = op2("divide", centered, stddev);
  const std::string result = op2(
      "add", op2("multiply", along(in[1].name), normalized), along(in[2].name));
  if (!training) return Define(b, op, {Value{result, x}});
  return Define(
      b, op,
      {Value{result, x}, Value{m, per_feature}, Value{variance, per_feature}});
}

}  // namespace pjrt::hlo::stablehlo_internal
