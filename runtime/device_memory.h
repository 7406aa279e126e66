// DeviceMemory: sole ownership of one allocation of device memory (or of
// host memory lent to the runtime by a zero-copy transfer). Move-only; frees
// (or returns the memory to its lender) on destruction.
#ifndef PJRT_RUNTIME_DEVICE_MEMORY_H_
#define PJRT_RUNTIME_DEVICE_MEMORY_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "device/allocator.h"

namespace pjrt::runtime {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  // Allocates `bytes` from `allocator`, which must outlive the result.
  static absl::StatusOr<DeviceMemory> Allocate(device::Allocator* allocator,
                                               int64_t bytes);
  // Memory owned elsewhere; `release` runs when this object lets go.
  static DeviceMemory Borrowed(void* data, int64_t size,
                               absl::AnyInvocable<void() &&> release);

  ~DeviceMemory() { Reset(); }
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  int64_t size() const { return size_; }
  // False for a default-constructed or moved-from object.
  bool owns_memory() const {
    return allocator_ != nullptr || release_ != nullptr;
  }

  // Frees the memory now.
  void Reset();

 private:
  device::Allocator* allocator_ = nullptr;
  absl::AnyInvocable<void() &&> release_;
  void* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_DEVICE_MEMORY_H_
