// The host compiler end to end through the runtime: HLO text in, results
// out, compared with values worked out by hand.
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/executable.h"
#include "tests/unit/hlo_run_test.h"

namespace pjrt::runtime {
namespace {

using HostCompilerTest = testing::HloRunTest;

constexpr hlo::PrimitiveType F32 = hlo::PrimitiveType::kF32;
constexpr hlo::PrimitiveType S32 = hlo::PrimitiveType::kS32;

TEST_F(HostCompilerTest, AxpyFromTheCorpus) {
  const char* text = R"(
HloModule axpy_module, entry_computation_layout={(f32[], f32[2,4]{1,0}, f32[2,4]{1,0})->f32[2,4]{1,0}}
ENTRY %axpy.v5 (alpha: f32[], x: f32[2,4], y: f32[2,4]) -> f32[2,4] {
  %alpha = f32[] parameter(0)
  %broadcast = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}
  %x = f32[2,4]{1,0} parameter(1)
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)
  %y = f32[2,4]{1,0} parameter(2)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %y)
})";
  auto out =
      Run(text, {Put<float>(F32, {}, {2}),
                 Put<float>(F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                 Put<float>(F32, {2, 4}, {10, 10, 10, 10, 20, 20, 20, 20})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<float>(*(*out)[0]),
            std::vector<float>({12, 14, 16, 18, 30, 32, 34, 36}));
}

TEST_F(HostCompilerTest, TransposeBroadcastAndSliceFuseIntoOneLoop) {
  const char* text = R"(
HloModule fuse
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3] parameter(1)
  t = f32[3,2] transpose(a), dimensions={1,0}
  bb = f32[3,2] broadcast(b), dimensions={0}
  s = f32[3,2] add(t, bb)
  r = f32[3,2] reverse(s), dimensions={0}
  ROOT sl = f32[2,2] slice(r), slice={[1:3], [0:2]}
})";
  auto out = Run(text, {Put<float>(F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                        Put<float>(F32, {3}, {100, 200, 300})});
  ASSERT_TRUE(out.ok()) << out.status();
  // t = [[1,4],[2,5],[3,6]]; +b rows: [[101,104],[202,205],[303,306]];
  // reversed rows: [[303,306],[202,205],[101,104]]; rows 1..2.
  EXPECT_EQ(Read<float>(*(*out)[0]), std::vector<float>({202, 205, 101, 104}));
}

TEST_F(HostCompilerTest, DotWithBatchAndTransposedOperands) {
  const char* text = R"(
HloModule dot
ENTRY e {
  a = f32[2,3,2] parameter(0)
  b = f32[2,2,3] parameter(1)
  ROOT d = f32[2,2,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}
})";
  std::vector<float> a(12), b(12);
  std::iota(a.begin(), a.end(), 1.0f);
  std::iota(b.begin(), b.end(), -3.0f);
  auto out =
      Run(text, {Put<float>(F32, {2, 3, 2}, a), Put<float>(F32, {2, 2, 3}, b)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> expected(8, 0);
  for (int bb = 0; bb < 2; ++bb)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k)
          expected[bb * 4 + i * 2 + j] +=
              a[bb * 6 + k * 2 + i] * b[bb * 6 + j * 3 + k];
  EXPECT_EQ(Read<float>(*(*out)[0]), expected);
}

