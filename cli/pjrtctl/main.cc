// pjrtctl: the command line of pjrtd.
//
//   pjrtctl [--address ADDR] [--json] COMMAND [ARGS]
//
// Exit status: 0 on success, 1 when the daemon reports an error (or cannot
// be reached), 2 on a usage error. Each command lives in a file of its own
// in this folder (commands.h).
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/version.h"
#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

void AddGlobalOptions(CLI::App& app, GlobalOptions& g) {
  app.add_option("--address", g.address,
                 absl::StrFormat("Daemon address: unix:///path or host:port "
                                 "(default: $%s, then %s)",
                                 pjrt_client::kAddressEnvVar,
                                 pjrt_client::kDefaultAddress));
  app.add_flag("--json", g.json, "Print one JSON document instead of a table");
  app.add_option("--timeout", g.timeout_seconds,
                 "Seconds to wait for the daemon to answer (default 10)")
      ->check(PositiveNumber());
  app.add_option("--token-file", g.token_file,
                 "File holding the tenant's token, for a daemon with "
                 "tenants (default: $PJRTD_TOKEN)");
  app.add_option("--tls-ca", g.tls_ca,
                 "Connect over TLS, trusting this PEM CA (default: "
                 "$PJRTD_TLS_CA)");
  app.add_option("--tls-cert", g.tls_cert,
                 "Present this PEM client certificate (mutual TLS; default: "
                 "$PJRTD_TLS_CERT)");
  app.add_option("--tls-key", g.tls_key,
                 "The client certificate's PEM key (default: $PJRTD_TLS_KEY)");
}

int Main(int argc, char** argv) {
  CLI::App app{
      "pjrtctl: talk to a pjrtd daemon.\n\nExamples:\n"
      "  pjrtctl devices\n"
      "  pjrtctl --address unix:///tmp/pjrtd.sock stats --json\n"
      "  pjrtctl health --wait 10\n"
      "  pjrtctl run model.mlir --input x.npy --output-dir out\n"
      "  pjrtctl put x.npy --keep\n"
      "  pjrtctl bench --json\n"
      "  pjrtctl transfer x.npy --from HOST0:PORT --to HOST1:PORT\n",
      "pjrtctl"};
  app.set_version_flag("--version", std::string("pjrtctl ") + kBuildVersion);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  AddGlobalOptions(app, g);

  // In the order `pjrtctl --help` lists them.
  Command command;
  AddTokenCommand(app, g, &command);
  AddInfoCommand(app, g, &command);
  AddDevicesCommand(app, g, &command);
  AddHealthCommand(app, g, &command);
  AddStatsCommand(app, g, &command);
  AddTopCommand(app, g, &command);
  AddSessionsCommand(app, g, &command);
  AddCompileCommand(app, g, &command);
  AddRunCommand(app, g, &command);
  AddBenchCommand(app, g, &command);
  AddPutGetCommands(app, g, &command);
  AddTransferCommand(app, g, &command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // With --json a usage error is a JSON document too, as a command's own
    // errors are (the flag may not have been parsed when the error came).
    const auto print_json = [&](const std::string& message) {
      for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) != "--json") continue;
        std::cout << json{{"error",
                           {{"code", "INVALID_ARGUMENT"},
                            {"message", message}}}}
                         .dump(2, ' ', false, json::error_handler_t::replace)
                  << "\n";
        return;
      }
    };
    // A word that names no command (a typo) is left over: say so, rather
    // than that a command is missing.
    const std::vector<std::string> left = app.remaining();
    if (app.get_subcommands().empty() && !left.empty() &&
        !left.front().empty() && left.front()[0] != '-') {
      const std::string message = absl::StrFormat(
          "'%s' is not a command; pjrtctl --help lists them", left.front());
      std::cerr << "pjrtctl: " << message << "\n";
      print_json(message);
      return kExitUsage;
    }
    int code = app.exit(e);
    if (code == 0) return kExitOk;
    print_json(e.what());
    return kExitUsage;
  }
  return command ? command() : kExitUsage;
}

}  // namespace
}  // namespace pjrt::cli

int main(int argc, char** argv) {
  // See daemon/main.cc: Debian's abseil checks every gRPC lock for
  // deadlock cycles unless told not to.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return pjrt::cli::Main(argc, argv);
}
