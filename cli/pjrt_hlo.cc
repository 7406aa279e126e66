// pjrt-hlo: what pjrtd makes of an HLO program, offline. FILE is HLO text
// or StableHLO (MLIR text, as jax.jit(f).lower(x).as_text() prints it).
//
//   pjrt-hlo convert FILE.mlir
//
// prints the HLO text a StableHLO program becomes.
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
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "base/version.h"
#include "cli/npy.h"
#include "compiler/backend.h"
#include "compiler/host/compiler.h"
#include "hlo/literal.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/stablehlo.h"
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
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                             : kExitFailed;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The program as `path` holds it, checked and simplified as the daemon
// does for a backend that asks for `options`.
absl::StatusOr<std::unique_ptr<hlo::Module>> LoadModule(
    const std::string& path, const hlo::SimplifyOptions& options = {}) {
  PJRT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::StatusOr<std::unique_ptr<hlo::Module>> module =
      hlo::ParseAndVerifyProgram(text, hlo::ProgramFormat::kAuto);
  if (!module.ok()) {
    return absl::Status(module.status().code(),
                        absl::StrCat(path, ": ", module.status().message()));
  }
  PJRT_RETURN_IF_ERROR(hlo::SimplifyModule(module->get(), options).status());
  return module;
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The HLO text a StableHLO program becomes (checked as the daemon checks
// it); an HLO program is printed as it is.
int Convert(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return Fail(text.status());
  auto module = LoadModule(path);
  if (!module.ok()) return Fail(module.status());
  if (hlo::DetectProgramFormat(*text) == hlo::ProgramFormat::kHlo) {
    std::cout << *text;
    return kExitOk;
  }
  auto translation = hlo::TranslateStableHlo(*text);
  if (!translation.ok()) return Fail(translation.status());
  std::cout << translation->hlo_text;
  return kExitOk;
}

int Compile(const std::string& path, const std::string& platform,
            const std::string& arch, const std::string& dump) {
  auto module = LoadModule(path, platform == "host"
                                     ? compiler::host::HostSimplifyOptions()
                                     : hlo::SimplifyOptions());
  if (!module.ok()) return Fail(module.status());
  if (!dump.empty()) {
    std::error_code error;
    std::filesystem::create_directories(dump, error);
    if (error) {
      return Fail(absl::UnavailableError(absl::StrFormat(
          "cannot create --dump folder %s: %s", dump, error.message())));
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
  std::cout << absl::StrFormat(
      "%s: %d launches for %s (NVRTC %s), cubin %d bytes\n", (*module)->name(),
      c->generated.launches.size(), arch, compiler::cuda::NvrtcVersion(),
      c->cubin.cubin.size());
  using compiler::cuda::Launch;
  // Sub-programs of loops and conditionals indented under them.
  std::function<void(const std::vector<Launch>&, const std::string&)> list =
      [&](const std::vector<Launch>& launches, const std::string& indent) {
        for (const Launch& launch : launches) {
          switch (launch.kind) {
            case Launch::Kind::kGemm:
              std::cout << absl::StrFormat("%scublasLt matmul    %s\n", indent,
                                           launch.origin);
              continue;
            case Launch::Kind::kCollective:
              std::cout << absl::StrFormat("%sNCCL collective    %s\n", indent,
                                           launch.origin);
              continue;
            case Launch::Kind::kSort:
              std::cout << absl::StrFormat("%sCUB sort           %s\n", indent,
                                           launch.origin);
              continue;
            case Launch::Kind::kFft:
              std::cout << absl::StrFormat("%scuFFT transform    %s\n", indent,
                                           launch.origin);
              continue;
            case Launch::Kind::kWhile:
            case Launch::Kind::kConditional: {
              const bool loop = launch.kind == Launch::Kind::kWhile;
              std::cout << absl::StrFormat("%s%s\n", indent, launch.origin);
              for (size_t p = 0; p < launch.control.programs.size(); ++p) {
                std::cout << absl::StrFormat(
                    "%s  %s:\n", indent,
                    loop ? (p == 0 ? "condition" : "body")
                         : absl::StrCat("branch ", p));
                list(launch.control.programs[p]->launches, indent + "    ");
              }
              continue;
            }
            case Launch::Kind::kKernel:
              break;
          }
          std::string usage = "";
          for (const compiler::cuda::KernelResources& r : c->cubin.resources) {
            if (r.name != launch.kernel) continue;
            usage = absl::StrFormat(
                "%d registers, %d bytes shared%s", r.registers, r.shared_bytes,
                r.spill_bytes > 0
                    ? absl::StrCat(", ", r.spill_bytes, " bytes spilled")
                    : "");
          }
          const std::string threads =
              launch.threads_y > 1
                  ? absl::StrFormat("(%d,%d)", launch.threads, launch.threads_y)
                  : absl::StrCat(launch.threads);
          if (launch.cudnn != nullptr) {
            // cuDNN's engine, or this kernel where the GPU has none.
            std::cout << absl::StrFormat("%scuDNN convolution  %s\n%s  %s\n",
                                         indent, launch.origin, indent,
                                         launch.cudnn->ToString());
            if (launch.cudnn_then != nullptr) {
              std::cout << absl::StrFormat("%s  then kernel %s: %s\n", indent,
                                           launch.cudnn_then->kernel,
                                           launch.cudnn_then->origin);
            }
          }
          std::cout << absl::StrFormat(
              "%s%skernel %-24s <<<%d, %s>>>  %s\n%s  %s\n", indent,
              launch.cudnn != nullptr ? "else " : "", launch.kernel,
              launch.blocks, threads, usage, indent, launch.origin);
          if (!launch.cudnn_refusal.empty()) {
            std::cout << absl::StrFormat("%s  (not cuDNN: %s)\n", indent,
                                         launch.cudnn_refusal);
          }
        }
      };
  list(c->generated.launches, "  ");
  if (!dump.empty()) {
    absl::Status s = WriteFile(dump + "/kernels.cu", c->generated.source);
    s.Update(WriteFile(absl::StrFormat("%s/kernels.%s.cubin", dump, arch),
                       c->cubin.cubin));
    if (!s.ok()) return Fail(s);
    std::cout << "wrote " << dump << "/kernels.cu and kernels." << arch
              << ".cubin\n";
  }
  return kExitOk;
#else
  (void)arch;
  return Fail(
      absl::UnimplementedError("this build has no CUDA backend (the CUDA "
                               "Toolkit was not found at build time)"));
#endif
}

// --- run
// ----------------------------------------------------------------------

struct RunOptions {
  std::string file;
  std::string platform = "host";
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string compare_with;
  uint64_t seed = 1;
};

// Random values of `shape`: normal floats, small integers (valid indices
// for most programs), random predicates.
cli::HostArray RandomArray(const hlo::Shape& shape, std::mt19937_64& rng) {
  cli::HostArray a;
  a.dtype = static_cast<pjrt_client::DType>(shape.element_type());
  a.dims.assign(shape.dimensions().begin(), shape.dimensions().end());
  a.data.assign(static_cast<size_t>(shape.ByteSize()), 0);
  if (hlo::IsPackedType(shape.element_type())) {
    // Several per byte: any bits are valid values (or codes).
    for (uint8_t& b : a.data) b = static_cast<uint8_t>(rng());
    return a;
  }
  const int64_t n = shape.ElementCount();
  std::normal_distribution<float> normal(0, 1);
  const int width = hlo::ByteWidth(shape.element_type());
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* at = a.data.data() + i * width;
    switch (shape.element_type()) {
      case hlo::PrimitiveType::kF32: {
        const float v = normal(rng);
        std::memcpy(at, &v, 4);
        break;
      }
      case hlo::PrimitiveType::kF64: {
        const double v = normal(rng);
        std::memcpy(at, &v, 8);
        break;
      }
      case hlo::PrimitiveType::kBf16: {
        const uint16_t v = cli::FloatToBfloat16(normal(rng));
        std::memcpy(at, &v, 2);
        break;
      }
      case hlo::PrimitiveType::kF16: {
        const uint16_t v = hlo::FloatToHalf(normal(rng));
        std::memcpy(at, &v, 2);
        break;
      }
      case hlo::PrimitiveType::kPred:
        *at = rng() & 1;
        break;
      default: {
        const uint64_t v = rng() % 8;
        std::memcpy(at, &v, std::min(width, 8));
      }
    }
  }
  return a;
}

double ElementAsDouble(hlo::PrimitiveType t, const uint8_t* at) {
  switch (t) {
    case hlo::PrimitiveType::kF32: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case hlo::PrimitiveType::kF64: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case hlo::PrimitiveType::kBf16: {
      uint16_t v;
      std::memcpy(&v, at, 2);
      return cli::Bfloat16ToFloat(v);
    }
    case hlo::PrimitiveType::kF16: {
      uint16_t v;
      std::memcpy(&v, at, 2);
      return hlo::HalfToFloat(v);
    }
    default:
      return 0;
  }
}

// The relative tolerance outputs of `type` are compared with: a few units
// in the last place of the type, times the error a long sum or a math
// library function adds.
double Tolerance(hlo::PrimitiveType t) {
  switch (t) {
    case hlo::PrimitiveType::kF16:
    case hlo::PrimitiveType::kBf16:
      return 2e-2;
    case hlo::PrimitiveType::kF32:
      return 1e-4;
    case hlo::PrimitiveType::kF64:
      return 1e-10;
    default:
      return 0;
  }
}

// The seed of the devices' execution seeds in `run`.
constexpr uint64_t kExecutionSeed = 0x5eed;

struct Outputs {
  std::vector<hlo::Shape> shapes;
  std::vector<std::vector<uint8_t>> data;
};

absl::StatusOr<Outputs> RunOn(const std::string& platform,
                              const std::string& text,
                              const std::vector<cli::HostArray>& inputs) {
  runtime::ClientOptions options;
  options.platform = platform;
  // The same execution seeds on every platform, so that programs using
  // rng compare.
  options.prng_seed = kExecutionSeed;
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Client> client,
                        runtime::Client::Create(options));
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Executable> executable,
                        runtime::Executable::Compile(client.get(), text));
  runtime::Device* device = client->devices()[0];
  std::vector<std::shared_ptr<runtime::Buffer>> arguments;
  std::vector<runtime::Buffer*> pointers;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const hlo::Shape& shape = executable->parameter_shapes()[i];
    PJRT_ASSIGN_OR_RETURN(
        std::shared_ptr<runtime::Buffer> buffer,
        client->BufferFromHostBuffer(inputs[i].data.data(), shape, device));
    pointers.push_back(buffer.get());
    arguments.push_back(std::move(buffer));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<runtime::Buffer>> results,
                        executable->Execute(pointers, device));
  Outputs out;
  for (const auto& result : results) {
    out.shapes.push_back(result->shape());
    out.data.emplace_back(static_cast<size_t>(result->shape().ByteSize()));
    PJRT_RETURN_IF_ERROR(result->CopyRawToHost(out.data.back().data(), 0,
                                               result->shape().ByteSize()));
  }
  return out;
}

