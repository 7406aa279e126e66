#include "hlo/literal.h"

#include <bit>
#include <cmath>

namespace pjrt::hlo {

Literal::Literal(Shape shape) : shape_(std::move(shape)) {
  if (shape_.IsTuple()) {
    tuple_.reserve(shape_.tuple_shapes().size());
    for (const Shape& element : shape_.tuple_shapes()) {
      tuple_.emplace_back(element);
    }
  } else if (IsArrayType(shape_.element_type())) {
    data_.assign(static_cast<size_t>(shape_.ElementCount()) *
                     ByteWidth(shape_.element_type()),
                 0);
  }
}

// Half: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Float: 1, 8 (bias
// 127), 23.
uint16_t FloatToHalf(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  bits &= 0x7fffffffu;
  if (bits >= 0x7f800000u) {
    // Infinity stays infinity; NaN keeps its top payload bits and is made
    // quiet so that it cannot turn into infinity.
    if (bits == 0x7f800000u) return sign | 0x7c00u;
    return sign | 0x7e00u | static_cast<uint16_t>((bits >> 13) & 0x3ffu);
  }
  // 65520 is halfway between the largest half (65504) and 2^16; from there
  // on, round-to-nearest-even gives infinity.
  if (bits >= 0x477ff000u) return sign | 0x7c00u;
  if (bits < 0x38800000u) {
    // Below 2^-14 the result is subnormal (or zero). Adding 0.5 lines the
    // half's subnormal steps (2^-24) up with the float's last mantissa bit,
    // so the FPU's own round-to-nearest-even does the rounding.
    const float magic = 0.5f;
    float sum = std::bit_cast<float>(bits) + magic;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(sum) -
                                        std::bit_cast<uint32_t>(magic));
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to
  // nearest, ties to the even result.
  const uint32_t odd = (bits >> 13) & 1u;
  bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
  return sign | static_cast<uint16_t>(bits >> 13);
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) |
                              (mantissa << 13));
}

// Bfloat16 is the top half of a float.
uint16_t FloatToBfloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and top payload bits, force quiet so it stays NaN.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t odd = (bits >> 16) & 1u;
  bits += 0x7fffu + odd;
  return static_cast<uint16_t>(bits >> 16);
}

float Bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace pjrt::hlo
