// Compiling a program file in a session of pjrtctl's own, and describing
// its signature (pjrtctl compile and run).
#ifndef PJRT_CLI_PJRTCTL_PROGRAM_H_
#define PJRT_CLI_PJRTCTL_PROGRAM_H_

#include <memory>
#include <optional>
#include <string>

#include "cli/pjrtctl/common.h"

namespace pjrt::cli {

// A session of pjrtctl's own, and the program compiled in it.
struct CompiledProgram {
  std::shared_ptr<pjrt_client::Client> client;
  std::unique_ptr<pjrt_client::Session> session;
  pjrt_client::Executable executable;
};

// Reads and compiles `path`. On failure prints the error (a compile error
// keeps the daemon's message: line, column, caret) and sets `exit_code`.
std::optional<CompiledProgram> CompileFile(
    const GlobalOptions& g, const std::string& path, int* exit_code,
    const pjrt_client::CompileOptions& options = {});

// The program's name, parameters, results, replicas and compile facts.
json SignatureJson(const std::string& path,
                   const pjrt_client::Executable& executable);
void PrintSignature(const std::string& path,
                    const pjrt_client::Executable& executable);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_PJRTCTL_PROGRAM_H_
