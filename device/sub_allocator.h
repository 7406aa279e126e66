// SubAllocator: raw memory from the platform (aligned host memory, cudaMalloc,
// pinned host memory), in large regions that an Allocator carves up.
//
// Thread-compatible: the owning allocator serialises calls.
#ifndef PJRT_DEVICE_SUB_ALLOCATOR_H_
#define PJRT_DEVICE_SUB_ALLOCATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace pjrt::device {

class SubAllocator {
 public:
  virtual ~SubAllocator() = default;
  // Returns `bytes` bytes aligned to at least 256 bytes, or RESOURCE_EXHAUSTED.
  virtual absl::StatusOr<void*> Alloc(int64_t bytes) = 0;
  // REQUIRES: `ptr` and `bytes` as returned by and passed to Alloc.
  virtual void Free(void* ptr, int64_t bytes) = 0;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_SUB_ALLOCATOR_H_
