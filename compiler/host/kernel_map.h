// map's kernel (kernel_control_flow.cc), declared here for the CUDA code
// generator, which computes the same region from the same parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_MAP_H_
#define PJRT_COMPILER_HOST_KERNEL_MAP_H_

#include <cstdint>
#include <vector>

#include "compiler/host/expression.h"
#include "compiler/host/kernel.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// output[i] = region(inputs[0][i], inputs[1][i], ...).
class MapKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  Expression expr;
  std::vector<int> inputs;
  std::vector<hlo::PrimitiveType> types;
  int output = -1;
  hlo::PrimitiveType output_type = hlo::PrimitiveType::kF32;
  int64_t count = 0;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_MAP_H_
