// The gRPC services of pjrtd. Each is thin: decode the request, call the
// runtime or the session table, encode the reply.
//
// Server, Buffers and Executables use gRPC's synchronous API: their handlers
// may block (waiting for a buffer to become ready, reading a stream,
// compiling a program) on a thread of gRPC's pool. Sessions uses the callback
// API, so that an Attach stream costs no thread while it is open.
#ifndef PJRT_DAEMON_SERVICES_H_
#define PJRT_DAEMON_SERVICES_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/mutex.h"
#include "daemon/cluster.h"
#include "daemon/compile_cache.h"
#include "daemon/cross_host.h"
#include "daemon/execute_lane.h"
#include "daemon/fair_queue.h"
#include "daemon/grpc_status.h"
#include "daemon/metrics.h"
#include "daemon/options.h"
#include "daemon/proxy_sessions.h"
#include "daemon/session_table.h"
#include "daemon/task_collectives.h"
#include "daemon/tenants.h"
#include "device/semaphore.h"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "pjrt/v1/cluster.grpc.pb.h"
#include "pjrt/v1/executable.grpc.pb.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace pjrt::daemon {

// The protocol's constants (ProtocolConstant in proto/pjrt/v1/types.proto).
inline constexpr uint32_t kProtocolRevisionMin = v1::PROTOCOL_REVISION_MIN;
inline constexpr uint32_t kProtocolRevisionMax = v1::PROTOCOL_REVISION_MAX;
// Largest chunk of an upload, and the size of download chunks.
inline constexpr int64_t kMaxChunkBytes = v1::MAX_CHUNK_BYTES;
// Most bytes of array contents one unary reply carries (ReadBuffer, and the
// results of an Execute with fetch_results, together).
inline constexpr int64_t kMaxInlineBytes = int64_t{1} << 20;

// The daemon-wide cache of compiled programs.
using ExecutableCache = CompileCache<runtime::Executable>;

// Waits for `buffer` to be ready within `timeout` and returns its status
// (see runtime::Buffer::BlockHostUntilReady), giving up early with
// CANCELLED when `context` (may be null) is cancelled, or with the reason when
// `session_cancellation` (may be null) is (checked every 50 ms). With a
// `waiting_session`, a wait for data from outside or for collective peers
// (see runtime::Buffer::UseWouldBlock) takes one of its waiting-call slots:
// RESOURCE_EXHAUSTED when none is free.
absl::Status AwaitReady(grpc::ServerContext* context, runtime::Buffer& buffer,
                        absl::Duration timeout,
                        const Cancellation* session_cancellation = nullptr,
                        Session* waiting_session = nullptr);

// For the waits of one call of `session`: cancelled when the session is,
// when the call's deadline passes, and when its client cancels it.
std::shared_ptr<Cancellation> CallCancellation(grpc::ServerContext* context,
                                               const Session& session);

// Appends the ready state of `session`'s buffer `handle` to `response`;
// the lookup's error if there is none.
absl::Status AddReadyState(const Session& session, uint64_t handle,
                           v1::GetReadyStateResponse* response);

// The session `id` for the call in `context`: UNAUTHENTICATED when the
// caller proves no tenant (with tenants in force), NOT_FOUND when the
// session is not open or belongs to another tenant.
absl::StatusOr<std::shared_ptr<Session>> CallerSession(
    Authenticator* auth, SessionTable* sessions,
    const grpc::ServerContextBase& context, uint64_t id);

// If using any of `buffers` now would block (an input whose contents have
// not arrived, or one being donated), a waiting-call slot of `session`
// (RESOURCE_EXHAUSTED when none is free); otherwise an empty one.
absl::StatusOr<Session::WaitingCall> MaybeStartWaitingCall(
    Session& session, absl::Span<runtime::Buffer* const> buffers);

// The addressable device with global id `id`. INVALID_ARGUMENT naming the
// id, and the task that owns it when it is another task's device.
absl::StatusOr<runtime::Device*> LookupAddressableDevice(
    const runtime::Client& client, const Cluster& cluster, int id);

// Guarded, once the caller is authenticated: with tenants in force, a call
// that proves none is UNAUTHENTICATED before its request is looked at. A
// handler's implementation returns absl::Status (converted here, once) or,
// for the few that relay a peer's grpc::Status as it is, grpc::Status.
template <typename Handler>
grpc::Status Authenticated(Authenticator* auth,
                           const grpc::ServerContextBase& context,
                           absl::string_view rpc, Handler&& handler) {
  return Guarded(rpc, [&]() -> grpc::Status {
    absl::StatusOr<Caller> caller = auth->Authenticate(context);
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(std::forward<Handler>(handler)());
  });
}

class ServerService final : public v1::Server::Service {
 public:
  ServerService(runtime::Client* client, Cluster* cluster,
                CrossHostReceives* receives, SessionTable* sessions,
                Authenticator* auth, ExecutableCache* compile_cache,
                std::string region_socket)
      : client_(client),
        cluster_(cluster),
        receives_(receives),
        sessions_(sessions),
        auth_(auth),
        compile_cache_(compile_cache),
        region_socket_(std::move(region_socket)),
        start_(absl::Now()) {}

