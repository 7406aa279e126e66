// Stream: an ordered queue of work on one device. Work enqueued on a stream
// runs in order; work on different streams runs concurrently unless ordered
// by events (RecordEvent on one, WaitFor on the other).
//
// Enqueue calls return at once. They fail only when the work could not be
// enqueued (for example, a CUDA launch error); the stream is then in an
// unknown state and the runtime stops using memory it touched.
//
// Thread-safe: several threads may enqueue on one stream; the relative order
// of their work is the order in which the calls took the stream's lock.
#ifndef PJRT_DEVICE_STREAM_H_
#define PJRT_DEVICE_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "device/event.h"

namespace pjrt::device {

class Stream {
 public:
  virtual ~Stream() = default;

  // "host:0/compute", for logs.
  virtual const std::string& name() const = 0;

  // Copies `size` bytes from `src` to `dst`. Either may be device memory of
  // this platform or host memory (pinned host memory on CUDA for the copy to
  // be asynchronous).
  virtual absl::Status Memcpy(void* dst, const void* src, int64_t size) = 0;

  // Runs `fn` once all work enqueued before it has finished. On the host
  // platform `fn` runs on the stream's own thread and is itself stream work
  // (host kernels are such functions): later work waits for it. On CUDA it
  // runs on the device's callback thread and later GPU work does not wait.
  virtual absl::Status EnqueueHostFunction(
      absl::AnyInvocable<void() &&> fn) = 0;

  // Completes `event` when the stream reaches this point. The stream keeps
  // the event alive until then.
  virtual absl::Status RecordEvent(std::shared_ptr<Event> event) = 0;

  // Makes work enqueued later on this stream wait until `event` completes.
  // REQUIRES: `event` has been recorded (or will be recorded by work that
  // cannot itself wait on this stream).
  virtual absl::Status WaitFor(std::shared_ptr<Event> event) = 0;

  // Blocks the calling thread until all work enqueued so far has finished.
  virtual absl::Status BlockHostUntilDone() = 0;

  // The platform's own handle of the stream (a cudaStream_t on CUDA), for
  // compiled programs that enqueue work on it; nullptr on the host.
  virtual void* native_handle() const { return nullptr; }

  // Work enqueued and not yet finished, when the platform can tell; -1
  // otherwise.
  virtual int64_t pending() const { return -1; }

  // While the returned object lives, work that the calling thread enqueues
  // on this stream runs on the calling thread itself, at once, whenever the
  // stream is idle (nothing queued, nothing running): in order with all
  // other work, minus the two thread switches of handing it to the stream's
  // thread. For a caller that would wait for the work anyway (a call that
  // replies once its results are ready). One caller at a time; null where
  // that cannot be (the stream is not a host thread, or another caller has
  // it).
  class CallerRuns {
   public:
    virtual ~CallerRuns() = default;
  };
  virtual std::unique_ptr<CallerRuns> LetCallerRunWhenIdle() { return nullptr; }
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_STREAM_H_
