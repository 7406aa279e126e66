// The narrow float formats (hlo/minifloat.h) against values ml_dtypes
// defines: each format's 1.0, largest finite value, smallest subnormal,
// infinity or NaN codes, overflow, and every code's round trip.
#include "hlo/minifloat.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"
#include "hlo/primitive_type.h"

namespace pjrt::hlo {
namespace {

struct Format {
  PrimitiveType type;
  uint8_t one;       // the code of 1.0
  uint8_t max_code;  // the largest finite value's code
  float max;         // and its value
  float min_subnormal;
  bool has_infinity;
  bool unsigned_zero;  // fnuz: no -0, NaN is 0x80
};

constexpr Format kFormats[] = {
    {PrimitiveType::kF8E4M3FN, 0x38, 0x7E, 448, 0x1p-9f, false, false},
    {PrimitiveType::kF8E5M2, 0x3C, 0x7B, 57344, 0x1p-16f, true, false},
    {PrimitiveType::kF8E4M3, 0x38, 0x77, 240, 0x1p-9f, true, false},
    {PrimitiveType::kF8E3M4, 0x30, 0x6F, 15.5f, 0x1p-6f, true, false},
    {PrimitiveType::kF8E4M3FNUZ, 0x40, 0x7F, 240, 0x1p-10f, false, true},
    {PrimitiveType::kF8E5M2FNUZ, 0x40, 0x7F, 57344, 0x1p-17f, false, true},
    {PrimitiveType::kF8E4M3B11FNUZ, 0x58, 0x7F, 30, 0x1p-13f, false, true},
};

TEST(MiniFloat, EveryFormatHasItsValues) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(PrimitiveTypeName(f.type));
    EXPECT_TRUE(IsMiniFloat(f.type));
    EXPECT_EQ(MiniFloatFromFloat(f.type, 1.0f), f.one);
    EXPECT_EQ(MiniFloatToFloat(f.type, f.one), 1.0f);
    EXPECT_EQ(MiniFloatToFloat(f.type, f.max_code), f.max);
    EXPECT_EQ(MiniFloatFromFloat(f.type, f.max), f.max_code);
    EXPECT_EQ(MiniFloatToFloat(f.type, 0x01), f.min_subnormal);
    EXPECT_EQ(MiniFloatFromFloat(f.type, f.min_subnormal), 0x01);
    // Half the smallest subnormal is a tie, rounded to the even zero.
    EXPECT_EQ(MiniFloatFromFloat(f.type, f.min_subnormal / 2), 0x00);
    const uint8_t overflow = MiniFloatFromFloat(f.type, 2 * f.max);
    const uint8_t nan = MiniFloatFromFloat(f.type, NAN);
    EXPECT_TRUE(std::isnan(MiniFloatToFloat(f.type, nan)));
    if (f.has_infinity) {
      EXPECT_EQ(MiniFloatToFloat(f.type, overflow), INFINITY);
      EXPECT_EQ(MiniFloatToFloat(f.type, MiniFloatFromFloat(f.type, -INFINITY)),
                -INFINITY);
    } else {
      EXPECT_TRUE(std::isnan(MiniFloatToFloat(f.type, overflow)));
    }
    if (f.unsigned_zero) {
      EXPECT_EQ(nan, 0x80);
      EXPECT_EQ(MiniFloatFromFloat(f.type, -0.0f), 0x00);
      EXPECT_EQ(MiniFloatFromFloat(f.type, -f.min_subnormal / 4), 0x00);
      EXPECT_EQ(MiniFloatFromFloat(f.type, -INFINITY), 0x80);
    } else {
      EXPECT_EQ(MiniFloatFromFloat(f.type, -0.0f), 0x80);
      EXPECT_TRUE(std::signbit(MiniFloatToFloat(f.type, 0x80)));
    }
    // Every code that is not NaN converts to a float and back to itself.
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = MiniFloatToFloat(f.type, static_cast<uint8_t>(c));
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      EXPECT_EQ(MiniFloatFromFloat(f.type, v), c) << c;
    }
    // NaNs: one (fnuz), two (fn: one per sign), or every mantissa but 0 of
    // the largest exponent (IEEE).
    const int mantissa_bits =
        f.type == PrimitiveType::kF8E5M2 ? 2
        : f.type == PrimitiveType::kF8E3M4
            ? 4
            : (f.type == PrimitiveType::kF8E5M2FNUZ ? 2 : 3);
    EXPECT_EQ(nans, f.unsigned_zero  ? 1
                    : f.has_infinity ? 2 * ((1 << mantissa_bits) - 1)
                                     : 2);
  }
}

// The microscaling element types: no infinity, no NaN, the sign in the top
// bit of their 4 or 6; overflow, infinities and NaN saturate.
struct FiniteFormat {
  PrimitiveType type;
  int bits;
  uint8_t one;
  float max;
  float min_subnormal;
};

