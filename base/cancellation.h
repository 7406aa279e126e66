// Cancellation: a flag that long-running work and long waits check, with the
// reason it was raised.
//
// The daemon gives every session one, whose parent is the daemon's own:
// closing the session cancels that session's executions and waits, shutting
// the daemon down cancels everyone's. A call that waits can add its own
// deadline and a probe (whether its client went away), checked whenever the
// waiter looks.
//
// Checking is cheap (an atomic load per level, plus the probe and the
// clock when a call has them), so loops may check once per block of work.
// A waiter that sleeps must wake up to look (see kPollInterval): raising
// the flag wakes nobody.
//
// Thread-safe.
#ifndef PJRT_BASE_CANCELLATION_H_
#define PJRT_BASE_CANCELLATION_H_

#include <atomic>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace pjrt {

class Cancellation {
 public:
  // How often a sleeping waiter should wake up to check.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

  // `parent`: this is cancelled whenever the parent is. `deadline`: this
  // counts as cancelled (DEADLINE_EXCEEDED) from then on. `probe`: called on
  // every check; a non-OK status cancels (for a gRPC call: CANCELLED once
  // its client went away). The probe must be cheap and thread-safe.
  explicit Cancellation(std::shared_ptr<const Cancellation> parent = nullptr,
                        absl::Time deadline = absl::InfiniteFuture(),
                        std::function<absl::Status()> probe = nullptr);
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Raises the flag with `why` (which must not be OK); the first reason
  // stays. Idempotent.
  void Cancel(absl::Status why);

  // OK while nothing is cancelled; otherwise the reason: this object's own,
  // an ancestor's, DEADLINE_EXCEEDED past the deadline, or the probe's.
  absl::Status Check() const;
  bool IsCancelled() const { return !Check().ok(); }

  // The earliest deadline of this object and its ancestors.
  absl::Time deadline() const;

 private:
  const std::shared_ptr<const Cancellation> parent_;
  const absl::Time deadline_;
  const std::function<absl::Status()> probe_;
  std::atomic<bool> cancelled_{false};
  mutable Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

// Check() of `cancellation`, or OK when it is null.
inline absl::Status CheckCancelled(const Cancellation* cancellation) {
  return cancellation == nullptr ? absl::OkStatus() : cancellation->Check();
}
inline bool IsCancelled(const Cancellation* cancellation) {
  return cancellation != nullptr && cancellation->IsCancelled();
}

}  // namespace pjrt

#endif  // PJRT_BASE_CANCELLATION_H_
