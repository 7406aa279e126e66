#include "runtime/device_memory.h"

#include <utility>

#include "base/status_macros.h"
#include "runtime/fault_injection.h"

namespace pjrt::runtime {

absl::StatusOr<DeviceMemory> DeviceMemory::Allocate(
    device::Allocator* allocator, int64_t bytes) {
  if (bytes > 0) PJRT_RETURN_IF_ERROR(MaybeInjectAllocationFailure(bytes));
  PJRT_ASSIGN_OR_RETURN(void* data, allocator->Allocate(bytes));
  DeviceMemory memory;
  memory.allocator_ = allocator;
  memory.data_ = data;
  memory.size_ = bytes;
  return memory;
}

DeviceMemory DeviceMemory::Borrowed(void* data, int64_t size,
                                    absl::AnyInvocable<void() &&> release) {
  DeviceMemory memory;
  memory.data_ = data;
  memory.size_ = size;
  memory.release_ = std::move(release);
  return memory;
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : allocator_(std::exchange(other.allocator_, nullptr)),
      release_(std::exchange(other.release_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    release_ = std::exchange(other.release_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DeviceMemory::Reset() {
  if (allocator_ != nullptr) {
    allocator_->Deallocate(data_);
    allocator_ = nullptr;
  }
  if (release_ != nullptr) {
    std::move(release_)();
    release_ = nullptr;
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pjrt::runtime
