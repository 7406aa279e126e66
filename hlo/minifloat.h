// Floats narrower than 16 bits as XLA and StableHLO define them (the
// ml_dtypes formats), each held as its code in a byte (the 4- and 6-bit
// ones in the byte's low bits), in five encodings:
//  - IEEE-style (f8e5m2, f8e4m3, f8e3m4): the largest exponent holds
//    infinities (mantissa 0) and NaNs; largest 57344, 240 and 15.5;
//  - "fn", finite (f8e4m3fn): no infinity, one NaN per sign (all exponent
//    and mantissa bits set); largest 448;
//  - "fnuz", finite with an unsigned zero (f8e4m3fnuz, f8e5m2fnuz,
//    f8e4m3b11fnuz): no infinity, no negative zero, one NaN (0x80, the
//    code of -0); the bias one more than IEEE's (8, 16) or 11; largest 240,
//    57344 and 30;
//  - finite only, the OCP microscaling element types (f4e2m1fn, f6e2m3fn,
//    f6e3m2fn): no infinity and no NaN, the sign in the top bit of the 4 or
//    6; largest 6, 7.5 and 28;
//  - exponent only (f8e8m0fnu, the microscaling scale type): 2^(code-127),
//    no sign, no zero, no infinity, NaN 0xFF; smallest 2^-127, largest
//    2^127.
//
// Converting from float rounds to the nearest value, ties to even, and
// keeps subnormals. A value that rounds past the largest finite one
// overflows, as XLA's converts do: to infinity where the format has one,
// else to NaN where it has one; the finite-only formats saturate instead,
// infinities included, to the largest value of the operand's sign (as XLA's
// emitter clamps them), and take NaN to +0 (as converts to integers do; a
// NaN's sign differs between CPUs and GPUs). NaN stays NaN elsewhere (sign
// kept where the format has signed NaNs); -0 and negative values that round to
// zero become +0 in fnuz formats. f8e8m0fnu takes zero and values below its
// smallest to its smallest, and negative values, infinities and NaN to NaN.
#ifndef PJRT_HLO_MINIFLOAT_H_
#define PJRT_HLO_MINIFLOAT_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "hlo/primitive_type.h"

namespace pjrt::hlo {

enum class MiniFloatEncoding { kIeee, kFn, kFnuz, kFinite, kExponentOnly };

template <int kExponentBits, int kMantissaBits, MiniFloatEncoding kEncoding,
          int kBiasValue = (1 << (kExponentBits - 1)) -
                           (kEncoding == MiniFloatEncoding::kFnuz ? 0 : 1)>
class MiniFloat {
 public:
  static constexpr int kBias = kBiasValue;
  static constexpr bool kHasInfinity = kEncoding == MiniFloatEncoding::kIeee;
  static constexpr bool kUnsignedZero = kEncoding == MiniFloatEncoding::kFnuz;
  static constexpr bool kFiniteOnly = kEncoding == MiniFloatEncoding::kFinite;
  static constexpr bool kExponentOnly =
      kEncoding == MiniFloatEncoding::kExponentOnly;
  // The sign's bit; the exponent-only format has none.
  static constexpr int kSignShift = kExponentBits + kMantissaBits;

  MiniFloat() = default;
  explicit MiniFloat(float f) : bits_(FromFloat(f)) {}
  explicit MiniFloat(double d) : MiniFloat(static_cast<float>(d)) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  explicit MiniFloat(I i) : MiniFloat(static_cast<float>(i)) {}

  explicit operator float() const { return ToFloat(bits_); }
  explicit operator double() const { return ToFloat(bits_); }

  uint8_t bits() const { return bits_; }
  static MiniFloat FromBits(uint8_t bits) {
    MiniFloat f;
    f.bits_ = bits;
    return f;
  }

  static float ToFloat(uint8_t bits) {
    if constexpr (kExponentOnly) {
      return bits == 0xFF ? NAN : std::ldexp(1.0f, int{bits} - kBias);
    }
    if (kUnsignedZero && bits == 0x80) return NAN;
    const bool sign = (bits >> kSignShift) & 1;
    const int exponent = (bits >> kMantissaBits) & ((1 << kExponentBits) - 1);
    const int mantissa = bits & ((1 << kMantissaBits) - 1);
    constexpr int kMaxExponent = (1 << kExponentBits) - 1;
    float value;
    if (kHasInfinity && exponent == kMaxExponent) {
      value = mantissa == 0 ? INFINITY : NAN;
    } else if (kEncoding == MiniFloatEncoding::kFn &&
               exponent == kMaxExponent &&
               mantissa == (1 << kMantissaBits) - 1) {
      value = NAN;
    } else if (exponent == 0) {
      value =
          std::ldexp(static_cast<float>(mantissa), 1 - kBias - kMantissaBits);
    } else {
      value = std::ldexp(1.0f + static_cast<float>(mantissa) /
                                    static_cast<float>(1 << kMantissaBits),
                         exponent - kBias);
    }
    return sign ? -value : value;
  }

  static uint8_t FromFloat(float f) {
    const uint32_t b = std::bit_cast<uint32_t>(f);
    if constexpr (kExponentOnly) {
      return ExponentOnlyFromFloat(b);
    } else {
      return SignedFromFloat(b);
    }
  }

