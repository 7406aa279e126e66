// UnixListener: serves the daemon's gRPC server on a unix socket through
// connections it accepts itself, remembering each one's peer credentials
// (SO_PEERCRED), so that a call can be traced to the uid and gid of the
// process that made it. gRPC names such a connection's peer "fd:N".
//
// Used when a tenants file is in force (tenants may be identified by uid
// or gid, docs/security.md); otherwise gRPC listens on unix sockets itself.
//
// Thread-safe.
#ifndef PJRT_DAEMON_UNIX_LISTENER_H_
#define PJRT_DAEMON_UNIX_LISTENER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"

namespace grpc {
class Server;
}

namespace pjrt::daemon {

struct UnixPeer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

class UnixListener {
 public:
  // Listens on `path` (which must be free: see PrepareUnixSocketPath) and
  // hands every accepted connection to `server`, which must outlive the
  // listener's Stop().
  static absl::StatusOr<std::unique_ptr<UnixListener>> Start(
      const std::string& path, grpc::Server* server);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Stops accepting and removes the socket file; connections already
  // handed to gRPC go on. Idempotent.
  void Stop();

  // The credentials of the connection gRPC calls `peer` ("fd:N"), if this
  // listener accepted it.
  std::optional<UnixPeer> Lookup(absl::string_view peer) const;

 private:
  UnixListener(std::string path, int listen_fd, int wake_fd,
               grpc::Server* server);
  void Loop();

  const std::string path_;
  const int listen_fd_;
  const int wake_fd_;
  grpc::Server* const server_;
  std::thread thread_;
  mutable Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // By the descriptor number: a number reused by a later connection is
  // overwritten before gRPC sees that connection.
  absl::flat_hash_map<int, UnixPeer> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_UNIX_LISTENER_H_
