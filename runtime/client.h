// Client and Device: the entry point of the runtime, owning the platform and
// the state of each addressable device.
//
// A Client is created once per daemon (or per test) and must outlive every
// Buffer made through it. All methods are thread-safe.
#ifndef PJRT_RUNTIME_CLIENT_H_
#define PJRT_RUNTIME_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compiler/backend.h"
#include "compiler/collectives.h"
#include "device/local_device_state.h"
#include "device/platform.h"
#include "hlo/shape.h"

namespace pjrt::runtime {

class Buffer;
class HostToDeviceTransfer;

struct ClientOptions {
  // "host", "cuda" or "auto" (cuda when a GPU is visible, else host).
  std::string platform = "auto";
  // Number of virtual devices of the host platform.
  int host_device_count = 1;
  // Per-device memory limit in bytes; 0 means the device's memory (the
  // machine's physical memory on the host platform).
  int64_t memory_limit_bytes = 0;
  // Unset: the platform's default (host: synchronous; cuda:
  // compute-synchronized).
  std::optional<device::AllocationModel> allocation_model;
  // Executions enqueued ahead of a device; 0 means the default (32, or 1
  // under the synchronous model).
  int queue_ahead = 0;
  // This daemon's task id in a cluster.
  int task_id = 0;
  // Global id of the first device; the others follow in ordinal order. In a
  // cluster: the number of devices of the tasks before this one.
  int first_device_id = 0;
  // Where the backend keeps compiled kernels across restarts (CUDA cubins);
  // empty: nowhere.
  std::string compile_cache_dir;
  // Where device k's generator of execution seeds starts (prng_seed + k);
  // 0: from std::random_device. Tools that compare two runs of a program
  // using rng fix it; a daemon leaves it 0.
  uint64_t prng_seed = 0;
  // Moves collective data between the tasks of a cluster (owned by the
  // caller, which outlives the client); null: a program whose collective
  // groups span tasks is refused at compile time.
  compiler::TaskTransport* task_transport = nullptr;
};

// Opens the platform that `options` names (platform, host_device_count).
// INVALID_ARGUMENT for an unknown platform, FAILED_PRECONDITION when it is
// unavailable.
absl::StatusOr<std::unique_ptr<device::Platform>> CreatePlatform(
    const ClientOptions& options);

// The alignment a host array needs for kZeroCopy to alias it.
inline constexpr uintptr_t kZeroCopyAlignment = 64;

// What the caller promises about the host memory it hands to
// BufferFromHostBuffer.
enum class HostBufferSemantics {
  // Valid only during the call: the data is copied (to staging memory)
  // before the call returns.
  kImmutableOnlyDuringCall,
  // Valid and unchanged until `on_done` runs: the transfer reads it
  // directly, later.
  kImmutableUntilTransferCompletes,
  // On the host platform, an aligned array becomes the device buffer itself
  // (no copy); `on_done` runs when the buffer lets go of it. Elsewhere, or
  // when misaligned, behaves as kImmutableUntilTransferCompletes.
  kZeroCopy,
};

class Device {
 public:
  Device(int id, int task_id, std::string platform, std::string kind,
         std::unique_ptr<device::LocalDeviceState> state, int64_t memory_bytes);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Global id, unique across the cluster.
  int id() const { return id_; }
  // Ordinal on this host.
  int local_hardware_id() const { return state_->ordinal(); }
  int task_id() const { return task_id_; }
  absl::string_view platform_name() const { return platform_; }
  absl::string_view kind() const { return kind_; }
  // The memory limit of the device's allocator.
  int64_t memory_bytes() const { return memory_bytes_; }
  device::Allocator* allocator() const { return state_->allocator(); }
  device::LocalDeviceState* local_device_state() const { return state_.get(); }

  // "host:0".
  std::string DebugString() const;

 private:
  const int id_;
  const int task_id_;
  const std::string platform_;
  const std::string kind_;
  const std::unique_ptr<device::LocalDeviceState> state_;
  const int64_t memory_bytes_;
};

class Client {
 public:
  // Creates the platform's devices. Errors: INVALID_ARGUMENT for a bad
  // option (naming it), FAILED_PRECONDITION when the platform is unavailable.
  static absl::StatusOr<std::unique_ptr<Client>> Create(
      const ClientOptions& options);
  // The same, on a platform already opened (see CreatePlatform).
  static absl::StatusOr<std::unique_ptr<Client>> Create(
      const ClientOptions& options, std::unique_ptr<device::Platform> platform);

  // Waits for every device's work to finish.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::string_view platform_name() const { return platform_->name(); }
  device::Platform* platform() const { return platform_.get(); }
  // The compiler of the platform's programs, or why there is none
  // (UNIMPLEMENTED: a platform this build cannot compile for).
  absl::StatusOr<const compiler::Backend*> backend() const;
  int task_id() const { return task_id_; }
  absl::Span<Device* const> devices() const { return device_ptrs_; }
  // See ClientOptions::task_transport.
  compiler::TaskTransport* task_transport() const { return task_transport_; }

  // The addressable device with global id `id`, or INVALID_ARGUMENT naming
  // the id and the valid ones.
  absl::StatusOr<Device*> LookupDevice(int id) const;

  // Copies `data` (shape.ByteSize() bytes, row-major) to a new buffer on
  // `device`, as `semantics` allows. `on_done` (may be null) runs once the
  // runtime no longer reads `data`. A shape that is not an array is
  // INVALID_ARGUMENT.
  absl::StatusOr<std::shared_ptr<Buffer>> BufferFromHostBuffer(
      const void* data, const hlo::Shape& shape, HostBufferSemantics semantics,
      absl::AnyInvocable<void() &&> on_done, Device* device);

  // Shorthand: kImmutableOnlyDuringCall, no callback.
  absl::StatusOr<std::shared_ptr<Buffer>> BufferFromHostBuffer(
      const void* data, const hlo::Shape& shape, Device* device);

  // A buffer whose contents are undefined, for outputs and receives.
  absl::StatusOr<std::shared_ptr<Buffer>> CreateUninitializedBuffer(
      const hlo::Shape& shape, Device* device);

  // Starts a transfer from the host into a new buffer of `shape` on `device`,
  // filled in pieces. The memory is allocated now: RESOURCE_EXHAUSTED if it
  // does not fit.
  absl::StatusOr<std::unique_ptr<HostToDeviceTransfer>>
  CreateHostToDeviceTransfer(const hlo::Shape& shape, Device* device);

 private:
  Client(std::unique_ptr<device::Platform> platform,
         const compiler::BackendConfig& backend_config, int task_id,
         std::vector<std::unique_ptr<Device>> devices);

  const std::unique_ptr<device::Platform> platform_;
  // After platform_, which it uses: destroyed before it.
  const absl::StatusOr<std::unique_ptr<compiler::Backend>> backend_;
  const int task_id_;
  const std::vector<std::unique_ptr<Device>> devices_;
  const std::vector<Device*> device_ptrs_;
  compiler::TaskTransport* task_transport_ = nullptr;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_CLIENT_H_
