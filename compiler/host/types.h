// Element types on the host: the C++ type each HLO type is stored as, and
// the type it is computed in (f16, bf16 and the narrower floats compute in
// float, rounding after every op as XLA does; s2, u2, s4 and u4 are held
// one per byte between the program's edges and wrap to their bits after
// every op, and f4e2m1fn is held one code per byte there too), with a
// dispatch over the real types and one that adds the complex types.
#ifndef PJRT_COMPILER_HOST_TYPES_H_
#define PJRT_COMPILER_HOST_TYPES_H_

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "Eigen/Core"
#include "hlo/minifloat.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

using hlo::Float4E2M1FN;
using hlo::Float6E2M3FN;
using hlo::Float6E3M2FN;
using hlo::Float8E3M4;
using hlo::Float8E4M3;
using hlo::Float8E4M3B11FNUZ;
using hlo::Float8E4M3FN;
using hlo::Float8E4M3FNUZ;
using hlo::Float8E5M2;
using hlo::Float8E5M2FNUZ;
using hlo::Float8E8M0FNU;
using hlo::PrimitiveType;

template <PrimitiveType T>
struct TypeTraits;

#define PJRT_HOST_TYPE(PT, STORAGE, COMPUTE) \
  template <>                                \
  struct TypeTraits<PrimitiveType::PT> {     \
    using Storage = STORAGE;                 \
    using Compute = COMPUTE;                 \
  };
PJRT_HOST_TYPE(kPred, uint8_t, uint8_t)
PJRT_HOST_TYPE(kS8, int8_t, int8_t)
PJRT_HOST_TYPE(kS16, int16_t, int16_t)
PJRT_HOST_TYPE(kS32, int32_t, int32_t)
PJRT_HOST_TYPE(kS64, int64_t, int64_t)
PJRT_HOST_TYPE(kU8, uint8_t, uint8_t)
PJRT_HOST_TYPE(kU16, uint16_t, uint16_t)
PJRT_HOST_TYPE(kU32, uint32_t, uint32_t)
PJRT_HOST_TYPE(kU64, uint64_t, uint64_t)
PJRT_HOST_TYPE(kF16, Eigen::half, float)
PJRT_HOST_TYPE(kBf16, Eigen::bfloat16, float)
PJRT_HOST_TYPE(kF32, float, float)
PJRT_HOST_TYPE(kF64, double, double)
PJRT_HOST_TYPE(kF8E4M3FN, Float8E4M3FN, float)
PJRT_HOST_TYPE(kF8E5M2, Float8E5M2, float)
PJRT_HOST_TYPE(kF8E4M3, Float8E4M3, float)
PJRT_HOST_TYPE(kF8E3M4, Float8E3M4, float)
PJRT_HOST_TYPE(kF8E4M3FNUZ, Float8E4M3FNUZ, float)
PJRT_HOST_TYPE(kF8E5M2FNUZ, Float8E5M2FNUZ, float)
PJRT_HOST_TYPE(kF8E4M3B11FNUZ, Float8E4M3B11FNUZ, float)
PJRT_HOST_TYPE(kF8E8M0FNU, Float8E8M0FNU, float)
PJRT_HOST_TYPE(kF6E2M3FN, Float6E2M3FN, float)
PJRT_HOST_TYPE(kF6E3M2FN, Float6E3M2FN, float)
PJRT_HOST_TYPE(kF4E2M1FN, Float4E2M1FN, float)
PJRT_HOST_TYPE(kS4, int8_t, int8_t)
PJRT_HOST_TYPE(kU4, uint8_t, uint8_t)
PJRT_HOST_TYPE(kS2, int8_t, int8_t)
PJRT_HOST_TYPE(kU2, uint8_t, uint8_t)
PJRT_HOST_TYPE(kC64, std::complex<float>, std::complex<float>)
PJRT_HOST_TYPE(kC128, std::complex<double>, std::complex<double>)
#undef PJRT_HOST_TYPE

#define PJRT_CASE(PT)     \
  case PrimitiveType::PT: \
    return f(std::integral_constant<PrimitiveType, PrimitiveType::PT>());
#define PJRT_REAL_CASES     \
  PJRT_CASE(kPred)          \
  PJRT_CASE(kS8)            \
  PJRT_CASE(kS16)           \
  PJRT_CASE(kS32)           \
  PJRT_CASE(kS64)           \
  PJRT_CASE(kU8)            \
  PJRT_CASE(kU16)           \
  PJRT_CASE(kU32)           \
  PJRT_CASE(kU64)           \
  PJRT_CASE(kF16)           \
  PJRT_CASE(kBf16)          \
  PJRT_CASE(kF32)           \
  PJRT_CASE(kF64)           \
  PJRT_CASE(kF8E4M3FN)      \
  PJRT_CASE(kF8E5M2)        \
  PJRT_CASE(kF8E4M3)        \
  PJRT_CASE(kF8E3M4)        \
  PJRT_CASE(kF8E4M3FNUZ)    \
  PJRT_CASE(kF8E5M2FNUZ)    \
  PJRT_CASE(kF8E4M3B11FNUZ) \
  PJRT_CASE(kF8E8M0FNU)     \
  PJRT_CASE(kF6E2M3FN)      \
  PJRT_CASE(kF6E3M2FN)      \
  PJRT_CASE(kF4E2M1FN)      \
  PJRT_CASE(kS4)            \
  PJRT_CASE(kU4)            \
  PJRT_CASE(kS2)            \
  PJRT_CASE(kU2)

