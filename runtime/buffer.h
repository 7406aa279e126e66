// Buffer: an array on one device: its shape, its device, and the tracked
// device buffer (memory plus definition and usage events) behind it.
//
// Holds guard the tracked buffer while an operation uses it:
//  - a usage hold is taken while an operation that reads the buffer is
//    being enqueued; it becomes a usage event once enqueued, or is dropped
//    on error;
//  - an external-reference hold lends the raw memory to an outside party;
//  - a donation hold gives the memory to an execution. At most one at a time
//    (a per-buffer semaphore); it waits until every usage hold is gone, no
//    usage hold may be taken meanwhile, and it is refused while an external
//    reference exists. Once confirmed, the buffer is invalid.
// Using a deleted or donated buffer is FAILED_PRECONDITION naming the buffer
// and what happened to it.
//
// Delete() releases the memory without waiting for readers: the device's
// allocation model orders the free after every use (see TrackedDeviceBuffer
// and device/local_device_state.h).
//
// Thread-safe.
#ifndef PJRT_RUNTIME_BUFFER_H_
#define PJRT_RUNTIME_BUFFER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/check.h"
#include "base/mutex.h"
#include "device/semaphore.h"
#include "hlo/shape.h"
#include "runtime/tracked_device_buffer.h"

namespace pjrt::runtime {

class Client;
class Device;

class Buffer {
 public:
  enum class HoldType { kUsage = 0, kExternalReference = 1, kDonation = 2 };

  // A hold on the tracked buffer; see the file comment. Move-only; dropped on
  // destruction unless converted or confirmed.
  class ScopedHold {
   public:
    ScopedHold(ScopedHold&& other) noexcept;
    ScopedHold& operator=(ScopedHold&&) = delete;
    ScopedHold(const ScopedHold&) = delete;
    ScopedHold& operator=(const ScopedHold&) = delete;
    ~ScopedHold();

    bool ok() const { return status_.ok(); }
    // Why the hold could not be taken (FAILED_PRECONDITION naming the buffer).
    const absl::Status& status() const { return status_; }
    HoldType type() const { return type_; }
    // REQUIRES: ok().
    const std::shared_ptr<TrackedDeviceBuffer>& buffer() const {
      PJRT_DCHECK(ok()) << status_;
      return buffer_;
    }

    // Usage holds: the operation was enqueued on `stream` and is finished
    // when `event` completes. If `reference_held`, the operation keeps the
    // tracked buffer alive itself until then.
    void ConvertUsageHold(device::Stream* stream,
                          std::shared_ptr<BufferSequencingEvent> event,
                          bool reference_held);

    // Donation holds: the execution was enqueued; the buffer becomes invalid
    // and its memory belongs to the caller, who took it with TakeMemory on
    // buffer() (or lets it be freed with the tracked buffer).
    void ConfirmDonation();

   private:
    friend class Buffer;
    ScopedHold(Buffer* parent, HoldType type) : parent_(parent), type_(type) {}

    Buffer* parent_;
    HoldType type_;
    absl::Status status_;
    std::shared_ptr<TrackedDeviceBuffer> buffer_;
    bool released_ = false;
  };

  // The raw memory, lent out under an external-reference hold; the hold is
  // dropped when this object is destroyed.
  class ExternalReference {
   public:
    explicit ExternalReference(ScopedHold hold) : hold_(std::move(hold)) {}
    void* data() const { return hold_.buffer()->data(); }
    int64_t size() const { return hold_.buffer()->size(); }

   private:
    ScopedHold hold_;
  };

  Buffer(Client* client, Device* device, hlo::Shape shape,
         std::shared_ptr<TrackedDeviceBuffer> tracked);

  // A tuple buffer: it has no memory of its own; its elements are buffers
  // (all on `device`). Deleting it deletes its elements.
  static std::shared_ptr<Buffer> MakeTuple(
      Client* client, Device* device,
      std::vector<std::shared_ptr<Buffer>> elements);
  bool is_tuple() const { return shape_.IsTuple(); }
  // REQUIRES: is_tuple().
  const std::vector<std::shared_ptr<Buffer>>& tuple_elements() const {
    PJRT_DCHECK(is_tuple()) << "buffer of shape " << shape_.ToString();
    return elements_;
  }
  // Deletes (see Delete).
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const hlo::Shape& shape() const { return shape_; }
  Device* device() const { return device_; }
  Client* client() const { return client_; }
  int64_t size_bytes() const { return shape_.ByteSize(); }

  // "f32[2,3] on host:0".
  std::string DebugString() const;

  // Takes a hold of `type`; check ok() on the result. Donation holds may
  // block (one donation at a time; usage holds must drain), and any hold
  // waits while a donation is being decided; every such wait gives up with
  // the cancellation's reason once `cancellation` (may be null) is
  // cancelled.
  ScopedHold GetBufferWithHold(HoldType type,
                               const Cancellation* cancellation = nullptr);

  absl::StatusOr<std::unique_ptr<ExternalReference>> AcquireExternalReference();

