// The commands of pjrtctl, a file each. Every Add*Command adds its
// subcommand to `app`; when the command line gives it, it sets `*command`
// to what runs it (with `g`, which outlives the run).
#ifndef PJRT_CLI_PJRTCTL_COMMANDS_H_
#define PJRT_CLI_PJRTCTL_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "cli/pjrtctl/common.h"

namespace pjrt::cli {

void AddTokenCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddInfoCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddDevicesCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddHealthCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddStatsCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddTopCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddSessionsCommand(CLI::App& app, const GlobalOptions& g,
                        Command* command);
void AddCompileCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddRunCommand(CLI::App& app, const GlobalOptions& g, Command* command);
void AddBenchCommand(CLI::App& app, const GlobalOptions& g, Command* command);
// `put` and `get`.
void AddPutGetCommands(CLI::App& app, const GlobalOptions& g, Command* command);
void AddTransferCommand(CLI::App& app, const GlobalOptions& g,
                        Command* command);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_PJRTCTL_COMMANDS_H_
