// hlo/ir.h's Computation: the post-order every lowering walks.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/ir.h"
#include "hlo/parser.h"

namespace pjrt::hlo {
namespace {

TEST(Computation, PostOrderPutsOperandsFirstAndSkipsUnusedInstructions) {
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  unused = f32[2] negate(p)
  a = f32[2] abs(p)
  b = f32[2] exponential(p)
  s = f32[2] add(a, b)
  ROOT r = f32[2] multiply(s, a)
})");
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<std::string> names;
  for (const Instruction* inst : (*module)->entry()->PostOrder()) {
    names.push_back(inst->name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"p", "a", "b", "s", "r"}));
}

TEST(Computation, PostOrderOfADeepChainDoesNotRecurse) {
  std::string text = "HloModule m\nENTRY e {\n  v0 = f32[] parameter(0)\n";
  const int depth = 100000;
  for (int i = 1; i <= depth; ++i) {
    absl::StrAppend(&text, i == depth ? "  ROOT " : "  ", "v", i,
                    " = f32[] negate(v", i - 1, ")\n");
  }
  text += "}\n";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  const std::vector<const Instruction*> order = (*module)->entry()->PostOrder();
  ASSERT_EQ(order.size(), static_cast<size_t>(depth + 1));
  EXPECT_EQ(order.front()->name(), "v0");
  EXPECT_EQ(order.back()->name(), absl::StrCat("v", depth));
}

}  // namespace
}  // namespace pjrt::hlo
