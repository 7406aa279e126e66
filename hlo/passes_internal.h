// What the rewrites of hlo/passes.h share: making instructions at the place
// of the one they replace, visiting a module's instructions, and the scalar
// add regions their reduces call. Not part of the interface.
#ifndef PJRT_HLO_PASSES_INTERNAL_H_
#define PJRT_HLO_PASSES_INTERNAL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir.h"

namespace pjrt::hlo::passes_internal {

inline std::vector<int64_t> DimsOf(const Shape& shape) {
  return std::vector<int64_t>(shape.dimensions().begin(),
                              shape.dimensions().end());
}

// A new instruction after the ones of `c`, named after `at` with `suffix`
// and at its position (for messages).
Instruction* Add(Computation* c, const Instruction& at,
                 absl::string_view suffix, Opcode opcode,
                 absl::string_view opcode_name, Shape shape,
                 std::vector<Instruction*> operands);

// The computation adding two scalars of `type`, made once per module (under
// a name no computation of the module's own takes).
Computation* ScalarAddRegion(Module* module, PrimitiveType type);
// The computation giving the second of two scalars of `type` (a scatter
// that assigns), likewise.
Computation* ScalarSecondRegion(Module* module, PrimitiveType type);

// Calls `rewrite(computation, instruction)` on each instruction the module
// has before it starts (rewrites append instructions and computations)
// and counts those it rewrote (it returns true for them).
template <typename Rewrite>
absl::StatusOr<int> RewriteEach(Module* module, Rewrite rewrite) {
  std::vector<std::pair<Computation*, Instruction*>> all;
  for (const auto& computation : module->computations()) {
    for (const auto& inst : computation->instructions()) {
      all.emplace_back(computation.get(), inst.get());
    }
  }
  int rewritten = 0;
  for (const auto& [computation, inst] : all) {
    absl::StatusOr<bool> done = rewrite(computation, inst);
    if (!done.ok()) return done.status();
    rewritten += *done;
  }
  return rewritten;
}

}  // namespace pjrt::hlo::passes_internal

#endif  // PJRT_HLO_PASSES_INTERNAL_H_
