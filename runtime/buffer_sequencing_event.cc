#include "runtime/buffer_sequencing_event.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace pjrt::runtime {

std::shared_ptr<BufferSequencingEvent> BufferSequencingEvent::CreateDefined() {
  auto event = std::make_shared<BufferSequencingEvent>();
  event->SetDefinedNow();
  return event;
}

std::shared_ptr<BufferSequencingEvent> BufferSequencingEvent::CreateFailed(
    absl::Status status) {
  auto event = std::make_shared<BufferSequencingEvent>();
  event->SetError(std::move(status));
  return event;
}

void BufferSequencingEvent::SetSequencingEvent(
    std::shared_ptr<device::Event> event, device::Stream* stream) {
  {
    MutexLock lock(&mu_);
    PJRT_DCHECK(!sequenced_) << "sequenced twice, or after SetError";
    sequenced_ = true;
    event_ = event;
    stream_ = stream;
    sequence_number_ = event->sequence_number();
  }
  // The device event owns this callback (and through it a reference to us)
  // until it completes.
  event->AddCallback([self = shared_from_this()] { self->OnComplete(); });
}

void BufferSequencingEvent::SetDefinedNow() {
  {
    MutexLock lock(&mu_);
    PJRT_DCHECK(!sequenced_) << "defined after it was sequenced";
    sequenced_ = true;
  }
  OnComplete();
}

void BufferSequencingEvent::SetError(absl::Status status) {
  {
    MutexLock lock(&mu_);
    if (sequenced_) return;
    sequenced_ = true;
    error_before_enqueue_ = true;
    producer_status_ = std::move(status);
  }
  OnComplete();
}

void BufferSequencingEvent::SetProducerStatus(absl::Status status) {
  MutexLock lock(&mu_);
  producer_status_.Update(status);
}

void BufferSequencingEvent::AddDependency(
    std::shared_ptr<BufferSequencingEvent> dependency) {
  if (dependency == nullptr || dependency.get() == this) return;
  MutexLock lock(&mu_);
  PJRT_DCHECK(!complete_) << "a dependency added to a complete event";
  dependencies_.push_back(std::move(dependency));
}

bool BufferSequencingEvent::IsSequenced() const {
  MutexLock lock(&mu_);
  return sequenced_;
}

bool BufferSequencingEvent::IsComplete() const {
  MutexLock lock(&mu_);
  return complete_ || (event_ != nullptr && event_->IsComplete());
}

bool BufferSequencingEvent::DefinedOn(device::Stream* stream) const {
  MutexLock lock(&mu_);
  return sequenced_ && !error_before_enqueue_ && stream_ == stream;
}

uint64_t BufferSequencingEvent::sequence_number() const {
  MutexLock lock(&mu_);
  return sequence_number_;
}

absl::Status BufferSequencingEvent::WaitUntilSequenced(
    const Cancellation* cancellation) {
  MutexLock lock(&mu_);
  const auto sequenced = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return sequenced_;
  };
  if (cancellation == nullptr) {
    mu_.Await(sequenced);
  } else {
    while (!mu_.AwaitWithTimeout(sequenced, Cancellation::kPollInterval)) {
      absl::Status cancelled = cancellation->Check();
      if (!cancelled.ok()) {
        return absl::Status(
            cancelled.code(),
            absl::StrCat("gave up waiting for an input whose contents have "
                         "not arrived yet: ",
                         cancelled.message()));
      }
    }
  }
  if (error_before_enqueue_) return producer_status_;
  return absl::OkStatus();
}

void BufferSequencingEvent::MarkOnPrivateStream() {
  MutexLock lock(&mu_);
  PJRT_DCHECK(!sequenced_) << "marked private after it was sequenced";
  private_stream_ = true;
}

bool BufferSequencingEvent::PendingOnPrivateStream() const {
  std::shared_ptr<device::Event> event;
  {
    MutexLock lock(&mu_);
    if (!private_stream_ || complete_) return false;
    if (!sequenced_) return true;
    event = event_;
  }
  return event != nullptr && !event->IsComplete();
}