  // The data channel listener whose channels GetStats counts (null: none).
  // Set before the service is served.
  void SetDataChannels(const DataChannelServer* channels) {
    channels_ = channels;
  }
  void SetExecuteLanes(const ExecuteLaneServer* lanes) { lanes_ = lanes; }
  // Where the daemon serves its metrics (empty: nowhere).
  void SetMetricsUrl(std::string url) { metrics_url_ = std::move(url); }
  // The counters GetStats reports RPCs and transfers from.
  void SetMetrics(const DaemonMetrics* metrics) { metrics_ = metrics; }

  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override {
    return Authenticated(auth_, *context, "Server.GetServerInfo", [&] {
      return GetServerInfoImpl(context, request, response);
    });
  }
  grpc::Status ListDevices(grpc::ServerContext* context,
                           const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override {
    return Authenticated(auth_, *context, "Server.ListDevices", [&] {
      return ListDevicesImpl(context, request, response);
    });
  }
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest* request,
                        v1::Stats* response) override {
    return Authenticated(auth_, *context, "Server.GetStats", [&] {
      return GetStatsImpl(context, request, response);
    });
  }
  grpc::Status Ping(grpc::ServerContext* context,
                    const v1::PingRequest* request,
                    v1::PingResponse* response) override {
    return Authenticated(auth_, *context, "Server.Ping",
                         [&] { return PingImpl(context, request, response); });
  }
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest* request,
                                v1::ClusterStatus* response) override {
    return Authenticated(auth_, *context, "Server.GetClusterStatus", [&] {
      return GetClusterStatusImpl(context, request, response);
    });
  }

 private:
  // The handlers, run by the overrides above inside Guarded.
  absl::Status GetServerInfoImpl(grpc::ServerContext* context,
                                 const v1::GetServerInfoRequest* request,
                                 v1::ServerInfo* response);
  absl::Status ListDevicesImpl(grpc::ServerContext* context,
                               const v1::ListDevicesRequest* request,
                               v1::ListDevicesResponse* response);
  absl::Status GetStatsImpl(grpc::ServerContext* context,
                            const v1::GetStatsRequest* request,
                            v1::Stats* response);
  absl::Status PingImpl(grpc::ServerContext* context,
                        const v1::PingRequest* request,
                        v1::PingResponse* response);
  absl::Status GetClusterStatusImpl(grpc::ServerContext* context,
                                    const v1::GetClusterStatusRequest* request,
                                    v1::ClusterStatus* response);

  runtime::Client* const client_;
  Cluster* const cluster_;
  CrossHostReceives* const receives_;
  SessionTable* const sessions_;
  Authenticator* const auth_;
  ExecutableCache* const compile_cache_;
  // Empty when shared memory is off.
  const std::string region_socket_;
  const absl::Time start_;
  const DataChannelServer* channels_ = nullptr;
  const ExecuteLaneServer* lanes_ = nullptr;
  std::string metrics_url_;
  const DaemonMetrics* metrics_ = nullptr;
};

class SessionService final : public v1::Sessions::CallbackService {
 public:
  // `admin_token` empty: CloseSessionAsAdmin takes no admin token (a
  // tenant of the admin role may still call it).
  SessionService(SessionTable* sessions, Authenticator* auth,
                 std::string admin_token)
      : sessions_(sessions),
        auth_(auth),
        admin_token_(std::move(admin_token)) {}

