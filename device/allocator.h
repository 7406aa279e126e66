// Allocator: hands out device memory and keeps the statistics that
// `pjrtctl stats` shows.
//
// Implementations are thread-safe. Allocation failures are
// RESOURCE_EXHAUSTED with the request and the statistics in the message; an
// allocator never aborts on a request it cannot satisfy.
#ifndef PJRT_DEVICE_ALLOCATOR_H_
#define PJRT_DEVICE_ALLOCATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pjrt::device {

struct AllocatorStats {
  // Allocated and charged bytes (see Charge).
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_limit = 0;
  // Memory the allocator holds from the platform (in use or cached).
  int64_t bytes_reserved = 0;
  // Live allocations.
  int64_t num_allocs = 0;
  // Allocations since creation.
  int64_t total_allocs = 0;
  // Largest request that would succeed now.
  int64_t largest_free_block = 0;
  // 1 - largest_free_block / (bytes_limit - bytes_in_use); 0 when nothing
  // is free.
  double fragmentation = 0;

  // "1.5 MiB in use of 16 GiB (peak 2 MiB, 3 allocations, largest free block
  // 15.9 GiB)".
  std::string ToString() const;
};

class Allocator {
 public:
  virtual ~Allocator() = default;

  // Returns memory for `bytes` bytes, aligned to at least 256 bytes. A
  // zero-byte request returns nullptr (which Deallocate accepts).
  virtual absl::StatusOr<void*> Allocate(int64_t bytes) = 0;

  // REQUIRES: `ptr` came from Allocate on this allocator and was not freed.
  virtual void Deallocate(void* ptr) = 0;
  // Counts `bytes` that live elsewhere (host memory a buffer aliases) as in
  // use on the device, against its limit, as Allocate would:
  // RESOURCE_EXHAUSTED when the limit leaves no room for them.
  virtual absl::Status Charge(int64_t bytes) = 0;
  // Undoes one successful Charge of `bytes`.
  virtual void Discharge(int64_t bytes) = 0;

  virtual AllocatorStats GetStats() const = 0;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_ALLOCATOR_H_