absl::Status BufferSequencingEvent::WaitUntilSafeForSharedStream(
    const Cancellation* cancellation) {
  PJRT_RETURN_IF_ERROR(WaitUntilSequenced(cancellation));
  std::shared_ptr<device::Event> event;
  {
    MutexLock lock(&mu_);
    if (!private_stream_) return absl::OkStatus();
    event = event_;
  }
  if (event == nullptr) return absl::OkStatus();
  while (!event->WaitFor(cancellation != nullptr ? Cancellation::kPollInterval
                                                 : absl::InfiniteDuration())) {
    absl::Status cancelled = CheckCancelled(cancellation);
    if (!cancelled.ok()) {
      return absl::Status(
          cancelled.code(),
          absl::StrCat("gave up waiting for an input whose producer waits "
                       "for collective peers: ",
                       cancelled.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status BufferSequencingEvent::WaitForEventOnStream(
    device::Stream* stream, const Cancellation* cancellation) {
  // A producer on a private stream is waited for on the host, so that
  // `stream` never waits on the device for it.
  PJRT_RETURN_IF_ERROR(WaitUntilSafeForSharedStream(cancellation));
  std::shared_ptr<device::Event> event;
  {
    MutexLock lock(&mu_);
    if (stream_ == stream) return absl::OkStatus();  // same queue: ordered
    event = event_;
  }
  if (event == nullptr || event->IsComplete()) return absl::OkStatus();
  return stream->WaitFor(std::move(event));
}

absl::Status BufferSequencingEvent::BlockHostUntilComplete(
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::shared_ptr<device::Event> event;
  {
    MutexLock lock(&mu_);
    bool sequenced = mu_.AwaitWithTimeout(
        [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return sequenced_; },
        timeout);
    if (!sequenced) return absl::DeadlineExceededError("not ready in time");
    event = event_;
  }
  if (event != nullptr) {
    absl::Duration left = timeout == absl::InfiniteDuration()
                              ? absl::InfiniteDuration()
                              : deadline - absl::Now();
    // A wait that times out just as the event completes counts as complete:
    // the caller asked whether the work finished, and it did.
    if (!event->WaitFor(left) && !event->IsComplete()) {
      return absl::DeadlineExceededError("not ready in time");
    }
  }
  return status();
}

absl::Status BufferSequencingEvent::status() const {
  PJRT_DCHECK(IsSequenced());
  // The first error in pre-order: our producer's, then each dependency's
  // (its producer's, then its dependencies'...). Iterative, visiting each
  // event once: chains of dependencies can be long.
  std::vector<std::shared_ptr<const BufferSequencingEvent>> pending;
  absl::flat_hash_set<const BufferSequencingEvent*> seen;
  std::shared_ptr<const BufferSequencingEvent> keep;  // keeps `next` alive
  const BufferSequencingEvent* next = this;
  while (true) {
    std::vector<std::shared_ptr<BufferSequencingEvent>> dependencies;
    {
      MutexLock lock(&next->mu_);
      if (next->final_status_.has_value()) {
        if (!next->final_status_->ok()) return *next->final_status_;
      } else if (!next->producer_status_.ok()) {
        return next->producer_status_;
      } else {
        dependencies = next->dependencies_;
      }
    }
    for (auto it = dependencies.rbegin(); it != dependencies.rend(); ++it) {
      if (seen.insert(it->get()).second) pending.push_back(*it);
    }
    if (pending.empty()) return absl::OkStatus();
    keep = std::move(pending.back());
    pending.pop_back();
    next = keep.get();
  }
}

void BufferSequencingEvent::OnComplete() {
  absl::Status final_status = status();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> callbacks;
  {
    MutexLock lock(&mu_);
    final_status_ = final_status;
    complete_ = true;
    dependencies_.clear();
    callbacks.swap(callbacks_);
  }
  for (auto& callback : callbacks) std::move(callback)(final_status);
}

void BufferSequencingEvent::AddCallback(
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    if (!complete_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    status = *final_status_;
  }
  std::move(callback)(std::move(status));
}

}  // namespace pjrt::runtime
