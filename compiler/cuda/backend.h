// The CUDA backend: programs for NVIDIA GPUs.
//
// A module is lowered by the host compiler's lowering (the same fusion and
// buffer decisions), then every step becomes a generated CUDA kernel or a
// library call (codegen.h); NVRTC compiles the kernels for the device's
// compute capability into one cubin (nvrtc.h), kept in the persistent
// compile cache (disk_cache.h) so that a restarted daemon loads a known
// program without NVRTC. A CudaProgram loads the cubin on first run and
// enqueues its launches on the run's stream.
#ifndef PJRT_COMPILER_CUDA_BACKEND_H_
#define PJRT_COMPILER_CUDA_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/backend.h"
#include "compiler/cuda/codegen.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/disk_cache.h"
#include "compiler/host/host_program.h"
#include "hlo/ir.h"

namespace pjrt::compiler::cuda {

// A program compiled for one GPU architecture: what `pjrt-hlo compile`
// shows, and what a CudaProgram runs.
struct CudaCompilation {
  std::string arch;
  std::unique_ptr<host::HostProgram> lowered;
  GeneratedProgram generated;
  CompiledCubin cubin;
  // The cubin came from the persistent cache (NVRTC did not run).
  bool from_cache = false;
};

// Lowers and generates `module` and compiles its kernels for `arch`
// ("sm_90") through `cache` (may be disabled). Needs no GPU.
// REQUIRES: `module` passed hlo::VerifyModule and hlo::SimplifyModule.
absl::StatusOr<CudaCompilation> CompileForCuda(const hlo::Module& module,
                                               const BackendOptions& options,
                                               const std::string& arch,
                                               const DiskCache& cache);

// "kernel pj_loop_3 (loop over f32[8] (exp) for %e (line 4))": the kernel
// of `generated` whose source holds the first line that NVRTC's `log`
// complains about ("pjrt_kernels.cu(123): error ..."), for the error a
// refused compile returns; empty when it cannot tell.
std::string KernelAtErrorLine(const GeneratedProgram& generated,
                              absl::string_view log);

// Wraps a compilation as a Program that runs on any GPU of its
// architecture.
std::unique_ptr<Program> MakeCudaProgram(CudaCompilation compilation);

// The CUDA platform's Backend, for the compute capability of `platform`'s
// first GPU, caching cubins in `cache_dir` (empty: no persistent cache).
std::unique_ptr<Backend> CreateCudaBackend(const device::Platform& platform,
                                           const std::string& cache_dir);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_BACKEND_H_
