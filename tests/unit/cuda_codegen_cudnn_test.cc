// The convolutions the CUDA backend gives cuDNN: the problem each XLA
// convolution becomes (its buffers as they lie, in cuDNN's dimension
// order), cuDNN's own check of those descriptors (no GPU needed), and
// what keeps the direct kernel. That the problems compute XLA's
// convolutions is checked by the emulator (cuda_codegen_test.cc), which
// runs them as cuDNN's forward convolution against the host backend.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/cudnn_conv.h"
#include "compiler/host/compiler.h"
#include "compiler/host/kernel_convolution.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/cuda_emulator.h"
#include "tests/unit/test_programs.h"

namespace pjrt::compiler::cuda {
namespace {

using ::testing::HasSubstr;

// The plans of the top-level convolutions of `hlo`, in program order.
std::vector<host::ConvPlan> ConvPlans(const std::string& hlo) {
  std::vector<host::ConvPlan> plans;
  std::unique_ptr<hlo::Module> module = emulation::Parse(hlo);
  if (module == nullptr) return plans;
  auto program = host::CompileForHost(*module);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return plans;
  for (const host::Step& step : (*program)->steps) {
    const auto* k = std::get_if<host::KernelStep>(&step);
    if (k == nullptr) continue;
    if (const auto* conv =
            dynamic_cast<const host::ConvolutionKernelBase*>(k->kernel.get())) {
      plans.push_back(conv->plan);
    }
  }
  return plans;
}

absl::StatusOr<CudnnConvProblem> OnlyProblem(const std::string& hlo) {
  std::vector<host::ConvPlan> plans = ConvPlans(hlo);
  EXPECT_EQ(plans.size(), 1u);
  if (plans.size() != 1) return absl::InternalError("no convolution");
  return CudnnConvFor(plans[0]);
}

TEST(CudnnConv, AnNhwcConvolutionIsItsBuffersAsTheyLie) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  a = bf16[2,7,6,5] parameter(0)
  w = bf16[3,3,5,4] parameter(1)
  ROOT c = bf16[2,7,6,4] convolution(a, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->type, hlo::PrimitiveType::kBf16);
  EXPECT_EQ(p->x_dims, (std::vector<int64_t>{2, 5, 7, 6}));
  EXPECT_EQ(p->x_strides, (std::vector<int64_t>{210, 1, 30, 5}));
  EXPECT_TRUE(p->channels_last);
  EXPECT_EQ(p->w_dims, (std::vector<int64_t>{4, 5, 3, 3}));
  // HWIO as it lies; cuDNN reads a KRSC copy.
  EXPECT_EQ(p->filter_strides, (std::vector<int64_t>{1, 4, 60, 20}));
  EXPECT_EQ(p->w_strides, (std::vector<int64_t>{45, 1, 15, 5}));
  EXPECT_EQ(p->y_dims, (std::vector<int64_t>{2, 4, 7, 6}));
  EXPECT_EQ(p->y_strides, (std::vector<int64_t>{168, 1, 24, 4}));
  EXPECT_EQ(p->pre_padding, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p->post_padding, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p->strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p->dilations, (std::vector<int64_t>{1, 1}));
  EXPECT_FALSE(p->reversed);
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok());
}

TEST(CudnnConv, OneSpatialDimensionGetsAUnitOneBeforeIt) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  a = f32[3,17,4] parameter(0)
  w = f32[5,4,6] parameter(1)
  ROOT c = f32[3,8,6] convolution(a, w), window={size=5 stride=2 pad=2_1 rhs_reversal=1}, dim_labels=b0f_0io->b0f
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->x_dims, (std::vector<int64_t>{3, 4, 1, 17}));
  EXPECT_EQ(p->x_strides, (std::vector<int64_t>{68, 1, 68, 4}));
  EXPECT_EQ(p->w_dims, (std::vector<int64_t>{6, 4, 1, 5}));
  EXPECT_EQ(p->filter_strides, (std::vector<int64_t>{1, 6, 120, 24}));
  EXPECT_EQ(p->w_strides[1], 1);  // KRSC: C innermost, then S, then K
  EXPECT_EQ(p->w_strides[3], 4);
  EXPECT_EQ(p->w_strides[0], 20);
  EXPECT_EQ(p->y_dims, (std::vector<int64_t>{3, 6, 1, 8}));
  EXPECT_EQ(p->y_strides, (std::vector<int64_t>{48, 1, 48, 6}));
  EXPECT_EQ(p->pre_padding, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(p->post_padding, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p->strides, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(p->reversed);
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok());
}

