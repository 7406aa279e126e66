#include "runtime/client.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/parallel_copy.h"
#include "base/status_macros.h"
#include "runtime/buffer.h"
#include "runtime/host_to_device_transfer.h"

namespace pjrt::runtime {

using device::AllocationModel;

namespace {

// A zero-copy host array must be aligned at least this much to become a
// device buffer as is (vectorised kernels assume it).

}  // namespace

absl::StatusOr<std::unique_ptr<device::Platform>> CreatePlatform(
    const ClientOptions& options) {
  if (options.platform == "host") {
    return device::CreateHostPlatform(options.host_device_count);
  }
  if (options.platform == "cuda") return device::CreateCudaPlatform();
  if (options.platform == "auto") {
    auto cuda = device::CreateCudaPlatform();
    if (cuda.ok()) return cuda;
    spdlog::info("platform auto: {}; using the host platform",
                 cuda.status().message());
    return device::CreateHostPlatform(options.host_device_count);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown platform '%s'; expected host, cuda or auto", options.platform));
}

Device::Device(int id, int task_id, std::string platform, std::string kind,
               std::unique_ptr<device::LocalDeviceState> state,
               int64_t memory_bytes)
    : id_(id),
      task_id_(task_id),
      platform_(std::move(platform)),
      kind_(std::move(kind)),
      state_(std::move(state)),
      memory_bytes_(memory_bytes) {}

std::string Device::DebugString() const {
  return absl::StrFormat("%s:%d", platform_, id_);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    const ClientOptions& options) {
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<device::Platform> platform,
                        CreatePlatform(options));
  return Create(options, std::move(platform));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    const ClientOptions& options, std::unique_ptr<device::Platform> platform) {
  if (options.first_device_id < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "first device id %d is negative", options.first_device_id));
  }
  if (options.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memory limit %d is negative; use 0 for the device's memory",
        options.memory_limit_bytes));
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (int ordinal = 0; ordinal < platform->device_count(); ++ordinal) {
    device::LocalDeviceOptions device_options;
    device_options.allocation_model = options.allocation_model;
    device_options.queue_ahead = options.queue_ahead;
    device_options.memory_limit_bytes = options.memory_limit_bytes;
    if (options.prng_seed != 0) {
      device_options.prng_seed =
          options.prng_seed + static_cast<uint64_t>(ordinal);
      if (device_options.prng_seed == 0) device_options.prng_seed = 1;
    }
    PJRT_ASSIGN_OR_RETURN(
        auto state, device::LocalDeviceState::Create(platform.get(), ordinal,
                                                     device_options));
    device::DeviceDescription description = platform->Describe(ordinal);
    int64_t memory = state->allocator()->GetStats().bytes_limit;
    devices.push_back(std::make_unique<Device>(
        options.first_device_id + ordinal, options.task_id, platform->name(),
        description.kind, std::move(state), memory));
  }
  std::unique_ptr<Client> client(new Client(
      std::move(platform),
      compiler::BackendConfig{.compile_cache_dir = options.compile_cache_dir},
      options.task_id, std::move(devices)));
  client->task_transport_ = options.task_transport;
  return client;
}

absl::StatusOr<const compiler::Backend*> Client::backend() const {
  if (!backend_.ok()) return backend_.status();
  return backend_->get();
}

namespace {
std::vector<Device*> Pointers(const std::vector<std::unique_ptr<Device>>& v) {
  std::vector<Device*> out;
  out.reserve(v.size());
  for (const auto& d : v) out.push_back(d.get());
  return out;
}
}  // namespace

Client::Client(std::unique_ptr<device::Platform> platform,
               const compiler::BackendConfig& backend_config, int task_id,
               std::vector<std::unique_ptr<Device>> devices)
    : platform_(std::move(platform)),
      backend_(compiler::CreateBackend(platform_.get(), backend_config)),
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

absl::StatusOr<std::shared_ptr<Buffer>> Client::BufferFromHostBuffer(
    const void* data, const hlo::Shape& shape, Device* device) {
  return BufferFromHostBuffer(data, shape,
                              HostBufferSemantics::kImmutableOnlyDuringCall,
                              nullptr, device);
}

