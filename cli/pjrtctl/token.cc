// pjrtctl token new: credentials for the daemon's tenants file.
#include "base/token.h"

#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "base/text.h"
#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

// `pjrtctl token new`: a fresh random token for a tenant, and the line of
// the tenants file that admits it (only the token's salted hash is kept
// there).
int RunTokenNew(const GlobalOptions& g, const std::string& name) {
  // As the daemon reads a tenant's name: 1 to 64 characters; none a
  // control character, so that the line printed below is the TOML string
  // it looks like (with \ and " escaped) and nothing more.
  if (name.empty() || name.size() > 64) {
    return FailUsage(
        g, absl::InvalidArgumentError(absl::StrFormat(
               "--name '%s' has %d characters; a tenant's name has 1 to 64",
               absl::CHexEscape(name), name.size())));
  }
  if (absl::Status utf8 = CheckUtf8(name, "--name"); !utf8.ok()) {
    return FailUsage(g, utf8);
  }
  std::string quoted;
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return FailUsage(
          g, absl::InvalidArgumentError(absl::StrFormat(
                 "--name '%s' holds the control character %#04x; "
                 "a tenant's name is printable",
                 absl::CHexEscape(name), static_cast<unsigned char>(c))));
    }
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  pjrt::NewToken token = pjrt::MakeToken();
  if (g.json) {
    json doc = {{"name", name},
                {"token", token.token},
                {"token_sha256", token.token_sha256}};
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "token: " << token.token << "\n\n"
            << "Give the token to the tenant (e.g. in a mode-600 file for "
               "pjrtctl --token-file, or PJRTD_TOKEN), and add to the "
               "tenants file:\n\n"
            << "[[tenant]]\n"
            << "name = \"" << quoted << "\"\n"
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
