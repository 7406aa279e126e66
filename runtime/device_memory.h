// DeviceMemory: one allocation of device memory, freed when the last owner
// lets go.
//
// Shared ownership is what orders frees after uses: an operation that reads
// or writes the memory keeps a reference until its work has finished, so
// deleting a buffer while a transfer is in flight only drops the buffer's own
// reference.
#ifndef PJRT_RUNTIME_DEVICE_MEMORY_H_
#define PJRT_RUNTIME_DEVICE_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "device/allocator.h"

namespace pjrt::runtime {

class DeviceMemory {
 public:
  // Allocates `bytes` from `allocator`, which must outlive the result.
  static absl::StatusOr<std::shared_ptr<DeviceMemory>> Allocate(
      device::Allocator* allocator, int64_t bytes);

  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  DeviceMemory(device::Allocator* allocator, void* data, int64_t size)
      : allocator_(allocator), data_(data), size_(size) {}

  device::Allocator* const allocator_;
  void* const data_;
  const int64_t size_;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_DEVICE_MEMORY_H_
