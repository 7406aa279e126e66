// 8-bit floats as XLA defines them (the ml_dtypes formats), in three
// encodings:
//  - IEEE-style (f8e5m2, f8e4m3, f8e3m4): the largest exponent holds
//    infinities (mantissa 0) and NaNs; largest 57344, 240 and 15.5;
//  - "fn", finite (f8e4m3fn): no infinity, one NaN per sign (all exponent
//    and mantissa bits set); largest 448;
//  - "fnuz", finite with an unsigned zero (f8e4m3fnuz, f8e5m2fnuz,
//    f8e4m3b11fnuz): no infinity, no negative zero, one NaN (0x80, the
//    code of -0); the bias one more than IEEE's (8, 16) or 11; largest 240,
//    57344 and 30.
//
// Converting from float rounds to the nearest value, ties to even, and
// keeps subnormals. A value that rounds past the largest finite one
// overflows, as XLA's converts do: to infinity where the format has one,
// else to NaN. NaN stays NaN (sign kept where the format has signed NaNs);
// -0 and negative values that round to zero become +0 in fnuz formats.
#ifndef PJRT_HLO_FLOAT8_H_
#define PJRT_HLO_FLOAT8_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "hlo/primitive_type.h"

namespace pjrt::hlo {

enum class Float8Encoding { kIeee, kFn, kFnuz };

template <int kExponentBits, int kMantissaBits, Float8Encoding kEncoding,
          int kBiasValue = (1 << (kExponentBits - 1)) -
                           (kEncoding == Float8Encoding::kFnuz ? 0 : 1)>
class Float8 {
 public:
  static constexpr int kBias = kBiasValue;
  static constexpr bool kHasInfinity = kEncoding == Float8Encoding::kIeee;
  static constexpr bool kUnsignedZero = kEncoding == Float8Encoding::kFnuz;

  Float8() = default;
  explicit Float8(float f) : bits_(FromFloat(f)) {}
  explicit Float8(double d) : Float8(static_cast<float>(d)) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  explicit Float8(I i) : Float8(static_cast<float>(i)) {}

  explicit operator float() const { return ToFloat(bits_); }
  explicit operator double() const { return ToFloat(bits_); }

  uint8_t bits() const { return bits_; }
  static Float8 FromBits(uint8_t bits) {
    Float8 f;
    f.bits_ = bits;
    return f;
  }

  static float ToFloat(uint8_t bits) {
    if (kUnsignedZero && bits == 0x80) return NAN;
    const uint8_t sign = bits >> 7;
    const int exponent = (bits >> kMantissaBits) & ((1 << kExponentBits) - 1);
    const int mantissa = bits & ((1 << kMantissaBits) - 1);
    constexpr int kMaxExponent = (1 << kExponentBits) - 1;
    float value;
    if (kHasInfinity && exponent == kMaxExponent) {
      value = mantissa == 0 ? INFINITY : NAN;
    } else if (kEncoding == Float8Encoding::kFn && exponent == kMaxExponent &&
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
    const uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80);
    const uint32_t abs = b & 0x7FFFFFFFu;
    // Codes of NaN, infinity and the largest finite value (without sign).
    constexpr uint8_t kNan =
        kHasInfinity ? static_cast<uint8_t>(
                           (((1 << kExponentBits) - 1) << kMantissaBits) |
                           (1 << (kMantissaBits - 1)))
        : kUnsignedZero ? 0x80
                        : 0x7F;
    constexpr uint8_t kInfinity =
        kHasInfinity
            ? static_cast<uint8_t>(((1 << kExponentBits) - 1) << kMantissaBits)
            : kNan;
    constexpr uint8_t kMaxFinite = kHasInfinity    ? kInfinity - 1
                                   : kUnsignedZero ? 0x7F
                                                   : 0x7E;
    // fnuz has one NaN, unsigned.
    const uint8_t nan_sign = kUnsignedZero ? 0 : sign;
    if (abs > 0x7F800000u) return nan_sign | kNan;
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

 private:
  uint8_t bits_ = 0;
};

using Float8E4M3FN = Float8<4, 3, Float8Encoding::kFn>;
using Float8E5M2 = Float8<5, 2, Float8Encoding::kIeee>;
using Float8E4M3 = Float8<4, 3, Float8Encoding::kIeee>;
using Float8E3M4 = Float8<3, 4, Float8Encoding::kIeee>;
using Float8E4M3FNUZ = Float8<4, 3, Float8Encoding::kFnuz>;
using Float8E5M2FNUZ = Float8<5, 2, Float8Encoding::kFnuz>;
using Float8E4M3B11FNUZ = Float8<4, 3, Float8Encoding::kFnuz, 11>;

// The value of the code `bits` of the 8-bit float `type` (IsFloat8), and
// the code nearest `f`.
float Float8ToFloat(PrimitiveType type, uint8_t bits);
uint8_t Float8FromFloat(PrimitiveType type, float f);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_FLOAT8_H_