TEST(CudnnConv, FeatureGroupsAreImpliedByTheFiltersInputFeatures) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  a = f32[2,6,9,8] parameter(0)
  w = f32[4,3,3,2] parameter(1)
  ROOT g = f32[2,4,4,3] convolution(a, w), window={size=3x2 stride=2x3 pad=1_0x0_2 rhs_dilate=1x2}, dim_labels=bf01_oi01->bf01, feature_group_count=2
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->x_dims[1] / p->w_dims[1], 2);  // x has 6 features, w 3
  EXPECT_FALSE(p->channels_last);
  EXPECT_EQ(p->w_strides, (std::vector<int64_t>{18, 6, 2, 1}));  // no copy
  EXPECT_EQ(p->filter_strides, p->w_strides);
  EXPECT_EQ(p->dilations, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(p->pre_padding, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(p->post_padding, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok());
}

// A convolution with base dilation is the backward-data convolution of
// the forward one from its output to its lhs.
TEST(CudnnConv, BaseDilationIsTheBackwardDataOfAForwardConvolution) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  a = f32[2,4,5,3] parameter(0)
  w = f32[3,3,3,6] parameter(1)
  ROOT r = f32[2,8,6,6] convolution(a, w), window={size=3x3 pad=1_2x0_1 lhs_dilate=2x2 rhs_dilate=1x2 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->direction, CudnnConvProblem::Direction::kBackwardData);
  EXPECT_TRUE(p->channels_last);
  EXPECT_EQ(p->x_dims, (std::vector<int64_t>{2, 6, 8, 6}));  // XLA's output
  EXPECT_EQ(p->y_dims, (std::vector<int64_t>{2, 3, 4, 5}));  // XLA's lhs
  // K: XLA's kernel input features (3); C: its output features (6).
  EXPECT_EQ(p->w_dims, (std::vector<int64_t>{3, 6, 3, 3}));
  EXPECT_EQ(p->filter_strides, (std::vector<int64_t>{6, 1, 54, 18}));
  EXPECT_EQ(p->strides, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p->dilations, (std::vector<int64_t>{1, 2}));
  // The window reaches 2 and 4: padding 2 - 1, 2 - 2 and 4 - 0, 4 - 1.
  EXPECT_EQ(p->pre_padding, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(p->post_padding, (std::vector<int64_t>{0, 3}));
  EXPECT_FALSE(p->reversed);  // XLA reverses it: cross-correlation
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok()) << CheckCudnnDescribes(*p);
}

// JAX's filter gradient of an NHWC convolution (x's batch as the
// features, dy as the window) is cuDNN's backward-filter convolution; the
// HWIO gradient is written packed (KRSC), then copied out.
TEST(CudnnConv, AFilterGradientIsTheBackwardFilterOfTheForwardConvolution) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  x = f32[2,7,6,5] parameter(0)
  dy = f32[2,4,3,4] parameter(1)
  ROOT dw = f32[3,3,5,4] convolution(x, dy), window={size=4x3 pad=1_1x1_0 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->direction, CudnnConvProblem::Direction::kBackwardFilter);
  EXPECT_TRUE(p->channels_last);
  EXPECT_EQ(p->x_dims, (std::vector<int64_t>{2, 5, 7, 6}));
  EXPECT_EQ(p->x_strides, (std::vector<int64_t>{210, 1, 30, 5}));
  EXPECT_EQ(p->y_dims, (std::vector<int64_t>{2, 4, 4, 3}));
  EXPECT_EQ(p->y_strides, (std::vector<int64_t>{48, 1, 12, 4}));
  EXPECT_EQ(p->w_dims, (std::vector<int64_t>{4, 5, 3, 3}));
  EXPECT_EQ(p->filter_strides, (std::vector<int64_t>{1, 4, 60, 20}));
  EXPECT_EQ(p->w_strides, (std::vector<int64_t>{45, 1, 15, 5}));
  // The forward convolution's stride is XLA's window dilation.
  EXPECT_EQ(p->strides, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p->dilations, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p->pre_padding, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p->post_padding, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok()) << CheckCudnnDescribes(*p);
}

