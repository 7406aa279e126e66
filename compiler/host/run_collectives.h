// The host platform's collective steps: each run of a launch meets the
// others at the launch's CollectiveHub (compiler/collectives.h), in blocks,
// and across tasks through the hub's TaskPlacement.
#ifndef PJRT_COMPILER_HOST_RUN_COLLECTIVES_H_
#define PJRT_COMPILER_HOST_RUN_COLLECTIVES_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compiler/host/host_program.h"

namespace pjrt::compiler::host {

// Runs collective step `s` of this run (`c`) on the step's operands among
// `addresses` (the program's slots).
absl::Status RunCollective(const CollectiveStep& s, const RunContext& c,
                           absl::Span<void* const> addresses);

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_RUN_COLLECTIVES_H_
