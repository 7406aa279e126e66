#include "daemon/execute_lane.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/cancellation.h"
#include "base/log.h"
#include "base/socket_io.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "daemon/grpc_status.h"
#include "daemon/session.h"
#include "daemon/session_table.h"
#include "daemon/shared_memory.h"
#include "daemon/tenants.h"

namespace pjrt::daemon {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

void SetTimeout(int fd, int option, absl::Duration timeout) {
  timeval tv = absl::ToTimeval(timeout);
  if (setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv)) != 0) {
    spdlog::warn("execute lane: cannot set a socket timeout: {}", ErrnoText());
  }
}

// Reads `size` bytes; with a `deadline`, gives up there (each wait is cut
// to what is left, so that a peer sending a byte at a time cannot stretch
// it).
bool ReadExactly(int fd, char* data, size_t size,
                 absl::Time deadline = absl::InfiniteFuture()) {
  while (size > 0) {
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      SetTimeout(fd, SO_RCVTIMEO, std::max(left, absl::Milliseconds(1)));
    }
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // closed, shut down, or timed out
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

enum class Read { kMessage, kEnd, kTooLong };

// One length-prefixed message of at most `max_length` bytes into
// `message`, by `deadline`.
Read ReadMessage(int fd, std::string* message, uint32_t* length,
                 uint32_t max_length = kMaxLaneMessageBytes,
                 absl::Time deadline = absl::InfiniteFuture()) {
  unsigned char prefix[kFramePrefixBytes];
  if (!ReadExactly(fd, reinterpret_cast<char*>(prefix), sizeof(prefix),
                   deadline)) {
    return Read::kEnd;
  }
  *length = DecodeFrameLength(prefix);
  if (*length > max_length) return Read::kTooLong;
  message->resize(*length);
  if (!ReadExactly(fd, message->data(), *length, deadline)) return Read::kEnd;
  return Read::kMessage;
}

bool WriteMessage(int fd, const v1::ExecuteLaneReply& reply,
                  std::string* scratch) {
  const size_t size = reply.ByteSizeLong();
  scratch->resize(kFramePrefixBytes + size);
  EncodeFrameLength(static_cast<uint32_t>(size),
                    reinterpret_cast<unsigned char*>(scratch->data()));
  if (!reply.SerializeToArray(scratch->data() + kFramePrefixBytes,
                              static_cast<int>(size))) {
    return false;
  }
  return SendAll(fd, scratch->data(), scratch->size());
}

void SetError(const absl::Status& status, v1::ExecuteLaneReply* reply) {
  const grpc::Status wire = ToGrpcStatus(status);
  reply->Clear();
  reply->set_error_code(static_cast<int>(wire.error_code()));
  reply->set_error_message(wire.error_message());
}

absl::Status NotOpen(uint64_t id) {
  return absl::NotFoundError(absl::StrFormat(
      "session %#x is not open (never opened, closed, or expired after its "
      "lease ran out); open a new session",
      id));
}

}  // namespace

ExecuteLaneServer::ExecuteLaneServer(SessionTable* sessions,
                                     ExecuteLaneOptions options,
                                     Handler handler)
    : sessions_(sessions), options_(options), handler_(std::move(handler)) {}

ExecuteLaneServer::~ExecuteLaneServer() { Stop(); }

absl::Status ExecuteLaneServer::Start(const std::string& address,
                                      std::optional<unsigned> mode) {
  PJRT_ASSIGN_OR_RETURN(
      const int fd,
      ListenOnUnixSocket(address, SOCK_STREAM, mode, "execute lanes"));
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    std::string why = ErrnoText();
    close(fd);
    return absl::InternalError("cannot set up the execute lane socket: " + why);
  }
  listen_fd_ = fd;
  address_ = address;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void ExecuteLaneServer::Stop() {
  if (listen_fd_ < 0) return;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    spdlog::error("execute lanes: cannot wake the server: {}", ErrnoText());
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  if (!address_.empty() && address_[0] != '@') unlink(address_.c_str());
  MutexLock lock(&mu_);
  // A thread blocked reading its lane wakes at once; one running a request
  // finishes it first.
  for (const auto& [fd, lane] : lanes_) shutdown(fd, SHUT_RDWR);
  mu_.Await([this]()
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lanes_.empty(); });
}

void ExecuteLaneServer::Sweep() {
  MutexLock lock(&mu_);
  for (const auto& [fd, lane] : lanes_) {
    if (lane->session_id == 0) continue;
    std::shared_ptr<Session> session = lane->session.lock();
    if (session == nullptr || IsCancelled(session->cancellation().get())) {
      shutdown(fd, SHUT_RDWR);
    }
  }
}

