// DaemonOptions: everything pjrtd can be told, from its command line and its
// TOML config file. The command line wins over the file; the file wins over
// the defaults.
#ifndef PJRT_DAEMON_OPTIONS_H_
#define PJRT_DAEMON_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pjrt::daemon {

inline constexpr char kDefaultListenAddress[] = "unix:///run/pjrtd/pjrtd.sock";

// What one client may cost the daemon outside device memory
// (--memory-limit), so that no client can exhaust the daemon's own memory,
// threads or descriptors. Every limit is documented in docs/limits.md with
// its TOML key; a request beyond one is RESOURCE_EXHAUSTED (INVALID_ARGUMENT
// for a value out of range) naming the limit.
struct DaemonLimits {
  // Sessions open at once.
  int max_sessions = 1024;
  // Buffers, executables and regions one session may hold at once.
  int64_t max_handles_per_session = int64_t{1} << 20;
  // Calls of one session that may wait at once for inputs whose contents
  // have not arrived (cross-host receives) or that another call is
  // donating; each such call holds a thread.
  int max_waiting_calls_per_session = 64;
  // Shared-memory regions: per session and in all, by count and bytes.
  // 0 bytes means the host's physical memory.
  int max_regions_per_session = 256;
  int max_regions = 4096;
  int64_t max_region_bytes_per_session = 0;
  int64_t max_region_bytes = 0;
  // Connections the region socket serves at once, per client process, per
  // user and in all.
  int max_region_connections_per_peer = 8;
  int max_region_connections_per_user = 64;
  int max_region_connections = 256;
  // Data channels (daemon/data_channel.h): per session, and in all.
  int max_data_channels_per_session = 8;
  int max_data_channels = 256;
  // Execute lanes (daemon/execute_lane.h): per session, and in all (each
  // holds a thread while open); 0 in all offers none.
  int max_execute_lanes_per_session = 4;
  int max_execute_lanes = 64;
  // Size of one program's text.
  int64_t max_program_bytes = int64_t{32} << 20;
  // The compile cache, by entries and by bytes (program text and compiled
  // code, estimated).
  int compile_cache_entries = 64;
  int64_t compile_cache_bytes = int64_t{1} << 30;
  // Longest collective timeout a program may ask for.
  absl::Duration max_collective_timeout = absl::Minutes(5);
  // Longest timeout a cross-host receive may ask for.
  absl::Duration max_receive_timeout = absl::Hours(24);
  // Programs compiled at once (0: one per core); more wait their turn.
  int max_concurrent_compiles = 0;
  // With tenants: executions admitted to a device and not finished, at
  // most; beyond, tenants take turns (see FairQueue). Smaller is fairer,
  // larger lets one tenant queue further ahead of its device.
  int fair_queue_depth = 2;
  // Threads gRPC may run handlers on; calls beyond get RESOURCE_EXHAUSTED.
  int max_handler_threads = 4096;
};

struct DaemonOptions {
  // `unix:///path` or `host:port` (port 0 picks a free port).
  std::vector<std::string> listen = {kDefaultListenAddress};
  // "host", "cuda" or "auto".
  std::string platform = "auto";
  int host_devices = 1;
  // Per device; 0 means the platform default.
  int64_t memory_limit_bytes = 0;
  // "synchronous", "compute-synchronized", "asynchronous", or empty for the
  // platform's default.
  std::string allocation_model;
  // Executions enqueued ahead of each device; 0 means the default.
  int queue_ahead = 0;
  // trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
  absl::Duration default_lease = absl::Seconds(60);
  absl::Duration max_lease = absl::Hours(24);
  // How long a graceful shutdown waits for calls in flight.
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // When set, the resolved listen addresses are written here, one per line,
  // once the daemon accepts calls.
  std::string address_file;

  // Where compiled GPU kernels (cubins) are kept across restarts, so that a
  // restarted daemon loads a known program without NVRTC; empty turns the
  // persistent cache off. systemd's CacheDirectory creates the default.
  std::string compile_cache_dir = "/var/cache/pjrtd";

