#include "hlo/primitive_type.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "hlo/minifloat.h"

namespace pjrt::hlo {

bool IsArrayType(PrimitiveType type) {
  for (PrimitiveType t : kArrayTypes) {
    if (t == type) return true;
  }
  return false;
}

std::optional<PrimitiveType> ParseAnyPrimitiveType(absl::string_view name) {
  if (auto t = ParsePrimitiveType(name)) return t;
  if (name == "token") return PrimitiveType::kToken;
  if (name == "opaque") return PrimitiveType::kOpaque;
  return std::nullopt;
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
    case PrimitiveType::kC64:
      return 8;
    case PrimitiveType::kC128:
      return 16;
    case PrimitiveType::kF8E5M2:
    case PrimitiveType::kF8E4M3FN:
    case PrimitiveType::kS4:
    case PrimitiveType::kU4:
    case PrimitiveType::kF8E4M3B11FNUZ:
    case PrimitiveType::kF8E5M2FNUZ:
    case PrimitiveType::kF8E4M3FNUZ:
    case PrimitiveType::kS2:
    case PrimitiveType::kU2:
    case PrimitiveType::kF8E4M3:
    case PrimitiveType::kF8E3M4:
    case PrimitiveType::kF4E2M1FN:
    case PrimitiveType::kF8E8M0FNU:
    case PrimitiveType::kF6E2M3FN:
    case PrimitiveType::kF6E3M2FN:
      return 1;
    case PrimitiveType::kInvalid:
    case PrimitiveType::kTuple:
    case PrimitiveType::kToken:
    case PrimitiveType::kOpaque:
      break;
  }
  return 0;
}

absl::string_view PrimitiveTypeName(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
      return "pred";
    case PrimitiveType::kS8:
      return "s8";
    case PrimitiveType::kS16:
      return "s16";
    case PrimitiveType::kS32:
      return "s32";
    case PrimitiveType::kS64:
      return "s64";
    case PrimitiveType::kU8:
      return "u8";
    case PrimitiveType::kU16:
      return "u16";
    case PrimitiveType::kU32:
      return "u32";
    case PrimitiveType::kU64:
      return "u64";
    case PrimitiveType::kF16:
      return "f16";
    case PrimitiveType::kBf16:
      return "bf16";
    case PrimitiveType::kF32:
      return "f32";
    case PrimitiveType::kF64:
      return "f64";
    case PrimitiveType::kTuple:
      return "tuple";
    case PrimitiveType::kToken:
      return "token";
    case PrimitiveType::kOpaque:
      return "opaque";
    case PrimitiveType::kC64:
      return "c64";
    case PrimitiveType::kC128:
      return "c128";
    case PrimitiveType::kF8E5M2:
      return "f8e5m2";
    case PrimitiveType::kF8E4M3FN:
      return "f8e4m3fn";
    case PrimitiveType::kS4:
      return "s4";
    case PrimitiveType::kU4:
      return "u4";
    case PrimitiveType::kF8E4M3B11FNUZ:
      return "f8e4m3b11fnuz";
    case PrimitiveType::kF8E5M2FNUZ:
      return "f8e5m2fnuz";
    case PrimitiveType::kF8E4M3FNUZ:
      return "f8e4m3fnuz";
    case PrimitiveType::kS2:
      return "s2";
    case PrimitiveType::kU2:
      return "u2";
    case PrimitiveType::kF8E4M3:
      return "f8e4m3";
    case PrimitiveType::kF8E3M4:
      return "f8e3m4";
    case PrimitiveType::kF4E2M1FN:
      return "f4e2m1fn";
    case PrimitiveType::kF8E8M0FNU:
      return "f8e8m0fnu";
    case PrimitiveType::kF6E2M3FN:
      return "f6e2m3fn";
    case PrimitiveType::kF6E3M2FN:
      return "f6e3m2fn";
    case PrimitiveType::kInvalid:
      break;
  }
  return "invalid";
}

std::optional<PrimitiveType> ParsePrimitiveType(absl::string_view name) {
  for (PrimitiveType t : kArrayTypes) {
    if (PrimitiveTypeName(t) == name) return t;
  }
  return std::nullopt;
}

int BitWidth(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kS4:
    case PrimitiveType::kU4:
    case PrimitiveType::kF4E2M1FN:
      return 4;
    case PrimitiveType::kS2:
    case PrimitiveType::kU2:
      return 2;
    default:
      return 8 * ByteWidth(type);
  }
}

int64_t PackedByteSize(PrimitiveType type, int64_t count) {
  const int bits = BitWidth(type);
  if (bits >= 8) {
    const int64_t width = bits / 8;
    return count > INT64_MAX / width ? INT64_MAX : count * width;
  }
  const int per_byte = 8 / bits;
  return count / per_byte + (count % per_byte != 0 ? 1 : 0);
}

