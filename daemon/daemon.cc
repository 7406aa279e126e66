#include "daemon/daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/byte_size.h"
#include "base/log.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "base/version.h"
#include "daemon/unix_listener.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_builder.h"

namespace pjrt::daemon {
namespace {

// Largest request the daemon accepts: room for upload chunks (1 MiB) and,
// later, large HLO programs.
constexpr int kMaxReceiveMessageBytes = 64 << 20;

// "unix:///run/x.sock" and "unix:/run/x.sock" name the same socket.
std::optional<std::string> UnixSocketPath(const std::string& address) {
  absl::string_view rest = address;
  if (!absl::ConsumePrefix(&rest, "unix:")) return std::nullopt;
  if (absl::StartsWith(rest, "//")) rest.remove_prefix(2);
  return std::string(rest);
}

// Writes `token` to `path`, readable by the daemon's user only, replacing
// what was there (a file left by an earlier run) in one step.
absl::Status WriteAdminToken(const std::string& path,
                             const std::string& token) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot write the admin token file %s: %s", path,
                        std::strerror(errno)));
  }
  bool ok = fchmod(fd, 0600) == 0 &&
            write(fd, token.data(), token.size()) ==
                static_cast<ssize_t>(token.size()) &&
            write(fd, "\n", 1) == 1;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot write the admin token file %s: %s", path,
                        std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The TLS credentials of the TCP listeners. gRPC re-reads the files every
// kTlsRefreshSeconds, so a renewed certificate is served without a restart
// and without dropping connections; the files are checked here first so
// that a wrong path fails the start, not every handshake.
constexpr unsigned kTlsRefreshSeconds = 2;

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
MakeTlsServerCredentials(const DaemonOptions& options) {
  for (const std::string* path :
       {&options.tls_cert, &options.tls_key, &options.tls_client_ca}) {
    if (path->empty()) continue;
    if (access(path->c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot read TLS file %s: %s", *path, std::strerror(errno)));
    }
  }
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          options.tls_key, options.tls_cert, options.tls_client_ca,
          kTlsRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions tls_options(provider);
  tls_options.watch_identity_key_cert_pairs();
  if (!options.tls_client_ca.empty()) {
    tls_options.watch_root_certs();
    tls_options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    tls_options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(tls_options);
}

}  // namespace

absl::Status PrepareUnixSocketPath(const std::string& path, int type) {
  std::filesystem::path p(path);
  std::error_code ec;
  std::filesystem::path dir = p.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot listen on unix socket %s: folder %s does not exist (create it, "
        "or pass another --listen address)",
        path, dir.string()));
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unix socket path %s is %d bytes long; the limit is %d",
                        path, path.size(), sizeof(addr.sun_path) - 1));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot listen on %s: a file that is not a socket is in the way",
        path));
  }
  // Is someone still serving on it?
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrFormat("socket(): %s", std::strerror(errno)));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
  if (rc == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "another process is already listening on %s; stop it or choose "
        "another --listen address",
        path));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot remove stale socket %s: %s", path, std::strerror(errno)));
  }
  spdlog::info("removed stale socket {}", path);
  return absl::OkStatus();
}

namespace {

// Most client names the metrics give series of their own.
constexpr int kMetricClientNames = 16;

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcInterceptors(DaemonMetrics* metrics) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      creators;
  creators.push_back(std::make_unique<RpcMetricsFactory>(metrics));
  return creators;
}

// The runtime client's options; the task transport and the first device id
// come once the cluster has formed.
absl::StatusOr<runtime::ClientOptions> RuntimeClientOptions(
    const DaemonOptions& options) {
  runtime::ClientOptions client_options;
  client_options.platform = options.platform;
  client_options.host_device_count = options.host_devices;
  client_options.memory_limit_bytes = options.memory_limit_bytes;
  client_options.compile_cache_dir = options.compile_cache_dir;
  // The runtime paces the synchronous model at one execution in flight, as
  // an in-process client would. A daemon's clients pipeline dependent steps
  // over the wire (ExecuteStream), and at one in flight every step would
  // wait for the one before it to finish, so the daemon lets every model
  // queue ahead by default (the pacing is not needed for correctness).
  client_options.queue_ahead =
      options.queue_ahead > 0 ? options.queue_ahead
                              : device::LocalDeviceState::kDefaultQueueAhead;
  client_options.task_id = options.task_id;
  if (!options.allocation_model.empty()) {
    PJRT_ASSIGN_OR_RETURN(
        client_options.allocation_model,
        device::ParseAllocationModel(options.allocation_model));
  }
  return client_options;
}

