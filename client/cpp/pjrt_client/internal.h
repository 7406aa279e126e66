// What the client's classes share, not part of its interface.
#ifndef PJRT_CLIENT_CPP_INTERNAL_H_
#define PJRT_CLIENT_CPP_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "client/cpp/pjrt_client/client.h"
#include "client/cpp/pjrt_client/wire.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "pjrt/v1/executable.grpc.pb.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"

namespace pjrt_client {

// Default deadline for control calls.
inline constexpr absl::Duration kCallTimeout = absl::Seconds(60);

inline void SetDeadline(grpc::ClientContext* context,
                        absl::Duration timeout = kCallTimeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// Makes the unary call `method` of `stub` with a deadline `timeout` from now:
// UnaryCall(state->buffers_stub(), &Buffers::Stub::DescribeBuffer, request,
// &info).
template <typename Stub, typename Request, typename Response>
absl::Status UnaryCall(Stub& stub,
                       grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                    const Request&, Response*),
                       const Request& request, Response* response,
                       absl::Duration timeout = kCallTimeout) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  return ToAbslStatus((stub.*method)(&context, request, response));
}

// The generated stubs of the daemon's services, on a Client's channel.
struct Stubs {
  explicit Stubs(const std::shared_ptr<grpc::Channel>& channel)
      : server(pjrt::v1::Server::NewStub(channel)),
        sessions(pjrt::v1::Sessions::NewStub(channel)),
        buffers(pjrt::v1::Buffers::NewStub(channel)),
        executables(pjrt::v1::Executables::NewStub(channel)) {}

  const std::unique_ptr<pjrt::v1::Server::Stub> server;
  const std::unique_ptr<pjrt::v1::Sessions::Stub> sessions;
  const std::unique_ptr<pjrt::v1::Buffers::Stub> buffers;
  const std::unique_ptr<pjrt::v1::Executables::Stub> executables;
};

// A memfd mapped here and registered with the daemon.
struct Mapping {
  uint64_t handle = 0;
  uint8_t* data = nullptr;
  int64_t size = 0;
};

// Creates, seals, maps and registers a memfd of `size` bytes. UNAVAILABLE
// when the daemon's region socket cannot be reached (another host), the
// daemon's error when it refuses.
absl::StatusOr<Mapping> CreateMapping(const std::string& socket_name,
                                      uint64_t session_id, int64_t size,
                                      const std::string& name);
void Unmap(const Mapping& mapping);

// A connected data channel (daemon/data_channel.h): a blocking TCP socket
// and its handle in the session.
struct ChannelSocket {
  int fd = -1;
  uint64_t handle = 0;
};
// Channels a session keeps open at once; a transfer that finds them all
// busy streams through gRPC instead.
inline constexpr int kMaxDataChannels = 4;

// The ordered ExecuteStream of a session, for pipelined runs.
struct PipelineState {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<pjrt::v1::ExecuteRequest,
                                           pjrt::v1::ExecuteStreamResponse>>
      stream;
  std::thread reader;

  pjrt::Mutex mu;
  int64_t sent ABSL_GUARDED_BY(mu) = 0;
  int64_t acked ABSL_GUARDED_BY(mu) = -1;
  bool ended ABSL_GUARDED_BY(mu) = false;
  // Why the stream ended early (the first failing request's error).
  absl::Status error ABSL_GUARDED_BY(mu);
  // Buffers deleted while runs that may use them were in flight:
  // (the last request sent at the time, handle).
  std::vector<std::pair<int64_t, uint64_t>> deferred ABSL_GUARDED_BY(mu);
};

struct SessionState {
  std::shared_ptr<Client> client;
  uint64_t id = 0;
  uint64_t public_id = 0;

  // The Attach call; its context is cancelled at close.
  grpc::ClientContext attach_context;
  std::unique_ptr<grpc::ClientReader<pjrt::v1::SessionEvent>> attach_reader;

  pjrt::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;
  // Kept sessions are not closed when their Session object goes.
  bool kept ABSL_GUARDED_BY(mu) = false;
  // Whether shared memory works with this daemon: unknown until tried.
  enum class Shm { kUntried, kWorks, kUnusable };
  Shm shm ABSL_GUARDED_BY(mu) = Shm::kUntried;
  // Staging regions not in use.
  std::vector<Mapping> staging ABSL_GUARDED_BY(mu);
  // Data channels: why they are not used (empty while they may be), the
  // idle ones, and how many are open.
  std::string channels_unusable ABSL_GUARDED_BY(mu);
  std::vector<ChannelSocket> idle_channels ABSL_GUARDED_BY(mu);
  int open_channels ABSL_GUARDED_BY(mu) = 0;
  std::shared_ptr<PipelineState> pipeline ABSL_GUARDED_BY(mu);
  // Execute lanes: whether they turned out not to work, the idle ones
  // (sockets), and how many are open.
  bool lanes_unusable ABSL_GUARDED_BY(mu) = false;
  std::vector<int> idle_lanes ABSL_GUARDED_BY(mu);
  int open_lanes ABSL_GUARDED_BY(mu) = 0;

