// HostEvent: an Event completed by host code: the host platform's streams,
// or any producer that finishes on a CPU thread.
//
// Thread-safe. Complete() takes effect once; later calls do nothing.
#ifndef PJRT_DEVICE_HOST_HOST_EVENT_H_
#define PJRT_DEVICE_HOST_HOST_EVENT_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "device/event.h"

namespace pjrt::device {

class HostEvent : public Event {
 public:
  HostEvent() = default;
  HostEvent(const HostEvent&) = delete;
  HostEvent& operator=(const HostEvent&) = delete;

  // Completes the event and runs its callbacks on the calling thread.
  // Returns false if it had already completed.
  bool Complete();

  bool IsComplete() const override;
  void Wait() override;
  bool WaitFor(absl::Duration timeout) override;
  void AddCallback(absl::AnyInvocable<void() &&> callback) override;
  void Reset() override;

 private:
  mutable Mutex mu_;
  bool complete_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::AnyInvocable<void() &&>> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_HOST_HOST_EVENT_H_