// What this task tells its peers about itself.
v1::TaskTopology SelfTopology(const DaemonOptions& options,
                              const device::Platform& platform) {
  v1::TaskTopology self;
  self.set_task_id(options.task_id);
  self.set_build_version(kBuildVersion);
  self.set_protocol_version_min(kProtocolRevisionMin);
  self.set_protocol_version_max(kProtocolRevisionMax);
  self.set_platform(platform.name());
  for (int ordinal = 0; ordinal < platform.device_count(); ++ordinal) {
    device::DeviceDescription description = platform.Describe(ordinal);
    v1::Device* device = self.add_devices();
    device->set_local_hardware_id(ordinal);
    device->set_kind(description.kind);
    device->set_memory_bytes(options.memory_limit_bytes > 0
                                 ? options.memory_limit_bytes
                                 : description.memory_bytes);
  }
  for (const std::string& address : options.cluster) self.add_cluster(address);
  self.set_incarnation(SecureRandomId());
  return self;
}

// The cluster's configuration, with its secret and TLS CA read from their
// files.
absl::StatusOr<ClusterConfig> MakeClusterConfig(const DaemonOptions& options) {
  ClusterConfig cluster_config{.task_id = options.task_id,
                               .addresses = options.cluster,
                               .form_timeout = options.cluster_timeout};
  if (options.cluster.size() > 1) {
    PJRT_ASSIGN_OR_RETURN(cluster_config.secret,
                          ReadClusterSecret(options.cluster_secret_file));
    if (!options.cluster_tls_ca.empty()) {
      std::ifstream file(options.cluster_tls_ca);
      std::stringstream text;
      text << file.rdbuf();
      if (!file || text.str().empty()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("cannot read the cluster's TLS CA file %s",
                            options.cluster_tls_ca));
      }
      cluster_config.tls_ca_pem = text.str();
    }
  } else {
    // A cluster of one has no peers; the peer list is only its own.
    cluster_config.addresses.clear();
  }
  return cluster_config;
}

// Adds a listening port to `builder` for every --listen address but, with
// tenants, the unix sockets (the daemon accepts those itself); each port
// found goes to the same index of `ports`, which must outlive the server's
// start. Warns of every TCP address served in plaintext.
absl::Status AddListeningPorts(
    const DaemonOptions& options,
    const std::shared_ptr<grpc::ServerCredentials>& tls,
    grpc::ServerBuilder* builder, std::vector<int>* ports) {
  for (size_t i = 0; i < options.listen.size(); ++i) {
    const std::string& address = options.listen[i];
    if (auto path = UnixSocketPath(address)) {
      PJRT_RETURN_IF_ERROR(PrepareUnixSocketPath(*path));
      // A unix socket's access is its file mode. With tenants the daemon
      // accepts its connections itself (see Daemon::ResolveListeners), to
      // learn each caller's uid and gid.
      if (options.tenants_file.empty()) {
        builder->AddListeningPort(address, grpc::InsecureServerCredentials(),
                                  &(*ports)[i]);
      }
      continue;
    }
    if (tls == nullptr && !options.insecure_tcp) {
      spdlog::warn("{} serves plaintext: only this host can reach it", address);
    } else if (tls == nullptr) {
      spdlog::warn(
          "{} serves PLAINTEXT to anyone who can reach it (--insecure-tcp): "
          "tokens and data cross the network unencrypted",
          address);
    }
    builder->AddListeningPort(
        address, tls != nullptr ? tls : grpc::InsecureServerCredentials(),
        &(*ports)[i]);
  }
  return absl::OkStatus();
}

}  // namespace

Daemon::Daemon(const DaemonOptions& options)
    : options_(options), cancellation_(std::make_shared<Cancellation>()) {}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 34;  // 16 GiB
  return static_cast<int64_t>(pages) * page_size;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const DaemonOptions& options, std::function<bool()> stop_requested) {
  PJRT_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Daemon> daemon(new Daemon(options));
  if (stop_requested == nullptr) stop_requested = [] { return false; };
  // On error, the destructor stops what Init started.
  PJRT_RETURN_IF_ERROR(daemon->Init(stop_requested));
  return daemon;
}

absl::Status Daemon::StartPeerServer() {
  const std::string& address = options_.cluster[options_.task_id];
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(
      RpcInterceptors(metrics_.get()));
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // A port another process serves is an error, not shared (SO_REUSEPORT
  // would split the peers between two daemons).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                             kPeerWindowBytes);
  int port = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (!options_.cluster_tls_ca.empty()) {
    // Peers prove themselves with the cluster secret, not certificates.
    DaemonOptions server_only = options_;
    server_only.tls_client_ca.clear();
    PJRT_ASSIGN_OR_RETURN(credentials, MakeTlsServerCredentials(server_only));
  } else {
    spdlog::warn(
        "peers of task {} talk in plaintext: give --tls-cert, "
        "--tls-key and --cluster-tls-ca to encrypt cross-host data",
        options_.task_id);
  }
  builder.AddListeningPort(address, credentials, &port);
  builder.RegisterService(peer_service_.get());
  peer_server_ = builder.BuildAndStart();
  if (peer_server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "could not listen for peers on %s, this task's (%d) entry of "
        "--cluster (address in use, or not an address of this host?)",
        address, options_.task_id));
  }
  spdlog::info("task {} of {}: serving peers on {}", options_.task_id,
               options_.cluster.size(), address);
  return absl::OkStatus();
}

