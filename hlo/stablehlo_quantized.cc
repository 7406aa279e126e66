// The StableHLO translator's quantized types (!quant.uniform): a quantized
// value is its storage integers in HLO (Value::quantization says what they
// stand for), and the spec's formulas become element-wise HLO around the
// ops that use them:
//
//   quantize(x)   = convert(round_nearest_even(clamp(min, x / scale + zp,
//                   max))) to the storage type
//   dequantize(q) = (convert(q) - zp) * scale, in the expressed type
//
// with one scale and zero point for the whole tensor, or one per index of
// the quantized dimension (a broadcast of a constant along it). Any op
// other than uniform_quantize, uniform_dequantize and a bitcast_convert to
// or from the storage type runs as the spec's dequantize_op_quantize: on
// the values its quantized operands express, its quantized results
// quantized.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {
namespace {

const mlir::Quantization* QuantizationOf(const mlir::Quantizations& qs,
                                         size_t i) {
  return i < qs.size() && qs[i].has_value() ? &*qs[i] : nullptr;
}

bool SameQuantization(const mlir::Quantization& a,
                      const mlir::Quantization& b) {
  return a.storage == b.storage && a.expressed == b.expressed &&
         a.storage_min == b.storage_min && a.storage_max == b.storage_max &&
         a.dimension == b.dimension && a.scales == b.scales &&
         a.zero_points == b.zero_points;
}

}  // namespace

absl::StatusOr<bool> Translator::Quantized(Builder* b, const Operation& op) {
  if (op.name == "stablehlo.uniform_quantize" ||
      op.name == "stablehlo.uniform_dequantize") {
    return true;
  }
  if (!op.operand_quantizations.empty() || !op.result_quantizations.empty()) {
    return true;
  }
  if (!quantized_values_ || op.name == "func.return" ||
      op.name == "stablehlo.return") {
    return false;
  }
  for (const mlir::ValueUse& use : op.operands) {
    PJRT_ASSIGN_OR_RETURN(Value v, Lookup(b, use));
    if (v.quantization.has_value()) return true;
  }
  return false;
}

absl::StatusOr<std::string> Translator::QuantizationParameter(
    Builder* b, const Operation& op, const mlir::Quantization& q,
    const Shape& shape, bool scales) {
  const PrimitiveType type = shape.element_type();
  const bool is_double = type == PrimitiveType::kF64;
  const auto text = [&](size_t i) {
    return scales ? FloatText(q.scales[i], is_double)
                  : absl::StrCat(q.zero_points[i]);
  };
  if (q.dimension < 0) {
    const std::string one =
        EmitLine(b, &op, Shape(type, {}), "constant", text(0));
    return Emit(b, &op, shape.WithElementType(type), "broadcast", {one},
                "dimensions={}");
  }
  if (q.dimension >= shape.rank() ||
      static_cast<int64_t>(q.scales.size()) != shape.dimensions(q.dimension)) {
    return ErrorAt(
        q.position, absl::StatusCode::kInvalidArgument,
        absl::StrFormat("%s: a tensor of %s quantized along dimension %d "
                        "needs a scale per index of it; it has %d",
                        op.name, shape.ToString(), q.dimension,
                        q.scales.size()));
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < q.scales.size(); ++i) values.push_back(text(i));
  const std::string each =
      EmitLine(b, &op, Shape(type, {static_cast<int64_t>(values.size())}),
               "constant", absl::StrCat("{", absl::StrJoin(values, ", "), "}"));
  return Emit(b, &op, shape.WithElementType(type), "broadcast", {each},
              absl::StrCat("dimensions={", q.dimension, "}"));
}

absl::StatusOr<Value> Translator::Dequantize(Builder* b, const Operation& op,
                                             const Value& v) {
  const mlir::Quantization& q = *v.quantization;
  const Shape shape = v.shape.WithElementType(q.expressed);
  PJRT_ASSIGN_OR_RETURN(std::string scales,
                        QuantizationParameter(b, op, q, shape, true));
  PJRT_ASSIGN_OR_RETURN(std::string zero_points,
                        QuantizationParameter(b, op, q, shape, false));
  const std::string x = Emit(b, &op, shape, "convert", {v.name});
  const std::string centred = Emit(b, &op, shape, "subtract", {x, zero_points});
  return Value{Emit(b, &op, shape, "multiply", {centred, scales}), shape};
}

absl::StatusOr<Value> Translator::Quantize(Builder* b, const Operation& op,
                                           const Value& x,
                                           const mlir::Quantization& q,
                                           const Shape& storage_shape) {
  if (x.shape.element_type() != q.expressed ||
      x.shape.dimensions() != storage_shape.dimensions()) {
    return Invalid(
        op, absl::StrFormat("quantizes %s values as %s ones of %s "
                            "in %s",
                            x.shape.ToString(), PrimitiveTypeName(q.expressed),
                            storage_shape.ToString(),
                            PrimitiveTypeName(q.storage)));
  }
  const Shape& shape = x.shape;
  PJRT_ASSIGN_OR_RETURN(std::string scales,
                        QuantizationParameter(b, op, q, shape, true));
  PJRT_ASSIGN_OR_RETURN(std::string zero_points,
                        QuantizationParameter(b, op, q, shape, false));
  const auto bound = [&](int64_t value) {
    const std::string one = EmitLine(b, &op, Shape(q.expressed, {}), "constant",
                                     absl::StrCat(value));
    return Emit(b, &op, shape, "broadcast", {one}, "dimensions={}");
  };
  const std::string lowest = bound(q.storage_min);
  const std::string highest = bound(q.storage_max);
  const std::string scaled = Emit(b, &op, shape, "divide", {x.name, scales});
  const std::string shifted = Emit(b, &op, shape, "add", {scaled, zero_points});
  const std::string clamped =
      Emit(b, &op, shape, "clamp", {lowest, shifted, highest});
  const std::string rounded =
      Emit(b, &op, shape, "round-nearest-even", {clamped});
  const Shape out = shape.WithElementType(q.storage);
  return Value{Emit(b, &op, out, "convert", {rounded}), out, q};
}

