// 8-bit floats as XLA defines them (the ml_dtypes formats): f8e4m3fn (4
// exponent bits, bias 7, 3 mantissa bits, no infinities, one NaN per sign:
// S.1111.111; largest 448) and f8e5m2 (5 exponent bits, bias 15, 2 mantissa
// bits, IEEE-style infinities and NaNs; largest 57344).
//
// Converting from float rounds to the nearest value, ties to even, and
// keeps subnormals. A value that rounds past the largest finite one
// overflows, as XLA's converts do: to infinity in f8e5m2, to NaN in
// f8e4m3fn (which has no infinity). NaN stays NaN (sign kept).
#ifndef PJRT_HLO_FLOAT8_H_
#define PJRT_HLO_FLOAT8_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace pjrt::hlo {

template <int kExponentBits, int kMantissaBits, bool kHasInfinity>
class Float8 {
 public:
  static constexpr int kBias = (1 << (kExponentBits - 1)) - 1;

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
    const uint8_t sign = bits >> 7;
    const int exponent = (bits >> kMantissaBits) & ((1 << kExponentBits) - 1);
    const int mantissa = bits & ((1 << kMantissaBits) - 1);
    constexpr int kMaxExponent = (1 << kExponentBits) - 1;
    float value;
    if (kHasInfinity && exponent == kMaxExponent) {
      value = mantissa == 0 ? INFINITY : NAN;
    } else if (!kHasInfinity && exponent == kMaxExponent &&
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
    // Codes of NaN, infinity and the largest finite value.
    constexpr uint8_t kNan =
        kHasInfinity ? static_cast<uint8_t>(
                           (((1 << kExponentBits) - 1) << kMantissaBits) |
                           (1 << (kMantissaBits - 1)))
                     : 0x7F;
    constexpr uint8_t kInfinity =
        kHasInfinity
            ? static_cast<uint8_t>(((1 << kExponentBits) - 1) << kMantissaBits)
            : kNan;
    constexpr uint8_t kMaxFinite =
        kHasInfinity ? static_cast<uint8_t>(kInfinity - 1) : 0x7E;
    if (abs > 0x7F800000u) return sign | kNan;
    if (abs == 0x7F800000u) return sign | kInfinity;
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
      if (code > kMaxFinite) return sign | kInfinity;
    } else {
      // Subnormal in the target (or zero): count units of the smallest
      // subnormal, rounding ties to even (the default rounding mode).
      const float units =
          std::ldexp(std::bit_cast<float>(abs), kBias - 1 + kMantissaBits);
      code = static_cast<uint32_t>(std::nearbyint(units));
    }
    return static_cast<uint8_t>(sign | code);
  }

 private:
  uint8_t bits_ = 0;
};

using Float8E4M3FN = Float8<4, 3, false>;
using Float8E5M2 = Float8<5, 2, true>;

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_FLOAT8_H_
