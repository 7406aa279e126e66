// The client's fast paths: shared-memory regions for a daemon on this host,
// and pipelined runs on the session's ordered execution stream.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "base/random.h"
#include "base/socket_io.h"
#include "base/status_macros.h"
#include "client/cpp/pjrt_client/client.h"
#include "client/cpp/pjrt_client/internal.h"

namespace pjrt_client {
namespace v1 = ::pjrt::v1;

namespace {

// Staging regions are at least this large, so that most arrays fit the
// first one made; at most this many are kept for reuse.
constexpr int64_t kStagingMinBytes = int64_t{64} << 20;
constexpr size_t kStagingKeep = 4;
// Buffers deleted while their runs were in flight go in batches this big.
constexpr size_t kDeleteBatch = 64;
// Dropped handles wait at most this long for an Execute to carry them, and
// are sent at once when there are this many, or buffers of this many bytes.
constexpr absl::Duration kReleaseInterval = absl::Milliseconds(100);
constexpr size_t kReleaseBatch = 64;
constexpr int64_t kReleaseBytes = int64_t{64} << 20;

std::string ErrnoText() { return std::strerror(errno); }

// Moves the deferred deletions whose runs are done to `batch`.
void TakeDeletable(PipelineState* p, std::vector<uint64_t>* batch)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) {
  auto keep = p->deferred.begin();
  for (auto& entry : p->deferred) {
    if (entry.first <= p->acked) {
      batch->push_back(entry.second);
    } else {
      *keep++ = entry;
    }
  }
  p->deferred.erase(keep, p->deferred.end());
}

// Sends the registration over the daemon's region socket.
absl::StatusOr<uint64_t> Register(const std::string& socket_name,
                                  uint64_t session_id, int fd, int64_t size,
                                  const std::string& name) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_name.empty() || socket_name.size() >= sizeof(addr.sun_path)) {
    return absl::UnavailableError(
        absl::StrFormat("bad region socket name '%s'", socket_name));
  }
  std::memcpy(addr.sun_path, socket_name.data(), socket_name.size());
  socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                            socket_name.size());
  if (socket_name[0] == '@') {
    addr.sun_path[0] = '\0';
  } else {
    length += 1;
  }
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return absl::UnavailableError("socket: " + ErrnoText());
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    std::string why = ErrnoText();
    close(s);
    return absl::UnavailableError(absl::StrFormat(
        "cannot reach pjrtd's region socket %s (%s): the daemon is not on "
        "this host, or not in this network namespace",
        socket_name, why));
  }
  v1::RegisterRegionRequest request;
  request.set_session_id(session_id);
  request.set_size_bytes(size);
  request.set_name(name);
  const std::string payload = request.SerializeAsString();
  char reply[4096];
  ssize_t received = -1;
  if (pjrt::SendWithDescriptor(s, payload.data(), payload.size(), fd)) {
    received = recv(s, reply, sizeof(reply), 0);
  }
  std::string why = ErrnoText();
  close(s);
  if (received < 0) {
    return absl::UnavailableError("registering a region failed: " + why);
  }
  v1::RegisterRegionResponse response;
  if (!response.ParseFromArray(reply, static_cast<int>(received))) {
    return absl::InternalError("the daemon's region reply is malformed");
  }
  if (response.region_handle() == 0) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_code()),
                        response.error_message());
  }
  return response.region_handle();
}

}  // namespace

