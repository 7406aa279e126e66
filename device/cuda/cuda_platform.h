// The CUDA platform: every visible GPU, its streams (cudaStream_t), events
// (cudaEvent_t), device memory (cudaMalloc) and pinned host memory
// (cudaHostAlloc).
#ifndef PJRT_DEVICE_CUDA_CUDA_PLATFORM_H_
#define PJRT_DEVICE_CUDA_CUDA_PLATFORM_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/mutex.h"
#include "device/platform.h"
#include "device/worker_thread.h"

namespace pjrt::device {

// INTERNAL naming the call and CUDA's description of `error`.
absl::Status CudaStatus(cudaError_t error, const char* call);

class CudaPlatform : public Platform {
 public:
  // REQUIRES: device_count >= 1 GPUs are visible.
  explicit CudaPlatform(int device_count);
  ~CudaPlatform() override;

  const std::string& name() const override { return name_; }
  int device_count() const override { return device_count_; }
  DeviceDescription Describe(int ordinal) const override;
  AllocationModel default_allocation_model() const override {
    return AllocationModel::kComputeSynchronized;
  }
  bool host_can_access_device_memory() const override { return false; }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(
      int ordinal, const std::string& name) override;
  std::unique_ptr<Event> CreateEvent(int ordinal) override;
  std::unique_ptr<SubAllocator> CreateDeviceMemoryAllocator(
      int ordinal) override;
  std::unique_ptr<SubAllocator> CreateStagingMemoryAllocator(
      int ordinal) override;
  absl::Status RegisterHostMemory(void* data, int64_t size) override;
  void UnregisterHostMemory(void* data) override;
  absl::Status DeviceHealth(int ordinal, bool probe) override;

  // Records `error` as device `ordinal`'s end if it is a sticky one (the
  // CUDA context is unusable after it); returns `error`'s status.
  absl::Status Note(int ordinal, cudaError_t error, const char* call);

 private:
  const std::string name_ = "cuda";
  const int device_count_;
  std::vector<DeviceDescription> descriptions_;
  // One per device: where host functions enqueued on its streams run (CUDA
  // forbids CUDA calls inside cudaLaunchHostFunc callbacks).
  std::vector<std::unique_ptr<WorkerThread>> host_function_threads_;
  // Per device: OK, or the sticky error that ended it.
  Mutex health_mu_;
  std::vector<absl::Status> health_ ABSL_GUARDED_BY(health_mu_);
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_CUDA_CUDA_PLATFORM_H_
