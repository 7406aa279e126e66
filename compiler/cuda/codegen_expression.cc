// The CUDA code generator's helpers (see codegen_internal.h): storage and
// compute types, loads, stores and rounding of narrow floats, literals,
// element-wise expressions (complex ones too) and index arithmetic.
#include "compiler/cuda/codegen_internal.h"

namespace pjrt::compiler::cuda::codegen_internal {

absl::StatusOr<std::string> ComputeType(PrimitiveType type) {
  if (IsHalf(type)) return std::string("float");
  return CudaStorageType(type);
}

const char* NarrowFloatName(PrimitiveType type) {
  // The prelude names each narrow float's conversions after its HLO
  // spelling (PrimitiveTypeName's literals end in NUL).
  if (type == PrimitiveType::kF16 || type == PrimitiveType::kBf16 ||
      hlo::IsMiniFloat(type)) {
    return hlo::PrimitiveTypeName(type).data();
  }
  return nullptr;
}

std::string Load(PrimitiveType type, const std::string& storage) {
  const char* narrow = NarrowFloatName(type);
  if (narrow == nullptr) return storage;
  return absl::StrCat("pj_", narrow, "_to_f32(", storage, ")");
}

std::string Store(PrimitiveType type, const std::string& value) {
  const char* narrow = NarrowFloatName(type);
  if (narrow == nullptr) return value;
  return absl::StrCat("pj_f32_to_", narrow, "(", value, ")");
}

std::string Round(PrimitiveType type, const std::string& value) {
  if (IsSubByteInt(type)) {
    return absl::StrCat("pj_wrap_", hlo::PrimitiveTypeName(type), "(", value,
                        ")");
  }
  const char* narrow = NarrowFloatName(type);
  if (narrow == nullptr) return value;
  return absl::StrCat("pj_round_", narrow, "(", value, ")");
}

std::string SaturateSubByte(PrimitiveType type, const std::string& value) {
  if (!IsSubByteInt(type)) return value;
  const int bits = hlo::BitWidth(type);
  if (hlo::IsSignedInteger(type)) {
    return absl::StrFormat("pj_imin((pj_s8)%d, pj_imax((pj_s8)%d, %s))",
                           (1 << (bits - 1)) - 1, -(1 << (bits - 1)), value);
  }
  return absl::StrFormat("pj_imin((pj_u8)%d, %s)", (1 << bits) - 1, value);
}

std::string Math(const char* name, PrimitiveType type) {
  return type == PrimitiveType::kF64 ? std::string(name)
                                     : absl::StrCat(name, "f");
}

absl::StatusOr<std::string> SplatLiteral(PrimitiveType type,
                                         const uint64_t bits[2]) {
  PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(type));
  if (type == PrimitiveType::kF64) {
    return absl::StrFormat("__longlong_as_double(0x%016xLL)", bits[0]);
  }
  if (IsFloat(type)) {  // f32, or f16/bf16 held as float
    uint32_t word;
    std::memcpy(&word, bits, sizeof(word));
    return absl::StrFormat("__uint_as_float(0x%08xu)", word);
  }
  uint64_t value = 0;
  const int width = hlo::BitWidth(type) / 8;
  std::memcpy(&value, bits, std::max(width, 1));
  return absl::StrFormat("((%s)0x%xull)", ct, value);
}

const char* CompareOperator(hlo::ComparisonDirection d) {
  switch (d) {
    case hlo::ComparisonDirection::kEq:
      return "==";
    case hlo::ComparisonDirection::kNe:
      return "!=";
    case hlo::ComparisonDirection::kLt:
      return "<";
    case hlo::ComparisonDirection::kLe:
      return "<=";
    case hlo::ComparisonDirection::kGt:
      return ">";
    case hlo::ComparisonDirection::kGe:
      return ">=";
  }
  return "==";
}

