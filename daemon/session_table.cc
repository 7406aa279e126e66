#include "daemon/session_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/random.h"
#include "base/text.h"

namespace pjrt::daemon {

SessionTable::SessionTable(SessionTableOptions options,
                           std::function<absl::Time()> clock)
    : options_(options), clock_(std::move(clock)) {}

SessionTable::~SessionTable() {
  Shutdown(absl::UnavailableError("the daemon is shutting down"));
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Open(
    std::string client_name, std::string peer, absl::Duration lease,
    const Caller& caller) {
  if (client_name.size() > kMaxClientNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("client_name has %d bytes; at most %d are allowed",
                        client_name.size(), kMaxClientNameBytes));
  }
  if (lease <= absl::ZeroDuration()) lease = options_.default_lease;
  lease = std::min(lease, options_.max_lease);
  pjrt::MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError(
        "the daemon is shutting down and accepts no new sessions");
  }
  if (static_cast<int64_t>(sessions_.size()) >= options_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d sessions are open, the most this daemon allows (max_sessions); "
        "close one, or let idle ones expire",
        sessions_.size()));
  }
  if (caller.account != nullptr) {
    absl::Status status = caller.account->TakeSession();
    if (!status.ok()) {
      Audit("quota_refused", {{"tenant", caller.name()},
                              {"peer", peer},
                              {"reason", std::string(status.message())}});
      return status;
    }
  }
  uint64_t id;
  do {
    id = SecureRandomId();
  } while (sessions_.contains(id));
  auto session = std::make_shared<Session>(
      id, next_public_id_.fetch_add(1), std::move(client_name), std::move(peer),
      lease, clock_(), options_.session_limits, options_.cancellation,
      caller.account);
  session->SetUsage(std::make_shared<SessionUsage>(
      options_.device_ids,
      options_.client_usage == nullptr
          ? nullptr
          : options_.client_usage->For(session->client_name())));
  sessions_.emplace(id, session);
  return session;
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Lookup(
    uint64_t id, const Caller& caller) {
  std::shared_ptr<Session> session;
  {
    pjrt::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end()) session = it->second;
  }
  if (session != nullptr && !caller.anonymous() &&
      session->account() != caller.account) {
    session = nullptr;
  }
  if (session == nullptr) {
    return absl::NotFoundError(absl::StrFormat(
        "session %#x is not open (never opened, closed, or expired after its "
        "lease ran out); open a new session",
        id));
  }
  session->Touch(clock_());
  return session;
}

absl::StatusOr<SessionCloseStats> SessionTable::Close(uint64_t id,
                                                      const absl::Status& why) {
  std::shared_ptr<Session> session;
  {
    pjrt::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(
          absl::StrFormat("session %#x is not open", id));
    }
    session = std::move(it->second);
    sessions_.erase(it);
  }
  SessionCloseStats stats = session->Close(why);
  spdlog::info(
      "{} closed ({}): freed {} buffers, {} bytes, {} executables",
      session->DebugString(),
      why.ok() ? std::string("by its client") : EscapeForLog(why.message()),
      stats.buffers_freed, stats.bytes_freed, stats.executables_freed);
  closed_since_trim_.fetch_add(1);
  return stats;
}

absl::StatusOr<SessionCloseStats> SessionTable::CloseByPublicId(
    uint64_t public_id, const absl::Status& why) {
  uint64_t id = 0;
  {
    pjrt::MutexLock lock(&mu_);
    for (const auto& [key, session] : sessions_) {
      if (session->public_id() == public_id) id = key;
    }
  }
  if (id == 0) {
    return absl::NotFoundError(absl::StrFormat(
        "no open session has id %d (see `pjrtctl sessions`)", public_id));
  }
  return Close(id, why);
}

int SessionTable::ReapExpired() {
  absl::Time now = clock_();
  std::vector<uint64_t> expired;
  {
    pjrt::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) {
      if (session->Expired(now)) expired.push_back(id);
    }
  }
  int closed = 0;
  for (uint64_t id : expired) {
    if (Close(id, absl::DeadlineExceededError("its lease expired")).ok()) {
      ++closed;
    }
  }
  return closed;
}

void SessionTable::DetachAll(const absl::Status& why) {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    pjrt::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) sessions.push_back(session);
  }
  for (const auto& session : sessions) session->Detach(why);
}

void SessionTable::Shutdown(const absl::Status& why) {
  std::vector<uint64_t> ids;
  {
    pjrt::MutexLock lock(&mu_);
    shut_down_ = true;
    for (const auto& [id, session] : sessions_) ids.push_back(id);
  }
  for (uint64_t id : ids) Close(id, why).IgnoreError();
}

std::vector<SessionSummary> SessionTable::List() const {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    pjrt::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) sessions.push_back(session);
  }
  absl::Time now = clock_();
  std::vector<SessionSummary> out;
  out.reserve(sessions.size());
  for (const auto& session : sessions) out.push_back(session->Summarize(now));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.public_id < b.public_id;
  });
  return out;
}

int SessionTable::size() const {
  pjrt::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

int64_t SessionTable::buffer_count() const {
  pjrt::MutexLock lock(&mu_);
  int64_t count = 0;
  for (const auto& [id, session] : sessions_) count += session->buffer_count();
  return count;
}

std::pair<int64_t, int64_t> SessionTable::region_totals() const {
  pjrt::MutexLock lock(&mu_);
  std::pair<int64_t, int64_t> totals{0, 0};
  for (const auto& [id, session] : sessions_) {
    for (const auto& [handle, region] : session->Regions()) {
      totals.first++;
      totals.second += region->size();
    }
  }
  return totals;
}

int64_t SessionTable::executable_count() const {
  pjrt::MutexLock lock(&mu_);
  int64_t count = 0;
  for (const auto& [id, session] : sessions_) {
    count += session->executable_count();
  }
  return count;
}

}  // namespace pjrt::daemon
