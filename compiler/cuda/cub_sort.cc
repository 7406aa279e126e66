#include "compiler/cuda/cub_sort.h"

namespace pjrt::compiler::cuda {

cudaError_t CubSort(const CubSortProblem& p, void* temporary,
                    size_t* temporary_bytes, const void* keys_in,
                    void* keys_out, const uint32_t* values_in,
                    uint32_t* values_out, cudaStream_t stream) {
  switch (p.key_bytes) {
    case 1:
      return CubSortOf(
          p, temporary, temporary_bytes, static_cast<const uint8_t*>(keys_in),
          static_cast<uint8_t*>(keys_out), values_in, values_out, stream);
    case 2:
      return CubSortOf(
          p, temporary, temporary_bytes, static_cast<const uint16_t*>(keys_in),
          static_cast<uint16_t*>(keys_out), values_in, values_out, stream);
    case 4:
      return CubSortOf(
          p, temporary, temporary_bytes, static_cast<const uint32_t*>(keys_in),
          static_cast<uint32_t*>(keys_out), values_in, values_out, stream);
    case 8:
      return CubSortOf(
          p, temporary, temporary_bytes, static_cast<const uint64_t*>(keys_in),
          static_cast<uint64_t*>(keys_out), values_in, values_out, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pjrt::compiler::cuda
