// Element types of arrays, numbered as XLA numbers them (and as the
// pjrt.v1.DType enum does on the wire).
#ifndef PJRT_HLO_PRIMITIVE_TYPE_H_
#define PJRT_HLO_PRIMITIVE_TYPE_H_

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

namespace pjrt::hlo {

enum class PrimitiveType : int {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBf16 = 16,
  kTuple = 13,
};

// The array element types in a stable order (for tests and listings).
inline constexpr PrimitiveType kArrayTypes[] = {
    PrimitiveType::kPred, PrimitiveType::kS8,  PrimitiveType::kS16,
    PrimitiveType::kS32,  PrimitiveType::kS64, PrimitiveType::kU8,
    PrimitiveType::kU16,  PrimitiveType::kU32, PrimitiveType::kU64,
    PrimitiveType::kF16,  PrimitiveType::kBf16, PrimitiveType::kF32,
    PrimitiveType::kF64,
};

// True for the types an array may hold (everything above but kInvalid and
// kTuple).
bool IsArrayType(PrimitiveType type);

// Returns the type numbered `number`, if it is an array type.
std::optional<PrimitiveType> ArrayTypeFromNumber(int number);

// Bytes per element: 1 for pred. REQUIRES: IsArrayType(type).
int ByteWidth(PrimitiveType type);

// HLO spelling: "pred", "s32", "bf16", "tuple", "invalid".
absl::string_view PrimitiveTypeName(PrimitiveType type);

// Inverse of PrimitiveTypeName for array types.
std::optional<PrimitiveType> ParsePrimitiveType(absl::string_view name);

bool IsFloatingPoint(PrimitiveType type);
bool IsSignedInteger(PrimitiveType type);
bool IsUnsignedInteger(PrimitiveType type);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_PRIMITIVE_TYPE_H_
