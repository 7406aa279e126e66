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

// `text` parsed and simplified, with `rewrites` rewrites made and a module
// the verifier still accepts (null, and a failure, otherwise).
std::unique_ptr<Module> Simplified(const std::string& text, int rewrites) {
  auto module = Parse(text);
  auto rewritten = SimplifyModule(module.get());
  if (!rewritten.ok()) {
    ADD_FAILURE() << rewritten.status();
    return nullptr;
  }
  EXPECT_EQ(*rewritten, rewrites) << text;
  const absl::Status verified = VerifyModule(*module, text);
  EXPECT_TRUE(verified.ok()) << verified << "\n" << text;
  return module;
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

TEST(Passes, BatchNormsBecomeReducesBroadcastsAndElementwiseOps) {
  const std::string text = R"(HloModule m
ENTRY e {
  x = bf16[2,3,4] parameter(0)
  s = bf16[3] parameter(1)
  o = bf16[3] parameter(2)
  m = bf16[3] parameter(3)
  v = bf16[3] parameter(4)
  i = bf16[2,3,4] batch-norm-inference(x, s, o, m, v), epsilon=0.5, feature_index=1
  t = (bf16[2,3,4], bf16[3], bf16[3]) batch-norm-training(i, s, o), epsilon=0.001, feature_index=1
  y = bf16[2,3,4] get-tuple-element(t), index=0
  ROOT g = (bf16[2,3,4], bf16[3], bf16[3]) batch-norm-grad(x, s, m, v, y), epsilon=0.001, feature_index=1
})";
  auto module = Simplified(text, 3);
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kTuple);
  EXPECT_EQ(root->shape(), module->entry()->FindInstruction("g")->shape());
  int reduces = 0;
  for (const Instruction* inst : module->entry()->PostOrder()) {
    EXPECT_FALSE(FamilyOf(inst->opcode()) == OpFamily::kCompute &&
                 inst->opcode() != Opcode::kReduce)
        << inst->Describe() << " is left";
    if (inst->opcode() != Opcode::kReduce) continue;
    ++reduces;
    // Sums over every dimension but the feature one, in bf16.
    EXPECT_EQ(inst->attributes().dimensions, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(inst->shape(), Shape(PrimitiveType::kBf16, {3}));
    ASSERT_EQ(inst->called_computations().size(), 1u);
    EXPECT_EQ(inst->called_computations()[0]->root()->opcode(), Opcode::kAdd);
  }
  // Training: the mean and the variance; grad: three sums.
  EXPECT_EQ(reduces, 2 + 3);
  // One add region, shared by every sum.
  int regions = 0;
  for (const auto& c : module->computations())
    regions += c.get() != module->entry();
  EXPECT_EQ(regions, 1);
}

TEST(Passes, RaggedDotsBecomeDotsAndMasksInEveryMode) {
  // A free, a contracting and a batch ragged dimension, group sizes of
  // several types, per leading index or shared; and a computation of the
  // module's own under the add region's name, which is not an add.
  const std::string text = R"(HloModule m
pjrt.add.s64 {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT m = s64[] multiply(a, b)
}
ENTRY e {
  l = f32[19,11,5] parameter(0)
  r = f32[3,5,7] parameter(1)
  s = s64[19,3] parameter(2)
  rows = f32[19,11,7] ragged-dot(l, r, s), lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}, rhs_group_dims={0}
  c = f32[11,19,5] parameter(3)
  q = f32[19,5,7] parameter(4)
  cols = f32[3,11,7] ragged-dot(c, q, s), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, lhs_ragged_dims={2}
  b = f32[4,3,2] parameter(5)
  z = u8[2] parameter(6)
  batches = bf16[4,3,3] ragged-dot(b, b, z), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={0}
  ROOT t = (f32[19,11,7], f32[3,11,7], bf16[4,3,3]) tuple(rows, cols, batches)
})";
  auto module = Simplified(text, 3);
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kTuple);
  int dots = 0, running_sums = 0;
  for (const Instruction* inst : module->entry()->PostOrder()) {
    EXPECT_NE(inst->opcode(), Opcode::kRaggedDot) << inst->Describe();
    dots += inst->opcode() == Opcode::kDot;
    if (inst->opcode() != Opcode::kReduceWindow) continue;
    ++running_sums;
    // The module's own pjrt.add.s64 multiplies: the sums take another.
    ASSERT_EQ(inst->called_computations().size(), 1u);
    const Computation* add = inst->called_computations()[0];
    EXPECT_NE(add->name(), "pjrt.add.s64");
    EXPECT_EQ(add->root()->opcode(), Opcode::kAdd);
  }
  // One dot per ragged-dot; the group bounds once per ragged-dot.
  EXPECT_EQ(dots, 3);
  EXPECT_EQ(running_sums, 3);
  // Each replacement keeps the ragged-dot's shape.
  EXPECT_EQ(root->operand(0)->shape(), Shape(PrimitiveType::kF32, {19, 11, 7}));
  EXPECT_EQ(root->operand(1)->shape(), Shape(PrimitiveType::kF32, {3, 11, 7}));
  EXPECT_EQ(root->operand(2)->shape(), Shape(PrimitiveType::kBf16, {4, 3, 3}));
}

