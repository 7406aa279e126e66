// Random numbers: rng-bit-generator, rng and rng-get-and-update-state.
#include "absl/strings/str_format.h"
#include "compiler/host/kernel.h"

namespace pjrt::compiler::host {

absl::StatusOr<std::shared_ptr<Kernel>> BuildRngBitGenerator(const KernelArgs& args,
                                                             KernelCompiler&) {
  return absl::UnimplementedError(absl::StrFormat(
      "%s: rng-bit-generator is not supported by the host compiler yet",
      args.inst->Describe()));
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildRng(const KernelArgs& args,
                                                 KernelCompiler&) {
  return absl::UnimplementedError(absl::StrFormat(
      "%s: %s is not supported by the host compiler yet", args.inst->Describe(),
      args.inst->opcode_name()));
}

}  // namespace pjrt::compiler::host
