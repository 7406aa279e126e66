// The Buffers calls of a whole-cluster session whose buffers live on other
// tasks: each is forwarded, through the session's proxy on the owning task
// (daemon/proxy_sessions.h), to that task's Peer service.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "daemon/grpc_status.h"
#include "daemon/services.h"

namespace pjrt::daemon {

absl::StatusOr<std::optional<BufferService::RemoteBuffer>>
BufferService::FindRemote(const grpc::ServerContext& context, uint64_t id,
                          uint64_t handle) {
  if (proxies_ == nullptr) return std::nullopt;
  PJRT_ASSIGN_OR_RETURN(auto session,
                        CallerSession(auth_, sessions_, context, id));
  const int task = session->RemoteBufferTask(handle);
  if (task < 0) return std::nullopt;
  PJRT_ASSIGN_OR_RETURN(uint64_t proxy, proxies_->ProxyOf(session, task));
  return RemoteBuffer{task, proxy};
}

absl::Status BufferService::ForwardUpload(
    grpc::ServerContext* context, grpc::ServerReader<v1::UploadRequest>* reader,
    v1::UploadRequest first, const std::shared_ptr<Session>& session, int task,
    v1::BufferInfo* response) {
  auto proxy = proxies_->ProxyOf(session, task);
  if (!proxy.ok()) return proxy.status();
  if (absl::Status room = session->CheckRoom(1); !room.ok()) {
    return room;
  }
  first.mutable_header()->set_session_id(*proxy);
  std::unique_ptr<grpc::ClientContext> peer = proxies_->Context(context);
  v1::BufferInfo info;
  std::unique_ptr<grpc::ClientWriter<v1::UploadRequest>> upstream =
      proxies_->Stub(task)->ProxyUpload(peer.get(), &info);
  // The chunks go on as they come; the task checks them as it would a
  // client's. A write fails when the task has ended the call (Finish then
  // says why).
  bool open = upstream->Write(first);
  v1::UploadRequest chunk;
  while (open && reader->Read(&chunk)) open = upstream->Write(chunk);
  if (open) upstream->WritesDone();
  grpc::Status status = upstream->Finish();
  if (!status.ok()) return proxies_->PeerError(task, status);
  absl::Status added = session->AddRemoteBuffers(task, {info.handle()});
  if (!added.ok()) {
    proxies_->DeleteRemoteBuffers(task, *proxy, {info.handle()})
        .IgnoreError();  // the proxy frees it when it ends
    return added;
  }
  *response = std::move(info);
  return absl::OkStatus();
}

absl::Status BufferService::ForwardDownload(
    grpc::ServerContext* context, const v1::DownloadRequest& request,
    const RemoteBuffer& remote,
    grpc::ServerWriter<v1::DownloadResponse>* writer) {
  v1::DownloadRequest forwarded = request;
  forwarded.set_session_id(remote.proxy);
  std::unique_ptr<grpc::ClientContext> peer = proxies_->Context(context);
  std::unique_ptr<grpc::ClientReader<v1::DownloadResponse>> upstream =
      proxies_->Stub(remote.task)->ProxyDownload(peer.get(), forwarded);
  v1::DownloadResponse message;
  while (upstream->Read(&message)) {
    if (!writer->Write(message)) {
      peer->TryCancel();
      upstream->Finish().IgnoreError();
      return absl::CancelledError("client went away");
    }
  }
  grpc::Status status = upstream->Finish();
  if (!status.ok()) {
    return proxies_->PeerError(remote.task, status);
  }
  return absl::OkStatus();
}

absl::Status BufferService::RemoteReadyState(
    grpc::ServerContext* context, const std::shared_ptr<Session>& session,
    const v1::GetReadyStateRequest& request,
    v1::GetReadyStateResponse* response) {
  // Each task answers for its buffers in one call; the states then go back
  // in the request's order.
  absl::flat_hash_map<int, v1::GetReadyStateRequest> by_task;
  for (uint64_t handle : request.handles()) {
    const int task = session->RemoteBufferTask(handle);
    if (task >= 0) by_task[task].add_handles(handle);
  }
  absl::flat_hash_map<uint64_t, v1::ReadyState> remote_states;
  for (auto& [task, part] : by_task) {
    auto proxy = proxies_->ProxyOf(session, task);
    if (!proxy.ok()) return proxy.status();
    v1::GetReadyStateResponse answer;
    absl::Status status =
        proxies_->Forward(context, task, *proxy, part, &answer,
                          &v1::Peer::Stub::ProxyGetReadyState);
    if (!status.ok()) return status;
    for (v1::ReadyState& state : *answer.mutable_states()) {
      const uint64_t handle = state.handle();
      remote_states[handle] = std::move(state);
    }
  }
  for (uint64_t handle : request.handles()) {
    if (auto it = remote_states.find(handle); it != remote_states.end()) {
      *response->add_states() = it->second;
      continue;
    }
    absl::Status status = AddReadyState(*session, handle, response);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status BufferService::DeleteAcrossTasks(
    grpc::ServerContext* context, const std::shared_ptr<Session>& session,
    const v1::DeleteBuffersRequest& request) {
  if (request.skip_unknown()) {
    session->Release(request.handles(), {});
    proxies_->FlushReleases(*session);
    return absl::OkStatus();
  }
  // All or none: every handle must name a buffer, here or on a task.
  std::vector<uint64_t> local;
  for (uint64_t handle : request.handles()) {
    if (session->RemoteBufferTask(handle) >= 0) continue;
    auto buffer = session->LookupBuffer(handle);
    if (!buffer.ok()) {
      return absl::NotFoundError(absl::StrFormat(
          "buffer handle %#x is not a buffer of this session; no buffer was "
          "deleted",
          handle));
    }
    local.push_back(handle);
  }
  absl::flat_hash_map<int, std::vector<uint64_t>> remote;
  for (uint64_t handle : request.handles()) {
    const int task = session->RemoteBufferTask(handle);
    if (task >= 0) remote[task].push_back(handle);
  }
  absl::Status status = session->DeleteBuffers(local);
  // Each task's buffers are forgotten here once that task has deleted
  // them: after a failure the client may delete them again.
  for (const auto& [task, handles] : remote) {
    absl::Status deleted;
    auto proxy = proxies_->ProxyOf(session, task);
    if (proxy.ok()) {
      v1::DeleteBuffersRequest part;
      part.set_skip_unknown(true);
      for (uint64_t handle : handles) part.add_handles(handle);
      v1::DeleteBuffersResponse answer;
      deleted = proxies_->Forward(context, task, *proxy, part, &answer,
                                  &v1::Peer::Stub::ProxyDeleteBuffers);
    } else {
      deleted = proxy.status();
    }
    if (deleted.ok()) session->ForgetRemoteBuffers(handles);
    if (status.ok()) status = deleted;
  }
  return status;
}

}  // namespace pjrt::daemon
