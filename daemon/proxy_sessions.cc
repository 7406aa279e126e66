#include "daemon/proxy_sessions.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "daemon/grpc_status.h"

namespace pjrt::daemon {
namespace {

// How long the keeper's calls, and the closes at shutdown, wait for a peer.
constexpr absl::Duration kKeeperCallTimeout = absl::Seconds(2);
constexpr absl::Duration kKeeperTick = absl::Seconds(1);
constexpr absl::Duration kOpenTimeout = absl::Seconds(10);

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

}  // namespace

ProxySessions::ProxySessions(Cluster* cluster)
    : cluster_(cluster), keeper_([this] { KeeperLoop(); }) {}

ProxySessions::~ProxySessions() {
  absl::flat_hash_map<uint64_t, Entry> entries;
  {
    pjrt::MutexLock lock(&mu_);
    stop_ = true;
    entries.swap(entries_);
  }
  keeper_.join();
  for (const auto& [id, entry] : entries) {
    for (const auto& [task, proxy] : entry.proxies) {
      CloseProxy(task, proxy, kKeeperCallTimeout);
    }
  }
}

std::unique_ptr<grpc::ClientContext> ProxySessions::Context(
    const grpc::ServerContextBase* caller) const {
  std::unique_ptr<grpc::ClientContext> context =
      caller != nullptr ? grpc::ClientContext::FromServerContext(*caller)
                        : std::make_unique<grpc::ClientContext>();
  cluster_->PrepareContext(context.get());
  return context;
}

absl::Status ProxySessions::PeerError(int task,
                                      const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrFormat("task %d (%s) did not answer: %s", task,
                        cluster_->address(task), status.error_message()));
  }
  return FromGrpcStatus(status);
}

absl::StatusOr<uint64_t> ProxySessions::ProxyOf(
    const std::shared_ptr<Session>& session, int task) {
  const uint64_t incarnation = cluster_->incarnation_of(task);
  if (uint64_t proxy = session->ProxyOn(task); proxy != 0) {
    {
      pjrt::MutexLock lock(&mu_);
      auto entry = entries_.find(session->id());
      if (entry != entries_.end() &&
          entry->second.incarnations[task] == incarnation) {
        return proxy;
      }
    }
    if (session->ForgetProxy(task, proxy)) {
      spdlog::warn(
          "{}: task {} restarted; its proxy session there ended with the "
          "buffers and program parts it held",
          session->DebugString(), task);
    }
  }
  v1::OpenProxySessionRequest request;
  request.set_origin_task_id(cluster_->task_id());
  request.set_origin_public_id(session->public_id());
  request.set_client_name(session->client_name());
  if (session->account() != nullptr) {
    request.set_tenant(session->account()->name());
  }
  request.set_lease_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds(kProxyLease)));
  v1::OpenSessionResponse response;
  auto context = Context(nullptr);
  // A task that just came back may not be connected yet.
  context->set_wait_for_ready(true);
  context->set_deadline(Deadline(kOpenTimeout));
  grpc::Status status =
      Stub(task)->OpenProxySession(context.get(), request, &response);
  if (!status.ok()) return PeerError(task, status);
  absl::StatusOr<uint64_t> kept =
      session->SetProxy(task, response.session_id());
  if (!kept.ok() || *kept != response.session_id()) {
    // The session closed meanwhile, or another call opened one first.
    CloseProxy(task, response.session_id(), kKeeperCallTimeout);
    return kept;
  }
  pjrt::MutexLock lock(&mu_);
  Entry& entry = entries_[session->id()];
  entry.session = session;
  entry.proxies[task] = response.session_id();
  entry.incarnations[task] = incarnation;
  return response.session_id();
}

void ProxySessions::CloseProxy(int task, uint64_t proxy_id,
                               absl::Duration timeout) {
  v1::CloseSessionRequest request;
  request.set_session_id(proxy_id);
  v1::CloseSessionResponse response;
  auto context = Context(nullptr);
  context->set_deadline(Deadline(timeout));
  grpc::Status status =
      Stub(task)->CloseProxySession(context.get(), request, &response);
  if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
    spdlog::warn(
        "could not close a proxy session on task {}: {} (it ends with its "
        "lease)",
        task, status.error_message());
  }
}

