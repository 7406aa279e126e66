#include "daemon/shared_memory.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <new>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "daemon/grpc_status.h"
#include "daemon/session_table.h"
#include "pjrt/v1/buffer.pb.h"

namespace pjrt::daemon {
namespace {

// A registration is one small message; anything longer is not one.
constexpr size_t kMaxRequestBytes = 4096;
// How long one connection may take to send its request.
constexpr int kReceiveTimeoutSeconds = 2;

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

absl::Status RegionBudget::Reserve(int64_t bytes) {
  MutexLock lock(&mu_);
  if (regions_ >= max_regions_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the daemon already maps %d shared-memory regions, the most it "
        "allows (max_regions); try again once clients unregister some",
        regions_));
  }
  if (max_bytes_ > 0 && bytes > max_bytes_ - bytes_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the daemon already maps %d bytes of shared-memory regions; %d more "
        "would exceed the %d it allows (max_region_bytes)",
        bytes_, bytes, max_bytes_));
  }
  regions_++;
  bytes_ += bytes;
  return absl::OkStatus();
}

void RegionBudget::Release(int64_t bytes) {
  MutexLock lock(&mu_);
  regions_--;
  bytes_ -= bytes;
}

int64_t RegionBudget::regions() const {
  MutexLock lock(&mu_);
  return regions_;
}

int64_t RegionBudget::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

absl::StatusOr<std::shared_ptr<Region>> Region::Map(
    int fd, int64_t size, std::string name,
    std::shared_ptr<RegionBudget> budget, device::Platform* platform) {
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("region size_bytes is %d; it must be positive", size));
  }
  if (name.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the region's name has %d bytes; at most %d are allowed", name.size(),
        kMaxRegionNameBytes));
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(
        "the region's file descriptor is not a memfd (F_GET_SEALS failed: " +
        ErrnoText() +
        "); create it with memfd_create(..., MFD_ALLOW_SEALING) and seal it "
        "with F_SEAL_SHRINK");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "the region's memfd is not sealed against shrinking; add "
        "F_SEAL_SHRINK (fcntl F_ADD_SEALS) before registering it, so that "
        "it cannot shrink under the daemon's mapping");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError("cannot stat the region's memfd: " +
                                      ErrnoText());
  }
  if (st.st_size < size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region size_bytes is %d but its memfd holds only %d bytes", size,
        static_cast<int64_t>(st.st_size)));
  }
  if (budget != nullptr) {
    absl::Status reserved = budget->Reserve(size);
    if (!reserved.ok()) return reserved;
  }
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    if (budget != nullptr) budget->Release(size);
    return error == ENOMEM ? absl::ResourceExhaustedError(absl::StrFormat(
                                 "cannot map the region's %d bytes: %s", size,
                                 std::strerror(error)))
                           : absl::InvalidArgumentError(absl::StrFormat(
                                 "cannot map the region's %d bytes: %s", size,
                                 std::strerror(error)));
  }
  std::shared_ptr<Region> region(new Region(
      static_cast<uint8_t*>(data), size, std::move(name), std::move(budget)));
  if (platform != nullptr) {
    absl::Status registered = platform->RegisterHostMemory(data, size);
    if (registered.ok()) {
      region->registered_with_ = platform;
    } else {
      spdlog::warn(
          "region {:?} ({} bytes) is not registered for direct DMA, so its "
          "transfers are staged: {}",
          region->name(), size, registered.message());
    }
  }
  return region;
}

Region::~Region() {
  if (registered_with_ != nullptr)
    registered_with_->UnregisterHostMemory(data_);
  munmap(data_, static_cast<size_t>(size_));
  if (budget_ != nullptr) budget_->Release(size_);
}

absl::StatusOr<uint8_t*> Region::Slice(int64_t offset, int64_t bytes) const {
  if (offset < 0 || bytes < 0 || offset > size_ || bytes > size_ - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "offset %d + %d bytes lies outside the region of %d bytes", offset,
        bytes, size_));
  }
  return data_ + offset;
}

Region::Use::Use(std::shared_ptr<Region> region) : region_(std::move(region)) {
  if (region_ != nullptr) region_->uses_.fetch_add(1);
}

Region::Use::~Use() {
  if (region_ != nullptr) region_->uses_.fetch_sub(1);
}

Region::Use& Region::Use::operator=(Use&& other) noexcept {
  if (this != &other) {
    if (region_ != nullptr) region_->uses_.fetch_sub(1);
    region_ = std::move(other.region_);
  }
  return *this;
}

// One connection being served: who it is, and until when it may take to
// send its request.
struct RegionServer::Connection {
  pid_t pid = 0;
  uid_t uid = 0;
  absl::Time deadline;
};

