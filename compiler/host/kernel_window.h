// reduce-window's kernel (kernel_window.cc), declared here for the CUDA
// code generator, which computes the same windows from the same
// parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_WINDOW_H_
#define PJRT_COMPILER_HOST_KERNEL_WINDOW_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "base/cancellation.h"
#include "compiler/host/expression.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {

// The operand elements one dimension of a window covers for the output
// index c along it: operand indices first, first + step, ... (`count` of
// them), in the window's order.
struct WindowSpan {
  int64_t first = 0, step = 0, count = 0;
};

// What a window dimension's positions need beyond hlo::WindowDimension: a
// position w lands on operand element (c * stride + w * window_dilation -
// padding_low) / base_dilation where that divides exactly. The positions
// that do are w0, w0 + modulus, ... with w * (window_dilation / divisor)
// congruent to the remainder / divisor modulo `modulus` (= base_dilation /
// divisor, divisor = gcd(window_dilation, base_dilation)); `inverse` is
// (window_dilation / divisor)'s inverse modulo `modulus`.
struct WindowStep {
  int64_t base_dilation = 1;  // 1 where the operand dimension has one element
  int64_t divisor = 1, modulus = 1, inverse = 0;
};

// The operand elements of one output's window, as element offsets. Only
// the positions that land on an element are visited (not those in the
// padding or between base-dilated elements), so that the work for one
// output is bounded by the operand's size whatever the window's size
// (a window of 2^54 positions over one element visits one).
struct WindowGeometry {
  std::vector<int64_t> in_dims, in_strides;
  std::vector<hlo::WindowDimension> window;
  std::vector<int64_t> window_sizes;
  std::vector<WindowStep> steps;  // one per dimension (Prepare)

  // Fills `steps` from `in_dims` and `window`. REQUIRES: the verifier's
  // bounds (a padded operand and a dilated window within 2^62, a base
  // dilation below 2^31 where the dimension has more than one element).
  void Prepare();

  // Dimension d's operand elements for output index c.
  WindowSpan Span(int d, int64_t c) const;

  // Calls f(offset) for each operand element of the window of `out_index`,
  // in the window's row-major order; stops early (having called f for some
  // of them) once `cancellation` is raised, checked every 65536 elements.
  template <typename F>
  void ForEachElement(absl::Span<const int64_t> out_index, F f,
                      const Cancellation* cancellation = nullptr) const {
    const int rank = static_cast<int>(in_dims.size());
    WindowSpan spans[kMaxWindowRank];
    int64_t k[kMaxWindowRank] = {};
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) {
      spans[d] = Span(d, out_index[d]);
      if (spans[d].count == 0) return;
      offset += spans[d].first * in_strides[d];
    }
    for (int64_t visited = 1;; ++visited) {
      f(offset);
      if ((visited & 0xFFFF) == 0 && IsCancelled(cancellation)) return;
      int d = rank - 1;
      for (; d >= 0; --d) {
        if (++k[d] < spans[d].count) {
          offset += spans[d].step * in_strides[d];
          break;
        }
        offset -= (spans[d].count - 1) * spans[d].step * in_strides[d];
        k[d] = 0;
      }
      if (d < 0) return;
    }
  }

  // The largest rank a window takes here (hlo::kMaxRank).
  static constexpr int kMaxWindowRank = 64;
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
