// rng-bit-generator's and rng's kernels (kernel_random.cc), declared here
// for the CUDA code generator, which generates the same bits from the same
// parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_RANDOM_H_
#define PJRT_COMPILER_HOST_KERNEL_RANDOM_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "compiler/host/kernel.h"
#include "hlo/primitive_type.h"

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

// rng (uniform or normal) and rng-get-and-update-state: Philox bits keyed
// by the run's seed and the op's salt, counting from the kernel's draws.
class RngKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  // The Philox key of a run whose seed is `seed`.
  uint64_t Key(uint64_t seed) const {
    return seed ^ (salt * 0x9E3779B97F4A7C15ull);
  }
  // This run's draw: each run of the program takes the next.
  uint64_t NextDraw() const {
    return draws_.fetch_add(1, std::memory_order_relaxed);
  }

  int low = -1, high = -1, output = -1;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  int64_t count = 0;
  bool normal = false, get_and_update = false;
  int64_t delta = 1;
  uint64_t salt = 0;

 private:
  mutable std::atomic<uint64_t> draws_{0};
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_RANDOM_H_
