// rng-bit-generator's kernel (kernel_random.cc), declared here for the CUDA
// code generator, which generates the same bits from the same parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_RANDOM_H_
#define PJRT_COMPILER_HOST_KERNEL_RANDOM_H_

#include <cstdint>
#include <vector>

#include "compiler/host/kernel.h"

namespace pjrt::compiler::host {

// ThreeFry-2x32 (20 rounds) or Philox-4x32 (10 rounds) bits, as XLA
// expands rng-bit-generator: see kernel_random.cc for how each counts.
class RngBitGeneratorKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  int state_in = -1, state_out = -1, output = -1;
  int state_words = 2;
  bool philox = true;
  int bytes = 4;
  std::vector<int64_t> dims;
  int split = 0;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_RANDOM_H_
