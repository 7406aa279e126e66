#include "device/host/host_event.h"

#include <utility>

namespace pjrt::device {

bool HostEvent::Complete() {
  std::vector<absl::AnyInvocable<void() &&>> callbacks;
  {
    MutexLock lock(&mu_);
    if (complete_) return false;
    complete_ = true;
    callbacks.swap(callbacks_);
  }
  for (auto& callback : callbacks) std::move(callback)();
  return true;
}

bool HostEvent::IsComplete() const {
  MutexLock lock(&mu_);
  return complete_;
}

void HostEvent::Wait() {
  MutexLock lock(&mu_);
  mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return complete_; });
}

bool HostEvent::WaitFor(absl::Duration timeout) {
  MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return complete_; }, timeout);
}

void HostEvent::AddCallback(absl::AnyInvocable<void() &&> callback) {
  {
    MutexLock lock(&mu_);
    if (!complete_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  std::move(callback)();
}

void HostEvent::Reset() {
  MutexLock lock(&mu_);
  complete_ = false;
  callbacks_.clear();
}

}  // namespace pjrt::device
