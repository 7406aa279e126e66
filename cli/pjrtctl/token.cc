// pjrtctl token new: credentials for the daemon's tenants file.
#include "base/token.h"

#include <iostream>
#include <memory>
#include <string>

#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

// `pjrtctl token new`: a fresh random token for a tenant, and the line of
// the tenants file that admits it (only the token's salted hash is kept
// there).
int RunTokenNew(const GlobalOptions& g, const std::string& name) {
  pjrt::NewToken token = pjrt::MakeToken();
  if (g.json) {
    json doc = {{"token", token.token}, {"token_sha256", token.token_sha256}};
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "token: " << token.token << "\n\n"
            << "Give the token to the tenant (e.g. in a mode-600 file for "
               "pjrtctl --token-file, or PJRTD_TOKEN), and add to the "
               "tenants file:\n\n"
            << "[[tenant]]\n"
            << "name = \"" << name << "\"\n"
            << "role = \"user\"\n"
            << "token_sha256 = \"" << token.token_sha256 << "\"\n";
  return kExitOk;
}

}  // namespace

void AddTokenCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  auto* token =
      app.add_subcommand("token",
                         "Make credentials for the daemon's tenants file.\n"
                         "Example: pjrtctl token new --name alice");
  auto* token_new = token->add_subcommand(
      "new",
      "Print a fresh random token and the tenants-file lines that "
      "admit it.\nExample: pjrtctl token new --name alice");
  auto name = std::make_shared<std::string>("NAME");
  token_new->add_option("--name", *name, "The tenant's name");
  token->require_subcommand(1);
  token_new->callback([&g, name, command] {
    *command = [&g, name] { return RunTokenNew(g, *name); };
  });
}

}  // namespace pjrt::cli
