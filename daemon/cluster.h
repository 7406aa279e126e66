// Cluster: this daemon's place among the daemons (tasks) that serve one
// job together: who the peers are, how to reach them, the secret they
// share, and the devices of every task with their global ids.
//
// A daemon started without --cluster is a cluster of one task (task 0) with
// no peers. Otherwise start-up runs Form(): the daemon calls the Handshake
// of every peer (retrying with backoff while a peer is down) and refuses to
// start if a peer holds another secret, speaks no common protocol revision,
// or was started with another cluster list. Global device ids then follow
// task order: task k's devices come after those of tasks 0..k-1, so every
// task numbers every device alike.
//
// Thread-safe once formed.
#ifndef PJRT_DAEMON_CLUSTER_H_
#define PJRT_DAEMON_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "device/platform.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "pjrt/v1/cluster.grpc.pb.h"
#include "pjrt/v1/server.pb.h"

namespace pjrt::daemon {

// HTTP/2 flow-control window of peer transfers, each way.
inline constexpr int kPeerWindowBytes = 16 << 20;

// Metadata key of the cluster secret on Peer calls.
inline constexpr char kClusterSecretMetadata[] = "x-pjrt-cluster-secret";

struct ClusterConfig {
  int task_id = 0;
  // Peer addresses by task id; empty for a cluster of one.
  std::vector<std::string> addresses;
  std::string secret;
  // PEM of the CA that signed every task's certificate: peers are called
  // over TLS, checked against it. Empty: plaintext.
  std::string tls_ca_pem;
  absl::Duration form_timeout = absl::Minutes(5);
};

class Cluster {
 public:
  // `self` describes this task's devices (task_id, platform, devices with
  // local_hardware_id, kind and memory_bytes).
  Cluster(ClusterConfig config, v1::TaskTopology self);
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int task_id() const { return config_.task_id; }
  int task_count() const {
    return config_.addresses.empty()
               ? 1
               : static_cast<int>(config_.addresses.size());
  }
  bool multi_task() const { return task_count() > 1; }
  uint64_t incarnation() const { return self_.incarnation(); }
  // The incarnation of `task` as this task last saw it (its handshake).
  // REQUIRES: formed().
  uint64_t incarnation_of(int task) const;
  const v1::TaskTopology& self() const { return self_; }
  // The peer address of `task` ("" for a cluster of one).
  const std::string& address(int task) const;

  // Handshakes with every peer until all have answered, or fails: with
  // DEADLINE_EXCEEDED naming the peers still silent after the form timeout,
  // or with the reason a peer was refused (secret, protocol, cluster list).
  // `stop` ends the wait early (shutdown). Idempotent once formed.
  absl::Status Form(const std::function<bool()>& stop);
  bool formed() const;

  // Global id of `task`'s first device. REQUIRES: formed().
  int first_device_id(int task) const;
  // Every device of the cluster, with global ids; addressable for ours.
  // REQUIRES: formed().
  std::vector<v1::Device> AllDevices() const;
  // The task that owns global device `id`; INVALID_ARGUMENT naming the id
  // and the valid range when there is none.
  absl::StatusOr<int> TaskOfDevice(int id) const;

  // Peer calls: a context with the secret attached, and the stub of `task`.
  void PrepareContext(grpc::ClientContext* context) const;
  v1::Peer::Stub* PeerStub(int task);
  // OK if `context` carries our secret; UNAUTHENTICATED otherwise.
  absl::Status CheckSecret(const grpc::ServerContext& context) const;
  // Checks a caller's handshake against this task: its cluster list, the
  // task id it expected here, and the protocol versions.
  absl::Status CheckHandshake(const v1::HandshakeRequest& request) const;
  // CheckHandshake, and then what a known task may not change: a task that
  // restarts must come back with as many devices as it had when the
  // cluster formed (every task's global ids depend on it). Records the
  // caller's new incarnation.
  absl::Status AcceptHandshake(const v1::HandshakeRequest& request);

  // Calls every peer now (Handshake, `timeout` each) and reports which
  // answer.
  v1::ClusterStatus Status(absl::Duration timeout);

  // Other tasks whose peer channel is connected now, without calling them
  // (an idle channel is asked to connect, for the next count).
  int PeersConnected();

 private:
  absl::Status HandshakeWith(int task, absl::Duration timeout,
                             v1::TaskTopology* callee);

  const ClusterConfig config_;
  const v1::TaskTopology self_;

  mutable pjrt::Mutex mu_;
  // By task id; filled by Form (ours at once).
  std::vector<v1::TaskTopology> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> known_ ABSL_GUARDED_BY(mu_);
  bool formed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<v1::Peer::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

// Which revisions of the pjrt.v1 protocol two ranges share, if any.
bool ProtocolRangesOverlap(uint32_t min_a, uint32_t max_a, uint32_t min_b,
                           uint32_t max_b);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_CLUSTER_H_
