// HostAllocator: memory for one host-platform device, from the C heap, with a
// byte limit and statistics.
//
// Thread-safe. Every allocation is 64-byte aligned, so a buffer can be handed
// to vectorised kernels (and, for zero-copy transfers, aliased) as is.
#ifndef PJRT_DEVICE_HOST_HOST_ALLOCATOR_H_
#define PJRT_DEVICE_HOST_HOST_ALLOCATOR_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "device/allocator.h"

namespace pjrt::device {

class HostAllocator : public Allocator {
 public:
  // `name` appears in error messages ("host device 0").
  HostAllocator(std::string name, int64_t bytes_limit);
  ~HostAllocator() override;

  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  void Deallocate(void* ptr) override;
  AllocatorStats GetStats() const override;

 private:
  const std::string name_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<void*, int64_t> sizes_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_HOST_HOST_ALLOCATOR_H_
