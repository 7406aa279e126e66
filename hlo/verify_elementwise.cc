// The verifier's checks of element-wise ops (unary, binary and the rest:
// select, clamp, compare, convert, ...).
#include "hlo/verifier_internal.h"

namespace pjrt::hlo::verifier_internal {

namespace {

bool IsPredOrIntegral(PrimitiveType t) {
  return t == PrimitiveType::kPred || IsIntegral(t);
}

}  // namespace

absl::Status Verifier::CheckElementwiseOp(const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::kConvert:
      return CheckConvert(inst);
    case Opcode::kBitcastConvert:
      return CheckBitcastConvert(inst);
    case Opcode::kCopy:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      return ExpectShape(inst, inst.operand(0)->shape());
    case Opcode::kSelect:
      return CheckSelect(inst);
    case Opcode::kClamp:
      return CheckClamp(inst);
    case Opcode::kCompare:
      return CheckCompare(inst);
    case Opcode::kAbs:
    case Opcode::kReal:
    case Opcode::kImag:
      return CheckAbsRealOrImag(inst);
    case Opcode::kComplex:
      return CheckComplex(inst);
    case Opcode::kNegate:
    case Opcode::kSign:
      return CheckElementwise(inst, 1, IsNumeric, "numeric");
    case Opcode::kExp:
    case Opcode::kExpm1:
    case Opcode::kLog:
    case Opcode::kLog1p:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
    case Opcode::kTanh:
    case Opcode::kLogistic:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTan:
    case Opcode::kCbrt:
      return CheckElementwise(inst, 1, IsFloatOrComplex,
                              "floating-point or complex");
    case Opcode::kErf:
    case Opcode::kFloor:
    case Opcode::kCeil:
    case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven:
      return CheckElementwise(inst, 1, IsFloatingPoint, "floating-point");
    case Opcode::kReducePrecision:
      return CheckReducePrecision(inst);
    case Opcode::kIsFinite:
      return CheckIsFinite(inst);
    case Opcode::kNot:
      return CheckElementwise(inst, 1, IsPredOrIntegral, "pred or integer");
    case Opcode::kPopcnt:
    case Opcode::kClz:
      return CheckElementwise(inst, 1, IsIntegral, "integer");
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kPower:
      return CheckElementwise(inst, 2, IsNumeric, "numeric");
    case Opcode::kRemainder:
      return CheckElementwise(inst, 2, IsOrderedNumeric, "real numeric");
    case Opcode::kMaximum:
    case Opcode::kMinimum:
      return CheckElementwise(inst, 2, IsOrdered, "non-complex");
    case Opcode::kAtan2:
      return CheckElementwise(inst, 2, IsFloatOrComplex,
                              "floating-point or complex");
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
      return CheckElementwise(inst, 2, IsPredOrIntegral, "pred or integer");
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightLogical:
    case Opcode::kShiftRightArithmetic:
      return CheckElementwise(inst, 2, IsIntegral, "integer");
    case Opcode::kMap:
      return CheckInferred(inst, InferMapShape(inst));
    default:
      return NotInFamily(inst, "element-wise");
  }
}

