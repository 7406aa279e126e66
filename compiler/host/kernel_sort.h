// sort's and top-k's kernels (kernel_sort.cc), declared here for the CUDA
// code generator, which sorts the same rows by the same comparator.
#ifndef PJRT_COMPILER_HOST_KERNEL_SORT_H_
#define PJRT_COMPILER_HOST_KERNEL_SORT_H_

#include <cstdint>
#include <vector>

#include "compiler/host/expression.h"
#include "compiler/host/kernel.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// What a sort's comparator computes: a comparison of operand 0's two
// parameters (LT or GT, by XLA's total order or by the float partial order;
// or, SortKernel::canonical, JAX's comparison of floats), or anything
// else (kGeneric, run as `comparator`).
enum class KeyOrder {
  kGeneric,
  kTotalAscending,
  kTotalDescending,
  kFloatAscending,
  kFloatDescending
};

// The unsigned key that orders element `i` of a storage array of `type`
// as JAX's sort comparator orders floats: XLA's total order of the value
// with -0 as +0 and any NaN as the greatest key. `type` is one of
// CanonicalSortTypes.
uint64_t CanonicalSortKey(hlo::PrimitiveType type, const void* base, int64_t i);

// True for the float types whose sorts by JAX's comparator have keys
// (CanonicalSortKey): f16, bf16, f32, f64, f8e5m2 and f8e4m3fn.
bool CanonicalSortType(hlo::PrimitiveType type);

// Sorts `outer * inner` rows of `length` elements (element i of a row at
// (o * length + i) * inner + in) of every operand by the comparator on
// operand values, stably: outputs[j] is inputs[j] permuted.
class SortKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  std::vector<int> inputs, outputs;
  std::vector<hlo::PrimitiveType> types;
  int64_t outer = 1, length = 1, inner = 1;
  KeyOrder order = KeyOrder::kGeneric;
  // With a total order: the keys are compared as JAX's sort comparator
  // compares floats, -0 as +0 and every NaN as one NaN above +inf (the
  // comparator canonicalizes its operands, then compares by the total
  // order); the outputs are still the operands' own values.
  bool canonical = false;
  // The comparator on (lhs0, rhs0, lhs1, rhs1, ...) in compute types;
  // built for every order (the host runs it only for kGeneric).
  Expression comparator;
  bool has_comparator = false;
  int scratch = -1;    // the in-place path's second buffer
  int workspace = -1;  // the other paths' working memory
  int64_t workers = 1;

  // Permutation, merge buffer, keyed pairs and four radix arrays per row.
  static int64_t WorkspaceBytesPerWorker(int64_t length) { return length * 48; }

 private:
  // Keys alone, 32 bits wide, along the last dimension: each row's keys
  // are radix sorted in the output itself, with the scratch slot as the
  // second buffer (no allocation per run).
  void SortKeysInPlace(absl::Span<void* const> addresses,
                       const RunContext& context) const;
};

// The k largest (or, with largest=false, smallest) of each row of n (by
// XLA's total order, ties to the lower index) and their indices (s32),
// largest (smallest) first.
class TopKKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  int input = -1, values = -1, indices = -1;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  int64_t rows = 0, n = 0, k = 0;
  bool largest = true;
  int workspace = -1;  // (key, index) pairs of one row per worker
  int64_t workers = 1;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_SORT_H_
