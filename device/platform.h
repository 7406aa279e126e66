// Platform: one kind of device (the host CPU as virtual devices, or CUDA
// GPUs) and the factories for what each device needs: streams, events, raw
// device memory and staging memory.
//
// Thread-safe.
#ifndef PJRT_DEVICE_PLATFORM_H_
#define PJRT_DEVICE_PLATFORM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/event.h"
#include "device/stream.h"
#include "device/sub_allocator.h"

namespace pjrt::device {

// How frees are ordered after the uses of the memory (see the
// implementation notes in device/local_device_state.h).
enum class AllocationModel {
  kSynchronous,
  kComputeSynchronized,
  kAsynchronous,
};

// "synchronous", "compute-synchronized", "asynchronous".
const char* AllocationModelName(AllocationModel model);
// Inverse of AllocationModelName; INVALID_ARGUMENT naming `name` otherwise.
absl::StatusOr<AllocationModel> ParseAllocationModel(const std::string& name);

struct DeviceDescription {
  // "cpu", "NVIDIA H200".
  std::string kind;
  // Memory of the device in bytes (the allocator's default limit).
  int64_t memory_bytes = 0;
  // A GPU's compute capability (9.0 for an H100 or H200); 0.0 on the host.
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

class Platform {
 public:
  virtual ~Platform() = default;

  // "host" or "cuda".
  virtual const std::string& name() const = 0;
  virtual int device_count() const = 0;
  virtual DeviceDescription Describe(int ordinal) const = 0;
  virtual AllocationModel default_allocation_model() const = 0;

  // True when the host can read and write device memory directly (the host
  // platform), which allows zero-copy transfers and direct host writes.
  virtual bool host_can_access_device_memory() const = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(
      int ordinal, const std::string& name) = 0;
  virtual std::unique_ptr<Event> CreateEvent(int ordinal) = 0;
  // Raw device memory of `ordinal`.
  virtual std::unique_ptr<SubAllocator> CreateDeviceMemoryAllocator(
      int ordinal) = 0;
  // Host memory that the device copies to and from fastest (pinned on CUDA).
  virtual std::unique_ptr<SubAllocator> CreateStagingMemoryAllocator(
      int ordinal) = 0;

  // Makes `size` bytes of host memory at `data` (a client's shared-memory
  // region) something the devices copy to and from directly, by DMA,
  // without a staging copy (cudaHostRegister on CUDA). The host platform
  // needs nothing. An error leaves the memory usable, only slower.
  virtual absl::Status RegisterHostMemory(void* data, int64_t size) {
    return absl::OkStatus();
  }
  // Undoes RegisterHostMemory before the memory is unmapped.
  virtual void UnregisterHostMemory(void* data) {}

  // OK while device `ordinal` works; once it has failed for good (a sticky
  // CUDA error: an illegal address, a hardware fault, a lost device) the
  // error, for every call after. `probe` asks the device itself (a driver
  // call) instead of only reporting what was seen; the runtime probes
  // after a failed execution and refuses new work on an unhealthy device.
  virtual absl::Status DeviceHealth(int ordinal, bool probe) {
    return absl::OkStatus();
  }
};

// The host platform with `device_count` virtual devices.
absl::StatusOr<std::unique_ptr<Platform>> CreateHostPlatform(int device_count);

// True when this build has the CUDA platform.
bool CudaPlatformBuilt();

// The CUDA platform over every visible GPU. FAILED_PRECONDITION when the build
// lacks it or no GPU is visible (the message says which).
absl::StatusOr<std::unique_ptr<Platform>> CreateCudaPlatform();

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_PLATFORM_H_
