// The gRPC services of pjrtd. Each is thin: decode the request, call the
// runtime or the session table, encode the reply.
//
// Server, Buffers and Executables use gRPC's synchronous API: their handlers
// may block (waiting for a buffer to become ready, reading a stream,
// compiling a program) on a thread of gRPC's pool. Sessions uses the callback
// API, so that an Attach stream costs no thread while it is open.
#ifndef PJRT_DAEMON_SERVICES_H_
#define PJRT_DAEMON_SERVICES_H_

#include "absl/time/time.h"
#include "daemon/compile_cache.h"
#include "daemon/session_table.h"
#include "pjrt/v1/buffer.grpc.pb.h"
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

class ServerService final : public v1::Server::Service {
 public:
  ServerService(runtime::Client* client, SessionTable* sessions,
                ExecutableCache* compile_cache)
      : client_(client),
        sessions_(sessions),
        compile_cache_(compile_cache),
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

 private:
  runtime::Client* const client_;
  SessionTable* const sessions_;
  ExecutableCache* const compile_cache_;
  const absl::Time start_;
};

class SessionService final : public v1::Sessions::CallbackService {
 public:
  explicit SessionService(SessionTable* sessions) : sessions_(sessions) {}

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

 private:
  SessionTable* const sessions_;
};

class BufferService final : public v1::Buffers::Service {
 public:
  BufferService(runtime::Client* client, SessionTable* sessions)
      : client_(client), sessions_(sessions) {}

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

 private:
  runtime::Client* const client_;
  SessionTable* const sessions_;
};

// Compile goes through the daemon-wide cache; executables belong to the
// calling session like buffers. Execute returns once the run is enqueued.
class ExecutableService final : public v1::Executables::Service {
 public:
  ExecutableService(runtime::Client* client, SessionTable* sessions,
                    ExecutableCache* cache)
      : client_(client), sessions_(sessions), cache_(cache) {}

  grpc::Status Compile(grpc::ServerContext* context,
                       const v1::CompileRequest* request,
                       v1::CompileResponse* response) override;
  grpc::Status Execute(grpc::ServerContext* context,
                       const v1::ExecuteRequest* request,
                       v1::ExecuteResponse* response) override;
  grpc::Status ExecuteReplicated(
      grpc::ServerContext* context, const v1::ExecuteReplicatedRequest* request,
      v1::ExecuteReplicatedResponse* response) override;
  grpc::Status DeleteExecutable(
      grpc::ServerContext* context, const v1::DeleteExecutableRequest* request,
      v1::DeleteExecutableResponse* response) override;

 private:
  runtime::Client* const client_;
  SessionTable* const sessions_;
  ExecutableCache* const cache_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SERVICES_H_
