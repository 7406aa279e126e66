// The daemon's Server and Sessions calls answered with its own messages,
// for the views that print them (pjrtctl info, devices, stats, sessions,
// health and top, whose --json is the message as proto_json writes it).
// The C++ client makes the same calls and returns its value types.
#ifndef PJRT_CLI_DAEMON_CALLS_H_
#define PJRT_CLI_DAEMON_CALLS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/pjrt_client/client.h"
#include "pjrt/v1/server.pb.h"
#include "pjrt/v1/session.pb.h"

namespace pjrt::cli {

absl::StatusOr<v1::ServerInfo> GetServerInfo(pjrt_client::Client& client);
absl::StatusOr<std::vector<v1::Device>> ListDevices(
    pjrt_client::Client& client);
absl::StatusOr<v1::Stats> GetStats(pjrt_client::Client& client);
absl::StatusOr<std::vector<v1::SessionInfo>> ListSessions(
    pjrt_client::Client& client);
// Waits `timeout` per peer; zero means the daemon's default (2 s).
absl::StatusOr<v1::ClusterStatus> GetClusterStatus(pjrt_client::Client& client,
                                                   absl::Duration timeout);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_DAEMON_CALLS_H_
