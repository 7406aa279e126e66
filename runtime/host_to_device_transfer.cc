#include "runtime/host_to_device_transfer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runtime/client.h"

namespace pjrt::runtime {

using device::AllocationModel;

HostToDeviceTransfer::HostToDeviceTransfer(
    std::shared_ptr<Buffer> buffer,
    std::shared_ptr<TrackedDeviceBuffer> tracked,
    std::shared_ptr<BufferSequencingEvent> definition)
    : buffer_(std::move(buffer)),
      tracked_(std::move(tracked)),
      definition_(std::move(definition)) {
  device::LocalDeviceState* local = tracked_->device();
  direct_ = local->platform()->host_can_access_device_memory() &&
            local->allocation_model() == AllocationModel::kSynchronous;
}

HostToDeviceTransfer::~HostToDeviceTransfer() {
  Abort(absl::CancelledError(
      absl::StrFormat("transfer to %s was abandoned after %d of %d bytes",
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
  if (size == 0) return absl::OkStatus();
  char* dst = static_cast<char*>(tracked_->data()) + received_;
  if (direct_) {
    std::memcpy(dst, data, size);
    received_ += size;
    return absl::OkStatus();
  }
  // Through staging memory and the host-to-device stream.
  device::LocalDeviceState* local = tracked_->device();
  device::Stream* stream = local->host_to_device_stream();
  if (!stream_ordered_) {
    // Freshly allocated memory may still be read by the compute stream under
    // the compute-synchronized model.
    if (local->allocation_model() == AllocationModel::kComputeSynchronized) {
      PJRT_RETURN_IF_ERROR(local->ThenWaitFor(stream, local->compute_stream()));
    }
    stream_ordered_ = true;
  }
  PJRT_ASSIGN_OR_RETURN(
      DeviceMemory staging,
      DeviceMemory::Allocate(local->staging_allocator(), size));
  std::memcpy(staging.data(), data, size);
  PJRT_RETURN_IF_ERROR(stream->Memcpy(dst, staging.data(), size));
  PJRT_RETURN_IF_ERROR(local->ThenRelease(stream, std::move(staging)));
  received_ += size;
  return absl::OkStatus();
}

absl::Status HostToDeviceTransfer::Finish() {
  if (done_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "transfer to %s has already ended", buffer_->DebugString()));
  }
  if (received_ != bytes_expected()) {
    absl::Status status = absl::InvalidArgumentError(
        absl::StrFormat("too few bytes for %s: expected %d, received %d",
                        buffer_->DebugString(), bytes_expected(), received_));
    Abort(status);
    return status;
  }
  if (!stream_ordered_) {
    definition_->SetDefinedNow();
  } else {
    device::LocalDeviceState* local = tracked_->device();
    device::Stream* stream = local->host_to_device_stream();
    auto event = local->AllocateAndRecordEvent(stream);
    if (!event.ok()) {
      stream->BlockHostUntilDone().IgnoreError();
      Abort(event.status());
      return event.status();
    }
    definition_->SetSequencingEvent(*std::move(event), stream);
    // The stream writes memory the compute stream does not order: keep it
    // alive until the writes are done.
    PJRT_RETURN_IF_ERROR(local->ThenRelease(stream, tracked_));
  }
  done_ = true;
  tracked_.reset();
  return absl::OkStatus();
}

void HostToDeviceTransfer::Abort(absl::Status status) {
  End(std::move(status), /*delete_buffer=*/true);
}

void HostToDeviceTransfer::Fail(absl::Status status) {
  End(std::move(status), /*delete_buffer=*/false);
}

void HostToDeviceTransfer::End(absl::Status status, bool delete_buffer) {
  if (done_) return;
  done_ = true;
  if (stream_ordered_) {
    // Copies may be in flight into the memory: free it only after them.
    device::LocalDeviceState* local = tracked_->device();
    local->ThenRelease(local->host_to_device_stream(), tracked_).IgnoreError();
  }
  definition_->SetError(std::move(status));
  tracked_.reset();
  if (delete_buffer) buffer_->Delete();
}

}  // namespace pjrt::runtime
