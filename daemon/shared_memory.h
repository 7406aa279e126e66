// Shared-memory regions of clients on the daemon's host.
//
// A client creates a memfd, seals it against shrinking, and hands its file
// descriptor to the daemon over the region socket (RegionServer). The daemon
// maps it (Region) into the client's session; uploads and downloads then
// copy between the mapping and device buffers without the bytes crossing a
// socket. The seal matters: a mapping whose file shrank would fault (SIGBUS)
// on the pages that went, so an unsealed descriptor is refused.
#ifndef PJRT_DAEMON_SHARED_MEMORY_H_
#define PJRT_DAEMON_SHARED_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pjrt::daemon {

class SessionTable;

class Region : public std::enable_shared_from_this<Region> {
 public:
  // Maps the first `size` bytes of `fd` (read and write, shared). Takes no
  // ownership of `fd`. INVALID_ARGUMENT when `fd` is not a memfd sealed
  // against shrinking, when it is shorter than `size`, or when `size` is not
  // positive.
  static absl::StatusOr<std::shared_ptr<Region>> Map(int fd, int64_t size,
                                                     std::string name);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  int64_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // The address of [offset, offset + bytes). INVALID_ARGUMENT naming the
  // numbers when the range does not lie inside the region.
  absl::StatusOr<uint8_t*> Slice(int64_t offset, int64_t bytes) const;

  // Keeps the region mapped and counts as a use (see uses()) while it
  // lives.
  class Use {
   public:
    Use() = default;
    explicit Use(std::shared_ptr<Region> region);
    ~Use();
    Use(Use&& other) noexcept = default;
    Use& operator=(Use&& other) noexcept;
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    std::shared_ptr<Region> region_;
  };
  Use Acquire() { return Use(shared_from_this()); }

  // Transfers in flight and zero-copy buffers that use the region.
  int64_t uses() const { return uses_.load(); }

 private:
  Region(uint8_t* data, int64_t size, std::string name)
      : data_(data), size_(size), name_(std::move(name)) {}

  uint8_t* const data_;
  const int64_t size_;
  const std::string name_;
  std::atomic<int64_t> uses_{0};
};

// Accepts region registrations on a unix socket (SOCK_SEQPACKET): one
// request message with one file descriptor, one response message, per
// connection (see RegisterRegionRequest in buffer.proto).
class RegionServer {
 public:
  explicit RegionServer(SessionTable* sessions) : sessions_(sessions) {}
  ~RegionServer();
  RegionServer(const RegionServer&) = delete;
  RegionServer& operator=(const RegionServer&) = delete;

  // Listens on `address`: a path, or "@name" for an abstract socket.
  absl::Status Start(const std::string& address);
  // Stops accepting; waits for the connection being served.
  void Stop();

  const std::string& address() const { return address_; }

 private:
  void AcceptLoop();
  void Serve(int connection);

  SessionTable* const sessions_;
  std::string address_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SHARED_MEMORY_H_
