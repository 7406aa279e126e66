// Shared-memory regions of clients on the daemon's host.
//
// A client creates a memfd, seals it against shrinking, and hands its file
// descriptor to the daemon over the region socket (RegionServer). The daemon
// maps it (Region) into the client's session; uploads and downloads then
// copy between the mapping and device buffers without the bytes crossing a
// socket. The seal matters: a mapping whose file shrank would fault (SIGBUS)
// on the pages that went, so an unsealed descriptor is refused.
//
// Bounds. Every mapping costs the daemon an entry in the kernel's map table
// (vm.max_map_count, 65530 by default), which malloc and thread stacks need
// too: regions are limited per session (Session) and in all (RegionBudget,
// by count and bytes), and the socket serves a bounded number of
// connections, per client process and in all, each for at most two seconds.
#ifndef PJRT_DAEMON_SHARED_MEMORY_H_
#define PJRT_DAEMON_SHARED_MEMORY_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "device/platform.h"

namespace pjrt::daemon {

class SessionTable;

// A listening unix socket of `type` (SOCK_STREAM, SOCK_SEQPACKET;
// non-blocking) on `address`: a path (a stale socket there is replaced; the
// socket gets `mode` when given, as chmod would) or "@name" for an abstract
// socket. `what` names it in errors.
absl::StatusOr<int> ListenOnUnixSocket(const std::string& address, int type,
                                       std::optional<unsigned> mode,
                                       absl::string_view what);

// Longest region name a client may give.
inline constexpr size_t kMaxRegionNameBytes = 256;

// The daemon-wide count and bytes of mapped regions. A mapping counts from
// Map until it is unmapped (which may be after its session closed, while a
// transfer or zero-copy buffer still uses it). Thread-safe.
class RegionBudget {
 public:
  // `max_bytes` 0: no byte limit.
  RegionBudget(int64_t max_regions, int64_t max_bytes)
      : max_regions_(max_regions), max_bytes_(max_bytes) {}

  // Takes one region of `bytes`; RESOURCE_EXHAUSTED naming the limit if it
  // does not fit.
  absl::Status Reserve(int64_t bytes);
  void Release(int64_t bytes);

  int64_t regions() const;
  int64_t bytes() const;

 private:
  const int64_t max_regions_;
  const int64_t max_bytes_;
  mutable Mutex mu_;
  int64_t regions_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

class Region : public std::enable_shared_from_this<Region> {
 public:
  // Maps the first `size` bytes of `fd` (read and write, shared), counted in
  // `budget` (may be null) until unmapped. Takes no ownership of `fd`.
  // INVALID_ARGUMENT when `fd` is not a memfd sealed against shrinking, when
  // it is shorter than `size`, when `size` is not positive, or when `name`
  // is longer than kMaxRegionNameBytes; RESOURCE_EXHAUSTED when the budget
  // is spent.
  //
  // With a `platform` (may be null), the mapping is registered with it
  // (cudaHostRegister on CUDA) so that uploads from and downloads to the
  // region are one DMA between its pages and device memory; if that fails
  // the region still works, through the driver's staging.
  static absl::StatusOr<std::shared_ptr<Region>> Map(
      int fd, int64_t size, std::string name,
      std::shared_ptr<RegionBudget> budget = nullptr,
      device::Platform* platform = nullptr);
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

  // Whether the platform took the region for direct DMA.
  bool registered() const { return registered_with_ != nullptr; }

 private:
  Region(uint8_t* data, int64_t size, std::string name,
         std::shared_ptr<RegionBudget> budget)
      : data_(data),
        size_(size),
        name_(std::move(name)),
        budget_(std::move(budget)) {}

  // The platform the mapping is registered with, if any.
  device::Platform* registered_with_ = nullptr;

  uint8_t* const data_;
  const int64_t size_;
  const std::string name_;
  const std::shared_ptr<RegionBudget> budget_;
  std::atomic<int64_t> uses_{0};
};

struct RegionServerOptions {
  // Connections served at once, per client process and per user (by pid
  // and uid, from SO_PEERCRED) and in all; more are closed at once.
  int max_connections_per_peer = 8;
  int max_connections_per_user = 64;
  int max_connections = 256;
  // Regions mapped at once in all, and their bytes (0: no byte limit).
  int64_t max_regions = 4096;
  int64_t max_region_bytes = 0;
  // Registers every region with the devices' platform for direct DMA (may
  // be null).
  device::Platform* platform = nullptr;
};

// Accepts region registrations on a unix socket (SOCK_SEQPACKET): one
// request message with one file descriptor, one response message, per
// connection (see RegisterRegionRequest in buffer.proto). One thread serves
// every connection at once (epoll): a client that connects and sends
// nothing holds only its own connection, for at most two seconds.
class RegionServer {
 public:
  RegionServer(SessionTable* sessions, RegionServerOptions options);
  ~RegionServer();
  RegionServer(const RegionServer&) = delete;
  RegionServer& operator=(const RegionServer&) = delete;

  // Listens on `address`: a path (a stale socket there is replaced; the
  // socket gets `mode` when given, as chmod would) or "@name" for an
  // abstract socket.
  absl::Status Start(const std::string& address,
                     std::optional<unsigned> mode = std::nullopt);
  // Stops serving; closes every connection.
  void Stop();

  const std::string& address() const { return address_; }
  const std::shared_ptr<RegionBudget>& budget() const { return budget_; }

 private:
  struct Connection;

  void Loop();
  // Reads the request of `fd` (if it came) and answers it; false while the
  // request has not arrived yet.
  bool Serve(int fd);
  // The reply to one request carrying `fds`.
  // `uid` and `gid`: the registering process's (SO_PEERCRED).
  std::string Answer(const char* payload, ssize_t size, int flags,
                     const std::vector<int>& fds, uint32_t uid, uint32_t gid);

  SessionTable* const sessions_;
  const RegionServerOptions options_;
  const std::shared_ptr<RegionBudget> budget_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SHARED_MEMORY_H_
