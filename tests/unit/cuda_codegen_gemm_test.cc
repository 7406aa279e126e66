// Matmuls through cuBLASLt (Launch::Kind::kGemm): which operand types they
// take as they are (bf16, f16, and fp8 where the GPU has fp8 tensor cores),
// in which layout, in loop bodies too, and, run by the emulator, that they
// compute what the host backend computes.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/cuda/backend.h"
#include "gtest/gtest.h"
#include "hlo/primitive_type.h"
#include "tests/unit/cuda_emulator.h"

namespace pjrt::compiler::cuda {
namespace {

using emulation::CompareWithHost;
using hlo::PrimitiveType;

// One line per matmul, in program order (loop bodies included): "lhs by
// rhs [batch,m,k,n] lhs_transposed rhs_transposed" with the kinds of the
// operands' slots ("param" where the operand is read as it lies).
std::vector<std::string> Gemms(const CudaCompilation& c) {
  std::vector<std::string> gemms;
  ForEachLaunch(c.generated.launches, [&](const Launch& launch) {
    if (launch.kind != Launch::Kind::kGemm) return;
    const host::DotStep& s = launch.gemm;
    gemms.push_back(absl::StrCat(hlo::PrimitiveTypeName(s.operand_type), " by ",
                                 hlo::PrimitiveTypeName(s.rhs_type()), " [",
                                 s.batch, ",", s.m, ",", s.k, ",", s.n, "] ",
                                 s.lhs_transposed ? "T" : "N",
                                 s.rhs_transposed ? "T" : "N"));
  });
  return gemms;
}

// Every fp8 pairing cuBLASLt multiplies (not f8e5m2 by f8e5m2), shapes of
// multiples of 16 in any layout, and those that stay f32 matmuls.
constexpr char kFp8Dots[] = R"(
HloModule m
ENTRY e {
  a = f8e4m3fn[32,64] parameter(0)
  b = f8e4m3fn[64,48] parameter(1)
  ab = f32[32,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f8e4m3fn[16,32] parameter(2)
  d = f8e5m2[48,16] parameter(3)
  cd = bf16[32,48] dot(c, d), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  x = f8e5m2[2,16,32] parameter(4)
  y = f8e4m3fn[2,48,32] parameter(5)
  xy = f32[2,16,48] dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  dd = f32[16,16] dot(d, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  o = f8e4m3fn[8,40] parameter(6)
  p = f8e4m3fn[40,6] parameter(7)
  op = f32[8,6] dot(o, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  q = f8e4m3fnuz[16,16] parameter(8)
  qq = f32[16,16] dot(q, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[32,48], bf16[32,48], f32[2,16,48], f32[16,16], f32[8,6], f32[16,16]) tuple(ab, cd, xy, dd, op, qq)
})";

TEST(CudaGemm, Fp8DotsTakeTheirOperandsAsTheyAreWhereTheGpuHasFp8) {
  std::unique_ptr<hlo::Module> module = emulation::Parse(kFp8Dots);
  ASSERT_NE(module, nullptr);
  auto hopper = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(hopper.ok()) << hopper.status();
  // Both operands with k innermost: a copy of b as [n, k], c as [m, k]
  // (its contracting dimension was the outer one); x and y as they lie.
  EXPECT_EQ(Gemms(*hopper), (std::vector<std::string>{
                                "f8e4m3fn by f8e4m3fn [1,32,64,48] NT",
                                "f8e4m3fn by f8e5m2 [1,32,16,48] NT",
                                "f8e5m2 by f8e4m3fn [2,16,32,48] NT",
                                "f32 by f32 [1,16,48,16] NN",
                                "f32 by f32 [1,8,40,6] NN",
                                "f32 by f32 [1,16,16,16] NN",
                            }));
  ForEachLaunch(hopper->generated.launches, [&](const Launch& launch) {
    if (launch.kind != Launch::Kind::kGemm ||
        launch.gemm.operand_type != PrimitiveType::kF8E5M2) {
      return;
    }
    for (int operand : {1, 2}) {
      EXPECT_EQ(hopper->lowered->slots[launch.slots[operand]].kind,
                host::BufferSlot::Kind::kParameter)
          << "operand " << operand << " of " << launch.origin;
    }
  });
  CompareWithHost(*module, *hopper, "fp8_dots_sm90", 1e-5);

  // An A100 has no fp8 tensor cores: f32 matmuls of the converted values.
  auto ampere = CompileForCuda(*module, {}, "sm_80", DiskCache(""));
  ASSERT_TRUE(ampere.ok()) << ampere.status();
  for (const std::string& gemm : Gemms(*ampere)) {
    EXPECT_EQ(gemm.substr(0, 10), "f32 by f32") << gemm;
  }
  CompareWithHost(*module, *ampere, "fp8_dots_sm80", 1e-5);
}

// A loop body's matmuls take their operands as the entry's do (a scan over
// layers multiplies bf16 weights in its body).
TEST(CudaGemm, LoopBodiesMultiplyHalfAndFp8OperandsAsTheyAre) {
  std::unique_ptr<hlo::Module> module = emulation::Parse(R"(
HloModule m
body {
  p = (s32[], bf16[16,32], f8e4m3fn[16,32], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = bf16[16,32] get-tuple-element(p), index=1
  ww = bf16[16,16] dot(w, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  wf = f32[16,16] convert(ww)
  e = f8e4m3fn[16,32] get-tuple-element(p), index=2
  ee = f32[16,16] dot(e, e), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  acc = f32[16,16] get-tuple-element(p), index=3
  s = f32[16,16] add(acc, wf)
  t = f32[16,16] add(s, ee)
  ROOT r = (s32[], bf16[16,32], f8e4m3fn[16,32], f32[16,16]) tuple(j, w, e, t)
}
cond {
  p = (s32[], bf16[16,32], f8e4m3fn[16,32], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  zero = s32[] constant(0)
  w = bf16[16,32] parameter(0)
  e = f8e4m3fn[16,32] parameter(1)
  acc = f32[16,16] parameter(2)
  init = (s32[], bf16[16,32], f8e4m3fn[16,32], f32[16,16]) tuple(zero, w, e, acc)
  loop = (s32[], bf16[16,32], f8e4m3fn[16,32], f32[16,16]) while(init), condition=cond, body=body
  ROOT out = f32[16,16] get-tuple-element(loop), index=3
})");
  ASSERT_NE(module, nullptr);
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(Gemms(*compiled), (std::vector<std::string>{
                                  "bf16 by bf16 [1,16,32,16] NT",
                                  "f8e4m3fn by f8e4m3fn [1,16,32,16] NT",
                              }));
  CompareWithHost(*module, *compiled, "fp8_dots_in_a_loop", 1e-2);
}

// A dot with nothing to contract is zeros, without cuBLASLt (which takes
// no empty k) and whatever the operand types.
TEST(CudaGemm, DotsOfAnEmptyContractionAreZeros) {
  std::unique_ptr<hlo::Module> module = emulation::Parse(R"(
HloModule m
ENTRY e {
  a = f32[3,0] parameter(0)
  b = f32[0,4] parameter(1)
  ab = f32[3,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = bf16[2,5,0] parameter(2)
  cc = bf16[2,5,5] dot(c, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  d = f64[0,2] parameter(3)
  dd = f64[2,2] dot(d, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT r = (f32[3,4], bf16[2,5,5], f64[2,2]) tuple(ab, cc, dd)
})");
  ASSERT_NE(module, nullptr);
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(Gemms(*compiled), std::vector<std::string>{});
  int zeros = 0;
  ForEachLaunch(compiled->generated.launches, [&](const Launch& launch) {
    zeros += launch.kernel.find("dot_zeros") != std::string::npos;
  });
  EXPECT_EQ(zeros, 3);
  CompareWithHost(*module, *compiled, "empty_contractions", 0);
}

}  // namespace
}  // namespace pjrt::compiler::cuda
