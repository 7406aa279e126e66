// pjrtctl devices: the devices of the daemon and of its cluster.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/daemon_calls.h"
#include "cli/pjrtctl/commands.h"
#include "cli/proto_json.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

int RunDevices(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto devices = ListDevices(**client);
  if (!devices.ok()) return Fail(g, devices.status());
  if (g.json) {
    json list = json::array();
    for (const auto& d : *devices) list.push_back(ProtoToJson(d));
    std::cout << json{{"devices", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "TASK", "LOCAL", "PLATFORM", "KIND", "MEMORY",
               "ADDRESSABLE", "HEALTH"});
  for (const auto& d : *devices) {
    table.AddRow({absl::StrCat(d.id()), absl::StrCat(d.task_id()),
                  absl::StrCat(d.local_hardware_id()), d.platform(), d.kind(),
                  FormatByteSize(d.memory_bytes()), Yes(d.addressable()),
                  !d.addressable() ? "-"
                  : d.unhealthy_reason().empty()
                      ? "ok"
                      : "UNHEALTHY: " + d.unhealthy_reason()});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, const GlobalOptions& g,
                       Command* command) {
  app.add_subcommand("devices",
                     "List the devices of the daemon (and of its cluster).\n"
                     "Example: pjrtctl devices --json")
      ->callback([&g, command] { *command = [&g] { return RunDevices(g); }; });
}

}  // namespace pjrt::cli
