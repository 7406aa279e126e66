// The host compiler: lowers a verified HLO module to a HostProgram.
//
// Calls are inlined; tuples and get-tuple-element disappear at compile time;
// copies, opt-barriers and sharding custom-calls alias their operand;
// reshapes are views. Element-wise ops, broadcasts, transposes, slices,
// reverses and iotas fuse into loops whose inputs are read through affine
// maps; a value is materialized only when it is a result, has several
// users that compute with it, or feeds an op that needs a buffer (reshape,
// pad, concatenate, dynamic slices). Dots and reductions read their operands
// in place when the layout allows, or through one fused preparation loop
// that also converts types. Every other op (while, conditional, gather,
// scatter, sort, windows, convolution, random numbers...) is a kernel
// (kernel.h); loop bodies and branches compile as programs of their own.
// Scratch buffers are reused by liveness.
#ifndef PJRT_COMPILER_HOST_COMPILER_H_
#define PJRT_COMPILER_HOST_COMPILER_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/backend.h"
#include "compiler/host/host_program.h"
#include "hlo/ir.h"

namespace pjrt::compiler::host {

struct HostCompileOptions {
  // (result index, parameter index) pairs, in the program's flattened
  // numbering (tuple parameters and results flattened in order): the
  // runtime may pass the same memory for both (a donated input reused for an
  // output). The program stays correct either way.
  std::vector<std::pair<int, int>> aliases;
  // Dots of bf16 (or f16) operands keep them in their own type and
  // accumulate in f32 (DotStep::operand_type), instead of converting them
  // to f32 first: for backends whose matmul library takes them (CUDA).
  bool half_dot_operands = false;
  // Dots of f8e4m3fn/f8e5m2 operands (not both f8e5m2) whose m, n and k are
  // multiples of 16 keep them as they are too, both stored with the
  // contracting dimension innermost (the lhs [batch, m, k], the rhs
  // [batch, n, k] with rhs_transposed): the layout cuBLASLt's fp8 matmuls
  // take on the GPUs that have them (compute capability 8.9 and up).
  bool fp8_dot_operands = false;
  // Every scratch slot's offset and size are multiples of this power of
  // two (64, or 256 where libraries assume their operands so aligned, as
  // cuBLASLt's default algorithms do); the scratch itself must be so
  // aligned for slots to be.
  int64_t scratch_alignment = 64;
};

// What hlo::SimplifyModule leaves to the host compiler: the ragged-dots
// that are a product per group (kernel_ragged_dot.cc).
hlo::SimplifyOptions HostSimplifyOptions();

// REQUIRES: `module` passed hlo::VerifyModule. Tuple parameters are
// flattened: the program takes one argument per array leaf. Errors are
// UNIMPLEMENTED for what the host compiler cannot do yet.
absl::StatusOr<std::unique_ptr<HostProgram>> CompileForHost(
    const hlo::Module& module, const HostCompileOptions& options = {});

// The host platform's Backend: CompileForHost. `platform` must outlive it.
std::unique_ptr<Backend> CreateHostBackend(const device::Platform& platform);

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_COMPILER_H_
