#include "daemon/unix_listener.h"

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/log.h"

namespace pjrt::daemon {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Start(
    const std::string& path, grpc::Server* server) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unix socket path %s must have 1 to %d characters",
                        path, sizeof(addr.sun_path) - 1));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrFormat(
        "cannot create unix socket %s: %s", path, std::strerror(errno)));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrFormat("cannot listen on unix socket %s: %s", path, why));
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    std::string why = std::strerror(errno);
    close(fd);
    unlink(path.c_str());
    return absl::InternalError("eventfd: " + why);
  }
  std::unique_ptr<UnixListener> listener(
      new UnixListener(path, fd, wake, server));
  listener->thread_ = std::thread([l = listener.get()] { l->Loop(); });
  return listener;
}

UnixListener::UnixListener(std::string path, int listen_fd, int wake_fd,
                           grpc::Server* server)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      server_(server) {}

UnixListener::~UnixListener() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void UnixListener::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) != sizeof(one)) {
    spdlog::error("cannot wake the listener of {}: {}", path_,
                  std::strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
  unlink(path_.c_str());
}

std::optional<UnixPeer> UnixListener::Lookup(absl::string_view peer) const {
  int fd = -1;
  if (!absl::ConsumePrefix(&peer, "fd:") || !absl::SimpleAtoi(peer, &fd)) {
    return std::nullopt;
  }
  MutexLock lock(&mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

void UnixListener::Loop() {
  pollfd fds[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                   {.fd = wake_fd_, .events = POLLIN, .revents = 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("the listener of {} stopped: poll: {}", path_,
                    std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      int fd =
          accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
            errno != ECONNABORTED) {
          // Out of descriptors, say: the connection stays pending; look
          // again in a while rather than spinning (a stop still wakes us).
          spdlog::warn("cannot accept a connection on {}: {}", path_,
                       std::strerror(errno));
          pollfd wake = {.fd = wake_fd_, .events = POLLIN, .revents = 0};
          if (poll(&wake, 1, 100) > 0) return;
        }
        break;
      }
      ucred credentials{};
      socklen_t size = sizeof(credentials);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
        spdlog::warn("refused a connection on {}: no peer credentials: {}",
                     path_, std::strerror(errno));
        close(fd);
        continue;
      }
      {
        MutexLock lock(&mu_);
        peers_[fd] = UnixPeer{.uid = credentials.uid,
                              .gid = credentials.gid,
                              .pid = credentials.pid};
      }
      // gRPC owns the descriptor from here on.
      grpc::AddInsecureChannelFromFd(server_, fd);
    }
  }
}

}  // namespace pjrt::daemon
