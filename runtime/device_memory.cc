#include "runtime/device_memory.h"

#include "base/status_macros.h"

namespace pjrt::runtime {

absl::StatusOr<std::shared_ptr<DeviceMemory>> DeviceMemory::Allocate(
    device::Allocator* allocator, int64_t bytes) {
  PJRT_ASSIGN_OR_RETURN(void* data, allocator->Allocate(bytes));
  return std::shared_ptr<DeviceMemory>(new DeviceMemory(allocator, data, bytes));
}

DeviceMemory::~DeviceMemory() { allocator_->Deallocate(data_); }

}  // namespace pjrt::runtime
