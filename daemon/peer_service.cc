#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "daemon/grpc_status.h"
#include "daemon/services.h"

namespace pjrt::daemon {

absl::Status PeerService::HandshakeImpl(grpc::ServerContext* context,
                                        const v1::HandshakeRequest* request,
                                        v1::HandshakeResponse* response) {
  absl::Status status = cluster_->CheckSecret(*context);
  if (status.ok()) status = cluster_->AcceptHandshake(*request);
  if (!status.ok()) {
    spdlog::warn("refused the handshake of {}: {}", context->peer(),
                 status.message());
    return status;
  }
  *response->mutable_callee() = cluster_->self();
  return absl::OkStatus();
}

absl::Status PeerService::PushTransferImpl(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PushTransferRequest>* reader,
    v1::PushTransferResponse* response) {
  const absl::Time start = absl::Now();
  absl::Status secret = cluster_->CheckSecret(*context);
  if (!secret.ok()) return secret;
  CrossHostReceives* receives = receives_.load();
  if (receives == nullptr) {
    return absl::UnavailableError(
        absl::StrFormat("task %d is still starting", cluster_->task_id()));
  }
  v1::PushTransferRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return absl::InvalidArgumentError(
        "a transfer starts with its header (the descriptor)");
  }
  const int sender = request.header().sender_task_id();
  auto descriptor = ParseDescriptor(request.header().transfer_descriptor());
  if (!descriptor.ok()) return descriptor.status();
  auto claimed = receives->Claim(*descriptor);
  if (!claimed.ok()) {
    spdlog::warn("refused a transfer from task {}: {}", sender,
                 claimed.status().message());
    return claimed.status();
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
  if (!status.ok()) return status;
  RecordTransfer(metrics_.load(), nullptr, TransferDirection::kToDevice,
                 TransferPath::kPeer, received, start);
  response->set_bytes_received(received);
  return absl::OkStatus();
}

absl::Status PeerService::CheckDirectoryCall(
    const grpc::ServerContext& context) const {
  PJRT_RETURN_IF_ERROR(cluster_->CheckSecret(context));
  if (directory_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("task %d keeps no exchange directory; task 0 does",
                        cluster_->task_id()));
  }
  return absl::OkStatus();
}

absl::Status PeerService::StoreSetImpl(grpc::ServerContext* context,
                                       const v1::StoreSetRequest* request,
                                       v1::StoreSetResponse*) {
  absl::Status status = CheckDirectoryCall(*context);
  if (status.ok()) status = directory_->Set(request->key(), request->value());
  return status;
}

absl::Status PeerService::StoreGetImpl(grpc::ServerContext* context,
                                       const v1::StoreGetRequest* request,
                                       v1::StoreGetResponse* response) {
  absl::Status status = CheckDirectoryCall(*context);
  if (!status.ok()) return status;
  if (request->keys_size() > kMaxDirectoryEntries) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a StoreGet asks for %d keys; at most %d",
                        request->keys_size(), kMaxDirectoryEntries));
  }
  *response = directory_->Get(
      std::vector<std::string>(request->keys().begin(), request->keys().end()),
      absl::Milliseconds(request->timeout_ms()));
  return absl::OkStatus();
}

absl::Status PeerService::MeetImpl(grpc::ServerContext* context,
                                   const v1::MeetRequest* request,
                                   v1::MeetResponse* response) {
  absl::Status status = CheckDirectoryCall(*context);
  if (!status.ok()) return status;
  auto met = directory_->Meet(*request);
  if (!met.ok()) return met.status();
  *response = *std::move(met);
  return absl::OkStatus();
}

absl::StatusOr<const PeerService::ProxyTargets*> PeerService::ProxyCall(
    const grpc::ServerContext& context) const {
  PJRT_RETURN_IF_ERROR(cluster_->CheckSecret(context));
  const ProxyTargets* targets = proxy_targets_.load();
  if (targets == nullptr) {
    return absl::UnavailableError(
        absl::StrFormat("task %d is still starting", cluster_->task_id()));
  }
  return targets;
}

absl::Status PeerService::OpenProxySessionImpl(
    grpc::ServerContext* context, const v1::OpenProxySessionRequest* request,
    v1::OpenSessionResponse* response) {
  auto targets = ProxyCall(*context);
  if (!targets.ok()) return targets.status();
  // "task 0 session 7 (train.py)": whose part this is, in listings.
  std::string name = absl::StrFormat(
      "task %d session %d (%s)", request->origin_task_id(),
      request->origin_public_id(), Excerpt(request->client_name(), 128));
  auto caller = (*targets)->tenants->CallerForPeer(request->tenant(),
                                                   request->origin_task_id());
  if (!caller.ok()) return caller.status();
  auto session = (*targets)->sessions->Open(
      std::move(name), context->peer(), absl::Seconds(request->lease_seconds()),
      *caller);
  if (!session.ok()) return session.status();
  spdlog::info("{} opened for task {}", (*session)->DebugString(),
               request->origin_task_id());
  response->set_session_id((*session)->id());
  response->set_public_id((*session)->public_id());
  response->set_lease_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds((*session)->lease())));
  return absl::OkStatus();
}

absl::Status PeerService::KeepProxySessionsImpl(
    grpc::ServerContext* context, const v1::KeepProxySessionsRequest* request,
    v1::KeepProxySessionsResponse* response) {
  auto targets = ProxyCall(*context);
  if (!targets.ok()) return targets.status();
  for (uint64_t id : request->session_ids()) {
    // A lookup renews the lease.
    if (!(*targets)->sessions->Lookup(id, Caller{}).ok()) {
      response->add_gone(id);
    }
  }
  return absl::OkStatus();
}

absl::Status PeerService::CloseProxySessionImpl(
    grpc::ServerContext* context, const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse*) {
  auto targets = ProxyCall(*context);
  if (!targets.ok()) return targets.status();
  auto closed = (*targets)->sessions->Close(
      request->session_id(),
      absl::CancelledError("its session on the origin task ended"));
  return closed.status();
}

}  // namespace pjrt::daemon
