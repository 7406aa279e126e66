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
  kS2 = 26,
  kU2 = 27,
  kF8E4M3 = 28,
  kF8E3M4 = 29,
  // 30 and 31 are XLA's s1 and u1, which pjrtd does not know.
  kF4E2M1FN = 32,
  kF8E8M0FNU = 33,
  // XLA does not number the 6-bit floats (StableHLO has them): pjrtd numbers
  // them after XLA's last.
  kF6E2M3FN = 34,
  kF6E3M2FN = 35,
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
    PrimitiveType::kF4E2M1FN,   PrimitiveType::kF6E2M3FN,
    PrimitiveType::kF6E3M2FN,   PrimitiveType::kF8E8M0FNU,
    PrimitiveType::kS2,         PrimitiveType::kU2,
};

// True for the types pjrtd computes with and stores in buffers (those of
// kArrayTypes).
bool IsArrayType(PrimitiveType type);

// Returns the type numbered `number`, if it is an array type.
std::optional<PrimitiveType> ArrayTypeFromNumber(int number);

// Bytes per element: 1 for pred and the sub-byte types. 0 for token, opaque
// and tuple.
int ByteWidth(PrimitiveType type);

// Bits per element in a buffer: 4 for s4, u4 and f4e2m1fn (packed two per
// byte), 2 for s2 and u2; otherwise 8 * ByteWidth (the 6-bit floats take a
// byte each).
int BitWidth(PrimitiveType type);

// Bytes of `count` elements of `type` in a buffer or on the wire (packed for
// sub-byte types; saturates instead of overflowing).
int64_t PackedByteSize(PrimitiveType type, int64_t count);

// HLO spelling: "pred", "s32", "bf16", "tuple", "invalid".
absl::string_view PrimitiveTypeName(PrimitiveType type);

// Inverse of PrimitiveTypeName for array types (the supported ones).
std::optional<PrimitiveType> ParsePrimitiveType(absl::string_view name);

// Inverse of PrimitiveTypeName for every type HLO text may name: the array
// types, "token" and "opaque".
std::optional<PrimitiveType> ParseAnyPrimitiveType(absl::string_view name);

bool IsFloatingPoint(PrimitiveType type);
// The floats narrower than 16 bits, held as codes (hlo/minifloat.h): the
// 8-bit ones (f8e4m3fn, f8e5m2, f8e4m3, f8e3m4, f8e4m3fnuz, f8e5m2fnuz,
// f8e4m3b11fnuz, f8e8m0fnu), f6e2m3fn, f6e3m2fn and f4e2m1fn.
bool IsMiniFloat(PrimitiveType type);
// Bits of a narrow float's code (8, 6 or 4), its sign in the top one but for
// f8e8m0fnu, which has none.
int MiniFloatCodeBits(PrimitiveType type);
// The finite-only floats, without infinity or NaN (f4e2m1fn, f6e2m3fn,
// f6e3m2fn): converts saturate to their largest value.
bool IsFiniteOnlyFloat(PrimitiveType type);
// The types a buffer packs several to a byte (BitWidth < 8): s4, u4,
// f4e2m1fn, s2, u2.
bool IsPackedType(PrimitiveType type);
bool IsComplex(PrimitiveType type);
// The type of a complex type's parts: f32 for c64, f64 for c128.
PrimitiveType ComplexPartType(PrimitiveType type);
bool IsSignedInteger(PrimitiveType type);
bool IsUnsignedInteger(PrimitiveType type);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_PRIMITIVE_TYPE_H_
