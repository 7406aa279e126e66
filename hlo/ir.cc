#include "hlo/ir.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "base/check.h"

namespace pjrt::hlo {

bool Attributes::has(absl::string_view name) const {
  for (const std::string& present_name : present) {
    if (present_name == name) return true;
  }
  return false;
}

const std::string* Attributes::FindRaw(absl::string_view name) const {
  for (const auto& [attribute, value] : raw) {
    if (attribute == name) return &value;
  }
  return nullptr;
}

std::string Instruction::Describe() const {
  return absl::StrFormat("%%%s (line %d)", name_, line_);
}

Instruction* Computation::AddInstruction(
    std::unique_ptr<Instruction> instruction) {
  instruction->set_parent(this);
  instructions_.push_back(std::move(instruction));
  return instructions_.back().get();
}

void Computation::RemoveInstruction(const Instruction* instruction) {
  PJRT_DCHECK(root_ != instruction) << instruction->name() << " is the root";
  for (const auto& other : instructions_) {
    for (const Instruction* operand : other->operands()) {
      PJRT_DCHECK(operand != instruction)
          << instruction->name() << " is used by " << other->name();
    }
  }
  for (auto it = instructions_.begin(); it != instructions_.end(); ++it) {
    if (it->get() == instruction) {
      instructions_.erase(it);
      return;
    }
  }
  PJRT_DCHECK(false) << instruction->name() << " is not in " << name_;
}

void Computation::ReplaceUses(const Instruction* old,
                              Instruction* replacement) {
  for (const auto& instruction : instructions_) {
    for (int i = 0; i < instruction->operand_count(); ++i) {
      if (instruction->operand(i) == old) {
        instruction->ReplaceOperand(i, replacement);
      }
    }
  }
  if (root_ == old) root_ = replacement;
}

Instruction* Computation::FindInstruction(absl::string_view name) const {
  for (const auto& instruction : instructions_) {
    if (instruction->name() == name) return instruction.get();
  }
  return nullptr;
}

std::vector<const Instruction*> Computation::PostOrder() const {
  std::vector<const Instruction*> order;
  if (root_ == nullptr) return order;
  absl::flat_hash_set<const Instruction*> done;
  std::vector<std::pair<const Instruction*, int>> stack = {{root_, 0}};
  while (!stack.empty()) {
    auto& [inst, next] = stack.back();
    if (done.contains(inst)) {
      stack.pop_back();
      continue;
    }
    if (next < inst->operand_count()) {
      const Instruction* operand = inst->operand(next++);
      if (!done.contains(operand)) stack.push_back({operand, 0});
      continue;
    }
    done.insert(inst);
    order.push_back(inst);
    stack.pop_back();
  }
  return order;
}

Computation* Module::AddComputation(std::unique_ptr<Computation> computation) {
  computations_.push_back(std::move(computation));
  return computations_.back().get();
}

std::vector<std::unique_ptr<Computation>> Module::TakeComputations() {
  entry_ = nullptr;
  return std::exchange(computations_, {});
}

Computation* Module::FindComputation(absl::string_view name) const {
  for (const auto& computation : computations_) {
    if (computation->name() == name) return computation.get();
  }
  return nullptr;
}

}  // namespace pjrt::hlo