// Calls f with the PrimitiveType constant (as a std::integral_constant) of
// `type`, a real (non-complex) array type. The compiler refuses complex
// operands of ops whose kernels take only real types before it gets here;
// any other type runs f as f32 (never reached for a verified program).
template <typename F>
auto DispatchType(PrimitiveType type, F&& f) {
  switch (type) {
    PJRT_REAL_CASES
    default:
      break;
  }
  return f(std::integral_constant<PrimitiveType, PrimitiveType::kF32>());
}

// Calls f with the PrimitiveType constant of `type`, a float narrower than
// 16 bits (hlo::IsMiniFloat); any other type runs f as f8e4m3fn (never
// reached).
template <typename F>
auto DispatchMiniFloat(PrimitiveType type, F&& f) {
  switch (type) {
    PJRT_CASE(kF8E5M2)
    PJRT_CASE(kF8E4M3)
    PJRT_CASE(kF8E3M4)
    PJRT_CASE(kF8E4M3FNUZ)
    PJRT_CASE(kF8E5M2FNUZ)
    PJRT_CASE(kF8E4M3B11FNUZ)
    PJRT_CASE(kF8E8M0FNU)
    PJRT_CASE(kF6E2M3FN)
    PJRT_CASE(kF6E3M2FN)
    PJRT_CASE(kF4E2M1FN)
    default:
      break;
  }
  return f(std::integral_constant<PrimitiveType, PrimitiveType::kF8E4M3FN>());
}

// DispatchType, with c64 and c128 too.
template <typename F>
auto DispatchAnyType(PrimitiveType type, F&& f) {
  switch (type) {
    PJRT_REAL_CASES
    PJRT_CASE(kC64)
    PJRT_CASE(kC128)
    default:
      break;
  }
  return f(std::integral_constant<PrimitiveType, PrimitiveType::kF32>());
}
#undef PJRT_REAL_CASES
#undef PJRT_CASE

// Integer addition and multiplication that wrap around, as XLA's integer
// ops do: computed in an unsigned type at least as wide as `unsigned`, so
// that C++'s promotion of narrow types to int cannot overflow (65535 *
// 65535 as ints is undefined behaviour).
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                    std::make_unsigned_t<T>>;
template <typename T>
inline T WrappingAdd(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(std::make_unsigned_t<T>(a)) +
                        static_cast<WrapType<T>>(std::make_unsigned_t<T>(b)));
}
template <typename T>
inline T WrappingMultiply(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(std::make_unsigned_t<T>(a)) *
                        static_cast<WrapType<T>>(std::make_unsigned_t<T>(b)));
}

template <typename T>
inline constexpr bool kIsComplex = false;
template <typename T>
inline constexpr bool kIsComplex<std::complex<T>> = true;

// Types whose storage differs from their compute representation.
// The float nearest `d` rounded to odd: truncated toward zero, with its
// last bit set when anything was cut off. Rounding that float to nearest
// even in a format at least two bits narrower (f16, bf16, the f8, f6 and f4
// types) gives what rounding `d` itself would: converts from f64 and from
// wide integers to those types round once, not twice (through the nearest
// float first, which can land on a tie that was not one).
inline float RoundToOddFloat(double d) {
  float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) {
    f = std::nextafter(f, 0.0f);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}
inline float RoundToOddFloat(uint64_t m) {
  if (m < (uint64_t{1} << 24)) return static_cast<float>(m);
  const int shift = std::bit_width(m) - 24;
  uint64_t kept = m >> shift;
  if ((m & ((uint64_t{1} << shift) - 1)) != 0) kept |= 1;
  return std::ldexp(static_cast<float>(kept), shift);
}
inline float RoundToOddFloat(int64_t v) {
  const float f = RoundToOddFloat(v < 0 ? uint64_t{0} - static_cast<uint64_t>(v)
                                        : static_cast<uint64_t>(v));
  return v < 0 ? -f : f;
}

inline bool IsNarrowFloat(PrimitiveType type) {
  return type == PrimitiveType::kF16 || type == PrimitiveType::kBf16 ||
         hlo::IsMiniFloat(type);
}
// s2, u2, s4 and u4: held one value per byte inside programs (the signed
// ones sign-extended), wrapped to their bits after every op.
inline bool IsSubByteInt(PrimitiveType type) {
  return type == PrimitiveType::kS4 || type == PrimitiveType::kU4 ||
         type == PrimitiveType::kS2 || type == PrimitiveType::kU2;
}
// `v` wrapped to the bits of `type`, a sub-byte integer type: its low bits,
// sign-extended for s2 and s4.
template <typename T>
inline T WrapSubByte(PrimitiveType type, T v) {
  const int bits = hlo::BitWidth(type);
  const int low =
      static_cast<int>(static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1));
  const bool negative = hlo::IsSignedInteger(type) && (low >> (bits - 1)) != 0;
  return static_cast<T>(negative ? low - (1 << bits) : low);
}

// Bytes of the compute representation (f16, bf16 and f8: 4).
inline int ComputeWidth(PrimitiveType type) {
  if (IsNarrowFloat(type)) return 4;
  return hlo::ByteWidth(type);
}

// The most bytes a value takes in its compute representation (c128).
inline constexpr int kMaxComputeWidth = 16;

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_TYPES_H_