TEST(CudnnConv, Bf16SummedIntoF32IsAnF32ProblemOnWidenedCopies) {
  absl::StatusOr<CudnnConvProblem> p = OnlyProblem(R"(
HloModule m
ENTRY e {
  a = bf16[2,7,6,5] parameter(0)
  w = bf16[3,3,5,4] parameter(1)
  ROOT c = f32[2,7,6,4] convolution(a, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->widened);
  EXPECT_EQ(p->type, hlo::PrimitiveType::kF32);
  EXPECT_TRUE(CheckCudnnDescribes(*p).ok());
}

// cuDNN finalizes the descriptors of every convolution of the test
// programs that the backend gives it: it agrees the shapes fit. Prints why
// the others keep their kernels.
TEST(CudnnConv, CudnnAcceptsEveryProblemOfTheTestPrograms) {
  int described = 0;
  std::map<std::string, int> kept;
  for (const std::string& path : pjrt::testing::TestPrograms()) {
    std::unique_ptr<hlo::Module> module = pjrt::testing::LoadTestProgram(path);
    if (module == nullptr) continue;
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    if (!compiled.ok()) continue;
    ForEachLaunch(compiled->generated.launches, [&](const Launch& launch) {
      if (launch.cudnn == nullptr) return;
      absl::Status s = CheckCudnnDescribes(*launch.cudnn);
      EXPECT_TRUE(s.ok()) << path << ": " << launch.cudnn->ToString() << ": "
                          << s;
      ++described;
    });
    for (const host::Step& step : compiled->lowered->steps) {
      const auto* k = std::get_if<host::KernelStep>(&step);
      const auto* conv = k == nullptr
                             ? nullptr
                             : dynamic_cast<const host::ConvolutionKernelBase*>(
                                   k->kernel.get());
      if (conv == nullptr) continue;
      absl::StatusOr<CudnnConvProblem> p = CudnnConvFor(conv->plan);
      if (!p.ok()) ++kept[std::string(p.status().message())];
    }
  }
  std::cout << described << " convolutions for cuDNN\n";
  for (const auto& [why, count] : kept) {
    std::cout << count << " kept their kernel: " << why << "\n";
  }
  EXPECT_GE(described, 1);
}

struct Refusal {
  const char* name;
  const char* hlo;
  const char* words;
};

TEST(CudnnConv, WhatCudnnCannotExpressKeepsTheDirectKernel) {
  const Refusal refusals[] = {
      {"base dilation with a stride", R"(
HloModule m
ENTRY e {
  a = f32[1,4,4,2] parameter(0)
  w = f32[2,2,2,3] parameter(1)
  ROOT c = f32[1,3,3,3] convolution(a, w), window={size=2x2 stride=2x2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
})",
       "base (lhs) dilation with a stride"},
      {"base dilation with feature groups", R"(
HloModule m
ENTRY e {
  a = f32[1,4,4,2] parameter(0)
  w = f32[2,2,1,4] parameter(1)
  ROOT c = f32[1,6,6,4] convolution(a, w), window={size=2x2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=2
})",
       "base (lhs) dilation with feature groups"},
      {"base dilation with padding past the window", R"(
HloModule m
ENTRY e {
  a = f32[1,4,4,2] parameter(0)
  w = f32[2,2,2,3] parameter(1)
  ROOT c = f32[1,9,6,3] convolution(a, w), window={size=2x2 pad=2_1x0_0 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
})",
       "padding past the window (2_1 around a window reaching 1)"},
      {"batch groups", R"(
HloModule m
ENTRY e {
  a = f32[4,6,6,2] parameter(0)
  w = f32[2,5,5,2] parameter(1)
  ROOT g = f32[2,2,2,2] convolution(a, w), window={size=5x5}, dim_labels=b01f_i01o->b01f, batch_group_count=2
})",
       "batch groups"},
      {"negative padding", R"(
HloModule m
ENTRY e {
  a = f32[1,6,6,2] parameter(0)
  w = f32[3,3,2,3] parameter(1)
  ROOT c = f32[1,3,4,3] convolution(a, w), window={size=3x3 pad=0_-1x0_0}, dim_labels=b01f_01io->b01f
})",
       "negative padding"},
      {"some dimensions reversed", R"(
HloModule m
ENTRY e {
  a = f32[1,6,6,2] parameter(0)
  w = f32[3,3,2,3] parameter(1)
  ROOT c = f32[1,4,4,3] convolution(a, w), window={size=3x3 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f
})",
       "some spatial dimensions only"},
      {"integers", R"(
HloModule m
ENTRY e {
  a = s8[1,5,5,2] parameter(0)
  w = s8[3,3,2,4] parameter(1)
  ROOT c = s32[1,3,3,4] convolution(a, w), window={size=3x3}, dim_labels=b01f_01io->b01f
})",
       "mixed types (s8 and s8 into s32)"},
      {"mixed float types", R"(
HloModule m
ENTRY e {
  a = bf16[1,5,5,2] parameter(0)
  w = bf16[3,3,2,4] parameter(1)
  ROOT c = f16[1,3,3,4] convolution(a, w), window={size=3x3}, dim_labels=b01f_01io->b01f
})",
       "mixed types (bf16 and bf16 into f16)"},
      {"complex", R"(
HloModule m
ENTRY e {
  a = c64[1,5,5,2] parameter(0)
  w = c64[3,3,2,4] parameter(1)
  ROOT c = c64[1,3,3,4] convolution(a, w), window={size=3x3}, dim_labels=b01f_01io->b01f
})",
       "cuDNN convolutions of c64 are not used"},
      {"output laid out unlike the input", R"(
HloModule m
ENTRY e {
  a = f32[2,6,9,8] parameter(0)
  k = f32[3,2,6,5] parameter(1)
  ROOT rv = f32[2,5,8,7] convolution(a, k), window={size=3x2 pad=0_0x1_0}, dim_labels=bf01_01io->bf10
})",
       "other than both packed NHWC or NCHW"},
      {"four spatial dimensions", R"(
HloModule m
ENTRY e {
  a = f32[1,3,3,3,3,2] parameter(0)
  w = f32[2,2,2,2,2,2] parameter(1)
  ROOT c = f32[1,2,2,2,2,2] convolution(a, w), window={size=2x2x2x2}, dim_labels=b0123f_0123io->b0123f
})",
       "4 spatial dimensions"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.name);
    absl::StatusOr<CudnnConvProblem> p = OnlyProblem(r.hlo);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(r.words));
    // The backend gives the launch no cuDNN problem: its kernel runs.
    std::unique_ptr<hlo::Module> module = emulation::Parse(r.hlo);
    ASSERT_NE(module, nullptr);
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    int kernels = 0;
    ForEachLaunch(compiled->generated.launches, [&](const Launch& launch) {
      EXPECT_EQ(launch.cudnn, nullptr) << launch.origin;
      kernels += launch.kind == Launch::Kind::kKernel;
    });
    EXPECT_GE(kernels, 1);
  }
}

}  // namespace
}  // namespace pjrt::compiler::cuda