absl::Status Daemon::Init(const std::function<bool()>& stop_requested) {
  // The unix sockets to serve are checked before anything is made (the
  // region and lane sockets beside them are checked, with their own socket
  // types, just before they are made): a daemon started on the paths of one
  // that serves must leave that one's side sockets and admin token file
  // alone on its way out.
  for (const std::string& address : options_.listen) {
    if (auto path = UnixSocketPath(address)) {
      PJRT_RETURN_IF_ERROR(PrepareUnixSocketPath(*path));
    }
  }
  client_usage_ = std::make_unique<ClientUsageTable>(kMetricClientNames);
  metrics_ = std::make_unique<DaemonMetrics>(client_usage_.get());
  PJRT_ASSIGN_OR_RETURN(runtime::ClientOptions client_options,
                        RuntimeClientOptions(options_));
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<device::Platform> platform,
                        runtime::CreatePlatform(client_options));
  PJRT_RETURN_IF_ERROR(FormCluster(*platform, stop_requested, &client_options));
  PJRT_RETURN_IF_ERROR(CreateClient(&client_options, std::move(platform)));
  PJRT_RETURN_IF_ERROR(CreateAuthenticator());
  CreateSessionTable();
  PJRT_ASSIGN_OR_RETURN(const RegionSockets region_sockets,
                        CreateRegionServer());
  PJRT_RETURN_IF_ERROR(CreateServices(region_sockets.region_socket));
  if (peer_service_ != nullptr) CreatePeerServices();
  PJRT_RETURN_IF_ERROR(StartMetrics());
  PJRT_RETURN_IF_ERROR(StartServer());
  if (region_server_ != nullptr) {
    PJRT_RETURN_IF_ERROR(StartRegionServer(region_sockets));
  }
  if (!options_.admin_token_file.empty()) {
    PJRT_RETURN_IF_ERROR(
        WriteAdminToken(options_.admin_token_file, admin_token_));
    admin_token_written_ = true;
  }
  if (!unix_listeners_.empty()) SetUpUnixPeerLookup();
  StartBackgroundWork();
  LogServing();
  return absl::OkStatus();
}

absl::Status Daemon::FormCluster(const device::Platform& platform,
                                 const std::function<bool()>& stop_requested,
                                 runtime::ClientOptions* client_options) {
  v1::TaskTopology self = SelfTopology(options_, platform);
  PJRT_ASSIGN_OR_RETURN(ClusterConfig cluster_config,
                        MakeClusterConfig(options_));
  cluster_ = std::make_unique<Cluster>(std::move(cluster_config), self);
  if (!cluster_->multi_task()) return absl::OkStatus();
  peer_service_ = std::make_unique<PeerService>(cluster_.get());
  peer_service_->SetMetrics(metrics_.get());
  // Task 0 keeps the cluster's rendezvous for collectives across tasks.
  if (options_.task_id == 0) {
    exchange_directory_ = std::make_unique<ExchangeDirectory>();
    peer_service_->SetDirectory(exchange_directory_.get());
  }
  PJRT_RETURN_IF_ERROR(StartPeerServer());
  PJRT_RETURN_IF_ERROR(cluster_->Form(stop_requested));
  task_transport_ = std::make_unique<GlooTransport>(cluster_.get(),
                                                    exchange_directory_.get());
  if (!options_.cluster_tls_ca.empty()) {
    spdlog::warn(
        "the cluster's TLS covers the peer channel only: collectives "
        "across tasks move their data over Gloo's TCP transport "
        "unencrypted");
  }
  client_options->task_transport = task_transport_.get();
  return absl::OkStatus();
}

absl::Status Daemon::CreateClient(runtime::ClientOptions* client_options,
                                  std::unique_ptr<device::Platform> platform) {
  client_options->first_device_id = cluster_->first_device_id(options_.task_id);
  PJRT_ASSIGN_OR_RETURN(
      client_, runtime::Client::Create(*client_options, std::move(platform)));
  receives_ = std::make_unique<CrossHostReceives>(
      client_.get(), options_.task_id, cluster_->incarnation());
  if (peer_service_ != nullptr) peer_service_->SetReceives(receives_.get());
  return absl::OkStatus();
}

absl::Status Daemon::CreateAuthenticator() {
  auth_ = std::make_unique<Authenticator>(
      static_cast<int>(client_->devices().size()));
  if (!options_.tenants_file.empty()) {
    PJRT_ASSIGN_OR_RETURN(auto tenants, LoadTenantsFile(options_.tenants_file));
    spdlog::info("admitting the {} tenants of {}", tenants.size(),
                 options_.tenants_file);
    auth_->Configure(std::move(tenants), options_.tenants_file);
  }
  return absl::OkStatus();
}