  grpc::ServerUnaryReactor* OpenSession(
      grpc::CallbackServerContext* context,
      const v1::OpenSessionRequest* request,
      v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* context,
                                      const v1::KeepAliveRequest* request,
                                      v1::KeepAliveResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(
      grpc::CallbackServerContext* context,
      const v1::CloseSessionRequest* request,
      v1::CloseSessionResponse* response) override;
  grpc::ServerWriteReactor<v1::SessionEvent>* Attach(
      grpc::CallbackServerContext* context,
      const v1::AttachRequest* request) override;
  grpc::ServerUnaryReactor* ListSessions(
      grpc::CallbackServerContext* context,
      const v1::ListSessionsRequest* request,
      v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* CloseSessionAsAdmin(
      grpc::CallbackServerContext* context,
      const v1::CloseSessionAsAdminRequest* request,
      v1::CloseSessionResponse* response) override;

 private:
  // The handlers, run by the overrides inside a guard (session_service.cc).
  grpc::ServerUnaryReactor* OpenSessionImpl(
      grpc::CallbackServerContext* context,
      const v1::OpenSessionRequest* request, v1::OpenSessionResponse* response);
  grpc::ServerUnaryReactor* KeepAliveImpl(grpc::CallbackServerContext* context,
                                          const v1::KeepAliveRequest* request,
                                          v1::KeepAliveResponse* response);
  grpc::ServerUnaryReactor* CloseSessionImpl(
      grpc::CallbackServerContext* context,
      const v1::CloseSessionRequest* request,
      v1::CloseSessionResponse* response);
  grpc::ServerWriteReactor<v1::SessionEvent>* AttachImpl(
      grpc::CallbackServerContext* context, const v1::AttachRequest* request);
  grpc::ServerUnaryReactor* ListSessionsImpl(
      grpc::CallbackServerContext* context,
      const v1::ListSessionsRequest* request,
      v1::ListSessionsResponse* response);
  grpc::ServerUnaryReactor* CloseSessionAsAdminImpl(
      grpc::CallbackServerContext* context,
      const v1::CloseSessionAsAdminRequest* request,
      v1::CloseSessionResponse* response);

  SessionTable* const sessions_;
  Authenticator* const auth_;
  const std::string admin_token_;
};

// Most handles GetReadyState answers for in one call.
inline constexpr int kMaxReadyStateHandles = 16384;

class BufferService final : public v1::Buffers::Service {
 public:
  BufferService(runtime::Client* client, Cluster* cluster,
                CrossHostReceives* receives, SessionTable* sessions,
                Authenticator* auth, absl::Duration default_receive_timeout,
                absl::Duration max_receive_timeout)
      : client_(client),
        cluster_(cluster),
        receives_(receives),
        sessions_(sessions),
        auth_(auth),
        default_receive_timeout_(default_receive_timeout),
        max_receive_timeout_(max_receive_timeout) {}

  grpc::Status Upload(grpc::ServerContext* context,
                      grpc::ServerReader<v1::UploadRequest>* reader,
                      v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.Upload",
                         [&] { return UploadImpl(context, reader, response); });
  }
  grpc::Status Download(
      grpc::ServerContext* context, const v1::DownloadRequest* request,
      grpc::ServerWriter<v1::DownloadResponse>* writer) override {
    return Authenticated(auth_, *context, "Buffers.Download", [&] {
      return DownloadImpl(context, request, writer);
    });
  }
  grpc::Status DescribeBuffer(grpc::ServerContext* context,
                              const v1::DescribeBufferRequest* request,
                              v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.DescribeBuffer", [&] {
      return DescribeBufferImpl(context, request, response);
    });
  }
  grpc::Status ReadBuffer(grpc::ServerContext* context,
                          const v1::DownloadRequest* request,
                          v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.ReadBuffer", [&] {
      return ReadBufferImpl(context, request, response);
    });
  }
  grpc::Status DeleteBuffers(grpc::ServerContext* context,
                             const v1::DeleteBuffersRequest* request,
                             v1::DeleteBuffersResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.DeleteBuffers", [&] {
      return DeleteBuffersImpl(context, request, response);
    });
  }
  grpc::Status BlockUntilReady(grpc::ServerContext* context,
                               const v1::BlockUntilReadyRequest* request,
                               v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.BlockUntilReady", [&] {
      return BlockUntilReadyImpl(context, request, response);
    });
  }
  grpc::Status CopyToDevice(grpc::ServerContext* context,
                            const v1::CopyToDeviceRequest* request,
                            v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.CopyToDevice", [&] {
      return CopyToDeviceImpl(context, request, response);
    });
  }
  grpc::Status GetReadyState(grpc::ServerContext* context,
                             const v1::GetReadyStateRequest* request,
                             v1::GetReadyStateResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.GetReadyState", [&] {
      return GetReadyStateImpl(context, request, response);
    });
  }
  grpc::Status MakeTuple(grpc::ServerContext* context,
                         const v1::MakeTupleRequest* request,
                         v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.MakeTuple", [&] {
      return MakeTupleImpl(context, request, response);
    });
  }
  grpc::Status MakeCrossHostReceiveBuffers(
      grpc::ServerContext* context,
      const v1::MakeCrossHostReceiveBuffersRequest* request,
      v1::MakeCrossHostReceiveBuffersResponse* response) override {
    return Authenticated(
        auth_, *context, "Buffers.MakeCrossHostReceiveBuffers", [&] {
          return MakeCrossHostReceiveBuffersImpl(context, request, response);
        });
  }
  grpc::Status CopyToRemoteDevice(
      grpc::ServerContext* context,
      const v1::CopyToRemoteDeviceRequest* request,
      v1::CopyToRemoteDeviceResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.CopyToRemoteDevice", [&] {
      return CopyToRemoteDeviceImpl(context, request, response);
    });
  }
  grpc::Status CancelCrossHostReceives(
      grpc::ServerContext* context,
      const v1::CancelCrossHostReceivesRequest* request,
      v1::CancelCrossHostReceivesResponse* response) override {
    return Authenticated(
        auth_, *context, "Buffers.CancelCrossHostReceives", [&] {
          return CancelCrossHostReceivesImpl(context, request, response);
        });
  }
  grpc::Status UploadFromRegion(grpc::ServerContext* context,
                                const v1::UploadFromRegionRequest* request,
                                v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.UploadFromRegion", [&] {
      return UploadFromRegionImpl(context, request, response);
    });
  }
  grpc::Status DownloadToRegion(grpc::ServerContext* context,
                                const v1::DownloadToRegionRequest* request,
                                v1::BufferInfo* response) override {
    return Authenticated(auth_, *context, "Buffers.DownloadToRegion", [&] {
      return DownloadToRegionImpl(context, request, response);
    });
  }
  grpc::Status UnregisterRegion(
      grpc::ServerContext* context, const v1::UnregisterRegionRequest* request,
      v1::UnregisterRegionResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.UnregisterRegion", [&] {
      return UnregisterRegionImpl(context, request, response);
    });
  }
  grpc::Status ListRegions(grpc::ServerContext* context,
                           const v1::ListRegionsRequest* request,
                           v1::ListRegionsResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.ListRegions", [&] {
      return ListRegionsImpl(context, request, response);
    });
  }
  grpc::Status OpenDataChannel(grpc::ServerContext* context,
                               const v1::OpenDataChannelRequest* request,
                               v1::OpenDataChannelResponse* response) override {
    return Authenticated(auth_, *context, "Buffers.OpenDataChannel", [&] {
      return OpenDataChannelImpl(context, request, response);
    });
  }

  // Where OpenDataChannel sends clients (null: channels are not offered,
  // for the reason `why_not`). Set before the service is served.
  void SetDataChannels(DataChannelServer* channels, std::string why_not) {
    channels_ = channels;
    no_channels_reason_ = std::move(why_not);
  }
  // Where whole-cluster sessions reach other tasks (null: a cluster of one,
  // or the peer-side instance that serves proxies). Set before serving.
  void SetProxies(ProxySessions* proxies) { proxies_ = proxies; }
  // Where transfers (and compiles) are counted; may stay null. Set before
  // the service is served.
  void SetMetrics(DaemonMetrics* metrics) { metrics_ = metrics; }

 private:
  // A buffer a whole-cluster session holds on another task.
  struct RemoteBuffer {
    int task;
    uint64_t proxy;
  };
  // When `handle` names one of session `id`'s buffers on another task.
  absl::StatusOr<std::optional<RemoteBuffer>> FindRemote(
      const grpc::ServerContext& context, uint64_t id, uint64_t handle);
  // An upload to another task's device, `first` being its header.
  absl::Status ForwardUpload(grpc::ServerContext* context,
                             grpc::ServerReader<v1::UploadRequest>* reader,
                             v1::UploadRequest first,
                             const std::shared_ptr<Session>& session, int task,
                             v1::BufferInfo* response);
  absl::Status ForwardDownload(
      grpc::ServerContext* context, const v1::DownloadRequest& request,
      const RemoteBuffer& remote,
      grpc::ServerWriter<v1::DownloadResponse>* writer);
  // GetReadyState and DeleteBuffers of a whole-cluster session that name
  // buffers on other tasks.
  absl::Status RemoteReadyState(grpc::ServerContext* context,
                                const std::shared_ptr<Session>& session,
                                const v1::GetReadyStateRequest& request,
                                v1::GetReadyStateResponse* response);
  absl::Status DeleteAcrossTasks(grpc::ServerContext* context,
                                 const std::shared_ptr<Session>& session,
                                 const v1::DeleteBuffersRequest& request);

  // The handlers, run by the overrides above inside Guarded.
  absl::Status UploadImpl(grpc::ServerContext* context,
                          grpc::ServerReader<v1::UploadRequest>* reader,
                          v1::BufferInfo* response);
  absl::Status DownloadImpl(grpc::ServerContext* context,
                            const v1::DownloadRequest* request,
                            grpc::ServerWriter<v1::DownloadResponse>* writer);
  absl::Status DescribeBufferImpl(grpc::ServerContext* context,
                                  const v1::DescribeBufferRequest* request,
                                  v1::BufferInfo* response);
  absl::Status ReadBufferImpl(grpc::ServerContext* context,
                              const v1::DownloadRequest* request,
                              v1::BufferInfo* response);
  absl::Status DeleteBuffersImpl(grpc::ServerContext* context,
                                 const v1::DeleteBuffersRequest* request,
                                 v1::DeleteBuffersResponse* response);
  absl::Status BlockUntilReadyImpl(grpc::ServerContext* context,
                                   const v1::BlockUntilReadyRequest* request,
                                   v1::BufferInfo* response);
  absl::Status CopyToDeviceImpl(grpc::ServerContext* context,
                                const v1::CopyToDeviceRequest* request,
                                v1::BufferInfo* response);
  absl::Status GetReadyStateImpl(grpc::ServerContext* context,
                                 const v1::GetReadyStateRequest* request,
                                 v1::GetReadyStateResponse* response);
  absl::Status MakeTupleImpl(grpc::ServerContext* context,
                             const v1::MakeTupleRequest* request,
                             v1::BufferInfo* response);
  absl::Status MakeCrossHostReceiveBuffersImpl(
      grpc::ServerContext* context,
      const v1::MakeCrossHostReceiveBuffersRequest* request,
      v1::MakeCrossHostReceiveBuffersResponse* response);
  absl::Status CopyToRemoteDeviceImpl(
      grpc::ServerContext* context,
      const v1::CopyToRemoteDeviceRequest* request,
      v1::CopyToRemoteDeviceResponse* response);
  absl::Status CancelCrossHostReceivesImpl(
      grpc::ServerContext* context,
      const v1::CancelCrossHostReceivesRequest* request,
      v1::CancelCrossHostReceivesResponse* response);
  absl::Status UploadFromRegionImpl(grpc::ServerContext* context,
                                    const v1::UploadFromRegionRequest* request,
                                    v1::BufferInfo* response);
  absl::Status DownloadToRegionImpl(grpc::ServerContext* context,
                                    const v1::DownloadToRegionRequest* request,
                                    v1::BufferInfo* response);
  absl::Status UnregisterRegionImpl(grpc::ServerContext* context,
                                    const v1::UnregisterRegionRequest* request,
                                    v1::UnregisterRegionResponse* response);
  absl::Status ListRegionsImpl(grpc::ServerContext* context,
                               const v1::ListRegionsRequest* request,
                               v1::ListRegionsResponse* response);
  absl::Status OpenDataChannelImpl(grpc::ServerContext* context,
                                   const v1::OpenDataChannelRequest* request,
                                   v1::OpenDataChannelResponse* response);
  // Download over the data channel `request` names.
  absl::Status DownloadOverChannel(
      grpc::ServerContext* context, const v1::DownloadRequest* request,
      grpc::ServerWriter<v1::DownloadResponse>* writer);

  runtime::Client* const client_;
  Cluster* const cluster_;
  CrossHostReceives* const receives_;
  SessionTable* const sessions_;
  Authenticator* const auth_;
  const absl::Duration default_receive_timeout_;
  const absl::Duration max_receive_timeout_;
  DataChannelServer* channels_ = nullptr;
  std::string no_channels_reason_ = "data channels are turned off";
  ProxySessions* proxies_ = nullptr;
  DaemonMetrics* metrics_ = nullptr;
};