std::string ExprOpName(ExprOp op) {
  static const char* const kNames[] = {"input",
                                       "splat",
                                       "abs",
                                       "negate",
                                       "sign",
                                       "exp",
                                       "expm1",
                                       "log",
                                       "log1p",
                                       "sqrt",
                                       "rsqrt",
                                       "cbrt",
                                       "tanh",
                                       "logistic",
                                       "sin",
                                       "cos",
                                       "tan",
                                       "erf",
                                       "floor",
                                       "ceil",
                                       "round",
                                       "round-even",
                                       "is-finite",
                                       "not",
                                       "popcnt",
                                       "clz",
                                       "reduce-precision",
                                       "convert",
                                       "bitcast-convert",
                                       "real",
                                       "imag",
                                       "add",
                                       "subtract",
                                       "multiply",
                                       "divide",
                                       "remainder",
                                       "power",
                                       "maximum",
                                       "minimum",
                                       "atan2",
                                       "and",
                                       "or",
                                       "xor",
                                       "shift-left",
                                       "shift-right-logical",
                                       "shift-right-arithmetic",
                                       "compare",
                                       "complex",
                                       "select",
                                       "clamp"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) ==
                    static_cast<size_t>(ExprOp::kClamp) + 1,
                "one name per ExprOp, in the enum's order");
  const size_t i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "op";
}

absl::StatusOr<std::string> EmitComplex(const ExprNode& node,
                                        PrimitiveType operand_type,
                                        const std::string& ct,
                                        const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  const PrimitiveType t = node.type;
  const auto call = [&](const char* f) {
    return absl::StrCat(f, "(", a(0), ")");
  };
  switch (node.op) {
    case ExprOp::kSplat:
      if (t == PrimitiveType::kC64) {
        uint32_t words[2];
        std::memcpy(words, node.splat_bits, sizeof(words));
        return absl::StrFormat(
            "pj_c64{__uint_as_float(0x%08xu), __uint_as_float(0x%08xu)}",
            words[0], words[1]);
      }
      return absl::StrFormat(
          "pj_c128{__longlong_as_double(0x%016xLL), "
          "__longlong_as_double(0x%016xLL)}",
          node.splat_bits[0], node.splat_bits[1]);
    case ExprOp::kSelect:
      return absl::StrFormat("%s ? %s : %s", a(0), a(1), a(2));
    case ExprOp::kReal:
      return absl::StrCat(a(0), ".re");
    case ExprOp::kImag:
      return absl::StrCat(a(0), ".im");
    case ExprOp::kAbs:
      return call("pj_cabs");
    case ExprOp::kComplex:
      return absl::StrFormat("%s{%s, %s}", ct, a(0), a(1));
    case ExprOp::kConvert: {
      if (t == PrimitiveType::kPred) return call("pj_to_pred");
      if (hlo::IsComplex(t) && hlo::IsComplex(operand_type)) {
        const char* r = t == PrimitiveType::kC64 ? "float" : "double";
        return absl::StrFormat("%s{(%s)%s.re, (%s)%s.im}", ct, r, a(0), r,
                               a(0));
      }
      if (hlo::IsComplex(t)) {  // a real value becomes the real part
        const char* r = t == PrimitiveType::kC64 ? "float" : "double";
        return absl::StrFormat("%s{(%s)%s, (%s)0}", ct, r, a(0), r);
      }
      // The imaginary part is dropped; the real part converts as a real
      // value of its type would.
      const std::string re = absl::StrCat(a(0), ".re");
      const char* from =
          operand_type == PrimitiveType::kC64 ? "float" : "double";
      if (IsFloat(t)) return Round(t, absl::StrFormat("(%s)%s", ct, re));
      return SaturateSubByte(
          t, absl::StrFormat("pj_convert<%s, %s>(%s)", ct, from, re));
    }
    case ExprOp::kNegate:
      return absl::StrCat("-", a(0));
    case ExprOp::kSign:
      return call("pj_csign");
    case ExprOp::kExp:
      return call("pj_cexp");
    case ExprOp::kExpm1:
      return call("pj_cexpm1");
    case ExprOp::kLog:
      return call("pj_clog");
    case ExprOp::kLog1p:
      return call("pj_clog1p");
    case ExprOp::kSqrt:
      return call("pj_csqrt");
    case ExprOp::kRsqrt:
      return call("pj_crsqrt");
    case ExprOp::kTanh:
      return call("pj_ctanh");
    case ExprOp::kLogistic:
      return call("pj_clogistic");
    case ExprOp::kSin:
      return call("pj_csin");
    case ExprOp::kCos:
      return call("pj_ccos");
    case ExprOp::kTan:
      return call("pj_ctan");
    case ExprOp::kCbrt:
      return call("pj_ccbrt");
    case ExprOp::kAtan2:
      return absl::StrFormat("pj_catan2(%s, %s)", a(0), a(1));
    case ExprOp::kAdd:
      return absl::StrCat(a(0), " + ", a(1));
    case ExprOp::kSubtract:
      return absl::StrCat(a(0), " - ", a(1));
    case ExprOp::kMultiply:
      return absl::StrCat(a(0), " * ", a(1));
    case ExprOp::kDivide:
      return absl::StrCat(a(0), " / ", a(1));
    case ExprOp::kPower:
      return absl::StrFormat("pj_cpow(%s, %s)", a(0), a(1));
    case ExprOp::kCompare:
      if (node.direction == hlo::ComparisonDirection::kEq) {
        return absl::StrFormat("(pj_u8)(%s == %s)", a(0), a(1));
      }
      if (node.direction == hlo::ComparisonDirection::kNe) {
        return absl::StrFormat("(pj_u8)(%s != %s)", a(0), a(1));
      }
      break;
    default:
      break;
  }
  const PrimitiveType complex_type = hlo::IsComplex(t) ? t : operand_type;
  return absl::UnimplementedError(absl::StrFormat(
      "%s on %s does not run on the CUDA backend (the verifier refuses it on "
      "complex values); run this program with --platform host",
      ExprOpName(node.op), hlo::PrimitiveTypeName(complex_type)));
}

