#include "absl/strings/string_view.h"
#include "hlo/primitive_type.h"

namespace pjrt::hlo {

bool IsArrayType(PrimitiveType type) {
  for (PrimitiveType t : kArrayTypes) {
    if (t == type) return true;
  }
  return false;
}

std::optional<PrimitiveType> ArrayTypeFromNumber(int number) {
  auto type = static_cast<PrimitiveType>(number);
  if (IsArrayType(type)) return type;
  return std::nullopt;
}

int ByteWidth(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
    case PrimitiveType::kS8:
    case PrimitiveType::kU8:
      return 1;
    case PrimitiveType::kS16:
    case PrimitiveType::kU16:
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return 2;
    case PrimitiveType::kS32:
    case PrimitiveType::kU32:
    case PrimitiveType::kF32:
      return 4;
    case PrimitiveType::kS64:
    case PrimitiveType::kU64:
    case PrimitiveType::kF64:
      return 8;
    case PrimitiveType::kInvalid:
    case PrimitiveType::kTuple:
      break;
  }
  return 0;
}

absl::string_view PrimitiveTypeName(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred: return "pred";
    case PrimitiveType::kS8: return "s8";
    case PrimitiveType::kS16: return "s16";
    case PrimitiveType::kS32: return "s32";
    case PrimitiveType::kS64: return "s64";
    case PrimitiveType::kU8: return "u8";
    case PrimitiveType::kU16: return "u16";
    case PrimitiveType::kU32: return "u32";
    case PrimitiveType::kU64: return "u64";
    case PrimitiveType::kF16: return "f16";
    case PrimitiveType::kBf16: return "bf16";
    case PrimitiveType::kF32: return "f32";
    case PrimitiveType::kF64: return "f64";
    case PrimitiveType::kTuple: return "tuple";
    case PrimitiveType::kInvalid: break;
  }
  return "invalid";
}

std::optional<PrimitiveType> ParsePrimitiveType(absl::string_view name) {
  for (PrimitiveType t : kArrayTypes) {
    if (PrimitiveTypeName(t) == name) return t;
  }
  return std::nullopt;
}

bool IsFloatingPoint(PrimitiveType type) {
  return type == PrimitiveType::kF16 || type == PrimitiveType::kBf16 ||
         type == PrimitiveType::kF32 || type == PrimitiveType::kF64;
}

bool IsSignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kS8 || type == PrimitiveType::kS16 ||
         type == PrimitiveType::kS32 || type == PrimitiveType::kS64;
}

bool IsUnsignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kU8 || type == PrimitiveType::kU16 ||
         type == PrimitiveType::kU32 || type == PrimitiveType::kU64;
}

}  // namespace pjrt::hlo