absl::Status Verifier::CheckConvert(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  if (!inst.shape().IsArray() || !SameDims(inst.shape(), in)) {
    return Invalid(
        inst, absl::StrFormat("convert of %s cannot produce %s", in.ToString(),
                              inst.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckBitcastConvert(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  const PrimitiveType from = in.element_type();
  const PrimitiveType to = inst.shape().element_type();
  const int in_bits = BitWidth(from), out_bits = BitWidth(to);
  // The 6-bit floats take a byte each, but their width is 6 bits: XLA
  // bitcasts them only to each other.
  if ((MiniFloatCodeBits(from) == 6) != (MiniFloatCodeBits(to) == 6)) {
    return Invalid(
        inst, absl::StrFormat("bitcast-convert of %s to %s: a 6-bit float "
                              "bitcasts only to another 6-bit float "
                              "(f6e2m3fn, f6e3m2fn)",
                              PrimitiveTypeName(from), PrimitiveTypeName(to)));
  }
  if (in_bits != out_bits || IsComplex(from) || IsComplex(to)) {
    // A view of the bytes: pred is a byte per element here (a bit in
    // StableHLO), s4, u4 and f4e2m1fn are unpacked inside programs.
    for (PrimitiveType t : {from, to}) {
      if (t == PrimitiveType::kPred || IsPackedType(t)) {
        return Unimplemented(
            inst, absl::StrFormat("bitcast-convert of %s to %s is not "
                                  "supported (%s only converts to and from "
                                  "a type of its own width)",
                                  PrimitiveTypeName(from),
                                  PrimitiveTypeName(to), PrimitiveTypeName(t)));
      }
    }
  }
  // XLA: a wider operand gains a minor dimension of width ratio, a
  // narrower one loses its minor dimension, which must be that ratio.
  std::vector<int64_t> dims(in.dimensions().begin(), in.dimensions().end());
  if (in_bits > out_bits) {
    dims.push_back(in_bits / out_bits);
  } else if (in_bits < out_bits) {
    if (dims.empty() || dims.back() != out_bits / in_bits) {
      return Invalid(
          inst, absl::StrFormat("bitcast-convert of %s to the wider %s needs "
                                "a last dimension of %d (the width ratio)",
                                in.ToString(), PrimitiveTypeName(to),
                                out_bits / in_bits));
    }
    dims.pop_back();
  }
  const Shape want(to, dims);
  if (!inst.shape().IsArray() || !SameDims(want, inst.shape())) {
    return Invalid(
        inst,
        absl::StrFormat("bitcast-convert of %s gives %s, not %s", in.ToString(),
                        want.ToString(), inst.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckSelect(const Instruction& inst) {
  const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 3));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& p = operand(0);
  if (p.element_type() != PrimitiveType::kPred ||
      (p.rank() != 0 && !SameDims(p, operand(1)))) {
    return Invalid(inst,
                   absl::StrFormat("the predicate must be pred with the "
                                   "dimensions of the other operands (or a "
                                   "scalar), got %s",
                                   p.ToString()));
  }
  if (operand(1) != operand(2)) {
    return Invalid(
        inst, absl::StrFormat("on_true (%s) and on_false (%s) must "
                              "have the same shape",
                              operand(1).ToString(), operand(2).ToString()));
  }
  return ExpectShape(inst, operand(1));
}

absl::Status Verifier::CheckClamp(const Instruction& inst) {
  const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 3));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& x = operand(1);
  for (int i : {0, 2}) {
    if (operand(i).element_type() != x.element_type() ||
        (operand(i).rank() != 0 && !SameDims(operand(i), x))) {
      return Invalid(inst,
                     absl::StrFormat("bound %s must be a scalar or have the "
                                     "shape of %s",
                                     operand(i).ToString(), x.ToString()));
    }
  }
  if (!IsOrderedNumeric(x.element_type())) {
    return Invalid(inst,
                   absl::StrFormat("clamp needs real numeric operands, not %s",
                                   PrimitiveTypeName(x.element_type())));
  }
  return ExpectShape(inst, x);
}

absl::Status Verifier::CheckCompare(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& lhs = inst.operand(0)->shape();
  const Shape& rhs = inst.operand(1)->shape();
  if (lhs != rhs) {
    return Invalid(inst, absl::StrFormat("operands must have the same shape; "
                                         "got %s and %s",
                                         lhs.ToString(), rhs.ToString()));
  }
  if (!a.has("direction")) {
    return Invalid(inst, "compare needs direction=EQ|NE|LT|LE|GT|GE");
  }
  PrimitiveType t = lhs.element_type();
  if (IsComplex(t) && a.comparison_direction != ComparisonDirection::kEq &&
      a.comparison_direction != ComparisonDirection::kNe) {
    return Invalid(
        inst, absl::StrFormat("%s operands compare with EQ or NE only, "
                              "not direction=%s",
                              PrimitiveTypeName(t), *a.FindRaw("direction")));
  }
  if (a.comparison_type == ComparisonType::kTotalOrder ||
      a.comparison_type == ComparisonType::kFloat) {
    if (!IsFloatingPoint(t)) {
      return Invalid(inst,
                     absl::StrFormat("type=%s needs floating-point operands, "
                                     "not %s",
                                     *a.FindRaw("type"), PrimitiveTypeName(t)));
    }
  }
  return ExpectShape(inst, Shape(PrimitiveType::kPred,
                                 std::vector<int64_t>(lhs.dimensions().begin(),
                                                      lhs.dimensions().end())));
}

absl::Status Verifier::CheckAbsRealOrImag(const Instruction& inst) {
  // Of a complex operand: its real part type; otherwise the same.
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  const PrimitiveType t = in.element_type();
  const bool ok =
      inst.opcode() == Opcode::kAbs ? IsNumeric(t) : IsFloatOrComplex(t);
  if (!ok) {
    return Invalid(inst, absl::StrFormat("%s needs %s operands, not %s",
                                         inst.opcode_name(),
                                         inst.opcode() == Opcode::kAbs
                                             ? "numeric"
                                             : "floating-point or complex",
                                         PrimitiveTypeName(t)));
  }
  return ExpectShape(inst, Shape(IsComplex(t) ? ComplexPartType(t) : t,
                                 std::vector<int64_t>(in.dimensions().begin(),
                                                      in.dimensions().end())));
}

absl::Status Verifier::CheckComplex(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(CheckElementwiseOperands(inst, 2));
  const Shape& in = inst.operand(0)->shape();
  const PrimitiveType t = in.element_type();
  if (t != PrimitiveType::kF32 && t != PrimitiveType::kF64) {
    return Invalid(inst,
                   absl::StrFormat("complex needs f32 or f64 operands, not %s",
                                   PrimitiveTypeName(t)));
  }
  return ExpectShape(inst, Shape(t == PrimitiveType::kF64 ? PrimitiveType::kC128
                                                          : PrimitiveType::kC64,
                                 std::vector<int64_t>(in.dimensions().begin(),
                                                      in.dimensions().end())));
}

absl::Status Verifier::CheckReducePrecision(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  if (a.exponent_bits < 1 || a.mantissa_bits < 0 ||
      a.exponent_bits > INT32_MAX || a.mantissa_bits > INT32_MAX) {
    return Invalid(inst,
                   absl::StrFormat("exponent_bits=%d and mantissa_bits=%d are "
                                   "invalid (need >= 1 and >= 0, and 32-bit "
                                   "integers)",
                                   a.exponent_bits, a.mantissa_bits));
  }
  return CheckElementwise(inst, 1, IsFloatingPoint, "floating-point");
}

absl::Status Verifier::CheckIsFinite(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  if (!IsFloatingPoint(in.element_type())) {
    return Invalid(inst,
                   absl::StrFormat("is-finite needs a floating-point operand, "
                                   "not %s",
                                   in.ToString()));
  }
  return ExpectShape(inst, Shape(PrimitiveType::kPred,
                                 std::vector<int64_t>(in.dimensions().begin(),
                                                      in.dimensions().end())));
}

}  // namespace pjrt::hlo::verifier_internal
