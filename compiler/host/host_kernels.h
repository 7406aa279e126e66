// The host compiler's hot kernels, built once per x86-64 instruction-set
// level and chosen at run time for the CPU the daemon runs on.
//
// A portable build (the default) compiles the compiler for x86-64-v2 (SSE4.2:
// every x86-64 CPU of the last decade) and builds the element-wise kernels
// (expression.h) and the matrix products (Eigen's GEMM) twice more, for
// x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), each as a module of its own
// (libpjrt_host_x86-64-v3.so, ...) installed beside the daemon. The first
// call to HostKernels() loads the best module the CPU can run; without one,
// the built-in x86-64-v2 kernels run.
//
// Modules and not extra objects in the binary: code built for two levels
// shares every inline function and template it uses (Eigen's, the standard
// library's), and the linker keeps one copy of each, from either level. A
// module binds its own copies (hidden symbols), so AVX-512 code is never
// reached on a CPU without it.
//
// A build with PJRT_NATIVE_ARCH compiles everything for the build machine
// (-march=native) and has no modules; nor has a sanitizer build.
#ifndef PJRT_COMPILER_HOST_HOST_KERNELS_H_
#define PJRT_COMPILER_HOST_HOST_KERNELS_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

class Expression;
class BlockScratch;

// C = op(A) op(B) over column-major matrices, on the calling thread: op(A) is
// m x k (A is stored k x m when a_transposed), op(B) k x n, C m x n, each
// with its leading dimension (the distance between columns). k == 0 zeroes C.
// Types: f32, f64, c64, c128 and s64.
struct GemmArgs {
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  bool a_transposed = false;
  const void* b = nullptr;
  int64_t ldb = 0;
  bool b_transposed = false;
  void* c = nullptr;
  int64_t ldc = 0;
};

// One level's kernels. A module hands out its table from the C function
// kHostKernelsSymbol; `abi` and the sizes guard against a module from
// another build.
struct HostKernelTable {
  uint32_t abi;
  uint32_t table_size;
  uint32_t expression_size;
  uint32_t scratch_size;
  const char* isa;  // "x86-64-v4", "x86-64-v2", "native"
  void (*evaluate_block)(const Expression& expr,
                         absl::Span<const void* const> inputs, int64_t n,
                         absl::Span<const void*> outputs,
                         BlockScratch& scratch);
  void (*storage_to_compute)(hlo::PrimitiveType type, const void* src,
                             void* dst, int64_t n);
  void (*compute_to_storage)(hlo::PrimitiveType type, const void* src,
                             void* dst, int64_t n);
  void (*gemm)(const GemmArgs& args);
};

inline constexpr uint32_t kHostKernelAbi = 1;
inline constexpr char kHostKernelsSymbol[] = "pjrt_host_kernels";

// The x86-64 levels there are kernels for.
enum class HostIsa { kV2 = 2, kV3 = 3, kV4 = 4 };
// "x86-64-v2"...
const char* HostIsaName(HostIsa isa);
// The highest level this CPU (and its operating system) supports.
HostIsa CpuHostIsa();

// The kernels every call runs, chosen once: the module of the highest level
// the CPU has, or of a lower one when the environment asks for it
// (PJRT_HOST_ISA=x86-64-v2 or -v3, to compare levels; a level the CPU lacks
// is never taken). PJRT_HOST_MODULE_DIR names the modules' folder when it is
// not beside the executable (../lib/pjrtd from its folder).
const HostKernelTable& HostKernels();

// What HostKernels() chose and why, for the host backend's description
// (`pjrtctl info`, the daemon's log): "x86-64-v4 (module
// .../libpjrt_host_x86-64-v4.so)", with the reason a module was passed
// over. Choosing logs a warning when the kernels run below the level
// wanted (a module is missing or does not load).
std::string HostKernelsDescription();

// The built-in kernels (x86-64-v2, or native).
const HostKernelTable& BuiltinHostKernels();

// Loads the module of `isa` (v3 or v4) from where HostKernels() looks, for
// tests and benchmarks to compare levels; nullptr with the reason in *why
// when it is not there, does not load, is from another build, or this build
// has no modules. Never run a level's kernels on a CPU without it.
const HostKernelTable* LoadHostKernelModule(HostIsa isa, std::string* why);

// Whether this build has modules (not under PJRT_NATIVE_ARCH, nor in a
// sanitizer build, which runs the built-in kernels alone).
bool HostKernelModulesBuilt();

// Runs args through HostKernels().gemm.
inline void Gemm(const GemmArgs& args) { HostKernels().gemm(args); }

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_HOST_KERNELS_H_