void ProxySessions::DeleteRemoteBuffers(int task, uint64_t proxy,
                                        absl::Span<const uint64_t> handles) {
  if (handles.empty()) return;
  v1::DeleteBuffersRequest request;
  request.set_session_id(proxy);
  request.set_skip_unknown(true);
  for (uint64_t handle : handles) request.add_handles(handle);
  v1::DeleteBuffersResponse response;
  auto context = Context(nullptr);
  context->set_deadline(Deadline(kKeeperCallTimeout));
  grpc::Status status =
      Stub(task)->ProxyDeleteBuffers(context.get(), request, &response);
  if (!status.ok()) {
    spdlog::warn(
        "could not delete {} buffers on task {}: {} (they go with the proxy "
        "session)",
        handles.size(), task, status.error_message());
  }
}

void ProxySessions::FlushReleases(Session& session) {
  Session::RemoteReleases releases = session.TakeRemoteReleases();
  if (releases.empty()) return;
  const absl::flat_hash_map<int, uint64_t> proxies = session.Proxies();
  for (auto& [task, handles] : releases.buffers) {
    auto proxy = proxies.find(task);
    if (proxy != proxies.end()) {
      DeleteRemoteBuffers(task, proxy->second, handles);
    }
  }
  for (auto& [task, handles] : releases.executables) {
    auto proxy = proxies.find(task);
    if (proxy == proxies.end()) continue;
    for (uint64_t handle : handles) {
      v1::DeleteExecutableRequest request;
      request.set_session_id(proxy->second);
      request.set_executable_handle(handle);
      v1::DeleteExecutableResponse response;
      auto context = Context(nullptr);
      context->set_deadline(Deadline(kKeeperCallTimeout));
      grpc::Status status =
          Stub(task)->ProxyDeleteExecutable(context.get(), request, &response);
      if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
        spdlog::warn("{}: could not delete an executable on task {}: {}",
                     session.DebugString(), task, status.error_message());
      }
    }
  }
}

void ProxySessions::KeeperLoop() {
  absl::Time next_renewal = absl::Now() + kProxyRenewal;
  while (true) {
    std::vector<std::shared_ptr<Session>> live;
    std::vector<Entry> ended;
    {
      pjrt::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; },
          kKeeperTick);
      if (stop_) return;
      for (auto it = entries_.begin(); it != entries_.end();) {
        std::shared_ptr<Session> session = it->second.session.lock();
        if (session == nullptr || session->closed()) {
          ended.push_back(std::move(it->second));
          entries_.erase(it++);
          continue;
        }
        live.push_back(std::move(session));
        ++it;
      }
    }
    for (const Entry& entry : ended) {
      for (const auto& [task, proxy] : entry.proxies) {
        CloseProxy(task, proxy, kKeeperCallTimeout);
      }
    }
    for (const auto& session : live) FlushReleases(*session);
    if (absl::Now() < next_renewal) continue;
    next_renewal = absl::Now() + kProxyRenewal;
    // One call per task renews every proxy there.
    absl::flat_hash_map<int, std::vector<std::pair<Session*, uint64_t>>>
        by_task;
    for (const auto& session : live) {
      for (const auto& [task, proxy] : session->Proxies()) {
        by_task[task].push_back({session.get(), proxy});
      }
    }
    for (const auto& [task, proxies] : by_task) {
      v1::KeepProxySessionsRequest request;
      for (const auto& [session, proxy] : proxies) {
        request.add_session_ids(proxy);
      }
      v1::KeepProxySessionsResponse response;
      auto context = Context(nullptr);
      context->set_deadline(Deadline(kKeeperCallTimeout));
      grpc::Status status =
          Stub(task)->KeepProxySessions(context.get(), request, &response);
      if (!status.ok()) {
        spdlog::warn("could not renew {} proxy sessions on task {}: {}",
                     proxies.size(), task, status.error_message());
        continue;
      }
      for (uint64_t gone : response.gone()) {
        for (const auto& [session, proxy] : proxies) {
          if (proxy != gone) continue;
          spdlog::warn(
              "{}: its proxy session on task {} ended there (the task "
              "restarted?); its buffers there are gone",
              session->DebugString(), task);
          session->ForgetProxy(task, proxy);
        }
      }
    }
  }
}

}  // namespace pjrt::daemon