absl::StatusOr<Mapping> CreateMapping(const std::string& socket_name,
                                      uint64_t session_id, int64_t size,
                                      const std::string& name) {
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a region needs a positive size; got %d", size));
  }
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::InternalError("memfd_create: " + ErrnoText());
  Mapping mapping;
  absl::Status status;
  if (ftruncate(fd, size) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    status = absl::ResourceExhaustedError(absl::StrFormat(
        "cannot make a region of %d bytes: %s", size, ErrnoText()));
  } else {
    void* data = mmap(nullptr, static_cast<size_t>(size),
                      PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      status = absl::ResourceExhaustedError(absl::StrFormat(
          "cannot map a region of %d bytes: %s", size, ErrnoText()));
    } else {
      mapping.data = static_cast<uint8_t*>(data);
      mapping.size = size;
      auto handle = Register(socket_name, session_id, fd, size, name);
      if (handle.ok()) {
        mapping.handle = *handle;
      } else {
        status = handle.status();
        Unmap(mapping);
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return mapping;
}

void Unmap(const Mapping& mapping) {
  if (mapping.data != nullptr) {
    munmap(mapping.data, static_cast<size_t>(mapping.size));
  }
}

std::optional<Mapping> SessionState::TakeStaging(int64_t size) {
  {
    pjrt::MutexLock lock(&mu);
    if (closed || shm == Shm::kUnusable) return std::nullopt;
    for (auto it = staging.begin(); it != staging.end(); ++it) {
      if (it->size >= size) {
        Mapping mapping = *it;
        staging.erase(it);
        return mapping;
      }
    }
  }
  const std::string& socket = client->server_info().region_socket;
  if (!client->shared_memory_ || socket.empty()) {
    pjrt::MutexLock lock(&mu);
    shm = Shm::kUnusable;
    return std::nullopt;
  }
  int64_t mib = int64_t{1} << 20;
  int64_t want = std::max(kStagingMinBytes, (size + mib - 1) / mib * mib);
  auto mapping = CreateMapping(socket, id, want, "pjrt-staging");
  {
    pjrt::MutexLock lock(&mu);
    if (!mapping.ok()) {
      // Unreachable: another host. Refused (say, too many regions): stream
      // this one and try again next time.
      if (absl::IsUnavailable(mapping.status())) shm = Shm::kUnusable;
      return std::nullopt;
    }
    shm = Shm::kWorks;
  }
  // Fault the pages in now rather than during the first transfer.
  long page = sysconf(_SC_PAGESIZE);
  for (int64_t i = 0; i < mapping->size; i += page) mapping->data[i] = 0;
  return *mapping;
}

void SessionState::GiveBackStaging(Mapping mapping) {
  {
    pjrt::MutexLock lock(&mu);
    if (!closed && staging.size() < kStagingKeep) {
      staging.push_back(mapping);
      return;
    }
  }
  if (!IsClosed()) {
    v1::UnregisterRegionRequest request;
    request.set_session_id(id);
    request.set_region_handle(mapping.handle);
    v1::UnregisterRegionResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    buffers_stub().UnregisterRegion(&context, request, &response);
  }
  Unmap(mapping);
}

void SessionState::DeleteNow(const std::vector<uint64_t>& handles) {
  if (handles.empty() || IsClosed()) return;
  v1::DeleteBuffersRequest request;
  request.set_session_id(id);
  for (uint64_t h : handles) request.add_handles(h);
  v1::DeleteBuffersResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  buffers_stub().DeleteBuffers(&context, request, &response);
}

void SessionState::DropBuffer(uint64_t handle, int64_t bytes) {
  {
    pjrt::MutexLock lock(&mu);
    if (closed) return;  // the daemon freed it with the session
    if (pipeline == nullptr && !flusher_stop) {
      dropped_buffers.push_back(handle);
      dropped_bytes += bytes;
      StartFlusherLocked();
      return;
    }
  }
  // Pipelined runs in flight may use it (or the session object is gone
  // and its flusher with it): as Buffer::Delete.
  DeleteWhenUnused(handle);
}

void SessionState::DropExecutable(uint64_t handle) {
  {
    pjrt::MutexLock lock(&mu);
    if (closed) return;
    if (!flusher_stop) {
      dropped_executables.push_back(handle);
      StartFlusherLocked();
      return;
    }
  }
  DeleteExecutableNow(handle).IgnoreError();
}

absl::Status SessionState::DeleteExecutableNow(uint64_t handle) {
  v1::DeleteExecutableRequest request;
  request.set_session_id(id);
  request.set_executable_handle(handle);
  v1::DeleteExecutableResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  return ToAbslStatus(
      executables_stub().DeleteExecutable(&context, request, &response));
}

void SessionState::StartFlusherLocked() {
  if (flusher_started) return;
  flusher_started = true;
  flusher = std::thread([this] { FlushLoop(); });
}

SessionState::~SessionState() {
  {
    pjrt::MutexLock lock(&mu);
    flusher_stop = true;
  }
  if (flusher.joinable()) flusher.join();
}

void SessionState::TakeReleases(v1::ExecuteRequest* request) {
  pjrt::MutexLock lock(&mu);
  for (uint64_t h : dropped_buffers) request->add_release_buffers(h);
  for (uint64_t h : dropped_executables) request->add_release_executables(h);
  dropped_buffers.clear();
  dropped_executables.clear();
  dropped_bytes = 0;
  ++takes;
}

void SessionState::FlushReleases() {
  std::vector<uint64_t> buffers;
  std::vector<uint64_t> executables;
  {
    pjrt::MutexLock lock(&mu);
    if (closed) return;
    buffers.swap(dropped_buffers);
    executables.swap(dropped_executables);
    dropped_bytes = 0;
    ++flushing;
  }
  absl::Cleanup done = [this] {
    pjrt::MutexLock lock(&mu);
    --flushing;
  };
  if (!buffers.empty()) {
    v1::DeleteBuffersRequest request;
    request.set_session_id(id);
    request.set_skip_unknown(true);
    for (uint64_t h : buffers) request.add_handles(h);
    v1::DeleteBuffersResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    buffers_stub().DeleteBuffers(&context, request, &response);
  }
  for (uint64_t h : executables) DeleteExecutableNow(h).IgnoreError();
}

bool SessionState::FreeReleasesForRetry() {
  {
    pjrt::MutexLock lock(&mu);
    if (closed || (dropped_buffers.empty() && dropped_executables.empty() &&
                   flushing == 0)) {
      return false;
    }
  }
  FlushReleases();
  pjrt::MutexLock lock(&mu);
  mu.Await([this]()
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return flushing == 0; });
  return true;
}

void SessionState::FlushLoop() {
  for (;;) {
    {
      pjrt::MutexLock lock(&mu);
      auto pending = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return flusher_stop || !dropped_buffers.empty() ||
               !dropped_executables.empty();
      };
      mu.Await(pending);
      if (flusher_stop) return;
      // Give an Execute the chance to carry them, unless they are many:
      // while Executes keep taking what was dropped, nothing is sent.
      auto full = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return flusher_stop ||
               dropped_buffers.size() + dropped_executables.size() >=
                   kReleaseBatch ||
               dropped_bytes >= kReleaseBytes;
      };
      const uint64_t seen = takes;
      if (!mu.AwaitWithTimeout(full, kReleaseInterval) && takes != seen) {
        continue;
      }
      if (flusher_stop) return;
    }
    FlushReleases();
  }
}

