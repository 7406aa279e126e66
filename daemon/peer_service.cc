#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "daemon/grpc_status.h"
#include "daemon/services.h"

namespace pjrt::daemon {

grpc::Status PeerService::HandshakeImpl(grpc::ServerContext* context,
                                        const v1::HandshakeRequest* request,
                                        v1::HandshakeResponse* response) {
  absl::Status status = cluster_->CheckSecret(*context);
  if (status.ok()) status = cluster_->AcceptHandshake(*request);
  if (!status.ok()) {
    spdlog::warn("refused the handshake of {}: {}", context->peer(),
                 status.message());
    return ToGrpcStatus(status);
  }
  *response->mutable_callee() = cluster_->self();
  return grpc::Status::OK;
}

grpc::Status PeerService::PushTransferImpl(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PushTransferRequest>* reader,
    v1::PushTransferResponse* response) {
  absl::Status secret = cluster_->CheckSecret(*context);
  if (!secret.ok()) return ToGrpcStatus(secret);
  CrossHostReceives* receives = receives_.load();
  if (receives == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrFormat("task %d is still starting",
                                        cluster_->task_id()));
  }
  v1::PushTransferRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a transfer starts with its header (the descriptor)");
  }
  const int sender = request.header().sender_task_id();
  auto descriptor = ParseDescriptor(request.header().transfer_descriptor());
  if (!descriptor.ok()) return ToGrpcStatus(descriptor.status());
  auto claimed = receives->Claim(*descriptor);
  if (!claimed.ok()) {
    spdlog::warn("refused a transfer from task {}: {}", sender,
                 claimed.status().message());
    return ToGrpcStatus(claimed.status());
  }
  const int64_t expected = claimed->transfer->bytes_expected();
  int64_t received = 0;
  absl::Status status;
  while (status.ok() && reader->Read(&request)) {
    if (!request.has_chunk() && request.has_header()) {
      status = absl::InvalidArgumentError("a transfer has one header");
      break;
    }
    const std::string& chunk = request.chunk();
    const int64_t size = static_cast<int64_t>(chunk.size());
    if (size > kMaxChunkBytes || size > expected - received) {
      status = absl::InvalidArgumentError(absl::StrFormat(
          "transfer chunk of %d bytes after %d of %d bytes: chunks are at "
          "most %d bytes and may not go past the end",
          size, received, expected, kMaxChunkBytes));
      break;
    }
    status = claimed->transfer->Append(chunk.data(), size);
    received += size;
    receives->CountReceived(size);
  }
  if (status.ok() && received != expected) {
    status = absl::UnavailableError(absl::StrFormat(
        "the transfer from task %d stopped after %d of %d bytes (the sender "
        "went away or gave up); the receive buffer holds no data",
        sender, received, expected));
  }
  if (!status.ok()) {
    spdlog::warn("cross-host receive {:#x} failed: {}", claimed->receive_id,
                 status.message());
  }
  receives->Complete(*std::move(claimed), status);
  if (!status.ok()) return ToGrpcStatus(status);
  response->set_bytes_received(received);
  return grpc::Status::OK;
}

}  // namespace pjrt::daemon