void Daemon::CreateSessionTable() {
  const DaemonLimits& limits = options_.limits;
  // Region byte limits of 0 mean the host's physical memory.
  const int64_t physical = PhysicalMemoryBytes();
  SessionLimits session_limits{
      .max_handles = limits.max_handles_per_session,
      .max_waiting_calls = limits.max_waiting_calls_per_session,
      .max_regions = limits.max_regions_per_session,
      .max_region_bytes = limits.max_region_bytes_per_session > 0
                              ? limits.max_region_bytes_per_session
                              : physical,
      .max_data_channels = limits.max_data_channels_per_session};
  std::vector<int> device_ids;
  for (const runtime::Device* device : client_->devices()) {
    device_ids.push_back(device->id());
  }
  sessions_ = std::make_unique<SessionTable>(
      SessionTableOptions{.default_lease = options_.default_lease,
                          .max_lease = options_.max_lease,
                          .max_sessions = limits.max_sessions,
                          .session_limits = session_limits,
                          .cancellation = cancellation_,
                          .client_usage = client_usage_.get(),
                          .device_ids = device_ids});
  compile_cache_ = std::make_unique<ExecutableCache>(
      limits.compile_cache_entries, limits.compile_cache_bytes,
      [](const runtime::Executable& e) { return e.host_memory_bytes(); });
}

absl::StatusOr<Daemon::RegionSockets> Daemon::CreateRegionServer() {
  // The region socket: beside the first unix socket clients connect to,
  // with its permissions (so that only who may use the daemon may register
  // regions); abstract, and unique to this run, when there is none.
  RegionSockets sockets;
  if (!options_.shared_memory) return sockets;
  for (const std::string& address : options_.listen) {
    if (auto path = UnixSocketPath(address)) {
      sockets.main_socket = *path;
      break;
    }
  }
  sockaddr_un probe{};
  if (sockets.main_socket.has_value() &&
      sockets.main_socket->size() + 9 <= sizeof(probe.sun_path) - 1) {
    sockets.region_socket = *sockets.main_socket + ".regions";
    PJRT_RETURN_IF_ERROR(
        PrepareUnixSocketPath(sockets.region_socket, SOCK_SEQPACKET));
  } else {
    sockets.main_socket.reset();
    sockets.region_socket =
        absl::StrFormat("@pjrtd-regions-%d-%016x", getpid(), SecureRandomId());
  }
  const DaemonLimits& limits = options_.limits;
  // Region byte limits of 0 mean the host's physical memory.
  const int64_t physical = PhysicalMemoryBytes();
  region_server_ = std::make_unique<RegionServer>(
      sessions_.get(),
      RegionServerOptions{
          .max_connections_per_peer = limits.max_region_connections_per_peer,
          .max_connections_per_user = limits.max_region_connections_per_user,
          .max_connections = limits.max_region_connections,
          .max_regions = limits.max_regions,
          .max_region_bytes =
              limits.max_region_bytes > 0 ? limits.max_region_bytes : physical,
          .platform = client_->platform()});
  return sockets;
}

absl::Status Daemon::CreateServices(const std::string& region_socket) {
  const DaemonLimits& limits = options_.limits;
  server_service_ = std::make_unique<ServerService>(
      client_.get(), cluster_.get(), receives_.get(), sessions_.get(),
      auth_.get(), compile_cache_.get(), region_socket);
  if (!options_.admin_token_file.empty()) {
    admin_token_ =
        absl::StrFormat("%016x%016x", SecureRandomId(), SecureRandomId());
  }
  session_service_ = std::make_unique<SessionService>(
      sessions_.get(), auth_.get(), admin_token_);
  buffer_service_ = std::make_unique<BufferService>(
      client_.get(), cluster_.get(), receives_.get(), sessions_.get(),
      auth_.get(), options_.receive_timeout, limits.max_receive_timeout);
  executable_service_ = std::make_unique<ExecutableService>(
      client_.get(), cluster_.get(), sessions_.get(), auth_.get(),
      compile_cache_.get(), limits);
  return absl::OkStatus();
}

void Daemon::CreatePeerServices() {
  const DaemonLimits& limits = options_.limits;
  proxies_ = std::make_unique<ProxySessions>(cluster_.get());
  buffer_service_->SetProxies(proxies_.get());
  executable_service_->SetProxies(proxies_.get());
  peer_auth_ = std::make_unique<Authenticator>(
      static_cast<int>(client_->devices().size()));
  peer_buffer_service_ = std::make_unique<BufferService>(
      client_.get(), cluster_.get(), receives_.get(), sessions_.get(),
      peer_auth_.get(), options_.receive_timeout, limits.max_receive_timeout);
  peer_executable_service_ = std::make_unique<ExecutableService>(
      client_.get(), cluster_.get(), sessions_.get(), peer_auth_.get(),
      compile_cache_.get(), limits);
  peer_executable_service_->ShareCompileSlots(*executable_service_);
  proxy_targets_ = std::make_unique<PeerService::ProxyTargets>(
      PeerService::ProxyTargets{.sessions = sessions_.get(),
                                .tenants = auth_.get(),
                                .buffers = peer_buffer_service_.get(),
                                .executables = peer_executable_service_.get()});
  peer_service_->SetProxyTargets(proxy_targets_.get());
}

