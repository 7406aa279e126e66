// CubSortOf for 64-bit keys (cub_sort.h).
#include "compiler/cuda/cub_sort.cuh"

namespace pjrt::compiler::cuda {

template cudaError_t CubSortOf<uint64_t>(const CubSortProblem&, void*, size_t*,
                                         const uint64_t*, uint64_t*,
                                         const uint32_t*, uint32_t*,
                                         cudaStream_t);

}  // namespace pjrt::compiler::cuda
