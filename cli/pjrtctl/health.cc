// pjrtctl health: is the daemon serving, does it reach its cluster's peers,
// do its devices work.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/daemon_calls.h"
#include "cli/pjrtctl/commands.h"
#include "cli/proto_json.h"
#include "cli/table.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"

namespace pjrt::cli {
namespace {

int RunHealth(const GlobalOptions& g, double wait_seconds) {
  const std::string address = pjrt_client::ResolveAddress(g.address);
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline =
      absl::Now() +
      absl::Seconds(wait_seconds > 0 ? wait_seconds : g.timeout_seconds);
  grpc::Status status;
  grpc::health::v1::HealthCheckResponse response;
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    // With --wait, a daemon that is not up yet is waited for.
    context.set_wait_for_ready(wait_seconds > 0);
    response.Clear();
    status = stub->Check(&context, grpc::health::v1::HealthCheckRequest(),
                         &response);
    bool serving =
        status.ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || wait_seconds <= 0 || absl::Now() + backoff >= deadline)
      break;
    // The daemon answered but is not serving (starting or draining), or the
    // socket is not there yet: ask again shortly.
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  std::string state =
      status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                        response.status())
                  : "UNREACHABLE";
  bool healthy = state == "SERVING";
  // A serving daemon also says which of its cluster's peers it reaches,
  // and whether each of its devices still works.
  std::optional<v1::ClusterStatus> cluster;
  std::vector<v1::Device> devices;
  if (healthy) {
    auto client = Connect(g);
    if (client.ok()) {
      auto cluster_status = GetClusterStatus(**client, absl::Seconds(2));
      if (cluster_status.ok()) cluster = *std::move(cluster_status);
      auto listed = ListDevices(**client);
      if (listed.ok()) {
        for (const v1::Device& d : *listed) {
          if (d.addressable()) devices.push_back(d);
        }
      }
    }
  }
  bool devices_ok = true;
  for (const v1::Device& d : devices)
    devices_ok &= d.unhealthy_reason().empty();
  bool peers_ok = true;
  if (cluster) {
    for (const auto& task : cluster->tasks()) peers_ok &= task.reachable();
  }
  if (g.json) {
    json doc = {{"address", address},
                {"status", state},
                {"healthy", healthy && devices_ok}};
    if (!status.ok()) {
      // As every command's --json error reads.
      const absl::Status error = pjrt_client::ToAbslStatus(status);
      doc["error"] = {{"code", absl::StatusCodeToString(error.code())},
                      {"message", std::string(error.message())}};
    }
    if (healthy) {
      json list = json::array();
      for (const v1::Device& d : devices) {
        json entry = {{"id", d.id()},
                      {"kind", d.kind()},
                      {"healthy", d.unhealthy_reason().empty()}};
        if (!d.unhealthy_reason().empty())
          entry["reason"] = d.unhealthy_reason();
        list.push_back(entry);
      }
      doc["devices"] = list;
    }
    if (cluster) {
      json tasks = json::array();
      for (const auto& task : cluster->tasks())
        tasks.push_back(ProtoToJson(task));
      doc["task_id"] = cluster->task_id();
      doc["tasks"] = tasks;
      doc["peers_reachable"] = peers_ok;
    }
    std::cout << doc.dump(2) << "\n";
  } else if (status.ok()) {
    std::cout << address << ": " << state << "\n";
    for (const v1::Device& d : devices) {
      if (d.unhealthy_reason().empty()) continue;
      std::cout << "device " << d.id() << " (" << d.kind()
                << "): UNHEALTHY: " << d.unhealthy_reason() << "\n";
    }
    if (cluster && cluster->tasks_size() > 1) {
      Table table({"TASK", "ADDRESS", "DEVICES", "REACHABLE", "RTT", "NOTE"});
      for (const auto& task : cluster->tasks()) {
        table.AddRow(
            {absl::StrCat(task.task_id(), task.self() ? " (self)" : ""),
             task.address(), absl::StrCat(task.device_count()),
             Yes(task.reachable()),
             task.self() ? "-"
                         : absl::StrFormat("%.2f ms", task.round_trip_ms()),
             task.error()});
      }
      table.Print(std::cout);
    }
  } else {
    std::cerr << "pjrtctl: " << address
              << " is not reachable: " << status.error_message() << "\n";
  }
  // A daemon that cannot reach a peer of its cluster, or whose device has
  // failed, is not healthy either.
  return healthy && peers_ok && devices_ok ? kExitOk : kExitServerError;
}

}  // namespace

void AddHealthCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  auto wait_seconds = std::make_shared<double>(0);
  auto* health = app.add_subcommand(
      "health",
      "Check that the daemon is serving and reaches every peer of its\n"
      "cluster (exit 0) or not (exit 1); lists the peers of a cluster.\n"
      "Example: pjrtctl health --wait 30");
  health
      ->add_option("--wait", *wait_seconds,
                   "Wait up to SECONDS for the daemon to come up")
      ->check(NonNegativeNumber());
  health->callback([&g, wait_seconds, command] {
    *command = [&g, wait_seconds] { return RunHealth(g, *wait_seconds); };
  });
}

}  // namespace pjrt::cli