// The daemon-to-daemon service, served on this task's cluster address.
// Handshake works from start-up on; PushTransfer once the runtime is up
// (SetReceives), UNAVAILABLE before.
class PeerService final : public v1::Peer::Service {
 public:
  explicit PeerService(Cluster* cluster) : cluster_(cluster) {}

  void SetReceives(CrossHostReceives* receives) { receives_.store(receives); }
  // Where transfers from other tasks are counted.
  void SetMetrics(DaemonMetrics* metrics) { metrics_.store(metrics); }
  // Task 0's exchange directory (null elsewhere: the calls below are
  // refused).
  void SetDirectory(ExchangeDirectory* directory) { directory_ = directory; }

  grpc::Status Handshake(grpc::ServerContext* context,
                         const v1::HandshakeRequest* request,
                         v1::HandshakeResponse* response) override {
    return Guarded("Peer.Handshake",
                   [&] { return HandshakeImpl(context, request, response); });
  }
  grpc::Status PushTransfer(grpc::ServerContext* context,
                            grpc::ServerReader<v1::PushTransferRequest>* reader,
                            v1::PushTransferResponse* response) override {
    return Guarded("Peer.PushTransfer",
                   [&] { return PushTransferImpl(context, reader, response); });
  }
  grpc::Status StoreSet(grpc::ServerContext* context,
                        const v1::StoreSetRequest* request,
                        v1::StoreSetResponse* response) override {
    return Guarded("Peer.StoreSet",
                   [&] { return StoreSetImpl(context, request, response); });
  }
  grpc::Status StoreGet(grpc::ServerContext* context,
                        const v1::StoreGetRequest* request,
                        v1::StoreGetResponse* response) override {
    return Guarded("Peer.StoreGet",
                   [&] { return StoreGetImpl(context, request, response); });
  }
  grpc::Status Meet(grpc::ServerContext* context,
                    const v1::MeetRequest* request,
                    v1::MeetResponse* response) override {
    return Guarded("Peer.Meet",
                   [&] { return MeetImpl(context, request, response); });
  }

