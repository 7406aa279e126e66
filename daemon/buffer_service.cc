#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "daemon/grpc_status.h"
#include "daemon/proto_convert.h"
#include "daemon/services.h"
#include "runtime/host_to_device_transfer.h"
#include "base/log.h"

namespace pjrt::daemon {
namespace {

// How often a handler blocked on a buffer checks that its call is still
// wanted, so that a cancelled call or a shutting-down daemon frees the
// thread.
constexpr absl::Duration kCancellationPollInterval = absl::Milliseconds(100);

// Waits for `buffer` to be ready within `timeout`, giving up early when
// `context` is cancelled.
absl::Status AwaitReady(grpc::ServerContext* context, runtime::Buffer& buffer,
                        absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::Duration slice =
        std::min(kCancellationPollInterval, deadline - absl::Now());
    absl::Status status = buffer.BlockHostUntilReady(slice);
    if (!absl::IsDeadlineExceeded(status) || buffer.IsReady()) return status;
    if (context->IsCancelled()) {
      return absl::CancelledError("the call was cancelled");
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "buffer %s was not ready within %s", buffer.DebugString(),
          absl::FormatDuration(timeout)));
    }
  }
}

struct SessionBuffer {
  std::shared_ptr<Session> session;
  std::shared_ptr<runtime::Buffer> buffer;
};

absl::StatusOr<SessionBuffer> Lookup(SessionTable* sessions,
                                     uint64_t session_id, uint64_t handle) {
  PJRT_ASSIGN_OR_RETURN(auto session, sessions->Lookup(session_id));
  PJRT_ASSIGN_OR_RETURN(auto buffer, session->LookupBuffer(handle));
  return SessionBuffer{std::move(session), std::move(buffer)};
}

}  // namespace

grpc::Status BufferService::Upload(grpc::ServerContext* context,
                                   grpc::ServerReader<v1::UploadRequest>* reader,
                                   v1::BufferInfo* response) {
  v1::UploadRequest request;
  if (!reader->Read(&request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "upload stream ended before its header");
  }
  if (!request.has_header()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "the first message of an upload must be its header (session, shape, "
        "device); got a data chunk");
  }
  const v1::UploadHeader& header = request.header();
  auto session = sessions_->Lookup(header.session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  auto shape = ShapeFromProto(header.shape());
  if (!shape.ok()) return ToGrpcStatus(shape.status());
  auto device = client_->LookupDevice(header.device_id());
  if (!device.ok()) return ToGrpcStatus(device.status());
  auto transfer = client_->CreateHostToDeviceTransfer(*shape, *device);
  if (!transfer.ok()) return ToGrpcStatus(transfer.status());

  // `transfer` aborts the buffer (and frees its memory) on every early
  // return below.
  int64_t chunks = 0;
  while (reader->Read(&request)) {
    if (!request.has_chunk() && request.has_header()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "an upload carries one header; got a second one "
                          "after " + std::to_string(chunks) + " chunks");
    }
    const std::string& chunk = request.chunk();
    if (static_cast<int64_t>(chunk.size()) > kMaxChunkBytes) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrFormat("upload chunk %d is %d bytes; chunks may be at most "
                          "%d bytes (1 MiB)",
                          chunks, chunk.size(), kMaxChunkBytes));
    }
    absl::Status status =
        (*transfer)->Append(chunk.data(), static_cast<int64_t>(chunk.size()));
    if (!status.ok()) return ToGrpcStatus(status);
    ++chunks;
  }
  if (context->IsCancelled()) {
    spdlog::info("upload of {} cut off after {} of {} bytes; discarded",
                 shape->ToString(), (*transfer)->bytes_received(),
                 (*transfer)->bytes_expected());
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "upload cancelled; the partial buffer was discarded");
  }
  absl::Status status = (*transfer)->Finish();
  if (!status.ok()) return ToGrpcStatus(status);
  std::shared_ptr<runtime::Buffer> buffer = (*transfer)->buffer();
  auto handle = (*session)->AddBuffer(buffer);
  if (!handle.ok()) {
    buffer->Delete();
    return ToGrpcStatus(handle.status());
  }
  BufferInfoToProto(**session, *handle, *buffer, response);
  return grpc::Status::OK;
}

