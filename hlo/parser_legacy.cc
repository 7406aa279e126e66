// The parser's upgrade of legacy forms (parser_internal.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/parser_internal.h"

namespace pjrt::hlo::parser_internal {
namespace {

// The start indices of `inst` (from operand `first` on) as one vector of
// its operand's rank, which becomes one scalar per dimension.
void SplitIndexVector(Computation* c, Instruction* inst, int first) {
  if (inst->operand_count() != first + 1) return;
  Instruction* vector = inst->operand(first);
  const Shape& v = vector->shape();
  const int rank = inst->operand(0)->shape().rank();
  if (!v.IsArray() || v.rank() != 1 || v.dimensions(0) != rank ||
      !(IsSignedInteger(v.element_type()) ||
        IsUnsignedInteger(v.element_type())) ||
      !inst->operand(0)->shape().IsArray()) {
    return;
  }
  std::vector<Instruction*> operands(inst->operands().begin(),
                                     inst->operands().begin() + first);
  for (int d = 0; d < rank; ++d) {
    auto slice = std::make_unique<Instruction>(
        absl::StrCat(inst->name(), ".index", d, ".slice"), Opcode::kSlice,
        "slice", Shape(v.element_type(), {1}));
    slice->mutable_attributes()->slice = {SliceDimension{d, d + 1, 1}};
    slice->AddOperand(vector);
    auto scalar = std::make_unique<Instruction>(
        absl::StrCat(inst->name(), ".index", d), Opcode::kReshape, "reshape",
        Shape(v.element_type(), {}));
    for (Instruction* made : {slice.get(), scalar.get()}) {
      made->set_position(inst->line(), inst->column());
    }
    scalar->AddOperand(c->AddInstruction(std::move(slice)));
    operands.push_back(c->AddInstruction(std::move(scalar)));
  }
  inst->SetOperands(std::move(operands));
}

}  // namespace

void UpgradeLegacyForms(Module* module) {
  for (const auto& computation : module->computations()) {
    // New instructions are appended: walk the ones that were there.
    const size_t count = computation->instructions().size();
    for (size_t i = 0; i < count; ++i) {
      Instruction* inst = computation->instructions()[i].get();
      if (inst->opcode() == Opcode::kDynamicSlice) {
        SplitIndexVector(computation.get(), inst, 1);
      } else if (inst->opcode() == Opcode::kDynamicUpdateSlice) {
        SplitIndexVector(computation.get(), inst, 2);
      }
    }
  }
}

}  // namespace pjrt::hlo::parser_internal