RegionServer::RegionServer(SessionTable* sessions, RegionServerOptions options)
    : sessions_(sessions),
      options_(options),
      budget_(std::make_shared<RegionBudget>(options.max_regions,
                                             options.max_region_bytes)) {}

RegionServer::~RegionServer() { Stop(); }

absl::StatusOr<int> ListenOnUnixSocket(const std::string& address, int type,
                                       std::optional<unsigned> mode,
                                       absl::string_view what) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.empty() || address.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s socket address '%s' must have 1 to %d characters",
                        what, address, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, address.data(), address.size());
  socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  if (address[0] == '@') {
    addr.sun_path[0] = '\0';
  } else {
    unlink(address.c_str());
    length += 1;
  }
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrFormat("cannot create the %s socket: %s", what, ErrnoText()));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 ||
      (mode.has_value() && address[0] != '@' &&
       chmod(address.c_str(), *mode) != 0) ||
      listen(fd, 64) != 0) {
    std::string why = ErrnoText();
    close(fd);
    return absl::UnavailableError(
        absl::StrFormat("cannot listen for %s on %s: %s", what, address, why));
  }
  return fd;
}

absl::Status RegionServer::Start(const std::string& address,
                                 std::optional<unsigned> mode) {
  PJRT_ASSIGN_OR_RETURN(const int fd,
                        ListenOnUnixSocket(address, SOCK_SEQPACKET, mode,
                                           "shared-memory regions"));
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event listen_event{.events = EPOLLIN, .data = {.fd = fd}};
  epoll_event wake_event{.events = EPOLLIN, .data = {.fd = wake_fd_}};
  if (wake_fd_ < 0 || epoll_fd_ < 0 ||
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &listen_event) != 0 ||
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake_event) != 0) {
    std::string why = ErrnoText();
    close(fd);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    wake_fd_ = epoll_fd_ = -1;
    return absl::InternalError("cannot set up the region socket: " + why);
  }
  listen_fd_ = fd;
  address_ = address;
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void RegionServer::Stop() {
  if (listen_fd_ < 0) return;
  stopping_.store(true);
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    spdlog::error("region socket: cannot wake the server: {}", ErrnoText());
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  close(epoll_fd_);
  listen_fd_ = wake_fd_ = epoll_fd_ = -1;
  if (!address_.empty() && address_[0] != '@') unlink(address_.c_str());
}

void RegionServer::Loop() {
  // Timeouts: how long one connection may take to send its request.
  constexpr absl::Duration kRequestTimeout =
      absl::Seconds(kReceiveTimeoutSeconds);
  absl::flat_hash_map<int, Connection> connections;
  absl::flat_hash_map<pid_t, int> per_process;
  absl::flat_hash_map<uid_t, int> per_user;
  const auto drop = [&](int fd) {
    auto it = connections.find(fd);
    if (it == connections.end()) return;
    if (--per_process[it->second.pid] == 0) per_process.erase(it->second.pid);
    if (--per_user[it->second.uid] == 0) per_user.erase(it->second.uid);
    connections.erase(it);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
  };
  epoll_event events[64];
  while (!stopping_.load()) {
    // Wake up for the earliest deadline.
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [fd, c] : connections) next = std::min(next, c.deadline);
    int timeout_ms = -1;
    if (next != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(next - absl::Now()) + 1, 0, 60000));
    }
    int n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("region socket: epoll_wait failed: {}", ErrnoText());
      break;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) continue;
      if (fd == listen_fd_) {
        // Take every pending connection; refuse (close) those over a bound
        // at once, so that none waits in the backlog.
        for (;;) {
          int c = accept4(listen_fd_, nullptr, nullptr,
                          SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK && !stopping_.load()) {
              spdlog::warn("region socket: accept failed: {}", ErrnoText());
            }
            break;
          }
          ucred peer{};
          socklen_t size = sizeof(peer);
          getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &size);
          const auto count = [](const auto& map, auto key) {
            auto it = map.find(key);
            return it == map.end() ? 0 : it->second;
          };
          if (static_cast<int>(connections.size()) >=
                  options_.max_connections ||
              count(per_process, peer.pid) >=
                  options_.max_connections_per_peer ||
              count(per_user, peer.uid) >= options_.max_connections_per_user) {
            spdlog::debug(
                "region socket: refused a connection of pid {} uid {} ({} "
                "open in all)",
                peer.pid, peer.uid, connections.size());
            close(c);
            continue;
          }
          epoll_event event{.events = EPOLLIN | EPOLLRDHUP, .data = {.fd = c}};
          if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c, &event) != 0) {
            close(c);
            continue;
          }
          per_process[peer.pid]++;
          per_user[peer.uid]++;
          connections[c] =
              Connection{peer.pid, peer.uid, absl::Now() + kRequestTimeout};
        }
        continue;
      }
      if (!connections.contains(fd)) continue;
      bool done = true;
      try {
        done = Serve(fd);
      } catch (...) {
        spdlog::error(
            "region socket: {}",
            StatusFromException("RegisterRegion", std::current_exception()));
      }
      if (done) drop(fd);
    }
    // Connections that sent nothing in time go.
    const absl::Time now = absl::Now();
    std::vector<int> expired;
    for (const auto& [fd, c] : connections) {
      if (c.deadline <= now) expired.push_back(fd);
    }
    for (int fd : expired) drop(fd);
  }
  std::vector<int> open;
  for (const auto& [fd, c] : connections) open.push_back(fd);
  for (int fd : open) drop(fd);
}

