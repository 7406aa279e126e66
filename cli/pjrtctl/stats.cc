// pjrtctl stats: memory per device, sessions, buffers, the compile cache.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/daemon_calls.h"
#include "cli/pjrtctl/commands.h"
#include "cli/proto_json.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

int RunStats(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto stats = GetStats(**client);
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
            << "  buffers: " << stats->buffer_count()
            << "  executables: " << stats->executable_count()
            << "  data channels: " << stats->data_channel_count()
            << "  execute lanes: " << stats->execute_lane_count() << "\n";
  const v1::CompileCacheStats& cache = stats->compile_cache();
  std::cout << absl::StrFormat(
      "compile cache: %d of %d programs, %d hits, %d compiles (%d failed), "
      "%d evictions\n",
      cache.entries(), cache.capacity(), cache.hits(), cache.compiles(),
      cache.failures(), cache.evictions());
  return kExitOk;
}

}  // namespace

void AddStatsCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  app.add_subcommand("stats",
                     "Show memory use per device, sessions and buffers.\n"
                     "Example: pjrtctl stats")
      ->callback([&g, command] { *command = [&g] { return RunStats(g); }; });
}

}  // namespace pjrt::cli
