#include "runtime/client.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "device/host/host_allocator.h"
#include "runtime/buffer.h"

namespace pjrt::runtime {
namespace {

// Upper bound on virtual host devices: enough for any test of collectives,
// small enough that a typo cannot spawn a million stream threads.
constexpr int kMaxHostDevices = 256;

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 34;
  return static_cast<int64_t>(pages) * page_size;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateHostDevices(
    const ClientOptions& options) {
  if (options.host_device_count < 1 ||
      options.host_device_count > kMaxHostDevices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host device count %d is out of range; expected 1 to %d",
        options.host_device_count, kMaxHostDevices));
  }
  int64_t limit = options.memory_limit_bytes > 0 ? options.memory_limit_bytes
                                                 : PhysicalMemoryBytes();
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < options.host_device_count; ++i) {
    auto allocator = std::make_unique<device::HostAllocator>(
        absl::StrFormat("host device %d", i), limit);
    devices.push_back(std::make_unique<Device>(
        /*id=*/i, /*local_hardware_id=*/i, options.task_id, "host", "cpu",
        std::move(allocator), limit));
  }
  return devices;
}

}  // namespace

Device::Device(int id, int local_hardware_id, int task_id, std::string platform,
               std::string kind, std::unique_ptr<device::Allocator> allocator,
               int64_t memory_bytes)
    : id_(id),
      local_hardware_id_(local_hardware_id),
      task_id_(task_id),
      platform_(std::move(platform)),
      kind_(std::move(kind)),
      allocator_(std::move(allocator)),
      memory_bytes_(memory_bytes) {}

std::string Device::DebugString() const {
  return absl::StrFormat("%s:%d", platform_, id_);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    const ClientOptions& options) {
  if (options.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memory limit %d is negative; use 0 for the platform default",
        options.memory_limit_bytes));
  }
  std::string platform = options.platform;
  if (platform == "auto") platform = "host";
  if (platform == "cuda") {
    return absl::FailedPreconditionError(
        "the cuda platform is not available in this build; use "
        "--platform host");
  }
  if (platform != "host") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown platform '%s'; expected host, cuda or auto", platform));
  }
  PJRT_ASSIGN_OR_RETURN(auto devices, CreateHostDevices(options));
  return std::unique_ptr<Client>(
      new Client(platform, options.task_id, std::move(devices)));
}

namespace {
std::vector<Device*> Pointers(const std::vector<std::unique_ptr<Device>>& v) {
  std::vector<Device*> out;
  out.reserve(v.size());
  for (const auto& d : v) out.push_back(d.get());
  return out;
}
}  // namespace

Client::Client(std::string platform, int task_id,
               std::vector<std::unique_ptr<Device>> devices)
    : platform_(std::move(platform)),
      task_id_(task_id),
      devices_(std::move(devices)),
      device_ptrs_(Pointers(devices_)) {}

Client::~Client() = default;

absl::StatusOr<Device*> Client::LookupDevice(int id) const {
  for (Device* device : device_ptrs_) {
    if (device->id() == id) return device;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "device %d does not exist; this daemon's devices are %d to %d", id,
      device_ptrs_.front()->id(), device_ptrs_.back()->id()));
}

absl::StatusOr<std::unique_ptr<HostToDeviceTransfer>>
Client::CreateHostToDeviceTransfer(const hlo::Shape& shape, Device* device) {
  PJRT_ASSIGN_OR_RETURN(
      auto memory, DeviceMemory::Allocate(device->allocator(), shape.ByteSize()));
  auto event = std::make_shared<device::HostEvent>();
  auto buffer = std::make_shared<Buffer>(this, shape, device, memory, event);
  return std::make_unique<HostToDeviceTransfer>(std::move(buffer),
                                                std::move(memory),
                                                std::move(event));
}

absl::StatusOr<std::shared_ptr<Buffer>> Client::BufferFromHostBuffer(
    const void* data, const hlo::Shape& shape, Device* device) {
  PJRT_ASSIGN_OR_RETURN(auto transfer,
                        CreateHostToDeviceTransfer(shape, device));
  PJRT_RETURN_IF_ERROR(transfer->Append(data, shape.ByteSize()));
  PJRT_RETURN_IF_ERROR(transfer->Finish());
  return transfer->buffer();
}

}  // namespace pjrt::runtime
