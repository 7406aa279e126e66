#include "hlo/ir.h"

#include "absl/strings/str_format.h"

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

Computation* Module::AddComputation(std::unique_ptr<Computation> computation) {
  computations_.push_back(std::move(computation));
  return computations_.back().get();
}

Computation* Module::FindComputation(absl::string_view name) const {
  for (const auto& computation : computations_) {
    if (computation->name() == name) return computation.get();
  }
  return nullptr;
}

}  // namespace pjrt::hlo
