#include "daemon/data_channel.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/random.h"
#include "daemon/session.h"

namespace pjrt::daemon {
namespace {

constexpr size_t kHelloBytes =
    sizeof(kDataChannelMagic) + kDataChannelTokenBytes;

int PollMillis(absl::Duration d) {
  return static_cast<int>(std::max<int64_t>(
      1, absl::ToInt64Milliseconds(std::min(d, Cancellation::kPollInterval))));
}

// Sends `reply` (small) on a fresh connection without waiting long: a peer
// that does not read it loses it.
void SendReply(int fd, uint64_t handle) {
  char reply[sizeof(kDataChannelMagic) + 8];
  std::memcpy(reply, kDataChannelMagic, sizeof(kDataChannelMagic));
  for (int i = 0; i < 8; ++i) {
    reply[sizeof(kDataChannelMagic) + i] =
        static_cast<char>((handle >> (8 * i)) & 0xff);
  }
  ssize_t sent = send(fd, reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
}

}  // namespace

DataChannel::DataChannel(int fd, std::shared_ptr<std::atomic<int64_t>> live)
    : fd_(fd), live_(std::move(live)) {
  if (live_ != nullptr) live_->fetch_add(1);
}

DataChannel::~DataChannel() {
  close(fd_);
  if (live_ != nullptr) live_->fetch_sub(1);
}

absl::Status DataChannel::Acquire(uint64_t handle) {
  if (ended_.load()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "data channel %#x has ended (a transfer over it failed, or its "
        "client closed it); open another",
        handle));
  }
  if (busy_.exchange(true)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "data channel %#x is busy with another transfer; a channel carries "
        "one transfer at a time (open one per concurrent transfer)",
        handle));
  }
  return absl::OkStatus();
}

void DataChannel::Release(bool ok) {
  if (!ok) End();
  busy_.store(false);
}

bool DataChannel::EndIfAbandoned() {
  bool idle = false;
  if (ended_.load() || !busy_.compare_exchange_strong(idle, true)) {
    return ended_.load();
  }
  // Bytes waiting are an upload whose call has not taken the channel yet;
  // only the end of the stream (or an error) means the client is gone.
  char byte;
  ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 ||
      (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    End();
  }
  busy_.store(false);
  return ended_.load();
}

void DataChannel::End() {
  if (!ended_.exchange(true)) shutdown(fd_, SHUT_RDWR);
}

absl::Status DataChannel::Wait(short events, const Cancellation* cancellation,
                               absl::Time stall_deadline) {
  for (;;) {
    if (ended_.load()) {
      return absl::UnavailableError("the data channel was closed");
    }
    absl::Status cancelled = CheckCancelled(cancellation);
    if (!cancelled.ok()) return cancelled;
    absl::Time now = absl::Now();
    if (now >= stall_deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("the other side moved no byte for %s",
                          absl::FormatDuration(kDataChannelStallTimeout)));
    }
    pollfd p{.fd = fd_, .events = events, .revents = 0};
    int n = poll(&p, 1, PollMillis(stall_deadline - now));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrFormat("poll on a data channel: %s", strerror(errno)));
    }
  }
}

absl::Status DataChannel::Send(const void* data, int64_t size,
                               const Cancellation* cancellation,
                               const std::string& what) {
  return Move(
      POLLOUT, size, cancellation, what, [&](int64_t done, int64_t left) {
        return send(fd_, static_cast<const char*>(data) + done,
                    static_cast<size_t>(left), MSG_NOSIGNAL | MSG_DONTWAIT);
      });
}

absl::Status DataChannel::Receive(void* data, int64_t size,
                                  const Cancellation* cancellation,
                                  const std::string& what) {
  return Move(POLLIN, size, cancellation, what,
              [&](int64_t done, int64_t left) {
                return recv(fd_, static_cast<char*>(data) + done,
                            static_cast<size_t>(left), MSG_DONTWAIT);
              });
}

absl::Status DataChannel::Move(
    short events, int64_t size, const Cancellation* cancellation,
    const std::string& what,
    absl::FunctionRef<ssize_t(int64_t done, int64_t left)> step) {
  int64_t done = 0;
  absl::Time stall_deadline = absl::Now() + kDataChannelStallTimeout;
  while (done < size) {
    ssize_t n = step(done, size - done);
    if (n > 0) {
      done += n;
      stall_deadline = absl::Now() + kDataChannelStallTimeout;
      continue;
    }
    absl::Status status;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      status = Wait(events, cancellation, stall_deadline);
      if (status.ok()) continue;
    } else {
      status = absl::UnavailableError(
          absl::StrFormat("the client closed the data channel (%s)",
                          n < 0 ? strerror(errno) : "end of stream"));
    }
    End();
    return absl::Status(
        status.code(),
        absl::StrFormat("%s: after %d of %d bytes over the data channel: %s",
                        what, done, size, status.message()));
  }
  return absl::OkStatus();
}

DataChannelServer::~DataChannelServer() { Stop(); }

