// pjrtctl sessions: the daemon's sessions; --close closes one (an admin's
// call).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/daemon_calls.h"
#include "cli/pjrtctl/commands.h"
#include "cli/proto_json.h"
#include "cli/table.h"
#include "grpcpp/client_context.h"
#include "pjrt/v1/session.grpc.pb.h"

namespace pjrt::cli {
namespace {

constexpr char kDefaultAdminTokenFile[] = "/run/pjrtd/admin.token";

// The admin token in `path`, or why there is none.
absl::StatusOr<std::string> ReadAdminToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot read the admin token file %s: %s", path, std::strerror(errno)));
  }
  std::string token;
  std::getline(in, token);
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::PermissionDeniedError(
        absl::StrFormat("the admin token file %s is empty", path));
  }
  return token;
}

// Closes session `public_id` with the admin token of `token_file`; where
// that is the default file and cannot be read, without one, for a caller
// that is a tenant of the admin role.
int RunCloseSession(const GlobalOptions& g, int64_t public_id,
                    const std::string& token_file, bool token_file_given) {
  absl::StatusOr<std::string> token = ReadAdminToken(token_file);
  if (!token.ok() && token_file_given) {
    return Fail(g, absl::Status(token.status().code(),
                                absl::StrCat(token.status().message(),
                                             " (closing another client's "
                                             "session needs the token the "
                                             "daemon wrote there, or a "
                                             "tenant of the admin role)")));
  }
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  v1::CloseSessionAsAdminRequest request;
  request.set_public_id(static_cast<uint64_t>(public_id));
  if (token.ok()) request.set_admin_token(*token);
  v1::CloseSessionResponse response;
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(g.timeout_seconds)));
  grpc::Status status = v1::Sessions::NewStub((*client)->channel())
                            ->CloseSessionAsAdmin(&context, request, &response);
  if (!status.ok()) {
    absl::Status error = pjrt_client::ToAbslStatus(status);
    if (!token.ok() && absl::IsPermissionDenied(error)) {
      error = absl::PermissionDeniedError(absl::StrFormat(
          "%s (no admin token was sent: %s; run as root or as the daemon's "
          "user, or pass --admin-token-file)",
          error.message(), token.status().message()));
    }
    return Fail(g, error);
  }
  if (g.json) {
    json doc = ProtoToJson(response);
    doc["closed"] = public_id;
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "closed session %d: freed %d buffers (%s) and %d executables\n",
        public_id, response.buffers_freed(),
        FormatByteSize(response.bytes_freed()), response.executables_freed());
  }
  return kExitOk;
}

int RunSessions(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto sessions = ListSessions(**client);
  if (!sessions.ok()) return Fail(g, sessions.status());
  if (g.json) {
    json list = json::array();
    for (const auto& s : *sessions) list.push_back(ProtoToJson(s));
    std::cout << json{{"sessions", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "TENANT", "CLIENT", "PEER", "ATTACHED", "BUFFERS", "BYTES",
               "PEAK", "EXECUTABLES", "RUNS", "DEVICE TIME", "IN", "OUT", "AGE",
               "LEASE LEFT"});
  for (const auto& s : *sessions) {
    std::string runs = absl::StrCat(s.executions());
    if (s.failed_executions() > 0) {
      absl::StrAppend(&runs, " (", s.failed_executions(), " failed)");
    }
    table.AddRow({absl::StrCat(s.public_id()), s.tenant(), s.client_name(),
                  s.peer(), Yes(s.attached()), absl::StrCat(s.buffer_count()),
                  FormatByteSize(s.bytes()), FormatByteSize(s.peak_bytes()),
                  absl::StrCat(s.executable_count()), runs,
                  absl::StrFormat("%.3fs", s.device_seconds()),
                  FormatByteSize(s.bytes_to_device()),
                  FormatByteSize(s.bytes_from_device()),
                  absl::StrFormat("%.0fs", s.age_seconds()),
                  s.attached()
                      ? "-"
                      : absl::StrFormat("%.0fs", s.lease_remaining_seconds())});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

void AddSessionsCommand(CLI::App& app, const GlobalOptions& g,
                        Command* command) {
  auto* sessions = app.add_subcommand(
      "sessions",
      "List the daemon's sessions; with --close, close one (an admin's\n"
      "call: it needs the token of the daemon's --admin-token-file).\n"
      "Example: pjrtctl sessions\n"
      "Example: sudo pjrtctl sessions --close 7");
  struct Options {
    int64_t close_session = 0;
    std::string admin_token_file = kDefaultAdminTokenFile;
  };
  auto o = std::make_shared<Options>();
  sessions
      ->add_option("--close", o->close_session,
                   "Close the session with this ID (as listed), freeing "
                   "what it owns")
      ->check(WholeNumber(1, std::numeric_limits<int64_t>::max()));
  CLI::Option* token_file = sessions->add_option(
      "--admin-token-file", o->admin_token_file,
      absl::StrFormat("The daemon's admin token file (default %s; without "
                      "it, a tenant of the admin role may close sessions)",
                      kDefaultAdminTokenFile));
  sessions->callback([&g, o, command, token_file] {
    const bool given = token_file->count() > 0;
    *command = [&g, o, given] {
      if (o->close_session > 0) {
        return RunCloseSession(g, o->close_session, o->admin_token_file, given);
      }
      return RunSessions(g);
    };
  });
}

}  // namespace pjrt::cli
