// The host platform: the CPU as N virtual devices. Each device's streams are
// threads; device memory is ordinary host memory, 256-byte aligned.
#ifndef PJRT_DEVICE_HOST_HOST_PLATFORM_H_
#define PJRT_DEVICE_HOST_HOST_PLATFORM_H_

#include <memory>
#include <string>

#include "device/platform.h"

namespace pjrt::device {

class HostPlatform : public Platform {
 public:
  explicit HostPlatform(int device_count);

  const std::string& name() const override { return name_; }
  int device_count() const override { return device_count_; }
  DeviceDescription Describe(int ordinal) const override;
  AllocationModel default_allocation_model() const override {
    return AllocationModel::kSynchronous;
  }
  bool host_can_access_device_memory() const override { return true; }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(
      int ordinal, const std::string& name) override;
  std::unique_ptr<Event> CreateEvent(int ordinal) override;
  std::unique_ptr<SubAllocator> CreateDeviceMemoryAllocator(
      int ordinal) override;
  std::unique_ptr<SubAllocator> CreateStagingMemoryAllocator(
      int ordinal) override;

 private:
  const std::string name_ = "host";
  const int device_count_;
  const int64_t memory_bytes_;
};

// Aligned memory from the C heap.
class HostMemoryAllocator : public SubAllocator {
 public:
  absl::StatusOr<void*> Alloc(int64_t bytes) override;
  void Free(void* ptr, int64_t bytes) override;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_HOST_HOST_PLATFORM_H_