  // Proxy sessions (see ProxySessions): the calls of a whole-cluster
  // session of another task, run here by this task's own services.
  grpc::Status OpenProxySession(grpc::ServerContext* context,
                                const v1::OpenProxySessionRequest* request,
                                v1::OpenSessionResponse* response) override {
    return Guarded("Peer.OpenProxySession", [&] {
      return OpenProxySessionImpl(context, request, response);
    });
  }
  grpc::Status KeepProxySessions(
      grpc::ServerContext* context, const v1::KeepProxySessionsRequest* request,
      v1::KeepProxySessionsResponse* response) override {
    return Guarded("Peer.KeepProxySessions", [&] {
      return KeepProxySessionsImpl(context, request, response);
    });
  }
  grpc::Status CloseProxySession(grpc::ServerContext* context,
                                 const v1::CloseSessionRequest* request,
                                 v1::CloseSessionResponse* response) override {
    return Guarded("Peer.CloseProxySession", [&] {
      return CloseProxySessionImpl(context, request, response);
    });
  }
  grpc::Status ProxyDownload(
      grpc::ServerContext* context, const v1::DownloadRequest* request,
      grpc::ServerWriter<v1::DownloadResponse>* writer) override {
    return Proxied(context, "Peer.ProxyDownload", [&](const ProxyTargets& t) {
      return t.buffers->Download(context, request, writer);
    });
  }
  grpc::Status ProxyUpload(grpc::ServerContext* context,
                           grpc::ServerReader<v1::UploadRequest>* reader,
                           v1::BufferInfo* response) override {
    return Proxied(context, "Peer.ProxyUpload", [&](const ProxyTargets& t) {
      return t.buffers->Upload(context, reader, response);
    });
  }
  grpc::Status ProxyReadBuffer(grpc::ServerContext* context,
                               const v1::DownloadRequest* request,
                               v1::BufferInfo* response) override {
    return Proxied(context, "Peer.ProxyReadBuffer", [&](const ProxyTargets& t) {
      return t.buffers->ReadBuffer(context, request, response);
    });
  }
  grpc::Status ProxyDescribeBuffer(grpc::ServerContext* context,
                                   const v1::DescribeBufferRequest* request,
                                   v1::BufferInfo* response) override {
    return Proxied(
        context, "Peer.ProxyDescribeBuffer", [&](const ProxyTargets& t) {
          return t.buffers->DescribeBuffer(context, request, response);
        });
  }
  grpc::Status ProxyBlockUntilReady(grpc::ServerContext* context,
                                    const v1::BlockUntilReadyRequest* request,
                                    v1::BufferInfo* response) override {
    return Proxied(
        context, "Peer.ProxyBlockUntilReady", [&](const ProxyTargets& t) {
          return t.buffers->BlockUntilReady(context, request, response);
        });
  }
  grpc::Status ProxyGetReadyState(
      grpc::ServerContext* context, const v1::GetReadyStateRequest* request,
      v1::GetReadyStateResponse* response) override {
    return Proxied(
        context, "Peer.ProxyGetReadyState", [&](const ProxyTargets& t) {
          return t.buffers->GetReadyState(context, request, response);
        });
  }
  grpc::Status ProxyDeleteBuffers(
      grpc::ServerContext* context, const v1::DeleteBuffersRequest* request,
      v1::DeleteBuffersResponse* response) override {
    return Proxied(
        context, "Peer.ProxyDeleteBuffers", [&](const ProxyTargets& t) {
          return t.buffers->DeleteBuffers(context, request, response);
        });
  }
  grpc::Status ProxyCompile(grpc::ServerContext* context,
                            const v1::CompileRequest* request,
                            v1::CompileResponse* response) override {
    return Proxied(context, "Peer.ProxyCompile", [&](const ProxyTargets& t) {
      return t.executables->Compile(context, request, response);
    });
  }
  grpc::Status ProxyExecuteReplicated(
      grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
      v1::ExecuteReplicatedResponse* response) override {
    return Proxied(
        context, "Peer.ProxyExecuteReplicated", [&](const ProxyTargets& t) {
          return t.executables->ExecuteReplicated(context, request, response);
        });
  }
  grpc::Status ProxyDeleteExecutable(
      grpc::ServerContext* context, const v1::DeleteExecutableRequest* request,
      v1::DeleteExecutableResponse* response) override {
    return Proxied(
        context, "Peer.ProxyDeleteExecutable", [&](const ProxyTargets& t) {
          return t.executables->DeleteExecutable(context, request, response);
        });
  }

