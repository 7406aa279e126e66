#include "compiler/cuda/nvrtc.h"

#include <nvrtc.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pjrt::compiler::cuda {

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return absl::StrFormat("%d.%d", major, minor);
}

bool NvrtcAvailable() {
  int major = 0, minor = 0;
  return nvrtcVersion(&major, &minor) == NVRTC_SUCCESS;
}

std::vector<std::string> NvrtcArchitectures() {
  int count = 0;
  std::vector<std::string> names;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0)
    return names;
  std::vector<int> archs(count);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return names;
  for (int a : archs) names.push_back(absl::StrCat("sm_", a));
  return names;
}

std::vector<KernelResources> ParsePtxasReport(absl::string_view log) {
  std::vector<KernelResources> kernels;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t entry = line.find("Compiling entry function '");
    if (entry != absl::string_view::npos) {
      absl::string_view rest = line.substr(entry + 26);
      kernels.push_back({.name = std::string(rest.substr(0, rest.find('\'')))});
      continue;
    }
    if (kernels.empty()) continue;
    KernelResources& k = kernels.back();
    // "ptxas info    : Used 12 registers, used 0 barriers, 384 bytes smem, ..."
    const auto number_before = [&](absl::string_view what) -> int {
      const size_t at = line.find(what);
      if (at == absl::string_view::npos) return -1;
      size_t begin = at;
      while (begin > 0 && line[begin - 1] == ' ') --begin;
      size_t end = begin;
      while (begin > 0 &&
             absl::ascii_isdigit(static_cast<unsigned char>(line[begin - 1])))
        --begin;
      int value = 0;
      return absl::SimpleAtoi(line.substr(begin, end - begin), &value) ? value
                                                                       : -1;
    };
    if (int r = number_before(" registers"); r >= 0) k.registers = r;
    if (int s = number_before(" bytes smem"); s >= 0) k.shared_bytes = s;
    if (int s = number_before(" bytes spill stores"); s >= 0) k.spill_bytes = s;
  }
  return kernels;
}

absl::StatusOr<CompiledCubin> CompileWithNvrtc(absl::string_view source,
                                               const std::string& arch) {
  const std::vector<std::string> known = NvrtcArchitectures();
  if (std::find(known.begin(), known.end(), arch) == known.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NVRTC %s cannot compile for %s; it knows %s",
                        NvrtcVersion(), arch, absl::StrJoin(known, ", ")));
  }
  nvrtcProgram program = nullptr;
  const std::string text(source);
  nvrtcResult result = nvrtcCreateProgram(
      &program, text.c_str(), "pjrt_kernels.cu", 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvrtcCreateProgram failed: ",
                                            nvrtcGetErrorString(result)));
  }
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&program};
  const std::string arch_option = absl::StrCat("--gpu-architecture=", arch);
  const char* options[] = {arch_option.c_str(), "--std=c++17",
                           "--ptxas-options=-v",
                           "--device-as-default-execution-space"};
  result = nvrtcCompileProgram(program, 4, options);
  size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS &&
      log_size > 1) {
    log.resize(log_size);
    nvrtcGetProgramLog(program, log.data());
    log.resize(log_size - 1);
  }
  if (result != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrFormat(
        "NVRTC %s could not compile the generated kernels for %s: %s\n%s",
        NvrtcVersion(), arch, nvrtcGetErrorString(result), log));
  }
  size_t size = 0;
  result = nvrtcGetCUBINSize(program, &size);
  CompiledCubin out;
  out.cubin.resize(size);
  if (result == NVRTC_SUCCESS)
    result = nvrtcGetCUBIN(program, out.cubin.data());
  if (result != NVRTC_SUCCESS || size == 0) {
    return absl::InternalError(
        absl::StrCat("nvrtcGetCUBIN failed: ", nvrtcGetErrorString(result)));
  }
  out.resources = ParsePtxasReport(log);
  return out;
}

}  // namespace pjrt::compiler::cuda
