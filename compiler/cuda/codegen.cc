#include "compiler/cuda/codegen.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/cuda/nccl.h"
#include "compiler/cuda/prelude.h"
#include "compiler/host/kernel_control_flow.h"
#include "compiler/host/kernel_convolution.h"
#include "compiler/host/kernel_indexing.h"
#include "compiler/host/kernel_map.h"
#include "compiler/host/kernel_random.h"
#include "compiler/host/kernel_sort.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/kernel_window.h"

namespace pjrt::compiler::cuda {

using hlo::PrimitiveType;
using host::Expression;
using host::ExprNode;
using host::ExprOp;
using host::Product;

namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any size with at most this many blocks.
constexpr int64_t kMaxBlocks = 65536;

int64_t BlocksFor(int64_t elements, int threads = kThreads) {
  return std::clamp<int64_t>((elements + threads - 1) / threads, 1, kMaxBlocks);
}

// The floats computed in float and rounded to their type after every op:
// f16, bf16 and the f8 types.
bool IsHalf(PrimitiveType t) {
  return t == PrimitiveType::kF16 || t == PrimitiveType::kBf16 ||
         t == PrimitiveType::kF8E4M3FN || t == PrimitiveType::kF8E5M2;
}
bool IsInt4(PrimitiveType t) {
  return t == PrimitiveType::kS4 || t == PrimitiveType::kU4;
}
bool IsFloat(PrimitiveType t) {
  return IsHalf(t) || t == PrimitiveType::kF32 || t == PrimitiveType::kF64;
}

absl::Status Unsupported(PrimitiveType type) {
  return absl::UnimplementedError(absl::StrFormat(
      "the CUDA backend does not compute %s (it computes pred, s4-s64, "
      "u4-u64, f8e4m3fn, f8e5m2, f16, bf16, f32, f64, c64 and c128); run "
      "this program with --platform host",
      hlo::PrimitiveTypeName(type)));
}

}  // namespace

absl::StatusOr<std::string> CudaStorageType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
      return std::string("pj_u8");
    case PrimitiveType::kS4:  // one value per byte, sign-extended
    case PrimitiveType::kS8:
      return std::string("pj_s8");
    case PrimitiveType::kS16:
      return std::string("pj_s16");
    case PrimitiveType::kS32:
      return std::string("pj_s32");
    case PrimitiveType::kS64:
      return std::string("pj_s64");
    case PrimitiveType::kU4:  // one value per byte
    case PrimitiveType::kU8:
      return std::string("pj_u8");
    case PrimitiveType::kU16:
      return std::string("pj_u16");
    case PrimitiveType::kU32:
      return std::string("pj_u32");
    case PrimitiveType::kU64:
      return std::string("pj_u64");
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return std::string("pj_u16");
    case PrimitiveType::kF8E4M3FN:
    case PrimitiveType::kF8E5M2:
      return std::string("pj_u8");
    case PrimitiveType::kF32:
      return std::string("float");
    case PrimitiveType::kF64:
      return std::string("double");
    case PrimitiveType::kC64:
      return std::string("pj_c64");
    case PrimitiveType::kC128:
      return std::string("pj_c128");
    default:
      return Unsupported(type);
  }
}

namespace {

// The type values of `type` are computed in (f16 and bf16 in float).
absl::StatusOr<std::string> ComputeType(PrimitiveType type) {
  if (IsHalf(type)) return std::string("float");
  return CudaStorageType(type);
}

// The prelude's name of a float type narrower than float, which values of
// it are computed in; nullptr for any other type.
const char* NarrowFloatName(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF16:
      return "f16";
    case PrimitiveType::kBf16:
      return "bf16";
    case PrimitiveType::kF8E4M3FN:
      return "f8e4m3fn";
    case PrimitiveType::kF8E5M2:
      return "f8e5m2";
    default:
      return nullptr;
  }
}

// `storage` (an expression of the storage type) as a compute value.
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

// A value computed in float, rounded to `type` when it is a narrower float;
// an integer wrapped to 4 bits when `type` is s4 or u4.
std::string Round(PrimitiveType type, const std::string& value) {
  if (type == PrimitiveType::kS4)
    return absl::StrCat("pj_wrap_s4(", value, ")");
  if (type == PrimitiveType::kU4)
    return absl::StrCat("pj_wrap_u4(", value, ")");
  const char* narrow = NarrowFloatName(type);
  if (narrow == nullptr) return value;
  return absl::StrCat("pj_round_", narrow, "(", value, ")");
}

// A float converted to s4 or u4 saturates to the 4-bit range (after the
// saturating convert to 8 bits that `value` holds).
std::string SaturateInt4(PrimitiveType type, const std::string& value) {
  if (type == PrimitiveType::kS4)
    return absl::StrCat("pj_imin((pj_s8)7, pj_imax((pj_s8)-8, ", value, "))");
  if (type == PrimitiveType::kU4)
    return absl::StrCat("pj_imin((pj_u8)15, ", value, ")");
  return value;
}

// A math function of the C library for float or double.
std::string Math(const char* name, PrimitiveType type) {
  return type == PrimitiveType::kF64 ? std::string(name)
                                     : absl::StrCat(name, "f");
}

// A literal of the compute representation held in `bits`.
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

// The HLO name of an element-wise op ("multiply").
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