  // The services that run proxy calls, each with an authenticator that
  // takes every caller as anonymous (the peer proved itself with the
  // cluster secret; an anonymous caller reaches a session of any tenant by
  // its secret id), and the table the proxies live in. Until set, proxy
  // calls are refused as UNAVAILABLE (the task is still starting).
  struct ProxyTargets {
    SessionTable* sessions;
    // This task's tenants: a proxy belongs to its origin's tenant.
    Authenticator* tenants;
    v1::Buffers::Service* buffers;
    v1::Executables::Service* executables;
  };
  void SetProxyTargets(const ProxyTargets* targets) {
    proxy_targets_.store(targets);
  }

 private:
  // The handlers, run by the overrides above inside Guarded.
  absl::Status HandshakeImpl(grpc::ServerContext* context,
                             const v1::HandshakeRequest* request,
                             v1::HandshakeResponse* response);
  absl::Status PushTransferImpl(
      grpc::ServerContext* context,
      grpc::ServerReader<v1::PushTransferRequest>* reader,
      v1::PushTransferResponse* response);
  absl::Status StoreSetImpl(grpc::ServerContext* context,
                            const v1::StoreSetRequest* request,
                            v1::StoreSetResponse* response);
  absl::Status StoreGetImpl(grpc::ServerContext* context,
                            const v1::StoreGetRequest* request,
                            v1::StoreGetResponse* response);
  absl::Status MeetImpl(grpc::ServerContext* context,
                        const v1::MeetRequest* request,
                        v1::MeetResponse* response);
  // OK on task 0 for an authenticated caller.
  absl::Status CheckDirectoryCall(const grpc::ServerContext& context) const;
  absl::Status OpenProxySessionImpl(grpc::ServerContext* context,
                                    const v1::OpenProxySessionRequest* request,
                                    v1::OpenSessionResponse* response);
  absl::Status KeepProxySessionsImpl(
      grpc::ServerContext* context, const v1::KeepProxySessionsRequest* request,
      v1::KeepProxySessionsResponse* response);
  absl::Status CloseProxySessionImpl(grpc::ServerContext* context,
                                     const v1::CloseSessionRequest* request,
                                     v1::CloseSessionResponse* response);
  // The targets for an authenticated proxy call, or why there are none.
  absl::StatusOr<const ProxyTargets*> ProxyCall(
      const grpc::ServerContext& context) const;
  template <typename Call>
  grpc::Status Proxied(grpc::ServerContext* context, absl::string_view rpc,
                       Call&& call) {
    return Guarded(rpc, [&]() -> grpc::Status {
      absl::StatusOr<const ProxyTargets*> targets = ProxyCall(*context);
      if (!targets.ok()) return ToGrpcStatus(targets.status());
      return call(**targets);
    });
  }