int Run(const RunOptions& o) {
  auto text = ReadFile(o.file);
  if (!text.ok()) return Fail(text.status());
  auto module = LoadModule(o.file);
  if (!module.ok()) return Fail(module.status());
  const hlo::Computation& entry = *(*module)->entry();
  std::vector<hlo::Shape> parameters;
  for (const hlo::Instruction* p : entry.parameters()) {
    if (!p->shape().IsArray()) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "parameter %d of %s is the tuple %s; pjrt-hlo run takes array "
          "parameters only",
          parameters.size(), (*module)->name(), p->shape().ToString())));
    }
    parameters.push_back(p->shape());
  }
  std::vector<cli::HostArray> inputs;
  if (!o.inputs.empty() && o.inputs.size() != parameters.size()) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "%s takes %d parameter(s); got %d --input file(s) (give one per "
        "parameter, or "
        "none for random inputs)",
        (*module)->name(), parameters.size(), o.inputs.size())));
  }
  if (o.inputs.empty()) {
    // Random inputs are made here, in host memory, all at once.
    double bytes = 0;
    for (const hlo::Shape& p : parameters) {
      bytes += static_cast<double>(p.ByteSize());
    }
    const double host = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(sysconf(_SC_PAGESIZE));
    if (host > 0 && bytes > host / 2) {
      return Fail(absl::ResourceExhaustedError(absl::StrFormat(
          "the random inputs of %s would take %s of host memory, more than "
          "half of this host's %s; give --input files for a run of it",
          (*module)->name(),
          FormatByteSize(static_cast<int64_t>(
              std::min(bytes, static_cast<double>(INT64_MAX)))),
          FormatByteSize(static_cast<int64_t>(host)))));
    }
  }
  std::mt19937_64 rng(o.seed);
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (o.inputs.empty()) {
      inputs.push_back(RandomArray(parameters[i], rng));
      continue;
    }
    auto array = cli::ReadNpy(o.inputs[i]);
    if (!array.ok()) return Fail(array.status());
    auto converted = cli::ConvertToDType(
        *std::move(array),
        static_cast<pjrt_client::DType>(parameters[i].element_type()));
    if (!converted.ok() ||
        !std::equal(converted->dims.begin(), converted->dims.end(),
                    parameters[i].dimensions().begin(),
                    parameters[i].dimensions().end())) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "input %d (%s) does not fit parameter %d, %s%s", i, o.inputs[i], i,
          parameters[i].ToString(),
          converted.ok() ? ""
                         : absl::StrCat(": ", converted.status().message()))));
    }
    inputs.push_back(*std::move(converted));
  }
  auto outputs = RunOn(o.platform, *text, inputs);
  if (!outputs.ok()) return Fail(outputs.status());
  for (size_t r = 0; r < outputs->shapes.size(); ++r) {
    std::cout << absl::StrFormat("result %d: %s on %s\n", r,
                                 outputs->shapes[r].ToString(), o.platform);
  }
  if (!o.output_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(o.output_dir, error);
    for (size_t r = 0; r < outputs->shapes.size(); ++r) {
      cli::HostArray array;
      array.dtype =
          static_cast<pjrt_client::DType>(outputs->shapes[r].element_type());
      array.dims.assign(outputs->shapes[r].dimensions().begin(),
                        outputs->shapes[r].dimensions().end());
      array.data = outputs->data[r];
      const std::string path =
          absl::StrFormat("%s/result_%d.npy", o.output_dir, r);
      if (absl::Status s = cli::WriteNpy(path, array); !s.ok()) return Fail(s);
      std::cout << "wrote " << path << "\n";
    }
  }
  if (o.compare_with.empty()) return kExitOk;
  auto reference = RunOn(o.compare_with, *text, inputs);
  if (!reference.ok()) return Fail(reference.status());
  int mismatched = 0;
  for (size_t r = 0; r < outputs->shapes.size(); ++r) {
    const hlo::Shape& shape = outputs->shapes[r];
    const hlo::PrimitiveType t = shape.element_type();
    const int64_t n = shape.ElementCount();
    const int width = hlo::ByteWidth(t);
    const bool floating = Tolerance(t) > 0;
    int64_t bad = 0, first = -1;
    double worst = 0;
    // Packed types hold fewer bytes than elements: compared whole below.
    const bool packed = hlo::IsPackedType(t);
    for (int64_t i = 0; i < n && width > 0 && !packed; ++i) {
      const uint8_t* a = outputs->data[r].data() + i * width;
      const uint8_t* b = reference->data[r].data() + i * width;
      bool same;
      if (floating) {
        const double x = ElementAsDouble(t, a), y = ElementAsDouble(t, b);
        const double diff = std::abs(x - y);
        same = (std::isnan(x) && std::isnan(y)) || x == y ||
               diff <= Tolerance(t) * (std::max(std::abs(x), std::abs(y)) + 1);
        if (!std::isnan(diff)) worst = std::max(worst, diff);
      } else {
        same = std::memcmp(a, b, width) == 0;
      }
      if (!same && bad++ == 0) first = i;
    }
    if (hlo::IsComplex(t) || packed) {
      bad =
          outputs->data[r] == reference->data[r] ? 0 : 1;  // compared as bytes
    }
    std::cout << absl::StrFormat(
        "result %d: %s %s %s (%d of %d elements differ%s)\n", r,
        shape.ToString(), bad == 0 ? "matches" : "DIFFERS from", o.compare_with,
        bad, n,
        floating ? absl::StrFormat(", largest difference %g", worst) : "");
    if (bad > 0) {
      ++mismatched;
      std::cout << absl::StrFormat("  first difference at element %d\n", first);
    }
  }
  return mismatched == 0 ? kExitOk : kExitMismatch;
}

}  // namespace
}  // namespace pjrt

