// The 8-bit float formats (hlo/float8.h) against values ml_dtypes defines:
// each format's 1.0, largest finite value, smallest subnormal, infinity or
// NaN codes, overflow, and every code's round trip.
#include "hlo/float8.h"

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

TEST(Float8, EveryFormatHasItsValues) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(PrimitiveTypeName(f.type));
    EXPECT_TRUE(IsFloat8(f.type));
    EXPECT_EQ(Float8FromFloat(f.type, 1.0f), f.one);
    EXPECT_EQ(Float8ToFloat(f.type, f.one), 1.0f);
    EXPECT_EQ(Float8ToFloat(f.type, f.max_code), f.max);
    EXPECT_EQ(Float8FromFloat(f.type, f.max), f.max_code);
    EXPECT_EQ(Float8ToFloat(f.type, 0x01), f.min_subnormal);
    EXPECT_EQ(Float8FromFloat(f.type, f.min_subnormal), 0x01);
    // Half the smallest subnormal is a tie, rounded to the even zero.
    EXPECT_EQ(Float8FromFloat(f.type, f.min_subnormal / 2), 0x00);
    const uint8_t overflow = Float8FromFloat(f.type, 2 * f.max);
    const uint8_t nan = Float8FromFloat(f.type, NAN);
    EXPECT_TRUE(std::isnan(Float8ToFloat(f.type, nan)));
    if (f.has_infinity) {
      EXPECT_EQ(Float8ToFloat(f.type, overflow), INFINITY);
      EXPECT_EQ(Float8ToFloat(f.type, Float8FromFloat(f.type, -INFINITY)),
                -INFINITY);
    } else {
      EXPECT_TRUE(std::isnan(Float8ToFloat(f.type, overflow)));
    }
    if (f.unsigned_zero) {
      EXPECT_EQ(nan, 0x80);
      EXPECT_EQ(Float8FromFloat(f.type, -0.0f), 0x00);
      EXPECT_EQ(Float8FromFloat(f.type, -f.min_subnormal / 4), 0x00);
      EXPECT_EQ(Float8FromFloat(f.type, -INFINITY), 0x80);
    } else {
      EXPECT_EQ(Float8FromFloat(f.type, -0.0f), 0x80);
      EXPECT_TRUE(std::signbit(Float8ToFloat(f.type, 0x80)));
    }
    // Every code that is not NaN converts to a float and back to itself.
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = Float8ToFloat(f.type, static_cast<uint8_t>(c));
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      EXPECT_EQ(Float8FromFloat(f.type, v), c) << c;
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

}  // namespace
}  // namespace pjrt::hlo
