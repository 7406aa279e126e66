#include <openssl/crypto.h>

#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/text.h"
#include "base/version.h"
#include "daemon/grpc_status.h"
#include "daemon/services.h"

namespace pjrt::daemon {
namespace {

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Holds one Attach stream open and ties the session's life to it.
//
// Lifetime: gRPC deletes nothing; OnDone deletes the reactor, and OnDone runs
// only after Finish and after every other reaction has returned. The session
// calls Detach with its mutex held, so it never touches a reactor that has
// finished through the other path (OnCancel), which first takes the
// reactor out of the session under that same mutex.
class AttachReactor final : public grpc::ServerWriteReactor<v1::SessionEvent>,
                            public SessionAttachment {
 public:
  AttachReactor(SessionTable* sessions, std::shared_ptr<Session> session)
      : sessions_(sessions), session_(std::move(session)) {}

  // Attaches to the session and sends the first event; or finishes at once
  // if the session cannot be attached.
  void Start() {
    absl::Status status = session_->Attach(this);
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    spdlog::debug("{} attached", session_->DebugString());
    event_.mutable_attached()->set_public_id(session_->public_id());
    {
      pjrt::MutexLock lock(&mu_);
      if (finished_) return;  // detached meanwhile
      writing_ = true;
    }
    StartWrite(&event_);
  }

  void Detach(const absl::Status& why) override {
    // A session closed on purpose ends the stream with OK; a daemon shutting
    // down says so.
    FinishOnce(why.code() == absl::StatusCode::kUnavailable ? ToGrpcStatus(why)
                                                            : grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    {
      pjrt::MutexLock lock(&mu_);
      writing_ = false;
      finish.swap(pending_finish_);
    }
    if (finish.has_value()) Finish(*finish);
  }

  void OnCancel() override {
    // The client went away (closed the stream, died, or lost its
    // connection). If the session still counted on this stream, end it.
    if (session_->ForgetAttachment(this)) {
      sessions_
          ->Close(session_->id(), absl::CancelledError("client disconnected"))
          .IgnoreError();
    }
    FinishOnce(grpc::Status::CANCELLED);
  }

  void OnDone() override { delete this; }

 private:
  // Finish is called outside mu_: OnDone may run as soon as it is called.
  void FinishOnce(const grpc::Status& status) {
    {
      pjrt::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      // Finish may not overlap an outstanding write; OnWriteDone does it.
      if (writing_) {
        pending_finish_ = status;
        return;
      }
    }
    Finish(status);
  }

  SessionTable* const sessions_;
  const std::shared_ptr<Session> session_;
  v1::SessionEvent event_;
  pjrt::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

// An Attach that failed at once: a reactor is still needed to report the
// error.
class FailedAttach final : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  explicit FailedAttach(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* SessionService::OpenSessionImpl(
    grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request,
    v1::OpenSessionResponse* response) {
  unsigned version = request->protocol_version();
  if (version != 0 &&
      (version < kProtocolRevisionMin || version > kProtocolRevisionMax)) {
    return Reply(context,
                 absl::FailedPreconditionError(absl::StrFormat(
                     "the client speaks pjrt.v1 protocol revision %d, but this "
                     "daemon (%s) speaks revisions %d to %d; use a client and "
                     "daemon of matching releases",
                     version, kBuildVersion, kProtocolRevisionMin,
                     kProtocolRevisionMax)));
  }
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return Reply(context, caller.status());
  auto session =
      sessions_->Open(request->client_name(), context->peer(),
                      absl::Seconds(request->lease_seconds()), *caller);
  if (!session.ok()) return Reply(context, session.status());
  if (request->whole_cluster()) (*session)->SetWholeCluster();
  Audit("session_opened", {{"tenant", caller->name()},
                           {"peer", context->peer()},
                           {"session", absl::StrCat((*session)->public_id())},
                           {"client", request->client_name()}});
  response->set_session_id((*session)->id());
  response->set_public_id((*session)->public_id());
  response->set_lease_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds((*session)->lease())));
  spdlog::info("{} opened from {}", (*session)->DebugString(),
               EscapeForLog(context->peer()));
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* SessionService::KeepAliveImpl(
    grpc::CallbackServerContext* context, const v1::KeepAliveRequest* request,
    v1::KeepAliveResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return Reply(context, session.status());
  response->set_lease_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds((*session)->lease())));
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* SessionService::CloseSessionImpl(
    grpc::CallbackServerContext* context,
    const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return Reply(context, session.status());
  auto stats = sessions_->Close(request->session_id(), absl::OkStatus());
  if (!stats.ok()) return Reply(context, stats.status());
  Audit("session_closed", {{"tenant", (*session)->tenant_name()},
                           {"peer", context->peer()},
                           {"session", absl::StrCat((*session)->public_id())},
                           {"by", "its client"}});
  response->set_buffers_freed(stats->buffers_freed);
  response->set_bytes_freed(stats->bytes_freed);
  response->set_executables_freed(stats->executables_freed);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* SessionService::CloseSessionAsAdminImpl(
    grpc::CallbackServerContext* context,
    const v1::CloseSessionAsAdminRequest* request,
    v1::CloseSessionResponse* response) {
  // An admin tenant may close any session; so may whoever holds the
  // daemon's admin token (--admin-token-file).
  auto caller = auth_->Authenticate(*context);
  const bool admin_tenant =
      caller.ok() && !caller->anonymous() && caller->admin();
  const std::string& given = request->admin_token();
  const bool token_ok =
      !admin_token_.empty() && given.size() == admin_token_.size() &&
      CRYPTO_memcmp(given.data(), admin_token_.data(), given.size()) == 0;
  if (!admin_tenant && !token_ok && given.empty()) {
    // No admin token offered: the caller's own role decides.
    if (!caller.ok()) return Reply(context, caller.status());
    if (!caller->anonymous()) {
      return Reply(context, Authenticator::RequireAdmin(
                                *caller, "closing another client's session"));
    }
  }
  if (!admin_tenant && !token_ok && admin_token_.empty()) {
    return Reply(context,
                 absl::PermissionDeniedError(
                     "admin calls are off: start pjrtd with "
                     "--admin-token-file to allow them, or call as a tenant "
                     "of the admin role"));
  }
  if (!admin_tenant && given.empty()) {
    return Reply(context,
                 absl::PermissionDeniedError(
                     "closing another client's session needs the daemon's "
                     "admin token (from its --admin-token-file) or a tenant "
                     "of the admin role"));
  }
  if (!admin_tenant && !token_ok) {
    Audit("admin_refused", {{"peer", context->peer()},
                            {"session", absl::StrCat(request->public_id())},
                            {"reason", "wrong admin token"}});
    return Reply(context,
                 absl::PermissionDeniedError(
                     "wrong admin token: read it from the daemon's "
                     "--admin-token-file (readable by the daemon's user and "
                     "root)"));
  }
  auto stats = sessions_->CloseByPublicId(
      request->public_id(),
      absl::CancelledError(absl::StrFormat("closed by an administrator from %s",
                                           context->peer())));
  if (!stats.ok()) return Reply(context, stats.status());
  Audit("admin_close",
        {{"admin", admin_tenant ? caller->name() : std::string("admin token")},
         {"peer", context->peer()},
         {"session", absl::StrCat(request->public_id())}});
  response->set_buffers_freed(stats->buffers_freed);
  response->set_bytes_freed(stats->bytes_freed);
  response->set_executables_freed(stats->executables_freed);
  return Reply(context, absl::OkStatus());
}

grpc::ServerWriteReactor<v1::SessionEvent>* SessionService::AttachImpl(
    grpc::CallbackServerContext* context, const v1::AttachRequest* request) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return new FailedAttach(session.status());
  auto* reactor = new AttachReactor(sessions_, *std::move(session));
  reactor->Start();
  return reactor;
}

grpc::ServerUnaryReactor* SessionService::ListSessionsImpl(
    grpc::CallbackServerContext* context, const v1::ListSessionsRequest*,
    v1::ListSessionsResponse* response) {
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return Reply(context, caller.status());
  for (const SessionSummary& summary : sessions_->List()) {
    // A user sees its own sessions; an admin (and the anonymous tenant of
    // a daemon without tenants) every one.
    if (!caller->admin() && summary.account != caller->account.get()) continue;
    v1::SessionInfo* info = response->add_sessions();
    info->set_tenant(summary.tenant);
    info->set_public_id(summary.public_id);
    info->set_client_name(summary.client_name);
    info->set_peer(summary.peer);
    info->set_attached(summary.attached);
    info->set_buffer_count(summary.buffer_count);
    info->set_bytes(summary.bytes);
    info->set_executable_count(summary.executable_count);
    info->set_age_seconds(absl::ToDoubleSeconds(summary.age));
    info->set_lease_remaining_seconds(
        absl::ToDoubleSeconds(summary.lease_remaining));
    info->set_peak_bytes(summary.peak_bytes);
    if (summary.usage != nullptr) {
      const UsageTotals& totals = summary.usage->totals();
      info->set_device_seconds(totals.device_seconds.value());
      info->set_executions(static_cast<int64_t>(totals.runs.value()));
      info->set_failed_executions(
          static_cast<int64_t>(totals.failed_runs.value()));
      info->set_bytes_to_device(
          static_cast<int64_t>(totals.bytes_to_device.value()));
      info->set_bytes_from_device(
          static_cast<int64_t>(totals.bytes_from_device.value()));
      for (const auto& [device_id, seconds] : summary.usage->device_seconds()) {
        v1::DeviceTime* time = info->add_device_times();
        time->set_device_id(device_id);
        time->set_seconds(seconds);
      }
    }
  }
  return Reply(context, absl::OkStatus());
}

// The overrides: each runs its handler and turns an exception into an error
// for that call alone.

namespace {

template <typename Handler>
grpc::ServerUnaryReactor* GuardedUnary(grpc::CallbackServerContext* context,
                                       absl::string_view rpc,
                                       Handler&& handler) {
  try {
    return std::forward<Handler>(handler)();
  } catch (...) {
    absl::Status status = StatusFromException(rpc, std::current_exception());
    spdlog::error("{}", status);
    return Reply(context, status);
  }
}

}  // namespace

grpc::ServerUnaryReactor* SessionService::OpenSession(
    grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request,
    v1::OpenSessionResponse* response) {
  return GuardedUnary(context, "Sessions.OpenSession", [&] {
    return OpenSessionImpl(context, request, response);
  });
}

grpc::ServerUnaryReactor* SessionService::KeepAlive(
    grpc::CallbackServerContext* context, const v1::KeepAliveRequest* request,
    v1::KeepAliveResponse* response) {
  return GuardedUnary(context, "Sessions.KeepAlive", [&] {
    return KeepAliveImpl(context, request, response);
  });
}

grpc::ServerUnaryReactor* SessionService::CloseSession(
    grpc::CallbackServerContext* context,
    const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse* response) {
  return GuardedUnary(context, "Sessions.CloseSession", [&] {
    return CloseSessionImpl(context, request, response);
  });
}

grpc::ServerUnaryReactor* SessionService::CloseSessionAsAdmin(
    grpc::CallbackServerContext* context,
    const v1::CloseSessionAsAdminRequest* request,
    v1::CloseSessionResponse* response) {
  return GuardedUnary(context, "Sessions.CloseSessionAsAdmin", [&] {
    return CloseSessionAsAdminImpl(context, request, response);
  });
}

grpc::ServerUnaryReactor* SessionService::ListSessions(
    grpc::CallbackServerContext* context,
    const v1::ListSessionsRequest* request,
    v1::ListSessionsResponse* response) {
  return GuardedUnary(context, "Sessions.ListSessions", [&] {
    return ListSessionsImpl(context, request, response);
  });
}

grpc::ServerWriteReactor<v1::SessionEvent>* SessionService::Attach(
    grpc::CallbackServerContext* context, const v1::AttachRequest* request) {
  try {
    return AttachImpl(context, request);
  } catch (...) {
    absl::Status status =
        StatusFromException("Sessions.Attach", std::current_exception());
    spdlog::error("{}", status);
    return new FailedAttach(status);
  }
}

}  // namespace pjrt::daemon
