// HostStream: a Stream of the host platform: a WorkerThread running copies
// (memcpy), host functions (kernels), event records and event waits in
// order.
#ifndef PJRT_DEVICE_HOST_HOST_STREAM_H_
#define PJRT_DEVICE_HOST_HOST_STREAM_H_

#include <string>

#include "device/stream.h"
#include "device/worker_thread.h"

namespace pjrt::device {

class HostStream : public Stream {
 public:
  explicit HostStream(std::string name);

  const std::string& name() const override { return thread_.name(); }
  absl::Status Memcpy(void* dst, const void* src, int64_t size) override;
  absl::Status EnqueueHostFunction(absl::AnyInvocable<void() &&> fn) override;
  absl::Status RecordEvent(std::shared_ptr<Event> event) override;
  absl::Status WaitFor(std::shared_ptr<Event> event) override;
  absl::Status BlockHostUntilDone() override;
  int64_t pending() const override { return thread_.pending(); }
  std::unique_ptr<CallerRuns> LetCallerRunWhenIdle() override;

 private:
  WorkerThread thread_;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_HOST_HOST_STREAM_H_