absl::Status Daemon::StartMetrics() {
  for (BufferService* service :
       {buffer_service_.get(), peer_buffer_service_.get()}) {
    if (service != nullptr) service->SetMetrics(metrics_.get());
  }
  for (ExecutableService* service :
       {executable_service_.get(), peer_executable_service_.get()}) {
    if (service != nullptr) service->SetMetrics(metrics_.get());
  }
  server_service_->SetMetrics(metrics_.get());
  if (!options_.metrics_listen.empty()) {
    PJRT_ASSIGN_OR_RETURN(
        metrics_server_,
        MetricsServer::Start(options_.metrics_listen, metrics_.get()));
    server_service_->SetMetricsUrl(metrics_server_->url());
    spdlog::info("serving metrics on {}", metrics_server_->url());
  }
  return absl::OkStatus();
}

absl::Status Daemon::StartServer() {
  grpc::EnableDefaultHealthCheckService(true);
  // grpcurl and other tools list and describe the services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(
      RpcInterceptors(metrics_.get()));
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // However many calls wait, the daemon's threads stay bounded: gRPC
  // answers calls beyond with RESOURCE_EXHAUSTED.
  grpc::ResourceQuota quota("pjrtd");
  quota.SetMaxThreads(options_.limits.max_handler_threads);
  builder.SetResourceQuota(quota);
  // A TCP port another process serves is an error, as a unix socket is:
  // with SO_REUSEPORT two daemons would split the clients between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Detect clients whose host vanished without closing the connection, so
  // that their sessions end.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (!options_.tls_cert.empty()) {
    PJRT_ASSIGN_OR_RETURN(tls, MakeTlsServerCredentials(options_));
  }
  std::vector<int> ports(options_.listen.size(), 0);
  PJRT_RETURN_IF_ERROR(AddListeningPorts(options_, tls, &builder, &ports));
  PJRT_RETURN_IF_ERROR(StartDataChannels(tls != nullptr));
  builder.RegisterService(server_service_.get());
  builder.RegisterService(session_service_.get());
  builder.RegisterService(buffer_service_.get());
  builder.RegisterService(executable_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "could not listen on %s (address in use, bad address, or no "
        "permission; see the log above)",
        absl::StrJoin(options_.listen, ", ")));
  }
  return ResolveListeners(ports);
}

absl::Status Daemon::ResolveListeners(const std::vector<int>& ports) {
  for (size_t i = 0; i < options_.listen.size(); ++i) {
    const std::string& address = options_.listen[i];
    if (auto path = UnixSocketPath(address)) {
      if (!options_.tenants_file.empty()) {
        auto listener = UnixListener::Start(*path, server_.get());
        if (!listener.ok()) {
          server_->Shutdown();
          return listener.status();
        }
        unix_listeners_.push_back(*std::move(listener));
      }
      addresses_.push_back(address);
      continue;
    }
    if (ports[i] == 0) {
      server_->Shutdown();
      return absl::UnavailableError(
          absl::StrFormat("could not listen on %s", address));
    }
    absl::string_view host = address;
    size_t colon = host.rfind(':');
    host = host.substr(0, colon);
    addresses_.push_back(absl::StrFormat("%s:%d", host, ports[i]));
  }
  return absl::OkStatus();
}