void SessionState::DeleteWhenUnused(uint64_t handle) {
  std::shared_ptr<PipelineState> p;
  {
    pjrt::MutexLock lock(&mu);
    p = pipeline;
  }
  if (p != nullptr) {
    std::vector<uint64_t> batch;
    {
      pjrt::MutexLock lock(&p->mu);
      if (p->ended || p->acked >= p->sent - 1) {
        batch.push_back(handle);
      } else {
        // A run in flight may use it: delete once everything sent so far
        // has run, in batches.
        p->deferred.emplace_back(p->sent - 1, handle);
        if (p->deferred.size() < kDeleteBatch) return;
        TakeDeletable(p.get(), &batch);
      }
    }
    DeleteNow(batch);
    return;
  }
  DeleteNow({handle});
}

absl::Status SessionState::WaitForPipelined(int64_t sequence) {
  std::shared_ptr<PipelineState> p;
  {
    pjrt::MutexLock lock(&mu);
    p = pipeline;
  }
  if (p == nullptr) return absl::OkStatus();
  pjrt::MutexLock lock(&p->mu);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) {
    return p->acked >= sequence || p->ended;
  };
  p->mu.Await(done);
  if (p->acked >= sequence) return absl::OkStatus();
  if (!p->error.ok()) return p->error;
  return absl::AbortedError(absl::StrFormat(
      "the execution stream ended before pipelined run %d ran", sequence));
}