  Cluster* const cluster_;
  std::atomic<CrossHostReceives*> receives_{nullptr};
  std::atomic<DaemonMetrics*> metrics_{nullptr};
  ExchangeDirectory* directory_ = nullptr;
  std::atomic<const ProxyTargets*> proxy_targets_{nullptr};
};

// Compile goes through the daemon-wide cache; executables belong to the
// calling session like buffers. Execute returns once the run is enqueued.
class ExecutableService final : public v1::Executables::Service {
 public:
  ExecutableService(runtime::Client* client, Cluster* cluster,
                    SessionTable* sessions, Authenticator* auth,
                    ExecutableCache* cache, const DaemonLimits& limits)
      : client_(client),
        cluster_(cluster),
        sessions_(sessions),
        auth_(auth),
        cache_(cache),
        limits_(limits),
        compile_slots_(std::make_shared<device::Semaphore>(
            limits.max_concurrent_compiles > 0
                ? limits.max_concurrent_compiles
                : std::max(1u, std::thread::hardware_concurrency()))) {
    for (size_t i = 0; i < client->devices().size(); ++i) {
      fair_queues_.push_back(
          std::make_unique<FairQueue>(limits.fair_queue_depth));
    }
  }

  grpc::Status Compile(grpc::ServerContext* context,
                       const v1::CompileRequest* request,
                       v1::CompileResponse* response) override {
    return Authenticated(auth_, *context, "Executables.Compile", [&] {
      return CompileImpl(context, request, response);
    });
  }
  grpc::Status Execute(grpc::ServerContext* context,
                       const v1::ExecuteRequest* request,
                       v1::ExecuteResponse* response) override {
    return Authenticated(auth_, *context, "Executables.Execute", [&] {
      return ExecuteImpl(context, request, response);
    });
  }
  grpc::Status ExecuteStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ExecuteStreamResponse, v1::ExecuteRequest>*
          stream) override {
    return Authenticated(auth_, *context, "Executables.ExecuteStream", [&] {
      return ExecuteStreamImpl(
          context, [stream](v1::ExecuteRequest* r) { return stream->Read(r); },
          [stream](const v1::ExecuteStreamResponse& response) {
            return stream->Write(response);
          });
    });
  }
  grpc::Status ExecuteStreamBatched(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ExecuteStreamResponse, v1::ExecuteBatch>*
          stream) override {
    return Authenticated(
        auth_, *context, "Executables.ExecuteStreamBatched", [&] {
          // The requests of each message, one at a time.
          v1::ExecuteBatch batch;
          int next = 0;
          auto read = [&](v1::ExecuteRequest* request) {
            while (next >= batch.requests_size()) {
              batch.Clear();
              next = 0;
              if (!stream->Read(&batch)) return false;
            }
            request->Swap(batch.mutable_requests(next++));
            return true;
          };
          return ExecuteStreamImpl(
              context, read, [stream](const v1::ExecuteStreamResponse& r) {
                return stream->Write(r);
              });
        });
  }
  grpc::Status ExecuteReplicated(
      grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
      v1::ExecuteReplicatedResponse* response) override {
    return Authenticated(auth_, *context, "Executables.ExecuteReplicated", [&] {
      return ExecuteReplicatedImpl(context, request, response);
    });
  }
  grpc::Status DeleteExecutable(
      grpc::ServerContext* context, const v1::DeleteExecutableRequest* request,
      v1::DeleteExecutableResponse* response) override {
    return Authenticated(auth_, *context, "Executables.DeleteExecutable", [&] {
      return DeleteExecutableImpl(context, request, response);
    });
  }

  // One Execute of an execute lane (daemon/execute_lane.h) of `session`:
  // what the RPC does, without a call around it.
  // `call` stops its waits (see ExecuteLaneServer::Handler).
  absl::Status ExecuteOnLane(const std::shared_ptr<Session>& session,
                             const v1::ExecuteRequest& request,
                             v1::ExecuteResponse* response,
                             std::shared_ptr<Cancellation> call);

  // Ends every open ExecuteStream (the requests already read still run)
  // and refuses new ones: a stream stays open as long as its client likes,
  // which would otherwise hold a graceful shutdown until its deadline.
  void EndStreams();

  // Where whole-cluster sessions reach other tasks (null: a cluster of one,
  // or the peer-side instance that serves proxies). Set before serving.
  void SetProxies(ProxySessions* proxies) { proxies_ = proxies; }
  // Where transfers (and compiles) are counted; may stay null. Set before
  // the service is served.
  void SetMetrics(DaemonMetrics* metrics) { metrics_ = metrics; }
  // Compiles of both instances take slots of one max_concurrent_compiles.
  // Before serving.
  void ShareCompileSlots(const ExecutableService& other) {
    compile_slots_ = other.compile_slots_;
  }

 private:
  // A whole-cluster session's compile of a program that spans tasks: the
  // same program compiled on every other task of its assignment, after
  // this task's compile answered `response` (whose device list it widens
  // to the whole assignment).
  absl::Status CompileOnOtherTasks(grpc::ServerContext* context,
                                   const std::shared_ptr<Session>& session,
                                   const v1::CompileRequest& request,
                                   const runtime::Executable& executable,
                                   v1::CompileResponse* response);
  // ExecuteReplicated of such a program: every task's part launched at
  // once, with one launch id.
  absl::Status ExecuteOnEveryTask(
      grpc::ServerContext* context, const std::shared_ptr<Session>& session,
      runtime::Executable& executable,
      const absl::flat_hash_map<int, uint64_t>& parts,
      const v1::ExecuteReplicatedRequest& request,
      v1::ExecuteReplicatedResponse* response);
  // ExecuteReplicated on this task's devices.
  absl::Status ExecuteReplicatedHere(
      grpc::ServerContext* context, const std::shared_ptr<Session>& session,
      runtime::Executable& executable,
      const v1::ExecuteReplicatedRequest& request,
      v1::ExecuteReplicatedResponse* response);

  // The handlers, run by the overrides above inside Guarded.
  absl::Status CompileImpl(grpc::ServerContext* context,
                           const v1::CompileRequest* request,
                           v1::CompileResponse* response);
  absl::Status ExecuteImpl(grpc::ServerContext* context,
                           const v1::ExecuteRequest* request,
                           v1::ExecuteResponse* response);
  // Both streams' work: `read` gives the next request (false at the end),
  // `write` sends an acknowledgement (false once the client is gone).
  absl::Status ExecuteStreamImpl(
      grpc::ServerContext* context,
      const std::function<bool(v1::ExecuteRequest*)>& read,
      const std::function<bool(const v1::ExecuteStreamResponse&)>& write);
  absl::Status ExecuteReplicatedImpl(
      grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
      v1::ExecuteReplicatedResponse* response);
  absl::Status DeleteExecutableImpl(grpc::ServerContext* context,
                                    const v1::DeleteExecutableRequest* request,
                                    v1::DeleteExecutableResponse* response);

  // Execute's work: runs `request` and describes its results in `infos`.
  // `inline_idle`: run the work on this thread when the device is idle
  // (see runtime::ExecuteRunOptions::run_inline_when_idle).
  absl::Status ExecuteOne(
      grpc::ServerContext* context, const v1::ExecuteRequest& request,
      bool inline_idle,
      google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos);
  // ExecuteOne once the caller's session is known. An execute lane's
  // request has no `context` but its own `lane_call`, which stops its
  // waits.
  absl::Status ExecuteInSession(
      const std::shared_ptr<Session>& session, grpc::ServerContext* context,
      std::shared_ptr<Cancellation> lane_call,
      const v1::ExecuteRequest& request, bool inline_idle,
      google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos);

  runtime::Client* const client_;
  Cluster* const cluster_;
  SessionTable* const sessions_;
  Authenticator* const auth_;
  ExecutableCache* const cache_;
  const DaemonLimits limits_;
  // Compiles run at once (each takes one), so that many large programs
  // sent together do not take every core and much memory at once.
  // Shared with the instance that serves other tasks' proxies.
  std::shared_ptr<device::Semaphore> compile_slots_;
  // Per local device: turns between tenants (used only with tenants).
  std::vector<std::unique_ptr<FairQueue>> fair_queues_;

  pjrt::Mutex streams_mu_;
  bool streams_ended_ ABSL_GUARDED_BY(streams_mu_) = false;
  absl::flat_hash_set<grpc::ServerContext*> streams_
      ABSL_GUARDED_BY(streams_mu_);
  ProxySessions* proxies_ = nullptr;
  DaemonMetrics* metrics_ = nullptr;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SERVICES_H_