absl::Status Daemon::StartRegionServer(const RegionSockets& sockets) {
  const DaemonLimits& limits = options_.limits;
  const std::optional<std::string>& main_socket = sockets.main_socket;
  std::optional<unsigned> mode;
  struct stat st;
  if (main_socket.has_value() && stat(main_socket->c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  }
  PJRT_RETURN_IF_ERROR(region_server_->Start(sockets.region_socket, mode));
  // Execute lanes for the same clients, beside the region socket.
  if (limits.max_execute_lanes > 0 &&
      limits.max_execute_lanes_per_session > 0) {
    std::string lane_socket = main_socket.has_value()
                                  ? *main_socket + ".lanes"
                                  : absl::StrFormat("@pjrtd-lanes-%d-%016x",
                                                    getpid(), SecureRandomId());
    if (main_socket.has_value()) {
      PJRT_RETURN_IF_ERROR(PrepareUnixSocketPath(lane_socket));
    }
    ExecutableService* executables = executable_service_.get();
    execute_lanes_ = std::make_unique<ExecuteLaneServer>(
        sessions_.get(),
        ExecuteLaneOptions{
            .max_lanes_per_session = limits.max_execute_lanes_per_session,
            .max_lanes = limits.max_execute_lanes},
        [executables](const std::shared_ptr<Session>& session,
                      const v1::ExecuteRequest& request,
                      v1::ExecuteResponse* response,
                      std::shared_ptr<Cancellation> call) {
          return executables->ExecuteOnLane(session, request, response,
                                            std::move(call));
        });
    PJRT_RETURN_IF_ERROR(execute_lanes_->Start(lane_socket, mode));
    server_service_->SetExecuteLanes(execute_lanes_.get());
  }
  return absl::OkStatus();
}

void Daemon::SetUpUnixPeerLookup() {
  auth_->SetUnixPeerLookup([this](const std::string& peer)
                               -> std::optional<std::pair<uint32_t, uint32_t>> {
    for (const auto& listener : unix_listeners_) {
      if (auto found = listener->Lookup(peer)) {
        return std::make_pair(static_cast<uint32_t>(found->uid),
                              static_cast<uint32_t>(found->gid));
      }
    }
    return std::nullopt;
  });
}

void Daemon::StartBackgroundWork() {
  metrics_->AddCollector([this](Exposition& out) { CollectMetrics(out); });
  reaper_ = std::thread([this] { ReapLoop(); });
}

void Daemon::LogServing() const {
  device::LocalDeviceState* first = client_->devices()[0]->local_device_state();
  spdlog::info(
      "pjrtd serving {} {} device(s) ({} allocation, queue-ahead {}, {} each) "
      "on {}",
      client_->devices().size(), client_->platform_name(),
      device::AllocationModelName(first->allocation_model()),
      first->compute_semaphore().capacity(),
      FormatByteSize(client_->devices()[0]->memory_bytes()),
      absl::StrJoin(addresses_, ", "));
  if (auto backend = client_->backend(); backend.ok()) {
    spdlog::info("backend: {}", (*backend)->Describe());
  }
}

absl::Status Daemon::StartDataChannels(bool tls) {
  std::string why_not;
  std::optional<std::string> host;
  for (const std::string& address : options_.listen) {
    if (UnixSocketPath(address).has_value()) continue;
    host = address.substr(0, address.rfind(':'));
    break;
  }
  if (!options_.data_channels) {
    why_not = "turned off with --no-data-channels";
  } else if (tls) {
    why_not = "its TCP listeners serve TLS, and channels are plaintext";
  } else if (!host.has_value()) {
    why_not = "it listens on no TCP address";
  } else if (options_.limits.max_data_channels == 0 ||
             options_.limits.max_data_channels_per_session == 0) {
    why_not = "max_data_channels is 0";
  }
  if (!why_not.empty()) {
    buffer_service_->SetDataChannels(nullptr, why_not);
    return absl::OkStatus();
  }
  data_channels_ = std::make_unique<DataChannelServer>(DataChannelServerOptions{
      .max_channels = options_.limits.max_data_channels});
  absl::Status started = data_channels_->Start(*host);
  if (!started.ok()) {
    // Clients stream instead; the daemon still serves.
    spdlog::warn("{}; clients will stream arrays through gRPC instead",
                 started.message());
    data_channels_.reset();
    buffer_service_->SetDataChannels(nullptr, std::string(started.message()));
    return absl::OkStatus();
  }
  spdlog::info("data channels on {} port {}", *host, data_channels_->port());
  buffer_service_->SetDataChannels(data_channels_.get(), "");
  server_service_->SetDataChannels(data_channels_.get());
  return absl::OkStatus();
}

void Daemon::CollectMetrics(Exposition& out) {
  // Per device: one family at a time, a sample per device.
  struct DeviceFigure {
    const char* name;
    const char* type;
    const char* help;
    std::function<double(const runtime::Device&, const device::AllocatorStats&)>
        value;
  };
  const DeviceFigure figures[] = {
      {"pjrtd_device_memory_in_use_bytes", "gauge",
       "Device memory handed out and not yet freed (with host memory that "
       "zero-copy buffers alias).",
       [](const auto&, const auto& s) { return s.bytes_in_use; }},
      {"pjrtd_device_memory_peak_bytes", "gauge",
       "The most device memory in use at once since the daemon started.",
       [](const auto&, const auto& s) { return s.peak_bytes_in_use; }},
      {"pjrtd_device_memory_reserved_bytes", "gauge",
       "Memory the allocator holds from the device (in use and cached).",
       [](const auto&, const auto& s) { return s.bytes_reserved; }},
      {"pjrtd_device_memory_limit_bytes", "gauge",
       "The allocator's limit for the device.",
       [](const auto&, const auto& s) { return s.bytes_limit; }},
      {"pjrtd_device_allocations", "gauge", "Live allocations.",
       [](const auto&, const auto& s) { return s.num_allocs; }},
      {"pjrtd_device_allocations_total", "counter",
       "Allocations since the daemon started.",
       [](const auto&, const auto& s) { return s.total_allocs; }},
      {"pjrtd_device_memory_fragmentation_ratio", "gauge",
       "1 - largest free block / free bytes (0: none).",
       [](const auto&, const auto& s) { return s.fragmentation; }},
      {"pjrtd_device_queue_depth", "gauge",
       "Executions enqueued on the device and not finished.",
       [](const auto& d, const auto&) {
         return static_cast<double>(d.local_device_state()->queue_depth());
       }},
      {"pjrtd_device_executions_total", "counter",
       "Runs enqueued on the device.",
       [](const auto& d, const auto&) {
         return d.local_device_state()->run_stats().started.value();
       }},
      {"pjrtd_device_execution_failures_total", "counter",
       "Runs that failed to enqueue or failed on the device.",
       [](const auto& d, const auto&) {
         return d.local_device_state()->run_stats().failed.value();
       }},
      {"pjrtd_device_busy_seconds_total", "counter",
       "Time the device spent running programs.",
       [](const auto& d, const auto&) {
         return d.local_device_state()->run_stats().busy_seconds.value();
       }},
  };
  std::vector<device::AllocatorStats> stats;
  for (const runtime::Device* device : client_->devices()) {
    stats.push_back(device->allocator()->GetStats());
  }
  const auto& devices = client_->devices();
  const auto labels = [&](size_t i) {
    return MetricLabels{{"device", absl::StrCat(devices[i]->id())},
                        {"kind", std::string(devices[i]->kind())}};
  };
  for (const DeviceFigure& figure : figures) {
    out.Family(figure.name, figure.type, figure.help);
    for (size_t i = 0; i < devices.size(); ++i) {
      out.Sample(figure.name, labels(i), figure.value(*devices[i], stats[i]));
    }
  }
  out.Family("pjrtd_device_execution_duration_seconds", "histogram",
             "Time each run held the device.");
  for (size_t i = 0; i < devices.size(); ++i) {
    out.HistogramSamples(
        "pjrtd_device_execution_duration_seconds", labels(i),
        devices[i]->local_device_state()->run_stats().seconds.Read());
  }

  out.Gauge("pjrtd_sessions", "Sessions open.", sessions_->size());
  out.Gauge("pjrtd_buffers", "Buffer handles over all sessions.",
            sessions_->buffer_count());
  out.Gauge("pjrtd_executables", "Executable handles over all sessions.",
            sessions_->executable_count());
  auto [region_count, region_bytes] = sessions_->region_totals();
  out.Gauge("pjrtd_shared_memory_regions",
            "Shared-memory regions registered over all sessions.",
            region_count);
  out.Gauge("pjrtd_shared_memory_region_bytes",
            "Bytes of the registered shared-memory regions.", region_bytes);
  out.Gauge("pjrtd_data_channels", "Data channels connected.",
            data_channels_ != nullptr ? data_channels_->channels() : 0);
  out.Gauge("pjrtd_execute_lanes", "Execute lanes open.",
            execute_lanes_ != nullptr ? execute_lanes_->lanes() : 0);

  CompileCacheStats cache = compile_cache_->stats();
  out.Gauge("pjrtd_compile_cache_entries", "Compiled programs cached.",
            cache.entries);
  out.Gauge("pjrtd_compile_cache_capacity",
            "The most compiled programs the cache holds.", cache.capacity);
  const std::pair<const char*, std::pair<const char*, int64_t>> counters[] = {
      {"pjrtd_compile_cache_hits_total",
       {"Compiles answered from the cache, or by joining the same compile "
        "under way.",
        cache.hits}},
      {"pjrtd_compile_cache_misses_total",
       {"Compiles actually run.", cache.compiles}},
      {"pjrtd_compile_failures_total",
       {"Compiles run that failed.", cache.failures}},
      {"pjrtd_compile_cache_evictions_total",
       {"Compiled programs dropped from the cache to make room.",
        cache.evictions}},
      {"pjrtd_cross_host_received_bytes_total",
       {"Bytes received from other tasks' transfers.",
        receives_->bytes_received()}},
  };
  for (const auto& [name, what] : counters) {
    out.Family(name, "counter", what.first);
    out.Sample(name, {}, static_cast<double>(what.second));
  }
  out.Gauge("pjrtd_cross_host_receives_pending",
            "Cross-host receives waiting for their data.",
            receives_->pending());
  out.Gauge("pjrtd_cluster_tasks", "Tasks in the cluster (1: no cluster).",
            cluster_->task_count());
  out.Gauge("pjrtd_cluster_peers_up",
            "Other tasks whose peer channel is connected.",
            cluster_->multi_task() ? cluster_->PeersConnected() : 0);
  // The instruction set programs run as (the host kernels' level, the
  // GPU's architecture).
  auto backend = client_->backend();
  const std::string target = backend.ok() ? (*backend)->target() : "none";
  out.Family("pjrtd_build_info", "gauge",
             "The daemon's build, platform and target (always 1).");
  out.Sample("pjrtd_build_info",
             {{"version", kBuildVersion},
              {"platform", std::string(client_->platform_name())},
              {"target", target},
              {"task", absl::StrCat(options_.task_id)}},
             1);
}

void Daemon::ReapLoop() {
  int trim_ticks = 0;
  for (;;) {
    {
      pjrt::MutexLock lock(&mu_);
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return reaper_stopping_;
      };
      if (mu_.AwaitWithTimeout(stopped, absl::Seconds(1))) return;
    }
    try {
      int closed = sessions_->ReapExpired();
      if (closed > 0) spdlog::info("closed {} expired session(s)", closed);
      receives_->Reap(absl::Now());
      if (execute_lanes_ != nullptr) execute_lanes_->Sweep();
      // Sessions free what they held into malloc's arenas; hand the free
      // pages back to the system, so that the daemon's memory returns to
      // its baseline after a client goes (a few MiB stay as malloc's
      // reserve). Frees ordered after a closed session's last uses land a
      // little later: trim on a few ticks after each close.
      if (sessions_->TakeSessionsClosed()) trim_ticks = 3;
      if (trim_ticks > 0) {
        --trim_ticks;
        malloc_trim(0);
      }
    } catch (...) {
      spdlog::error("reaper: {}",
                    StatusFromException("reaping expired "
                                        "sessions",
                                        std::current_exception()));
    }
  }
}

