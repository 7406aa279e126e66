// The verifier: checks a parsed module before it is compiled.
//
// For every computation reachable from the entry it checks that there are no
// cycles (an instruction depending on itself, a computation calling itself),
// that every op is one pjrtd supports (UNIMPLEMENTED naming the op and its
// line otherwise), that element types are ones pjrtd computes with, that
// each op has the operands and attributes it needs, and that its declared
// shape is the shape inferred from its operands (shape inference follows
// XLA's rules). Errors name the instruction and show its line with a caret.
#ifndef PJRT_HLO_VERIFIER_H_
#define PJRT_HLO_VERIFIER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "hlo/ir.h"

namespace pjrt::hlo {

// Deepest nesting of calls (computations calling computations), and most
// instructions a program may hold once every call is inlined.
inline constexpr int kMaxCallDepth = 64;
inline constexpr int64_t kMaxInlinedInstructions = int64_t{1} << 20;

// `text` is the program the module was parsed from (for the caret display).
absl::Status VerifyModule(const Module& module, absl::string_view text);

// Custom-call targets that act as identity (sharding annotations, memory
// placement on a platform with one memory space).
bool IsIdentityCustomCall(absl::string_view target);

// Whether the verifier accepts (and the compilers run) `opcode`; the others
// are UNIMPLEMENTED naming the op. docs/ops.md lists both, and a test keeps
// the two in step.
bool IsSupportedOpcode(Opcode opcode);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_VERIFIER_H_