  // Handles whose objects went (destructors), not yet sent to the daemon:
  // the next Execute carries them, or the flusher thread sends them after
  // kReleaseInterval, or at once when there are many.
  std::vector<uint64_t> dropped_buffers ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> dropped_executables ABSL_GUARDED_BY(mu);
  int64_t dropped_bytes ABSL_GUARDED_BY(mu) = 0;
  // How often an Execute took them.
  uint64_t takes ABSL_GUARDED_BY(mu) = 0;
  // FlushReleases calls sending their deletions now.
  int flushing ABSL_GUARDED_BY(mu) = 0;
  std::thread flusher;
  bool flusher_started ABSL_GUARDED_BY(mu) = false;
  bool flusher_stop ABSL_GUARDED_BY(mu) = false;

  pjrt::v1::Sessions::Stub& sessions_stub() const {
    return *client->stubs_->sessions;
  }
  pjrt::v1::Buffers::Stub& buffers_stub() const {
    return *client->stubs_->buffers;
  }
  pjrt::v1::Executables::Stub& executables_stub() const {
    return *client->stubs_->executables;
  }

  bool IsClosed() {
    pjrt::MutexLock lock(&mu);
    return closed;
  }

  // A staging region of at least `size` bytes for the caller alone, or
  // nullopt when shared memory is not to be used.
  std::optional<Mapping> TakeStaging(int64_t size);
  void GiveBackStaging(Mapping mapping);
  // An idle data channel, a new one, or nullopt (stream instead).
  std::optional<ChannelSocket> TakeChannel();
  void GiveBackChannel(ChannelSocket channel);
  // Closes a channel whose transfer failed (the daemon ended it).
  void DiscardChannel(ChannelSocket channel);
  // Ends the pipeline (waiting for runs sent), unmaps staging regions and
  // closes data channels and execute lanes.
  void Shutdown();

  // Execute's call: over an execute lane when one is free, else gRPC.
  absl::Status ExecuteCall(const pjrt::v1::ExecuteRequest& request,
                           pjrt::v1::ExecuteResponse* response);
  // An idle execute lane, a new one, or -1 (call gRPC instead).
  int TakeLane();
  void GiveBackLane(int fd);
  // Closes a lane that broke (or was turned away).
  void DiscardLane(int fd);

  // Deletes `handles` on the daemon now (errors ignored).
  void DeleteNow(const std::vector<uint64_t>& handles);
  // A destructor's release of a buffer (of `bytes`) or an executable: sent
  // later, without waiting (see dropped_buffers).
  void DropBuffer(uint64_t handle, int64_t bytes);
  void DropExecutable(uint64_t handle);
  // Deletes executable `handle` on the daemon now.
  absl::Status DeleteExecutableNow(uint64_t handle);
  // Moves the dropped handles into `request` (an Execute carries them).
  void TakeReleases(pjrt::v1::ExecuteRequest* request);
  // Sends the dropped handles now and waits until the daemon has freed
  // them (errors ignored: what is gone is gone).
  void FlushReleases();
  // For a call refused with RESOURCE_EXHAUSTED: if what this client dropped
  // may still hold daemon memory (not sent yet, or being deleted by another
  // thread), frees it, waits until the daemon has, and returns true (worth
  // one more try).
  bool FreeReleasesForRetry();
  void FlushLoop();
  void StartFlusherLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  ~SessionState();
  // Deletes `handle` now or, while pipelined runs are in flight, once
  // they have run.
  void DeleteWhenUnused(uint64_t handle);
  // Waits until pipelined request `sequence` has run.
  absl::Status WaitForPipelined(int64_t sequence);
};

// Uploads `data` over `channel`; the daemon's reply.
absl::StatusOr<pjrt::v1::BufferInfo> UploadOverChannel(
    SessionState& session, const ChannelSocket& channel,
    const pjrt::v1::UploadHeader& header, absl::Span<const uint8_t> data);
// Downloads buffer `handle` into `out` (exactly its size) over `channel`.
absl::Status DownloadOverChannel(SessionState& session,
                                 const ChannelSocket& channel, uint64_t handle,
                                 absl::Span<uint8_t> out);

}  // namespace pjrt_client

#endif  // PJRT_CLIENT_CPP_INTERNAL_H_
