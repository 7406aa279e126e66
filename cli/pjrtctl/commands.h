// The commands of pjrtctl, a file each. Every Add*Command adds its
// subcommand to `app`; when the command line gives it, it sets `*command`
// to what runs it (with `g`, which outlives the run).
#ifndef PJRT_CLI_PJRTCTL_COMMANDS_H_
#define PJRT_CLI_PJRTCTL_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "cli/pjrtctl/common.h"

namespace pjrt::cli {

// Checks of option values whose messages name the value given and what
// would do (CLI11's own print their ranges' ends as 300-digit numbers, let
// NaN through, and its integer options saturate a value too large for them).
// A whole number from `min` to `max`.
CLI::Validator WholeNumber(int64_t min, int64_t max);
// A finite number above 0 (`PositiveNumber`), from 0 (`NonNegativeNumber`),
// or from `min` to `max`.
CLI::Validator PositiveNumber();
CLI::Validator NonNegativeNumber();
CLI::Validator NumberFromTo(double min, double max);

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
