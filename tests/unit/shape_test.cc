#include "hlo/shape.h"

#include <limits>
#include <vector>

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

TEST(Shape, WithElementTypeKeepsTheDimensionsOnly) {
  Shape f32(PrimitiveType::kF32, {2, 3});
  f32.set_layout({0, 1});
  const Shape pred = f32.WithElementType(PrimitiveType::kPred);
  EXPECT_EQ(pred.ToString(), "pred[2,3]");
  EXPECT_FALSE(pred.layout().has_value());
  EXPECT_EQ(Shape(PrimitiveType::kS32, {})
                .WithElementType(PrimitiveType::kF64)
                .ToString(),
            "f64[]");
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
  // Every type an array may have is offered, the narrow ones included.
  for (PrimitiveType t : kArrayTypes) {
    EXPECT_NE(shape.status().message().find(PrimitiveTypeName(t)),
              absl::string_view::npos)
        << PrimitiveTypeName(t);
  }
}

TEST(MakeArrayShape, RejectsSizesThatOverflow) {
  auto shape =
      MakeArrayShape(PrimitiveType::kF64, {int64_t{1} << 40, int64_t{1} << 30});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("too large"),
            absl::string_view::npos);
}

// 1024 x (2^54 + 1) elements is 2^64 + 1024: a product that wraps to 1024
// in 64 bits must still be refused.
TEST(MakeArrayShape, RejectsElementCountsThatWrapToSmallNumbers) {
  auto shape =
      MakeArrayShape(PrimitiveType::kF32, {1024, (int64_t{1} << 54) + 1});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  shape =
      MakeArrayShape(PrimitiveType::kF32, {int64_t{1} << 32, int64_t{1} << 32});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("more than 2^63"),
            absl::string_view::npos)
      << shape.status();
}

TEST(MakeArrayShape, AcceptsTheLargestArrayAndNothingLarger) {
  EXPECT_TRUE(MakeArrayShape(PrimitiveType::kU8, {kMaxArrayBytes}).ok());
  EXPECT_TRUE(MakeArrayShape(PrimitiveType::kF32, {kMaxArrayBytes / 4}).ok());
  auto shape = MakeArrayShape(PrimitiveType::kF32, {kMaxArrayBytes / 4 + 1});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("72057594037927936"),
            absl::string_view::npos)
      << shape.status();
}

TEST(MakeArrayShape, RejectsHugeDimensionsEvenWhenAnotherIsZero) {
  auto shape = MakeArrayShape(PrimitiveType::kF32,
                              {0, int64_t{1} << 62, int64_t{1} << 62});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("dimension 1"),
            absl::string_view::npos)
      << shape.status();
  auto empty = MakeArrayShape(PrimitiveType::kF32, {0, 1 << 20});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->ByteSize(), 0);
}

TEST(Shape, SizesSaturateInsteadOfWrapping) {
  Shape huge(PrimitiveType::kF32, {int64_t{1} << 32, int64_t{1} << 32});
  EXPECT_EQ(huge.ElementCount(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(huge.ByteSize(), std::numeric_limits<int64_t>::max());
}

TEST(Shape, TupleCopiesShareTheirElements) {
  Shape leaf(PrimitiveType::kF32, {2});
  Shape t = Shape::Tuple({leaf, leaf});
  // Doubling 40 times would need 2^40 leaves if elements were copied.
  for (int i = 0; i < 40; ++i) t = Shape::Tuple({t, t});
  EXPECT_EQ(t.tuple_depth(), 41);
  EXPECT_EQ(t.leaf_count(), int64_t{1} << 41);
  EXPECT_TRUE(t == t);
  Shape copy = t;
  EXPECT_EQ(&copy.tuple_shapes(), &t.tuple_shapes());
}

TEST(CheckShapeLimits, BoundsTupleDepthAndLeaves) {
  Shape leaf(PrimitiveType::kF32, {2});
  Shape deep = leaf;
  for (int i = 0; i < kMaxTupleDepth; ++i) deep = Shape::Tuple({deep});
  EXPECT_TRUE(CheckShapeLimits(deep).ok());
  Shape deeper = Shape::Tuple({deep});
  absl::Status status = CheckShapeLimits(deeper);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("nest 33 deep"), absl::string_view::npos)
      << status;

  std::vector<Shape> many(kMaxTupleLeaves, leaf);
  EXPECT_TRUE(CheckShapeLimits(Shape::Tuple(many)).ok());
  many.push_back(leaf);
  status = CheckShapeLimits(Shape::Tuple(many));
  EXPECT_NE(status.message().find("16385 arrays"), absl::string_view::npos)
      << status;
}

TEST(PrimitiveType, NamesRoundTrip) {
  for (PrimitiveType t : kArrayTypes) {
    EXPECT_EQ(ParsePrimitiveType(PrimitiveTypeName(t)), t);
  }
  // Parse-only types are not array types.
  EXPECT_FALSE(ParsePrimitiveType("opaque").has_value());
  EXPECT_EQ(ParseAnyPrimitiveType("opaque"), PrimitiveType::kOpaque);
  EXPECT_EQ(ParsePrimitiveType("u2"), PrimitiveType::kU2);
  EXPECT_EQ(ParsePrimitiveType("f8e8m0fnu"), PrimitiveType::kF8E8M0FNU);
  EXPECT_EQ(ParsePrimitiveType("f8e4m3fnuz"), PrimitiveType::kF8E4M3FNUZ);
}

TEST(Shape, SubByteTypesArePackedInBuffers) {
  EXPECT_EQ(Shape(PrimitiveType::kS4, {5}).ByteSize(), 3);
  EXPECT_EQ(Shape(PrimitiveType::kU4, {4}).ByteSize(), 2);
  EXPECT_EQ(Shape(PrimitiveType::kS4, {5}).UnpackedByteSize(), 5);
  EXPECT_EQ(Shape(PrimitiveType::kF4E2M1FN, {5}).ByteSize(), 3);
  EXPECT_EQ(Shape(PrimitiveType::kS2, {5}).ByteSize(), 2);
  EXPECT_EQ(Shape(PrimitiveType::kU2, {8}).ByteSize(), 2);
  EXPECT_EQ(Shape(PrimitiveType::kF6E2M3FN, {5}).ByteSize(), 5);
  EXPECT_EQ(Shape(PrimitiveType::kC128, {3}).ByteSize(), 48);
  EXPECT_EQ(Shape(PrimitiveType::kF8E5M2, {3}).ByteSize(), 3);
}

}  // namespace
}  // namespace pjrt::hlo
