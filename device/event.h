// Event: a point in a stream's work. It completes once every piece of work
// enqueued on the stream before it was recorded has finished. The host can
// wait for it; another stream can be made to wait for it (Stream::WaitFor).
//
// Events carry no status: errors are bound to buffers by the runtime
// (runtime/buffer_sequencing_event.h), not to device events.
//
// Thread-safe.
#ifndef PJRT_DEVICE_EVENT_H_
#define PJRT_DEVICE_EVENT_H_

#include <atomic>
#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

namespace pjrt::device {

class Event {
 public:
  virtual ~Event() = default;

  virtual bool IsComplete() const = 0;

  // Blocks the calling thread until the event completes.
  virtual void Wait() = 0;

  // As Wait, for at most `timeout`. Returns IsComplete().
  virtual bool WaitFor(absl::Duration timeout) = 0;

  // Runs `callback` once the event completes: at once on the calling thread if
  // it already has, otherwise on a thread of the platform. Callbacks must be
  // short and must not block.
  virtual void AddCallback(absl::AnyInvocable<void() &&> callback) = 0;

  // Makes the event pending again so that a pool can hand it out anew.
  // REQUIRES: nobody waits on it and it is not recorded on a stream.
  virtual void Reset() = 0;

  // Where the event was recorded in its device's order of records (see
  // LocalDeviceState::AllocateAndRecordEvent): of two events recorded on one
  // stream, the later has the larger number. 0 if never numbered.
  uint64_t sequence_number() const {
    return sequence_number_.load(std::memory_order_acquire);
  }
  void set_sequence_number(uint64_t n) {
    sequence_number_.store(n, std::memory_order_release);
  }

 private:
  std::atomic<uint64_t> sequence_number_{0};
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_EVENT_H_
