// Execute lanes (protocol revision 8): unix socket connections of one
// session that carry Execute calls, for clients on the daemon's host.
//
// A unary gRPC call costs a Python client ~150 us of CPU and the daemon
// ~60 us before any work is done, more than the math of a small training
// step. A lane is a plain stream socket: each request is a length and an
// ExecuteRequest, each reply a length and an ExecuteLaneReply (the status
// and the ExecuteResponse), so a call is one write and one read on each
// side. Everything else (compiles, transfers, sessions) stays on gRPC, and
// a lane's Execute is the same code as the RPC's (ExecutableService).
//
//   1. ServerInfo.execute_lane_socket names the socket: beside the daemon's
//      first unix socket ("pjrtd.sock.lanes", with its permissions), or an
//      abstract one when it listens on TCP only.
//   2. The client connects and sends an ExecuteLaneHello naming its
//      session; the daemon answers an ExecuteLaneReply (error_code 0: the
//      lane is open). As on the region socket, the session's secret id is
//      the credential, and a session of a uid or gid tenant admits only a
//      process of that uid or gid (SO_PEERCRED).
//   3. Each ExecuteRequest is answered in order. A request that is not an
//      ExecuteRequest, or that names another session, is answered with its
//      error and the lane stays open; a message longer than
//      kMaxLaneMessageBytes ends the lane after its error.
//
// Each lane holds a thread of the daemon while open (its requests run on
// it, as a unary Execute's run on a handler thread); lanes are bounded per
// session and in all, a hello must come whole within kLaneHelloTimeout, and a
// lane ends when its session closes (within a second: Sweep), when its
// client closes it, or when a reply cannot be written for
// kLaneSendTimeout.
#ifndef PJRT_DAEMON_EXECUTE_LANE_H_
#define PJRT_DAEMON_EXECUTE_LANE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/mutex.h"
#include "pjrt/v1/executable.pb.h"

namespace pjrt::daemon {

class Session;
class SessionTable;

// Longest message either way (a request, or a reply with fetched results).
inline constexpr uint32_t kMaxLaneMessageBytes = uint32_t{4} << 20;
// Longest hello (an ExecuteLaneHello is about 15 bytes).
inline constexpr uint32_t kMaxLaneHelloBytes = 256;
inline constexpr absl::Duration kLaneHelloTimeout = absl::Seconds(2);
inline constexpr absl::Duration kLaneSendTimeout = absl::Seconds(60);
// The first protocol revision with lanes.
inline constexpr uint32_t kLaneProtocolVersion =
    v1::PROTOCOL_REVISION_EXECUTE_LANES;

struct ExecuteLaneOptions {
  // Open lanes (and connections in their hello), per session and in all.
  int max_lanes_per_session = 4;
  int max_lanes = 64;
};

class ExecuteLaneServer {
 public:
  // Runs one request of `session` (its session id already checked).
  // `call`: cancelled when the session is, or when the lane's client hangs
  // up (for the request's waits, as a gRPC call's cancellation).
  using Handler = std::function<absl::Status(
      const std::shared_ptr<Session>& session,
      const v1::ExecuteRequest& request, v1::ExecuteResponse* response,
      std::shared_ptr<Cancellation> call)>;

  ExecuteLaneServer(SessionTable* sessions, ExecuteLaneOptions options,
                    Handler handler);
  ~ExecuteLaneServer();
  ExecuteLaneServer(const ExecuteLaneServer&) = delete;
  ExecuteLaneServer& operator=(const ExecuteLaneServer&) = delete;

  // Listens on `address`: a path (a stale socket there is replaced; the
  // socket gets `mode` when given) or "@name" for an abstract socket.
  absl::Status Start(const std::string& address,
                     std::optional<unsigned> mode = std::nullopt);
  // Stops accepting and ends every lane: a request running on one finishes
  // (or is cancelled with its session), its reply is not sent. Waits for
  // every lane's thread. Idempotent.
  void Stop();
  // Ends the lanes whose session has closed.
  void Sweep();

  const std::string& address() const { return address_; }
  // Open lanes now (hellos answered, not ended).
  int64_t lanes() const { return open_lanes_.load(); }

 private:
  struct Lane {
    int fd = -1;
    uint64_t session_id = 0;  // 0 until the hello is answered
    std::weak_ptr<Session> session;
  };

  void AcceptLoop();
  // The lane's thread: its hello, then its requests until it ends.
  void Serve(std::shared_ptr<Lane> lane);
  // Answers the hello of `lane`; false (with `reply` saying why) when the
  // lane is refused.
  bool Hello(Lane& lane, const std::string& message,
             v1::ExecuteLaneReply* reply);
  // Runs one request of `lane`'s session.
  void Answer(const Lane& lane, const std::string& message,
              v1::ExecuteLaneReply* reply);
  // Drops `lane` from the table and closes its socket.
  void Forget(const std::shared_ptr<Lane>& lane);

  SessionTable* const sessions_;
  const ExecuteLaneOptions options_;
  const Handler handler_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread accept_thread_;
  std::atomic<int64_t> open_lanes_{0};

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Every connection with a thread, by its socket.
  absl::flat_hash_map<int, std::shared_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
  // Lanes per session id (hellos answered).
  absl::flat_hash_map<uint64_t, int> per_session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_EXECUTE_LANE_H_