absl::Status Daemon::Reload() {
  if (options_.tenants_file.empty()) {
    spdlog::info(
        "SIGHUP: no tenants file to reload; TLS files are re-read "
        "when they change");
    return absl::OkStatus();
  }
  auto tenants = LoadTenantsFile(options_.tenants_file);
  if (!tenants.ok()) {
    spdlog::error("SIGHUP: kept the tenants in force: {}", tenants.status());
    return tenants.status();
  }
  const size_t count = tenants->size();
  auth_->Configure(*std::move(tenants), options_.tenants_file);
  Audit("tenants_reloaded",
        {{"file", options_.tenants_file}, {"tenants", absl::StrCat(count)}});
  return absl::OkStatus();
}

void Daemon::Shutdown() {
  {
    pjrt::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  spdlog::info("shutting down: refusing new calls, finishing calls in flight");
  const absl::Time deadline = absl::Now() + options_.shutdown_timeout;
  // Once the grace period is over, whatever still runs or waits is
  // cancelled: executions stop (their results get the reason), waits for
  // collective peers, cross-host data and devices end. The reaper keeps
  // expiring receives until then.
  std::thread watchdog([this, deadline] {
    pjrt::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_done_;
    };
    if (!mu_.AwaitWithTimeout(done, deadline - absl::Now())) {
      spdlog::warn(
          "shutdown: the grace period ({}) is over; cancelling "
          "what still runs",
          absl::FormatDuration(options_.shutdown_timeout));
      cancellation_->Cancel(absl::UnavailableError(
          "pjrtd is shutting down; the run was cancelled"));
    }
  });
  // No new unix connections (gRPC refuses new calls on the others).
  for (const auto& listener : unix_listeners_) listener->Stop();
  if (data_channels_ != nullptr) data_channels_->Stop();
  // Lanes end (a request running on one finishes first, or is cancelled
  // with the rest once the grace period is over).
  std::thread lanes_stopped;
  if (execute_lanes_ != nullptr) {
    lanes_stopped = std::thread([this] { execute_lanes_->Stop(); });
  }
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    // Attach and execution streams would otherwise hold the server open
    // until the deadline.
    sessions_->DetachAll(absl::UnavailableError("pjrtd is shutting down"));
    executable_service_->EndStreams();
    server_->Shutdown(absl::ToChronoTime(deadline));
    server_->Wait();
  }
  // No client call reaches another task now: the proxies there end.
  if (proxies_ != nullptr) {
    buffer_service_->SetProxies(nullptr);
    executable_service_->SetProxies(nullptr);
    proxies_.reset();
  }
  // Executions already enqueued may finish within what is left of the
  // grace period; then the watchdog cancels them.
  if (client_ != nullptr) {
    for (runtime::Device* device : client_->devices()) {
      device::LocalDeviceState* local = device->local_device_state();
      auto event = local->AllocateAndRecordEvent(local->compute_stream());
      if (event.ok())
        (*event)->WaitFor(
            std::max(absl::ZeroDuration(), deadline - absl::Now()));
    }
  }
  {
    pjrt::MutexLock lock(&mu_);
    reaper_stopping_ = true;
    shutdown_done_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  watchdog.join();
  // Nothing may wait any longer.
  cancellation_->Cancel(absl::UnavailableError("pjrtd is shutting down"));
  if (lanes_stopped.joinable()) lanes_stopped.join();
  if (region_server_ != nullptr) region_server_->Stop();
  if (peer_server_ != nullptr) {
    // Transfers in flight end; their receive buffers get the error.
    peer_server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(1));
    peer_server_->Wait();
  }
  if (sessions_ != nullptr) {
    sessions_->Shutdown(absl::UnavailableError("pjrtd is shutting down"));
  }
  for (const std::string& address : addresses_) {
    if (auto path = UnixSocketPath(address)) unlink(path->c_str());
  }
  if (admin_token_written_) unlink(options_.admin_token_file.c_str());
  spdlog::info("shutdown complete");
}

Daemon::~Daemon() { Shutdown(); }

}  // namespace pjrt::daemon
