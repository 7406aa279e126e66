#include "hlo/shape.h"

#include "gtest/gtest.h"

namespace pjrt::hlo {
namespace {

TEST(Shape, ByteSizeIsElementsTimesWidth) {
  EXPECT_EQ(Shape(PrimitiveType::kF32, {2, 3}).ByteSize(), 24);
  EXPECT_EQ(Shape(PrimitiveType::kPred, {5}).ByteSize(), 5);
  EXPECT_EQ(Shape(PrimitiveType::kBf16, {}).ByteSize(), 2);
  EXPECT_EQ(Shape(PrimitiveType::kF64, {0, 7}).ByteSize(), 0);
}

TEST(Shape, PrintsLikeHlo) {
  EXPECT_EQ(Shape(PrimitiveType::kF32, {2, 3}).ToString(), "f32[2,3]");
  EXPECT_EQ(Shape(PrimitiveType::kS32, {}).ToString(), "s32[]");
  EXPECT_EQ(Shape::Tuple({Shape(PrimitiveType::kF32, {2}),
                          Shape(PrimitiveType::kPred, {})})
                .ToString(),
            "(f32[2], pred[])");
}

TEST(MakeArrayShape, RejectsNegativeDimensionNamingIt) {
  auto shape = MakeArrayShape(PrimitiveType::kF32, {2, -3});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shape.status().message().find("dimension 1"),
            absl::string_view::npos);
  EXPECT_NE(shape.status().message().find("-3"), absl::string_view::npos);
}

TEST(MakeArrayShape, RejectsUnknownType) {
  auto shape = MakeArrayShape(static_cast<PrimitiveType>(99), {1});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("99"), absl::string_view::npos);
}

TEST(MakeArrayShape, RejectsSizesThatOverflow) {
  auto shape = MakeArrayShape(PrimitiveType::kF64,
                              {int64_t{1} << 40, int64_t{1} << 30});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("overflows"),
            absl::string_view::npos);
}

TEST(MakeArrayShape, RejectsHugeRank) {
  std::vector<int64_t> dims(kMaxRank + 1, 1);
  EXPECT_FALSE(MakeArrayShape(PrimitiveType::kU8, dims).ok());
}

TEST(MakeArrayShape, AcceptsZeroDimensionsWithHugeOthers) {
  auto shape = MakeArrayShape(PrimitiveType::kF32,
                              {0, int64_t{1} << 62, int64_t{1} << 62});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->ByteSize(), 0);
}

TEST(PrimitiveType, NamesRoundTrip) {
  for (PrimitiveType t : kArrayTypes) {
    EXPECT_EQ(ParsePrimitiveType(PrimitiveTypeName(t)), t);
  }
  EXPECT_FALSE(ParsePrimitiveType("c64").has_value());
}

}  // namespace
}  // namespace pjrt::hlo
