// CubSortOf (cub_sort.h), included by each cub_sort_*.cu to instantiate it
// for one key type: nvcc only.
#ifndef PJRT_COMPILER_CUDA_CUB_SORT_CUH_
#define PJRT_COMPILER_CUDA_CUB_SORT_CUH_

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "compiler/cuda/cub_sort.h"

namespace pjrt::compiler::cuda {

// Where row r starts: r * n (the segments' offsets, computed, not stored).
struct RowStart {
  int n;
  __host__ __device__ int operator()(int r) const { return r * n; }
};

template <typename K>
cudaError_t CubSortOf(const CubSortProblem& p, void* temporary,
                      size_t* temporary_bytes, const K* keys_in, K* keys_out,
                      const uint32_t* values_in, uint32_t* values_out,
                      cudaStream_t stream) {
  const int64_t count = p.rows * p.n;
  if (p.rows == 1) {
    // CUB's offsets take the type of the count: 32-bit ones (faster, and
    // less temporary storage) unless the count needs 64.
    const auto sort = [&](auto items) {
      if (!p.pairs) {
        return cub::DeviceRadixSort::SortKeys(temporary, *temporary_bytes,
                                              keys_in, keys_out, items, 0,
                                              p.bits, stream);
      }
      return cub::DeviceRadixSort::SortPairs(
          temporary, *temporary_bytes, keys_in, keys_out, values_in, values_out,
          items, 0, p.bits, stream);
    };
    if (count <= INT32_MAX) return sort(static_cast<int>(count));
    return sort(count);
  }
  if constexpr (sizeof(K) == 8) {
    if (count >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
    const auto starts =
        thrust::make_transform_iterator(thrust::make_counting_iterator<int>(0),
                                        RowStart{static_cast<int>(p.n)});
    if (!p.pairs) {
      return cub::DeviceSegmentedRadixSort::SortKeys(
          temporary, *temporary_bytes, keys_in, keys_out,
          static_cast<int>(count), static_cast<int>(p.rows), starts, starts + 1,
          0, p.bits, stream);
    }
    return cub::DeviceSegmentedRadixSort::SortPairs(
        temporary, *temporary_bytes, keys_in, keys_out, values_in, values_out,
        static_cast<int>(count), static_cast<int>(p.rows), starts, starts + 1,
        0, p.bits, stream);
  } else {
    return cudaErrorInvalidValue;  // several rows: one sort, the row above
  }
}

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_CUB_SORT_CUH_
