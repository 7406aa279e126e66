// Backend: compiles verified HLO modules into Programs for one platform's
// devices. The runtime holds one per client (its platform's) and runs the
// Programs it makes without knowing which backend made them.
//
// HLO-level rewrites that every backend needs (hlo/passes.h) run before a
// module reaches a backend.
//
// Thread-safe: Compile may be called concurrently.
#ifndef PJRT_COMPILER_BACKEND_H_
#define PJRT_COMPILER_BACKEND_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/program.h"
#include "device/platform.h"
#include "hlo/ir.h"
#include "hlo/passes.h"

namespace pjrt::compiler {

struct BackendOptions {
  // (result index, parameter index) pairs, in the program's flattened
  // numbering (tuple parameters and results flattened in order): the runtime
  // may pass the same memory for both (a donated input reused for an
  // output). The program stays correct either way.
  std::vector<std::pair<int, int>> aliases;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The platform it compiles for: "host", "cuda".
  virtual const std::string& platform() const = 0;

  // What else than the program and its options decides what Compile makes:
  // the platform, the device kind, the code generator's target and version.
  // The compile cache keys on it.
  virtual std::string fingerprint() const = 0;

  // One line for `pjrtctl info`: the backend and its libraries.
  virtual std::string Describe() const = 0;

  // The instruction set its programs run as: the host kernels' x86-64
  // level ("x86-64-v4", compiler/host/host_kernels.h), the GPU's
  // architecture ("sm_90").
  virtual std::string target() const = 0;

  // What hlo::SimplifyModule leaves for this backend to compile itself.
  virtual hlo::SimplifyOptions simplify_options() const { return {}; }

  // REQUIRES: `module` passed hlo::VerifyModule and hlo::SimplifyModule
  // with simplify_options(). Tuple parameters are flattened: the program
  // takes one argument per array leaf. UNIMPLEMENTED naming the op and its
  // line for what the backend cannot compile yet.
  virtual absl::StatusOr<std::unique_ptr<Program>> Compile(
      const hlo::Module& module, const BackendOptions& options) const = 0;
};

struct BackendConfig {
  // Where compiled kernels are kept across restarts (disk_cache.h); empty:
  // nowhere.
  std::string compile_cache_dir;
};

// The backend of `platform`'s devices. `platform` must outlive it.
// UNIMPLEMENTED when this build has no backend for the platform.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    device::Platform* platform, const BackendConfig& config = {});

}  // namespace pjrt::compiler

#endif  // PJRT_COMPILER_BACKEND_H_
