// HostEvent: an Event completed by host code (the host platform's streams, or
// any producer that finishes on a CPU thread).
//
// Thread-safe. Complete() may be called once; later calls are ignored, so a
// producer that races with a cancellation cannot overwrite the first outcome.
#ifndef PJRT_DEVICE_HOST_HOST_EVENT_H_
#define PJRT_DEVICE_HOST_HOST_EVENT_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "device/event.h"

namespace pjrt::device {

class HostEvent : public Event {
 public:
  HostEvent() = default;
  HostEvent(const HostEvent&) = delete;
  HostEvent& operator=(const HostEvent&) = delete;

  // An event that has already completed with `status`.
  static std::shared_ptr<HostEvent> CreateCompleted(absl::Status status);

  // Completes the event with `status` and runs the callbacks. Returns false
  // if the event had already completed (and changes nothing).
  bool Complete(absl::Status status);

  bool IsComplete() const override;
  absl::Status WaitFor(absl::Duration timeout) override;
  void AddCallback(absl::AnyInvocable<void(absl::Status) &&> callback) override;

 private:
  mutable absl::Mutex mu_;
  bool complete_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> callbacks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_HOST_HOST_EVENT_H_
