// Helpers for the runtime's unit tests: clients per allocation model, gates,
// and small kernels.
#ifndef PJRT_TESTS_UNIT_RUNTIME_TEST_UTIL_H_
#define PJRT_TESTS_UNIT_RUNTIME_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "gtest/gtest.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/execute.h"

namespace pjrt::runtime::testing {

inline std::unique_ptr<Client> MakeClient(
    device::AllocationModel model = device::AllocationModel::kSynchronous,
    int devices = 2, int64_t limit = 64 << 20, int queue_ahead = 0) {
  ClientOptions options;
  options.platform = "host";
  options.host_device_count = devices;
  options.memory_limit_bytes = limit;
  options.allocation_model = model;
  options.queue_ahead = queue_ahead;
  auto client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

// Work on a stream blocks in Pass() until the test calls Open().
class Gate {
 public:
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
  }
  void Pass() {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_; });
  }

 private:
  Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

inline hlo::Shape F32(int64_t n) {
  return hlo::Shape(hlo::PrimitiveType::kF32, {n});
}

inline std::shared_ptr<Buffer> Put(Client& client, std::vector<float> values,
                                   int device = 0) {
  auto buffer = client.BufferFromHostBuffer(
      values.data(), F32(static_cast<int64_t>(values.size())),
      client.devices()[device]);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return *std::move(buffer);
}

inline std::vector<float> Read(Buffer& buffer) {
  std::vector<float> out(buffer.size_bytes() / sizeof(float));
  absl::Status status =
      buffer.CopyRawToHost(out.data(), 0, buffer.size_bytes());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

inline int64_t BytesInUse(Client& client, int device = 0) {
  return client.devices()[device]->allocator()->GetStats().bytes_in_use;
}

inline void SyncAll(Client& client) {
  for (Device* d : client.devices()) {
    ASSERT_TRUE(d->local_device_state()->SynchronizeAllActivity().ok());
  }
}

// result[0][i] = argument[0][i] + delta, over `n` floats; optionally waits at
// `gate` first.
inline Kernel AddKernel(int64_t n, float delta, Gate* gate = nullptr) {
  return [n, delta, gate](const KernelArgs& args) -> absl::Status {
    if (gate != nullptr) gate->Pass();
    const float* in = static_cast<const float*>(args.arguments[0]);
    float* out = static_cast<float*>(args.results[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] + delta;
    return absl::OkStatus();
  };
}

// Runs AddKernel on `input`'s device, returning the result.
inline absl::StatusOr<std::shared_ptr<Buffer>> Add(Client& client,
                                                   Buffer& input, float delta,
                                                   Gate* gate = nullptr,
                                                   bool donate = false) {
  int64_t n = input.size_bytes() / 4;
  ExecuteArgument arg{.buffer = &input, .donate = donate};
  ExecuteResult result{.shape = F32(n)};
  if (donate) result.alias_argument = 0;
  auto outputs = ExecuteOnDevice(&client, input.device(), {&arg, 1},
                                 {&result, 1}, AddKernel(n, delta, gate));
  if (!outputs.ok()) return outputs.status();
  return (*outputs)[0];
}

}  // namespace pjrt::runtime::testing

#endif  // PJRT_TESTS_UNIT_RUNTIME_TEST_UTIL_H_
