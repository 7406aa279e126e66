#include "device/cuda/cuda_platform.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/check.h"
#include "base/log.h"
#include "device/host/host_event.h"

namespace pjrt::device {

absl::Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s (%s)", call,
                                             cudaGetErrorString(error),
                                             cudaGetErrorName(error)));
}

namespace {

// Errors after which a CUDA context cannot be used again.
bool IsSticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorAssert:
    case cudaErrorDevicesUnavailable:
      return true;
    default:
      return false;
  }
}

// A cudaEvent_t plus its host-side completion, which a host function
// enqueued right after the record sets; that is what waiters and callbacks
// use.
class CudaEvent : public Event {
 public:
  explicit CudaEvent(int ordinal) {
    cudaSetDevice(ordinal);
    cudaError_t error =
        cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
    if (error != cudaSuccess) {
      spdlog::error("{}", CudaStatus(error, "cudaEventCreateWithFlags"));
      event_ = nullptr;
    }
  }
  ~CudaEvent() override {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  cudaEvent_t cuda_event() const { return event_; }
  HostEvent& host_completion() { return host_; }

  bool IsComplete() const override { return host_.IsComplete(); }
  void Wait() override { host_.Wait(); }
  bool WaitFor(absl::Duration timeout) override {
    return host_.WaitFor(timeout);
  }
  void AddCallback(absl::AnyInvocable<void() &&> callback) override {
    host_.AddCallback(std::move(callback));
  }
  void Reset() override { host_.Reset(); }

 private:
  cudaEvent_t event_ = nullptr;
  HostEvent host_;
};

struct HostFunctionPayload {
  WorkerThread* thread;
  absl::AnyInvocable<void() &&> fn;
};

void CUDART_CB RunHostFunction(void* data) {
  auto* payload = static_cast<HostFunctionPayload*>(data);
  payload->thread->Schedule(std::move(payload->fn));
  delete payload;
}

class CudaStream : public Stream {
 public:
  CudaStream(CudaPlatform* platform, int ordinal, std::string name,
             cudaStream_t stream, WorkerThread* host_function_thread)
      : platform_(platform),
        ordinal_(ordinal),
        name_(std::move(name)),
        stream_(stream),
        host_function_thread_(host_function_thread) {}
  ~CudaStream() override {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  const std::string& name() const override { return name_; }
  void* native_handle() const override { return stream_; }

  absl::Status Memcpy(void* dst, const void* src, int64_t size) override {
    if (size == 0) return absl::OkStatus();
    cudaSetDevice(ordinal_);
    return platform_->Note(ordinal_,
                           cudaMemcpyAsync(dst, src, static_cast<size_t>(size),
                                           cudaMemcpyDefault, stream_),
                           "cudaMemcpyAsync");
  }

  absl::Status EnqueueHostFunction(absl::AnyInvocable<void() &&> fn) override {
    cudaSetDevice(ordinal_);
    auto* payload =
        new HostFunctionPayload{host_function_thread_, std::move(fn)};
    cudaError_t error = cudaLaunchHostFunc(stream_, RunHostFunction, payload);
    if (error != cudaSuccess) {
      delete payload;
      return platform_->Note(ordinal_, error, "cudaLaunchHostFunc");
    }
    return absl::OkStatus();
  }

  absl::Status RecordEvent(std::shared_ptr<Event> event) override {
    auto* cuda_event = static_cast<CudaEvent*>(event.get());
    cudaSetDevice(ordinal_);
    absl::Status status = platform_->Note(
        ordinal_, cudaEventRecord(cuda_event->cuda_event(), stream_),
        "cudaEventRecord");
    if (!status.ok()) return status;
    return EnqueueHostFunction([event = std::move(event)] {
      static_cast<CudaEvent*>(event.get())->host_completion().Complete();
    });
  }

  absl::Status WaitFor(std::shared_ptr<Event> event) override {
    if (event->IsComplete()) return absl::OkStatus();
    auto* cuda_event = static_cast<CudaEvent*>(event.get());
    cudaSetDevice(ordinal_);
    return platform_->Note(
        ordinal_, cudaStreamWaitEvent(stream_, cuda_event->cuda_event(), 0),
        "cudaStreamWaitEvent");
  }

  absl::Status BlockHostUntilDone() override {
    cudaSetDevice(ordinal_);
    absl::Status status = platform_->Note(
        ordinal_, cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    // Host functions of that work run on another thread; wait for them too.
    HostEvent done;
    absl::Status enqueued = EnqueueHostFunction([&done] { done.Complete(); });
    if (enqueued.ok()) done.Wait();
    status.Update(enqueued);
    return status;
  }

 private:
  CudaPlatform* const platform_;
  const int ordinal_;
  const std::string name_;
  cudaStream_t stream_;
  WorkerThread* const host_function_thread_;
};

class CudaDeviceMemoryAllocator : public SubAllocator {
 public:
  explicit CudaDeviceMemoryAllocator(int ordinal) : ordinal_(ordinal) {}
  absl::StatusOr<void*> Alloc(int64_t bytes) override {
    cudaSetDevice(ordinal_);
    void* ptr = nullptr;
    cudaError_t error = cudaMalloc(&ptr, static_cast<size_t>(bytes));
    if (error != cudaSuccess) {
      cudaGetLastError();  // clear it
      return absl::ResourceExhaustedError(
          absl::StrFormat("cudaMalloc of %d bytes on GPU %d failed: %s", bytes,
                          ordinal_, cudaGetErrorString(error)));
    }
    return ptr;
  }
  void Free(void* ptr, int64_t) override {
    cudaSetDevice(ordinal_);
    cudaFree(ptr);
  }

 private:
  const int ordinal_;
};

class CudaPinnedMemoryAllocator : public SubAllocator {
 public:
  absl::StatusOr<void*> Alloc(int64_t bytes) override {
    void* ptr = nullptr;
    cudaError_t error =
        cudaHostAlloc(&ptr, static_cast<size_t>(bytes), cudaHostAllocPortable);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrFormat("cudaHostAlloc of %d bytes failed: %s", bytes,
                          cudaGetErrorString(error)));
    }
    return ptr;
  }
  void Free(void* ptr, int64_t) override { cudaFreeHost(ptr); }
};

}  // namespace

