// pjrtctl info: the daemon's build, protocol, platform and capabilities.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/version.h"
#include "cli/daemon_calls.h"
#include "cli/pjrtctl/commands.h"
#include "cli/proto_json.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

int RunInfo(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto described = GetServerInfo(**client);
  if (!described.ok()) return Fail(g, described.status());
  const v1::ServerInfo& info = *described;
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
       {"protocol",
        absl::StrFormat("pjrt.v1 revisions %d-%d", info.protocol_version_min(),
                        info.protocol_version_max())},
       {"platform", info.platform()},
       {"backend", info.backend().empty() ? "none" : info.backend()},
       {"devices", absl::StrCat(info.addressable_device_count())},
       {"task", absl::StrFormat("%d of %d", info.task_id(), info.task_count())},
       {"pid", absl::StrCat(info.pid())},
       {"uptime", absl::FormatDuration(absl::Trunc(
                      absl::Seconds(info.uptime_seconds()), absl::Seconds(1)))},
       {"capabilities", absl::StrJoin(info.capabilities(), " ")},
       {"metrics", info.metrics_url().empty() ? "off" : info.metrics_url()},
       {"client", kBuildVersion}});
  return kExitOk;
}

}  // namespace

void AddInfoCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  app.add_subcommand(
         "info",
         "Show the daemon's build, protocol, platform and capabilities.\n"
         "Example: pjrtctl info")
      ->callback([&g, command] { *command = [&g] { return RunInfo(g); }; });
}

}  // namespace pjrt::cli
