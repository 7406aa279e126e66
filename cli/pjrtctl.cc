// pjrtctl: the command line of pjrtd.
//
//   pjrtctl [--address ADDR] [--json] COMMAND [ARGS]
//
// Exit status: 0 on success, 1 when the daemon reports an error (or cannot
// be reached), 2 on a usage error.
#include <unistd.h>

#include <iostream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "base/version.h"
#include "cli/proto_json.h"
#include "cli/table.h"
#include "client/cpp/pjrt_client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"

namespace pjrt::cli {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitServerError = 1;
constexpr int kExitUsage = 2;

struct GlobalOptions {
  std::string address;
  bool json = false;
  double timeout_seconds = 10;
};

// Prints `status` as the command's failure and returns the exit code.
int Fail(const GlobalOptions& g, const absl::Status& status) {
  if (g.json) {
    json doc = {{"error",
                 {{"code", absl::StatusCodeToString(status.code())},
                  {"message", std::string(status.message())}}}};
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cerr << "pjrtctl: " << absl::StatusCodeToString(status.code()) << ": "
              << status.message() << "\n";
  }
  return kExitServerError;
}

absl::StatusOr<std::shared_ptr<pjrt_client::Client>> Connect(
    const GlobalOptions& g) {
  return pjrt_client::Client::Connect(
      {.address = g.address, .timeout = absl::Seconds(g.timeout_seconds)});
}

std::string Yes(bool b) { return b ? "yes" : "no"; }

int RunInfo(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  const v1::ServerInfo& info = (*client)->server_info();
  if (g.json) {
    json doc = ProtoToJson(info);
    doc["address"] = (*client)->address();
    doc["client_version"] = kBuildVersion;
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  PrintFields(
      std::cout,
      {{"address", (*client)->address()},
       {"build", info.build_version()},
       {"protocol", absl::StrFormat("pjrt.v1 revisions %d-%d",
                                    info.protocol_version_min(),
                                    info.protocol_version_max())},
       {"platform", info.platform()},
       {"devices", absl::StrCat(info.addressable_device_count())},
       {"task", absl::StrFormat("%d of %d", info.task_id(), info.task_count())},
       {"pid", absl::StrCat(info.pid())},
       {"uptime", absl::FormatDuration(
                      absl::Trunc(absl::Seconds(info.uptime_seconds()),
                                  absl::Seconds(1)))},
       {"capabilities", absl::StrJoin(info.capabilities(), " ")},
       {"client", kBuildVersion}});
  return kExitOk;
}

int RunDevices(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto devices = (*client)->Devices();
  if (!devices.ok()) return Fail(g, devices.status());
  if (g.json) {
    json list = json::array();
    for (const auto& d : *devices) list.push_back(ProtoToJson(d));
    std::cout << json{{"devices", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "TASK", "LOCAL", "PLATFORM", "KIND", "MEMORY", "ADDRESSABLE"});
  for (const auto& d : *devices) {
    table.AddRow({absl::StrCat(d.id()), absl::StrCat(d.task_id()),
                  absl::StrCat(d.local_hardware_id()), d.platform(), d.kind(),
                  FormatByteSize(d.memory_bytes()), Yes(d.addressable())});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunHealth(const GlobalOptions& g, double wait_seconds) {
  const std::string address = pjrt_client::ResolveAddress(g.address);
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline =
      absl::Now() + absl::Seconds(wait_seconds > 0 ? wait_seconds
                                                   : g.timeout_seconds);
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
    bool serving = status.ok() && response.status() ==
                                      grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || wait_seconds <= 0 || absl::Now() + backoff >= deadline) break;
    // The daemon answered but is not serving (starting or draining), or the
    // socket is not there yet: ask again shortly.
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  std::string state =
      status.ok()
          ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                response.status())
          : "UNREACHABLE";
  bool healthy = state == "SERVING";
  if (g.json) {
    json doc = {{"address", address}, {"status", state}, {"healthy", healthy}};
    if (!status.ok()) doc["error"] = status.error_message();
    std::cout << doc.dump(2) << "\n";
  } else if (status.ok()) {
    std::cout << address << ": " << state << "\n";
  } else {
    std::cerr << "pjrtctl: " << address << " is not reachable: "
              << status.error_message() << "\n";
  }
  return healthy ? kExitOk : kExitServerError;
}

int RunStats(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto stats = (*client)->Stats();
  if (!stats.ok()) return Fail(g, stats.status());
  if (g.json) {
    std::cout << ProtoToJson(*stats).dump(2) << "\n";
    return kExitOk;
  }
  Table table({"DEVICE", "IN USE", "PEAK", "RESERVED", "LIMIT", "ALLOCS",
               "LARGEST FREE", "FRAG", "QUEUE"});
  for (const auto& d : stats->devices()) {
    table.AddRow({absl::StrCat(d.device_id()), FormatByteSize(d.bytes_in_use()),
                  FormatByteSize(d.peak_bytes_in_use()),
                  FormatByteSize(d.bytes_reserved()),
                  FormatByteSize(d.bytes_limit()), absl::StrCat(d.num_allocs()),
                  FormatByteSize(d.largest_free_block()),
                  absl::StrFormat("%.2f", d.fragmentation()),
                  absl::StrCat(d.queue_depth())});
  }
  table.Print(std::cout);
  std::cout << "\nsessions: " << stats->session_count()
            << "  buffers: " << stats->buffer_count() << "\n";
  return kExitOk;
}

int RunSessions(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto sessions = (*client)->Sessions();
  if (!sessions.ok()) return Fail(g, sessions.status());
  if (g.json) {
    json list = json::array();
    for (const auto& s : *sessions) list.push_back(ProtoToJson(s));
    std::cout << json{{"sessions", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "CLIENT", "PEER", "ATTACHED", "BUFFERS", "BYTES", "AGE",
               "LEASE LEFT"});
  for (const auto& s : *sessions) {
    table.AddRow({absl::StrCat(s.public_id()), s.client_name(), s.peer(),
                  Yes(s.attached()), absl::StrCat(s.buffer_count()),
                  FormatByteSize(s.bytes()),
                  absl::StrFormat("%.0fs", s.age_seconds()),
                  s.attached() ? "-"
                               : absl::StrFormat("%.0fs",
                                                 s.lease_remaining_seconds())});
  }
  table.Print(std::cout);
  return kExitOk;
}

int Main(int argc, char** argv) {
  CLI::App app{"pjrtctl: talk to a pjrtd daemon.\n\nExamples:\n"
               "  pjrtctl devices\n"
               "  pjrtctl --address unix:///tmp/pjrtd.sock stats --json\n"
               "  pjrtctl health --wait 10\n",
               "pjrtctl"};
  app.set_version_flag("--version", std::string("pjrtctl ") + kBuildVersion);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  app.add_option("--address", g.address,
                 absl::StrFormat("Daemon address: unix:///path or host:port "
                                 "(default: $%s, then %s)",
                                 pjrt_client::kAddressEnvVar,
                                 pjrt_client::kDefaultAddress));
  app.add_flag("--json", g.json, "Print one JSON document instead of a table");
  app.add_option("--timeout", g.timeout_seconds,
                 "Seconds to wait for the daemon to answer (default 10)")
      ->check(CLI::PositiveNumber);

  auto* info = app.add_subcommand(
      "info", "Show the daemon's build, protocol, platform and capabilities.\n"
              "Example: pjrtctl info");
  auto* devices = app.add_subcommand(
      "devices", "List the devices of the daemon (and of its cluster).\n"
                 "Example: pjrtctl devices --json");
  double wait_seconds = 0;
  auto* health = app.add_subcommand(
      "health", "Check that the daemon is serving (exit 0) or not (exit 1).\n"
                "Example: pjrtctl health --wait 30");
  health->add_option("--wait", wait_seconds,
                     "Wait up to SECONDS for the daemon to come up")
      ->check(CLI::NonNegativeNumber);
  auto* stats = app.add_subcommand(
      "stats", "Show memory use per device, sessions and buffers.\n"
               "Example: pjrtctl stats");
  auto* sessions = app.add_subcommand(
      "sessions", "List the daemon's sessions.\nExample: pjrtctl sessions");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (info->parsed()) return RunInfo(g);
  if (devices->parsed()) return RunDevices(g);
  if (health->parsed()) return RunHealth(g, wait_seconds);
  if (stats->parsed()) return RunStats(g);
  if (sessions->parsed()) return RunSessions(g);
  return kExitUsage;
}

}  // namespace
}  // namespace pjrt::cli

int main(int argc, char** argv) { return pjrt::cli::Main(argc, argv); }