void ExecuteLaneServer::AcceptLoop() {
  pollfd fds[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                   {.fd = wake_fd_, .events = POLLIN, .revents = 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("execute lanes: poll failed: {}", ErrnoText());
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // gone already, or out of descriptors for now
    MutexLock lock(&mu_);
    if (stopping_ ||
        static_cast<int64_t>(lanes_.size()) >= options_.max_lanes) {
      // The client reads the end of the stream for its hello, and calls
      // through gRPC instead.
      spdlog::debug("execute lanes: {} connections; one more turned away",
                    lanes_.size());
      close(fd);
      continue;
    }
    auto lane = std::make_shared<Lane>();
    lane->fd = fd;
    lanes_[fd] = lane;
    std::thread([this, lane] { Serve(lane); }).detach();
  }
}

void ExecuteLaneServer::Serve(std::shared_ptr<Lane> lane) {
  const int fd = lane->fd;
  SetTimeout(fd, SO_SNDTIMEO, kLaneSendTimeout);
  std::string message;
  std::string scratch;
  v1::ExecuteLaneReply reply;
  uint32_t length = 0;
  Read read = ReadMessage(fd, &message, &length, kMaxLaneHelloBytes,
                          absl::Now() + kLaneHelloTimeout);
  bool open = false;
  if (read == Read::kTooLong) {
    SetError(absl::InvalidArgumentError(absl::StrFormat(
                 "an execute lane's hello is an ExecuteLaneHello of at most "
                 "%d bytes; this message claims %d",
                 kMaxLaneHelloBytes, length)),
             &reply);
    WriteMessage(fd, reply, &scratch);
  } else if (read == Read::kMessage) {
    open = Hello(*lane, message, &reply);
    if (!WriteMessage(fd, reply, &scratch)) open = false;
  }
  if (open) {
    SetTimeout(fd, SO_RCVTIMEO, absl::ZeroDuration());  // none: wait
    for (;;) {
      read = ReadMessage(fd, &message, &length);
      if (read == Read::kEnd) break;
      if (read == Read::kTooLong) {
        SetError(absl::InvalidArgumentError(absl::StrFormat(
                     "an execute lane's message is at most %d bytes; this "
                     "one claims %d (the lane ends)",
                     kMaxLaneMessageBytes, length)),
                 &reply);
        WriteMessage(fd, reply, &scratch);
        break;
      }
      Answer(*lane, message, &reply);
      if (!WriteMessage(fd, reply, &scratch)) break;
    }
  }
  Forget(lane);
}

bool ExecuteLaneServer::Hello(Lane& lane, const std::string& message,
                              v1::ExecuteLaneReply* reply) {
  reply->Clear();
  v1::ExecuteLaneHello hello;
  if (!hello.ParseFromString(message)) {
    SetError(
        absl::InvalidArgumentError("an execute lane's first message must be an "
                                   "ExecuteLaneHello"),
        reply);
    return false;
  }
  if (hello.protocol_version() < kLaneProtocolVersion) {
    SetError(absl::InvalidArgumentError(absl::StrFormat(
                 "execute lanes need protocol revision %d or later; the "
                 "hello states %d",
                 kLaneProtocolVersion, hello.protocol_version())),
             reply);
    return false;
  }
  auto session = sessions_->Lookup(hello.session_id(), Caller{});
  if (session.ok() && (*session)->account() != nullptr) {
    ucred peer{};
    socklen_t size = sizeof(peer);
    const bool known =
        getsockopt(lane.fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0;
    if (!known ||
        !(*session)->account()->AdmitsLocalProcess(peer.uid, peer.gid)) {
      Audit("auth_failed",
            {{"peer", absl::StrFormat("execute lane, uid %d gid %d", peer.uid,
                                      peer.gid)},
             {"reason", "lane for another tenant's session"}});
      session = NotOpen(hello.session_id());
    }
  }
  if (!session.ok()) {
    SetError(session.status(), reply);
    return false;
  }
  MutexLock lock(&mu_);
  if (stopping_) {
    SetError(absl::UnavailableError("pjrtd is shutting down"), reply);
    return false;
  }
  int& count = per_session_[hello.session_id()];
  if (count >= options_.max_lanes_per_session) {
    SetError(absl::ResourceExhaustedError(absl::StrFormat(
                 "%s has %d execute lanes open, the most it may "
                 "(max_execute_lanes_per_session); close one, or call "
                 "Execute through gRPC",
                 (*session)->DebugString(), count)),
             reply);
    if (count == 0) per_session_.erase(hello.session_id());
    return false;
  }
  ++count;
  open_lanes_.fetch_add(1);
  lane.session_id = hello.session_id();
  lane.session = *session;
  spdlog::debug("{} opened an execute lane", (*session)->DebugString());
  return true;
}

void ExecuteLaneServer::Answer(const Lane& lane, const std::string& message,
                               v1::ExecuteLaneReply* reply) {
  reply->Clear();
  v1::ExecuteRequest request;
  if (!request.ParseFromString(message)) {
    SetError(absl::InvalidArgumentError(
                 "an execute lane's message is not an ExecuteRequest"),
             reply);
    return;
  }
  // A lane serves the session of its hello alone; another session's id is
  // answered as an unknown one.
  if (request.session_id() != lane.session_id) {
    SetError(NotOpen(request.session_id()), reply);
    return;
  }
  auto session = sessions_->Lookup(lane.session_id, Caller{});
  if (!session.ok()) {
    SetError(session.status(), reply);
    return;
  }
  // A request that waits (for its arguments, or for its results) stops
  // when the client hangs up, as a gRPC call's would when cancelled.
  const int fd = lane.fd;
  auto call = std::make_shared<Cancellation>(
      (*session)->cancellation(), absl::InfiniteFuture(),
      [fd]() -> absl::Status {
        pollfd p{.fd = fd, .events = POLLRDHUP, .revents = 0};
        if (poll(&p, 1, 0) > 0 &&
            (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
          return absl::CancelledError("the execute lane's client went away");
        }
        return absl::OkStatus();
      });
  const grpc::Status status = Guarded("ExecuteLane", [&] {
    return ToGrpcStatus(
        handler_(*session, request, reply->mutable_response(), call));
  });
  if (!status.ok()) SetError(FromGrpcStatus(status), reply);
}

void ExecuteLaneServer::Forget(const std::shared_ptr<Lane>& lane) {
  MutexLock lock(&mu_);
  if (lane->session_id != 0) {
    auto it = per_session_.find(lane->session_id);
    if (it != per_session_.end() && --it->second <= 0) per_session_.erase(it);
    open_lanes_.fetch_sub(1);
  }
  lanes_.erase(lane->fd);
  close(lane->fd);
}

}  // namespace pjrt::daemon
