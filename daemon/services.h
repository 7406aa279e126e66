// The gRPC services of pjrtd. Each is thin: decode the request, call the
// runtime or the session table, encode the reply.
//
// Server, Buffers and Executables use gRPC's synchronous API: their handlers
// may block (waiting for a buffer to become ready, reading a stream,
// compiling a program) on a thread of gRPC's pool. Sessions uses the callback
// API, so that an Attach stream costs no thread while it is open.
#ifndef PJRT_DAEMON_SERVICES_H_
#define PJRT_DAEMON_SERVICES_H_

#include <atomic>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "daemon/cluster.h"
#include "daemon/compile_cache.h"
#include "daemon/cross_host.h"
#include "daemon/session_table.h"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "pjrt/v1/cluster.grpc.pb.h"
#include "pjrt/v1/executable.grpc.pb.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace pjrt::daemon {

// Largest chunk of an upload, and the size of download chunks.
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 20;

// The daemon-wide cache of compiled programs.
using ExecutableCache = CompileCache<runtime::Executable>;

// Waits for `buffer` to be ready within `timeout` and returns its status
// (see runtime::Buffer::BlockHostUntilReady), giving up early with
// CANCELLED when `context` is cancelled (checked every 100 ms).
absl::Status AwaitReady(grpc::ServerContext* context, runtime::Buffer& buffer,
                        absl::Duration timeout);

// The addressable device with global id `id`. INVALID_ARGUMENT naming the
// id, and the task that owns it when it is another task's device.
absl::StatusOr<runtime::Device*> LookupAddressableDevice(
    const runtime::Client& client, const Cluster& cluster, int id);

class ServerService final : public v1::Server::Service {
 public:
  ServerService(runtime::Client* client, Cluster* cluster,
                CrossHostReceives* receives, SessionTable* sessions,
                ExecutableCache* compile_cache, std::string region_socket)
      : client_(client),
        cluster_(cluster),
        receives_(receives),
        sessions_(sessions),
        compile_cache_(compile_cache),
        region_socket_(std::move(region_socket)),
        start_(absl::Now()) {}

  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;
  grpc::Status ListDevices(grpc::ServerContext* context,
                           const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest* request,
                        v1::Stats* response) override;
  grpc::Status Ping(grpc::ServerContext* context,
                    const v1::PingRequest* request,
                    v1::PingResponse* response) override;
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest* request,
                                v1::ClusterStatus* response) override;

 private:
  runtime::Client* const client_;
  Cluster* const cluster_;
  CrossHostReceives* const receives_;
  SessionTable* const sessions_;
  ExecutableCache* const compile_cache_;
  // Empty when shared memory is off.
  const std::string region_socket_;
  const absl::Time start_;
};

class SessionService final : public v1::Sessions::CallbackService {
 public:
  // `admin_token` empty: CloseSessionAsAdmin is refused.
  SessionService(SessionTable* sessions, std::string admin_token)
      : sessions_(sessions), admin_token_(std::move(admin_token)) {}

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
  SessionTable* const sessions_;
  const std::string admin_token_;
};

class BufferService final : public v1::Buffers::Service {
 public:
  BufferService(runtime::Client* client, Cluster* cluster,
                CrossHostReceives* receives, SessionTable* sessions,
                absl::Duration default_receive_timeout)
      : client_(client),
        cluster_(cluster),
        receives_(receives),
        sessions_(sessions),
        default_receive_timeout_(default_receive_timeout) {}

