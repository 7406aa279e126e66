// Data channels (protocol revision 7): plain TCP connections of a session,
// beside its gRPC calls, over which Download and Upload move an array's
// bytes raw.
//
// Through gRPC, each byte of a large array is copied into and out of
// protobuf messages and HTTP/2 frames on both sides, and a Python client
// pays for every message it handles: a 256 MiB download reached a fifth
// of a raw TCP connection's speed. A channel carries nothing but the
// bytes, so the kernel's copies are the only ones. The gRPC call still
// carries everything else (the session, the header, the status), so a
// channel needs no protocol of its own:
//
//   1. OpenDataChannel (an authenticated call of the session) returns a
//      port and a one-time token (16 random bytes, valid for
//      kDataChannelTokenLifetime).
//   2. The client connects to that port on the host it called and sends
//      kDataChannelMagic followed by the token; the daemon answers
//      kDataChannelMagic followed by the channel's handle in the session
//      (8 bytes, little-endian; 0 when it refuses: unknown or expired
//      token, session gone, too many channels), then closes a refused one.
//   3. Download and Upload name the channel: after the call's header the
//      channel carries exactly the array's bytes, in order.
//
// One transfer at a time per channel. A transfer that fails after naming a
// channel ends it on both sides (how many of its bytes crossed is then
// unknown to the other side); the client opens another. Channels are
// plaintext, so the daemon offers them only beside plaintext TCP listeners
// (loopback, or --insecure-tcp), never beside TLS; clients on unix
// sockets use shared memory instead.
#ifndef PJRT_DAEMON_DATA_CHANNEL_H_
#define PJRT_DAEMON_DATA_CHANNEL_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/mutex.h"

namespace pjrt::daemon {

class Session;

inline constexpr char kDataChannelMagic[8] = {'P', 'J', 'R', 'T',
                                              'D', 'C', 'H', '1'};
inline constexpr size_t kDataChannelTokenBytes = 16;
// How long a token from OpenDataChannel may wait for its connection.
inline constexpr absl::Duration kDataChannelTokenLifetime = absl::Seconds(30);
// How long a connection may take to send its hello.
inline constexpr absl::Duration kDataChannelHelloTimeout = absl::Seconds(2);
// How long a transfer may make no progress (the other side neither sends
// nor takes a byte) before it fails with DEADLINE_EXCEEDED.
inline constexpr absl::Duration kDataChannelStallTimeout = absl::Seconds(60);

// One connected channel. Thread-safe.
class DataChannel {
 public:
  // Takes ownership of `fd`, a connected TCP socket. `live` (may be null)
  // counts the channel while it exists.
  explicit DataChannel(int fd,
                       std::shared_ptr<std::atomic<int64_t>> live = nullptr);
  ~DataChannel();
  DataChannel(const DataChannel&) = delete;
  DataChannel& operator=(const DataChannel&) = delete;

  // Starts a transfer: FAILED_PRECONDITION naming `handle` when another
  // transfer uses the channel or it has ended.
  absl::Status Acquire(uint64_t handle);
  // Ends a transfer; one that failed (`ok` false) ends the channel.
  void Release(bool ok);

  // Sends or receives exactly `size` bytes. Fails (and ends the channel)
  // when the peer closes it, when `cancellation` is raised, or after
  // kDataChannelStallTimeout without progress; the message names `what`
  // and how many bytes had crossed.
  absl::Status Send(const void* data, int64_t size,
                    const Cancellation* cancellation, const std::string& what);
  absl::Status Receive(void* data, int64_t size,
                       const Cancellation* cancellation,
                       const std::string& what);

  // Shuts the connection down (a transfer blocked on it fails at once).
  // Idempotent.
  void End();
  bool ended() const { return ended_.load(); }
  // Ends an idle channel whose client has closed its end; returns
  // ended().
  bool EndIfAbandoned();

  // The transfer's staging memory: up to 4 MiB, kept between transfers so
  // that its pages are faulted in once.
  std::string& staging() { return staging_; }

 private:
  // Moves `size` bytes by calling `step(done, left)` (a non-blocking send
  // or recv of the rest) until it has, waiting for `events` between calls.
  absl::Status Move(
      short events, int64_t size, const Cancellation* cancellation,
      const std::string& what,
      absl::FunctionRef<ssize_t(int64_t done, int64_t left)> step);
  // Waits until the socket is ready for `events` (POLLIN or POLLOUT),
  // checking `cancellation` every poll interval.
  absl::Status Wait(short events, const Cancellation* cancellation,
                    absl::Time stall_deadline);

  const int fd_;
  const std::shared_ptr<std::atomic<int64_t>> live_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> ended_{false};
  std::string staging_;
};

// A transfer's hold on a channel: releases it when it goes, ending the
// channel unless Succeeded() was called.
class DataChannelUse {
 public:
  DataChannelUse() = default;
  explicit DataChannelUse(std::shared_ptr<DataChannel> channel)
      : channel_(std::move(channel)) {}
  DataChannelUse(DataChannelUse&& other) noexcept = default;
  DataChannelUse& operator=(DataChannelUse&& other) noexcept = default;
  ~DataChannelUse() {
    if (channel_ != nullptr) channel_->Release(ok_);
  }
  DataChannel* operator->() const { return channel_.get(); }
  void Succeeded() { ok_ = true; }

 private:
  std::shared_ptr<DataChannel> channel_;
  bool ok_ = false;
};

struct DataChannelServerOptions {
  // Connections that have not sent their hello yet, at most.
  int max_pending_connections = 64;
  // Tokens handed out and not used yet, at most, per session and in all.
  int max_pending_tokens_per_session = 16;
  int max_pending_tokens = 4096;
  // Connected channels of every session, at most.
  int max_channels = 256;
};

// Accepts channel connections on a TCP port and hands each to the session
// whose token it presents. One thread serves every handshake at once.
class DataChannelServer {
 public:
  explicit DataChannelServer(DataChannelServerOptions options)
      : options_(options) {}
  ~DataChannelServer();
  DataChannelServer(const DataChannelServer&) = delete;
  DataChannelServer& operator=(const DataChannelServer&) = delete;

  // Listens on `host` (an IPv4 or IPv6 literal, or a name; the port is
  // chosen by the kernel).
  absl::Status Start(const std::string& host);
  // Stops accepting; channels already connected stay with their sessions.
  void Stop();

  int port() const { return port_; }

  struct Ticket {
    int port = 0;
    std::string token;
  };
  // A token for one connection of `session`. RESOURCE_EXHAUSTED when too
  // many tokens wait for their connection.
  absl::StatusOr<Ticket> Offer(const std::shared_ptr<Session>& session);

  // Connected channels now (in every session).
  int64_t channels() const { return channels_->load(); }

 private:
  struct Pending {
    std::weak_ptr<Session> session;
    uint64_t session_id = 0;
    absl::Time expiry;
  };
  void Loop();
  // Answers the hello `hello` of connection `fd` (which it then owns).
  void Answer(int fd, const std::string& hello);

  const DataChannelServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // Shared with every channel, which counts itself out when it goes.
  std::shared_ptr<std::atomic<int64_t>> channels_ =
      std::make_shared<std::atomic<int64_t>>(0);

  Mutex mu_;
  absl::flat_hash_map<std::string, Pending> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_DATA_CHANNEL_H_
