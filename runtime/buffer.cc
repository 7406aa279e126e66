#include "runtime/buffer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/parallel_copy.h"
#include "base/status_macros.h"
#include "runtime/client.h"

namespace pjrt::runtime {

using device::AllocationModel;

// --- ScopedHold ------------------------------------------------------------

Buffer::ScopedHold::ScopedHold(ScopedHold&& other) noexcept
    : parent_(other.parent_),
      type_(other.type_),
      status_(std::move(other.status_)),
      buffer_(std::move(other.buffer_)),
      released_(other.released_) {
  other.released_ = true;
}

Buffer::ScopedHold::~ScopedHold() {
  if (!released_ && status_.ok() && buffer_ != nullptr) {
    parent_->DropHold(type_, buffer_.get());
  }
}

void Buffer::ScopedHold::ConvertUsageHold(
    device::Stream* stream, std::shared_ptr<BufferSequencingEvent> event,
    bool reference_held) {
  parent_->ConvertUsageHold(buffer_.get(), stream, std::move(event),
                            reference_held);
  released_ = true;
}

void Buffer::ScopedHold::ConfirmDonation() {
  parent_->ConfirmDonation(buffer_.get());
  released_ = true;
}

// --- Buffer ------------------------------------------------------------------

Buffer::Buffer(Client* client, Device* device, hlo::Shape shape,
               std::shared_ptr<TrackedDeviceBuffer> tracked)
    : client_(client),
      device_(device),
      shape_(std::move(shape)),
      tracked_(std::move(tracked)) {}

std::shared_ptr<Buffer> Buffer::MakeTuple(
    Client* client, Device* device,
    std::vector<std::shared_ptr<Buffer>> elements) {
  std::vector<hlo::Shape> shapes;
  for (const auto& e : elements) shapes.push_back(e->shape());
  auto tuple = std::make_shared<Buffer>(client, device,
                                        hlo::Shape::Tuple(shapes), nullptr);
  tuple->elements_ = std::move(elements);
  return tuple;
}

Buffer::~Buffer() {
  if (!is_tuple()) Delete();
}

std::string Buffer::DebugString() const {
  return absl::StrFormat("%s on %s", shape_.ToString(), device_->DebugString());
}

absl::Status Buffer::InvalidError() const {
  if (invalidation_ == Invalidation::kDonated) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "buffer %s was donated to an execution and can no longer be used",
        DebugString()));
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("buffer %s was deleted", DebugString()));
}

Buffer::ScopedHold Buffer::GetBufferWithHold(HoldType type,
                                             const Cancellation* cancellation) {
  ScopedHold hold(this, type);
  if (is_tuple()) {
    hold.status_ = absl::InvalidArgumentError(absl::StrFormat(
        "buffer %s is a tuple; use its elements", DebugString()));
    return hold;
  }
  // Waits may be long (another call that holds the buffer waits for data
  // from outside): in slices, giving up once `cancellation` is cancelled.
  const auto cancelled = [&](absl::string_view waiting_for) {
    absl::Status status = CheckCancelled(cancellation);
    if (status.ok()) return false;
    hold.status_ = absl::Status(
        status.code(),
        absl::StrFormat("gave up waiting for %s of buffer %s: %s", waiting_for,
                        DebugString(), status.message()));
    return true;
  };
  const int t = static_cast<int>(type);
  if (type == HoldType::kDonation) {
    // Only one thread at a time may try to donate.
    while (!donation_semaphore_.AcquireFor(1, Cancellation::kPollInterval)) {
      if (cancelled("another donation")) return hold;
    }
    MutexLock lock(&mu_);
    if (tracked_ == nullptr) {
      hold.status_ = InvalidError();
    } else if (holds_[static_cast<int>(HoldType::kExternalReference)] > 0) {
      hold.status_ = absl::FailedPreconditionError(absl::StrFormat(
          "buffer %s cannot be donated while an external reference to its "
          "memory exists",
          DebugString()));
    } else {
      ++holds_[t];
      // No usage hold can be added while the donation hold exists, so this
      // wait ends once the current ones are converted or dropped.
      const auto drained = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return holds_[static_cast<int>(HoldType::kUsage)] == 0;
      };
      while (!mu_.AwaitWithTimeout(drained, Cancellation::kPollInterval)) {
        if (cancelled("the readers")) {
          --holds_[t];
          donation_semaphore_.Release(1);
          return hold;
        }
      }
      hold.buffer_ = tracked_;
      return hold;
    }
    donation_semaphore_.Release(1);
    return hold;
  }
  MutexLock lock(&mu_);
  const auto no_donation = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return holds_[static_cast<int>(HoldType::kDonation)] == 0;
  };
  while (!mu_.AwaitWithTimeout(no_donation, Cancellation::kPollInterval)) {
    if (cancelled("a donation")) return hold;
  }
  if (tracked_ == nullptr) {
    hold.status_ = InvalidError();
    return hold;
  }
  ++holds_[t];
  hold.buffer_ = tracked_;
  return hold;
}