 private:
  static uint8_t SignedFromFloat(uint32_t b) {
    const uint32_t abs = b & 0x7FFFFFFFu;
    const uint8_t sign = static_cast<uint8_t>((b >> 31) << kSignShift);
    // Codes of NaN, infinity and the largest finite value (without sign).
    constexpr uint8_t kMaxFinite =
        kHasInfinity ? static_cast<uint8_t>(
                           (((1 << kExponentBits) - 1) << kMantissaBits) - 1)
        : kUnsignedZero ? 0x7F
        : kFiniteOnly   ? static_cast<uint8_t>((1 << kSignShift) - 1)
                        : 0x7E;
    constexpr uint8_t kNan =
        kHasInfinity ? static_cast<uint8_t>(
                           (((1 << kExponentBits) - 1) << kMantissaBits) |
                           (1 << (kMantissaBits - 1)))
        : kUnsignedZero ? 0x80
        : kFiniteOnly   ? kMaxFinite
                        : 0x7F;
    constexpr uint8_t kInfinity =
        kHasInfinity ? static_cast<uint8_t>(kMaxFinite + 1) : kNan;
    // fnuz has one NaN, unsigned; the finite-only formats saturate, and
    // take NaN to +0 (whatever its sign, which differs between machines).
    const uint8_t nan_sign = kUnsignedZero ? 0 : sign;
    if (abs > 0x7F800000u) return kFiniteOnly ? 0 : nan_sign | kNan;
    if (abs == 0x7F800000u) return (kHasInfinity ? sign : nan_sign) | kInfinity;
    // Smallest float exponent field that is normal in the target.
    constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - kBias)
                                    << 23;
    uint32_t code;
    if (abs >= kMinNormal) {
      constexpr int kShift = 23 - kMantissaBits;
      // Round to nearest even on the dropped bits, then rebias: a mantissa
      // that rounds up carries into the exponent.
      const uint32_t rounded =
          (abs + ((1u << (kShift - 1)) - 1) + ((abs >> kShift) & 1)) >> kShift;
      const uint32_t rebias = static_cast<uint32_t>(127 - kBias)
                              << kMantissaBits;
      code = rounded - rebias;
      if (code > kMaxFinite) {
        return (kHasInfinity ? sign : nan_sign) | kInfinity;
      }
    } else {
      // Subnormal in the target (or zero): count units of the smallest
      // subnormal, rounding ties to even (the default rounding mode).
      const float units =
          std::ldexp(std::bit_cast<float>(abs), kBias - 1 + kMantissaBits);
      code = static_cast<uint32_t>(std::nearbyint(units));
    }
    if (kUnsignedZero && code == 0) return 0;
    return static_cast<uint8_t>(sign | code);
  }

  // f8e8m0fnu: the nearest power of two (a mantissa of at least 1.5 rounds
  // up, exactly 1.5 to the even code).
  static uint8_t ExponentOnlyFromFloat(uint32_t b) {
    const uint32_t abs = b & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) return 0xFF;  // infinities and NaN
    if (abs == 0) return 0;
    if (b >> 31) return 0xFF;  // negative
    if (abs < 0x00800000u) {
      // Below 2^-126, f32's subnormals: 2^-127 is 0x00400000 and the tie
      // between codes 0 and 1 is 0x00600000.
      return abs > 0x00600000u ? 1 : 0;
    }
    const uint32_t rounded = (abs + 0x3FFFFFu + ((abs >> 23) & 1)) >> 23;
    return rounded >= 0xFF ? 0xFF : static_cast<uint8_t>(rounded);
  }

  uint8_t bits_ = 0;
};

using Float8E4M3FN = MiniFloat<4, 3, MiniFloatEncoding::kFn>;
using Float8E5M2 = MiniFloat<5, 2, MiniFloatEncoding::kIeee>;
using Float8E4M3 = MiniFloat<4, 3, MiniFloatEncoding::kIeee>;
using Float8E3M4 = MiniFloat<3, 4, MiniFloatEncoding::kIeee>;
using Float8E4M3FNUZ = MiniFloat<4, 3, MiniFloatEncoding::kFnuz>;
using Float8E5M2FNUZ = MiniFloat<5, 2, MiniFloatEncoding::kFnuz>;
using Float8E4M3B11FNUZ = MiniFloat<4, 3, MiniFloatEncoding::kFnuz, 11>;
using Float4E2M1FN = MiniFloat<2, 1, MiniFloatEncoding::kFinite>;
using Float6E2M3FN = MiniFloat<2, 3, MiniFloatEncoding::kFinite>;
using Float6E3M2FN = MiniFloat<3, 2, MiniFloatEncoding::kFinite>;
using Float8E8M0FNU = MiniFloat<8, 0, MiniFloatEncoding::kExponentOnly, 127>;

// The value of the code `bits` of the narrow float `type` (IsMiniFloat),
// and the code nearest `f`.
float MiniFloatToFloat(PrimitiveType type, uint8_t bits);
uint8_t MiniFloatFromFloat(PrimitiveType type, float f);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_MINIFLOAT_H_
