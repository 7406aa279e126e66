// Helpers shared by the kernels (kernel_*.cc): region evaluation over
// blocks, element conversion, and multi-index walks.
#ifndef PJRT_COMPILER_HOST_KERNEL_UTIL_H_
#define PJRT_COMPILER_HOST_KERNEL_UTIL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "compiler/host/expression.h"
#include "compiler/host/types.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// Evaluates a scalar region (ScalarRegionExpression) over blocks of up to
// kBlockElements elements. Inputs and outputs are in the compute
// representation of their types (up to 16 bytes per element: c128).
// One per thread: it owns the block scratch.
class RegionRunner {
 public:
  explicit RegionRunner(const Expression& expr) : expr_(expr) {}
  // outputs[j] receives n values of output j.
  void Evaluate(absl::Span<const void* const> inputs, int64_t n,
                absl::Span<void* const> outputs) {
    const void* results[16];
    std::vector<const void*> many;
    const void** out = results;
    if (expr_.outputs().size() > 16) {
      many.resize(expr_.outputs().size());
      out = many.data();
    }
    EvaluateBlock(expr_, inputs, n, absl::MakeSpan(out, expr_.outputs().size()),
                  scratch_);
    for (size_t j = 0; j < expr_.outputs().size(); ++j) {
      std::memcpy(outputs[j], out[j], n * width_[j]);
    }
  }
  // Call once with the output types before Evaluate.
  void SetOutputTypes(absl::Span<const hlo::PrimitiveType> types) {
    width_.clear();
    for (hlo::PrimitiveType t : types) width_.push_back(ComputeWidth(t));
  }

 private:
  const Expression& expr_;
  BlockScratch scratch_;
  std::vector<int> width_;
};

// One element at `index` of a storage array of `type`, converted to and
// from double (exact for every integer below 2^53 and every float type).
double LoadAsDouble(hlo::PrimitiveType type, const void* base, int64_t index);

// An integer index element (any integer type) as int64, saturating u64.
int64_t LoadIndex(hlo::PrimitiveType type, const void* base, int64_t index);

// Advances a multi-index over `dims` in row-major order; false past the
// end.
inline bool NextIndex(absl::Span<const int64_t> dims,
                      std::vector<int64_t>* index) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++(*index)[d] < dims[d]) return true;
    (*index)[d] = 0;
  }
  return false;
}

inline int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_UTIL_H_