absl::StatusOr<std::unique_ptr<Buffer::ExternalReference>>
Buffer::AcquireExternalReference() {
  ScopedHold hold = GetBufferWithHold(HoldType::kExternalReference);
  if (!hold.ok()) return hold.status();
  return std::make_unique<ExternalReference>(std::move(hold));
}

void Buffer::DropHold(HoldType type, TrackedDeviceBuffer* buffer) {
  {
    MutexLock lock(&mu_);
    --holds_[static_cast<int>(type)];
  }
  if (type == HoldType::kDonation) donation_semaphore_.Release(1);
}

void Buffer::ConvertUsageHold(TrackedDeviceBuffer* buffer,
                              device::Stream* stream,
                              std::shared_ptr<BufferSequencingEvent> event,
                              bool reference_held) {
  MutexLock lock(&mu_);
  buffer->AddUsageEvent(stream, std::move(event), reference_held);
  --holds_[static_cast<int>(HoldType::kUsage)];
}

void Buffer::ConfirmDonation(TrackedDeviceBuffer* buffer) {
  {
    MutexLock lock(&mu_);
    holds_[static_cast<int>(HoldType::kDonation)] = 0;
    buffer->LockUseAndTransferUsageEvents();
    tracked_.reset();
    invalidation_ = Invalidation::kDonated;
  }
  donation_semaphore_.Release(1);
}

int Buffer::holds(HoldType type) {
  MutexLock lock(&mu_);
  return holds_[static_cast<int>(type)];
}

absl::StatusOr<std::shared_ptr<TrackedDeviceBuffer>> Buffer::Release(
    bool wait_for_operations_to_complete) {
  if (is_tuple()) {
    {
      MutexLock lock(&mu_);
      if (tuple_deleted_) return std::shared_ptr<TrackedDeviceBuffer>();
      tuple_deleted_ = true;
    }
    for (const auto& e : elements_) {
      e->Release(wait_for_operations_to_complete).IgnoreError();
    }
    return std::shared_ptr<TrackedDeviceBuffer>();
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  std::vector<TrackedDeviceBuffer::UsageEvent> usage_events;
  std::shared_ptr<ResultWatch> watch;
  {
    MutexLock lock(&mu_);
    // A donation in progress decides first; if it succeeds, the buffer is
    // already gone.
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return holds_[static_cast<int>(HoldType::kDonation)] == 0;
    });
    if (tracked_ == nullptr) return std::shared_ptr<TrackedDeviceBuffer>();
    tracked.swap(tracked_);
    invalidation_ = Invalidation::kDeleted;
    // No new hold can be added now; let the current usage holds settle so
    // that the usage events are final.
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return holds_[static_cast<int>(HoldType::kUsage)] == 0;
    });
    usage_events = tracked->LockUseAndTransferUsageEvents();
    watch.swap(watch_);
  }
  if (watch != nullptr) {
    if (!usage_events.empty()) watch->read = true;
    if (--watch->live == 0 && !watch->read) {
      watch->run->Cancel(absl::CancelledError(
          "every result of the run was deleted before it finished"));
    }
  }
  device::LocalDeviceState* local = tracked->device();
  if (wait_for_operations_to_complete) {
    absl::Status status;
    for (const auto& e : tracked->definition_events()) {
      e->BlockHostUntilComplete().IgnoreError();
    }
    for (const auto& u : usage_events) {
      u.event->BlockHostUntilComplete().IgnoreError();
    }
    return tracked;
  }
  if (local->allocation_model() == AllocationModel::kComputeSynchronized) {
    // Frees are ordered by the compute stream. A use on another stream that
    // holds no reference must keep the memory alive until it finishes: a
    // borrowed stream waits for those uses and holds the reference.
    std::unique_ptr<device::Stream> block_stream;
    for (const auto& u : usage_events) {
      if (u.reference_held || u.event->IsComplete() ||
          u.event->DefinedOn(local->compute_stream())) {
        continue;
      }
      if (block_stream == nullptr) {
        auto borrowed = local->BorrowStreamFromPool();
        if (!borrowed.ok()) {
          // Without a stream, wait on the host: slow but safe.
          u.event->BlockHostUntilComplete().IgnoreError();
          continue;
        }
        block_stream = *std::move(borrowed);
      }
      u.event->WaitForEventOnStream(block_stream.get()).IgnoreError();
    }
    if (block_stream != nullptr) {
      device::Stream* raw = block_stream.release();
      absl::Status status =
          local->ThenExecuteOnCallbackThread(raw, [tracked, raw, local] {
            local->ReturnStreamToPool(std::unique_ptr<device::Stream>(raw));
          });
      if (!status.ok()) {
        spdlog::error("cannot order a free after its uses: {}", status);
        raw->BlockHostUntilDone().IgnoreError();
        local->ReturnStreamToPool(std::unique_ptr<device::Stream>(raw));
      }
    }
  }
  return tracked;
}