// The value of `node` when it or its first operand is complex (c64, c128),
// in `ct` (ComputeType of its type), as std::complex computes it on the
// host (the prelude's pj_complex operators and pj_c* functions).
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
      return SaturateInt4(
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

// Writes `expr` as straight-line CUDA statements, one variable per node
// (`<prefix><node>`), inputs taken from `inputs`; returns the variables of
// its outputs.
absl::StatusOr<std::vector<std::string>> EmitExpression(
    const Expression& expr, const std::vector<std::string>& inputs,
    const std::string& prefix, const std::string& indent, std::string* out) {
  std::vector<std::string> var(expr.size());
  for (int i = 0; i < expr.size(); ++i) {
    const ExprNode& node = expr.node(i);
    const PrimitiveType t = node.type;
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(t));
    var[i] = absl::StrCat(prefix, i);
    const auto a = [&](int k) { return var[node.operands[k]]; };
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
    const bool fl = IsFloat(t);
    std::string value;
    switch (node.op) {
      case ExprOp::kInput:
        if (node.input < 0 || node.input >= static_cast<int>(inputs.size())) {
          return absl::InternalError(absl::StrFormat(
              "expression input %d of %d", node.input, inputs.size()));
        }
        value = inputs[node.input];
        break;
      case ExprOp::kSplat: {
        PJRT_ASSIGN_OR_RETURN(value, SplatLiteral(t, node.splat_bits));
        break;
      }
      case ExprOp::kConvert: {
        PJRT_ASSIGN_OR_RETURN(std::string from, ComputeType(ot));
        if (t == PrimitiveType::kPred) {
          value = absl::StrCat("pj_to_pred(", a(0), ")");
        } else if (IsInt4(t) && IsFloat(ot)) {
          value = SaturateInt4(
              t, absl::StrFormat("pj_convert<%s, %s>(%s)", ct, from, a(0)));
        } else if (ot == PrimitiveType::kPred || from == ct) {
          value = Round(t, absl::StrCat("(", ct, ")", a(0)));
        } else {
          value = Round(
              t, absl::StrFormat("pj_convert<%s, %s>(%s)", ct, from, a(0)));
        }
        break;
      }
      case ExprOp::kBitcastConvert: {
        PJRT_ASSIGN_OR_RETURN(std::string from_storage, CudaStorageType(ot));
        PJRT_ASSIGN_OR_RETURN(std::string to_storage, CudaStorageType(t));
        value = Load(t, absl::StrFormat("pj_bitcast<%s, %s>(%s)", to_storage,
                                        from_storage, Store(ot, a(0))));
        break;
      }
      case ExprOp::kIsFinite:
        value =
            IsFloat(ot) ? absl::StrCat("pj_isfinite(", a(0), ")") : "(pj_u8)1";
        break;
      case ExprOp::kReal:
        value = a(0);
        break;
      case ExprOp::kImag:
        value = absl::StrCat("(", ct, ")0");
        break;
      case ExprOp::kAbs:
        value = fl ? absl::StrCat(Math("fabs", t), "(", a(0), ")")
                   : absl::StrCat("pj_iabs(", a(0), ")");
        break;
      case ExprOp::kNegate:
        value =
            fl ? absl::StrCat("-", a(0)) : absl::StrCat("pj_ineg(", a(0), ")");
        break;
      case ExprOp::kSign:
        value = fl ? absl::StrCat("pj_fsign(", a(0), ")")
                   : absl::StrCat("pj_isign(", a(0), ")");
        break;
      case ExprOp::kExp:
        value = absl::StrCat(Math("exp", t), "(", a(0), ")");
        break;
      case ExprOp::kExpm1:
        value = absl::StrCat(Math("expm1", t), "(", a(0), ")");
        break;
      case ExprOp::kLog:
        value = absl::StrCat(Math("log", t), "(", a(0), ")");
        break;
      case ExprOp::kLog1p:
        value = absl::StrCat(Math("log1p", t), "(", a(0), ")");
        break;
      case ExprOp::kSqrt:
        value = absl::StrCat(Math("sqrt", t), "(", a(0), ")");
        break;
      case ExprOp::kRsqrt:
        value = absl::StrCat("(", ct, ")1 / ", Math("sqrt", t), "(", a(0), ")");
        break;
      case ExprOp::kCbrt:
        value = absl::StrCat(Math("cbrt", t), "(", a(0), ")");
        break;
      case ExprOp::kTanh:
        value = absl::StrCat(Math("tanh", t), "(", a(0), ")");
        break;
      case ExprOp::kLogistic:
        value = absl::StrCat("pj_logistic(", a(0), ")");
        break;
      case ExprOp::kSin:
        value = absl::StrCat(Math("sin", t), "(", a(0), ")");
        break;
      case ExprOp::kCos:
        value = absl::StrCat(Math("cos", t), "(", a(0), ")");
        break;
      case ExprOp::kTan:
        value = absl::StrCat(Math("tan", t), "(", a(0), ")");
        break;
      case ExprOp::kErf:
        value = absl::StrCat(Math("erf", t), "(", a(0), ")");
        break;
      case ExprOp::kFloor:
        value = absl::StrCat(Math("floor", t), "(", a(0), ")");
        break;
      case ExprOp::kCeil:
        value = absl::StrCat(Math("ceil", t), "(", a(0), ")");
        break;
      case ExprOp::kRoundAfz:
        value = absl::StrCat(Math("round", t), "(", a(0), ")");
        break;
      case ExprOp::kRoundEven:
        value = absl::StrCat(Math("rint", t), "(", a(0), ")");
        break;
      case ExprOp::kReducePrecision:
        value = absl::StrFormat("pj_reduce_precision(%s, %d, %d)", a(0),
                                node.exponent_bits, node.mantissa_bits);
        break;
      case ExprOp::kNot:
        value = t == PrimitiveType::kPred
                    ? absl::StrCat("(pj_u8)(", a(0), " == 0)")
                    : absl::StrCat("pj_not(", a(0), ")");
        break;
      // s4 and u4 count within their 4 bits.
      case ExprOp::kPopcnt:
        value = IsInt4(t) ? absl::StrFormat("(%s)pj_popcnt((pj_u8)(%s & 0xF))",
                                            ct, a(0))
                          : absl::StrCat("pj_popcnt(", a(0), ")");
        break;
      case ExprOp::kClz:
        value = IsInt4(t) ? absl::StrFormat(
                                "(%s)(pj_clz((pj_u8)(%s & 0xF)) - 4)", ct, a(0))
                          : absl::StrCat("pj_clz(", a(0), ")");
        break;
      case ExprOp::kAdd:
        value = fl ? absl::StrCat(a(0), " + ", a(1))
                   : absl::StrCat("pj_iadd(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kSubtract:
        value = fl ? absl::StrCat(a(0), " - ", a(1))
                   : absl::StrCat("pj_isub(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kMultiply:
        value = fl ? absl::StrCat(a(0), " * ", a(1))
                   : absl::StrCat("pj_imul(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kDivide:
        value = fl ? absl::StrCat(a(0), " / ", a(1))
                   : absl::StrCat("pj_idiv(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kRemainder:
        value = fl ? absl::StrCat(Math("fmod", t), "(", a(0), ", ", a(1), ")")
                   : absl::StrCat("pj_irem(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kPower:
        value = fl ? absl::StrCat(Math("pow", t), "(", a(0), ", ", a(1), ")")
                   : absl::StrCat("pj_ipow(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kMaximum:
        value =
            absl::StrCat(fl ? "pj_fmax(" : "pj_imax(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kMinimum:
        value =
            absl::StrCat(fl ? "pj_fmin(" : "pj_imin(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kAtan2:
        value = absl::StrCat(Math("atan2", t), "(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kAnd:
        value = absl::StrCat("(", ct, ")(", a(0), " & ", a(1), ")");
        break;
      case ExprOp::kOr:
        value = absl::StrCat("(", ct, ")(", a(0), " | ", a(1), ")");
        break;
      case ExprOp::kXor:
        value = absl::StrCat("(", ct, ")(", a(0), " ^ ", a(1), ")");
        break;
      case ExprOp::kShiftLeft:
        value = absl::StrCat("pj_shl(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kShiftRightLogical:
        // s4 shifts its 4 bits, not the sign-extended byte.
        value = t == PrimitiveType::kS4
                    ? absl::StrFormat("pj_shr_logical((pj_s8)(%s & 0xF), %s)",
                                      a(0), a(1))
                    : absl::StrCat("pj_shr_logical(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kShiftRightArithmetic:
        // u4 is held zero-extended: its sign bit for this shift is bit 3.
        value =
            t == PrimitiveType::kU4
                ? absl::StrFormat(
                      "pj_shr_arith((pj_u8)(%s & 0x8 ? %s | 0xF0 : %s), %s)",
                      a(0), a(0), a(0), a(1))
                : absl::StrCat("pj_shr_arith(", a(0), ", ", a(1), ")");
        break;
      case ExprOp::kCompare:
        if (node.total_order && IsFloat(ot)) {
          value = absl::StrFormat(
              "(pj_u8)(pj_total_order(%s) %s pj_total_order(%s))", a(0),
              CompareOperator(node.direction), a(1));
        } else {
          value = absl::StrFormat("(pj_u8)(%s %s %s)", a(0),
                                  CompareOperator(node.direction), a(1));
        }
        break;
      case ExprOp::kSelect:
        value = absl::StrFormat("%s ? %s : %s", a(0), a(1), a(2));
        break;
      case ExprOp::kClamp:
        if (fl) {
          value =
              absl::StrFormat("pj_fmin(%s, pj_fmax(%s, %s))", a(2), a(0), a(1));
        } else {
          value =
              absl::StrFormat("pj_imin(%s, pj_imax(%s, %s))", a(2), a(0), a(1));
        }
        break;
      case ExprOp::kComplex:
        return Unsupported(t);
    }
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

// The index type of a kernel whose every offset lies in [-limit, limit]:
// 32 bits when a grid-stride step past the end cannot overflow either.
const char* IndexType(int64_t limit) {
  return limit < (int64_t{1} << 31) - 1 - kMaxBlocks * kThreads ? "int"
                                                                : "long long";
}

// The largest |offset| an affine map reaches over `dims`.
int64_t MapLimit(const host::AffineMap& map, const std::vector<int64_t>& dims) {
  int64_t limit = std::abs(map.offset);
  for (size_t d = 0; d < dims.size() && d < map.strides.size(); ++d) {
    limit += std::abs(map.strides[d]) * std::max<int64_t>(dims[d] - 1, 0);
  }
  return limit;
}

// Statements splitting linear index `i` into coordinates c0..c{rank-1} of
// row-major `dims`.
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

// offset + sum(c_d * stride_d), as CUDA.
std::string MapExpression(const host::AffineMap& map, int rank) {
  std::string s = absl::StrCat(map.offset);
  for (int d = 0; d < rank && d < static_cast<int>(map.strides.size()); ++d) {
    if (map.strides[d] == 0) continue;
    absl::StrAppendFormat(&s, " + c%d * %d", d, map.strides[d]);
  }
  return s;
}

constexpr char kLoopHead[] =
    "  for (%s i = (%s)blockIdx.x * blockDim.x + threadIdx.x; i < %d;\n"
    "       i += (%s)gridDim.x * blockDim.x) {\n";

// Every array slot of `program` has a CUDA storage type; UNIMPLEMENTED
// naming the first type that has none.
absl::Status CheckSlotTypes(const host::HostProgram& program) {
  for (const host::BufferSlot& slot : program.slots) {
    if (!slot.shape.IsArray()) continue;
    const PrimitiveType type = slot.shape.element_type();
    PJRT_RETURN_IF_ERROR(CudaStorageType(type).status());
  }
  return absl::OkStatus();
}

// Statements that split a sort's position i into its row, its place p in
// the row, and the row's first element `base` (rows of n elements, element
// p of a row at base + p * inner).
std::string SortRowHead(int64_t n, int64_t inner) {
  return absl::StrFormat(
      "    const long long row = i / %dLL, p = i %% %dLL;\n"
      "    const long long base = (row / %dLL) * %dLL + row %% %dLL;\n",
      n, n, inner, n * inner, inner);
}

// What the generators of a program and of its sub-programs share: one
// source, one numbering of kernels.
struct SharedSource {
  std::string source = kPrelude;
  int kernels = 0;
  bool random_helpers = false;
};

class Generator {
 public:
  Generator(const host::HostProgram& program, SharedSource* shared)
      : program_(program), shared_(shared) {}

  // The program's launches and temporaries (its kernels go to the shared
  // source).
  absl::StatusOr<GeneratedProgram> Run() {
    for (size_t i = 0; i < program_.steps.size(); ++i) {
      const size_t first = out_.launches.size();
      absl::Status status =
          std::visit([&](const auto& s) -> absl::Status { return Emit(s); },
                     program_.steps[i]);
      const std::string& origin = i < program_.step_origins.size()
                                      ? program_.step_origins[i]
                                      : std::string();
      if (!status.ok()) {
        if (origin.empty() ||
            status.message().find(origin) != absl::string_view::npos) {
          return status;
        }
        return absl::Status(status.code(),
                            absl::StrCat(origin, ": ", status.message()));
      }
      if (origin.empty()) continue;
      for (size_t l = first; l < out_.launches.size(); ++l) {
        absl::StrAppend(&out_.launches[l].origin, " for ", origin);
      }
    }
    return std::move(out_);
  }

 private:
  std::string Name(const char* what) {
    return absl::StrFormat("pj_%s_%d", what, shared_->kernels++);
  }

  // A temporary buffer of `bytes` after the lowered program's scratch; its
  // slot number.
  int Temporary(int64_t bytes) {
    const int slot =
        static_cast<int>(program_.slots.size() + out_.temporary_offsets.size());
    out_.temporary_offsets.push_back(out_.temporary_bytes);
    out_.temporary_bytes += (bytes + 255) / 256 * 256;
    return slot;
  }

  void Add(Launch launch) { out_.launches.push_back(std::move(launch)); }

  // Writes the kernel's signature; `params` are "type name" pairs, one per
  // slot of the launch.
  void Open(Launch* launch, const std::vector<std::string>& params) {
    launch->params.clear();
    for (const std::string& p : params) {
      launch->params.push_back(p.substr(0, p.rfind(' ')));
    }
    absl::StrAppendFormat(
        &shared_->source,
        "\nextern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n",
        launch->threads * launch->threads_y, launch->kernel,
        absl::StrJoin(params, ", "));
  }

  // The input of `s` that a tiled loop stages through shared memory, and the
  // output dimension along which that input is contiguous: an input read
  // across the output's rows (stride 1 along an earlier dimension, not
  // along the last), so that the loop reads it in 32x32 tiles, coalesced
  // on both sides, instead of one strided element per thread. {-1, -1}
  // when there is none worth it.
  static std::pair<int, int> TransposedInput(const host::LoopStep& s) {
    const int rank = static_cast<int>(s.dims.size());
    if (rank < 2 || s.dims[rank - 1] < 16) return {-1, -1};
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const host::LoopInput& in = s.inputs[k];
      if (in.kind != host::LoopInput::Kind::kBuffer || in.contiguous ||
          static_cast<int>(in.map.strides.size()) != rank ||
          in.map.strides[rank - 1] == 1) {
        continue;
      }
      for (int a = rank - 2; a >= 0; --a) {
        if (in.map.strides[a] == 1 && s.dims[a] >= 16)
          return {static_cast<int>(k), a};
      }
    }
    return {-1, -1};
  }

  absl::Status Emit(const host::LoopStep& s) {
    const int64_t n = Product(s.dims);
    if (n == 0) return absl::OkStatus();
    const int rank = static_cast<int>(s.dims.size());
    int64_t limit = n;
    for (const host::LoopInput& in : s.inputs)
      limit = std::max(limit, MapLimit(in.map, s.dims));
    const char* idx = IndexType(limit);
    const auto [tiled, tiled_dim] = TransposedInput(s);
    Launch launch;
    launch.kernel = Name(tiled >= 0 ? "loop_tiled" : "loop");
    launch.blocks = BlocksFor(n);
    launch.threads = kThreads;
    PJRT_ASSIGN_OR_RETURN(std::string out_type, CudaStorageType(s.output_type));
    std::vector<std::string> params = {absl::StrCat(out_type, "* out")};
    launch.slots.push_back(s.output_slot);
    // The statements computing element `i` (coordinates c0... in scope).
    std::string body;
    std::vector<std::string> inputs;
    std::string tile_type, tile_load;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const host::LoopInput& in = s.inputs[k];
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(in.type));
      const std::string name = absl::StrCat("x", k);
      const std::string at = in.contiguous ? "i" : MapExpression(in.map, rank);
      if (in.kind == host::LoopInput::Kind::kIota) {
        std::string value;
        if (hlo::IsComplex(in.type)) {
          // The index as the real part.
          const char* part =
              in.type == hlo::PrimitiveType::kC64 ? "float" : "double";
          value = absl::StrFormat("pj_cmake((%s)(long long)(%s), (%s)0)", part,
                                  MapExpression(in.map, rank), part);
        } else {
          value = Round(in.type, absl::StrFormat("(%s)(long long)(%s)", ct,
                                                 MapExpression(in.map, rank)));
        }
        absl::StrAppendFormat(&body, "    const %s %s = %s;\n", ct, name,
                              value);
      } else {
        PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(in.type));
        params.push_back(absl::StrFormat("const %s* in%d", st, k));
        launch.slots.push_back(in.slot);
        if (static_cast<int>(k) == tiled) {
          tile_type = ct;
          tile_load = Load(in.type, absl::StrFormat("in%d[%s]", k, at));
          absl::StrAppendFormat(&body, "    const %s %s = tile[x][y];\n", ct,
                                name);
        } else {
          absl::StrAppendFormat(
              &body, "    const %s %s = %s;\n", ct, name,
              Load(in.type, absl::StrFormat("in%d[%s]", k, at)));
        }
      }
      inputs.push_back(name);
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<std::string> outputs,
                          EmitExpression(s.expr, inputs, "v", "    ", &body));
    if (outputs.size() != 1) {
      return absl::InternalError("a loop step must have one output");
    }
    absl::StrAppendFormat(&body, "    out[i] = %s;\n",
                          Store(s.output_type, outputs[0]));
    std::string& k = shared_->source;
    if (tiled < 0) {
      Open(&launch, params);
      absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
      bool needs_coordinates = false;
      for (const host::LoopInput& in : s.inputs) {
        needs_coordinates |=
            in.kind == host::LoopInput::Kind::kIota || !in.contiguous;
      }
      if (needs_coordinates)
        absl::StrAppend(&k, SplitIndex(s.dims, idx, "    "));
      absl::StrAppend(&k, body, "  }\n}\n");
    } else {
      // 32x32 tiles of output dimensions (a, last): each block loads a tile
      // of the transposed input along a (coalesced), then computes the
      // tile's elements along the last dimension (coalesced writes),
      // reading the input from shared memory. A thread covers several
      // elements of the tile (the loops stride by the block's shape).
      const int a = tiled_dim, b = rank - 1;
      const int64_t tiles_a = (s.dims[a] + 31) / 32,
                    tiles_b = (s.dims[b] + 31) / 32;
      int64_t tiles = tiles_a * tiles_b;
      for (int d = 0; d < rank; ++d) {
        if (d != a && d != b) tiles *= s.dims[d];
      }
      launch.threads = 32;
      launch.threads_y = 8;
      launch.blocks = std::min(tiles, kMaxBlocks);
      Open(&launch, params);
      absl::StrAppendFormat(&k, "  __shared__ %s tile[32][33];\n", tile_type);
      absl::StrAppendFormat(
          &k, "  for (%s t = blockIdx.x; t < %d; t += gridDim.x) {\n", idx,
          tiles);
      absl::StrAppendFormat(&k, "    %s rest = t;\n", idx);
      absl::StrAppendFormat(&k, "    const %s tb = rest %% %d; rest /= %d;\n",
                            idx, tiles_b, tiles_b);
      absl::StrAppendFormat(&k, "    const %s ta = rest %% %d; rest /= %d;\n",
                            idx, tiles_a, tiles_a);
      for (int d = rank - 1; d >= 0; --d) {
        if (d == a || d == b) continue;
        absl::StrAppendFormat(&k,
                              "    const %s c%d = rest %% %d; rest /= %d;\n",
                              idx, d, s.dims[d], s.dims[d]);
      }
      absl::StrAppend(
          &k, "    for (int y = threadIdx.y; y < 32; y += blockDim.y) {\n");
      absl::StrAppend(
          &k, "      for (int x = threadIdx.x; x < 32; x += blockDim.x) {\n");
      absl::StrAppendFormat(
          &k, "        const %s c%d = ta * 32 + x, c%d = tb * 32 + y;\n", idx,
          a, b);
      absl::StrAppendFormat(
          &k, "        if (c%d < %d && c%d < %d) tile[y][x] = %s;\n", a,
          s.dims[a], b, s.dims[b], tile_load);
      absl::StrAppend(&k, "      }\n    }\n    __syncthreads();\n");
      absl::StrAppend(
          &k, "    for (int y = threadIdx.y; y < 32; y += blockDim.y) {\n");
      absl::StrAppend(
          &k, "      for (int x = threadIdx.x; x < 32; x += blockDim.x) {\n");
      absl::StrAppendFormat(
          &k, "        const %s c%d = ta * 32 + y, c%d = tb * 32 + x;\n", idx,
          a, b);
      absl::StrAppendFormat(&k,
                            "        if (c%d >= %d || c%d >= %d) continue;\n",
                            a, s.dims[a], b, s.dims[b]);
      const std::vector<int64_t> strides = host::RowMajorStrides(s.dims);
      std::string at = "0";
      for (int d = 0; d < rank; ++d)
        absl::StrAppendFormat(&at, " + c%d * %d", d, strides[d]);
      absl::StrAppendFormat(&k, "        const %s i = %s;\n", idx, at);
      absl::StrAppend(&k, body);
      absl::StrAppend(&k, "      }\n    }\n    __syncthreads();\n  }\n}\n");
    }
    std::vector<std::string> names;
    for (const ExprNode& node : s.expr.nodes()) {
      if (node.op != ExprOp::kInput && node.op != ExprOp::kSplat) {
        names.push_back(ExprOpName(node.op));
      }
    }
    launch.origin =
        absl::StrFormat("%sloop over %s[%s] (%s)", tiled >= 0 ? "tiled " : "",
                        hlo::PrimitiveTypeName(s.output_type),
                        absl::StrJoin(s.dims, ","), absl::StrJoin(names, ", "));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // The reducer as CUDA, combining `a` and `b` of compute type `ct`.
  static std::string Combine(ExprOp op, PrimitiveType type,
                             const std::string& a, const std::string& b) {
    const bool fl = IsFloat(type);
    switch (op) {
      case ExprOp::kAdd:
        return fl ? absl::StrCat(a, " + ", b)
                  : absl::StrCat("pj_iadd(", a, ", ", b, ")");
      case ExprOp::kMultiply:
        return fl ? absl::StrCat(a, " * ", b)
                  : absl::StrCat("pj_imul(", a, ", ", b, ")");
      case ExprOp::kMaximum:
        return absl::StrCat(fl ? "pj_fmax(" : "pj_imax(", a, ", ", b, ")");
      case ExprOp::kMinimum:
        return absl::StrCat(fl ? "pj_fmin(" : "pj_imin(", a, ", ", b, ")");
      case ExprOp::kAnd:
        return absl::StrCat("(", a, " & ", b, ")");
      case ExprOp::kOr:
        return absl::StrCat("(", a, " | ", b, ")");
      default:
        return a;
    }
  }

  // The identity of the reducer in the accumulator type.
  static std::string Identity(ExprOp op, PrimitiveType type,
                              const std::string& acc) {
    const bool fl = IsFloat(type);
    switch (op) {
      case ExprOp::kAdd:
      case ExprOp::kOr:
        return absl::StrCat("(", acc, ")0");
      case ExprOp::kMultiply:
        return absl::StrCat("(", acc, ")1");
      case ExprOp::kAnd:
        return absl::StrCat("(", acc, ")~(", acc, ")0");
      case ExprOp::kMaximum:
        return fl ? absl::StrCat("-(", acc, ")__int_as_float(0x7f800000)")
                  : absl::StrCat("pj_limits<", acc, ">::lo()");
      case ExprOp::kMinimum:
        return fl ? absl::StrCat("(", acc, ")__int_as_float(0x7f800000)")
                  : absl::StrCat("pj_limits<", acc, ">::hi()");
      default:
        return absl::StrCat("(", acc, ")0");
    }
  }

  absl::Status Emit(const host::ReduceStep& s) {
    const int64_t outputs = s.outer * s.inner;
    if (outputs == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.type));
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.type));
    const char* idx = IndexType(s.outer * s.reduced * s.inner);
    Launch launch;
    launch.slots = {s.out, s.input, s.init};
    const std::vector<std::string> params = {
        absl::StrCat(st, "* out"), absl::StrCat("const ", st, "* in"),
        absl::StrCat("const ", st, "* init")};
    launch.origin = absl::StrFormat(
        "reduce %s[%d,%d,%d] to [%d,%d] (%s)", hlo::PrimitiveTypeName(s.type),
        s.outer, s.reduced, s.inner, s.outer, s.inner, ExprOpName(s.op));
    if (s.inner == 1 && s.reduced >= 64) {
      // Blocks reduce segments of rows: threads stride over a segment,
      // warps combine by shuffles, the block's warps through shared memory.
      // Narrow integers accumulate in 32 bits (the wrapped result is the
      // same). A few long rows (a whole-array sum) are cut into chunks that
      // many blocks reduce into partial values first, then a second kernel
      // reduces each row's partials: every SM takes part.
      std::string acc = ct;
      const int width = hlo::BitWidth(s.type);
      if (!IsFloat(s.type) && width < 32) {
        acc = hlo::IsSignedInteger(s.type) ? "pj_s32" : "pj_u32";
      }
      constexpr int64_t kChunk = 16384;
      const int64_t chunks =
          s.outer < 128 && s.reduced >= 4 * kChunk
              ? std::min<int64_t>((s.reduced + kChunk - 1) / kChunk, 1024)
              : 1;
      // segments: how many; begin/end: the segment's range of j in terms of
      // `seg`; value: element j as `acc`; finish: the statement that stores
      // the segment's total `acc`.
      const auto block_reduce = [&](Launch* l,
                                    const std::vector<std::string>& ps,
                                    int64_t segments, const std::string& begin,
                                    const std::string& end,
                                    const std::string& value,
                                    const std::string& finish) {
        l->threads = kThreads;
        l->blocks = std::min(segments, kMaxBlocks);
        std::string& k = shared_->source;
        Open(l, ps);
        absl::StrAppendFormat(&k, "  __shared__ %s partial[%d];\n", acc,
                              kThreads / 32);
        absl::StrAppendFormat(
            &k, "  for (%s seg = blockIdx.x; seg < %d; seg += gridDim.x) {\n",
            idx, segments);
        absl::StrAppendFormat(&k, "    %s acc = %s;\n", acc,
                              Identity(s.op, s.type, acc));
        absl::StrAppendFormat(
            &k,
            "    for (%s j = %s + threadIdx.x; j < %s; j += blockDim.x) {\n",
            idx, begin, end);
        absl::StrAppendFormat(&k, "      const %s x = %s;\n", acc, value);
        absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                              Combine(s.op, s.type, "acc", "x"));
        absl::StrAppend(&k,
                        "    for (int o = PJ_WARP / 2; o > 0; o >>= 1) {\n");
        absl::StrAppendFormat(
            &k, "      const %s y = __shfl_down_sync(0xffffffffu, acc, o);\n",
            acc);
        absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                              Combine(s.op, s.type, "acc", "y"));
        absl::StrAppend(&k,
                        "    if (threadIdx.x % PJ_WARP == 0) "
                        "partial[threadIdx.x / PJ_WARP] = acc;\n");
        absl::StrAppend(&k, "    __syncthreads();\n");
        absl::StrAppend(&k, "    if (threadIdx.x == 0) {\n");
        absl::StrAppendFormat(&k, "      acc = partial[0];\n");
        absl::StrAppendFormat(&k,
                              "      for (int w = 1; w < (int)(blockDim.x + "
                              "PJ_WARP - 1) / PJ_WARP; ++w) acc = %s;\n",
                              Combine(s.op, s.type, "acc", "partial[w]"));
        absl::StrAppendFormat(&k, "      %s\n    }\n", finish);
        absl::StrAppend(&k, "    __syncthreads();\n  }\n}\n");
      };
      const std::string finish_row = absl::StrFormat(
          "out[seg] = %s;",
          Store(s.type,
                Round(s.type, Combine(s.op, s.type, Load(s.type, "init[0]"),
                                      absl::StrCat("(", ct, ")acc")))));
      if (chunks == 1) {
        launch.kernel = Name("reduce_rows");
        block_reduce(
            &launch, params, s.outer, absl::StrFormat("seg * %d", s.reduced),
            absl::StrFormat("(seg + 1) * %d", s.reduced),
            absl::StrFormat("(%s)%s", acc, Load(s.type, "in[j]")), finish_row);
      } else {
        const int64_t per_chunk = (s.reduced + chunks - 1) / chunks;
        const int temporary = Temporary(s.outer * chunks * 8);
        Launch first;
        first.kernel = Name("reduce_chunks");
        first.slots = {temporary, s.input};
        first.origin =
            absl::StrFormat("%s, in %d chunks per row", launch.origin, chunks);
        block_reduce(
            &first,
            {absl::StrCat(acc, "* partials"),
             absl::StrCat("const ", st, "* in")},
            s.outer * chunks,
            absl::StrFormat("(seg / %d) * %d + (seg %% %d) * %d", chunks,
                            s.reduced, chunks, per_chunk),
            absl::StrFormat("(seg / %d) * %d + ((seg %% %d) * %d + %d < %d ? "
                            "(seg %% %d) * %d + %d : %d)",
                            chunks, s.reduced, chunks, per_chunk, per_chunk,
                            s.reduced, chunks, per_chunk, per_chunk, s.reduced),
            absl::StrFormat("(%s)%s", acc, Load(s.type, "in[j]")),
            "partials[seg] = acc;");
        Add(std::move(first));
        launch.kernel = Name("reduce_partials");
        launch.slots = {s.out, temporary, s.init};
        block_reduce(&launch,
                     {absl::StrCat(st, "* out"),
                      absl::StrCat("const ", acc, "* partials"),
                      absl::StrCat("const ", st, "* init")},
                     s.outer, absl::StrFormat("seg * %d", chunks),
                     absl::StrFormat("(seg + 1) * %d", chunks), "partials[j]",
                     finish_row);
      }
    } else {
      // A thread per output, reading along the reduced dimension (adjacent
      // threads read adjacent elements when inner > 1).
      launch.kernel = Name("reduce_columns");
      launch.threads = kThreads;
      launch.blocks = BlocksFor(outputs);
      std::string& k = shared_->source;
      Open(&launch, params);
      absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
      absl::StrAppendFormat(&k, "    const %s o = i / %d, c = i %% %d;\n", idx,
                            s.inner, s.inner);
      absl::StrAppendFormat(&k, "    %s acc = %s;\n", ct,
                            Load(s.type, "init[0]"));
      absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx,
                            s.reduced);
      absl::StrAppendFormat(
          &k, "      const %s x = %s;\n", ct,
          Load(s.type, absl::StrFormat("in[(o * %d + j) * %d + c]", s.reduced,
                                       s.inner)));
      // f16 and bf16 accumulate in f32, rounded once at the end.
      absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                            Combine(s.op, s.type, "acc", "x"));
      absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                            Store(s.type, "acc"));
    }
    Add(std::move(launch));
    return absl::OkStatus();
  }

  absl::Status Emit(const host::GenericReduceStep& s) {
    const int64_t outputs = s.outer * s.inner;
    if (outputs == 0) return absl::OkStatus();
    const int count = static_cast<int>(s.types.size());
    const char* idx = IndexType(s.outer * s.reduced * s.inner);
    Launch launch;
    launch.kernel = Name("reduce_generic");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(outputs);
    std::vector<std::string> params;
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
      params.push_back(absl::StrFormat("%s* out%d", st, j));
      launch.slots.push_back(s.outs[j]);
    }
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
      params.push_back(absl::StrFormat("const %s* in%d", st, j));
      launch.slots.push_back(s.inputs[j]);
    }
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
      params.push_back(absl::StrFormat("const %s* init%d", st, j));
      launch.slots.push_back(s.inits[j]);
    }
    std::string& k = shared_->source;
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
    absl::StrAppendFormat(&k, "    const %s o = i / %d, c = i %% %d;\n", idx,
                          s.inner, s.inner);
    std::vector<std::string> region_inputs;
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.types[j]));
      absl::StrAppendFormat(&k, "    %s acc%d = %s;\n", ct, j,
                            Load(s.types[j], absl::StrFormat("init%d[0]", j)));
      region_inputs.push_back(absl::StrCat("acc", j));
    }
    absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx,
                          s.reduced);
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.types[j]));
      absl::StrAppendFormat(
          &k, "      const %s x%d = %s;\n", ct, j,
          Load(s.types[j], absl::StrFormat("in%d[(o * %d + j) * %d + c]", j,
                                           s.reduced, s.inner)));
      region_inputs.push_back(absl::StrCat("x", j));
    }
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> results,
        EmitExpression(s.region, region_inputs, "r", "      ", &k));
    if (static_cast<int>(results.size()) != count) {
      return absl::InternalError(
          "a reducer region must give one value per accumulator");
    }
    for (int j = 0; j < count; ++j)
      absl::StrAppendFormat(&k, "      acc%d = %s;\n", j, results[j]);
    absl::StrAppend(&k, "    }\n");
    for (int j = 0; j < count; ++j) {
      absl::StrAppendFormat(&k, "    out%d[i] = %s;\n", j,
                            Store(s.types[j], absl::StrCat("acc", j)));
    }
    absl::StrAppend(&k, "  }\n}\n");
    launch.origin =
        absl::StrFormat("reduce [%d,%d,%d] with a %d-node reducer", s.outer,
                        s.reduced, s.inner, s.region.size());
    Add(std::move(launch));
    return absl::OkStatus();
  }

  static absl::StatusOr<std::string> WordType(int element_bytes) {
    switch (element_bytes) {
      case 1:
        return std::string("pj_u8");
      case 2:
        return std::string("pj_u16");
      case 4:
        return std::string("pj_u32");
      case 8:
        return std::string("pj_u64");
      case 16:
        return std::string("pj_u128");
      default:
        return absl::UnimplementedError(absl::StrFormat(
            "the CUDA backend moves elements of 1, 2, 4, 8 or 16 bytes, not %d",
            element_bytes));
    }
  }

  absl::Status Emit(const host::CopyStep& s) {
    const int64_t n = Product(s.dims);
    if (n == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
    const int rank = static_cast<int>(s.dims.size());
    const char* idx = IndexType(std::max(
        {n, MapLimit(s.src_map, s.dims), MapLimit(s.dst_map, s.dims)}));
    Launch launch;
    launch.kernel = Name("copy");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(n);
    launch.slots = {s.dst, s.src};
    std::string& k = shared_->source;
    Open(&launch,
         {absl::StrCat(w, "* dst"), absl::StrCat("const ", w, "* src")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
    absl::StrAppend(&k, SplitIndex(s.dims, idx, "    "));
    absl::StrAppendFormat(&k, "    dst[%s] = src[%s];\n  }\n}\n",
                          MapExpression(s.dst_map, rank),
                          MapExpression(s.src_map, rank));
    launch.origin =
        absl::StrFormat("copy [%s] of %d-byte elements",
                        absl::StrJoin(s.dims, ","), s.element_bytes);
    launch.skip_when_same_memory = s.src_map.offset == s.dst_map.offset &&
                                   s.src_map.strides == s.dst_map.strides;
    Add(std::move(launch));
    return absl::OkStatus();
  }

  absl::Status Emit(const host::FillStep& s) {
    if (s.count == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
    const char* idx = IndexType(s.count);
    Launch launch;
    launch.kernel = Name("fill");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(s.count);
    launch.slots = {s.dst, s.value};
    std::string& k = shared_->source;
    Open(&launch,
         {absl::StrCat(w, "* dst"), absl::StrCat("const ", w, "* value")});
    absl::StrAppendFormat(&k, "  const %s v = value[0];\n", w);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, s.count, idx);
    absl::StrAppend(&k, "    dst[i] = v;\n  }\n}\n");
    launch.origin = absl::StrFormat("fill %d elements", s.count);
    Add(std::move(launch));
    return absl::OkStatus();
  }

  absl::Status Emit(const host::DynamicSliceStep& s) {
    const int64_t n = Product(s.sizes);
    if (n == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
    const int rank = static_cast<int>(s.sizes.size());
    const char* idx = IndexType(std::max(n, Product(s.array_dims)));
    Launch launch;
    launch.kernel = Name(s.update ? "dynamic_update_slice" : "dynamic_slice");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(n);
    launch.slots = {s.dst, s.src};
    std::vector<std::string> params = {absl::StrCat(w, "* dst"),
                                       absl::StrCat("const ", w, "* src")};
    for (int d = 0; d < rank; ++d) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.start_types[d]));
      params.push_back(absl::StrFormat("const %s* start%d", st, d));
      launch.slots.push_back(s.start_slots[d]);
    }
    std::string& k = shared_->source;
    Open(&launch, params);
    // Starts are clamped so that the window stays inside the array.
    for (int d = 0; d < rank; ++d) {
      const int64_t room = s.array_dims[d] - s.sizes[d];
      absl::StrAppendFormat(
          &k, "  const long long t%d = (long long)start%d[0];\n", d, d);
      absl::StrAppendFormat(
          &k, "  const %s s%d = (%s)(t%d < 0 ? 0 : (t%d > %d ? %d : t%d));\n",
          idx, d, idx, d, d, room, room, d);
    }
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
    absl::StrAppend(&k, SplitIndex(s.sizes, idx, "    "));
    std::string array_at = "0";
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      array_at =
          absl::StrFormat("%s + (s%d + c%d) * %d", array_at, d, d, stride);
      stride *= s.array_dims[d];
    }
    if (s.update) {
      absl::StrAppendFormat(&k, "    dst[%s] = src[i];\n  }\n}\n", array_at);
    } else {
      absl::StrAppendFormat(&k, "    dst[i] = src[%s];\n  }\n}\n", array_at);
    }
    launch.origin = absl::StrFormat(
        "%s of [%s] from [%s]",
        s.update ? "dynamic-update-slice" : "dynamic-slice",
        absl::StrJoin(s.sizes, ","), absl::StrJoin(s.array_dims, ","));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  absl::Status Emit(const host::DotStep& s) {
    const int64_t outputs = s.batch * s.m * s.n;
    if (outputs == 0) return absl::OkStatus();
    Launch launch;
    launch.origin = absl::StrFormat(
        "dot %s%s batch %d: [%d,%d] x [%d,%d]%s%s",
        hlo::PrimitiveTypeName(s.operand_type),
        s.operand_type != s.type
            ? absl::StrCat(" into ", hlo::PrimitiveTypeName(s.type))
            : "",
        s.batch, s.m, s.k, s.k, s.n,
        s.lhs_transposed ? " (lhs transposed)" : "",
        s.rhs_transposed ? " (rhs transposed)" : "");
    if (s.operand_type == PrimitiveType::kF8E4M3FN ||
        s.operand_type == PrimitiveType::kF8E5M2) {
      return absl::UnimplementedError(absl::StrFormat(
          "a dot of %s operands does not run on the CUDA backend yet (fp8 "
          "products through cuBLASLt come later); run this program with "
          "--platform host",
          hlo::PrimitiveTypeName(s.operand_type)));
    }
    if (s.type == PrimitiveType::kF32 || s.type == PrimitiveType::kF64) {
      launch.kind = Launch::Kind::kGemm;
      launch.gemm = s;
      launch.slots = {s.out, s.lhs, s.rhs};
      Add(std::move(launch));
      return absl::OkStatus();
    }
    if (s.type != PrimitiveType::kS64 && !hlo::IsComplex(s.type))
      return Unsupported(s.type);
    // Integer products (wrapping) and complex ones: a thread per output
    // element, summing in the host's order.
    PJRT_ASSIGN_OR_RETURN(const std::string t, CudaStorageType(s.type));
    const bool wraps = s.type == PrimitiveType::kS64;
    const char* idx = IndexType(
        std::max({outputs, s.batch * s.m * s.k, s.batch * s.k * s.n}));
    launch.kernel = Name("dot");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(outputs);
    launch.slots = {s.out, s.lhs, s.rhs};
    std::string& k = shared_->source;
    Open(&launch, {absl::StrCat(t, "* out"), absl::StrCat("const ", t, "* lhs"),
                   absl::StrCat("const ", t, "* rhs")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
    absl::StrAppendFormat(
        &k, "    const %s b = i / %d, row = (i / %d) %% %d, col = i %% %d;\n",
        idx, s.m * s.n, s.n, s.m, s.n);
    absl::StrAppendFormat(&k, "    %s acc = %s;\n", t,
                          wraps ? "0" : absl::StrCat(t, "{0, 0}"));
    absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx, s.k);
    const std::string l =
        s.lhs_transposed
            ? absl::StrFormat("lhs[(b * %d + j) * %d + row]", s.k, s.m)
            : absl::StrFormat("lhs[(b * %d + row) * %d + j]", s.m, s.k);
    const std::string r =
        s.rhs_transposed
            ? absl::StrFormat("rhs[(b * %d + col) * %d + j]", s.n, s.k)
            : absl::StrFormat("rhs[(b * %d + j) * %d + col]", s.k, s.n);
    if (wraps) {
      absl::StrAppendFormat(
          &k, "      acc = pj_iadd(acc, pj_imul(%s, %s));\n    }\n", l, r);
    } else {
      absl::StrAppendFormat(&k, "      acc = acc + %s * %s;\n    }\n", l, r);
    }
    absl::StrAppend(&k, "    out[i] = acc;\n  }\n}\n");
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // A kernel converting `count` integers from slot `src` (of `from`) into
  // slot `dst` (of `to`): how 16-bit integers reach NCCL, which has no
  // such type, and come back.
  void EmitIntegerConvert(int dst, PrimitiveType to, int src,
                          PrimitiveType from, int64_t count) {
    const std::string to_type = *CudaStorageType(to),
                      from_type = *CudaStorageType(from);
    const char* idx = IndexType(count);
    Launch launch;
    launch.kernel = Name("convert");
    launch.blocks = BlocksFor(count);
    launch.slots = {dst, src};
    std::string& k = shared_->source;
    Open(&launch, {absl::StrCat(to_type, "* dst"),
                   absl::StrCat("const ", from_type, "* src")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
    absl::StrAppendFormat(&k, "    dst[i] = (%s)src[i];\n  }\n}\n", to_type);
    launch.origin =
        absl::StrFormat("%s[%d] as %s", hlo::PrimitiveTypeName(from), count,
                        hlo::PrimitiveTypeName(to));
    Add(std::move(launch));
  }

  absl::Status Emit(const host::CollectiveStep& s) {
    const bool reduces = s.kind == host::CollectiveStep::Kind::kAllReduce ||
                         s.kind == host::CollectiveStep::Kind::kReduceScatter;
    bool narrow = false;
    for (PrimitiveType t : s.types) {
      narrow |= t == PrimitiveType::kS16 || t == PrimitiveType::kU16;
    }
    if (reduces && narrow) {
      // NCCL has no 16-bit integers: the operands are widened to 32 bits
      // (sign- or zero-extended), reduced, and the results narrowed back.
      // Sums and products wrap to the same 16 bits; maximum and minimum
      // are the same values.
      host::CollectiveStep wide = s;
      const bool scatter = s.kind == host::CollectiveStep::Kind::kReduceScatter;
      const int64_t out_elements = Product(s.output_dims);
      std::vector<std::pair<int, int>> narrow_back;  // (wide result, result)
      for (size_t j = 0; j < s.types.size(); ++j) {
        const PrimitiveType t = s.types[j];
        if (t != PrimitiveType::kS16 && t != PrimitiveType::kU16) continue;
        const PrimitiveType w = t == PrimitiveType::kS16 ? PrimitiveType::kS32
                                                         : PrimitiveType::kU32;
        const int64_t in_count =
            scatter ? Product(s.input_dims) : s.operand_elements[j];
        const int64_t out_count =
            scatter ? out_elements : s.operand_elements[j];
        wide.types[j] = w;
        wide.inputs[j] = Temporary(in_count * 4);
        EmitIntegerConvert(wide.inputs[j], w, s.inputs[j], t, in_count);
        wide.outputs[j] = Temporary(out_count * 4);
        narrow_back.push_back({wide.outputs[j], static_cast<int>(j)});
      }
      PJRT_RETURN_IF_ERROR(Emit(wide));
      for (const auto& [from, j] : narrow_back) {
        EmitIntegerConvert(s.outputs[j], s.types[j], from, wide.types[j],
                           scatter ? out_elements : s.operand_elements[j]);
      }
      return absl::OkStatus();
    }
    PJRT_RETURN_IF_ERROR(CheckNcclCollective(s));
    host::CollectiveStep nccl = s;
    const bool gather = s.kind == host::CollectiveStep::Kind::kAllGather;
    const bool scatter = s.kind == host::CollectiveStep::Kind::kReduceScatter;
    const auto launch_collective = [&](const host::CollectiveStep& step) {
      Launch launch;
      launch.kind = Launch::Kind::kCollective;
      launch.collective = step;
      launch.slots = step.inputs;
      launch.slots.insert(launch.slots.end(), step.outputs.begin(),
                          step.outputs.end());
      launch.origin = absl::StrCat(s.name, " through NCCL");
      Add(std::move(launch));
    };
    if ((!gather && !scatter) ||
        (SplitsMajorDimension(s.input_dims, s.dimension) &&
         SplitsMajorDimension(s.output_dims, s.dimension))) {
      launch_collective(s);
      return absl::OkStatus();
    }
    // NCCL gathers and scatters whole blocks along the major dimension: the
    // pieces go through a temporary laid out [group size, piece...].
    const int d = static_cast<int>(s.dimension);
    const int width = hlo::ByteWidth(s.types[0]);
    const std::vector<int64_t>& piece = gather ? s.input_dims : s.output_dims;
    const std::vector<int64_t>& whole = gather ? s.output_dims : s.input_dims;
    if (piece[d] == 0) {
      launch_collective(s);  // nothing to move
      return absl::OkStatus();
    }
    const int64_t n = whole[d] / piece[d];
    std::vector<int64_t> blocks = {n};
    blocks.insert(blocks.end(), piece.begin(), piece.end());
    const int temporary = Temporary(Product(blocks) * width);
    // The whole array's strides over the [group size, piece...] space.
    const std::vector<int64_t> whole_strides = host::RowMajorStrides(whole);
    std::vector<int64_t> spread = {piece[d] * whole_strides[d]};
    spread.insert(spread.end(), whole_strides.begin(), whole_strides.end());
    host::CopyStep move;
    move.element_bytes = width;
    move.dims = blocks;
    if (gather) {
      nccl.outputs = {temporary};
      nccl.output_dims = blocks;
      nccl.dimension = 0;
      launch_collective(nccl);
      move.src = temporary;
      move.src_map = {0, host::RowMajorStrides(blocks)};
      move.dst = s.outputs[0];
      move.dst_map = {0, spread};
      return Emit(move);
    }
    move.src = s.inputs[0];
    move.src_map = {0, spread};
    move.dst = temporary;
    move.dst_map = {0, host::RowMajorStrides(blocks)};
    PJRT_RETURN_IF_ERROR(Emit(move));
    nccl.inputs = {temporary};
    nccl.input_dims = blocks;
    nccl.dimension = 0;
    launch_collective(nccl);
    return absl::OkStatus();
  }

  absl::Status Emit(const host::KernelStep& s) {
    if (const auto* gather =
            dynamic_cast<const host::GatherKernel*>(s.kernel.get())) {
      return EmitGather(*gather);
    }
    if (const auto* scatter =
            dynamic_cast<const host::ScatterKernel*>(s.kernel.get())) {
      return EmitScatter(*scatter);
    }
    if (const auto* rng =
            dynamic_cast<const host::RngBitGeneratorKernel*>(s.kernel.get())) {
      return EmitRngBitGenerator(*rng);
    }
    if (const auto* window =
            dynamic_cast<const host::ReduceWindowKernel*>(s.kernel.get())) {
      return EmitReduceWindow(*window);
    }
    if (const auto* select =
            dynamic_cast<const host::SelectAndScatterKernel*>(s.kernel.get())) {
      return EmitSelectAndScatter(*select);
    }
    if (const auto* map =
            dynamic_cast<const host::MapKernel*>(s.kernel.get())) {
      return EmitMap(*map);
    }
    if (const auto* rng =
            dynamic_cast<const host::RngKernel*>(s.kernel.get())) {
      return EmitRng(*rng);
    }
    if (const auto* conv =
            dynamic_cast<const host::ConvolutionKernelBase*>(s.kernel.get())) {
      return EmitConvolution(*conv);
    }
    if (const auto* loop =
            dynamic_cast<const host::WhileKernel*>(s.kernel.get())) {
      return EmitWhile(*loop);
    }
    if (const auto* conditional =
            dynamic_cast<const host::ConditionalKernel*>(s.kernel.get())) {
      return EmitConditional(*conditional);
    }
    if (const auto* sort =
            dynamic_cast<const host::SortKernel*>(s.kernel.get())) {
      return EmitSort(*sort);
    }
    if (const auto* topk =
            dynamic_cast<const host::TopKKernel*>(s.kernel.get())) {
      return EmitTopK(*topk);
    }
    if (const auto* int4 =
            dynamic_cast<const host::Int4Kernel*>(s.kernel.get())) {
      return EmitInt4Edge(*int4);
    }
    if (const auto* fft =
            dynamic_cast<const host::FftKernelBase*>(s.kernel.get())) {
      return EmitFft(*fft);
    }
    return absl::UnimplementedError(absl::StrFormat(
        "%s does not run on the CUDA backend yet (it runs element-wise ops, "
        "data movement, dot, reduce, map, gather, scatter, sort, top-k, "
        "rng-bit-generator, rng, the window ops, convolution, fft, while and "
        "conditional); run this program with --platform host",
        s.kernel->name));
  }

  // An fft through cuFFT: the batch of trailing blocks in one plan, then
  // for an inverse a kernel scaling the result by 1/n (cuFFT does not).
  absl::Status EmitFft(const host::FftKernelBase& f) {
    const int64_t in_count = f.batch * Product(f.in_dims);
    const int64_t out_count = f.batch * Product(f.out_dims);
    if (out_count == 0) return absl::OkStatus();
    const int element = f.wide ? 8 : 4;  // bytes of a real part
    Launch launch;
    launch.kind = Launch::Kind::kFft;
    launch.fft.type = f.type;
    launch.fft.wide = f.wide;
    launch.fft.batch = f.batch;
    launch.fft.lengths = f.lengths;
    int input = f.input;
    if (f.type == host::FftType::kIrfft && in_count > 0) {
      // cuFFT's complex-to-real transforms overwrite their input.
      host::CopyStep copy;
      copy.src = f.input;
      copy.dst = Temporary(in_count * 2 * element);
      copy.element_bytes = 2 * element;
      copy.dims = {in_count};
      copy.src_map = {0, {1}};
      copy.dst_map = {0, {1}};
      PJRT_RETURN_IF_ERROR(Emit(copy));
      input = copy.dst;
    }
    launch.slots = {f.output, input};
    static const char* const kTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
    launch.origin = absl::StrFormat(
        "cuFFT %s %s of %d x [%s]", kTypes[static_cast<int>(f.type)],
        f.wide ? "double" : "single", f.batch, absl::StrJoin(f.lengths, ","));
    Add(std::move(launch));
    if (f.type != host::FftType::kIfft && f.type != host::FftType::kIrfft) {
      return absl::OkStatus();
    }
    // Scale every real number of the result (both parts of a complex one).
    const int64_t reals = out_count * (f.type == host::FftType::kIfft ? 2 : 1);
    const char* real = f.wide ? "double" : "float";
    const char* idx = IndexType(reals);
    Launch scale;
    scale.kernel = Name("fft_scale");
    scale.blocks = BlocksFor(reals);
    scale.slots = {f.output};
    std::string& k = shared_->source;
    Open(&scale, {absl::StrCat(real, "* out")});
    absl::StrAppendFormat(&k, "  const %s factor = (%s)1 / (%s)%d;\n", real,
                          real, real, Product(f.lengths));
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, reals, idx);
    absl::StrAppend(&k, "    out[i] *= factor;\n  }\n}\n");
    scale.origin =
        absl::StrFormat("scaling an inverse fft by 1/%d", Product(f.lengths));
    Add(std::move(scale));
    return absl::OkStatus();
  }

  // s4 or u4 packed two per byte (element 2i in the high nibble) or
  // unpacked one per byte: a thread per byte of the packed side.
  absl::Status EmitInt4Edge(const host::Int4Kernel& edge) {
    const int64_t count = edge.count();
    if (count == 0) return absl::OkStatus();
    const int64_t bytes = (count + 1) / 2;
    const char* idx = IndexType(count + 1);
    Launch launch;
    launch.kernel = Name(edge.pack() ? "pack_int4" : "unpack_int4");
    launch.blocks = BlocksFor(bytes);
    launch.slots = {edge.dst(), edge.src()};
    std::string& k = shared_->source;
    Open(&launch, {"pj_u8* dst", "const pj_u8* src"});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, bytes, idx);
    if (edge.pack()) {
      absl::StrAppendFormat(
          &k,
          "    const pj_u8 low = 2 * i + 1 < %d ? (pj_u8)(src[2 * i + 1] & "
          "0xF) : 0;\n"
          "    dst[i] = (pj_u8)((src[2 * i] & 0xF) << 4 | low);\n",
          count);
    } else {
      const char* extend = edge.is_signed() ? "pj_wrap_s4" : "pj_wrap_u4";
      absl::StrAppendFormat(
          &k,
          "    dst[2 * i] = (pj_u8)%s(src[i] >> 4);\n"
          "    if (2 * i + 1 < %d) dst[2 * i + 1] = (pj_u8)%s(src[i] & 0xF);\n",
          extend, count, extend);
    }
    absl::StrAppend(&k, "  }\n}\n");
    launch.origin = edge.name;
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // The start index entry `k` of the index vector at `at`, as a signed
  // 64-bit value (u64 saturates, as on the host).
  static std::string IndexEntry(hlo::PrimitiveType type,
                                const std::string& at) {
    if (type == PrimitiveType::kU64) {
      return absl::StrFormat(
          "(indices[%s] > 0x7fffffffffffffffull ? 0x7fffffffffffffffLL : "
          "(long long)indices[%s])",
          at, at);
    }
    return absl::StrFormat("(long long)indices[%s]", at);
  }

  // The start index of operand dimension `d` for the position whose batch
  // coordinates are b0, b1... and whose index vector is at `at`, as a
  // signed 64-bit expression (as IndexReader::Start: index vector entries,
  // then batching); empty when nothing sets it (0).
  static std::string StartIndex(const host::IndexReader& r, int64_t d) {
    std::string start;
    for (int64_t e = 0; e < r.vector_size; ++e) {
      if (r.index_to_operand[e] == d) {
        start =
            IndexEntry(r.type, absl::StrFormat("at + %d", e * r.vector_stride));
      }
    }
    for (const auto& [dim, entry] : r.batching) {
      if (dim == d) start = absl::StrFormat("(long long)b%d", entry);
    }
    return start;
  }

  // A thread per output element: the element's batch position and window
  // coordinates, the position's start index (read from the index array,
  // clamped so that the slice stays inside the operand, as on the host),
  // and one load.
  absl::Status EmitGather(const host::GatherKernel& g) {
    const host::IndexReader& r = g.reader;
    const int64_t positions = Product(r.batch_sizes);
    const int64_t window = Product(g.walk.sizes);
    const int64_t n = positions * window;
    if (n == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string w, WordType(g.bytes));
    PJRT_ASSIGN_OR_RETURN(std::string it, CudaStorageType(r.type));
    int64_t index_limit = (r.vector_size - 1) * r.vector_stride;
    for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
      index_limit += (r.batch_sizes[j] - 1) * r.batch_strides[j];
    }
    const char* idx =
        IndexType(std::max({n, Product(g.operand_dims), index_limit}));
    Launch launch;
    launch.kernel = Name("gather");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(n);
    launch.slots = {g.output, g.operand, g.indices};
    std::string& k = shared_->source;
    Open(&launch,
         {absl::StrCat(w, "* out"), absl::StrCat("const ", w, "* operand"),
          absl::StrCat("const ", it, "* indices")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
    absl::StrAppendFormat(&k, "    %s e = i %% %d, p = i / %d;\n", idx, window,
                          window);
    for (int j = static_cast<int>(r.batch_sizes.size()) - 1; j >= 0; --j) {
      absl::StrAppendFormat(&k, "    const %s b%d = p %% %d; p /= %d;\n", idx,
                            j, r.batch_sizes[j], r.batch_sizes[j]);
    }
    for (int d = static_cast<int>(g.walk.sizes.size()) - 1; d >= 0; --d) {
      absl::StrAppendFormat(&k, "    const %s w%d = e %% %d; e /= %d;\n", idx,
                            d, g.walk.sizes[d], g.walk.sizes[d]);
    }
    std::string at = "0", src = "0", dst = "0";
    for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
      absl::StrAppendFormat(&at, " + b%d * %d", j, r.batch_strides[j]);
      absl::StrAppendFormat(&dst, " + b%d * %d", j, g.out_batch_strides[j]);
    }
    for (size_t d = 0; d < g.walk.sizes.size(); ++d) {
      absl::StrAppendFormat(&src, " + w%d * %d", d, g.walk.src_strides[d]);
      absl::StrAppendFormat(&dst, " + w%d * %d", d, g.walk.dst_strides[d]);
    }
    absl::StrAppendFormat(&k, "    const %s at = %s;\n    %s src = %s;\n", idx,
                          at, idx, src);
    for (size_t d = 0; d < g.operand_dims.size(); ++d) {
      const std::string start = StartIndex(r, static_cast<int64_t>(d));
      if (start.empty()) continue;  // 0, which the clamp keeps
      const int64_t room = g.operand_dims[d] - g.slice_sizes[d];
      absl::StrAppendFormat(
          &k,
          "    { const long long s = %s;\n"
          "      src += (%s)(s < 0 ? 0 : (s > %d ? %d : s)) * %d; }\n",
          start, idx, room, room, g.operand_strides[d]);
    }
    absl::StrAppendFormat(&k, "    out[%s] = operand[src];\n  }\n}\n", dst);
    launch.origin =
        absl::StrFormat("gather of %d slices of %d %d-byte elements", positions,
                        window, g.bytes);
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // outputs = operands (a copy kernel each, skipped when the output is the
  // operand's own memory), then the updates in the host kernel's order:
  // a thread per first window coordinate when windows of different
  // positions can meet only at the same window coordinates (the host's
  // `parallel`), else one thread, each going through every position in
  // order. Results are those of the host, bit for bit, for every combiner.
  absl::Status EmitScatter(const host::ScatterKernel& sc) {
    const int n = static_cast<int>(sc.types.size());
    std::vector<std::string> storage(n), words(n);
    for (int i = 0; i < n; ++i) {
      PJRT_ASSIGN_OR_RETURN(storage[i], CudaStorageType(sc.types[i]));
      const int width = hlo::ByteWidth(sc.types[i]);
      PJRT_ASSIGN_OR_RETURN(words[i], WordType(width));
      host::CopyStep copy;
      copy.dst = sc.outputs[i];
      copy.src = sc.inputs[i];
      copy.element_bytes = width;
      copy.dims = {sc.operand_bytes[i] / width};
      copy.src_map = {0, {1}};
      copy.dst_map = {0, {1}};
      PJRT_RETURN_IF_ERROR(Emit(copy));
    }
    const host::IndexReader& r = sc.reader;
    const int64_t positions = Product(r.batch_sizes);
    if (positions == 0 || Product(sc.walk.sizes) == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string it, CudaStorageType(r.type));
    const int rank = static_cast<int>(sc.walk.sizes.size());
    const int64_t first = rank == 0 ? 1 : sc.walk.sizes[0];
    const int64_t chunks = sc.parallel ? first : 1;
    Launch launch;
    launch.kernel = Name("scatter");
    launch.threads = static_cast<int>(std::min<int64_t>(kThreads, chunks));
    launch.blocks = BlocksFor(chunks, launch.threads);
    std::vector<std::string> params;
    for (int i = 0; i < n; ++i) {
      launch.slots.push_back(sc.outputs[i]);
      params.push_back(absl::StrFormat("%s* out%d", storage[i], i));
    }
    for (int i = 0; i < n; ++i) {
      launch.slots.push_back(sc.updates[i]);
      params.push_back(absl::StrFormat("const %s* upd%d", storage[i], i));
    }
    launch.slots.push_back(sc.indices);
    params.push_back(absl::StrCat("const ", it, "* indices"));
    std::string& k = shared_->source;
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", chunks,
                          "long long");
    absl::StrAppendFormat(&k, "    for (long long p = 0; p < %d; ++p) {\n",
                          positions);
    absl::StrAppend(&k, "      long long q = p;\n");
    for (int j = static_cast<int>(r.batch_sizes.size()) - 1; j >= 0; --j) {
      absl::StrAppendFormat(&k,
                            "      const long long b%d = q %% %d; q /= %d;\n",
                            j, r.batch_sizes[j], r.batch_sizes[j]);
    }
    std::string at = "0", src = "0";
    for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
      absl::StrAppendFormat(&at, " + b%d * %d", j, r.batch_strides[j]);
      absl::StrAppendFormat(&src, " + b%d * %d", j, sc.update_batch_strides[j]);
    }
    absl::StrAppendFormat(&k, "      const long long at = %s;\n", at);
    absl::StrAppend(&k, "      long long dst = 0;\n      bool valid = true;\n");
    for (size_t d = 0; d < sc.operand_dims.size(); ++d) {
      const std::string start = StartIndex(r, static_cast<int64_t>(d));
      if (start.empty()) continue;  // 0, always inside
      // A whole window that does not fit is skipped (XLA).
      absl::StrAppendFormat(&k,
                            "      { const long long s = %s;\n"
                            "        valid = valid && s >= 0 && s <= %d;\n"
                            "        dst += s * %d; }\n",
                            start, sc.operand_dims[d] - sc.extent[d],
                            sc.operand_strides[d]);
    }
    absl::StrAppendFormat(
        &k, "      if (!valid) continue;\n      const long long src = %s;\n",
        src);
    std::string indent = "      ", s_at = "src", t_at = "dst";
    for (int d = 0; d < rank; ++d) {
      if (d == 0 && sc.parallel) {
        absl::StrAppendFormat(&k, "%s{ const long long w0 = i;\n", indent);
      } else {
        absl::StrAppendFormat(&k,
                              "%sfor (long long w%d = 0; w%d < %d; ++w%d) {\n",
                              indent, d, d, sc.walk.sizes[d], d);
      }
      indent += "  ";
      absl::StrAppendFormat(&s_at, " + w%d * %d", d, sc.walk.src_strides[d]);
      absl::StrAppendFormat(&t_at, " + w%d * %d", d, sc.walk.dst_strides[d]);
    }
    absl::StrAppendFormat(&k, "%sconst long long s = %s, t = %s;\n", indent,
                          s_at, t_at);
    const PrimitiveType t0 = sc.types[0];
    if (sc.combiner == host::Combiner::kReplace) {
      absl::StrAppendFormat(&k, "%sout0[t] = upd0[s];\n", indent);
    } else if (sc.combiner == host::Combiner::kAdd) {
      if (t0 == PrimitiveType::kPred) {
        absl::StrAppendFormat(
            &k, "%sout0[t] = (pj_u8)((out0[t] | upd0[s]) != 0);\n", indent);
      } else if (IsFloat(t0)) {
        absl::StrAppendFormat(&k, "%sout0[t] = %s;\n", indent,
                              Store(t0, absl::StrCat(Load(t0, "out0[t]"), " + ",
                                                     Load(t0, "upd0[s]"))));
      } else {
        absl::StrAppendFormat(&k,
                              "%sout0[t] = pj_iadd<%s>(out0[t], upd0[s]);\n",
                              indent, storage[0]);
      }
    } else {
      std::vector<std::string> inputs;
      for (int i = 0; i < n; ++i) {
        PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sc.types[i]));
        absl::StrAppendFormat(
            &k, "%sconst %s c%d = %s;\n", indent, ct, i,
            Load(sc.types[i], absl::StrFormat("out%d[t]", i)));
        inputs.push_back(absl::StrCat("c", i));
      }
      for (int i = 0; i < n; ++i) {
        PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sc.types[i]));
        absl::StrAppendFormat(
            &k, "%sconst %s u%d = %s;\n", indent, ct, i,
            Load(sc.types[i], absl::StrFormat("upd%d[s]", i)));
        inputs.push_back(absl::StrCat("u", i));
      }
      PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                            EmitExpression(sc.region, inputs, "v", indent, &k));
      for (int i = 0; i < n; ++i) {
        absl::StrAppendFormat(&k, "%sout%d[t] = %s;\n", indent, i,
                              Store(sc.types[i], results[i]));
      }
    }
    for (int d = 0; d < rank; ++d) {
      indent.resize(indent.size() - 2);
      absl::StrAppendFormat(&k, "%s}\n", indent);
    }
    absl::StrAppend(&k, "    }\n  }\n}\n");
    launch.origin = absl::StrFormat("scatter of %d windows of %d elements",
                                    positions, Product(sc.walk.sizes));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // ThreeFry-2x32 and Philox-4x32, as the host computes them
  // (kernel_random.cc), emitted once per program.
  void EmitRandomHelpers() {
    if (shared_->random_helpers) return;
    shared_->random_helpers = true;
    absl::StrAppend(&shared_->source, R"(
__device__ __forceinline__ unsigned pj_rotl32(unsigned v, int d) {
  return (v << d) | (v >> (32 - d));
}
__device__ __forceinline__ void pj_threefry2x32(unsigned k0, unsigned k1, unsigned* x0,
                                                unsigned* x1) {
  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const unsigned ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  unsigned a = *x0 + ks[0], b = *x1 + ks[1];
  for (int g = 0; g < 5; ++g) {
    for (int r = 0; r < 4; ++r) {
      a += b;
      b = pj_rotl32(b, rot[(g % 2) * 4 + r]) ^ a;
    }
    a += ks[(g + 1) % 3];
    b += ks[(g + 2) % 3] + (unsigned)(g + 1);
  }
  *x0 = a;
  *x1 = b;
}
__device__ __forceinline__ void pj_philox_block(pj_u64 key, pj_u64 low, pj_u64 high,
                                                pj_u64 i, unsigned x[4]) {
  const pj_u64 l = low + i;
  const pj_u64 h = high + (l < low ? 1 : 0);
  x[0] = (unsigned)l;
  x[1] = (unsigned)(l >> 32);
  x[2] = (unsigned)h;
  x[3] = (unsigned)(h >> 32);
  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const pj_u64 p0 = (pj_u64)x[0] * 0xD2511F53u;
    const pj_u64 p1 = (pj_u64)x[2] * 0xCD9E8D57u;
    const unsigned y0 = (unsigned)(p1 >> 32) ^ x[1] ^ k0;
    const unsigned y2 = (unsigned)(p0 >> 32) ^ x[3] ^ k1;
    x[0] = y0;
    x[1] = (unsigned)p1;
    x[2] = y2;
    x[3] = (unsigned)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
)");
  }

  // The bits (a thread per Philox block, or per ThreeFry element), then,
  // in a second kernel (the state may be the donated input's memory), the
  // updated state.
  absl::Status EmitRngBitGenerator(const host::RngBitGeneratorKernel& g) {
    const int64_t n = Product(g.dims);
    PJRT_ASSIGN_OR_RETURN(std::string w, WordType(g.bytes));
    EmitRandomHelpers();
    const int rank = static_cast<int>(g.dims.size());
    std::vector<int64_t> half = g.dims;
    if (rank > 0) half[g.split] = (g.dims[g.split] + 1) / 2;
    const int64_t half_count = rank == 0 ? 1 : Product(half);
    const bool wide = g.bytes == 8;
    const int64_t blocks = ((wide ? 2 * n : n) + 3) / 4;
    const int64_t units = g.philox ? blocks : n;
    std::string& k = shared_->source;
    if (units > 0) {
      const char* idx = IndexType(std::max(units, 4 * blocks));
      Launch launch;
      launch.kernel = Name("rng_bits");
      launch.threads = kThreads;
      launch.blocks = BlocksFor(units);
      launch.slots = {g.output, g.state_in};
      Open(&launch, {absl::StrCat(w, "* out"), "const pj_u64* state"});
      absl::StrAppendFormat(
          &k, "  const pj_u64 key = state[0], counter = state[1];\n");
      absl::StrAppendFormat(&k, kLoopHead, idx, idx, units, idx);
      if (g.philox) {
        absl::StrAppendFormat(&k,
                              "    unsigned x[4];\n    pj_philox_block(key, "
                              "counter, state[%d], i, x);\n",
                              g.state_words == 3 ? 2 : 0);
        if (wide) {
          absl::StrAppendFormat(
              &k,
              "    for (int j = 0; j < 2; ++j) {\n"
              "      if (2 * i + j < %d) out[2 * i + j] = (pj_u64)x[2 * j] | "
              "((pj_u64)x[2 * j + 1] << 32);\n    }\n",
              n);
        } else {
          absl::StrAppendFormat(
              &k,
              "    for (int j = 0; j < 4; ++j) {\n"
              "      if (4 * i + j < %d) out[4 * i + j] = (%s)x[j];\n    }\n",
              n, w);
        }
      } else if (wide) {
        absl::StrAppend(
            &k,
            "    const pj_u64 c = counter + (pj_u64)i;\n"
            "    unsigned x0 = (unsigned)c, x1 = (unsigned)(c >> 32);\n"
            "    pj_threefry2x32((unsigned)key, (unsigned)(key >> 32), &x0, "
            "&x1);\n"
            "    out[i] = (pj_u64)x0 | ((pj_u64)x1 << 32);\n");
      } else {
        // Two outputs per block, the shape halved along `split`.
        absl::StrAppend(&k, SplitIndex(g.dims, idx, "    "));
        const std::vector<int64_t> half_strides = host::RowMajorStrides(half);
        std::string block = "0";
        std::string which = "0";
        for (int d = 0; d < rank; ++d) {
          if (d == g.split) {
            absl::StrAppendFormat(&block, " + (c%d / 2) * %d", d,
                                  half_strides[d]);
            which = absl::StrFormat("(c%d %% 2)", d);
          } else {
            absl::StrAppendFormat(&block, " + c%d * %d", d, half_strides[d]);
          }
        }
        absl::StrAppendFormat(
            &k,
            "    const pj_u64 c = counter + (pj_u64)(%s);\n"
            "    unsigned x0 = (unsigned)c, x1 = (unsigned)(c >> 32);\n"
            "    pj_threefry2x32((unsigned)key, (unsigned)(key >> 32), &x0, "
            "&x1);\n"
            "    out[i] = (%s)(%s == 0 ? x0 : x1);\n",
            block, w, which);
      }
      absl::StrAppend(&k, "  }\n}\n");
      launch.origin =
          absl::StrFormat("rng-bit-generator (%s) of %d %d-byte elements",
                          g.philox ? "philox" : "three_fry", n, g.bytes);
      Add(std::move(launch));
    }
    Launch state;
    state.kernel = Name("rng_state");
    state.threads = 1;
    state.blocks = 1;
    state.slots = {g.state_out, g.state_in};
    Open(&state, {"pj_u64* out", "const pj_u64* in"});
    absl::StrAppendFormat(&k, "  pj_u64 s[3] = {in[0], in[1], %s};\n",
                          g.state_words == 3 ? "in[2]" : "0");
    if (g.philox) {
      absl::StrAppendFormat(&k,
                            "  const pj_u64 low = s[1];\n"
                            "  s[1] = low + %dull;\n",
                            blocks);
      if (g.state_words == 3)
        absl::StrAppend(&k, "  s[2] += s[1] < low ? 1 : 0;\n");
    } else {
      absl::StrAppendFormat(&k, "  s[1] += %dull;\n", wide ? n : half_count);
    }
    absl::StrAppendFormat(&k,
                          "  for (int j = 0; j < %d; ++j) out[j] = s[j];\n}\n",
                          g.state_words);
    state.origin = "rng-bit-generator's state";
    Add(std::move(state));
    return absl::OkStatus();
  }

  // A thread per output: the initial values, then each operand element the
  // window covers (in the window's row-major order, padding and holes
  // between base-dilated elements skipped), combined through the region,
  // as the host does.
  absl::Status EmitReduceWindow(const host::ReduceWindowKernel& rw) {
    const int64_t total = Product(rw.out_dims);
    if (total == 0) return absl::OkStatus();
    const int n = static_cast<int>(rw.types.size());
    const host::WindowGeometry& g = rw.geometry;
    const int rank = static_cast<int>(g.in_dims.size());
    std::vector<std::string> storage(n), compute(n);
    for (int j = 0; j < n; ++j) {
      PJRT_ASSIGN_OR_RETURN(storage[j], CudaStorageType(rw.types[j]));
      PJRT_ASSIGN_OR_RETURN(compute[j], ComputeType(rw.types[j]));
    }
    const char* idx = IndexType(std::max(total, Product(g.in_dims)));
    Launch launch;
    launch.kernel = Name("reduce_window");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(total);
    std::vector<std::string> params;
    for (int j = 0; j < n; ++j) {
      launch.slots.push_back(rw.outputs[j]);
      params.push_back(absl::StrFormat("%s* out%d", storage[j], j));
    }
    for (int j = 0; j < n; ++j) {
      launch.slots.push_back(rw.inputs[j]);
      params.push_back(absl::StrFormat("const %s* in%d", storage[j], j));
    }
    for (int j = 0; j < n; ++j) {
      launch.slots.push_back(rw.inits[j]);
      params.push_back(absl::StrFormat("const %s* init%d", storage[j], j));
    }
    std::string& k = shared_->source;
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, total, idx);
    absl::StrAppend(&k, SplitIndex(rw.out_dims, idx, "    "));
    for (int j = 0; j < n; ++j) {
      absl::StrAppendFormat(&k, "    %s a%d = %s;\n", compute[j], j,
                            Load(rw.types[j], absl::StrFormat("init%d[0]", j)));
    }
    std::string indent = "    ", offset = "0";
    for (int d = 0; d < rank; ++d) {
      const hlo::WindowDimension& wd = g.window[d];
      absl::StrAppendFormat(&k,
                            "%sfor (long long w%d = 0; w%d < %d; ++w%d) {\n",
                            indent, d, d, wd.size, d);
      indent += "  ";
      absl::StrAppendFormat(
          &k, "%sconst long long p%d = (long long)c%d * %d + w%d * %d - %d;\n",
          indent, d, d, wd.stride, d, wd.window_dilation, wd.padding_low);
      if (wd.base_dilation != 1) {
        absl::StrAppendFormat(&k,
                              "%sif (p%d < 0 || p%d %% %d != 0) continue;\n",
                              indent, d, d, wd.base_dilation);
        absl::StrAppendFormat(&k, "%sconst long long x%d = p%d / %d;\n", indent,
                              d, d, wd.base_dilation);
      } else {
        absl::StrAppendFormat(
            &k, "%sif (p%d < 0) continue;\n%sconst long long x%d = p%d;\n",
            indent, d, indent, d, d);
      }
      absl::StrAppendFormat(&k, "%sif (x%d >= %d) continue;\n", indent, d,
                            g.in_dims[d]);
      absl::StrAppendFormat(&offset, " + x%d * %d", d, g.in_strides[d]);
    }
    absl::StrAppendFormat(&k, "%sconst long long at = %s;\n", indent, offset);
    std::vector<std::string> inputs;
    for (int j = 0; j < n; ++j) inputs.push_back(absl::StrCat("a", j));
    for (int j = 0; j < n; ++j) {
      absl::StrAppendFormat(&k, "%sconst %s e%d = %s;\n", indent, compute[j], j,
                            Load(rw.types[j], absl::StrFormat("in%d[at]", j)));
      inputs.push_back(absl::StrCat("e", j));
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                          EmitExpression(rw.region, inputs, "v", indent, &k));
    for (int j = 0; j < n; ++j) {
      absl::StrAppendFormat(&k, "%sa%d = %s;\n", indent, j, results[j]);
    }
    for (int d = 0; d < rank; ++d) {
      indent.resize(indent.size() - 2);
      absl::StrAppendFormat(&k, "%s}\n", indent);
    }
    for (int j = 0; j < n; ++j) {
      absl::StrAppendFormat(&k, "    out%d[i] = %s;\n", j,
                            Store(rw.types[j], absl::StrCat("a", j)));
    }
    absl::StrAppend(&k, "  }\n}\n");
    launch.origin = absl::StrFormat("reduce-window over [%s] into [%s]",
                                    absl::StrJoin(g.in_dims, ","),
                                    absl::StrJoin(rw.out_dims, ","));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // Two kernels, results the host's bit for bit: a thread per window
  // selects its element (into a temporary), then a thread per operand
  // element starts from the initial value and applies `scatter` for each
  // window that selected it, in the windows' order.
  absl::Status EmitSelectAndScatter(const host::SelectAndScatterKernel& ss) {
    const host::WindowGeometry& g = ss.geometry;
    const int rank = static_cast<int>(g.in_dims.size());
    const int64_t count = Product(g.in_dims);
    const int64_t windows = Product(ss.source_dims);
    if (count == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string op_storage,
                          CudaStorageType(ss.operand_type));
    PJRT_ASSIGN_OR_RETURN(std::string op_compute, ComputeType(ss.operand_type));
    PJRT_ASSIGN_OR_RETURN(std::string src_storage,
                          CudaStorageType(ss.source_type));
    PJRT_ASSIGN_OR_RETURN(std::string src_compute, ComputeType(ss.source_type));
    const int selected = Temporary(std::max<int64_t>(windows, 1) * 8);
    std::string& k = shared_->source;
    if (windows > 0) {
      const char* idx = IndexType(std::max(windows, count));
      Launch launch;
      launch.kernel = Name("select");
      launch.threads = kThreads;
      launch.blocks = BlocksFor(windows);
      launch.slots = {selected, ss.operand};
      Open(&launch, {"long long* selected",
                     absl::StrCat("const ", op_storage, "* operand")});
      absl::StrAppendFormat(&k, kLoopHead, idx, idx, windows, idx);
      absl::StrAppend(&k, SplitIndex(ss.source_dims, idx, "    "));
      absl::StrAppend(&k, "    long long sel = -1;\n");
      std::string indent = "    ", offset = "0";
      for (int d = 0; d < rank; ++d) {
        const hlo::WindowDimension& wd = g.window[d];
        absl::StrAppendFormat(&k,
                              "%sfor (long long w%d = 0; w%d < %d; ++w%d) {\n",
                              indent, d, d, wd.size, d);
        indent += "  ";
        absl::StrAppendFormat(
            &k,
            "%sconst long long p%d = (long long)c%d * %d + w%d * %d - %d;\n"
            "%sif (p%d < 0 || p%d %% %d != 0) continue;\n"
            "%sconst long long x%d = p%d / %d;\n"
            "%sif (x%d >= %d) continue;\n",
            indent, d, d, wd.stride, d, wd.window_dilation, wd.padding_low,
            indent, d, d, wd.base_dilation, indent, d, d, wd.base_dilation,
            indent, d, g.in_dims[d]);
        absl::StrAppendFormat(&offset, " + x%d * %d", d, g.in_strides[d]);
      }
      absl::StrAppendFormat(&k, "%sconst long long at = %s;\n", indent, offset);
      absl::StrAppendFormat(&k, "%sif (sel < 0) {\n%s  sel = at;\n%s} else {\n",
                            indent, indent, indent);
      absl::StrAppendFormat(&k, "%s  const %s a = %s;\n%s  const %s b = %s;\n",
                            indent, op_compute,
                            Load(ss.operand_type, "operand[sel]"), indent,
                            op_compute, Load(ss.operand_type, "operand[at]"));
      PJRT_ASSIGN_OR_RETURN(
          std::vector<std::string> keep,
          EmitExpression(ss.select, {"a", "b"}, "v", indent + "  ", &k));
      absl::StrAppendFormat(&k, "%s  if (!%s) sel = at;\n%s}\n", indent,
                            keep[0], indent);
      for (int d = 0; d < rank; ++d) {
        indent.resize(indent.size() - 2);
        absl::StrAppendFormat(&k, "%s}\n", indent);
      }
      absl::StrAppend(&k, "    selected[i] = sel;\n  }\n}\n");
      launch.origin = absl::StrFormat(
          "select-and-scatter's selection in %d windows", windows);
      Add(std::move(launch));
    }
    const char* idx = IndexType(std::max(windows, count));
    Launch launch;
    launch.kernel = Name("select_and_scatter");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(count);
    launch.slots = {ss.output, ss.source, ss.init, selected};
    Open(&launch, {absl::StrCat(src_storage, "* out"),
                   absl::StrCat("const ", src_storage, "* source"),
                   absl::StrCat("const ", src_storage, "* init"),
                   "const long long* selected"});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
    absl::StrAppend(&k, SplitIndex(g.in_dims, idx, "    "));
    absl::StrAppendFormat(&k, "    %s acc = %s;\n", src_compute,
                          Load(ss.source_type, "init[0]"));
    // The windows whose element c sits at window coordinate w: o * stride +
    // w * window_dilation == c * base_dilation + padding_low.
    const std::vector<int64_t> source_strides =
        host::RowMajorStrides(ss.source_dims);
    std::string indent = "    ", window_at = "0";
    for (int d = 0; d < rank; ++d) {
      const hlo::WindowDimension& wd = g.window[d];
      absl::StrAppendFormat(
          &k, "%sconst long long q%d = (long long)c%d * %d + %d;\n", indent, d,
          d, wd.base_dilation, wd.padding_low);
      absl::StrAppendFormat(
          &k,
          "%sconst long long lo%d = pj_ceildiv(q%d - %d, %d), hi%d = "
          "pj_floordiv(q%d, %d);\n",
          indent, d, d, (wd.size - 1) * wd.window_dilation, wd.stride, d, d,
          wd.stride);
      absl::StrAppendFormat(&k,
                            "%sfor (long long o%d = lo%d < 0 ? 0 : lo%d; o%d "
                            "<= hi%d && o%d < %d; "
                            "++o%d) {\n",
                            indent, d, d, d, d, d, d, ss.source_dims[d], d);
      indent += "  ";
      absl::StrAppendFormat(
          &k,
          "%sconst long long r%d = q%d - o%d * %d;\n"
          "%sif (r%d %% %d != 0 || r%d / %d >= %d) continue;\n",
          indent, d, d, d, wd.stride, indent, d, wd.window_dilation, d,
          wd.window_dilation, wd.size);
      absl::StrAppendFormat(&window_at, " + o%d * %d", d, source_strides[d]);
    }
    absl::StrAppendFormat(&k, "%sconst long long e = %s;\n", indent, window_at);
    absl::StrAppendFormat(&k, "%sif (selected[e] == (long long)i) {\n", indent);
    absl::StrAppendFormat(&k, "%s  const %s s = %s;\n", indent, src_compute,
                          Load(ss.source_type, "source[e]"));
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> sum,
        EmitExpression(ss.scatter, {"acc", "s"}, "v", indent + "  ", &k));
    absl::StrAppendFormat(&k, "%s  acc = %s;\n%s}\n", indent, sum[0], indent);
    for (int d = 0; d < rank; ++d) {
      indent.resize(indent.size() - 2);
      absl::StrAppendFormat(&k, "%s}\n", indent);
    }
    absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                          Store(ss.source_type, "acc"));
    launch.origin = absl::StrFormat("select-and-scatter into [%s]",
                                    absl::StrJoin(g.in_dims, ","));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // A thread per element: the region on the inputs' elements.
  absl::Status EmitMap(const host::MapKernel& m) {
    if (m.count == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string out_storage,
                          CudaStorageType(m.output_type));
    const char* idx = IndexType(m.count);
    Launch launch;
    launch.kernel = Name("map");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(m.count);
    launch.slots = {m.output};
    std::vector<std::string> params = {absl::StrCat(out_storage, "* out")};
    for (size_t j = 0; j < m.inputs.size(); ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(m.types[j]));
      launch.slots.push_back(m.inputs[j]);
      params.push_back(absl::StrFormat("const %s* in%d", st, j));
    }
    std::string& k = shared_->source;
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, m.count, idx);
    std::vector<std::string> inputs;
    for (size_t j = 0; j < m.inputs.size(); ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(m.types[j]));
      absl::StrAppendFormat(&k, "    const %s x%d = %s;\n", ct, j,
                            Load(m.types[j], absl::StrFormat("in%d[i]", j)));
      inputs.push_back(absl::StrCat("x", j));
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                          EmitExpression(m.expr, inputs, "v", "    ", &k));
    absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                          Store(m.output_type, results[0]));
    launch.origin = absl::StrFormat("map over %d elements", m.count);
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // A stable merge sort of `rows` rows of `n` positions, as the host's
  // bottom-up merge sort: widths 1, 2, 4...; in each pass a thread per
  // position finds where its element lands in the merged pair of runs by
  // a binary search of the other run (an element of the left run goes
  // after the right run's elements less than it, one of the right run
  // after the left run's elements not greater than it). For a comparator
  // that is a strict weak order, as XLA requires, the result is the
  // stable sort, which is the host's; with any other comparator every
  // position still stays within its row. `less` is the name of a device
  // function (long long base, long long a, long long b, operands...)
  // comparing the elements at positions a and b of the row at `base`
  // (element position p at base + p * inner). Returns the temporary slot
  // that holds, for each row, the sorted positions (long long).
  int EmitMergeSort(int64_t rows, int64_t n, int64_t inner,
                    const std::string& less, const std::vector<int>& slots,
                    const std::vector<std::string>& params,
                    const std::string& what) {
    const int64_t count = rows * n;
    const int perm[2] = {Temporary(count * 8), Temporary(count * 8)};
    std::string& k = shared_->source;
    std::vector<std::string> names;
    for (const std::string& param : params) {
      names.push_back(param.substr(param.rfind(' ') + 1));
    }
    const std::string args = absl::StrJoin(names, ", ");
    {
      // Both buffers start as the identity, so that any position a pass
      // leaves unwritten (an inconsistent comparator) is still in the row.
      Launch launch;
      launch.kernel = Name("sort_start");
      launch.blocks = BlocksFor(count);
      launch.slots = {perm[0], perm[1]};
      Open(&launch, {"long long* a", "long long* b"});
      absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                            "long long");
      absl::StrAppendFormat(
          &k, "    a[i] = i %% %dLL;\n    b[i] = a[i];\n  }\n}\n", n);
      launch.origin = absl::StrFormat("%s: identity permutations", what);
      Add(std::move(launch));
    }
    int from = 0;
    for (int64_t width = 1; width < n; width *= 2) {
      Launch launch;
      launch.kernel = Name("sort_merge");
      launch.blocks = BlocksFor(count);
      launch.slots = {perm[from], perm[1 - from]};
      launch.slots.insert(launch.slots.end(), slots.begin(), slots.end());
      std::vector<std::string> all = {"const long long* src", "long long* dst"};
      all.insert(all.end(), params.begin(), params.end());
      Open(&launch, all);
      absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                            "long long");
      absl::StrAppend(&k, SortRowHead(n, inner));
      absl::StrAppendFormat(
          &k,
          "    const long long* s = src + row * %dLL;\n"
          "    const long long lo = p / %dLL * %dLL;\n"
          "    const long long mid = lo + %dLL < %dLL ? lo + %dLL : %dLL;\n"
          "    const long long hi = lo + %dLL < %dLL ? lo + %dLL : %dLL;\n"
          "    const long long x = s[p];\n"
          "    long long at = p;\n"
          "    if (p < mid) {\n"
          "      long long first = mid, left = hi - mid;\n"
          "      while (left > 0) {\n"
          "        const long long half = left / 2, j = first + half;\n"
          "        if (%s(base, s[j], x, %s)) { first = j + 1; left -= half + "
          "1; }\n"
          "        else { left = half; }\n"
          "      }\n"
          "      at = p + (first - mid);\n"
          "    } else {\n"
          "      long long first = lo, left = mid - lo;\n"
          "      while (left > 0) {\n"
          "        const long long half = left / 2, j = first + half;\n"
          "        if (!%s(base, x, s[j], %s)) { first = j + 1; left -= half + "
          "1; }\n"
          "        else { left = half; }\n"
          "      }\n"
          "      at = (p - mid) + first;\n"
          "    }\n"
          "    dst[row * %dLL + at] = x;\n  }\n}\n",
          n, 2 * width, 2 * width, width, n, width, n, 2 * width, n, 2 * width,
          n, less, args, less, args, n);
      launch.origin = absl::StrFormat("%s: merge runs of %d", what, width);
      Add(std::move(launch));
      from = 1 - from;
    }
    return perm[from];
  }

  // sort: the comparator as a device function, the merge sort of
  // positions, then every operand gathered through the permutation.
  absl::Status EmitSort(const host::SortKernel& sort) {
    const int64_t rows = sort.outer * sort.inner;
    const int64_t count = rows * sort.length;
    if (count == 0) return absl::OkStatus();
    if (!sort.has_comparator) {
      return absl::UnimplementedError(
          "this sort's comparator has no scalar form for the CUDA backend; "
          "run this program with --platform host");
    }
    std::string& k = shared_->source;
    std::vector<std::string> params;
    std::vector<std::string> storage;
    for (size_t j = 0; j < sort.types.size(); ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(sort.types[j]));
      storage.push_back(st);
      params.push_back(absl::StrFormat("const %s* in%d", st, j));
    }
    const std::string less = Name("sort_less");
    absl::StrAppendFormat(
        &k,
        "\n__device__ __forceinline__ bool %s(long long base, long long a, "
        "long long b, %s) {\n",
        less, absl::StrJoin(params, ", "));
    std::vector<std::string> inputs;
    for (size_t j = 0; j < sort.types.size(); ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sort.types[j]));
      absl::StrAppendFormat(
          &k, "  const %s l%d = %s;\n  const %s r%d = %s;\n", ct, j,
          Load(sort.types[j],
               absl::StrFormat("in%d[base + a * %dLL]", j, sort.inner)),
          ct, j,
          Load(sort.types[j],
               absl::StrFormat("in%d[base + b * %dLL]", j, sort.inner)));
      inputs.push_back(absl::StrCat("l", j));
      inputs.push_back(absl::StrCat("r", j));
    }
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> result,
        EmitExpression(sort.comparator, inputs, "v", "  ", &k));
    absl::StrAppendFormat(&k, "  return %s != 0;\n}\n", result[0]);
    const std::string what =
        absl::StrFormat("sort of %d rows of %d", rows, sort.length);
    const int perm = EmitMergeSort(rows, sort.length, sort.inner, less,
                                   sort.inputs, params, what);
    Launch launch;
    launch.kernel = Name("sort_gather");
    launch.blocks = BlocksFor(count);
    launch.slots = {perm};
    std::vector<std::string> all = {"const long long* perm"};
    for (size_t j = 0; j < sort.types.size(); ++j) {
      launch.slots.push_back(sort.inputs[j]);
      all.push_back(params[j]);
    }
    for (size_t j = 0; j < sort.types.size(); ++j) {
      launch.slots.push_back(sort.outputs[j]);
      all.push_back(absl::StrFormat("%s* out%d", storage[j], j));
    }
    Open(&launch, all);
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                          "long long");
    absl::StrAppend(&k, SortRowHead(sort.length, sort.inner));
    absl::StrAppendFormat(
        &k,
        "    const long long from = base + perm[i] * %dLL, to = base + p * "
        "%dLL;\n",
        sort.inner, sort.inner);
    for (size_t j = 0; j < sort.types.size(); ++j) {
      absl::StrAppendFormat(&k, "    out%d[to] = in%d[from];\n", j, j);
    }
    absl::StrAppend(&k, "  }\n}\n");
    launch.origin = absl::StrFormat("%s: the operands in order", what);
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // A key of `type`'s storage value `v` that orders, as a signed or
  // unsigned integer, as XLA's total order does (floats by their bits, as
  // the host's top-k).
  static std::string TotalOrderKey(PrimitiveType type, const std::string& v) {
    switch (type) {
      case PrimitiveType::kF64:
        return absl::StrFormat("pj_total_order(%s)", v);
      case PrimitiveType::kF32:
        return absl::StrFormat("pj_total_order(%s)", v);
      case PrimitiveType::kF16:
      case PrimitiveType::kBf16:
        return absl::StrFormat(
            "((%s & 0x8000u) ? (~(unsigned)%s & 0xffffu) : "
            "((unsigned)%s | 0x8000u))",
            v, v, v);
      case PrimitiveType::kF8E4M3FN:
      case PrimitiveType::kF8E5M2:
        return absl::StrFormat(
            "((%s & 0x80u) ? (~(unsigned)%s & 0xffu) : "
            "((unsigned)%s | 0x80u))",
            v, v, v);
      case PrimitiveType::kPred:
        return absl::StrFormat("(%s != 0)", v);
      default:
        return v;
    }
  }

  // top-k: each row sorted largest (or smallest) first, ties to the lower
  // index, its first k taken.
  absl::Status EmitTopK(const host::TopKKernel& t) {
    if (t.rows == 0 || t.k == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(t.type));
    std::string& k = shared_->source;
    const std::string param = absl::StrFormat("const %s* in", st);
    const std::string less = Name("topk_before");
    absl::StrAppendFormat(
        &k,
        "\n__device__ __forceinline__ bool %s(long long base, long long a, "
        "long long b, %s) {\n  return %s %s %s;\n}\n",
        less, param, TotalOrderKey(t.type, "in[base + a]"),
        t.largest ? ">" : "<", TotalOrderKey(t.type, "in[base + b]"));
    const std::string what =
        absl::StrFormat("top-%d of %d rows of %d", t.k, t.rows, t.n);
    const int perm =
        EmitMergeSort(t.rows, t.n, 1, less, {t.input}, {param}, what);
    const int64_t count = t.rows * t.k;
    Launch launch;
    launch.kernel = Name("topk_take");
    launch.blocks = BlocksFor(count);
    launch.slots = {perm, t.input, t.values, t.indices};
    Open(&launch, {"const long long* perm", param,
                   absl::StrFormat("%s* values", st), "pj_s32* indices"});
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                          "long long");
    absl::StrAppendFormat(&k,
                          "    const long long row = i / %dLL, j = i %% %dLL;\n"
                          "    const long long from = perm[row * %dLL + j];\n"
                          "    values[i] = in[row * %dLL + from];\n"
                          "    indices[i] = (pj_s32)from;\n  }\n}\n",
                          t.k, t.k, t.n, t.n);
    launch.origin = what;
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // rng and rng-get-and-update-state, as host::RngKernel: Philox blocks
  // under the run's key, from the run's draw; two values per block
  // (uniform from words 2 and 3, or Box-Muller from words 0 and 1;
  // integers from the 64-bit words modulo the range), computed in double.
  absl::Status EmitRng(const host::RngKernel& r) {
    EmitRandomHelpers();
    std::string& k = shared_->source;
    Launch launch;
    launch.rng = &r;
    if (r.get_and_update) {
      launch.kernel = Name("rng_state");
      launch.slots = {r.output};
      Open(&launch, {"pj_u64* out", "unsigned long long key",
                     "unsigned long long draw"});
      absl::StrAppendFormat(
          &k,
          "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
          "    out[0] = key;\n    out[1] = draw * %dull;\n  }\n}\n",
          static_cast<uint64_t>(r.delta));
      launch.origin = "rng-get-and-update-state";
      Add(std::move(launch));
      return absl::OkStatus();
    }
    if (r.count == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(r.type));
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(r.type));
    const int64_t blocks = (r.count + 1) / 2;
    launch.kernel = Name("rng");
    launch.blocks = BlocksFor(blocks);
    launch.slots = {r.output, r.low, r.high};
    Open(&launch,
         {absl::StrCat(st, "* out"), absl::StrCat("const ", st, "* low"),
          absl::StrCat("const ", st, "* high"), "unsigned long long key",
          "unsigned long long draw"});
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", blocks,
                          "long long");
    absl::StrAppendFormat(&k,
                          "    unsigned w[4];\n"
                          "    pj_philox_block(key, draw, 0, (pj_u64)i, w);\n"
                          "    const double a = (double)%s, b = (double)%s;\n"
                          "    double v[2];\n",
                          Load(r.type, "low[0]"), Load(r.type, "high[0]"));
    const bool is_float = IsFloat(r.type);
    if (r.normal) {
      absl::StrAppend(
          &k,
          "    const double u0 = ((double)w[0] + 0.5) / 4294967296.0;\n"
          "    const double u1 = ((double)w[1] + 0.5) / 4294967296.0;\n"
          "    const double radius = sqrt(-2.0 * log(u0));\n"
          "    v[0] = a + b * radius * cos(2.0 * 3.14159265358979323846 * "
          "u1);\n"
          "    v[1] = a + b * radius * sin(2.0 * 3.14159265358979323846 * "
          "u1);\n");
    } else if (is_float) {
      absl::StrAppend(
          &k,
          "    v[0] = a + (b - a) * ((double)(w[2] >> 8) / 16777216.0);\n"
          "    v[1] = a + (b - a) * ((double)(w[3] >> 8) / 16777216.0);\n");
    } else {
      absl::StrAppend(&k,
                      "    const double range = b - a > 1.0 ? b - a : 1.0;\n"
                      "    const pj_u64 r0 = ((pj_u64)w[2] << 32) | w[0];\n"
                      "    const pj_u64 r1 = ((pj_u64)w[3] << 32) | w[1];\n"
                      "    v[0] = a + floor((double)(r0 % (pj_u64)range));\n"
                      "    v[1] = a + floor((double)(r1 % (pj_u64)range));\n");
    }
    absl::StrAppendFormat(&k,
                          "    for (int h = 0; h < 2; ++h) {\n"
                          "      const long long at = 2 * i + h;\n"
                          "      if (at >= %dLL) break;\n"
                          "      %s s = %s;\n",
                          r.count, st,
                          Store(r.type, absl::StrFormat("(%s)v[h]", ct)));
    if (is_float && !r.normal) {
      // [a, b) after rounding to the element type: a value that rounds up
      // to b becomes the largest one below it (as host::ValueBelow).
      absl::StrAppendFormat(&k, "      if (a < b && (double)%s >= b) {\n",
                            Load(r.type, "s"));
      if (r.type == PrimitiveType::kF32) {
        absl::StrAppend(&k, "        s = nextafterf(high[0], (float)a);\n");
      } else if (r.type == PrimitiveType::kF64) {
        absl::StrAppend(&k, "        s = nextafter(high[0], a);\n");
      } else {
        const char* sign = st == "pj_u16" ? "0x8000u" : "0x80u";
        absl::StrAppendFormat(
            &k,
            "        const unsigned bits = high[0], sign = %s;\n"
            "        s = (%s)((bits & ~sign) == 0 ? (sign | 1u)\n"
            "                 : (bits & sign) ? bits + 1u : bits - 1u);\n",
            sign, st);
      }
      absl::StrAppend(&k, "      }\n");
    }
    absl::StrAppend(&k, "      out[at] = s;\n    }\n  }\n}\n");
    launch.origin = absl::StrFormat(
        "rng of %d %s", r.count, r.normal ? "normal values" : "uniform values");
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // convolution: a thread per output element, its window's taps and the
  // group's input features summed in the host's type (float, or double
  // for f64 and integer results), then converted as the host converts.
  // A direct kernel: correct for every dim_labels, group, padding,
  // dilation and reversal; cuDNN's speed comes later.
  absl::Status EmitConvolution(const host::ConvolutionKernelBase& conv) {
    const host::ConvPlan& p = conv.plan;
    const hlo::ConvolutionDimensions& d = p.dims;
    const int rank = p.spatial + 2;
    std::vector<int64_t> out_dims(rank);
    out_dims[d.output_batch] = p.out_batch;
    out_dims[d.output_feature] = p.out_features;
    for (int s = 0; s < p.spatial; ++s)
      out_dims[d.output_spatial[s]] = p.out_spatial[s];
    const int64_t count = Product(out_dims);
    if (count == 0) return absl::OkStatus();
    PJRT_ASSIGN_OR_RETURN(std::string lhs_storage, CudaStorageType(p.lhs_type));
    PJRT_ASSIGN_OR_RETURN(std::string rhs_storage, CudaStorageType(p.rhs_type));
    PJRT_ASSIGN_OR_RETURN(std::string out_storage, CudaStorageType(p.out_type));
    PJRT_ASSIGN_OR_RETURN(std::string out_compute, ComputeType(p.out_type));
    const char* acc_type = conv.wide ? "double" : "float";
    const char* idx = IndexType(count);
    Launch launch;
    launch.kernel = Name("convolution");
    launch.blocks = BlocksFor(count);
    launch.slots = {conv.out, conv.lhs, conv.rhs};
    std::string& k = shared_->source;
    Open(&launch, {absl::StrCat(out_storage, "* out"),
                   absl::StrCat("const ", lhs_storage, "* lhs"),
                   absl::StrCat("const ", rhs_storage, "* rhs")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
    absl::StrAppend(&k, SplitIndex(out_dims, idx, "    "));
    absl::StrAppendFormat(&k,
                          "    const long long b = c%d, oc = c%d;\n"
                          "    const long long g = oc / %dLL;\n",
                          d.output_batch, d.output_feature, p.out_per_group);
    absl::StrAppendFormat(
        &k, "    const long long image = (%s + b) * %dLL + %s * %dLL;\n",
        p.batch_groups > 1 ? absl::StrFormat("g * %dLL", p.out_batch) : "0LL",
        p.lhs_strides[d.input_batch],
        p.feature_groups > 1 ? absl::StrFormat("g * %dLL", p.in_per_group)
                             : "0LL",
        p.lhs_strides[d.input_feature]);
    absl::StrAppendFormat(&k, "    %s acc = 0;\n", acc_type);
    std::string indent = "    ", in_at = "image", w_at = "0";
    for (int s = 0; s < p.spatial; ++s) {
      const hlo::WindowDimension& w = p.window[s];
      absl::StrAppendFormat(&k,
                            "%sfor (long long t%d = 0; t%d < %dLL; ++t%d) {\n",
                            indent, s, s, p.taps[s], s);
      indent += "  ";
      absl::StrAppendFormat(
          &k,
          "%sconst long long x%d = (long long)c%d * %dLL + t%d * %dLL - %dLL;\n"
          "%sif (x%d < 0 || x%d %% %dLL != 0 || x%d / %dLL >= %dLL) "
          "continue;\n",
          indent, s, d.output_spatial[s], w.stride, s, w.window_dilation,
          w.padding_low, indent, s, s, w.base_dilation, s, w.base_dilation,
          p.in_spatial[s]);
      absl::StrAppendFormat(&in_at, " + (x%d / %dLL) * %dLL", s,
                            w.base_dilation, p.lhs_strides[d.input_spatial[s]]);
      absl::StrAppendFormat(
          &w_at, " + %s * %dLL",
          w.reversal ? absl::StrFormat("(%dLL - t%d)", p.taps[s] - 1, s)
                     : absl::StrFormat("t%d", s),
          p.rhs_strides[d.kernel_spatial[s]]);
    }
    absl::StrAppendFormat(
        &k, "%sconst long long at = %s, wat = %s + oc * %dLL;\n", indent, in_at,
        w_at, p.rhs_strides[d.kernel_output_feature]);
    absl::StrAppendFormat(&k, "%sfor (long long ci = 0; ci < %dLL; ++ci) {\n",
                          indent, p.in_per_group);
    absl::StrAppendFormat(
        &k, "%s  acc += (%s)%s * (%s)%s;\n%s}\n", indent, acc_type,
        Load(p.lhs_type, absl::StrFormat("lhs[at + ci * %dLL]",
                                         p.lhs_strides[d.input_feature])),
        acc_type,
        Load(p.rhs_type,
             absl::StrFormat("rhs[wat + ci * %dLL]",
                             p.rhs_strides[d.kernel_input_feature])),
        indent);
    for (int s = 0; s < p.spatial; ++s) {
      indent.resize(indent.size() - 2);
      absl::StrAppendFormat(&k, "%s}\n", indent);
    }
    std::string value;
    if (p.out_type == PrimitiveType::kPred) {
      value = "pj_to_pred(acc)";
    } else if (hlo::IsFloatingPoint(p.out_type)) {
      value = Store(p.out_type, absl::StrFormat("(%s)acc", out_compute));
    } else if (IsInt4(p.out_type)) {
      // The exact integer sum, wrapped to 4 bits.
      value =
          Round(p.out_type,
                absl::StrFormat(
                    "(%s)(long long)fmin(fmax((double)acc, -9.0e18), 9.0e18)",
                    out_compute));
    } else {
      value = absl::StrFormat("pj_convert<%s, double>(acc)", out_compute);
    }
    absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n", value);
    launch.origin =
        absl::StrFormat("convolution into [%s]", absl::StrJoin(out_dims, ","));
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // A computation a while or conditional runs, generated into the shared
  // source with launches and temporaries of its own.
  absl::StatusOr<std::shared_ptr<const SubProgram>> Sub(
      const host::HostProgram& program) {
    PJRT_RETURN_IF_ERROR(CheckSlotTypes(program));
    PJRT_ASSIGN_OR_RETURN(GeneratedProgram g,
                          Generator(program, shared_).Run());
    auto sub = std::make_shared<SubProgram>();
    sub->lowered = &program;
    sub->launches = std::move(g.launches);
    sub->temporary_offsets = std::move(g.temporary_offsets);
    sub->temporary_bytes = g.temporary_bytes;
    return sub;
  }

  // while: the condition and the body as sub-programs; the run evaluates
  // the condition, reads its pred back, and runs the body, until false.
  absl::Status EmitWhile(const host::WhileKernel& w) {
    Launch launch;
    launch.kind = Launch::Kind::kWhile;
    ControlFlow& c = launch.control;
    PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> condition,
                          Sub(*w.condition));
    PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> body, Sub(*w.body));
    c.temporaries =
        Temporary(std::max(condition->temporary_bytes, body->temporary_bytes));
    c.predicate = Temporary(8);
    c.programs = {std::move(condition), std::move(body)};
    c.init = w.init;
    c.state = w.state;
    c.spare = w.spare;
    c.bytes = w.bytes;
    c.scratch = w.scratch;
    c.trip_count = w.trip_count;
    launch.origin =
        w.trip_count >= 0
            ? absl::StrFormat(
                  "while loop of %d iterations over %d state buffers",
                  w.trip_count, w.state.size())
            : absl::StrFormat("while loop over %d state buffers",
                              w.state.size());
    Add(std::move(launch));
    return absl::OkStatus();
  }

  // conditional: every branch as a sub-program; the run reads the selector
  // back and runs the one it names.
  absl::Status EmitConditional(const host::ConditionalKernel& k) {
    Launch launch;
    launch.kind = Launch::Kind::kConditional;
    ControlFlow& c = launch.control;
    int64_t temporaries = 0;
    for (const host::ConditionalKernel::Branch& b : k.branches) {
      PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> branch,
                            Sub(*b.program));
      temporaries = std::max(temporaries, branch->temporary_bytes);
      c.programs.push_back(std::move(branch));
      c.inputs.push_back(b.inputs);
    }
    c.temporaries = Temporary(temporaries);
    c.selector = k.selector;
    c.selector_is_pred = k.selector_is_pred;
    c.outputs = k.outputs;
    c.scratch = k.scratch;
    launch.origin =
        absl::StrFormat("conditional of %d branches", k.branches.size());
    Add(std::move(launch));
    return absl::OkStatus();
  }

  const host::HostProgram& program_;
  SharedSource* shared_;
  GeneratedProgram out_;
};

}  // namespace

void ForEachLaunch(const std::vector<Launch>& launches,
                   const std::function<void(const Launch&)>& visit) {
  for (const Launch& launch : launches) {
    visit(launch);
    for (const auto& sub : launch.control.programs) {
      ForEachLaunch(sub->launches, visit);
    }
  }
}

absl::StatusOr<GeneratedProgram> GenerateCuda(
    const host::HostProgram& program) {
  PJRT_RETURN_IF_ERROR(CheckSlotTypes(program));
  SharedSource shared;
  PJRT_ASSIGN_OR_RETURN(GeneratedProgram generated,
                        Generator(program, &shared).Run());
  generated.source = std::move(shared.source);
  return generated;
}

}  // namespace pjrt::compiler::cuda
