// CubSortOf (cub_sort.h), included by each cub_sort_*.cu to instantiate it
// for one key type: nvcc only.
#ifndef PJRT_COMPILER_CUDA_CUB_SORT_CUH_
#define PJRT_COMPILER_CUDA_CUB_SORT_CUH_

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "compiler/cuda/cub_sort.h"

namespace pjrt::compiler::cuda {

// Where row r starts: r * n (the segments' offsets, computed, not stored).
struct RowStart {
  int64_t n;
  __host__ __device__ int64_t operator()(int64_t r) const { return r * n; }
};

template <typename K>
cudaError_t CubSortOf(const CubSortProblem& p, void* temporary,
                      size_t* temporary_bytes, const K* keys_in, K* keys_out,
                      const uint32_t* values_in, uint32_t* values_out,
                      cudaStream_t stream) {
  const int64_t count = p.rows * p.n;
  constexpr int kBits = static_cast<int>(sizeof(K) * 8);
  if (p.rows == 1) {
    if (!p.pairs) {
      return cub::DeviceRadixSort::SortKeys(temporary, *temporary_bytes,
                                            keys_in, keys_out, count, 0, kBits,
                                            stream);
    }
    return cub::DeviceRadixSort::SortPairs(temporary, *temporary_bytes, keys_in,
                                           keys_out, values_in, values_out,
                                           count, 0, kBits, stream);
  }
  const auto starts = thrust::make_transform_iterator(
      thrust::make_counting_iterator<int64_t>(0), RowStart{p.n});
  if (!p.pairs) {
    return cub::DeviceSegmentedSort::StableSortKeys(
        temporary, *temporary_bytes, keys_in, keys_out, count, p.rows, starts,
        starts + 1, stream);
  }
  return cub::DeviceSegmentedSort::StableSortPairs(
      temporary, *temporary_bytes, keys_in, keys_out, values_in, values_out,
      count, p.rows, starts, starts + 1, stream);
}

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_CUB_SORT_CUH_
