// BufferSequencingEvent: when the contents of a buffer become valid, and
// whether they are valid at all.
//
// A producer (a transfer, an execution) creates the event before it enqueues
// its work, so that the event can be handed to the buffer at once. When the
// work is enqueued, the producer calls SetSequencingEvent with the device
// event recorded after it; the contents are defined once that completes. A
// producer that fails before enqueuing calls SetError instead.
//
// Errors travel with data: an event depends on the events of the buffers its
// producer read (AddDependency), and its final status is the first error
// among its producer's own status and theirs. A consumer of a failed buffer
// therefore fails with that buffer's error, however far downstream. Once an
// event completes, its status is fixed and its dependencies are dropped, so
// long chains of executions do not keep old events alive.
//
// Thread-safe.
#ifndef PJRT_RUNTIME_BUFFER_SEQUENCING_EVENT_H_
#define PJRT_RUNTIME_BUFFER_SEQUENCING_EVENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/mutex.h"
#include "device/event.h"
#include "device/stream.h"

namespace pjrt::runtime {

class BufferSequencingEvent
    : public std::enable_shared_from_this<BufferSequencingEvent> {
 public:
  BufferSequencingEvent() = default;
  BufferSequencingEvent(const BufferSequencingEvent&) = delete;
  BufferSequencingEvent& operator=(const BufferSequencingEvent&) = delete;

  // An event that is complete and OK now (contents written synchronously).
  static std::shared_ptr<BufferSequencingEvent> CreateDefined();
  // An event already failed with `status`.
  static std::shared_ptr<BufferSequencingEvent> CreateFailed(
      absl::Status status);

  // The producer's work is enqueued on `stream`, and `event` completes with
  // it. REQUIRES: called at most once, and not after SetError.
  void SetSequencingEvent(std::shared_ptr<device::Event> event,
                          device::Stream* stream);

  // Marks the event defined and OK without a device event (the producer
  // wrote synchronously). REQUIRES: not sequenced yet.
  void SetDefinedNow();

  // The producer failed before its work was enqueued: the event completes
  // now with `status`. Ignored if already sequenced.
  void SetError(absl::Status status);

  // The producer's work failed while running (host kernels report this from
  // the stream, before the device event completes). The first error wins.
  void SetProducerStatus(absl::Status status);

  // This event's contents derive from `dependency`'s; its errors become ours.
  // REQUIRES: called before the event completes.
  void AddDependency(std::shared_ptr<BufferSequencingEvent> dependency);

  // True once SetSequencingEvent, SetDefinedNow or SetError was called.
  bool IsSequenced() const;
  // True once the producer's work has finished (or failed before enqueuing).
  bool IsComplete() const;
  // True if sequenced on `stream` (and not by SetError).
  bool DefinedOn(device::Stream* stream) const;
  // The device event's sequence number (device::Event::sequence_number);
  // 0 if not sequenced on a stream. Of two events sequenced on one stream,
  // the later one's work includes the earlier one's.
  uint64_t sequence_number() const;

  // Blocks until the producer has enqueued (or failed), then makes `stream`
  // wait for its work. Returns the error bound before enqueuing, if any; the
  // error of a producer that fails later is seen through status(). Gives up
  // with the cancellation's reason if `cancellation` (may be null) is
  // cancelled while waiting: a producer may wait for data from outside (a
  // cross-host receive) for a long time.
  absl::Status WaitForEventOnStream(device::Stream* stream,
                                    const Cancellation* cancellation = nullptr);

  // The first half of WaitForEventOnStream: blocks until the producer has
  // enqueued (or failed), giving up as it does. Returns the error bound
  // before enqueuing, if any.
  absl::Status WaitUntilSequenced(const Cancellation* cancellation = nullptr);

  // The producer runs on a stream of its own and may wait there for a long
  // time (for collective peers). Other streams must not wait for it on the
  // device, which would hold up everything queued behind them:
  // WaitForEventOnStream then waits on the host until it completes.
  // REQUIRES: called before SetSequencingEvent.
  void MarkOnPrivateStream();
  // True if sequenced on a private stream and not complete yet.
  bool PendingOnPrivateStream() const;
  // WaitUntilSequenced, then, for a producer on a private stream, waits
  // until it completes (giving up as WaitUntilSequenced does): afterwards a
  // shared stream may wait for this event without blocking.
  absl::Status WaitUntilSafeForSharedStream(
      const Cancellation* cancellation = nullptr);

  // Blocks until complete, for at most `timeout`; returns status(), or
  // DEADLINE_EXCEEDED (naming nothing: the caller knows what it waited for).
  absl::Status BlockHostUntilComplete(
      absl::Duration timeout = absl::InfiniteDuration());

  // The first error of the producer and of the events it depends on: final
  // once IsComplete(), and already the producer's own once sequenced (a
  // producer that failed before enqueueing). REQUIRES: IsSequenced().
  absl::Status status() const;

  // Runs `callback(status())` once complete (at once if already).
  void AddCallback(absl::AnyInvocable<void(absl::Status) &&> callback);

 private:
  // Runs when the device event completes (or at SetError).
  void OnComplete();

  mutable Mutex mu_;
  bool sequenced_ ABSL_GUARDED_BY(mu_) = false;
  bool error_before_enqueue_ ABSL_GUARDED_BY(mu_) = false;
  bool private_stream_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<device::Event> event_ ABSL_GUARDED_BY(mu_);
  device::Stream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t sequence_number_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status producer_status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<BufferSequencingEvent>> dependencies_
      ABSL_GUARDED_BY(mu_);
  // Set once complete and the status is final.
  std::optional<absl::Status> final_status_ ABSL_GUARDED_BY(mu_);
  bool complete_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> callbacks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_BUFFER_SEQUENCING_EVENT_H_