absl::StatusOr<std::shared_ptr<Buffer>> Client::BufferFromHostBuffer(
    const void* data, const hlo::Shape& shape, HostBufferSemantics semantics,
    absl::AnyInvocable<void() &&> on_done, Device* device) {
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "BufferFromHostBuffer takes an array shape, not %s", shape.ToString()));
  }
  device::LocalDeviceState* local = device->local_device_state();
  PJRT_RETURN_IF_ERROR(
      platform_->DeviceHealth(local->ordinal(), /*probe=*/false));
  const int64_t size = shape.ByteSize();
  const bool host_access = platform_->host_can_access_device_memory();
  const auto done = [&on_done] {
    if (on_done != nullptr) std::move(on_done)();
  };

  if (semantics == HostBufferSemantics::kZeroCopy && host_access &&
      reinterpret_cast<uintptr_t>(data) % kZeroCopyAlignment == 0) {
    // The buffer counts against its device's memory wherever its bytes
    // live, so that the memory limit bounds every buffer.
    device::Allocator* allocator = local->allocator();
    PJRT_RETURN_IF_ERROR(allocator->Charge(size));
    DeviceMemory memory = DeviceMemory::Borrowed(
        const_cast<void*>(data), size,
        [allocator, size, on_done = std::move(on_done)]() mutable {
          allocator->Discharge(size);
          if (on_done != nullptr) std::move(on_done)();
        });
    auto tracked = std::make_shared<TrackedDeviceBuffer>(
        local, std::move(memory),
        std::vector<std::shared_ptr<BufferSequencingEvent>>{
            BufferSequencingEvent::CreateDefined()});
    return std::make_shared<Buffer>(this, device, shape, std::move(tracked));
  }

  PJRT_ASSIGN_OR_RETURN(DeviceMemory memory,
                        DeviceMemory::Allocate(local->allocator(), size));
  if (host_access &&
      local->allocation_model() == AllocationModel::kSynchronous) {
    // Nothing else can touch fresh memory under the synchronous model.
    ParallelMemcpy(memory.data(), data, size);
    done();
    auto tracked = std::make_shared<TrackedDeviceBuffer>(
        local, std::move(memory),
        std::vector<std::shared_ptr<BufferSequencingEvent>>{
            BufferSequencingEvent::CreateDefined()});
    return std::make_shared<Buffer>(this, device, shape, std::move(tracked));
  }

  device::Stream* stream = local->host_to_device_stream();
  if (local->allocation_model() == AllocationModel::kComputeSynchronized) {
    PJRT_RETURN_IF_ERROR(local->ThenWaitFor(stream, local->compute_stream()));
  }
  const void* source = data;
  DeviceMemory staging;
  if (semantics == HostBufferSemantics::kImmutableOnlyDuringCall) {
    PJRT_ASSIGN_OR_RETURN(
        staging, DeviceMemory::Allocate(local->staging_allocator(), size));
    ParallelMemcpy(staging.data(), data, size);
    source = staging.data();
    done();
  }
  PJRT_RETURN_IF_ERROR(stream->Memcpy(memory.data(), source, size));
  auto definition = std::make_shared<BufferSequencingEvent>();
  auto event = local->AllocateAndRecordEvent(stream);
  if (!event.ok()) {
    stream->BlockHostUntilDone().IgnoreError();
    return event.status();
  }
  definition->SetSequencingEvent(*std::move(event), stream);
  auto tracked = std::make_shared<TrackedDeviceBuffer>(
      local, std::move(memory),
      std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
  // Keep the destination (and the staging copy, or tell the caller it may
  // reuse its array) until the copy is done.
  if (staging.owns_memory()) {
    PJRT_RETURN_IF_ERROR(local->ThenRelease(stream, std::move(staging)));
  } else if (on_done != nullptr) {
    PJRT_RETURN_IF_ERROR(
        local->ThenExecuteOnCallbackThread(stream, std::move(on_done)));
  }
  PJRT_RETURN_IF_ERROR(local->ThenRelease(stream, tracked));
  return std::make_shared<Buffer>(this, device, shape, std::move(tracked));
}

absl::StatusOr<std::shared_ptr<Buffer>> Client::CreateUninitializedBuffer(
    const hlo::Shape& shape, Device* device) {
  device::LocalDeviceState* local = device->local_device_state();
  PJRT_RETURN_IF_ERROR(
      platform_->DeviceHealth(local->ordinal(), /*probe=*/false));
  PJRT_ASSIGN_OR_RETURN(
      DeviceMemory memory,
      DeviceMemory::Allocate(local->allocator(), shape.ByteSize()));
  std::shared_ptr<BufferSequencingEvent> definition;
  if (local->allocation_model() == AllocationModel::kComputeSynchronized) {
    // The memory is valid once the compute stream passes this point.
    PJRT_ASSIGN_OR_RETURN(
        auto event, local->AllocateAndRecordEvent(local->compute_stream()));
    definition = std::make_shared<BufferSequencingEvent>();
    definition->SetSequencingEvent(std::move(event), local->compute_stream());
  } else {
    definition = BufferSequencingEvent::CreateDefined();
  }
  auto tracked = std::make_shared<TrackedDeviceBuffer>(
      local, std::move(memory),
      std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
  return std::make_shared<Buffer>(this, device, shape, std::move(tracked));
}

absl::StatusOr<std::unique_ptr<HostToDeviceTransfer>>
Client::CreateHostToDeviceTransfer(const hlo::Shape& shape, Device* device) {
  device::LocalDeviceState* local = device->local_device_state();
  PJRT_ASSIGN_OR_RETURN(
      DeviceMemory memory,
      DeviceMemory::Allocate(local->allocator(), shape.ByteSize()));
  auto definition = std::make_shared<BufferSequencingEvent>();
  auto tracked = std::make_shared<TrackedDeviceBuffer>(
      local, std::move(memory),
      std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
  auto buffer = std::make_shared<Buffer>(this, device, shape, tracked);
  return std::make_unique<HostToDeviceTransfer>(
      std::move(buffer), std::move(tracked), std::move(definition));
}

}  // namespace pjrt::runtime