TEST(Passes, RaggedDotsOfManyRowsLoopOverTilesOfTheirGroups) {
  // 4096 rows in 64 groups: tiles of 32 rows, at most 128 + 63 of them, a
  // [32, 512] x [512, 256] product each, where the dense expansion would
  // multiply every row by every group's rhs.
  const std::string text = R"(HloModule m
ENTRY e {
  l = bf16[4096,512] parameter(0)
  r = bf16[64,512,256] parameter(1)
  s = s32[64] parameter(2)
  ROOT d = f32[4096,256] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})";
  auto module = Simplified(text, 1);
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kGetTupleElement);
  EXPECT_EQ(root->shape(), Shape(PrimitiveType::kF32, {4096, 256}));
  const Instruction* loop = root->operand(0);
  ASSERT_EQ(loop->opcode(), Opcode::kWhile);
  for (const Instruction* inst : module->entry()->PostOrder()) {
    EXPECT_NE(inst->opcode(), Opcode::kDot) << inst->Describe();
  }
  ASSERT_EQ(loop->called_computations().size(), 2u);
  const Computation& condition = *loop->called_computations()[0];
  const Instruction* limit = condition.root()->operand(1);
  ASSERT_EQ(limit->opcode(), Opcode::kConstant);
  EXPECT_EQ(limit->attributes().literal.Get<int32_t>(0), 128 + 63);
  int dots = 0;
  for (const Instruction* inst : loop->called_computations()[1]->PostOrder()) {
    if (inst->opcode() != Opcode::kDot) continue;
    ++dots;
    EXPECT_EQ(inst->shape(), Shape(PrimitiveType::kF32, {32, 256}));
  }
  EXPECT_EQ(dots, 1);
}

TEST(Passes, RaggedDotsContractingManyRowsLoopOverTilesOfTheirGroups) {
  // A mixture of experts' weight gradient: 4096 rows in 64 groups, one
  // [512, 256] per group from tiles of 32 rows, where the dense expansion
  // would make a [64, 4096, 512] copy of the lhs.
  const std::string text = R"(HloModule m
ENTRY e {
  l = bf16[4096,512] parameter(0)
  r = bf16[4096,256] parameter(1)
  s = s32[64] parameter(2)
  ROOT d = f32[64,512,256] ragged-dot(l, r, s), lhs_contracting_dims={0}, rhs_contracting_dims={0}, lhs_ragged_dims={0}
})";
  auto module = Simplified(text, 1);
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kGetTupleElement);
  EXPECT_EQ(root->shape(), Shape(PrimitiveType::kF32, {64, 512, 256}));
  const Instruction* loop = root->operand(0);
  ASSERT_EQ(loop->opcode(), Opcode::kWhile);
  for (const Instruction* inst : module->entry()->PostOrder()) {
    EXPECT_NE(inst->opcode(), Opcode::kDot) << inst->Describe();
    EXPECT_LE(inst->shape().IsArray() ? inst->shape().ElementCount() : 0,
              64 * 512 * 256)
        << inst->Describe();
  }
  int dots = 0;
  for (const Instruction* inst : loop->called_computations()[1]->PostOrder()) {
    if (inst->opcode() != Opcode::kDot) continue;
    ++dots;
    EXPECT_EQ(inst->shape(), Shape(PrimitiveType::kF32, {512, 256}));
  }
  EXPECT_EQ(dots, 1);
}