  grpc::Status Upload(grpc::ServerContext* context,
                      grpc::ServerReader<v1::UploadRequest>* reader,
                      v1::BufferInfo* response) override;
  grpc::Status Download(grpc::ServerContext* context,
                        const v1::DownloadRequest* request,
                        grpc::ServerWriter<v1::DownloadResponse>* writer) override;
  grpc::Status DescribeBuffer(grpc::ServerContext* context,
                              const v1::DescribeBufferRequest* request,
                              v1::BufferInfo* response) override;
  grpc::Status DeleteBuffers(grpc::ServerContext* context,
                             const v1::DeleteBuffersRequest* request,
                             v1::DeleteBuffersResponse* response) override;
  grpc::Status BlockUntilReady(grpc::ServerContext* context,
                               const v1::BlockUntilReadyRequest* request,
                               v1::BufferInfo* response) override;
  grpc::Status CopyToDevice(grpc::ServerContext* context,
                            const v1::CopyToDeviceRequest* request,
                            v1::BufferInfo* response) override;
  grpc::Status GetReadyState(grpc::ServerContext* context,
                             const v1::GetReadyStateRequest* request,
                             v1::GetReadyStateResponse* response) override;
  grpc::Status MakeTuple(grpc::ServerContext* context,
                         const v1::MakeTupleRequest* request,
                         v1::BufferInfo* response) override;
  grpc::Status MakeCrossHostReceiveBuffers(
      grpc::ServerContext* context,
      const v1::MakeCrossHostReceiveBuffersRequest* request,
      v1::MakeCrossHostReceiveBuffersResponse* response) override;
  grpc::Status CopyToRemoteDevice(
      grpc::ServerContext* context,
      const v1::CopyToRemoteDeviceRequest* request,
      v1::CopyToRemoteDeviceResponse* response) override;
  grpc::Status CancelCrossHostReceives(
      grpc::ServerContext* context,
      const v1::CancelCrossHostReceivesRequest* request,
      v1::CancelCrossHostReceivesResponse* response) override;
  grpc::Status UploadFromRegion(grpc::ServerContext* context,
                                const v1::UploadFromRegionRequest* request,
                                v1::BufferInfo* response) override;
  grpc::Status DownloadToRegion(grpc::ServerContext* context,
                                const v1::DownloadToRegionRequest* request,
                                v1::BufferInfo* response) override;
  grpc::Status UnregisterRegion(
      grpc::ServerContext* context, const v1::UnregisterRegionRequest* request,
      v1::UnregisterRegionResponse* response) override;
  grpc::Status ListRegions(grpc::ServerContext* context,
                           const v1::ListRegionsRequest* request,
                           v1::ListRegionsResponse* response) override;

 private:
  runtime::Client* const client_;
  Cluster* const cluster_;
  CrossHostReceives* const receives_;
  SessionTable* const sessions_;
  const absl::Duration default_receive_timeout_;
};

// The daemon-to-daemon service, served on this task's cluster address.
// Handshake works from start-up on; PushTransfer once the runtime is up
// (SetReceives), UNAVAILABLE before.
class PeerService final : public v1::Peer::Service {
 public:
  explicit PeerService(Cluster* cluster) : cluster_(cluster) {}

  void SetReceives(CrossHostReceives* receives) { receives_.store(receives); }

  grpc::Status Handshake(grpc::ServerContext* context,
                         const v1::HandshakeRequest* request,
                         v1::HandshakeResponse* response) override;
  grpc::Status PushTransfer(
      grpc::ServerContext* context,
      grpc::ServerReader<v1::PushTransferRequest>* reader,
      v1::PushTransferResponse* response) override;

 private:
  Cluster* const cluster_;
  std::atomic<CrossHostReceives*> receives_{nullptr};
};

// Compile goes through the daemon-wide cache; executables belong to the
// calling session like buffers. Execute returns once the run is enqueued.
class ExecutableService final : public v1::Executables::Service {
 public:
  ExecutableService(runtime::Client* client, Cluster* cluster,
                    SessionTable* sessions, ExecutableCache* cache)
      : client_(client), cluster_(cluster), sessions_(sessions), cache_(cache) {}

  grpc::Status Compile(grpc::ServerContext* context,
                       const v1::CompileRequest* request,
                       v1::CompileResponse* response) override;
  grpc::Status Execute(grpc::ServerContext* context,
                       const v1::ExecuteRequest* request,
                       v1::ExecuteResponse* response) override;
  grpc::Status ExecuteStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ExecuteStreamResponse, v1::ExecuteRequest>*
          stream) override;
  grpc::Status ExecuteReplicated(
      grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
      v1::ExecuteReplicatedResponse* response) override;
  grpc::Status DeleteExecutable(
      grpc::ServerContext* context, const v1::DeleteExecutableRequest* request,
      v1::DeleteExecutableResponse* response) override;

  // Ends every open ExecuteStream (the requests already read still run)
  // and refuses new ones: a stream stays open as long as its client likes,
  // which would otherwise hold a graceful shutdown until its deadline.
  void EndStreams();

 private:
  // Execute's work: runs `request` and describes its results in `infos`.
  // `inline_idle`: run the work on this thread when the device is idle
  // (see device::WorkerThread::InlineScope).
  absl::Status ExecuteOne(
      grpc::ServerContext* context, const v1::ExecuteRequest& request,
      bool inline_idle,
      google::protobuf::RepeatedPtrField<v1::BufferInfo>* infos);

  runtime::Client* const client_;
  Cluster* const cluster_;
  SessionTable* const sessions_;
  ExecutableCache* const cache_;

  pjrt::Mutex streams_mu_;
  bool streams_ended_ ABSL_GUARDED_BY(streams_mu_) = false;
  absl::flat_hash_set<grpc::ServerContext*> streams_
      ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SERVICES_H_
