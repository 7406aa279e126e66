// NVRTC: CUDA C++ source to a cubin for one GPU architecture, in process,
// with no GPU needed.
#ifndef PJRT_COMPILER_CUDA_NVRTC_H_
#define PJRT_COMPILER_CUDA_NVRTC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pjrt::compiler::cuda {

// What ptxas reported for one kernel.
struct KernelResources {
  std::string name;
  int registers = 0;
  int shared_bytes = 0;
  int spill_bytes = 0;
};

struct CompiledCubin {
  std::string cubin;
  // Per kernel, when ptxas reported them (a cubin from the persistent
  // cache has none).
  std::vector<KernelResources> resources;
};

// "13.0".
std::string NvrtcVersion();

// True when this build can run NVRTC.
bool NvrtcAvailable();

// Architectures NVRTC can target ("sm_75", ..., "sm_90"...).
std::vector<std::string> NvrtcArchitectures();

// Compiles `source` for `arch` ("sm_90"). INVALID_ARGUMENT for an
// architecture NVRTC does not know (naming the ones it does); INTERNAL
// with NVRTC's log for source it refuses (a code generator bug).
absl::StatusOr<CompiledCubin> CompileWithNvrtc(absl::string_view source,
                                               const std::string& arch);

// Parses ptxas's -v report ("Compiling entry function 'k' ...",
// "Used 10 registers, 0 bytes smem ...").
std::vector<KernelResources> ParsePtxasReport(absl::string_view log);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_NVRTC_H_
