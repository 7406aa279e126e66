#include "device/host/host_stream.h"

#include <cstring>

#include "base/parallel_copy.h"
#include "device/host/host_event.h"

namespace pjrt::device {

HostStream::HostStream(std::string name) : thread_(std::move(name)) {}

absl::Status HostStream::Memcpy(void* dst, const void* src, int64_t size) {
  if (size > 0) {
    thread_.Schedule([dst, src, size] { ParallelMemcpy(dst, src, size); });
  }
  return absl::OkStatus();
}

absl::Status HostStream::EnqueueHostFunction(absl::AnyInvocable<void() &&> fn) {
  thread_.Schedule(std::move(fn));
  return absl::OkStatus();
}

absl::Status HostStream::RecordEvent(std::shared_ptr<Event> event) {
  // Events of the host platform are HostEvents (see HostPlatform).
  thread_.Schedule([event = std::move(event)] {
    static_cast<HostEvent*>(event.get())->Complete();
  });
  return absl::OkStatus();
}

absl::Status HostStream::WaitFor(std::shared_ptr<Event> event) {
  if (event->IsComplete()) return absl::OkStatus();
  thread_.Schedule([event = std::move(event)] { event->Wait(); });
  return absl::OkStatus();
}

std::unique_ptr<Stream::CallerRuns> HostStream::LetCallerRunWhenIdle() {
  struct Runs : CallerRuns {
    explicit Runs(WorkerThread::InlineCaller caller)
        : caller(std::move(caller)) {}
    WorkerThread::InlineCaller caller;
  };
  WorkerThread::InlineCaller caller = thread_.LetCallerRunWhenIdle();
  if (!caller.active()) return nullptr;
  return std::make_unique<Runs>(std::move(caller));
}

absl::Status HostStream::BlockHostUntilDone() {
  HostEvent done;
  thread_.Schedule([&done] { done.Complete(); });
  done.Wait();
  return absl::OkStatus();
}

}  // namespace pjrt::device
