// convolution's kernel (kernel_convolution.cc), declared here for the
// CUDA code generator, which computes the same sums from the same plan.
#ifndef PJRT_COMPILER_HOST_KERNEL_CONVOLUTION_H_
#define PJRT_COMPILER_HOST_KERNEL_CONVOLUTION_H_

#include <cstdint>
#include <vector>

#include "compiler/host/kernel.h"
#include "hlo/op_attributes.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// A convolution's geometry, from its operands' shapes and attributes.
struct ConvPlan {
  hlo::ConvolutionDimensions dims;
  std::vector<hlo::WindowDimension> window;
  int spatial = 0;
  int64_t batch = 0, in_features = 0;  // input
  std::vector<int64_t> in_spatial, out_spatial, taps;
  int64_t out_batch = 0, out_features = 0;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t groups = 1;                           // of the two, the one > 1
  int64_t in_per_group = 0, out_per_group = 0;  // features
  int64_t positions = 0;                        // out_batch * prod(out_spatial)
  int64_t tap_count = 1;                        // prod(taps)
  int64_t cols = 0;                             // tap_count * in_per_group
  std::vector<int64_t> lhs_strides, rhs_strides, out_strides;
  hlo::PrimitiveType lhs_type = hlo::PrimitiveType::kF32,
                     rhs_type = hlo::PrimitiveType::kF32,
                     out_type = hlo::PrimitiveType::kF32;
};

// What every convolution kernel holds, whatever type it computes in.
class ConvolutionKernelBase : public Kernel {
 public:
  explicit ConvolutionKernelBase(ConvPlan p) : plan(std::move(p)) {}

  ConvPlan plan;
  int lhs = -1, rhs = -1, out = -1;
  // Sums in double (f64 or integer results, or f64 operands), else float;
  // complex ones (plan.out_type c64 or c128) in their type.
  bool wide = false;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_CONVOLUTION_H_
