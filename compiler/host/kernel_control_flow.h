// while's and conditional's kernels (kernel_control_flow.cc), declared here
// for the CUDA code generator, which runs the same sub-programs' steps on
// the GPU.
#ifndef PJRT_COMPILER_HOST_KERNEL_CONTROL_FLOW_H_
#define PJRT_COMPILER_HOST_KERNEL_CONTROL_FLOW_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/host/host_program.h"
#include "compiler/host/kernel.h"
#include "hlo/ir.h"

namespace pjrt::compiler::host {

// The loop state lives in two sets of buffers, the outputs (A) and spares
// (B): each iteration the body reads A and writes B, then they swap, so a
// run allocates nothing per iteration. State the body passes through
// unchanged has no spare: it stays in place and is never copied.
class WhileKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;
  int64_t host_memory_bytes() const override;
  std::vector<const HostProgram*> sub_programs() const override {
    return {condition.get(), body.get()};
  }

  std::unique_ptr<HostProgram> condition, body;
  // Per state leaf: the initial value's slot, the state's (the while's
  // result), its spare (-1: passed through) and its size.
  std::vector<int> init, state, spare;
  std::vector<int64_t> bytes;
  int scratch = -1;  // the condition's and the body's scratch
  // How many times the body runs when the loop counts a state element
  // from a constant to a constant by one (KnownTripCount); -1: the
  // condition decides each time.
  int64_t trip_count = -1;
};

// The number of iterations of `loop`, a while, when its condition is
// `counter < N` (or <=, either way round) for an s32, s64 or u32 element of
// its state that starts at a constant and that the body increments by one
// (JAX's fori_loop and scan); -1 otherwise.
int64_t KnownTripCount(const hlo::Instruction& loop);

// Whether `loop`'s body returns leaf `leaf` of its flat tuple state as it
// got it: that leaf is the loop's initial value throughout, and its result
// is that value's memory (a view of it), never copied.
bool PassesThrough(const hlo::Instruction& loop, int leaf);

class ConditionalKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;
  int64_t host_memory_bytes() const override;
  std::vector<const HostProgram*> sub_programs() const override {
    std::vector<const HostProgram*> programs;
    for (const Branch& b : branches) programs.push_back(b.program.get());
    return programs;
  }

  struct Branch {
    std::unique_ptr<HostProgram> program;
    std::vector<int> inputs;
  };
  // A pred (true: branch 0) or an s32 index (out of range: the last).
  int selector = -1;
  bool selector_is_pred = false;
  std::vector<Branch> branches;
  std::vector<int> outputs;
  int scratch = -1;  // the branches' scratch
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_CONTROL_FLOW_H_