namespace {

void ReadPipeline(SessionState* session, PipelineState* p) {
  v1::ExecuteStreamResponse response;
  while (p->stream->Read(&response)) {
    std::vector<uint64_t> batch;
    {
      pjrt::MutexLock lock(&p->mu);
      p->acked = response.sequence();
      if (p->deferred.size() >= kDeleteBatch) TakeDeletable(p, &batch);
    }
    session->DeleteNow(batch);
  }
  grpc::Status status = p->stream->Finish();
  std::vector<uint64_t> batch;
  {
    pjrt::MutexLock lock(&p->mu);
    p->ended = true;
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      p->error = ToAbslStatus(status);
    }
    for (auto& [sequence, h] : p->deferred) {
      if (sequence <= p->acked) batch.push_back(h);
    }
    p->deferred.clear();
  }
  session->DeleteNow(batch);
}

}  // namespace

void SessionState::Shutdown() {
  std::shared_ptr<PipelineState> p;
  std::vector<Mapping> mappings;
  std::vector<ChannelSocket> channels;
  std::vector<int> lanes;
  bool join_flusher;
  {
    pjrt::MutexLock lock(&mu);
    p = std::move(pipeline);
    mappings.swap(staging);
    channels.swap(idle_channels);
    open_channels -= static_cast<int>(channels.size());
    lanes.swap(idle_lanes);
    open_lanes -= static_cast<int>(lanes.size());
    flusher_stop = true;
    join_flusher = flusher_started && flusher.joinable();
  }
  if (join_flusher) flusher.join();
  if (p != nullptr) {
    bool ended;
    {
      pjrt::MutexLock lock(&p->mu);
      ended = p->ended;
    }
    if (!ended) p->stream->WritesDone();
    p->reader.join();
  }
  for (const Mapping& m : mappings) Unmap(m);
  for (const ChannelSocket& c : channels) close(c.fd);
  for (int fd : lanes) close(fd);
}

// --- Execute lanes ----------------------------------------------------------

namespace {

// Lanes a session holds at most (the daemon's max_execute_lanes_per_session
// is 4 by default); a call beyond them goes through gRPC.
constexpr int kMaxLanes = 4;
constexpr uint32_t kMaxLaneMessageBytes = uint32_t{4} << 20;
constexpr uint32_t kLaneProtocolVersion = v1::PROTOCOL_REVISION_EXECUTE_LANES;

bool SendMessage(int fd, const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  std::string frame(pjrt::kFramePrefixBytes + size, '\0');
  pjrt::EncodeFrameLength(static_cast<uint32_t>(size),
                          reinterpret_cast<unsigned char*>(frame.data()));
  message.SerializeToArray(frame.data() + pjrt::kFramePrefixBytes,
                           static_cast<int>(size));
  return pjrt::SendAll(fd, frame.data(), frame.size());
}

// The next reply; an error status when the lane broke (errno says how).
absl::Status ReceiveReply(int fd, v1::ExecuteLaneReply* reply) {
  unsigned char prefix[pjrt::kFramePrefixBytes];
  if (!pjrt::ReceiveAll(fd, prefix, sizeof(prefix))) {
    return absl::UnavailableError("the lane ended");
  }
  const uint32_t length = pjrt::DecodeFrameLength(prefix);
  if (length > kMaxLaneMessageBytes) {
    return absl::UnavailableError(
        absl::StrFormat("a reply of %d bytes claimed", length));
  }
  std::string body(length, '\0');
  if (!pjrt::ReceiveAll(fd, body.data(), body.size()) ||
      !reply->ParseFromString(body)) {
    return absl::UnavailableError("the reply was cut short");
  }
  return absl::OkStatus();
}

}  // namespace

