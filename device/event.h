// Event: a point in a device's work that the host or another stream can wait
// for. It completes once, either successfully or with an error that the
// producer bound to it (e.g. a failed transfer); every waiter sees that
// status.
//
// Thread-safe.
#ifndef PJRT_DEVICE_EVENT_H_
#define PJRT_DEVICE_EVENT_H_

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pjrt::device {

class Event {
 public:
  virtual ~Event() = default;

  // True once the event has completed (successfully or not).
  virtual bool IsComplete() const = 0;

  // Blocks the calling thread until the event completes or `timeout` passes.
  // Returns the event's status, or DEADLINE_EXCEEDED on timeout.
  virtual absl::Status WaitFor(absl::Duration timeout) = 0;

  // Blocks until the event completes; returns its status.
  absl::Status Wait() { return WaitFor(absl::InfiniteDuration()); }

  // Runs `callback` with the event's status once it completes: at once on the
  // calling thread if it already has, otherwise on the completing thread.
  // Callbacks must be short and must not block.
  virtual void AddCallback(absl::AnyInvocable<void(absl::Status) &&> callback) = 0;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_EVENT_H_
