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
  kOpaque = 14,
  kC64 = 15,
  kToken = 17,
  kC128 = 18,
  kF8E5M2 = 19,
  kF8E4M3FN = 20,
  kS4 = 21,
  kU4 = 22,
  kF8E4M3B11FNUZ = 23,
  kF8E5M2FNUZ = 24,
  kF8E4M3FNUZ = 25,
  // s2, u2, f4e2m1fn and f8e8m0fnu: the parser accepts them, the runtime
  // does not compute with them (the verifier answers UNIMPLEMENTED naming
  // them).
  kS2 = 26,
  kU2 = 27,
  kF8E4M3 = 28,
  kF8E3M4 = 29,
  kF4E2M1FN = 30,
  kF8E8M0FNU = 31,
};

// The array element types in a stable order (for tests and listings).
inline constexpr PrimitiveType kArrayTypes[] = {
    PrimitiveType::kPred,       PrimitiveType::kS8,
    PrimitiveType::kS16,        PrimitiveType::kS32,
    PrimitiveType::kS64,        PrimitiveType::kU8,
    PrimitiveType::kU16,        PrimitiveType::kU32,
    PrimitiveType::kU64,        PrimitiveType::kF16,
    PrimitiveType::kBf16,       PrimitiveType::kF32,
    PrimitiveType::kF64,        PrimitiveType::kC64,
    PrimitiveType::kC128,       PrimitiveType::kS4,
    PrimitiveType::kU4,         PrimitiveType::kF8E4M3FN,
    PrimitiveType::kF8E5M2,     PrimitiveType::kF8E4M3,
    PrimitiveType::kF8E3M4,     PrimitiveType::kF8E4M3FNUZ,
    PrimitiveType::kF8E5M2FNUZ, PrimitiveType::kF8E4M3B11FNUZ,
};

// True for the types pjrtd computes with and stores in buffers (those of
// kArrayTypes).
bool IsArrayType(PrimitiveType type);

// True for every element type HLO text may name for an array, including
// those pjrtd does not compute with (c64, f8 variants, s4...).
bool IsParsableArrayType(PrimitiveType type);

// Returns the type numbered `number`, if it is an array type.
std::optional<PrimitiveType> ArrayTypeFromNumber(int number);

// Bytes per element: 1 for pred and the sub-byte types. 0 for token, opaque
// and tuple.
int ByteWidth(PrimitiveType type);

// Bits per element in a buffer: 4 for s4 and u4 (packed two per byte), 2
// for s2 and u2; otherwise 8 * ByteWidth.
int BitWidth(PrimitiveType type);

// Bytes of `count` elements of `type` in a buffer or on the wire (packed for
// sub-byte types; saturates instead of overflowing).
int64_t PackedByteSize(PrimitiveType type, int64_t count);

// HLO spelling: "pred", "s32", "bf16", "tuple", "invalid".
absl::string_view PrimitiveTypeName(PrimitiveType type);

// Inverse of PrimitiveTypeName for array types (the supported ones).
std::optional<PrimitiveType> ParsePrimitiveType(absl::string_view name);

// Inverse of PrimitiveTypeName for every type HLO text may name: the
// supported ones, the parse-only ones, "token" and "opaque".
std::optional<PrimitiveType> ParseAnyPrimitiveType(absl::string_view name);

bool IsFloatingPoint(PrimitiveType type);
// The 8-bit floats (hlo/float8.h): f8e4m3fn, f8e5m2, f8e4m3, f8e3m4,
// f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz.
bool IsFloat8(PrimitiveType type);
bool IsComplex(PrimitiveType type);
// The type of a complex type's parts: f32 for c64, f64 for c128.
PrimitiveType ComplexPartType(PrimitiveType type);
bool IsSignedInteger(PrimitiveType type);
bool IsUnsignedInteger(PrimitiveType type);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_PRIMITIVE_TYPE_H_
