#include "daemon/fair_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pjrt::daemon {

FairQueue::FairQueue(int depth) : depth_(std::max(1, depth)) {}

FairQueue::Ticket& FairQueue::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    queue_ = std::exchange(other.queue_, nullptr);
  }
  return *this;
}

void FairQueue::Ticket::Release() {
  if (queue_ != nullptr) std::exchange(queue_, nullptr)->Leave();
}

absl::StatusOr<FairQueue::Ticket> FairQueue::Enter(
    const void* tenant, int weight, const Cancellation* cancellation) {
  MutexLock lock(&mu_);
  if (ring_.empty() && in_flight_ < depth_) {
    ++in_flight_;
    return Ticket(this);
  }
  Waiter waiter;
  TenantQueue& queue = queues_[tenant];
  if (queue.waiters.empty()) ring_.push_back(tenant);
  queue.weight = std::max(1, weight);
  queue.waiters.push_back(&waiter);
  ++waiting_;
  AdmitLocked();
  const auto admitted = [&waiter]() { return waiter.admitted; };
  while (!mu_.AwaitWithTimeout(admitted, Cancellation::kPollInterval)) {
    absl::Status cancelled = CheckCancelled(cancellation);
    if (cancelled.ok()) continue;
    // Leave the line (the waiter may have been admitted meanwhile: then
    // take the place and let the caller give it back).
    if (waiter.admitted) break;
    TenantQueue& mine = queues_[tenant];
    mine.waiters.erase(
        std::find(mine.waiters.begin(), mine.waiters.end(), &waiter));
    --waiting_;
    if (mine.waiters.empty()) {
      queues_.erase(tenant);
      ring_.erase(std::find(ring_.begin(), ring_.end(), tenant));
    }
    return absl::Status(
        cancelled.code(),
        absl::StrCat("gave up waiting for the device's queue (other "
                     "tenants' executions go first in turn): ",
                     cancelled.message()));
  }
  return Ticket(this);
}

void FairQueue::Leave() {
  MutexLock lock(&mu_);
  --in_flight_;
  AdmitLocked();
}

void FairQueue::AdmitLocked() {
  while (in_flight_ < depth_ && !ring_.empty()) {
    const void* tenant = ring_.front();
    TenantQueue& queue = queues_[tenant];
    if (queue.credit <= 0) queue.credit = queue.weight;
    Waiter* waiter = queue.waiters.front();
    queue.waiters.pop_front();
    waiter->admitted = true;
    --waiting_;
    ++in_flight_;
    --queue.credit;
    if (queue.waiters.empty()) {
      ring_.pop_front();
      queues_.erase(tenant);
    } else if (queue.credit == 0) {
      // The tenant's turn is over: to the back of the ring.
      ring_.pop_front();
      ring_.push_back(tenant);
    }
  }
}

int FairQueue::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

int FairQueue::waiting() const {
  MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace pjrt::daemon