int SessionState::TakeLane() {
  {
    pjrt::MutexLock lock(&mu);
    if (closed || lanes_unusable) return -1;
    if (!idle_lanes.empty()) {
      int fd = idle_lanes.back();
      idle_lanes.pop_back();
      return fd;
    }
    if (open_lanes >= kMaxLanes) return -1;
    ++open_lanes;
  }
  const std::string& name = client->server_info().execute_lane_socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  int fd = -1;
  bool reached = false;
  if (client->execute_lanes_ && !name.empty() &&
      name.size() < sizeof(addr.sun_path)) {
    std::memcpy(addr.sun_path, name.data(), name.size());
    socklen_t length =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (name[0] == '@') {
      addr.sun_path[0] = '\0';
    } else {
      length += 1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      timeval timeout = absl::ToTimeval(kCallTimeout);
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
      reached = connect(fd, reinterpret_cast<sockaddr*>(&addr), length) == 0;
    }
  }
  if (reached) {
    v1::ExecuteLaneHello hello;
    hello.set_session_id(id);
    hello.set_protocol_version(kLaneProtocolVersion);
    v1::ExecuteLaneReply reply;
    if (SendMessage(fd, hello) && ReceiveReply(fd, &reply).ok() &&
        reply.error_code() == 0) {
      return fd;
    }
    // Refused (too many lanes, say), or turned away before the hello (the
    // daemon has all the lanes it serves): this call goes through gRPC.
    DiscardLane(fd);
    return -1;
  }
  // Not offered, or out of reach (another host): gRPC, from now on.
  if (fd >= 0) close(fd);
  pjrt::MutexLock lock(&mu);
  --open_lanes;
  lanes_unusable = true;
  return -1;
}

void SessionState::GiveBackLane(int fd) {
  pjrt::MutexLock lock(&mu);
  if (!closed) {
    idle_lanes.push_back(fd);
    return;
  }
  --open_lanes;
  close(fd);
}

void SessionState::DiscardLane(int fd) {
  close(fd);
  pjrt::MutexLock lock(&mu);
  --open_lanes;
}

absl::Status SessionState::ExecuteCall(const v1::ExecuteRequest& request,
                                       v1::ExecuteResponse* response) {
  const int fd = TakeLane();
  if (fd >= 0) {
    if (!SendMessage(fd, request)) {
      // The daemon closed the lane before reading the request (its session
      // closed, or it is stopping): gRPC says which.
      DiscardLane(fd);
    } else {
      v1::ExecuteLaneReply reply;
      absl::Status received = ReceiveReply(fd, &reply);
      if (!received.ok()) {
        const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
        DiscardLane(fd);
        if (timed_out) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "pjrtd did not answer an Execute within %s (execute lane)",
              absl::FormatDuration(kCallTimeout)));
        }
        return absl::UnavailableError(absl::StrFormat(
            "pjrtd closed the execute lane while an Execute was in flight "
            "(%s); the daemon is stopping or the session closed, and "
            "whether the run was enqueued is unknown",
            received.message()));
      }
      GiveBackLane(fd);
      if (reply.error_code() != 0) {
        return absl::Status(static_cast<absl::StatusCode>(reply.error_code()),
                            reply.error_message());
      }
      *response = std::move(*reply.mutable_response());
      return absl::OkStatus();
    }
  }
  grpc::ClientContext context;
  SetDeadline(&context);
  return ToAbslStatus(executables_stub().Execute(&context, request, response));
}

bool Session::uses_execute_lanes() const {
  pjrt::MutexLock lock(&state_->mu);
  return state_->client->execute_lanes_ &&
         !state_->client->server_info().execute_lane_socket.empty() &&
         !state_->lanes_unusable;
}

// --- Region ----------------------------------------------------------------

Region::~Region() {
  Unregister().IgnoreError();
  Unmap();
}