bool RegionServer::Serve(int connection) {
  char payload[kMaxRequestBytes];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{.iov_base = payload, .iov_len = sizeof(payload)};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t received =
      recvmsg(connection, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;

  // Every descriptor that came along is ours to close.
  std::vector<int> fds;
  if (received >= 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr;
         c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.push_back(fd);
      }
    }
  }
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds) close(fd);
    }
  } close_all{fds};
  if (received == 0 && fds.empty()) return true;  // the client hung up
  ucred peer{};
  socklen_t peer_size = sizeof(peer);
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0) {
    // Nobody can match: no uid tenant's session is reachable.
    peer.uid = peer.gid = static_cast<uint32_t>(-1);
  }
  std::string reply =
      Answer(payload, received, message.msg_flags, fds, peer.uid, peer.gid);
  if (send(connection, reply.data(), reply.size(),
           MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    spdlog::debug("region socket: could not reply: {}", ErrnoText());
  }
  return true;
}

std::string RegionServer::Answer(const char* payload, ssize_t received,
                                 int flags, const std::vector<int>& fds,
                                 uint32_t uid, uint32_t gid) {
  v1::RegisterRegionResponse response;
  auto refuse = [&](const absl::Status& status) {
    response.set_error_code(static_cast<int>(status.code()));
    response.set_error_message(Excerpt(status.message(), kMaxMessageBytes));
  };
  v1::RegisterRegionRequest request;
  if (received < 0) {
    refuse(absl::InvalidArgumentError("no registration request received: " +
                                      ErrnoText()));
  } else if ((flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    refuse(absl::InvalidArgumentError(absl::StrFormat(
        "a registration is one message of at most %d bytes with one file "
        "descriptor; this one was longer",
        kMaxRequestBytes)));
  } else if (!request.ParseFromArray(payload, static_cast<int>(received))) {
    refuse(absl::InvalidArgumentError(
        "the registration message is not a RegisterRegionRequest"));
  } else if (fds.size() != 1) {
    refuse(absl::InvalidArgumentError(absl::StrFormat(
        "a registration carries exactly one file descriptor (SCM_RIGHTS); "
        "this one carried %d",
        fds.size())));
  } else {
    // The session's secret id is the credential here (the region socket
    // carries no token); a session of a uid or gid tenant must also come
    // from a process of that uid or gid.
    auto session = sessions_->Lookup(request.session_id(), Caller{});
    if (session.ok() && (*session)->account() != nullptr &&
        !(*session)->account()->AdmitsLocalProcess(uid, gid)) {
      Audit(
          "auth_failed",
          {{"peer", absl::StrFormat("region socket, uid %d gid %d", uid, gid)},
           {"reason", "region for another tenant's session"}});
      session = absl::NotFoundError(absl::StrFormat(
          "session %#x is not open (never opened, closed, or expired after "
          "its lease ran out); open a new session",
          request.session_id()));
    }
    if (!session.ok()) {
      refuse(session.status());
    } else {
      // The session's own limits are checked before anything is mapped,
      // and again, atomically, when the region is added.
      absl::Status room = (*session)->CheckRoom(1);
      auto region =
          room.ok() ? Region::Map(fds[0], request.size_bytes(), request.name(),
                                  budget_, options_.platform)
                    : absl::StatusOr<std::shared_ptr<Region>>(room);
      if (!region.ok()) {
        refuse(region.status());
      } else {
        auto handle = (*session)->AddRegion(*std::move(region));
        if (!handle.ok()) {
          refuse(handle.status());
        } else {
          response.set_region_handle(*handle);
          spdlog::debug("{} registered region {:#x} ({} bytes)",
                        (*session)->DebugString(), *handle,
                        request.size_bytes());
        }
      }
    }
  }
  return response.SerializeAsString();
}

}  // namespace pjrt::daemon