grpc::Status BufferService::Download(
    grpc::ServerContext* context, const v1::DownloadRequest* request,
    grpc::ServerWriter<v1::DownloadResponse>* writer) {
  auto found = Lookup(sessions_, request->session_id(), request->handle());
  if (!found.ok()) return ToGrpcStatus(found.status());
  runtime::Buffer& buffer = *found->buffer;
  if (buffer.is_tuple()) {
    std::vector<std::string> elements;
    for (const auto& element : buffer.tuple_elements()) {
      elements.push_back(
          absl::StrFormat("%#x", found->session->HandleOf(element.get())));
    }
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrFormat("buffer %#x is a tuple %s; download its elements "
                        "(handles %s) instead",
                        request->handle(), buffer.shape().ToString(),
                        absl::StrJoin(elements, ", ")));
  }
  absl::Status ready =
      AwaitReady(context, buffer, absl::InfiniteDuration());
  if (!ready.ok()) return ToGrpcStatus(ready);

  v1::DownloadResponse response;
  BufferInfoToProto(*found->session, request->handle(), buffer,
                    response.mutable_header());
  if (!writer->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  const int64_t total = buffer.size_bytes();
  for (int64_t offset = 0; offset < total; offset += kMaxChunkBytes) {
    int64_t size = std::min(kMaxChunkBytes, total - offset);
    std::string* chunk = response.mutable_chunk();
    chunk->resize(static_cast<size_t>(size));
    absl::Status status = buffer.CopyRawToHost(chunk->data(), offset, size);
    if (!status.ok()) return ToGrpcStatus(status);
    if (!writer->Write(response)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
  }
  return grpc::Status::OK;
}

grpc::Status BufferService::DescribeBuffer(
    grpc::ServerContext*, const v1::DescribeBufferRequest* request,
    v1::BufferInfo* response) {
  auto found = Lookup(sessions_, request->session_id(), request->handle());
  if (!found.ok()) return ToGrpcStatus(found.status());
  BufferInfoToProto(*found->session, request->handle(), *found->buffer,
                    response);
  return grpc::Status::OK;
}

grpc::Status BufferService::DeleteBuffers(
    grpc::ServerContext*, const v1::DeleteBuffersRequest* request,
    v1::DeleteBuffersResponse*) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  return ToGrpcStatus((*session)->DeleteBuffers(request->handles()));
}

grpc::Status BufferService::BlockUntilReady(
    grpc::ServerContext* context, const v1::BlockUntilReadyRequest* request,
    v1::BufferInfo* response) {
  auto found = Lookup(sessions_, request->session_id(), request->handle());
  if (!found.ok()) return ToGrpcStatus(found.status());
  if (request->timeout_ms() < 0) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrFormat("timeout_ms is %d; use a positive value, or 0 to wait "
                        "without a bound",
                        request->timeout_ms()));
  }
  absl::Duration timeout = request->timeout_ms() == 0
                               ? absl::InfiniteDuration()
                               : absl::Milliseconds(request->timeout_ms());
  absl::Status status = AwaitReady(context, *found->buffer, timeout);
  if (!status.ok()) return ToGrpcStatus(status);
  BufferInfoToProto(*found->session, request->handle(), *found->buffer,
                    response);
  return grpc::Status::OK;
}

grpc::Status BufferService::CopyToDevice(grpc::ServerContext*,
                                         const v1::CopyToDeviceRequest* request,
                                         v1::BufferInfo* response) {
  auto found = Lookup(sessions_, request->session_id(), request->handle());
  if (!found.ok()) return ToGrpcStatus(found.status());
  auto device = client_->LookupDevice(request->device_id());
  if (!device.ok()) return ToGrpcStatus(device.status());
  auto copy = found->buffer->CopyToDevice(*device);
  if (!copy.ok()) return ToGrpcStatus(copy.status());
  auto handle = found->session->AddBuffer(*copy);
  if (!handle.ok()) {
    (*copy)->Delete();
    return ToGrpcStatus(handle.status());
  }
  BufferInfoToProto(*found->session, *handle, **copy, response);
  return grpc::Status::OK;
}

grpc::Status BufferService::GetReadyState(
    grpc::ServerContext*, const v1::GetReadyStateRequest* request,
    v1::GetReadyStateResponse* response) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  for (uint64_t handle : request->handles()) {
    auto buffer = (*session)->LookupBuffer(handle);
    if (!buffer.ok()) return ToGrpcStatus(buffer.status());
    v1::BufferInfo info;
    BufferInfoToProto(**session, handle, **buffer, &info);
    v1::ReadyState* state = response->add_states();
    state->set_handle(handle);
    state->set_ready(info.ready());
    state->set_error_code(info.error_code());
    state->set_error_message(info.error_message());
  }
  return grpc::Status::OK;
}

grpc::Status BufferService::MakeTuple(grpc::ServerContext*,
                                      const v1::MakeTupleRequest* request,
                                      v1::BufferInfo* response) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  if (request->handles_size() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "MakeTuple needs at least one element handle");
  }
  std::vector<std::shared_ptr<runtime::Buffer>> elements;
  for (int i = 0; i < request->handles_size(); ++i) {
    auto buffer = (*session)->LookupBuffer(request->handles(i));
    if (!buffer.ok()) {
      return ToGrpcStatus(absl::Status(
          buffer.status().code(),
          absl::StrFormat("element %d: %s", i, buffer.status().message())));
    }
    if (!elements.empty() && (*buffer)->device() != elements[0]->device()) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrFormat("element %d is on %s but element 0 is on %s; a "
                          "tuple's elements must share a device",
                          i, (*buffer)->device()->DebugString(),
                          elements[0]->device()->DebugString()));
    }
    elements.push_back(*std::move(buffer));
  }
  runtime::Device* device = elements[0]->device();
  auto tuple = runtime::Buffer::MakeTuple(client_, device, std::move(elements));
  auto handle = (*session)->AddBuffer(tuple);
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  BufferInfoToProto(**session, *handle, *tuple, response);
  return grpc::Status::OK;
}

}  // namespace pjrt::daemon
