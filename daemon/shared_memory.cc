#include "daemon/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "daemon/session_table.h"
#include "pjrt/v1/buffer.pb.h"

namespace pjrt::daemon {
namespace {

// A registration is one small message; anything longer is not one.
constexpr size_t kMaxRequestBytes = 4096;
// How long one connection may take to send its request.
constexpr int kReceiveTimeoutSeconds = 2;
// Regions one session may hold at once.
constexpr int kMaxRegionsPerSession = 256;

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

absl::StatusOr<std::shared_ptr<Region>> Region::Map(int fd, int64_t size,
                                                    std::string name) {
  if (size <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region size_bytes is %d; it must be positive", size));
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
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot map the region's %d bytes: %s", size, ErrnoText()));
  }
  return std::shared_ptr<Region>(
      new Region(static_cast<uint8_t*>(data), size, std::move(name)));
}

Region::~Region() { munmap(data_, static_cast<size_t>(size_)); }

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

RegionServer::~RegionServer() { Stop(); }

absl::Status RegionServer::Start(const std::string& address) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.empty() || address.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region socket address '%s' must have 1 to %d characters", address,
        sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, address.data(), address.size());
  socklen_t length = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + address.size());
  if (address[0] == '@') {
    addr.sun_path[0] = '\0';
  } else {
    unlink(address.c_str());
    length += 1;
  }
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError("cannot create the region socket: " +
                               ErrnoText());
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 ||
      listen(fd, 64) != 0) {
    std::string why = ErrnoText();
    close(fd);
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen for shared-memory regions on %s: %s", address, why));
  }
  listen_fd_ = fd;
  address_ = address;
  thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void RegionServer::Stop() {
  if (listen_fd_ < 0) return;
  stopping_.store(true);
  shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  listen_fd_ = -1;
  if (!address_.empty() && address_[0] != '@') unlink(address_.c_str());
}

void RegionServer::AcceptLoop() {
  while (!stopping_.load()) {
    int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stopping_.load()) {
        spdlog::error("region socket: accept failed: {}", ErrnoText());
      }
      return;
    }
    Serve(connection);
    close(connection);
  }
}

void RegionServer::Serve(int connection) {
  timeval timeout{.tv_sec = kReceiveTimeoutSeconds, .tv_usec = 0};
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));

  char payload[kMaxRequestBytes];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{.iov_base = payload, .iov_len = sizeof(payload)};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t received = recvmsg(connection, &message, MSG_CMSG_CLOEXEC);

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

  v1::RegisterRegionResponse response;
  auto refuse = [&](absl::Status status) {
    response.set_error_code(static_cast<int>(status.code()));
    response.set_error_message(std::string(status.message()));
  };
  v1::RegisterRegionRequest request;
  if (received < 0) {
    refuse(absl::InvalidArgumentError("no registration request received: " +
                                      ErrnoText()));
  } else if ((message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
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
    auto session = sessions_->Lookup(request.session_id());
    if (!session.ok()) {
      refuse(session.status());
    } else if ((*session)->region_count() >= kMaxRegionsPerSession) {
      refuse(absl::ResourceExhaustedError(absl::StrFormat(
          "%s already holds %d regions, the most a session may; unregister "
          "one first",
          (*session)->DebugString(), kMaxRegionsPerSession)));
    } else {
      auto region = Region::Map(fds[0], request.size_bytes(), request.name());
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
  for (int fd : fds) close(fd);
  std::string reply = response.SerializeAsString();
  if (send(connection, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) {
    spdlog::debug("region socket: could not reply: {}", ErrnoText());
  }
}

}  // namespace pjrt::daemon