CudaPlatform::CudaPlatform(int device_count)
    : device_count_(device_count), health_(device_count) {
  PJRT_DCHECK(device_count >= 1) << "device_count " << device_count;
  for (int i = 0; i < device_count; ++i) {
    cudaDeviceProp props{};
    cudaGetDeviceProperties(&props, i);
    descriptions_.push_back(DeviceDescription{
        .kind = props.name,
        .memory_bytes = static_cast<int64_t>(props.totalGlobalMem),
        .compute_capability_major = props.major,
        .compute_capability_minor = props.minor});
    host_function_threads_.push_back(
        std::make_unique<WorkerThread>(absl::StrFormat("cuda%d-hostfn", i)));
  }
}

CudaPlatform::~CudaPlatform() = default;

DeviceDescription CudaPlatform::Describe(int ordinal) const {
  return descriptions_[ordinal];
}

absl::StatusOr<std::unique_ptr<Stream>> CudaPlatform::CreateStream(
    int ordinal, const std::string& name) {
  cudaSetDevice(ordinal);
  cudaStream_t stream;
  cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error != cudaSuccess)
    return CudaStatus(error, "cudaStreamCreateWithFlags");
  return std::make_unique<CudaStream>(this, ordinal, name, stream,
                                      host_function_threads_[ordinal].get());
}

std::unique_ptr<Event> CudaPlatform::CreateEvent(int ordinal) {
  return std::make_unique<CudaEvent>(ordinal);
}

std::unique_ptr<SubAllocator> CudaPlatform::CreateDeviceMemoryAllocator(
    int ordinal) {
  return std::make_unique<CudaDeviceMemoryAllocator>(ordinal);
}

std::unique_ptr<SubAllocator> CudaPlatform::CreateStagingMemoryAllocator(int) {
  return std::make_unique<CudaPinnedMemoryAllocator>();
}

absl::Status CudaPlatform::RegisterHostMemory(void* data, int64_t size) {
  // Portable: every GPU of the process may DMA from it.
  return CudaStatus(cudaHostRegister(data, static_cast<size_t>(size),
                                     cudaHostRegisterPortable),
                    "cudaHostRegister");
}

void CudaPlatform::UnregisterHostMemory(void* data) {
  cudaError_t error = cudaHostUnregister(data);
  if (error != cudaSuccess) {
    cudaGetLastError();
    spdlog::warn("{}", CudaStatus(error, "cudaHostUnregister"));
  }
}

absl::Status CudaPlatform::Note(int ordinal, cudaError_t error,
                                const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  absl::Status status = CudaStatus(error, call);
  if (IsSticky(error)) {
    MutexLock lock(&health_mu_);
    if (health_[ordinal].ok()) {
      health_[ordinal] = absl::FailedPreconditionError(absl::StrFormat(
          "GPU %d failed for good (%s); restart pjrtd to use it again", ordinal,
          status.message()));
      spdlog::error("{}", health_[ordinal].message());
    }
  } else {
    cudaGetLastError();  // a non-sticky error must not fail the next call
  }
  return status;
}

absl::Status CudaPlatform::DeviceHealth(int ordinal, bool probe) {
  {
    MutexLock lock(&health_mu_);
    if (!health_[ordinal].ok()) return health_[ordinal];
  }
  if (!probe) return absl::OkStatus();
  // A sticky error fails every call of the context; this one is cheap.
  cudaSetDevice(ordinal);
  size_t free = 0, total = 0;
  Note(ordinal, cudaMemGetInfo(&free, &total), "cudaMemGetInfo").IgnoreError();
  MutexLock lock(&health_mu_);
  return health_[ordinal];
}

bool CudaPlatformBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Platform>> CreateCudaPlatform() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (error != cudaSuccess) cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrFormat(
        "no CUDA GPU is visible (cudaGetDeviceCount: %s); use --platform host",
        error == cudaSuccess ? "0 devices" : cudaGetErrorString(error)));
  }
  return std::make_unique<CudaPlatform>(count);
}

}  // namespace pjrt::device
