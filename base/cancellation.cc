#include "base/cancellation.h"

#include <algorithm>
#include <utility>

namespace pjrt {

Cancellation::Cancellation(std::shared_ptr<const Cancellation> parent,
                           absl::Time deadline,
                           std::function<absl::Status()> probe)
    : parent_(std::move(parent)),
      deadline_(deadline),
      probe_(std::move(probe)) {}

void Cancellation::Cancel(absl::Status why) {
  if (why.ok()) why = absl::CancelledError("cancelled");
  MutexLock lock(&mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return;
  reason_ = std::move(why);
  cancelled_.store(true, std::memory_order_release);
}

absl::Status Cancellation::Check() const {
  for (const Cancellation* c = this; c != nullptr; c = c->parent_.get()) {
    if (c->cancelled_.load(std::memory_order_acquire)) {
      MutexLock lock(&c->mu_);
      return c->reason_;
    }
    if (c->deadline_ != absl::InfiniteFuture() && absl::Now() >= c->deadline_) {
      return absl::DeadlineExceededError("the call's deadline passed");
    }
    if (c->probe_ != nullptr) {
      absl::Status status = c->probe_();
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Time Cancellation::deadline() const {
  absl::Time deadline = absl::InfiniteFuture();
  for (const Cancellation* c = this; c != nullptr; c = c->parent_.get()) {
    deadline = std::min(deadline, c->deadline_);
  }
  return deadline;
}

}  // namespace pjrt
