// pjrtctl top: the live view of the daemon (cli/top.h draws it).
#include "cli/top.h"

#include <iostream>
#include <limits>
#include <memory>

#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

struct TopCommandOptions {
  double interval = 1;
  int frames = 0;
};

int RunTop(const GlobalOptions& g, const TopCommandOptions& o) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  if (g.json) {
    // One frame as data, with rates over one interval.
    auto before = TakeTopSample(**client);
    if (!before.ok()) return Fail(g, before.status());
    absl::SleepFor(absl::Seconds(o.interval));
    auto now = TakeTopSample(**client);
    if (!now.ok()) return Fail(g, now.status());
    std::cout << TopFrameJson(*now, *before).dump(2) << "\n";
    return kExitOk;
  }
  absl::Status status = RunTopView(
      **client,
      TopOptions{.interval = absl::Seconds(o.interval), .frames = o.frames},
      std::cout);
  return status.ok() ? kExitOk : Fail(g, status);
}

}  // namespace

void AddTopCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  auto o = std::make_shared<TopCommandOptions>();
  auto* top = app.add_subcommand(
      "top",
      "A live view of the daemon: devices with memory bars and\n"
      "utilisation, sessions by device time, RPC rates; q quits. Prints\n"
      "one frame when stdout is not a terminal.\n"
      "Example: pjrtctl top");
  top->add_option("--interval", o->interval,
                  "Seconds between frames (default 1)")
      ->check(NumberFromTo(0.05, 3600.0));
  top->add_option("--frames", o->frames,
                  "Draw this many frames, then stop (default: until q)")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  top->callback(
      [&g, o, command] { *command = [&g, o] { return RunTop(g, *o); }; });
}

}  // namespace pjrt::cli
