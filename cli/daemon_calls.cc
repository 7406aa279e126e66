#include "cli/daemon_calls.h"

#include <memory>

#include "grpcpp/client_context.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"

namespace pjrt::cli {

namespace {

// A control call's deadline, as the client's.
constexpr absl::Duration kCallTimeout = absl::Seconds(60);

// Calls `method` of a stub on the client's channel with `request`; the
// daemon's status, code and message kept, on failure.
template <typename Service, typename Request, typename Response,
          typename Method>
absl::StatusOr<Response> Call(pjrt_client::Client& client, Method method,
                              const Request& request) {
  std::unique_ptr<typename Service::Stub> stub =
      Service::NewStub(client.channel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  Response response;
  grpc::Status status = ((*stub).*method)(&context, request, &response);
  if (!status.ok()) return pjrt_client::ToAbslStatus(status);
  return response;
}

}  // namespace

absl::StatusOr<v1::ServerInfo> GetServerInfo(pjrt_client::Client& client) {
  return Call<v1::Server, v1::GetServerInfoRequest, v1::ServerInfo>(
      client, &v1::Server::Stub::GetServerInfo, v1::GetServerInfoRequest());
}

absl::StatusOr<std::vector<v1::Device>> ListDevices(
    pjrt_client::Client& client) {
  auto response =
      Call<v1::Server, v1::ListDevicesRequest, v1::ListDevicesResponse>(
          client, &v1::Server::Stub::ListDevices, v1::ListDevicesRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::Device>(response->devices().begin(),
                                 response->devices().end());
}

absl::StatusOr<v1::Stats> GetStats(pjrt_client::Client& client) {
  return Call<v1::Server, v1::GetStatsRequest, v1::Stats>(
      client, &v1::Server::Stub::GetStats, v1::GetStatsRequest());
}

absl::StatusOr<std::vector<v1::SessionInfo>> ListSessions(
    pjrt_client::Client& client) {
  auto response =
      Call<v1::Sessions, v1::ListSessionsRequest, v1::ListSessionsResponse>(
          client, &v1::Sessions::Stub::ListSessions, v1::ListSessionsRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::SessionInfo>(response->sessions().begin(),
                                      response->sessions().end());
}

absl::StatusOr<v1::ClusterStatus> GetClusterStatus(pjrt_client::Client& client,
                                                   absl::Duration timeout) {
  v1::GetClusterStatusRequest request;
  request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
  return Call<v1::Server, v1::GetClusterStatusRequest, v1::ClusterStatus>(
      client, &v1::Server::Stub::GetClusterStatus, request);
}

}  // namespace pjrt::cli
