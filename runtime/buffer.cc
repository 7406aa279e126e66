#include "runtime/buffer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runtime/client.h"

namespace pjrt::runtime {

Buffer::Buffer(Client* client, hlo::Shape shape, Device* device,
               std::shared_ptr<DeviceMemory> memory,
               std::shared_ptr<device::HostEvent> definition_event)
    : client_(client),
      shape_(std::move(shape)),
      device_(device),
      definition_event_(std::move(definition_event)),
      memory_(std::move(memory)) {}

bool Buffer::IsReady() const { return definition_event_->IsComplete(); }

absl::Status Buffer::ReadyStatus() const { return definition_event_->Wait(); }

absl::Status Buffer::BlockHostUntilReady(absl::Duration timeout) {
  if (IsDeleted()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("buffer %s was deleted", DebugString()));
  }
  return definition_event_->WaitFor(timeout);
}

absl::StatusOr<std::shared_ptr<DeviceMemory>> Buffer::AcquireMemory() const {
  absl::MutexLock lock(&mu_);
  if (memory_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("buffer %s was deleted", DebugString()));
  }
  return memory_;
}

absl::Status Buffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  if (offset < 0 || size < 0 || offset > size_bytes() ||
      size > size_bytes() - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "byte range [%d, %d) is outside buffer %s of %d bytes", offset,
        offset + size, DebugString(), size_bytes()));
  }
  // Holding the memory keeps it alive even if the buffer is deleted while
  // the copy runs.
  PJRT_ASSIGN_OR_RETURN(auto memory, AcquireMemory());
  PJRT_RETURN_IF_ERROR(definition_event_->Wait());
  if (size > 0) {
    std::memcpy(dst, static_cast<const char*>(memory->data()) + offset, size);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Buffer>> Buffer::CopyToDevice(
    Device* dst_device) {
  PJRT_ASSIGN_OR_RETURN(auto memory, AcquireMemory());
  PJRT_RETURN_IF_ERROR(definition_event_->Wait());
  return client_->BufferFromHostBuffer(memory->data(), shape_, dst_device);
}

void Buffer::Delete() {
  std::shared_ptr<DeviceMemory> memory;
  {
    absl::MutexLock lock(&mu_);
    memory.swap(memory_);
  }
  // `memory` is released here, outside the lock; the allocation is freed
  // now unless an operation still holds it.
}

bool Buffer::IsDeleted() const {
  absl::MutexLock lock(&mu_);
  return memory_ == nullptr;
}

std::string Buffer::DebugString() const {
  return absl::StrFormat("%s on %s", shape_.ToString(), device_->DebugString());
}

HostToDeviceTransfer::HostToDeviceTransfer(
    std::shared_ptr<Buffer> buffer, std::shared_ptr<DeviceMemory> memory,
    std::shared_ptr<device::HostEvent> definition_event)
    : buffer_(std::move(buffer)),
      memory_(std::move(memory)),
      definition_event_(std::move(definition_event)) {}

HostToDeviceTransfer::~HostToDeviceTransfer() {
  Abort(absl::CancelledError(absl::StrFormat(
      "transfer to %s was abandoned after %d of %d bytes",
      buffer_->DebugString(), received_, bytes_expected())));
}

absl::Status HostToDeviceTransfer::Append(const void* data, int64_t size) {
  if (done_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "transfer to %s has already ended", buffer_->DebugString()));
  }
  if (size < 0 || size > bytes_expected() - received_) {
    absl::Status status = absl::InvalidArgumentError(absl::StrFormat(
        "too many bytes for %s: expected %d in all, received %d", 
        buffer_->DebugString(), bytes_expected(), received_ + size));
    Abort(status);
    return status;
  }
  if (size > 0) {
    std::memcpy(static_cast<char*>(memory_->data()) + received_, data, size);
  }
  received_ += size;
  return absl::OkStatus();
}

absl::Status HostToDeviceTransfer::Finish() {
  if (done_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "transfer to %s has already ended", buffer_->DebugString()));
  }
  if (received_ != bytes_expected()) {
    absl::Status status = absl::InvalidArgumentError(absl::StrFormat(
        "too few bytes for %s: expected %d, received %d",
        buffer_->DebugString(), bytes_expected(), received_));
    Abort(status);
    return status;
  }
  done_ = true;
  memory_.reset();
  definition_event_->Complete(absl::OkStatus());
  return absl::OkStatus();
}

void HostToDeviceTransfer::Abort(absl::Status status) {
  if (done_) return;
  done_ = true;
  memory_.reset();
  buffer_->Delete();
  definition_event_->Complete(std::move(status));
}

}  // namespace pjrt::runtime