  // When set, the daemon writes a fresh random admin token here (mode 600)
  // at start-up and removes it at shutdown; whoever can read it may close
  // other clients' sessions (pjrtctl sessions --close).
  std::string admin_token_file;

  // Tenants (docs/security.md): who may call, as what role, within what
  // quotas. Empty: every caller is the anonymous tenant. Reloaded on SIGHUP.
  std::string tenants_file;
  // TLS on the TCP listeners (PEM files; reloaded when they change and on
  // SIGHUP). With a client CA, clients must present a certificate it signed
  // (mutual TLS); its subject may name a tenant.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Allow a plaintext TCP listener on a non-loopback address without TLS
  // and tenants (anyone who can reach it may use the daemon).
  bool insecure_tcp = false;

  // Whether clients on this host may register shared-memory regions (over
  // an abstract unix socket named in ServerInfo.region_socket).
  bool shared_memory = true;

  // Whether TCP clients may move arrays over data channels (raw TCP
  // connections beside gRPC; offered beside plaintext TCP listeners only).
  bool data_channels = true;

  // Serve Prometheus metrics over HTTP at http://ADDRESS/metrics (IP:PORT;
  // empty: not served). They tell of every tenant's work: bind them where
  // only the monitoring can reach.
  std::string metrics_listen;

  // Cluster membership. `cluster` lists the peer address (host:port) of
  // every task, by task id; empty means a cluster of this daemon alone. The
  // daemon serves its peers on cluster[task_id], apart from its clients.
  int task_id = 0;
  // Take the task id from this host's name instead (see
  // TaskIdFromHostname): a StatefulSet's pods are named by their ordinal.
  bool task_id_from_hostname = false;
  std::vector<std::string> cluster;
  // File holding the secret the tasks present to each other; required when
  // the cluster has more than one task.
  std::string cluster_secret_file;
  // PEM of the CA that signed every task's TLS certificate (--tls-cert):
  // tasks then serve and call each other over TLS. Empty: plaintext.
  std::string cluster_tls_ca;
  // How long start-up waits for every peer to answer its handshake.
  absl::Duration cluster_timeout = absl::Minutes(5);
  // How long a cross-host receive waits for its data by default.
  absl::Duration receive_timeout = absl::Minutes(5);

  DaemonLimits limits;
};

// Result of parsing a command line: options to run with, or an exit code
// (0 after --help or --version, 2 after a usage error, with the message
// already printed).
struct ParsedCommandLine {
  DaemonOptions options;
  std::optional<int> exit_code;
};

ParsedCommandLine ParseCommandLine(int argc, char** argv);

// Applies the keys of a TOML document to `options`. INVALID_ARGUMENT naming
// the key for an unknown key or a value of the wrong type.
absl::Status ApplyConfigText(absl::string_view toml_text,
                             absl::string_view source_name,
                             DaemonOptions* options);

// Checks the options together: INVALID_ARGUMENT naming the bad one.
absl::Status ValidateOptions(const DaemonOptions& options);

// The task id a host name carries: the number after its last '-' (a
// Kubernetes StatefulSet names its pods "<set>-<ordinal>"), from a plain
// host name or the first label of a qualified one. INVALID_ARGUMENT naming
// the host name when it has none.
absl::StatusOr<int> TaskIdFromHostname(absl::string_view hostname);

// The contents of a file that only its owner may read or write (mode 600
// or 400): INVALID_ARGUMENT naming `what` and the file otherwise, or when
// it cannot be read.
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path,
                                            absl::string_view what);

// Reads the cluster secret: the file's contents without trailing
// whitespace. INVALID_ARGUMENT when the file cannot be read, is empty, or
// can be read by others than its owner (the secret would not be one).
absl::StatusOr<std::string> ReadClusterSecret(const std::string& path);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_OPTIONS_H_
