#include "compiler/backend.h"

#include "absl/strings/str_format.h"
#include "compiler/host/compiler.h"
#ifdef PJRT_HAVE_CUDA
#include "compiler/cuda/backend.h"
#endif

namespace pjrt::compiler {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    device::Platform* platform, const BackendConfig& config) {
  if (platform->name() == "host") return host::CreateHostBackend(*platform);
#ifdef PJRT_HAVE_CUDA
  if (platform->name() == "cuda")
    return cuda::CreateCudaBackend(*platform, config.compile_cache_dir);
#endif
  return absl::UnimplementedError(
      absl::StrFormat("this build of pjrtd has no compiler for the %s platform",
                      platform->name()));
}

}  // namespace pjrt::compiler
