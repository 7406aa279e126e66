// gather and scatter's kernels (kernel_indexing.cc), declared here for the
// CUDA code generator, which generates the same accesses from the same
// parameters.
#ifndef PJRT_COMPILER_HOST_KERNEL_INDEXING_H_
#define PJRT_COMPILER_HOST_KERNEL_INDEXING_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// How index vectors are read: for each batch position (a multi-index over
// `batch_sizes`), the index array's elements start at sum(b * batch_strides)
// and step by vector_stride.
struct IndexReader {
  std::vector<int64_t> batch_sizes;
  std::vector<int64_t> batch_strides;  // into the index array
  int64_t vector_stride = 0;
  int64_t vector_size = 0;
  hlo::PrimitiveType type = hlo::PrimitiveType::kS32;
  // Operand dimension each index vector entry sets.
  std::vector<int64_t> index_to_operand;
  // Batching: operand dimension, and the batch position entry it takes.
  std::vector<std::pair<int64_t, int>> batching;

  // Fills start[] (operand rank) for batch position b.
  void Start(const void* indices, absl::Span<const int64_t> b,
             std::vector<int64_t>* start) const {
    std::fill(start->begin(), start->end(), 0);
    int64_t at = 0;
    for (size_t j = 0; j < b.size(); ++j) at += b[j] * batch_strides[j];
    for (int64_t k = 0; k < vector_size; ++k) {
      (*start)[index_to_operand[k]] =
          LoadIndex(type, indices, at + k * vector_stride);
    }
    for (const auto& [dim, entry] : batching) (*start)[dim] = b[entry];
  }
};

// A window of `sizes` read with src strides and written with dst strides,
// row by row (the last window dimension is the row).
struct WindowWalk {
  std::vector<int64_t> sizes, src_strides, dst_strides;

  template <typename F>
  void ForEachRow(int64_t src_base, int64_t dst_base, int64_t first_begin,
                  int64_t first_end, F row) const {
    const int rank = static_cast<int>(sizes.size());
    if (rank == 0) {
      row(src_base, dst_base, int64_t{1}, int64_t{1}, int64_t{1});
      return;
    }
    std::vector<int64_t> lo(rank, 0), hi(sizes);
    lo[0] = first_begin;
    hi[0] = first_end;
    for (int d = 0; d < rank; ++d) {
      if (lo[d] >= hi[d]) return;
    }
    std::vector<int64_t> idx = lo;
    const int last = rank - 1;
    const int64_t len = hi[last] - lo[last];
    while (true) {
      int64_t s = src_base, t = dst_base;
      for (int d = 0; d < rank; ++d) {
        s += idx[d] * src_strides[d];
        t += idx[d] * dst_strides[d];
      }
      row(s, t, len, src_strides[last], dst_strides[last]);
      int d = last - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < hi[d]) break;
        idx[d] = lo[d];
      }
      if (d < 0) return;
    }
  }
};

// out[position, window] = operand[clamp(start(position)) + window], XLA
// clamping each start so that the slice stays inside the operand.
class GatherKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  int operand = -1, indices = -1, output = -1;
  int bytes = 4;
  IndexReader reader;
  std::vector<int64_t> operand_dims, operand_strides, slice_sizes;
  std::vector<int64_t> out_batch_strides;
  WindowWalk walk;
};

// The update computation, fast for add and for replacing (what JAX's
// .at[].add and .at[].set print); any other region runs as an Expression.
enum class Combiner { kAdd, kReplace, kRegion };

// outputs = operands, then for each position in order, for each element of
// its window in row-major order, output = combine(output, update), a
// window whose start puts any of it outside the operand being skipped (as
// XLA defines).
class ScatterKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  std::vector<int> inputs, updates, outputs;
  std::vector<int64_t> operand_bytes;
  std::vector<hlo::PrimitiveType> types;
  int indices = -1;
  IndexReader reader;
  std::vector<int64_t> operand_dims, operand_strides, extent;
  std::vector<int64_t> update_batch_strides;
  WindowWalk walk;
  bool parallel = false;
  Combiner combiner = Combiner::kRegion;
  Expression region;

 private:
  // Scatters the window elements whose first window coordinate is in
  // [lo, hi), over every position in order.
  void ScatterRange(absl::Span<void* const> addresses, const void* index_data,
                    int64_t lo, int64_t hi,
                    const Cancellation* cancellation) const;
  // out[t + i*ts] = f(out[t + i*ts], update[s + i*ss]) for i < m.
  void Combine(absl::Span<void* const> addresses, int64_t s, int64_t ss,
               int64_t t, int64_t ts, int64_t m,
               std::vector<std::vector<uint64_t>>& cur,
               std::vector<std::vector<uint64_t>>& upd, RegionRunner* runner,
               const std::vector<const void*>& in_ptrs,
               const std::vector<void*>& out_ptrs) const;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_INDEXING_H_
