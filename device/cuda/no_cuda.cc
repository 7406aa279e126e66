// Stands in for the CUDA platform in builds without the CUDA Toolkit.
#include "device/platform.h"

namespace pjrt::device {

bool CudaPlatformBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Platform>> CreateCudaPlatform() {
  return absl::FailedPreconditionError(
      "this pjrtd was built without the CUDA Toolkit, so it has no cuda "
      "platform; rebuild on a machine with /usr/local/cuda, or use --platform "
      "host");
}

}  // namespace pjrt::device
