// SessionTable: all open sessions of the daemon, by secret id.
//
// Thread-safe. Lookups renew the session's lease. Expired sessions are closed
// by ReapExpired, which the daemon calls periodically.
#ifndef PJRT_DAEMON_SESSION_TABLE_H_
#define PJRT_DAEMON_SESSION_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "daemon/session.h"
#include "daemon/tenants.h"

namespace pjrt::daemon {

// Longest client name a session may have.
inline constexpr size_t kMaxClientNameBytes = 256;

struct SessionTableOptions {
  absl::Duration default_lease = absl::Seconds(60);
  absl::Duration max_lease = absl::Hours(24);
  // Sessions open at once.
  int max_sessions = 1024;
  // What each session may hold.
  SessionLimits session_limits;
  // The parent of every session's cancellation (the daemon's, cancelled at
  // shutdown); may be null.
  std::shared_ptr<const Cancellation> cancellation;
  // Each session's usage is added to its client name's totals here (may be
  // null); the time of runs on the local devices (these ids, by ordinal)
  // is accounted.
  ClientUsageTable* client_usage = nullptr;
  std::vector<int> device_ids;
};

class SessionTable {
 public:
  // `clock` returns the current time; tests pass a fake one.
  explicit SessionTable(SessionTableOptions options,
                        std::function<absl::Time()> clock = absl::Now);
  ~SessionTable();
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // Opens a session. `lease` of zero means the default; longer than the
  // maximum is clamped. UNAVAILABLE once Shutdown() has been called;
  // INVALID_ARGUMENT for a client name longer than kMaxClientNameBytes;
  // RESOURCE_EXHAUSTED when max_sessions are open.
  // RESOURCE_EXHAUSTED too when `caller`'s tenant is at its sessions
  // quota. The session belongs to `caller`'s tenant.
  absl::StatusOr<std::shared_ptr<Session>> Open(std::string client_name,
                                                std::string peer,
                                                absl::Duration lease,
                                                const Caller& caller = {});

  // The open session with secret id `id` of `caller`'s tenant, renewing its
  // lease. NOT_FOUND otherwise: a session of another tenant is reported
  // exactly as one that does not exist.
  absl::StatusOr<std::shared_ptr<Session>> Lookup(uint64_t id,
                                                  const Caller& caller);

  // Closes session `id`, freeing all it owns. NOT_FOUND if not open.
  // Close() of the session with this public id; NOT_FOUND naming it if
  // there is none.
  absl::StatusOr<SessionCloseStats> CloseByPublicId(uint64_t public_id,
                                                    const absl::Status& why);
  absl::StatusOr<SessionCloseStats> Close(uint64_t id, const absl::Status& why);

  // Closes every session whose lease has run out. Returns how many.
  int ReapExpired();

  // Ends every Attach stream, telling it `why`, without closing sessions.
  void DetachAll(const absl::Status& why);

  // Refuses new sessions and closes every open one, telling attachments
  // `why`.
  void Shutdown(const absl::Status& why);

  std::vector<SessionSummary> List() const;
  int size() const;
  // Buffers over all sessions.
  int64_t buffer_count() const;
  // Regions over all sessions, and their bytes.
  std::pair<int64_t, int64_t> region_totals() const;
  // Executable handles over all sessions.
  int64_t executable_count() const;
  // True if a session closed since the last call (the daemon then hands
  // the memory freed back to the system).
  bool TakeSessionsClosed() { return closed_since_trim_.exchange(0) > 0; }

 private:
  const SessionTableOptions options_;
  const std::function<absl::Time()> clock_;
  std::atomic<uint64_t> next_public_id_{1};
  std::atomic<int64_t> closed_since_trim_{0};

  mutable pjrt::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SESSION_TABLE_H_
