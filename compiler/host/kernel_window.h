// reduce-window's kernel (kernel_window.cc), declared here for the CUDA
// code generator, which computes the same windows from the same
// parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_WINDOW_H_
#define PJRT_COMPILER_HOST_KERNEL_WINDOW_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "compiler/host/expression.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {

// The operand elements of one output's window, as element offsets.
struct WindowGeometry {
  std::vector<int64_t> in_dims, in_strides;
  std::vector<hlo::WindowDimension> window;
  std::vector<int64_t> window_sizes;

  template <typename F>
  void ForEachElement(absl::Span<const int64_t> out_index, F f) const {
    const int rank = static_cast<int>(in_dims.size());
    std::vector<int64_t> w(rank, 0);
    if (Product(window_sizes) == 0) return;
    do {
      int64_t offset = 0;
      bool valid = true;
      for (int d = 0; d < rank && valid; ++d) {
        const hlo::WindowDimension& wd = window[d];
        const int64_t p = out_index[d] * wd.stride + w[d] * wd.window_dilation -
                          wd.padding_low;
        if (p < 0 || p % wd.base_dilation != 0) {
          valid = false;
          break;
        }
        const int64_t i = p / wd.base_dilation;
        if (i >= in_dims[d]) {
          valid = false;
          break;
        }
        offset += i * in_strides[d];
      }
      if (valid) f(offset);
    } while (NextIndex(window_sizes, &w));
  }
};

// Each output: its initial value combined, in the window's row-major
// order, with the operand elements its window covers.
class ReduceWindowKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  std::vector<int> inputs, inits, outputs;
  std::vector<hlo::PrimitiveType> types;
  std::vector<int64_t> out_dims;
  WindowGeometry geometry;
  // A simple reducer's op (the host's fast path); none for any other
  // region.
  std::optional<ExprOp> op;
  // The region, for every reducer.
  Expression region;
};

// out = init everywhere; then for each source element (window) in order,
// the window's selected element gets out = scatter(out, source). Selecting
// goes through the window in order, keeping the current choice c over the
// next element x while select(c, x) holds.
class SelectAndScatterKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  int operand = -1, source = -1, init = -1, output = -1;
  hlo::PrimitiveType operand_type = hlo::PrimitiveType::kF32;
  hlo::PrimitiveType source_type = hlo::PrimitiveType::kF32;
  std::vector<int64_t> source_dims;
  WindowGeometry geometry;
  Expression select, scatter;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_WINDOW_H_