namespace {

// The helpers below give the value of one real-valued `node` of the ops
// they name (EmitRealNode routes each op to one), over the variables `var`
// of earlier nodes, in `ct` (ComputeType of its type); `operand_type` is
// its first operand's type (its own when it has none).

// Convert, bitcast-convert, real and imag.
absl::StatusOr<std::string> EmitConversion(
    const ExprNode& node, PrimitiveType operand_type, const std::string& ct,
    const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  const PrimitiveType t = node.type, ot = operand_type;
  switch (node.op) {
    case ExprOp::kConvert: {
      PJRT_ASSIGN_OR_RETURN(std::string from, ComputeType(ot));
      if (t == PrimitiveType::kPred) {
        return absl::StrCat("pj_to_pred(", a(0), ")");
      }
      if (IsSubByteInt(t) && IsFloat(ot)) {
        return SaturateSubByte(
            t, absl::StrFormat("pj_convert<%s, %s>(%s)", ct, from, a(0)));
      }
      if (ot == PrimitiveType::kPred || from == ct) {
        return Round(t, absl::StrCat("(", ct, ")", a(0)));
      }
      if (IsHalf(t) &&
          (ot == PrimitiveType::kF64 ||
           ((hlo::IsSignedInteger(ot) || hlo::IsUnsignedInteger(ot)) &&
            hlo::ByteWidth(ot) >= 4))) {
        // Rounded once: to odd into float, then to nearest even.
        const char* wide = ot == PrimitiveType::kF64  ? "double"
                           : hlo::IsSignedInteger(ot) ? "long long"
                                                      : "unsigned long long";
        return Round(t, absl::StrFormat("pj_odd_f32((%s)%s)", wide, a(0)));
      }
      return Round(t,
                   absl::StrFormat("pj_convert<%s, %s>(%s)", ct, from, a(0)));
    }
    case ExprOp::kBitcastConvert: {
      PJRT_ASSIGN_OR_RETURN(std::string from_storage, CudaStorageType(ot));
      PJRT_ASSIGN_OR_RETURN(std::string to_storage, CudaStorageType(t));
      return Load(t, absl::StrFormat("pj_bitcast<%s, %s>(%s)", to_storage,
                                     from_storage, Store(ot, a(0))));
    }
    case ExprOp::kReal:
      return a(0);
    case ExprOp::kImag:
      return absl::StrCat("(", ct, ")0");
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(ExprOpName(node.op), " is not a conversion"));
}

// Math of one operand: abs to round-even, is-finite and reduce-precision.
absl::StatusOr<std::string> EmitUnaryMath(const ExprNode& node,
                                          PrimitiveType operand_type,
                                          const std::string& ct,
                                          const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  const PrimitiveType t = node.type;
  const bool fl = IsFloat(t);
  switch (node.op) {
    case ExprOp::kAbs:
      return fl ? absl::StrCat(Math("fabs", t), "(", a(0), ")")
                : absl::StrCat("pj_iabs(", a(0), ")");
    case ExprOp::kNegate:
      return fl ? absl::StrCat("-", a(0)) : absl::StrCat("pj_ineg(", a(0), ")");
    case ExprOp::kSign:
      return fl ? absl::StrCat("pj_fsign(", a(0), ")")
                : absl::StrCat("pj_isign(", a(0), ")");
    case ExprOp::kExp:
      return absl::StrCat(Math("exp", t), "(", a(0), ")");
    case ExprOp::kExpm1:
      return absl::StrCat(Math("expm1", t), "(", a(0), ")");
    case ExprOp::kLog:
      return absl::StrCat(Math("log", t), "(", a(0), ")");
    case ExprOp::kLog1p:
      return absl::StrCat(Math("log1p", t), "(", a(0), ")");
    case ExprOp::kSqrt:
      return absl::StrCat(Math("sqrt", t), "(", a(0), ")");
    case ExprOp::kRsqrt:
      return absl::StrCat("(", ct, ")1 / ", Math("sqrt", t), "(", a(0), ")");
    case ExprOp::kCbrt:
      return absl::StrCat(Math("cbrt", t), "(", a(0), ")");
    case ExprOp::kTanh:
      return absl::StrCat(Math("tanh", t), "(", a(0), ")");
    case ExprOp::kLogistic:
      return absl::StrCat("pj_logistic(", a(0), ")");
    case ExprOp::kSin:
      return absl::StrCat(Math("sin", t), "(", a(0), ")");
    case ExprOp::kCos:
      return absl::StrCat(Math("cos", t), "(", a(0), ")");
    case ExprOp::kTan:
      return absl::StrCat(Math("tan", t), "(", a(0), ")");
    case ExprOp::kErf:
      return absl::StrCat(Math("erf", t), "(", a(0), ")");
    case ExprOp::kFloor:
      return absl::StrCat(Math("floor", t), "(", a(0), ")");
    case ExprOp::kCeil:
      return absl::StrCat(Math("ceil", t), "(", a(0), ")");
    case ExprOp::kRoundAfz:
      return absl::StrCat(Math("round", t), "(", a(0), ")");
    case ExprOp::kRoundEven:
      return absl::StrCat(Math("rint", t), "(", a(0), ")");
    case ExprOp::kIsFinite:
      return IsFloat(operand_type) ? absl::StrCat("pj_isfinite(", a(0), ")")
                                   : "(pj_u8)1";
    case ExprOp::kReducePrecision:
      return absl::StrFormat("pj_reduce_precision(%s, %d, %d)", a(0),
                             node.exponent_bits, node.mantissa_bits);
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(ExprOpName(node.op), " is not math of one operand"));
}

// Arithmetic of two operands: add to atan2.
absl::StatusOr<std::string> EmitArithmetic(
    const ExprNode& node, PrimitiveType operand_type, const std::string& ct,
    const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  const PrimitiveType t = node.type;
  const bool fl = IsFloat(t);
  switch (node.op) {
    case ExprOp::kAdd:
      return fl ? absl::StrCat(a(0), " + ", a(1))
                : absl::StrCat("pj_iadd(", a(0), ", ", a(1), ")");
    case ExprOp::kSubtract:
      return fl ? absl::StrCat(a(0), " - ", a(1))
                : absl::StrCat("pj_isub(", a(0), ", ", a(1), ")");
    case ExprOp::kMultiply:
      return fl ? absl::StrCat(a(0), " * ", a(1))
                : absl::StrCat("pj_imul(", a(0), ", ", a(1), ")");
    case ExprOp::kDivide:
      return fl ? absl::StrCat(a(0), " / ", a(1))
                : absl::StrCat("pj_idiv(", a(0), ", ", a(1), ")");
    case ExprOp::kRemainder:
      return fl ? absl::StrCat(Math("fmod", t), "(", a(0), ", ", a(1), ")")
                : absl::StrCat("pj_irem(", a(0), ", ", a(1), ")");
    case ExprOp::kPower:
      return fl ? absl::StrCat(Math("pow", t), "(", a(0), ", ", a(1), ")")
                : absl::StrCat("pj_ipow(", a(0), ", ", a(1), ")");
    case ExprOp::kMaximum:
      return absl::StrCat(fl ? "pj_fmax(" : "pj_imax(", a(0), ", ", a(1), ")");
    case ExprOp::kMinimum:
      return absl::StrCat(fl ? "pj_fmin(" : "pj_imin(", a(0), ", ", a(1), ")");
    case ExprOp::kAtan2:
      return absl::StrCat(Math("atan2", t), "(", a(0), ", ", a(1), ")");
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(ExprOpName(node.op), " is not arithmetic"));
}

// Bit operations: not, popcnt, clz, and, or, xor and the shifts.
absl::StatusOr<std::string> EmitBitwise(const ExprNode& node,
                                        PrimitiveType operand_type,
                                        const std::string& ct,
                                        const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  const PrimitiveType t = node.type;
  // A sub-byte integer's bits, and their mask.
  const int bits = IsSubByteInt(t) ? hlo::BitWidth(t) : 8;
  const int mask = (1 << bits) - 1;
  switch (node.op) {
    case ExprOp::kNot:
      return t == PrimitiveType::kPred
                 ? absl::StrCat("(pj_u8)(", a(0), " == 0)")
                 : absl::StrCat("pj_not(", a(0), ")");
    // Sub-byte integers count within their bits.
    case ExprOp::kPopcnt:
      return IsSubByteInt(t)
                 ? absl::StrFormat("(%s)pj_popcnt((pj_u8)(%s & 0x%x))", ct,
                                   a(0), mask)
                 : absl::StrCat("pj_popcnt(", a(0), ")");
    case ExprOp::kClz:
      return IsSubByteInt(t)
                 ? absl::StrFormat("(%s)(pj_clz((pj_u8)(%s & 0x%x)) - %d)", ct,
                                   a(0), mask, 8 - bits)
                 : absl::StrCat("pj_clz(", a(0), ")");
    case ExprOp::kAnd:
      return absl::StrCat("(", ct, ")(", a(0), " & ", a(1), ")");
    case ExprOp::kOr:
      return absl::StrCat("(", ct, ")(", a(0), " | ", a(1), ")");
    case ExprOp::kXor:
      return absl::StrCat("(", ct, ")(", a(0), " ^ ", a(1), ")");
    case ExprOp::kShiftLeft:
      return absl::StrCat("pj_shl(", a(0), ", ", a(1), ")");
    case ExprOp::kShiftRightLogical:
      // s4 and s2 shift their bits, not the sign-extended byte.
      return IsSubByteInt(t) && hlo::IsSignedInteger(t)
                 ? absl::StrFormat("pj_shr_logical((pj_s8)(%s & 0x%x), %s)",
                                   a(0), mask, a(1))
                 : absl::StrCat("pj_shr_logical(", a(0), ", ", a(1), ")");
    case ExprOp::kShiftRightArithmetic:
      // u4 and u2 are held zero-extended: their sign bit for this shift is
      // their top one.
      return IsSubByteInt(t) && !hlo::IsSignedInteger(t)
                 ? absl::StrFormat(
                       "pj_shr_arith((pj_u8)(%s & 0x%x ? %s | 0x%x : %s), %s)",
                       a(0), 1 << (bits - 1), a(0), 0xFF & ~mask, a(0), a(1))
                 : absl::StrCat("pj_shr_arith(", a(0), ", ", a(1), ")");
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(ExprOpName(node.op), " is not a bit operation"));
}

// Compare, select and clamp.
absl::StatusOr<std::string> EmitSelection(const ExprNode& node,
                                          PrimitiveType operand_type,
                                          const std::string& ct,
                                          const std::vector<std::string>& var) {
  const auto a = [&](int k) { return var[node.operands[k]]; };
  switch (node.op) {
    case ExprOp::kCompare:
      if (node.total_order && IsFloat(operand_type)) {
        return absl::StrFormat(
            "(pj_u8)(pj_total_order(%s) %s pj_total_order(%s))", a(0),
            CompareOperator(node.direction), a(1));
      }
      return absl::StrFormat("(pj_u8)(%s %s %s)", a(0),
                             CompareOperator(node.direction), a(1));
    case ExprOp::kSelect:
      return absl::StrFormat("%s ? %s : %s", a(0), a(1), a(2));
    case ExprOp::kClamp:
      if (IsFloat(node.type)) {
        return absl::StrFormat("pj_fmin(%s, pj_fmax(%s, %s))", a(2), a(0),
                               a(1));
      }
      return absl::StrFormat("pj_imin(%s, pj_imax(%s, %s))", a(2), a(0), a(1));
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(ExprOpName(node.op), " is not a selection"));
}

// The value of `node` when neither it nor its first operand is complex,
// before the rounding of EmitExpression; inputs are taken from `inputs`.
absl::StatusOr<std::string> EmitRealNode(
    const ExprNode& node, PrimitiveType operand_type, const std::string& ct,
    const std::vector<std::string>& var,
    const std::vector<std::string>& inputs) {
  switch (node.op) {
    case ExprOp::kInput:
      if (node.input < 0 || node.input >= static_cast<int>(inputs.size())) {
        return absl::InternalError(absl::StrFormat("expression input %d of %d",
                                                   node.input, inputs.size()));
      }
      return inputs[node.input];
    case ExprOp::kSplat:
      return SplatLiteral(node.type, node.splat_bits);
    case ExprOp::kConvert:
    case ExprOp::kBitcastConvert:
    case ExprOp::kReal:
    case ExprOp::kImag:
      return EmitConversion(node, operand_type, ct, var);
    case ExprOp::kAbs:
    case ExprOp::kNegate:
    case ExprOp::kSign:
    case ExprOp::kExp:
    case ExprOp::kExpm1:
    case ExprOp::kLog:
    case ExprOp::kLog1p:
    case ExprOp::kSqrt:
    case ExprOp::kRsqrt:
    case ExprOp::kCbrt:
    case ExprOp::kTanh:
    case ExprOp::kLogistic:
    case ExprOp::kSin:
    case ExprOp::kCos:
    case ExprOp::kTan:
    case ExprOp::kErf:
    case ExprOp::kFloor:
    case ExprOp::kCeil:
    case ExprOp::kRoundAfz:
    case ExprOp::kRoundEven:
    case ExprOp::kIsFinite:
    case ExprOp::kReducePrecision:
      return EmitUnaryMath(node, operand_type, ct, var);
    case ExprOp::kAdd:
    case ExprOp::kSubtract:
    case ExprOp::kMultiply:
    case ExprOp::kDivide:
    case ExprOp::kRemainder:
    case ExprOp::kPower:
    case ExprOp::kMaximum:
    case ExprOp::kMinimum:
    case ExprOp::kAtan2:
      return EmitArithmetic(node, operand_type, ct, var);
    case ExprOp::kNot:
    case ExprOp::kPopcnt:
    case ExprOp::kClz:
    case ExprOp::kAnd:
    case ExprOp::kOr:
    case ExprOp::kXor:
    case ExprOp::kShiftLeft:
    case ExprOp::kShiftRightLogical:
    case ExprOp::kShiftRightArithmetic:
      return EmitBitwise(node, operand_type, ct, var);
    case ExprOp::kCompare:
    case ExprOp::kSelect:
    case ExprOp::kClamp:
      return EmitSelection(node, operand_type, ct, var);
    case ExprOp::kComplex:
      return Unsupported(node.type);
  }
  return absl::InternalError(
      absl::StrFormat("unknown expression op %d", static_cast<int>(node.op)));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> EmitExpression(
    const Expression& expr, const std::vector<std::string>& inputs,
    const std::string& prefix, const std::string& indent, std::string* out) {
  std::vector<std::string> var(expr.size());
  for (int i = 0; i < expr.size(); ++i) {
    const ExprNode& node = expr.node(i);
    const PrimitiveType t = node.type;
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(t));
    var[i] = absl::StrCat(prefix, i);
    const PrimitiveType ot =
        node.operands[0] >= 0 ? expr.node(node.operands[0]).type : t;
    if (node.op != ExprOp::kInput &&
        (hlo::IsComplex(t) || hlo::IsComplex(ot))) {
      PJRT_ASSIGN_OR_RETURN(std::string value, EmitComplex(node, ot, ct, var));
      absl::StrAppend(out, indent, "const ", ct, " ", var[i], " = ", value,
                      ";\n");
      continue;
    }
    if (node.operands[0] >= 0) PJRT_RETURN_IF_ERROR(ComputeType(ot).status());
    PJRT_ASSIGN_OR_RETURN(std::string value,
                          EmitRealNode(node, ot, ct, var, inputs));
    // f16 and bf16 round after every op that computes (not after a load,
    // a splat, a convert that already rounded, or a select).
    const bool rounds =
        node.op != ExprOp::kInput && node.op != ExprOp::kSplat &&
        node.op != ExprOp::kConvert && node.op != ExprOp::kBitcastConvert &&
        node.op != ExprOp::kSelect && node.op != ExprOp::kReal &&
        node.op != ExprOp::kCompare && node.op != ExprOp::kIsFinite;
    if (rounds) value = Round(t, value);
    absl::StrAppend(out, indent, "const ", ct, " ", var[i], " = ", value,
                    ";\n");
  }
  std::vector<std::string> outputs;
  for (int o : expr.outputs()) outputs.push_back(var[o]);
  return outputs;
}

const char* IndexType(int64_t limit) {
  return limit < (int64_t{1} << 31) - 1 - kMaxBlocks * kThreads ? "int"
                                                                : "long long";
}

int64_t MapLimit(const host::AffineMap& map, const std::vector<int64_t>& dims) {
  int64_t limit = std::abs(map.offset);
  for (size_t d = 0; d < dims.size() && d < map.strides.size(); ++d) {
    limit += std::abs(map.strides[d]) * std::max<int64_t>(dims[d] - 1, 0);
  }
  return limit;
}

std::string SplitIndex(const std::vector<int64_t>& dims, const char* index_type,
                       const std::string& indent) {
  std::string s;
  const int rank = static_cast<int>(dims.size());
  if (rank == 0) return s;
  absl::StrAppend(&s, indent, index_type, " r = i;\n");
  for (int d = rank - 1; d > 0; --d) {
    absl::StrAppendFormat(&s, "%sconst %s c%d = r %% %d; r /= %d;\n", indent,
                          index_type, d, dims[d], dims[d]);
  }
  absl::StrAppendFormat(&s, "%sconst %s c0 = r;\n", indent, index_type);
  return s;
}

std::string MapExpression(const host::AffineMap& map, int rank) {
  std::string s = absl::StrCat(map.offset);
  for (int d = 0; d < rank && d < static_cast<int>(map.strides.size()); ++d) {
    if (map.strides[d] == 0) continue;
    absl::StrAppendFormat(&s, " + c%d * %d", d, map.strides[d]);
  }
  return s;
}

absl::Status CheckSlotTypes(const host::HostProgram& program) {
  for (const host::BufferSlot& slot : program.slots) {
    if (!slot.shape.IsArray()) continue;
    const PrimitiveType type = slot.shape.element_type();
    PJRT_RETURN_IF_ERROR(CudaStorageType(type).status());
  }
  return absl::OkStatus();
}

std::string SortRowHead(int64_t n, int64_t inner) {
  return absl::StrFormat(
      "    const long long row = i / %dLL, p = i %% %dLL;\n"
      "    const long long base = (row / %dLL) * %dLL + row %% %dLL;\n",
      n, n, inner, n * inner, inner);
}

}  // namespace pjrt::compiler::cuda::codegen_internal