TEST(Passes, RaggedAllToAllBecomesAllToAllsAndAScatter) {
  const std::string text = R"(HloModule m, replica_count=4
ENTRY e {
  input = bf16[8,3] parameter(0)
  output = bf16[6,3] parameter(1)
  a = s32[4] parameter(2)
  b = s32[4] parameter(3)
  c = s64[4] parameter(4)
  d = s32[4] parameter(5)
  ROOT r = bf16[6,3] ragged-all-to-all(input, output, a, b, c, d), replica_groups={{0,1},{2,3}}
})";
  auto module = Simplified(text, 1);
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  ASSERT_EQ(root->opcode(), Opcode::kScatter);
  EXPECT_EQ(root->shape(), Shape(PrimitiveType::kBf16, {6, 3}));
  EXPECT_EQ(root->operand(0)->name(), "output");
  ASSERT_EQ(root->called_computations().size(), 1u);
  // The scatter assigns: its region gives the update.
  const Computation* region = root->called_computations()[0];
  EXPECT_EQ(region->root(), region->parameters()[1]);
  int exchanges = 0;
  for (const Instruction* inst : module->entry()->PostOrder()) {
    if (inst->opcode() != Opcode::kAllToAll) continue;
    ++exchanges;
    EXPECT_EQ(inst->attributes().dimensions, (std::vector<int64_t>{0}));
    EXPECT_EQ(inst->attributes().replica_groups,
              (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  }
  // The rows, then where they go and how many.
  EXPECT_EQ(exchanges, 2);
}

// Counts the instructions of `opcode` the root of `c` depends on.
int Reachable(const Computation& c, Opcode opcode) {
  int n = 0;
  for (const Instruction* inst : c.PostOrder()) n += inst->opcode() == opcode;
  return n;
}

TEST(Passes, TupleConstantsAndDimensionSizesBecomeArrayConstants) {
  const std::string text = R"(HloModule m
ENTRY e {
  c = (s32[2], (f32[], s32[2])) constant(({1, 2}, (0.5, {30, 40})))
  x = f32[3,7] parameter(0)
  n = s32[] get-dimension-size(x), dimensions={1}
  ROOT t = ((s32[2], (f32[], s32[2])), s32[]) tuple(c, n)
})";
  auto module = Simplified(text, 2);
  ASSERT_NE(module, nullptr);
  const Computation& entry = *module->entry();
  EXPECT_EQ(Reachable(entry, Opcode::kGetDimensionSize), 0);
  // The three arrays of the constant, and the size.
  EXPECT_EQ(Reachable(entry, Opcode::kConstant), 4);
  const Instruction* size = entry.root()->operand(1);
  ASSERT_EQ(size->opcode(), Opcode::kConstant);
  EXPECT_EQ(size->attributes().literal.Get<int32_t>(0), 7);
  const Instruction* inner = entry.root()->operand(0)->operand(1);
  ASSERT_EQ(inner->opcode(), Opcode::kTuple);
  EXPECT_EQ(inner->operand(1)->attributes().literal.Get<int32_t>(1), 40);
}

TEST(Passes, CombinedCollectivesBecomeOnePerOperandOrPlace) {
  const std::string text = R"(HloModule m, replica_count=4
ENTRY e {
  x = f32[2] parameter(0)
  y = s8[3] parameter(1)
  p = (f32[2], s8[3]) collective-permute(x, y), source_target_pairs={{0,1}}
  a = (f32[2], f32[2]) all-to-all(x, x), replica_groups={{0,1},{2,3}}
  b = f32[2] collective-broadcast(x), replica_groups={{0,1,2},{3}}
  ROOT t = ((f32[2], s8[3]), (f32[2], f32[2]), f32[2]) tuple(p, a, b)
})";
  auto module = Simplified(text, 3);
  ASSERT_NE(module, nullptr);
  const Computation& entry = *module->entry();
  EXPECT_EQ(Reachable(entry, Opcode::kCollectiveBroadcast), 0);
  // Two for the combined permute; a value and a mark for each of the
  // broadcast's three places.
  EXPECT_EQ(Reachable(entry, Opcode::kCollectivePermute), 2 + 2 * 3);
  // The tuple form's operands stacked: one all-to-all along dimension 0.
  EXPECT_EQ(Reachable(entry, Opcode::kAllToAll), 1);
  for (const Instruction* inst : entry.PostOrder()) {
    if (inst->opcode() == Opcode::kAllToAll) {
      EXPECT_EQ(inst->shape(), Shape(PrimitiveType::kF32, {2, 2}));
      EXPECT_EQ(inst->attributes().dimensions, (std::vector<int64_t>{0}));
    }
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