absl::Status Translator::QuantizedOp(Builder* b, const Operation& op) {
  quantized_values_ = true;  // from here on, look at every op's operands
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  // An operand's quantization is its value's; where the signature also
  // gives one, they must agree.
  for (size_t i = 0; i < in.size(); ++i) {
    const mlir::Quantization* typed =
        QuantizationOf(op.operand_quantizations, i);
    if (!op.has_operand_types) typed = nullptr;
    if (typed != nullptr && !in[i].quantization.has_value()) {
      return Invalid(op, absl::StrFormat("operand %d (%s) is not quantized, "
                                         "but its type is",
                                         i, op.operands[i].name));
    }
    if (typed != nullptr && !SameQuantization(*typed, *in[i].quantization)) {
      return Invalid(op, absl::StrFormat("operand %d (%s) is quantized "
                                         "otherwise than its type says",
                                         i, op.operands[i].name));
    }
  }
  const absl::string_view name = op.name;
  if (name == "func.call") {
    // The callee takes and gives the storage values.
    PJRT_RETURN_IF_ERROR(Op(b, op));
    PJRT_RETURN_IF_ERROR(CheckAttributesUsed(op));
    for (size_t i = 0; i < op.results.size(); ++i) {
      if (const mlir::Quantization* q =
              QuantizationOf(op.result_quantizations, i)) {
        b->values[op.results[i]].quantization = *q;
      }
    }
    return absl::OkStatus();
  }
  for (const Region& region : op.regions) {
    for (const mlir::Argument& a : region.arguments) {
      if (a.quantization.has_value()) {
        return Unsupported(op,
                           "quantized values in regions are not "
                           "supported yet");
      }
    }
  }
  if (name == "stablehlo.uniform_quantize" ||
      name == "stablehlo.uniform_dequantize") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
    PJRT_ASSIGN_OR_RETURN(Shape result, ResultType(op));
    PJRT_RETURN_IF_ERROR(CheckAttributesUsed(op));
    Value x = in[0];
    if (x.quantization.has_value()) {
      PJRT_ASSIGN_OR_RETURN(x, Dequantize(b, op, x));
    }
    const mlir::Quantization* q = QuantizationOf(op.result_quantizations, 0);
    if (name == "stablehlo.uniform_dequantize") {
      if (!in[0].quantization.has_value() || q != nullptr ||
          result.element_type() != x.shape.element_type()) {
        return Invalid(op,
                       "dequantizes a quantized tensor into its "
                       "expressed type");
      }
      return Define(b, op, {x});
    }
    if (q == nullptr || !IsFloatingPoint(x.shape.element_type())) {
      return Invalid(op,
                     "quantizes a floating-point or quantized tensor "
                     "into a quantized type");
    }
    PJRT_ASSIGN_OR_RETURN(Value out, Quantize(b, op, x, *q, result));
    return Define(b, op, {std::move(out)});
  }
  if (name == "stablehlo.bitcast_convert" && in.size() == 1 &&
      op.results.size() == 1) {
    // Between a quantized type and its storage type: the same bits.
    PJRT_ASSIGN_OR_RETURN(Shape result, ResultType(op));
    const mlir::Quantization* q = QuantizationOf(op.result_quantizations, 0);
    if (result.element_type() == in[0].shape.element_type() &&
        result.dimensions() == in[0].shape.dimensions()) {
      PJRT_RETURN_IF_ERROR(CheckAttributesUsed(op));
      Value out{Emit(b, &op, result, "copy", {in[0].name}), result};
      if (q != nullptr) out.quantization = *q;
      return Define(b, op, {std::move(out)});
    }
  }
  // dequantize_op_quantize: the op on fresh names for the dequantized
  // operands and for its results, which are then quantized where their
  // types are.
  Operation& plain = dequantized_ops_.emplace_back(op);
  plain.operand_quantizations.clear();
  plain.result_quantizations.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].quantization.has_value()) continue;
    PJRT_ASSIGN_OR_RETURN(Value x, Dequantize(b, op, in[i]));
    const std::string fresh = absl::StrCat("%__dequantized.", next_id_++);
    if (plain.has_operand_types && i < plain.operand_types.size()) {
      plain.operand_types[i] = x.shape;
    }
    b->values[fresh] = std::move(x);
    plain.operands[i].name = fresh;
  }
  for (size_t i = 0; i < plain.results.size(); ++i) {
    plain.results[i] = absl::StrCat("%__result.", next_id_++);
    if (const mlir::Quantization* q =
            QuantizationOf(op.result_quantizations, i)) {
      if (i < plain.result_types.size()) {
        plain.result_types[i] =
            plain.result_types[i].WithElementType(q->expressed);
      }
    }
  }
  PJRT_RETURN_IF_ERROR(Op(b, plain));
  PJRT_RETURN_IF_ERROR(CheckAttributesUsed(plain));
  std::vector<Value> results;
  for (size_t i = 0; i < plain.results.size(); ++i) {
    Value v = b->values[plain.results[i]];
    if (const mlir::Quantization* q =
            QuantizationOf(op.result_quantizations, i)) {
      PJRT_ASSIGN_OR_RETURN(v, Quantize(b, op, v, *q, op.result_types[i]));
    }
    results.push_back(std::move(v));
  }
  return Define(b, op, std::move(results));
}

}  // namespace pjrt::hlo::stablehlo_internal