constexpr FiniteFormat kFiniteFormats[] = {
    {PrimitiveType::kF4E2M1FN, 4, 0x2, 6, 0.5f},
    {PrimitiveType::kF6E2M3FN, 6, 0x08, 7.5f, 0.125f},
    {PrimitiveType::kF6E3M2FN, 6, 0x0C, 28, 0.0625f},
};

TEST(MiniFloat, FiniteOnlyFormatsSaturate) {
  for (const FiniteFormat& f : kFiniteFormats) {
    SCOPED_TRACE(PrimitiveTypeName(f.type));
    EXPECT_TRUE(IsMiniFloat(f.type));
    EXPECT_TRUE(IsFiniteOnlyFloat(f.type));
    EXPECT_EQ(MiniFloatCodeBits(f.type), f.bits);
    const uint8_t sign = uint8_t{1} << (f.bits - 1);
    const uint8_t max_code = sign - 1;
    EXPECT_EQ(MiniFloatFromFloat(f.type, 1.0f), f.one);
    EXPECT_EQ(MiniFloatToFloat(f.type, max_code), f.max);
    EXPECT_EQ(MiniFloatToFloat(f.type, 0x01), f.min_subnormal);
    EXPECT_EQ(MiniFloatToFloat(f.type, sign | 0x01), -f.min_subnormal);
    EXPECT_EQ(MiniFloatFromFloat(f.type, f.min_subnormal / 2), 0x00);
    EXPECT_EQ(MiniFloatFromFloat(f.type, -0.0f), sign);
    for (float big : {2 * f.max, INFINITY}) {
      EXPECT_EQ(MiniFloatFromFloat(f.type, big), max_code) << big;
      EXPECT_EQ(MiniFloatFromFloat(f.type, -big), sign | max_code) << big;
    }
    // NaN, of either sign, is +0.
    EXPECT_EQ(MiniFloatFromFloat(f.type, NAN), 0);
    EXPECT_EQ(MiniFloatFromFloat(f.type, -NAN), 0);
    // Every code is a number, and converts back to itself.
    for (int c = 0; c < (1 << f.bits); ++c) {
      const float v = MiniFloatToFloat(f.type, static_cast<uint8_t>(c));
      EXPECT_FALSE(std::isnan(v)) << c;
      EXPECT_EQ(MiniFloatFromFloat(f.type, v), c) << c;
    }
  }
  // StableHLO's interpreter tests: 3.1415 is 3 in e2m1 and e3m2, 3.25 in
  // e2m3; 0.1 is 0 in e2m1.
  EXPECT_EQ(
      MiniFloatToFloat(PrimitiveType::kF4E2M1FN,
                       MiniFloatFromFloat(PrimitiveType::kF4E2M1FN, 3.1415f)),
      3.0f);
  EXPECT_EQ(
      MiniFloatToFloat(PrimitiveType::kF6E2M3FN,
                       MiniFloatFromFloat(PrimitiveType::kF6E2M3FN, 3.1415f)),
      3.25f);
  EXPECT_EQ(MiniFloatFromFloat(PrimitiveType::kF4E2M1FN, 0.1f), 0x0);
}

TEST(MiniFloat, ExponentOnlyFormatHoldsPowersOfTwo) {
  constexpr PrimitiveType kE8M0 = PrimitiveType::kF8E8M0FNU;
  EXPECT_TRUE(IsMiniFloat(kE8M0));
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 1.0f), 127);
  EXPECT_EQ(MiniFloatToFloat(kE8M0, 0), 0x1p-127f);
  EXPECT_EQ(MiniFloatToFloat(kE8M0, 254), 0x1p127f);
  EXPECT_TRUE(std::isnan(MiniFloatToFloat(kE8M0, 0xFF)));
  // Nearest power of two, ties (a mantissa of 1.5) to the even code.
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 0.1f), 124);     // 0.125
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 3.1415f), 129);  // 4
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 1.5f), 128);     // codes 127, 128
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 3.0f), 128);     // codes 128, 129
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 1.49f), 127);
  // No zero: zero and the smallest values become the smallest, 2^-127.
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 0.0f), 0);
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, -0.0f), 0);
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 0x1p-140f), 0);
  EXPECT_EQ(MiniFloatFromFloat(kE8M0, 0x1p-126f), 1);
  // No sign and no infinity: NaN instead.
  for (float bad : {-1.0f, -INFINITY, INFINITY, NAN, 0x1.9p127f}) {
    EXPECT_EQ(MiniFloatFromFloat(kE8M0, bad), 0xFF) << bad;
  }
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(MiniFloatFromFloat(
                  kE8M0, MiniFloatToFloat(kE8M0, static_cast<uint8_t>(c))),
              c);
  }
}

}  // namespace
}  // namespace pjrt::hlo
