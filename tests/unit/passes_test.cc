// hlo/passes.h: the backend-neutral rewrites, by the structure they leave
// (which the verifier still accepts) and by the numbers the rewritten
// program computes.
#include "hlo/passes.h"

#include <vector>

#include "gtest/gtest.h"
#include "hlo/parser.h"
#include "hlo/verifier.h"
#include "tests/unit/hlo_run_test.h"

namespace pjrt::hlo {
namespace {

std::unique_ptr<Module> Parse(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE(VerifyModule(**module, text).ok());
  return std::move(*module);
}

std::string Conv(const std::string& window,
                 const std::string& out = "f32[2,6,4,5]") {
  return R"(HloModule m
ENTRY e {
  x = f32[2,3,4,5] parameter(0)
  w = f32[6,3,1,1] parameter(1)
  ROOT y = )" +
         out + R"( convolution(x, w), )" + window +
         R"(dim_labels=bf01_oi01->bf01
})";
}

TEST(Passes, AUnitConvolutionBecomesADotAndATranspose) {
  const std::string text = Conv("window={size=1x1}, ");
  auto module = Parse(text);
  auto rewritten = SimplifyModule(module.get());
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(*rewritten, 1);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kTranspose);
  EXPECT_EQ(root->shape(), Shape(PrimitiveType::kF32, {2, 6, 4, 5}));
  // dot dims: x's b, 0, 1 then the output feature.
  EXPECT_EQ(root->attributes().dimensions, (std::vector<int64_t>{0, 3, 1, 2}));
  const Instruction* dot = root->operand(0);
  ASSERT_EQ(dot->opcode(), Opcode::kDot);
  EXPECT_EQ(dot->shape(), Shape(PrimitiveType::kF32, {2, 4, 5, 6}));
  EXPECT_EQ(dot->operand(1)->shape(), Shape(PrimitiveType::kF32, {6, 3}));
  EXPECT_TRUE(VerifyModule(*module, text).ok());
}

TEST(Passes, OtherConvolutionsStayAsTheyAre) {
  for (const std::string& text :
       {Conv("window={size=1x1 pad=1_1x0_0}, ", "f32[2,6,6,5]"),
        Conv("window={size=1x1 stride=2x1}, ", "f32[2,6,2,5]"),
        Conv("window={size=1x1 rhs_reversal=1x0}, ")}) {
    auto module = Parse(text);
    auto rewritten = SimplifyModule(module.get());
    ASSERT_TRUE(rewritten.ok()) << rewritten.status();
    EXPECT_EQ(*rewritten, 0) << text;
    EXPECT_EQ(module->entry()->root()->opcode(), Opcode::kConvolution);
  }
}

class PassesRun : public runtime::testing::HloRunTest {};

TEST_F(PassesRun, TheRewrittenConvolutionComputesTheConvolution) {
  // x: NCHW 2x3x4x5, w: OIHW 6x3x1x1; y[b,o,h,w] = sum_i x[b,i,h,w] w[o,i].
  std::vector<float> x(2 * 3 * 4 * 5), w(6 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.5f;
  auto out = Run(Conv("window={size=1x1}, "),
                 {Put(PrimitiveType::kF32, {2, 3, 4, 5}, x),
                  Put(PrimitiveType::kF32, {6, 3, 1, 1}, w)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> y = Read<float>(*(*out)[0]);
  ASSERT_EQ(y.size(), 2u * 6 * 4 * 5);
  for (int b = 0; b < 2; ++b) {
    for (int o = 0; o < 6; ++o) {
      for (int p = 0; p < 20; ++p) {
        float want = 0;
        for (int i = 0; i < 3; ++i)
          want += x[(b * 3 + i) * 20 + p] * w[o * 3 + i];
        EXPECT_EQ(y[(b * 6 + o) * 20 + p], want) << b << " " << o << " " << p;
      }
    }
  }
}

}  // namespace
}  // namespace pjrt::hlo
