// The StableHLO translator's batch_norm_training, batch_norm_inference and
// batch_norm_grad: checked here (messages name the StableHLO op), then
// HLO's batch-norm-* ops, which the shared passes decompose as the spec
// does (hlo/passes.h).
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
  // The HLO op, which every backend's shared passes expand
  // (hlo/passes.h): one decomposition for both input formats.
  const std::string attributes = absl::StrFormat(
      "epsilon=%s, feature_index=%d", FloatText(epsilon, true), feature);
  if (!training && !grad) {
    return Define(
        b, op,
        {Value{Emit(b, &op, x, "batch-norm-inference", Names(in), attributes),
               x}});
  }
  const std::string tuple = Emit(
      b, &op, Shape::Tuple({x, per_feature, per_feature}),
      grad ? "batch-norm-grad" : "batch-norm-training", Names(in), attributes);
  std::vector<Value> results;
  for (int i = 0; i < 3; ++i) {
    const Shape& shape = i == 0 ? x : per_feature;
    results.push_back(Value{Emit(b, &op, shape, "get-tuple-element", {tuple},
                                 absl::StrCat("index=", i)),
                            shape});
  }
  return Define(b, op, results);
}

}  // namespace pjrt::hlo::stablehlo_internal
