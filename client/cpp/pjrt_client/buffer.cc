// Buffer: reading, describing, copying and deleting one array of a session.
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "client/cpp/pjrt_client/client.h"
#include "client/cpp/pjrt_client/internal.h"

namespace pjrt_client {

namespace v1 = ::pjrt::v1;

Buffer::~Buffer() { Drop(); }

void Buffer::Drop() {
  if (!valid() || !owned_) return;
  std::shared_ptr<SessionState> state = std::move(state_);
  BufferInfo info = std::exchange(info_, BufferInfo());
  state->DropBuffer(info.handle, info.size_bytes);
}

Buffer::Buffer(Buffer&& other) noexcept
    : state_(std::move(other.state_)),
      info_(std::exchange(other.info_, BufferInfo())),
      owned_(other.owned_),
      pending_sequence_(std::exchange(other.pending_sequence_, -1)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Drop();
    state_ = std::move(other.state_);
    info_ = std::exchange(other.info_, BufferInfo());
    owned_ = other.owned_;
    pending_sequence_ = std::exchange(other.pending_sequence_, -1);
  }
  return *this;
}

Buffer Buffer::Element(int i) const {
  if (!valid() || i < 0 || i >= tuple_size()) return Buffer();
  return Buffer(state_, info_.tuple_elements[i], /*owned=*/false);
}

absl::StatusOr<std::vector<uint8_t>> Buffer::Download(
    const Progress& progress) const {
  std::vector<uint8_t> out(static_cast<size_t>(size_bytes()));
  absl::Status status = DownloadInto(absl::MakeSpan(out), progress);
  if (!status.ok()) return status;
  return out;
}

absl::Status Buffer::DownloadInto(absl::Span<uint8_t> out,
                                  const Progress& progress) const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  if (static_cast<int64_t>(out.size()) != size_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("destination holds %d bytes; buffer %#x has %d",
                        out.size(), handle(), size_bytes()));
  }
  if (info_.data.has_value() && info_.data->size() == out.size()) {
    // Fetched with the run that made the buffer.
    if (!out.empty()) std::memcpy(out.data(), info_.data->data(), out.size());
    if (progress) progress(size_bytes(), size_bytes());
    return absl::OkStatus();
  }
  if (size_bytes() >= kSharedMemoryThreshold && !is_tuple()) {
    if (std::optional<Mapping> staging = state_->TakeStaging(size_bytes())) {
      absl::Status status = DownloadToHandle(staging->handle, 0);
      if (status.ok()) std::memcpy(out.data(), staging->data, out.size());
      state_->GiveBackStaging(*staging);
      if (status.ok() && progress) progress(size_bytes(), size_bytes());
      return status;
    }
    if (std::optional<ChannelSocket> channel = state_->TakeChannel()) {
      absl::Status status =
          DownloadOverChannel(*state_, *channel, handle(), out);
      if (status.ok() && progress) progress(size_bytes(), size_bytes());
      return status;
    }
  }
  v1::DownloadRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  if (size_bytes() <= kInlineBytes && !is_tuple()) {
    // Small: one unary call instead of a stream.
    v1::BufferInfo info;
    grpc::ClientContext context;
    grpc::Status status =
        state_->buffers_stub().ReadBuffer(&context, request, &info);
    if (!status.ok()) return ToAbslStatus(status);
    if (info.data().size() != out.size()) {
      return absl::DataLossError(
          absl::StrFormat("daemon sent %d bytes for buffer %#x of %d",
                          info.data().size(), handle(), size_bytes()));
    }
    if (!out.empty()) std::memcpy(out.data(), info.data().data(), out.size());
    if (progress) progress(size_bytes(), size_bytes());
    return absl::OkStatus();
  }
  grpc::ClientContext context;
  auto reader = state_->buffers_stub().Download(&context, request);
  v1::DownloadResponse response;
  size_t received = 0;
  bool overflow = false;
  while (reader->Read(&response)) {
    if (!response.has_chunk()) continue;
    const std::string& chunk = response.chunk();
    if (chunk.size() > out.size() - received) {
      overflow = true;
      context.TryCancel();
      break;
    }
    std::memcpy(out.data() + received, chunk.data(), chunk.size());
    received += chunk.size();
    if (progress) {
      progress(static_cast<int64_t>(received),
               static_cast<int64_t>(out.size()));
    }
  }
  grpc::Status status = reader->Finish();
  if (overflow) {
    return absl::DataLossError(
        absl::StrFormat("daemon sent more than the %d bytes of buffer %#x",
                        size_bytes(), handle()));
  }
  if (!status.ok()) return ToAbslStatus(status);
  if (received != out.size()) {
    return absl::DataLossError(
        absl::StrFormat("download of buffer %#x ended after %d of %d bytes",
                        handle(), received, out.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<BufferInfo> Buffer::Describe() const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  v1::DescribeBufferRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  v1::BufferInfo info;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->buffers_stub(),
                                 &v1::Buffers::Stub::DescribeBuffer, request,
                                 &info));
  return FromWire(std::move(info));
}

absl::Status Buffer::BlockUntilReady(absl::Duration timeout) const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  v1::BlockUntilReadyRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::BufferInfo info;
  grpc::ClientContext context;
  return ToAbslStatus(
      state_->buffers_stub().BlockUntilReady(&context, request, &info));
}

absl::StatusOr<Buffer> Buffer::CopyToDevice(int device_id) const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  v1::CopyToDeviceRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  request.set_device_id(device_id);
  v1::BufferInfo info;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->buffers_stub(),
                                 &v1::Buffers::Stub::CopyToDevice, request,
                                 &info));
  return Buffer(state_, FromWire(std::move(info)));
}

absl::StatusOr<RemoteCopy> Buffer::CopyToRemoteDevice(
    const std::string& descriptor) const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  v1::CopyToRemoteDeviceRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  request.set_transfer_descriptor(descriptor);
  v1::CopyToRemoteDeviceResponse response;
  // As long as the transfer takes: the receive's expiry bounds the wait for
  // the data, and the peers notice each other going away.
  grpc::ClientContext context;
  grpc::Status status =
      state_->buffers_stub().CopyToRemoteDevice(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status);
  return FromWire(response);
}

absl::Status Buffer::Delete() {
  if (!valid()) return absl::OkStatus();
  std::shared_ptr<SessionState> state = std::move(state_);
  uint64_t handle = std::exchange(info_, BufferInfo()).handle;
  // A closed session has already freed the buffer.
  if (state->IsClosed()) return absl::OkStatus();
  bool pipelined;
  {
    pjrt::MutexLock lock(&state->mu);
    pipelined = state->pipeline != nullptr;
  }
  if (pipelined) {
    // Pipelined runs may be in flight: leave it to the pipeline.
    state->DeleteWhenUnused(handle);
    return absl::OkStatus();
  }
  v1::DeleteBuffersRequest request;
  request.set_session_id(state->id);
  request.add_handles(handle);
  v1::DeleteBuffersResponse response;
  return UnaryCall(state->buffers_stub(), &v1::Buffers::Stub::DeleteBuffers,
                   request, &response);
}

uint64_t Buffer::Release() {
  uint64_t handle = std::exchange(info_, BufferInfo()).handle;
  state_.reset();
  return handle;
}

}  // namespace pjrt_client
