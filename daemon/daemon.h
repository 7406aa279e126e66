// Daemon: one running pjrtd: the runtime client, the session table, the gRPC
// server and its listeners, and the lease reaper.
//
// Start() returns once every listener accepts calls. Shutdown() is graceful:
// it refuses new calls, ends Attach streams, lets calls and executions in
// flight finish up to the shutdown timeout, cancels whatever still runs or
// waits after that, then frees every session's buffers.
#ifndef PJRT_DAEMON_DAEMON_H_
#define PJRT_DAEMON_DAEMON_H_

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "base/mutex.h"
#include "daemon/cluster.h"
#include "daemon/cross_host.h"
#include "daemon/data_channel.h"
#include "daemon/options.h"
#include "daemon/services.h"
#include "daemon/session_table.h"
#include "daemon/shared_memory.h"
#include "daemon/unix_listener.h"
#include "grpcpp/server.h"
#include "runtime/client.h"

namespace pjrt::daemon {

class Daemon {
 public:
  // In a cluster, Start() first waits for every peer (see Cluster::Form);
  // `stop_requested`, when given, is polled meanwhile and ends the wait
  // with CANCELLED when it returns true.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonOptions& options,
      std::function<bool()> stop_requested = nullptr);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The addresses actually listened on (port 0 resolved), in --listen order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  runtime::Client& client() { return *client_; }
  Cluster& cluster() { return *cluster_; }
  // Where the metrics are served ("http://IP:PORT/metrics"); empty when
  // --metrics-listen was not given.
  std::string metrics_url() const {
    return metrics_server_ != nullptr ? metrics_server_->url() : std::string();
  }

  // Graceful shutdown; idempotent.
  void Shutdown();

  // Re-reads the tenants file (SIGHUP). On an error the tenants in force
  // stay, and the error is logged and returned.
  absl::Status Reload();

 private:
  // Where the region server listens, and the client socket it sits beside.
  struct RegionSockets {
    // Empty without shared memory.
    std::string region_socket;
    // The first unix socket of --listen when the region socket is beside
    // it: the execute lanes sit beside it too, and both take its mode.
    std::optional<std::string> main_socket;
  };

  explicit Daemon(const DaemonOptions& options);
  // Runs the steps that follow, FormCluster to LogServing, in order; on an
  // error, the destructor stops what the steps before started.
  absl::Status Init(const std::function<bool()>& stop_requested);
  // The cluster, from this task's `platform`; with peers, the peer service
  // and its server, the wait for every peer, and the task transport (set in
  // `client_options`).
  absl::Status FormCluster(const device::Platform& platform,
                           const std::function<bool()>& stop_requested,
                           runtime::ClientOptions* client_options);
  // The runtime client on `platform` (its first device id set in
  // `client_options`), and the cross-host receives.
  absl::Status CreateClient(runtime::ClientOptions* client_options,
                            std::unique_ptr<device::Platform> platform);
  // The client authenticator, with the tenants file's tenants.
  absl::Status CreateAuthenticator();
  // The session table and the compile cache.
  void CreateSessionTable();
  // With shared memory: the region server, not yet listening, and where it
  // is to listen.
  absl::StatusOr<RegionSockets> CreateRegionServer();
  // The client services, and the admin token file. `region_socket` is what
  // ServerInfo tells clients (empty: none).
  absl::Status CreateServices(const std::string& region_socket);
  // Clusters of more than one task: the proxies and the services that run
  // other tasks' proxies here.
  void CreatePeerServices();
  // Every service counts into metrics_; serves them with --metrics-listen.
  absl::Status StartMetrics();
  // The gRPC server on every --listen address, and the data channels.
  absl::Status StartServer();
  // Once the server runs: the unix listeners the daemon accepts itself
  // (with tenants) and addresses_, from the ports the server found (by
  // --listen index). Shuts the server down on an error.
  absl::Status ResolveListeners(const std::vector<int>& ports);
  // Starts the region server, and the execute lanes beside it.
  absl::Status StartRegionServer(const RegionSockets& sockets);
  // Tells auth_ the uid and gid of the callers of unix_listeners_.
  void SetUpUnixPeerLookup();
  // The metrics' collector and the lease reaper.
  void StartBackgroundWork();
  // What is served, once it is.
  void LogServing() const;
  absl::Status StartPeerServer();
  // The data channel listener, beside the first TCP listener when it is
  // plaintext (see daemon/data_channel.h).
  absl::Status StartDataChannels(bool tls);
  void ReapLoop();
  // What the metrics read at each scrape.
  void CollectMetrics(Exposition& out);

  const DaemonOptions options_;
  // First: every part below may count into them.
  std::unique_ptr<ClientUsageTable> client_usage_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<PeerService> peer_service_;
  // Before client_, whose executables use it: destroyed after.
  std::unique_ptr<ExchangeDirectory> exchange_directory_;
  std::unique_ptr<GlooTransport> task_transport_;
  std::unique_ptr<runtime::Client> client_;
  // After client_: fails its receives before the devices go.
  std::unique_ptr<CrossHostReceives> receives_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<SessionTable> sessions_;
  std::unique_ptr<RegionServer> region_server_;
  std::unique_ptr<DataChannelServer> data_channels_;
  std::unique_ptr<ExecutableCache> compile_cache_;
  std::unique_ptr<ServerService> server_service_;
  std::unique_ptr<SessionService> session_service_;
  // --admin-token-file's token, written once the daemon serves (a start
  // that fails leaves alone the file of a daemon already serving).
  std::string admin_token_;
  bool admin_token_written_ = false;
  std::unique_ptr<BufferService> buffer_service_;
  std::unique_ptr<ExecutableService> executable_service_;
  // Whole-cluster sessions' proxies on the other tasks, and the services
  // that run the other tasks' proxies here (clusters of more than one task
  // only). The peer services take every caller as anonymous: peers prove
  // themselves with the cluster secret (see PeerService).
  std::unique_ptr<ProxySessions> proxies_;
  std::unique_ptr<Authenticator> peer_auth_;
  std::unique_ptr<BufferService> peer_buffer_service_;
  std::unique_ptr<ExecutableService> peer_executable_service_;
  std::unique_ptr<PeerService::ProxyTargets> proxy_targets_;
  // After executable_service_, whose Execute its lanes call: goes first.
  std::unique_ptr<ExecuteLaneServer> execute_lanes_;
  std::unique_ptr<grpc::Server> server_;
  // With tenants: the unix sockets, accepted by the daemon (see
  // UnixListener).
  std::vector<std::unique_ptr<UnixListener>> unix_listeners_;
  // Serves PeerService on this task's cluster address (clusters of more
  // than one task only).
  std::unique_ptr<grpc::Server> peer_server_;
  std::vector<std::string> addresses_;
  // Last: stopped first, while everything its scrapes read still exists.
  std::unique_ptr<MetricsServer> metrics_server_;

  // The parent of every session's cancellation: cancelled when a shutdown's
  // grace period is over.
  const std::shared_ptr<Cancellation> cancellation_;

  pjrt::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool reaper_stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// The host's physical memory in bytes.
int64_t PhysicalMemoryBytes();

// Prepares a unix socket path for listening: the folder must exist, and a
// socket file left by a daemon that is gone is removed. FAILED_PRECONDITION
// if a live process is listening there. `type` is the socket's type
// (SOCK_STREAM, or SOCK_SEQPACKET for the region socket): a socket of one
// type refuses connections of another, so a probe of the wrong type would
// take a live socket for a stale one.
absl::Status PrepareUnixSocketPath(const std::string& path,
                                   int type = SOCK_STREAM);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_DAEMON_H_