int main(int argc, char** argv) {
  CLI::App app{"pjrt-hlo: compile and run HLO programs as pjrtd does, offline"};
  app.require_subcommand(1);
  std::string path, platform = "host", arch = "sm_90", dump;
  CLI::App* compile =
      app.add_subcommand("compile", "Lower a program and show what it becomes");
  compile->add_option("file", path, "HLO text or StableHLO file")->required();
  compile->add_option("--platform", platform, "host or cuda")
      ->check(CLI::IsMember({"host", "cuda"}));
  compile->add_option("--cuda-arch", arch,
                      "GPU architecture for cuda (default sm_90)");
  compile->add_option("--dump", dump,
                      "Write the generated source and binaries here");
  pjrt::RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run",
      "Run a program in this process, and compare it with another platform");
  run->add_option("file", run_options.file, "HLO text or StableHLO file")
      ->required();
  run->add_option("--platform", run_options.platform, "host or cuda")
      ->check(CLI::IsMember({"host", "cuda"}));
  run->add_option(
      "--input", run_options.inputs,
      "One .npy file per parameter, in order (default: random inputs)");
  run->add_option("--output-dir", run_options.output_dir,
                  "Write result_<i>.npy for every result here");
  run->add_option("--compare-with", run_options.compare_with,
                  "Run on this platform too and compare every output element")
      ->check(CLI::IsMember({"host", "cuda"}));
  run->add_option("--seed", run_options.seed,
                  "Seed of the random inputs (default 1)");
  std::string convert_path;
  CLI::App* convert = app.add_subcommand(
      "convert", "Print the HLO text a StableHLO program (.mlir) becomes");
  convert->add_option("file", convert_path, "StableHLO (MLIR text) file")
      ->required();
  app.set_version_flag("--version",
                       std::string("pjrt-hlo ") + pjrt::kBuildVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end well; every other parse error is a usage
    // error (CLI11's own codes, 100 and up, are not ours).
    const int code = app.exit(e);
    return code == 0 ? pjrt::kExitOk : pjrt::kExitUsage;
  }
  if (convert->parsed()) return pjrt::Convert(convert_path);
  if (compile->parsed()) return pjrt::Compile(path, platform, arch, dump);
  if (run->parsed()) return pjrt::Run(run_options);
  return pjrt::kExitUsage;
}
