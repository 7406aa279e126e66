#include "cli/pjrtctl/program.h"

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/table.h"

namespace pjrt::cli {

std::optional<CompiledProgram> CompileFile(
    const GlobalOptions& g, const std::string& path, int* exit_code,
    const pjrt_client::CompileOptions& options) {
  auto text = ReadTextFile(path);
  if (!text.ok()) {
    *exit_code = FailUsage(g, text.status());
    return std::nullopt;
  }
  CompiledProgram program;
  auto client = Connect(g);
  if (!client.ok()) {
    *exit_code = Fail(g, client.status());
    return std::nullopt;
  }
  program.client = *client;
  auto session = program.client->OpenSession({.client_name = "pjrtctl"});
  if (!session.ok()) {
    *exit_code = Fail(g, session.status());
    return std::nullopt;
  }
  program.session = *std::move(session);
  // The file's name says its format (.mlir: StableHLO, .hlo: HLO text);
  // otherwise the daemon tells from the text.
  pjrt_client::CompileOptions with_format = options;
  if (absl::EndsWith(path, ".mlir")) {
    with_format.program_format = pjrt_client::ProgramFormat::kStableHlo;
  } else if (absl::EndsWith(path, ".hlo")) {
    with_format.program_format = pjrt_client::ProgramFormat::kHlo;
  }
  auto executable = program.session->Compile(*text, with_format);
  if (!executable.ok()) {
    *exit_code =
        Fail(g, absl::Status(executable.status().code(),
                             absl::StrFormat("cannot compile %s:\n%s", path,
                                             executable.status().message())));
    return std::nullopt;
  }
  program.executable = *std::move(executable);
  return program;
}

json SignatureJson(const std::string& path,
                   const pjrt_client::Executable& executable) {
  json parameters = json::array();
  for (const auto& shape : executable.parameter_shapes()) {
    parameters.push_back(ShapeJson(shape));
  }
  json results = json::array();
  for (const auto& shape : executable.result_shapes()) {
    results.push_back(ShapeJson(shape));
  }
  return {{"file", path},
          {"name", executable.name()},
          {"parameters", parameters},
          {"results", results},
          {"result_is_tuple", executable.result_is_tuple()},
          {"num_replicas", executable.num_replicas()},
          {"num_partitions", executable.num_partitions()},
          {"donated_parameters", executable.donated_parameters()},
          {"compile_seconds", absl::ToDoubleSeconds(executable.compile_time())},
          {"cache_hit", executable.cache_hit()},
          {"fingerprint", executable.fingerprint()}};
}

void PrintSignature(const std::string& path,
                    const pjrt_client::Executable& executable) {
  PrintFields(std::cout,
              {{"program", path},
               {"name", executable.name()},
               {"compile time",
                absl::StrFormat(
                    "%s (%s)",
                    Seconds(absl::ToDoubleSeconds(executable.compile_time())),
                    executable.cache_hit() ? "cache hit" : "compiled")},
               {"cache hit", Yes(executable.cache_hit())},
               {"fingerprint", executable.fingerprint()}});
  std::cout << "\n";
  Table table({"", "INDEX", "SHAPE"});
  for (size_t i = 0; i < executable.parameter_shapes().size(); ++i) {
    table.AddRow(
        {"parameter", absl::StrCat(i),
         pjrt_client::ShapeToString(executable.parameter_shapes()[i])});
  }
  for (size_t i = 0; i < executable.result_shapes().size(); ++i) {
    table.AddRow({executable.result_is_tuple() ? "result (tuple)" : "result",
                  absl::StrCat(i),
                  pjrt_client::ShapeToString(executable.result_shapes()[i])});
  }
  table.Print(std::cout);
}

}  // namespace pjrt::cli