absl::Status DataChannelServer::Start(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  // "[::1]" as gRPC writes it: the literal inside the brackets.
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo* found = nullptr;
  int rc =
      getaddrinfo(name.empty() ? nullptr : name.c_str(), "0", &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data channels: cannot resolve %s: %s", host, gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                a->ai_protocol);
    if (fd < 0) continue;
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrFormat(
        "data channels: cannot listen on %s: %s", host, strerror(errno)));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6
                    ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  listen_fd_ = fd;
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return absl::InternalError(
        absl::StrFormat("data channels: eventfd: %s", strerror(errno)));
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void DataChannelServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t written = write(wake_fd_, &one, sizeof(one));
    (void)written;
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

absl::StatusOr<DataChannelServer::Ticket> DataChannelServer::Offer(
    const std::shared_ptr<Session>& session) {
  std::string token(kDataChannelTokenBytes, '\0');
  for (size_t i = 0; i < kDataChannelTokenBytes; i += 8) {
    uint64_t r = SecureRandomId();
    std::memcpy(token.data() + i, &r, 8);
  }
  absl::Time now = absl::Now();
  MutexLock lock(&mu_);
  absl::erase_if(
      tokens_, [now](const auto& entry) { return entry.second.expiry <= now; });
  int mine = 0;
  for (const auto& [unused, pending] : tokens_) {
    if (pending.session_id == session->id()) ++mine;
  }
  if (mine >= options_.max_pending_tokens_per_session) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s has %d data channel tokens waiting for their connection, the "
        "most a session may; connect with those first (they expire after "
        "%s)",
        session->DebugString(), mine,
        absl::FormatDuration(kDataChannelTokenLifetime)));
  }
  if (static_cast<int>(tokens_.size()) >= options_.max_pending_tokens) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d data channel tokens wait for their connection, the most the "
        "daemon keeps; connect with those first",
        tokens_.size()));
  }
  tokens_[token] =
      Pending{session, session->id(), now + kDataChannelTokenLifetime};
  return Ticket{port_, std::move(token)};
}

void DataChannelServer::Answer(int fd, const std::string& hello) {
  std::shared_ptr<Session> session;
  if (hello.size() == kHelloBytes &&
      std::memcmp(hello.data(), kDataChannelMagic, sizeof(kDataChannelMagic)) ==
          0) {
    std::string token = hello.substr(sizeof(kDataChannelMagic));
    MutexLock lock(&mu_);
    auto it = tokens_.find(token);
    if (it != tokens_.end()) {
      if (it->second.expiry > absl::Now()) session = it->second.session.lock();
      tokens_.erase(it);  // once, whatever happens next
    }
  }
  if (session != nullptr && channels_->load() >= options_.max_channels) {
    spdlog::warn(
        "refused a data channel of {}: {} channels are open, the most the "
        "daemon keeps (max_data_channels)",
        session->DebugString(), channels_->load());
    session.reset();
  }
  if (session == nullptr) {
    SendReply(fd, 0);
    close(fd);
    return;
  }
  // Transfers wait on the socket with poll(); it stays non-blocking.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto channel = std::make_shared<DataChannel>(fd, channels_);
  auto added = session->AddDataChannel(channel);
  if (!added.ok()) {
    spdlog::info("refused a data channel of {}: {}", session->DebugString(),
                 added.status().message());
    SendReply(fd, 0);
    channel->End();
    return;
  }
  SendReply(fd, *added);
}

void DataChannelServer::Loop() {
  struct Connection {
    int fd;
    absl::Time deadline;
    std::string hello;
  };
  std::vector<Connection> pending;
  // Out of descriptors, accept fails while the listener stays readable:
  // it is left alone for a while rather than polled in a busy loop.
  absl::Time accept_paused_until = absl::InfinitePast();
  while (!stopping_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({.fd = wake_fd_, .events = POLLIN, .revents = 0});
    const bool accepting = absl::Now() >= accept_paused_until;
    fds.push_back(
        {.fd = accepting ? listen_fd_ : -1, .events = POLLIN, .revents = 0});
    for (const Connection& c : pending) {
      fds.push_back({.fd = c.fd, .events = POLLIN, .revents = 0});
    }
    absl::Time now = absl::Now();
    absl::Duration wait = absl::Seconds(1);
    for (const Connection& c : pending) wait = std::min(wait, c.deadline - now);
    if (!accepting) wait = std::min(wait, accept_paused_until - now);
    int n = poll(fds.data(), fds.size(),
                 static_cast<int>(
                     std::max<int64_t>(1, absl::ToInt64Milliseconds(wait))));
    if (n < 0 && errno != EINTR) {
      spdlog::error("data channels: poll: {}", strerror(errno));
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    if (stopping_.load()) break;
    // Hellos first (their slots may free room for new connections).
    now = absl::Now();
    std::vector<Connection> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Connection& c = pending[i];
      if (fds[i + 2].revents != 0) {
        char buffer[kHelloBytes];
        ssize_t got =
            recv(c.fd, buffer, kHelloBytes - c.hello.size(), MSG_DONTWAIT);
        if (got > 0) c.hello.append(buffer, static_cast<size_t>(got));
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          close(c.fd);
          continue;
        }
        if (c.hello.size() == kHelloBytes) {
          Answer(c.fd, c.hello);
          continue;
        }
      }
      if (now >= c.deadline) {
        // Too slow: the slot goes to others. The refusal tells a client
        // that is merely slow to stream this time.
        SendReply(c.fd, 0);
        close(c.fd);
        continue;
      }
      still.push_back(std::move(c));
    }
    pending.swap(still);
    if (fds[1].revents != 0) {
      for (;;) {
        int fd =
            accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
              errno == ENOMEM) {
            spdlog::warn("data channels: accept: {}; pausing for 100 ms",
                         strerror(errno));
            accept_paused_until = absl::Now() + absl::Milliseconds(100);
          }
          break;
        }
        if (static_cast<int>(pending.size()) >=
            options_.max_pending_connections) {
          SendReply(fd, 0);  // busy: the client streams this time
          close(fd);
          continue;
        }
        pending.push_back({fd, absl::Now() + kDataChannelHelloTimeout, {}});
      }
    }
  }
  for (const Connection& c : pending) close(c.fd);
}

}  // namespace pjrt::daemon
