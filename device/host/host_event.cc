#include "device/host/host_event.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pjrt::device {

std::shared_ptr<HostEvent> HostEvent::CreateCompleted(absl::Status status) {
  auto event = std::make_shared<HostEvent>();
  event->Complete(std::move(status));
  return event;
}

bool HostEvent::Complete(absl::Status status) {
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (complete_) return false;
    complete_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  for (auto& callback : callbacks) std::move(callback)(status);
  return true;
}

bool HostEvent::IsComplete() const {
  absl::MutexLock lock(&mu_);
  return complete_;
}

absl::Status HostEvent::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return complete_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("event not complete after ", absl::FormatDuration(timeout)));
  }
  return status_;
}

void HostEvent::AddCallback(absl::AnyInvocable<void(absl::Status) &&> callback) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!complete_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    status = status_;
  }
  std::move(callback)(std::move(status));
}

}  // namespace pjrt::device
