// The HLO text parser: the format XLA prints (HloModule::ToString) and JAX
// emits (jax.jit(f).lower(...).as_text(dialect="hlo")).
//
// It accepts the whole grammar: module header attributes (unknown ones are
// kept raw and skipped), computations with or without signatures and ENTRY,
// %-names and bare names, operand shapes before names, tuples, layouts with
// suffixes, every literal form (nan, inf, -0, f16 and bf16 values, u64 bit
// patterns), comments anywhere, and every op name (unknown ops parse as
// Opcode::kOther). Elided constants ({...}) are rejected with a message
// saying how to print them in full.
//
// It resolves names (operands may refer to instructions later in the same
// computation; called computations may be defined anywhere in the module)
// and checks parameter numbering (no gaps, no duplicates, matching the
// signature when one is given). Shapes and op semantics are the verifier's.
#ifndef PJRT_HLO_PARSER_H_
#define PJRT_HLO_PARSER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir.h"

namespace pjrt::hlo {

// Errors are INVALID_ARGUMENT: "line L, column C: what is wrong", then the
// offending line and a caret under column C.
absl::StatusOr<std::unique_ptr<Module>> ParseHloModule(absl::string_view text);

// The message format above, for errors found after parsing (the verifier
// uses it with an instruction's position). `text` is the whole program.
std::string FormatErrorAt(absl::string_view text, int line, int column,
                          absl::string_view message);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_PARSER_H_
