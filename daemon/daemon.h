// Daemon: one running pjrtd: the runtime client, the session table, the gRPC
// server and its listeners, and the lease reaper.
//
// Start() returns once every listener accepts calls. Shutdown() is graceful:
// it refuses new calls, ends Attach streams, lets calls in flight finish (up
// to the shutdown timeout), then frees every session's buffers.
#ifndef PJRT_DAEMON_DAEMON_H_
#define PJRT_DAEMON_DAEMON_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "daemon/options.h"
#include "daemon/services.h"
#include "daemon/session_table.h"
#include "grpcpp/server.h"
#include "runtime/client.h"

namespace pjrt::daemon {

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonOptions& options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The addresses actually listened on (port 0 resolved), in --listen order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  runtime::Client& client() { return *client_; }

  // Graceful shutdown; idempotent.
  void Shutdown();

 private:
  explicit Daemon(const DaemonOptions& options);
  absl::Status Init();
  void ReapLoop();

  const DaemonOptions options_;
  std::unique_ptr<runtime::Client> client_;
  std::unique_ptr<SessionTable> sessions_;
  std::unique_ptr<ExecutableCache> compile_cache_;
  std::unique_ptr<ServerService> server_service_;
  std::unique_ptr<SessionService> session_service_;
  std::unique_ptr<BufferService> buffer_service_;
  std::unique_ptr<ExecutableService> executable_service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> addresses_;

  pjrt::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// Prepares a unix socket path for listening: the folder must exist, and a
// socket file left by a daemon that is gone is removed. FAILED_PRECONDITION
// if a live process is listening there.
absl::Status PrepareUnixSocketPath(const std::string& path);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_DAEMON_H_
