// Client and Device: the entry point of the runtime, owning the addressable
// devices of one platform.
//
// A Client is created once per daemon (or per test) and outlives every
// Buffer made through it. All methods are thread-safe.
#ifndef PJRT_RUNTIME_CLIENT_H_
#define PJRT_RUNTIME_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "device/allocator.h"
#include "hlo/shape.h"

namespace pjrt::runtime {

class Buffer;
class HostToDeviceTransfer;

struct ClientOptions {
  // "host", "cuda" or "auto" (cuda when a GPU is visible, else host).
  std::string platform = "auto";
  // Number of virtual devices of the host platform.
  int host_device_count = 1;
  // Per-device memory limit in bytes; 0 means the platform's default (the
  // machine's physical memory on the host platform).
  int64_t memory_limit_bytes = 0;
  // This daemon's task id in a cluster.
  int task_id = 0;
};

class Device {
 public:
  Device(int id, int local_hardware_id, int task_id, std::string platform,
         std::string kind, std::unique_ptr<device::Allocator> allocator,
         int64_t memory_bytes);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Global id, unique across the cluster.
  int id() const { return id_; }
  // Ordinal on this host.
  int local_hardware_id() const { return local_hardware_id_; }
  int task_id() const { return task_id_; }
  absl::string_view platform_name() const { return platform_; }
  absl::string_view kind() const { return kind_; }
  // The memory limit of the device's allocator.
  int64_t memory_bytes() const { return memory_bytes_; }
  device::Allocator* allocator() const { return allocator_.get(); }

  // "host:0".
  std::string DebugString() const;

 private:
  const int id_;
  const int local_hardware_id_;
  const int task_id_;
  const std::string platform_;
  const std::string kind_;
  const std::unique_ptr<device::Allocator> allocator_;
  const int64_t memory_bytes_;
};

class Client {
 public:
  // Creates the platform's devices. Errors: INVALID_ARGUMENT for a bad
  // option (naming it), FAILED_PRECONDITION when the platform is unavailable.
  static absl::StatusOr<std::unique_ptr<Client>> Create(
      const ClientOptions& options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::string_view platform_name() const { return platform_; }
  int task_id() const { return task_id_; }
  absl::Span<Device* const> devices() const { return device_ptrs_; }

  // The addressable device with global id `id`, or INVALID_ARGUMENT naming
  // the id and the valid ones.
  absl::StatusOr<Device*> LookupDevice(int id) const;

  // Starts a transfer from the host into a new buffer of `shape` on `device`.
  // The memory is allocated now: RESOURCE_EXHAUSTED if it does not fit.
  // REQUIRES: shape.IsArray(); `device` belongs to this client.
  absl::StatusOr<std::unique_ptr<HostToDeviceTransfer>>
  CreateHostToDeviceTransfer(const hlo::Shape& shape, Device* device);

  // Copies `data` (shape.ByteSize() bytes, row-major) into a new buffer on
  // `device`. The host data may be reused as soon as this returns.
  absl::StatusOr<std::shared_ptr<Buffer>> BufferFromHostBuffer(
      const void* data, const hlo::Shape& shape, Device* device);

 private:
  Client(std::string platform, int task_id,
         std::vector<std::unique_ptr<Device>> devices);

  const std::string platform_;
  const int task_id_;
  const std::vector<std::unique_ptr<Device>> devices_;
  const std::vector<Device*> device_ptrs_;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_CLIENT_H_
