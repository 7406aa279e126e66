// pjrt-hlo: what pjrtd makes of an HLO program, offline.
//
//   pjrt-hlo compile FILE.hlo --platform host|cuda [--cuda-arch sm_90]
//                    [--dump DIR]
//
// lowers the program as the daemon would and prints, for host, its steps;
// for cuda, every generated kernel with its launch shape, registers and
// shared memory (from ptxas, through NVRTC: no GPU needed) and every
// library call. --dump writes the generated CUDA source and the cubin.
//
//   pjrt-hlo run FILE.hlo --platform P [--input X.npy ...]
//                [--output-dir DIR] [--compare-with Q] [--seed N]
//
// runs the program in this process on platform P (random inputs unless
// given) and, with --compare-with, on platform Q too, and compares every
// output element by element within the op's tolerance: the differential
// checker for the CUDA backend.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "cli/npy.h"
#include "compiler/backend.h"
#include "compiler/host/compiler.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/verifier.h"
#include "runtime/client.h"
#include "runtime/executable.h"
#ifdef PJRT_HAVE_CUDA
#include "compiler/cuda/backend.h"
#endif

namespace pjrt {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitMismatch = 3;

int Fail(const absl::Status& status) {
  std::cerr << "pjrt-hlo: " << status << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<hlo::Module>> LoadModule(const std::string& path) {
  PJRT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::StatusOr<std::unique_ptr<hlo::Module>> module = hlo::ParseHloModule(text);
  if (!module.ok()) {
    return absl::Status(module.status().code(),
                        absl::StrCat(path, ": ", module.status().message()));
  }
  absl::Status verified = hlo::VerifyModule(**module, text);
  if (!verified.ok()) {
    return absl::Status(verified.code(), absl::StrCat(path, ": ", verified.message()));
  }
  PJRT_RETURN_IF_ERROR(hlo::SimplifyModule(module->get()).status());
  return module;
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int Compile(const std::string& path, const std::string& platform, const std::string& arch,
            const std::string& dump) {
  auto module = LoadModule(path);
  if (!module.ok()) return Fail(module.status());
  if (!dump.empty()) {
    std::error_code error;
    std::filesystem::create_directories(dump, error);
    if (error) {
      return Fail(absl::UnavailableError(
          absl::StrFormat("cannot create --dump folder %s: %s", dump, error.message())));
    }
  }
  if (platform == "host") {
    auto program = compiler::host::CompileForHost(**module);
    if (!program.ok()) return Fail(program.status());
    const std::string listing = (*program)->ToString();
    std::cout << listing;
    if (!dump.empty()) {
      absl::Status s = WriteFile(dump + "/program.txt", listing);
      if (!s.ok()) return Fail(s);
    }
    return kExitOk;
  }
#ifdef PJRT_HAVE_CUDA
  compiler::DiskCache no_cache("");
  auto c = compiler::cuda::CompileForCuda(**module, {}, arch, no_cache);
  if (!c.ok()) return Fail(c.status());
  std::cout << absl::StrFormat("%s: %d launches for %s (NVRTC %s), cubin %d bytes\n",
                               (*module)->name(), c->generated.launches.size(), arch,
                               compiler::cuda::NvrtcVersion(), c->cubin.cubin.size());
  for (const compiler::cuda::Launch& launch : c->generated.launches) {
    if (launch.kind == compiler::cuda::Launch::Kind::kGemm) {
      std::cout << absl::StrFormat("  cublasLt matmul    %s\n", launch.origin);
      continue;
    }
    std::string usage = "";
    for (const compiler::cuda::KernelResources& r : c->cubin.resources) {
      if (r.name != launch.kernel) continue;
      usage = absl::StrFormat("%d registers, %d bytes shared%s", r.registers, r.shared_bytes,
                              r.spill_bytes > 0 ? absl::StrCat(", ", r.spill_bytes, " bytes spilled")
                                                : "");
    }
    std::cout << absl::StrFormat("  kernel %-24s <<<%d, %d>>>  %s\n    %s\n", launch.kernel,
                                 launch.blocks, launch.threads, usage, launch.origin);
  }
  if (!dump.empty()) {
    absl::Status s = WriteFile(dump + "/kernels.cu", c->generated.source);
    s.Update(WriteFile(absl::StrFormat("%s/kernels.%s.cubin", dump, arch), c->cubin.cubin));
    if (!s.ok()) return Fail(s);
    std::cout << "wrote " << dump << "/kernels.cu and kernels." << arch << ".cubin\n";
  }
  return kExitOk;
#else
  (void)arch;
  return Fail(absl::UnimplementedError(
      "this build has no CUDA backend (the CUDA Toolkit was not found at build time)"));
#endif
}

}  // namespace
}  // namespace pjrt

int main(int argc, char** argv) {
  CLI::App app{"pjrt-hlo: compile and run HLO programs as pjrtd does, offline"};
  app.require_subcommand(1);
  std::string path, platform = "host", arch = "sm_90", dump;
  CLI::App* compile = app.add_subcommand("compile", "Lower a program and show what it becomes");
  compile->add_option("file", path, "HLO text file")->required();
  compile->add_option("--platform", platform, "host or cuda")
      ->check(CLI::IsMember({"host", "cuda"}));
  compile->add_option("--cuda-arch", arch, "GPU architecture for cuda (default sm_90)");
  compile->add_option("--dump", dump, "Write the generated source and binaries here");
  CLI11_PARSE(app, argc, argv);
  if (compile->parsed()) return pjrt::Compile(path, platform, arch, dump);
  return pjrt::kExitUsage;
}