  // True once every definition event has completed (successfully or not).
  // False for a deleted or donated buffer.
  bool IsReady();
  // Waits until the contents are defined and returns their status: OK, or
  // the error bound to the buffer. DEADLINE_EXCEEDED after `timeout`;
  // FAILED_PRECONDITION if deleted or donated.
  absl::Status BlockHostUntilReady(
      absl::Duration timeout = absl::InfiniteDuration());
  // Runs `callback` with the ready status once the contents are defined, or
  // at once with FAILED_PRECONDITION if deleted.
  void OnReady(absl::AnyInvocable<void(absl::Status) &&> callback);

  // Copies bytes [offset, offset + size) of the contents to `dst` once they
  // are defined, on a device-to-host stream (or on this thread before
  // returning, when they are defined already and the host can read device
  // memory), and calls `on_done` with the outcome (the bound error if the
  // producer failed). `dst` must stay valid
  // until then. Errors detectable now (range, deleted) go to `on_done` at
  // once.
  void CopyRawToHostAsync(void* dst, int64_t offset, int64_t size,
                          absl::AnyInvocable<void(absl::Status) &&> on_done);
  // The same, waiting for the outcome.
  absl::Status CopyRawToHost(void* dst, int64_t offset, int64_t size);

  // Copies the buffer to `dst_device` (possibly its own device) on the
  // source device's device-to-device stream. Returns once enqueued: at once,
  // unless the contents come from a producer that has not enqueued yet (a
  // cross-host receive); that wait gives up once `cancellation` (may be
  // null) is cancelled.
  absl::StatusOr<std::shared_ptr<Buffer>> CopyToDevice(
      Device* dst_device, const Cancellation* cancellation = nullptr);

  // Waits until using the buffer would not block a stream: every producer
  // of its contents has enqueued, and finished if it runs on a stream of
  // its own (see BufferSequencingEvent::MarkOnPrivateStream). Takes no
  // hold. Gives up with the reason once `cancellation` (may be null) is
  // cancelled; returns the producer's error if it failed before enqueuing.
  // OK at once for a deleted buffer (its users find out).
  absl::Status AwaitUsable(const Cancellation* cancellation = nullptr);

  // True if using the buffer now would block: a definition event is not
  // sequenced yet (its producer waits for data from outside) or runs on a
  // private stream and has not finished, or a donation of it is being
  // decided. For tuples, true if any element's would.
  bool UseWouldBlock();

  // Releases the buffer's memory (ordered after its uses). Idempotent.
  void Delete();

  // The results of one run share a watch: once every one of them is
  // deleted before anything was enqueued to read it, nobody can see what
  // the run computes, and the watch cancels it (a loop that never ends
  // stops when its results go).
  struct ResultWatch {
    std::shared_ptr<Cancellation> run;
    std::atomic<int> live{0};
    std::atomic<bool> read{false};
  };
  void SetResultWatch(std::shared_ptr<ResultWatch> watch);
  bool IsDeleted();

  // The tracked buffer, waiting for outstanding usage holds and (when
  // `wait_for_operations_to_complete`) for every use to finish; the buffer
  // becomes invalid. nullptr if it already was.
  absl::StatusOr<std::shared_ptr<TrackedDeviceBuffer>> Release(
      bool wait_for_operations_to_complete);

  // Number of holds of `type` currently taken (for tests and statistics).
  int holds(HoldType type);

 private:
  enum class Invalidation { kNone, kDeleted, kDonated };

  absl::Status InvalidError() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropHold(HoldType type, TrackedDeviceBuffer* buffer);
  void ConvertUsageHold(TrackedDeviceBuffer* buffer, device::Stream* stream,
                        std::shared_ptr<BufferSequencingEvent> event,
                        bool reference_held);
  void ConfirmDonation(TrackedDeviceBuffer* buffer);

  Client* const client_;
  Device* const device_;
  const hlo::Shape shape_;

  // One donation at a time; taken before mu_.
  device::Semaphore donation_semaphore_{1};
  Mutex mu_;
  std::shared_ptr<TrackedDeviceBuffer> tracked_ ABSL_GUARDED_BY(mu_);
  Invalidation invalidation_ ABSL_GUARDED_BY(mu_) = Invalidation::kNone;
  std::array<int, 3> holds_ ABSL_GUARDED_BY(mu_) = {0, 0, 0};
  // Tuple buffers only.
  std::vector<std::shared_ptr<Buffer>> elements_;
  bool tuple_deleted_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<ResultWatch> watch_ ABSL_GUARDED_BY(mu_);
};

// Bookkeeping after a use of `hold`'s buffer was enqueued on `stream` (of
// `stream_device`) and finishes with `event`: converts the usage hold, and
// keeps a reference to the memory until the use completes when the
// allocation model needs one (always under the synchronous model or across
// devices; under compute-synchronized when `prefer_to_retain_reference`).
void RecordUsage(Buffer::ScopedHold hold,
                 device::LocalDeviceState* stream_device,
                 device::Stream* stream,
                 std::shared_ptr<BufferSequencingEvent> event,
                 bool prefer_to_retain_reference);

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_BUFFER_H_