Region::Region(Region&& other) noexcept
    : state_(std::move(other.state_)),
      handle_(std::exchange(other.handle_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

Region& Region::operator=(Region&& other) noexcept {
  if (this != &other) {
    Unregister().IgnoreError();
    Unmap();
    state_ = std::move(other.state_);
    handle_ = std::exchange(other.handle_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::Status Region::Unregister() {
  if (handle_ == 0 || state_ == nullptr) return absl::OkStatus();
  if (!state_->IsClosed()) {
    v1::UnregisterRegionRequest request;
    request.set_session_id(state_->id);
    request.set_region_handle(handle_);
    v1::UnregisterRegionResponse response;
    PJRT_RETURN_IF_ERROR(UnaryCall(state_->buffers_stub(),
                                   &v1::Buffers::Stub::UnregisterRegion,
                                   request, &response));
  }
  handle_ = 0;
  return absl::OkStatus();
}

void Region::Unmap() {
  if (data_ == nullptr) return;
  pjrt_client::Unmap(Mapping{.handle = handle_, .data = data_, .size = size_});
  data_ = nullptr;
}

absl::StatusOr<Region> Session::CreateRegion(int64_t size,
                                             const std::string& name) {
  const std::string& socket = state_->client->server_info().region_socket;
  if (socket.empty()) {
    return absl::UnavailableError(absl::StrFormat(
        "pjrtd at %s does not accept shared-memory regions (it runs with "
        "--no-shared-memory)",
        state_->client->address()));
  }
  auto mapping = CreateMapping(socket, state_->id, size, name);
  if (!mapping.ok()) return mapping.status();
  Region region;
  region.state_ = state_;
  region.handle_ = mapping->handle;
  region.data_ = mapping->data;
  region.size_ = mapping->size;
  return region;
}

absl::StatusOr<Buffer> Session::UploadFromHandle(uint64_t region,
                                                 int64_t offset, DType dtype,
                                                 absl::Span<const int64_t> dims,
                                                 int device_id,
                                                 bool zero_copy) {
  v1::UploadFromRegionRequest request;
  request.set_session_id(state_->id);
  request.set_region_handle(region);
  request.set_offset(offset);
  request.mutable_shape()->set_dtype(ToWire(dtype));
  for (int64_t d : dims) request.mutable_shape()->add_dims(d);
  request.set_device_id(device_id);
  request.set_zero_copy(zero_copy);
  v1::BufferInfo info;
  grpc::Status status;
  {
    grpc::ClientContext context;
    status = state_->buffers_stub().UploadFromRegion(&context, request, &info);
  }
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      state_->FreeReleasesForRetry()) {
    // Memory or a quota was held by buffers this client dropped.
    grpc::ClientContext context;
    status = state_->buffers_stub().UploadFromRegion(&context, request, &info);
  }
  if (!status.ok()) return ToAbslStatus(status);
  return Buffer(state_, FromWire(std::move(info)));
}

absl::StatusOr<Buffer> Session::UploadFromRegion(const Region& region,
                                                 int64_t offset, DType dtype,
                                                 absl::Span<const int64_t> dims,
                                                 int device_id,
                                                 bool zero_copy) {
  if (!region.valid() || region.handle() == 0) {
    return absl::FailedPreconditionError(
        "the region is not valid (moved or unregistered)");
  }
  return UploadFromHandle(region.handle(), offset, dtype, dims, device_id,
                          zero_copy);
}

bool Session::uses_shared_memory() const {
  pjrt::MutexLock lock(&state_->mu);
  return state_->shm == SessionState::Shm::kWorks;
}

bool Session::uses_data_channels() const {
  pjrt::MutexLock lock(&state_->mu);
  return !state_->client->channel_host_.empty() &&
         state_->channels_unusable.empty();
}

void Session::FlushReleases() { state_->FlushReleases(); }

absl::Status Session::Synchronize() {
  int64_t last;
  {
    pjrt::MutexLock lock(&state_->mu);
    if (state_->pipeline == nullptr) return absl::OkStatus();
    pjrt::MutexLock plock(&state_->pipeline->mu);
    last = state_->pipeline->sent - 1;
  }
  return state_->WaitForPipelined(last);
}

absl::Status Buffer::Sync() const {
  if (!valid()) return absl::FailedPreconditionError("buffer is not valid");
  if (pending_sequence_ < 0) return absl::OkStatus();
  absl::Status status = state_->WaitForPipelined(pending_sequence_);
  if (status.ok()) pending_sequence_ = -1;
  return status;
}

absl::Status Buffer::DownloadToHandle(uint64_t region, int64_t offset) const {
  v1::DownloadToRegionRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle());
  request.set_region_handle(region);
  request.set_offset(offset);
  v1::BufferInfo info;
  grpc::ClientContext context;
  return ToAbslStatus(
      state_->buffers_stub().DownloadToRegion(&context, request, &info));
}

absl::Status Buffer::DownloadToRegion(const Region& region,
                                      int64_t offset) const {
  absl::Status synced = Sync();
  if (!synced.ok()) return synced;
  if (!region.valid() || region.handle() == 0) {
    return absl::FailedPreconditionError(
        "the region is not valid (moved or unregistered)");
  }
  return DownloadToHandle(region.handle(), offset);
}

// --- pipelined runs ----------------------------------------------------------

absl::StatusOr<std::vector<Buffer>> Executable::ExecutePipelined(
    absl::Span<const Buffer* const> arguments, int device_id,
    const ExecuteOptions& options) const {
  if (!valid()) {
    return absl::FailedPreconditionError("executable is not valid");
  }
  if (options.keep_tuple_result || options.wait_until_ready) {
    return absl::InvalidArgumentError(
        "pipelined runs return one buffer per result without waiting; "
        "keep_tuple_result and wait_until_ready do not apply");
  }
  v1::ExecuteRequest request;
  request.set_session_id(state_->id);
  request.set_executable_handle(handle());
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Buffer* argument = arguments[i];
    if (argument == nullptr || !argument->valid()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %d is %s; pass a valid buffer of this session", i,
          argument == nullptr ? "null"
                              : "an invalid (moved or deleted) buffer"));
    }
    request.add_argument_handles(argument->handle());
  }
  request.set_device_id(device_id);
  request.mutable_options()->set_launch_id(options.launch_id);
  request.mutable_options()->set_arguments_are_tupled(
      options.arguments_are_tupled);
  std::vector<BufferInfo> infos;
  for (const ArrayShape& shape : info_.result_shapes) {
    uint64_t handle;
    do {
      handle = pjrt::SecureRandomId();
    } while (handle == 0);
    request.add_result_handles(handle);
    int64_t count = 1;
    for (int64_t d : shape.dims) count *= d;
    infos.push_back({.handle = handle,
                     .shape = shape,
                     .device_id = device_id,
                     .size_bytes = DTypeBytes(shape.dtype, count)});
  }

  std::shared_ptr<PipelineState> p;
  std::shared_ptr<PipelineState> finished;
  absl::Status earlier_error;
  {
    pjrt::MutexLock lock(&state_->mu);
    if (state_->closed) {
      return absl::FailedPreconditionError("the session is closed");
    }
    bool ended = false;
    if (state_->pipeline != nullptr) {
      pjrt::MutexLock plock(&state_->pipeline->mu);
      ended = state_->pipeline->ended;
      // Report how the last stream ended, once; the next run opens a new
      // one.
      if (ended) earlier_error = state_->pipeline->error;
    }
    if (ended) finished = std::move(state_->pipeline);
    if (state_->pipeline == nullptr && earlier_error.ok()) {
      auto fresh = std::make_shared<PipelineState>();
      fresh->stream = state_->executables_stub().ExecuteStream(&fresh->context);
      SessionState* session = state_.get();
      PipelineState* raw = fresh.get();
      fresh->reader =
          std::thread([session, raw] { ReadPipeline(session, raw); });
      state_->pipeline = fresh;
    }
    p = state_->pipeline;
  }
  // Its reader has ended but may still be deleting buffers.
  if (finished != nullptr) finished->reader.join();
  if (!earlier_error.ok()) return earlier_error;
  int64_t sequence;
  {
    pjrt::MutexLock lock(&p->mu);
    if (p->ended) {
      return p->error.ok() ? absl::AbortedError("the execution stream ended")
                           : p->error;
    }
    sequence = p->sent++;
    // The write happens under the lock so that the stream's order is the
    // order of the sequence numbers.
    if (!p->stream->Write(request)) {
      // The daemon ended the stream; the reader reports why.
      p->sent--;
      return absl::UnavailableError(
          "the execution stream broke; the next call reports why");
    }
  }
  std::vector<Buffer> results;
  results.reserve(infos.size());
  for (BufferInfo& info : infos) {
    Buffer buffer(state_, std::move(info));
    buffer.pending_sequence_ = sequence;
    results.push_back(std::move(buffer));
  }
  return results;
}

}  // namespace pjrt_client