void Buffer::SetResultWatch(std::shared_ptr<ResultWatch> watch) {
  MutexLock lock(&mu_);
  watch_ = std::move(watch);
}

void Buffer::Delete() {
  Release(/*wait_for_operations_to_complete=*/false).IgnoreError();
}

bool Buffer::IsDeleted() {
  MutexLock lock(&mu_);
  if (is_tuple()) return tuple_deleted_;
  return tracked_ == nullptr;
}

bool Buffer::IsReady() {
  if (is_tuple()) {
    if (IsDeleted()) return false;
    for (const auto& e : elements_) {
      if (!e->IsReady()) return false;
    }
    return true;
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  {
    MutexLock lock(&mu_);
    tracked = tracked_;
  }
  if (tracked == nullptr) return false;
  for (const auto& e : tracked->definition_events()) {
    if (!e->IsComplete()) return false;
  }
  return true;
}

bool Buffer::UseWouldBlock() {
  if (is_tuple()) {
    for (const auto& e : elements_) {
      if (e->UseWouldBlock()) return true;
    }
    return false;
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  {
    MutexLock lock(&mu_);
    if (holds_[static_cast<int>(HoldType::kDonation)] > 0) return true;
    tracked = tracked_;
  }
  if (tracked == nullptr) return false;
  for (const auto& e : tracked->definition_events()) {
    if (!e->IsSequenced() || e->PendingOnPrivateStream()) return true;
  }
  return false;
}

absl::Status Buffer::AwaitUsable(const Cancellation* cancellation) {
  if (is_tuple()) {
    for (const auto& e : elements_) {
      PJRT_RETURN_IF_ERROR(e->AwaitUsable(cancellation));
    }
    return absl::OkStatus();
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  {
    MutexLock lock(&mu_);
    tracked = tracked_;
  }
  if (tracked == nullptr) return absl::OkStatus();
  for (const auto& e : tracked->definition_events()) {
    PJRT_RETURN_IF_ERROR(e->WaitUntilSafeForSharedStream(cancellation));
  }
  return absl::OkStatus();
}

absl::Status Buffer::BlockHostUntilReady(absl::Duration timeout) {
  if (is_tuple()) {
    if (IsDeleted()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("buffer %s was deleted", DebugString()));
    }
    absl::Status status;
    for (const auto& e : elements_)
      status.Update(e->BlockHostUntilReady(timeout));
    return status;
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  {
    MutexLock lock(&mu_);
    if (tracked_ == nullptr) return InvalidError();
    tracked = tracked_;
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status status;
  for (const auto& e : tracked->definition_events()) {
    absl::Duration left = timeout == absl::InfiniteDuration()
                              ? absl::InfiniteDuration()
                              : deadline - absl::Now();
    absl::Status s = e->BlockHostUntilComplete(left);
    if (absl::IsDeadlineExceeded(s)) {
      if (!e->IsComplete()) {
        return absl::DeadlineExceededError(
            absl::StrFormat("buffer %s was not ready within %s", DebugString(),
                            absl::FormatDuration(timeout)));
      }
      // It completed as the wait timed out: its own status is the answer.
      s = e->status();
    }
    status.Update(s);
  }
  return status;
}

void Buffer::OnReady(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (is_tuple()) {
    // Rare: waits for each element in turn on a helper path.
    std::move(callback)(BlockHostUntilReady());
    return;
  }
  std::shared_ptr<TrackedDeviceBuffer> tracked;
  absl::Status invalid;
  {
    MutexLock lock(&mu_);
    if (tracked_ == nullptr) invalid = InvalidError();
    tracked = tracked_;
  }
  if (tracked == nullptr) {
    std::move(callback)(invalid);
    return;
  }
  struct Pending {
    Mutex mu;
    int remaining ABSL_GUARDED_BY(mu);
    absl::Status status ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void(absl::Status) &&> callback;
  };
  auto pending = std::make_shared<Pending>();
  auto events = tracked->definition_events();
  {
    MutexLock lock(&pending->mu);
    pending->remaining = static_cast<int>(events.size());
  }
  pending->callback = std::move(callback);
  if (events.empty()) {
    std::move(pending->callback)(absl::OkStatus());
    return;
  }
  for (const auto& e : events) {
    e->AddCallback([pending](absl::Status s) {
      absl::Status final_status;
      {
        MutexLock lock(&pending->mu);
        pending->status.Update(s);
        if (--pending->remaining > 0) return;
        final_status = pending->status;
      }
      std::move(pending->callback)(final_status);
    });
  }
}

void RecordUsage(Buffer::ScopedHold hold,
                 device::LocalDeviceState* stream_device,
                 device::Stream* stream,
                 std::shared_ptr<BufferSequencingEvent> event,
                 bool prefer_to_retain_reference) {
  device::LocalDeviceState* buffer_device = hold.buffer()->device();
  const AllocationModel model = buffer_device->allocation_model();
  const bool retain = stream_device != buffer_device ||
                      model == AllocationModel::kSynchronous ||
                      (model == AllocationModel::kComputeSynchronized &&
                       prefer_to_retain_reference);
  if (retain) {
    absl::Status status = stream_device->ThenRelease(stream, hold.buffer());
    if (!status.ok()) {
      // The stream cannot run our callback; finish its work before anyone
      // may free the memory.
      spdlog::error("cannot retain a buffer until its use ends: {}", status);
      stream->BlockHostUntilDone().IgnoreError();
    }
  }
  hold.ConvertUsageHold(stream, std::move(event), retain);
}

// --- transfers out of the buffer -----------------------------------------

void Buffer::CopyRawToHostAsync(
    void* dst, int64_t offset, int64_t size,
    absl::AnyInvocable<void(absl::Status) &&> on_done) {
  if (is_tuple()) {
    std::move(on_done)(absl::InvalidArgumentError(absl::StrFormat(
        "buffer %s is a tuple; read its elements", DebugString())));
    return;
  }
  if (offset < 0 || size < 0 || offset > size_bytes() ||
      size > size_bytes() - offset) {
    std::move(on_done)(absl::InvalidArgumentError(
        absl::StrFormat("byte range [%d, %d) is outside buffer %s of %d bytes",
                        offset, offset + size, DebugString(), size_bytes())));
    return;
  }
  ScopedHold hold = GetBufferWithHold(HoldType::kUsage);
  if (!hold.ok()) {
    std::move(on_done)(hold.status());
    return;
  }
  device::LocalDeviceState* local = device_->local_device_state();
  if (local->platform()->host_can_access_device_memory()) {
    // Contents already defined need no stream: copy them here, under the
    // hold (three thread switches fewer, most of a small read's time).
    bool complete = true;
    absl::Status defined;
    for (const auto& definition : hold.buffer()->definition_events()) {
      if (!definition->IsComplete()) {
        complete = false;
        break;
      }
      if (defined.ok()) defined = definition->status();
    }
    if (complete) {
      if (defined.ok()) {
        ParallelMemcpy(dst,
                       static_cast<const char*>(hold.buffer()->data()) + offset,
                       size);
      }
      std::move(on_done)(std::move(defined));
      return;
    }
  }
  device::Stream* stream = local->GetDeviceToHostStream();
  auto usage = std::make_shared<BufferSequencingEvent>();
  for (const auto& definition : hold.buffer()->definition_events()) {
    absl::Status status = definition->WaitForEventOnStream(stream);
    if (!status.ok()) {
      std::move(on_done)(status);
      return;
    }
    usage->AddDependency(definition);
  }
  absl::Status status = stream->Memcpy(
      dst, static_cast<const char*>(hold.buffer()->data()) + offset, size);
  absl::StatusOr<std::shared_ptr<device::Event>> event =
      status.ok() ? local->AllocateAndRecordEvent(stream)
                  : absl::StatusOr<std::shared_ptr<device::Event>>(status);
  if (!event.ok()) {
    // Something may have been enqueued that reads the memory: wait for it
    // before the hold goes.
    stream->BlockHostUntilDone().IgnoreError();
    std::move(on_done)(event.status());
    return;
  }
  usage->SetSequencingEvent(*std::move(event), stream);
  absl::Status callback_status = local->ThenExecuteOnCallbackThread(
      stream, [usage, on_done = std::move(on_done)]() mutable {
        std::move(on_done)(usage->status());
      });
  if (!callback_status.ok()) {
    spdlog::error("cannot report a device-to-host copy: {}", callback_status);
  }
  RecordUsage(std::move(hold), local, stream, std::move(usage),
              /*prefer_to_retain_reference=*/true);
}

absl::Status Buffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  struct Outcome {
    Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto outcome = std::make_shared<Outcome>();
  CopyRawToHostAsync(dst, offset, size, [outcome](absl::Status s) {
    MutexLock lock(&outcome->mu);
    outcome->status = std::move(s);
    outcome->done = true;
  });
  MutexLock lock(&outcome->mu);
  outcome->mu.Await(
      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return outcome->done; });
  return outcome->status;
}

absl::StatusOr<std::shared_ptr<Buffer>> Buffer::CopyToDevice(
    Device* dst_device, const Cancellation* cancellation) {
  // Wait holding nothing (see AwaitUsable); a failed producer is reported
  // below, with the hold.
  absl::Status usable = AwaitUsable(cancellation);
  if (!usable.ok() && IsCancelled(cancellation)) return usable;
  ScopedHold hold = GetBufferWithHold(HoldType::kUsage, cancellation);
  if (!hold.ok()) return hold.status();
  device::LocalDeviceState* src = device_->local_device_state();
  device::LocalDeviceState* dst = dst_device->local_device_state();
  device::Stream* stream = src->GetDeviceToDeviceStream();
  PJRT_ASSIGN_OR_RETURN(DeviceMemory memory,
                        DeviceMemory::Allocate(dst->allocator(), size_bytes()));
  // Fresh memory under the compute-synchronized model may still be read by
  // the destination's compute stream (its previous owner's last use).
  if (dst->allocation_model() == AllocationModel::kComputeSynchronized) {
    PJRT_RETURN_IF_ERROR(dst->ThenWaitFor(stream, dst->compute_stream()));
  }
  auto definition = std::make_shared<BufferSequencingEvent>();
  for (const auto& source_definition : hold.buffer()->definition_events()) {
    PJRT_RETURN_IF_ERROR(
        source_definition->WaitForEventOnStream(stream, cancellation));
    definition->AddDependency(source_definition);
  }
  absl::Status status =
      stream->Memcpy(memory.data(), hold.buffer()->data(), size_bytes());
  absl::StatusOr<std::shared_ptr<device::Event>> event =
      status.ok() ? src->AllocateAndRecordEvent(stream)
                  : absl::StatusOr<std::shared_ptr<device::Event>>(status);
  if (!event.ok()) {
    stream->BlockHostUntilDone().IgnoreError();
    return event.status();
  }
  definition->SetSequencingEvent(*std::move(event), stream);
  auto tracked = std::make_shared<TrackedDeviceBuffer>(
      dst, std::move(memory),
      std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
  // The copy writes the destination from a stream that its device's
  // allocation model does not watch: keep the destination alive until done.
  PJRT_RETURN_IF_ERROR(src->ThenRelease(stream, tracked));
  RecordUsage(std::move(hold), src, stream, definition,
              /*prefer_to_retain_reference=*/true);
  return std::make_shared<Buffer>(client_, dst_device, shape_,
                                  std::move(tracked));
}

}  // namespace pjrt::runtime
