// ProxySessions: the other tasks' part of this daemon's whole-cluster
// sessions (v1::OpenSessionRequest.whole_cluster).
//
// A whole-cluster session reaches another task's devices through a proxy
// session on that task: an ordinary session there, opened over the peer
// channel on the first call that needs it, holding the session's buffers
// and executable parts on that task. This class opens the proxies, forwards
// calls to them, and keeps them alive: a keeper thread renews their leases,
// deletes on their tasks what the client released here, and closes them
// once the client's session has ended. A proxy whose origin task dies ends
// with its lease (kProxyLease) and frees what it held.
//
// Thread-safe.
#ifndef PJRT_DAEMON_PROXY_SESSIONS_H_
#define PJRT_DAEMON_PROXY_SESSIONS_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "daemon/cluster.h"
#include "daemon/session.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"

namespace pjrt::daemon {

// A proxy's lease on its task, and how often the keeper renews it.
inline constexpr absl::Duration kProxyLease = absl::Seconds(30);
inline constexpr absl::Duration kProxyRenewal = absl::Seconds(5);

class ProxySessions {
 public:
  explicit ProxySessions(Cluster* cluster);
  // Stops the keeper and closes every proxy (all at once, within a couple
  // of seconds: a proxy not closed ends with its lease).
  ~ProxySessions();
  ProxySessions(const ProxySessions&) = delete;
  ProxySessions& operator=(const ProxySessions&) = delete;

  // The secret id of `session`'s proxy on `task`, opened on first use, and
  // opened anew when the task has restarted since (the old proxy went with
  // it, and so did what it held). UNAVAILABLE naming the task when it
  // cannot be reached.
  absl::StatusOr<uint64_t> ProxyOf(const std::shared_ptr<Session>& session,
                                   int task);

  // A context for a call forwarded to a peer on behalf of `caller` (may be
  // null): its deadline and cancellation carry over.
  std::unique_ptr<grpc::ClientContext> Context(
      const grpc::ServerContextBase* caller) const;
  v1::Peer::Stub* Stub(int task) { return cluster_->PeerStub(task); }

  // A forwarded call's failure, as this daemon's caller should see it: a
  // task that cannot be reached is named; the task's own errors pass on.
  absl::Status PeerError(int task, const grpc::Status& status) const;

  // Calls `method` of task `task`'s peer service with `request` on proxy
  // `proxy` (its session_id replaced), for `caller` (may be null).
  template <typename Request, typename Response>
  absl::Status Forward(const grpc::ServerContextBase* caller, int task,
                       uint64_t proxy, Request request, Response* response,
                       grpc::Status (v1::Peer::Stub::*method)(
                           grpc::ClientContext*, const Request&, Response*)) {
    request.set_session_id(proxy);
    std::unique_ptr<grpc::ClientContext> context = Context(caller);
    grpc::Status status =
        (Stub(task)->*method)(context.get(), request, response);
    if (!status.ok()) return PeerError(task, status);
    return absl::OkStatus();
  }

  // Deletes buffers, and executables, of proxy `proxy` on `task` (those
  // already gone passed over), waiting at most a couple of seconds.
  absl::Status DeleteRemoteBuffers(int task, uint64_t proxy,
                                   absl::Span<const uint64_t> handles);
  absl::Status DeleteRemoteExecutable(int task, uint64_t proxy,
                                      uint64_t handle);

  // Deletes on their tasks what `session` released (Session::
  // TakeRemoteReleases); what a task that does not answer could not take
  // is put back for the next try. The keeper does it every second; a call
  // that deletes calls it at once.
  void FlushReleases(Session& session);

 private:
  struct Entry {
    std::weak_ptr<Session> session;
    // Copied here: the session may be gone when its proxies are closed.
    absl::flat_hash_map<int, uint64_t> proxies;
  };

  void KeeperLoop();
  // Renews every live proxy's lease (one call per task, all at once).
  void Renew(const std::vector<std::shared_ptr<Session>>& live);
  // Closes proxies (task, id), all at once, within `timeout`.
  void CloseProxies(const std::vector<std::pair<int, uint64_t>>& proxies,
                    absl::Duration timeout);

  Cluster* const cluster_;
  pjrt::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // By session id.
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // How often the keeper renews: kProxyRenewal, or a third of the shortest
  // lease a task granted.
  absl::Duration renewal_ ABSL_GUARDED_BY(mu_) = kProxyRenewal;
  std::thread keeper_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_PROXY_SESSIONS_H_
