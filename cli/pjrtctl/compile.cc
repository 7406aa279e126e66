// pjrtctl compile: compile a program file and print its signature.
#include <iostream>
#include <memory>
#include <string>

#include "cli/pjrtctl/commands.h"
#include "cli/pjrtctl/program.h"

namespace pjrt::cli {
namespace {

int RunCompile(const GlobalOptions& g, const std::string& path) {
  int exit_code = kExitOk;
  auto program = CompileFile(g, path, &exit_code);
  if (!program) return exit_code;
  if (g.json) {
    std::cout << SignatureJson(path, program->executable).dump(2) << "\n";
  } else {
    PrintSignature(path, program->executable);
  }
  return kExitOk;
}

}  // namespace

void AddCompileCommand(CLI::App& app, const GlobalOptions& g,
                       Command* command) {
  auto file = std::make_shared<std::string>();
  auto* compile = app.add_subcommand(
      "compile",
      "Compile a program (StableHLO .mlir, as jax.jit(f).lower(x).as_text()\n"
      "prints it, or HLO text); print its name, parameter and result shapes,\n"
      "compile time and whether the daemon's cache had it. A bad program\n"
      "prints the error with its line, column and a caret (exit 1).\n"
      "Example: pjrtctl compile model.mlir --json");
  compile->add_option("FILE", *file, "StableHLO (.mlir) or HLO text file")
      ->required()
      ->check(CLI::ExistingFile);
  compile->callback([&g, file, command] {
    *command = [&g, file] { return RunCompile(g, *file); };
  });
}

}  // namespace pjrt::cli