TEST_F(HostCompilerTest, ReductionsOverInnerOuterAndMiddleDimensions) {
  const char* text = R"(
HloModule r
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
max { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT m = f32[] maximum(x, y) }
ENTRY e {
  a = f32[2,3,4] parameter(0)
  z = f32[] constant(0)
  ninf = f32[] constant(-inf)
  inner = f32[2,3] reduce(a, z), dimensions={2}, to_apply=add
  outer = f32[3,4] reduce(a, z), dimensions={0}, to_apply=add
  middle = f32[2,4] reduce(a, ninf), dimensions={1}, to_apply=max
  split = f32[3] reduce(a, z), dimensions={0,2}, to_apply=add
  ROOT t = (f32[2,3], f32[3,4], f32[2,4], f32[3]) tuple(inner, outer, middle, split)
})";
  std::vector<float> a(24);
  std::iota(a.begin(), a.end(), 0.0f);
  auto out = Run(text, {Put<float>(F32, {2, 3, 4}, a)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ(Read<float>(*(*out)[0]),
            std::vector<float>({6, 22, 38, 54, 70, 86}));
  std::vector<float> outer(12);
  for (int j = 0; j < 12; ++j) outer[j] = a[j] + a[12 + j];
  EXPECT_EQ(Read<float>(*(*out)[1]), outer);
  EXPECT_EQ(Read<float>(*(*out)[2]),
            std::vector<float>({8, 9, 10, 11, 20, 21, 22, 23}));
  std::vector<float> split(3, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) split[j] += a[i * 12 + j * 4 + k];
  EXPECT_EQ(Read<float>(*(*out)[3]), split);
}

TEST_F(HostCompilerTest, VariadicArgmaxReduce) {
  const char* text = R"(
HloModule TupleReduce
max_argmax {
  value = f32[] parameter(2)
  prev_max = f32[] parameter(0)
  is_next_larger = pred[] compare(value, prev_max), direction=GE
  max = f32[] select(is_next_larger, value, prev_max)
  index = s32[] parameter(3)
  prev_argmax = s32[] parameter(1)
  argmax = s32[] select(is_next_larger, index, prev_argmax)
  ROOT pair = (f32[], s32[]) tuple(max, argmax)
}
ENTRY reduce_entry {
  values = f32[2,5] parameter(0)
  indices = s32[2,5] iota(), iota_dimension=1
  init_value = f32[] constant(-inf)
  init_index = s32[] constant(-1)
  ROOT result = (f32[2], s32[2]) reduce(values, indices, init_value, init_index), dimensions={1}, to_apply=max_argmax
})";
  auto out =
      Run(text, {Put<float>(F32, {2, 5}, {1, 7, 3, 7, 2, -5, -1, -9, -2, -3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<float>(*(*out)[0]), std::vector<float>({7, -1}));
  // GE keeps the later of equal maxima, as XLA's reducer says.
  EXPECT_EQ(Read<int32_t>(*(*out)[1]), std::vector<int32_t>({3, 1}));
}

TEST_F(HostCompilerTest, PadConcatenateAndDynamicSlices) {
  const char* text = R"(
HloModule moves
ENTRY e {
  a = s32[2,3] parameter(0)
  zero = s32[] constant(0)
  p = s32[3,7] pad(a, zero), padding=1_0x-1_1_2
  c = s32[2,6] concatenate(a, a), dimensions={1}
  i = s32[] constant(1)
  big = s32[] constant(100)
  ds = s32[2,2] dynamic-slice(c, i, big), dynamic_slice_sizes={2,2}
  u = s32[1,2] constant({{-1,-2}})
  dus = s32[2,6] dynamic-update-slice(c, u, big, i)
  ROOT t = (s32[3,7], s32[2,6], s32[2,2], s32[2,6]) tuple(p, c, ds, dus)
})";
  auto out = Run(text, {Put<int32_t>(S32, {2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Padding dim 1: low -1 drops element 0, interior 2 spaces the rest by 3.
  EXPECT_EQ(Read<int32_t>(*(*out)[0]),
            std::vector<int32_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0,
                                  0, 3, 0, 0, 0, 5, 0, 0, 6, 0}));
  EXPECT_EQ(Read<int32_t>(*(*out)[1]),
            std::vector<int32_t>({1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  // Starts clamped: row 1 -> 0 (2 rows of 2), column 100 -> 4.
  EXPECT_EQ(Read<int32_t>(*(*out)[2]), std::vector<int32_t>({2, 3, 5, 6}));
  EXPECT_EQ(Read<int32_t>(*(*out)[3]),
            std::vector<int32_t>({1, 2, 3, 1, 2, 3, 4, -1, -2, 4, 5, 6}));
}

TEST_F(HostCompilerTest, IntegerEdgeCases) {
  const char* text = R"(
HloModule ints
ENTRY e {
  a = s32[4] parameter(0)
  b = s32[4] parameter(1)
  d = s32[4] divide(a, b)
  r = s32[4] remainder(a, b)
  sl = s32[4] shift-left(a, b)
  sra = s32[4] shift-right-arithmetic(a, b)
  ROOT t = (s32[4], s32[4], s32[4], s32[4]) tuple(d, r, sl, sra)
})";
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  auto out = Run(text, {Put<int32_t>(S32, {4}, {7, kMin, -7, -8}),
                        Put<int32_t>(S32, {4}, {0, -1, 2, 40})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<int32_t>(*(*out)[0]), std::vector<int32_t>({-1, kMin, -3, 0}));
  EXPECT_EQ(Read<int32_t>(*(*out)[1]), std::vector<int32_t>({7, 0, -1, -8}));
  EXPECT_EQ(Read<int32_t>(*(*out)[2]), std::vector<int32_t>({7, 0, -28, 0}));
  EXPECT_EQ(Read<int32_t>(*(*out)[3]), std::vector<int32_t>({7, -1, -2, -1}));
}

TEST_F(HostCompilerTest, ConvertSaturatesAndMapsNanToZero) {
  const char* text = R"(
HloModule convert
ENTRY e {
  a = f32[5] parameter(0)
  ROOT c = s8[5] convert(a)
})";
  auto out = Run(text, {Put<float>(F32, {5}, {1e9f, -1e9f, NAN, 3.9f, -3.9f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<int8_t>(*(*out)[0]),
            std::vector<int8_t>({127, -128, 0, 3, -3}));
}

TEST_F(HostCompilerTest, CallsAreInlinedAndResultsMayRepeat) {
  const char* text = R"(
HloModule call
twice { x = f32[2] parameter(0)  ROOT y = f32[2] add(x, x) }
ENTRY e {
  a = f32[2] parameter(0)
  c = f32[2] call(a), to_apply=twice
  ROOT t = (f32[2], f32[2], f32[2]) tuple(c, c, a)
})";
  auto out = Run(text, {Put<float>(F32, {2}, {1.5, -2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<float>(*(*out)[0]), std::vector<float>({3, -4}));
  EXPECT_EQ(Read<float>(*(*out)[1]), std::vector<float>({3, -4}));
  EXPECT_EQ(Read<float>(*(*out)[2]), std::vector<float>({1.5, -2}));
}

TEST_F(HostCompilerTest, WrongArgumentsAreInvalidArgumentNamingThem) {
  const char* text = R"(
HloModule sig
ENTRY e { a = f32[2] parameter(0)  ROOT n = f32[2] negate(a) })";
  auto too_many =
      Run(text, {Put<float>(F32, {2}, {1, 2}), Put<float>(F32, {2}, {1, 2})});
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong_type = Run(text, {Put<int32_t>(S32, {2}, {1, 2})});
  EXPECT_NE(wrong_type.status().message().find("argument 0 has dtype s32"),
            absl::string_view::npos)
      << wrong_type.status();
  auto wrong_shape = Run(text, {Put<float>(F32, {3}, {1, 2, 3})});
  EXPECT_NE(wrong_shape.status().message().find("argument 0 has shape f32[3]"),
            absl::string_view::npos)
      << wrong_shape.status();
}

TEST_F(HostCompilerTest, UnsupportedOpIsUnimplementedNamingOpAndLine) {
  const char* text = R"(HloModule w
ENTRY e {
  a = f32[4] parameter(0)
  ROOT s = f32[4] sort(a), dimensions={0}, to_apply=e
})";
  auto exe = Executable::Compile(client_.get(), text);
  ASSERT_FALSE(exe.ok());
  EXPECT_TRUE(exe.status().code() == absl::StatusCode::kUnimplemented ||
              exe.status().code() == absl::StatusCode::kInvalidArgument)
      << exe.status();
}

}  // namespace
}  // namespace pjrt::runtime
