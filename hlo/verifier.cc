#include "hlo/verifier.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "hlo/op_shapes.h"
#include "hlo/parser.h"
#include "hlo/verifier_internal.h"

namespace pjrt::hlo {

bool IsIdentityCustomCall(absl::string_view target) {
  return target == "Sharding" || target == "SPMDFullToShardShape" ||
         target == "SPMDShardToFullShape" ||
         target == "annotate_device_placement" || target == "MoveToHost" ||
         target == "MoveToDevice";
}

bool IsSupportedOpcode(Opcode opcode) {
  switch (opcode) {
    case Opcode::kOther:
      return false;
    default:
      return true;
  }
}

namespace verifier_internal {

absl::Status Verifier::CheckCallGraph() {
  // 1 while on the path, 2 once done.
  absl::flat_hash_map<const Computation*, int> state;
  // Instructions of a computation with its callees inlined (saturating),
  // and the depth of calls below it.
  absl::flat_hash_map<const Computation*, int64_t> inlined;
  absl::flat_hash_map<const Computation*, int> depth;
  struct Frame {
    const Computation* computation;
    size_t instruction = 0;
    size_t callee = 0;
  };
  std::vector<Frame> path = {{module_.entry()}};
  state[module_.entry()] = 1;
  while (!path.empty()) {
    Frame& frame = path.back();
    const Computation* c = frame.computation;
    const auto& instructions = c->instructions();
    if (frame.instruction < instructions.size()) {
      const auto& callees =
          instructions[frame.instruction]->called_computations();
      if (frame.callee >= callees.size()) {
        ++frame.instruction;
        frame.callee = 0;
        continue;
      }
      const Computation* callee = callees[frame.callee++];
      int& s = state[callee];
      if (s == 2) continue;
      if (s == 1) {
        std::vector<std::string> names;
        bool on = false;
        for (const Frame& f : path) {
          on = on || f.computation == callee;
          if (on) names.push_back(f.computation->name());
        }
        names.push_back(callee->name());
        return absl::InvalidArgumentError(FormatErrorAt(
            text_, callee->line(), 1,
            absl::StrCat("computation ", callee->name(), " calls itself: ",
                         Excerpt(absl::StrJoin(names, " -> "), 1024))));
      }
      if (path.size() > static_cast<size_t>(kMaxCallDepth)) {
        const Instruction& call = *instructions[frame.instruction];
        return Invalid(call,
                       absl::StrFormat("calls nest more than %d computations "
                                       "deep (from the entry down to %s)",
                                       kMaxCallDepth, callee->name()));
      }
      s = 1;
      path.push_back({callee});
      continue;
    }
    // Every callee is done: sum up.
    int64_t total = static_cast<int64_t>(instructions.size());
    int deepest = 0;
    for (const auto& inst : instructions) {
      for (const Computation* callee : inst->called_computations()) {
        total = std::min(total + inlined[callee], kMaxInlinedInstructions + 1);
        deepest = std::max(deepest, depth[callee] + 1);
      }
    }
    if (total > kMaxInlinedInstructions) {
      return absl::InvalidArgumentError(FormatErrorAt(
          text_, c->line(), 1,
          absl::StrFormat("computation %s holds more than %d instructions "
                          "once the computations it calls are inlined; "
                          "pjrtd compiles at most %d",
                          c->name(), kMaxInlinedInstructions,
                          kMaxInlinedInstructions)));
    }
    inlined[c] = total;
    depth[c] = deepest;
    state[c] = 2;
    reachable_.push_back(c);
    path.pop_back();
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckCycles(const Computation& c) {
  absl::flat_hash_map<const Instruction*, int> state;
  std::vector<const Instruction*> path;
  // Iterative DFS: a cycle may be long, and input comes from clients.
  for (const auto& start : c.instructions()) {
    if (state[start.get()] == 2) continue;
    std::vector<std::pair<const Instruction*, int>> stack = {{start.get(), 0}};
    state[start.get()] = 1;
    while (!stack.empty()) {
      auto& [inst, next] = stack.back();
      if (next < inst->operand_count()) {
        const Instruction* operand = inst->operand(next++);
        int& s = state[operand];
        if (s == 1) {
          std::vector<std::string> names;
          bool on = false;
          for (const auto& [frame, unused] : stack) {
            on = on || frame == operand;
            if (on) names.push_back("%" + frame->name());
          }
          names.push_back("%" + operand->name());
          return Invalid(*operand,
                         absl::StrCat("depends on itself: ",
                                      absl::StrJoin(names, " uses ")));
        }
        if (s == 0) {
          s = 1;
          stack.push_back({operand, 0});
        }
        continue;
      }
      state[inst] = 2;
      stack.pop_back();
    }
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckInstruction(const Instruction& inst) {
  if (!IsSupportedOpcode(inst.opcode())) {
    return Unimplemented(
        inst, absl::StrFormat("op '%s' is not supported by pjrtd%s",
                              inst.opcode_name(),
                              inst.opcode() == Opcode::kOther ? "" : " yet"));
  }
  PJRT_RETURN_IF_ERROR(CheckTypes(inst, inst.shape()));
  switch (FamilyOf(inst.opcode())) {
    case OpFamily::kUnary:
    case OpFamily::kBinary:
    case OpFamily::kElementwise:
      return CheckElementwiseOp(inst);
    case OpFamily::kDataMovement:
      return CheckDataMovementOp(inst);
    case OpFamily::kCompute:
      return CheckComputeOp(inst);
    case OpFamily::kCollective:
      return CheckCollectiveOp(inst);
    case OpFamily::kStructure:
      return CheckStructureOp(inst);
  }
  return NotInFamily(inst, "any");
}

}  // namespace verifier_internal

absl::Status VerifyModule(const Module& module, absl::string_view text) {
  return verifier_internal::Verifier(module, text).Run();
}

}  // namespace pjrt::hlo
