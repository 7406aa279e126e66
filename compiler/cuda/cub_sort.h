// Sorts through CUB's device radix sorts, for sorts whose comparator is a
// plain comparison of one key operand (host::KeyOrder's total orders) and
// for top-k.
//
// The generated code hands CUB unsigned keys whose order as integers is
// the one the sort asks for (XLA's total order, complemented for a
// descending sort; the keys of one row of an unsigned type sorted
// ascending are read as they lie) and, when the sort carries other
// operands, each element's position in its row as a 32-bit value; a
// generated kernel then gathers the operands by those positions. Several
// rows are one sort of keys with the row number above the key's bits
// (cub::DeviceRadixSort over the low `bits` bits: every SM works on every
// row, however few and long the rows are); only 64-bit keys of several
// rows, which leave no room for a row number, are sorted as segments by
// cub::DeviceSegmentedRadixSort (a block per row). Radix sorts are
// stable, so equal keys keep their order in the row: the host's stable
// sort.
//
// The functions are compiled by nvcc (cub_sort_*.cu, one file per key
// width, since CUB's kernels are templates NVRTC cannot instantiate from
// the host); this header needs only the CUDA runtime's types.
#ifndef PJRT_COMPILER_CUDA_CUB_SORT_H_
#define PJRT_COMPILER_CUDA_CUB_SORT_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace pjrt::compiler::cuda {

// `rows` rows of `n` keys of `key_bytes` (1, 2, 4 or 8) bytes, contiguous
// row after row, each row sorted ascending by the keys' low `bits` bits as
// unsigned integers; with `pairs`, a 32-bit value per key moves with it.
// Several rows only with 8-byte keys, rows * n < 2^31.
struct CubSortProblem {
  int key_bytes = 4;
  int bits = 32;
  int64_t rows = 1;
  int64_t n = 0;
  bool pairs = false;
};

// Sorts `p`'s keys from `keys_in` into `keys_out` (and, with pairs, the
// values from `values_in` into `values_out`), enqueued on `stream`, with
// `temporary_bytes` of device memory at `temporary`. With `temporary`
// null, enqueues nothing and sets `temporary_bytes` to what CUB needs on
// the current device (the size depends only on the problem and the
// device's architecture). The inputs are not written.
cudaError_t CubSort(const CubSortProblem& p, void* temporary,
                    size_t* temporary_bytes, const void* keys_in,
                    void* keys_out, const uint32_t* values_in,
                    uint32_t* values_out, cudaStream_t stream);

// CubSort for keys of type K (uint8_t, uint16_t, uint32_t or uint64_t);
// each is instantiated in its own cub_sort_*.cu.
template <typename K>
cudaError_t CubSortOf(const CubSortProblem& p, void* temporary,
                      size_t* temporary_bytes, const K* keys_in, K* keys_out,
                      const uint32_t* values_in, uint32_t* values_out,
                      cudaStream_t stream);

extern template cudaError_t CubSortOf<uint8_t>(const CubSortProblem&, void*,
                                               size_t*, const uint8_t*,
                                               uint8_t*, const uint32_t*,
                                               uint32_t*, cudaStream_t);
extern template cudaError_t CubSortOf<uint16_t>(const CubSortProblem&, void*,
                                                size_t*, const uint16_t*,
                                                uint16_t*, const uint32_t*,
                                                uint32_t*, cudaStream_t);
extern template cudaError_t CubSortOf<uint32_t>(const CubSortProblem&, void*,
                                                size_t*, const uint32_t*,
                                                uint32_t*, const uint32_t*,
                                                uint32_t*, cudaStream_t);
extern template cudaError_t CubSortOf<uint64_t>(const CubSortProblem&, void*,
                                                size_t*, const uint64_t*,
                                                uint64_t*, const uint32_t*,
                                                uint32_t*, cudaStream_t);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_CUB_SORT_H_
