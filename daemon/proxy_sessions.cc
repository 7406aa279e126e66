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

// True for the failures of a task that did not answer (worth a retry).
bool Unreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
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
  std::vector<std::pair<int, uint64_t>> proxies;
  for (const auto& [id, entry] : entries) {
    for (const auto& [task, proxy] : entry.proxies) {
      proxies.emplace_back(task, proxy);
    }
  }
  CloseProxies(proxies, kKeeperCallTimeout);
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
        absl::StrFormat("task %d (%s) is unavailable: %s", task,
                        cluster_->address(task), status.error_message()));
  }
  return FromGrpcStatus(status);
}

absl::StatusOr<uint64_t> ProxySessions::ProxyOf(
    const std::shared_ptr<Session>& session, int task) {
  const uint64_t incarnation = cluster_->incarnation_of(task);
  if (std::optional<Session::Proxy> proxy = session->ProxyOn(task)) {
    if (proxy->incarnation == incarnation) return proxy->id;
    if (session->ForgetProxy(task, proxy->id)) {
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
  const uint64_t opened = response.session_id();
  {
    // Registered before the session can hand it out, so that the keeper
    // renews it from the start (and closes it, if another call's proxy
    // wins below).
    pjrt::MutexLock lock(&mu_);
    Entry& entry = entries_[session->id()];
    entry.session = session;
    entry.proxies[task] = opened;
    // Renew well within the lease the task granted.
    if (response.lease_seconds() > 0) {
      renewal_ =
          std::min(renewal_, absl::Seconds(response.lease_seconds()) / 3);
    }
  }
  absl::StatusOr<Session::Proxy> kept =
      session->SetProxy(task, {.id = opened, .incarnation = incarnation});
  if (!kept.ok() || kept->id != opened) {
    // The session closed meanwhile, or another call opened one first.
    {
      pjrt::MutexLock lock(&mu_);
      auto entry = entries_.find(session->id());
      if (entry != entries_.end()) {
        if (kept.ok()) {
          entry->second.proxies[task] = kept->id;
        } else {
          entry->second.proxies.erase(task);
        }
      }
    }
    CloseProxies({{task, opened}}, kKeeperCallTimeout);
    if (!kept.ok()) return kept.status();
  }
  return kept->id;
}

void ProxySessions::CloseProxies(
    const std::vector<std::pair<int, uint64_t>>& proxies,
    absl::Duration timeout) {
  if (proxies.empty()) return;
  struct Close {
    int task;
    std::unique_ptr<grpc::ClientContext> context;
    v1::CloseSessionRequest request;
    v1::CloseSessionResponse response;
  };
  std::vector<Close> closes(proxies.size());
  pjrt::Mutex mu;
  int pending = static_cast<int>(proxies.size());
  for (size_t i = 0; i < proxies.size(); ++i) {
    Close& close = closes[i];
    close.task = proxies[i].first;
    close.request.set_session_id(proxies[i].second);
    close.context = Context(nullptr);
    close.context->set_deadline(Deadline(timeout));
    Stub(close.task)
        ->async()
        ->CloseProxySession(
            close.context.get(), &close.request, &close.response,
            [&mu, &pending, &close](grpc::Status status) {
              if (!status.ok() &&
                  status.error_code() != grpc::StatusCode::NOT_FOUND) {
                spdlog::warn(
                    "could not close a proxy session on task {}: {} (it ends "
                    "with its lease)",
                    close.task, status.error_message());
              }
              pjrt::MutexLock lock(&mu);
              --pending;
            });
  }
  pjrt::MutexLock lock(&mu);
  mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
}

absl::Status ProxySessions::DeleteRemoteBuffers(
    int task, uint64_t proxy, absl::Span<const uint64_t> handles) {
  if (handles.empty()) return absl::OkStatus();
  v1::DeleteBuffersRequest request;
  request.set_session_id(proxy);
  request.set_skip_unknown(true);
  for (uint64_t handle : handles) request.add_handles(handle);
  v1::DeleteBuffersResponse response;
  auto context = Context(nullptr);
  context->set_deadline(Deadline(kKeeperCallTimeout));
  grpc::Status status =
      Stub(task)->ProxyDeleteBuffers(context.get(), request, &response);
  return status.ok() ? absl::OkStatus() : PeerError(task, status);
}

absl::Status ProxySessions::DeleteRemoteExecutable(int task, uint64_t proxy,
                                                   uint64_t handle) {
  v1::DeleteExecutableRequest request;
  request.set_session_id(proxy);
  request.set_executable_handle(handle);
  v1::DeleteExecutableResponse response;
  auto context = Context(nullptr);
  context->set_deadline(Deadline(kKeeperCallTimeout));
  grpc::Status status =
      Stub(task)->ProxyDeleteExecutable(context.get(), request, &response);
  if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return absl::OkStatus();
  }
  return PeerError(task, status);
}

void ProxySessions::FlushReleases(Session& session) {
  Session::RemoteReleases releases = session.TakeRemoteReleases();
  if (releases.empty()) return;
  const absl::flat_hash_map<int, uint64_t> proxies = session.Proxies();
  absl::flat_hash_map<int, std::vector<uint64_t>> retry_buffers;
  absl::flat_hash_map<int, std::vector<uint64_t>> retry_executables;
  for (auto& [task, handles] : releases.buffers) {
    auto proxy = proxies.find(task);
    if (proxy == proxies.end()) continue;  // gone with its proxy
    absl::Status status = DeleteRemoteBuffers(task, proxy->second, handles);
    if (status.ok()) continue;
    spdlog::warn("{}: could not delete {} buffers on task {}: {}",
                 session.DebugString(), handles.size(), task, status.message());
    if (Unreachable(status)) retry_buffers[task] = std::move(handles);
  }
  for (auto& [task, handles] : releases.executables) {
    auto proxy = proxies.find(task);
    if (proxy == proxies.end()) continue;
    for (size_t i = 0; i < handles.size(); ++i) {
      absl::Status status =
          DeleteRemoteExecutable(task, proxy->second, handles[i]);
      if (status.ok()) continue;
      spdlog::warn("{}: could not delete an executable on task {}: {}",
                   session.DebugString(), task, status.message());
      if (Unreachable(status)) {
        retry_executables[task].assign(handles.begin() + i, handles.end());
        break;
      }
    }
  }
  for (auto& [task, handles] : retry_buffers) {
    session.RequeueRemoteReleases(task, std::move(handles),
                                  std::move(retry_executables[task]));
    retry_executables.erase(task);
  }
  for (auto& [task, handles] : retry_executables) {
    session.RequeueRemoteReleases(task, {}, std::move(handles));
  }
}

void ProxySessions::Renew(const std::vector<std::shared_ptr<Session>>& live) {
  // One call per task renews every proxy there; the tasks answer at once.
  struct Call {
    int task;
    std::vector<std::pair<Session*, uint64_t>> proxies;
    std::unique_ptr<grpc::ClientContext> context;
    v1::KeepProxySessionsRequest request;
    v1::KeepProxySessionsResponse response;
    grpc::Status status;
  };
  absl::flat_hash_map<int, size_t> index;
  std::vector<Call> calls;
  for (const auto& session : live) {
    for (const auto& [task, proxy] : session->Proxies()) {
      auto [it, added] = index.try_emplace(task, calls.size());
      if (added) calls.push_back(Call{.task = task});
      calls[it->second].proxies.push_back({session.get(), proxy});
      calls[it->second].request.add_session_ids(proxy);
    }
  }
  pjrt::Mutex mu;
  int pending = static_cast<int>(calls.size());
  for (Call& call : calls) {
    call.context = Context(nullptr);
    call.context->set_deadline(Deadline(kKeeperCallTimeout));
    Stub(call.task)->async()->KeepProxySessions(
        call.context.get(), &call.request, &call.response,
        [&mu, &pending, &call](grpc::Status status) {
          pjrt::MutexLock lock(&mu);
          call.status = std::move(status);
          --pending;
        });
  }
  {
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending == 0; });
  }
  for (const Call& call : calls) {
    if (!call.status.ok()) {
      spdlog::warn("could not renew {} proxy sessions on task {}: {}",
                   call.proxies.size(), call.task, call.status.error_message());
      continue;
    }
    for (uint64_t gone : call.response.gone()) {
      for (const auto& [session, proxy] : call.proxies) {
        if (proxy != gone || !session->ForgetProxy(call.task, proxy)) continue;
        spdlog::warn(
            "{}: its proxy session on task {} ended there (the task "
            "restarted, or lost touch with this one for its lease); its "
            "buffers there are gone",
            session->DebugString(), call.task);
      }
    }
  }
}

void ProxySessions::KeeperLoop() {
  absl::Time next_renewal = absl::Now();
  while (true) {
    std::vector<std::shared_ptr<Session>> live;
    std::vector<std::pair<int, uint64_t>> ended;
    absl::Duration renewal;
    {
      pjrt::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; },
          kKeeperTick);
      if (stop_) return;
      renewal = renewal_;
      for (auto it = entries_.begin(); it != entries_.end();) {
        std::shared_ptr<Session> session = it->second.session.lock();
        if (session == nullptr || session->closed()) {
          for (const auto& [task, proxy] : it->second.proxies) {
            ended.emplace_back(task, proxy);
          }
          entries_.erase(it++);
          continue;
        }
        live.push_back(std::move(session));
        ++it;
      }
    }
    // Leases first: a task slow to take deletions must not let the
    // others' proxies expire.
    if (absl::Now() >= next_renewal) {
      next_renewal = absl::Now() + renewal;
      Renew(live);
    }
    CloseProxies(ended, kKeeperCallTimeout);
    for (const auto& session : live) FlushReleases(*session);
  }
}

}  // namespace pjrt::daemon