bool IsFloatingPoint(PrimitiveType type) {
  return type == PrimitiveType::kF16 || type == PrimitiveType::kBf16 ||
         type == PrimitiveType::kF32 || type == PrimitiveType::kF64 ||
         IsMiniFloat(type);
}

int MiniFloatCodeBits(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF4E2M1FN:
      return 4;
    case PrimitiveType::kF6E2M3FN:
    case PrimitiveType::kF6E3M2FN:
      return 6;
    default:
      return 8;
  }
}

bool IsFiniteOnlyFloat(PrimitiveType type) {
  return type == PrimitiveType::kF4E2M1FN || type == PrimitiveType::kF6E2M3FN ||
         type == PrimitiveType::kF6E3M2FN;
}

bool IsPackedType(PrimitiveType type) {
  const int bits = BitWidth(type);
  return bits > 0 && bits < 8;
}

bool IsMiniFloat(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF8E4M3FN:
    case PrimitiveType::kF8E5M2:
    case PrimitiveType::kF8E4M3:
    case PrimitiveType::kF8E3M4:
    case PrimitiveType::kF8E4M3FNUZ:
    case PrimitiveType::kF8E5M2FNUZ:
    case PrimitiveType::kF8E4M3B11FNUZ:
    case PrimitiveType::kF8E8M0FNU:
    case PrimitiveType::kF6E2M3FN:
    case PrimitiveType::kF6E3M2FN:
    case PrimitiveType::kF4E2M1FN:
      return true;
    default:
      return false;
  }
}

float MiniFloatToFloat(PrimitiveType type, uint8_t bits) {
  switch (type) {
    case PrimitiveType::kF8E4M3FN:
      return Float8E4M3FN::ToFloat(bits);
    case PrimitiveType::kF8E5M2:
      return Float8E5M2::ToFloat(bits);
    case PrimitiveType::kF8E4M3:
      return Float8E4M3::ToFloat(bits);
    case PrimitiveType::kF8E3M4:
      return Float8E3M4::ToFloat(bits);
    case PrimitiveType::kF8E4M3FNUZ:
      return Float8E4M3FNUZ::ToFloat(bits);
    case PrimitiveType::kF8E5M2FNUZ:
      return Float8E5M2FNUZ::ToFloat(bits);
    case PrimitiveType::kF8E4M3B11FNUZ:
      return Float8E4M3B11FNUZ::ToFloat(bits);
    case PrimitiveType::kF8E8M0FNU:
      return Float8E8M0FNU::ToFloat(bits);
    case PrimitiveType::kF6E2M3FN:
      return Float6E2M3FN::ToFloat(bits);
    case PrimitiveType::kF6E3M2FN:
      return Float6E3M2FN::ToFloat(bits);
    case PrimitiveType::kF4E2M1FN:
      return Float4E2M1FN::ToFloat(bits);
    default:
      return NAN;
  }
}

uint8_t MiniFloatFromFloat(PrimitiveType type, float f) {
  switch (type) {
    case PrimitiveType::kF8E4M3FN:
      return Float8E4M3FN::FromFloat(f);
    case PrimitiveType::kF8E5M2:
      return Float8E5M2::FromFloat(f);
    case PrimitiveType::kF8E4M3:
      return Float8E4M3::FromFloat(f);
    case PrimitiveType::kF8E3M4:
      return Float8E3M4::FromFloat(f);
    case PrimitiveType::kF8E4M3FNUZ:
      return Float8E4M3FNUZ::FromFloat(f);
    case PrimitiveType::kF8E5M2FNUZ:
      return Float8E5M2FNUZ::FromFloat(f);
    case PrimitiveType::kF8E4M3B11FNUZ:
      return Float8E4M3B11FNUZ::FromFloat(f);
    case PrimitiveType::kF8E8M0FNU:
      return Float8E8M0FNU::FromFloat(f);
    case PrimitiveType::kF6E2M3FN:
      return Float6E2M3FN::FromFloat(f);
    case PrimitiveType::kF6E3M2FN:
      return Float6E3M2FN::FromFloat(f);
    case PrimitiveType::kF4E2M1FN:
      return Float4E2M1FN::FromFloat(f);
    default:
      return 0;
  }
}

bool IsComplex(PrimitiveType type) {
  return type == PrimitiveType::kC64 || type == PrimitiveType::kC128;
}

PrimitiveType ComplexPartType(PrimitiveType type) {
  return type == PrimitiveType::kC128 ? PrimitiveType::kF64
                                      : PrimitiveType::kF32;
}

bool IsSignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kS8 || type == PrimitiveType::kS16 ||
         type == PrimitiveType::kS32 || type == PrimitiveType::kS64 ||
         type == PrimitiveType::kS4 || type == PrimitiveType::kS2;
}

bool IsUnsignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kU8 || type == PrimitiveType::kU16 ||
         type == PrimitiveType::kU32 || type == PrimitiveType::kU64 ||
         type == PrimitiveType::kU4 || type == PrimitiveType::kU2;
}

}  // namespace pjrt::hlo
