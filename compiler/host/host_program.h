// HostProgram: a compiled HLO module for the host platform: a table of
// buffer slots (parameters, results, constants, scratch, views) and a list
// of steps run in order, each parallel inside. Built by host/compiler.h.
//
// Steps:
//  - LoopStep: a fused element-wise Expression over an output array, whose
//    inputs are buffers read through affine maps (broadcast, transpose,
//    slice and reverse fold into the maps), iotas and splats;
//  - DotStep: batched matrix products through Eigen's tensor contraction;
//  - ReduceStep: add/mul/max/min/and/or reductions over [outer, reduced,
//    inner] layouts; GenericReduceStep: any (variadic) reducer region,
//    evaluated as an Expression over blocks of output positions;
//  - CopyStep, FillStep, DynamicSliceStep: data movement;
//  - CollectiveStep: a collective with the launch's other participants;
//  - KernelStep: any other op (control flow, gather, sort...; kernel.h).
//
// Thread-safe: Run keeps all per-run state on its stack.
#ifndef PJRT_COMPILER_HOST_HOST_PROGRAM_H_
#define PJRT_COMPILER_HOST_HOST_PROGRAM_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "compiler/collectives.h"
#include "compiler/host/expression.h"
#include "compiler/host/kernel.h"
#include "compiler/program.h"
#include "hlo/shape.h"

namespace pjrt::compiler::host {

struct BufferSlot {
  enum class Kind {
    kParameter,  // index: parameter number
    kResult,     // index: result number
    kScratch,    // offset into the run's scratch memory
    kConstant,   // index: into the program's constants
    kView,       // index: the slot whose memory this one shares
    kReplicaId,  // the run's replica id, as u32[]
    kPartitionId,
  };
  Kind kind = Kind::kScratch;
  int64_t index = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
  hlo::Shape shape;
};

// An element of an array at multi-index idx (over some iteration space) is
// at element offset `offset + sum(idx[d] * strides[d])`.
struct AffineMap {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

struct LoopInput {
  enum class Kind { kBuffer, kIota };
  Kind kind = Kind::kBuffer;
  int slot = -1;
  // Element type of the buffer (storage), or of the iota values.
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  // Over the loop's output index space. For an iota, the map's value is the
  // element's value.
  AffineMap map;
  // The map is the identity over a contiguous row-major buffer.
  bool contiguous = false;
};

struct LoopStep {
  std::vector<int64_t> dims;
  Expression expr;  // one output
  std::vector<LoopInput> inputs;
  int output_slot = -1;
  hlo::PrimitiveType output_type = hlo::PrimitiveType::kF32;
};

// out[b] (m x n) = op(lhs[b]) * op(rhs[b]), row-major; op is a transpose
// when flagged (lhs stored k x m, rhs stored n x k). Operands and result are
// in `type` (f32, f64 or s64).
struct DotStep {
  int lhs = -1, rhs = -1, out = -1;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  // The operands' element type: `type`, or bf16/f16 (or f8e4m3fn/f8e5m2)
  // with f32 accumulation when HostCompileOptions::half_dot_operands (or
  // fp8_dot_operands) allows (the CUDA backend's matmuls; the host's DotStep
  // runs `type` only).
  hlo::PrimitiveType operand_type = hlo::PrimitiveType::kF32;
  // The rhs's type where it differs from the lhs's (an f8e4m3fn by f8e5m2
  // product); kInvalid when both are `operand_type`.
  hlo::PrimitiveType rhs_operand_type = hlo::PrimitiveType::kInvalid;
  hlo::PrimitiveType rhs_type() const {
    return rhs_operand_type == hlo::PrimitiveType::kInvalid ? operand_type
                                                            : rhs_operand_type;
  }
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool lhs_transposed = false, rhs_transposed = false;
};

// One matrix product C = op(A) op(B) of row-major matrices with leading
// dimensions of their own (sub-matrices of larger arrays): C is m x n
// (rows ldc elements apart), A is stored m x k or, transposed, k x m (rows
// lda apart), B k x n or, transposed, n x k (ldb). f32, f64, c64 or c128.
struct MatrixProduct {
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

// Computes `p` as the program's dots do (f32 through oneDNN where it is
// built in and the product is wide enough, else the host kernels' GEMM),
// on the calling thread, or on an OpenMP team of oneDNN's when
// `total_flops` (of the products the caller runs one after another) is
// large. k = 0 gives zeros.
void RunMatrixProduct(const MatrixProduct& p, double total_flops,
                      const Cancellation* cancellation);

// out[o, i] = init op in[o, 0, i] op in[o, 1, i] ... op in[o, R-1, i].
struct ReduceStep {
  int input = -1, init = -1, out = -1;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  ExprOp op = ExprOp::kAdd;
  int64_t outer = 1, reduced = 1, inner = 1;
};

// Variadic reduction with any reducer: `region` takes the N accumulators
// then the N input values (inputs 0..2N-1) and produces N outputs.
struct GenericReduceStep {
  std::vector<int> inputs, inits, outs;
  const std::vector<int>& outputs_or_outs() const { return outs; }
  std::vector<hlo::PrimitiveType> types;
  Expression region;
  int64_t outer = 1, reduced = 1, inner = 1;
};

// dst[dst_map(idx)] = src[src_map(idx)] for every idx over dims; elements
// of `element_bytes` bytes. Does nothing when source and destination are
// the same memory with the same maps (a donated buffer already holding the
// result).
struct CopyStep {
  int src = -1, dst = -1;
  int element_bytes = 4;
  std::vector<int64_t> dims;
  AffineMap src_map, dst_map;
};

// Every element of dst = the scalar in slot `value`.
struct FillStep {
  int dst = -1, value = -1;
  int element_bytes = 4;
  int64_t count = 0;
};

// dynamic-slice (update == false): dst = src[start : start + sizes];
// dynamic-update-slice (update == true): dst[start : start + sizes] = src,
// dst already holding the operand. Starts are read from integer scalar slots
// and clamped so the window stays in bounds.
struct DynamicSliceStep {
  bool update = false;
  int src = -1, dst = -1;
  int element_bytes = 4;
  // The dimensions of the array the window moves in, and the window's.
  std::vector<int64_t> array_dims;
  std::vector<int64_t> sizes;
  std::vector<int> start_slots;
  std::vector<hlo::PrimitiveType> start_types;
};

// A collective with the other participants of the launch (see
// collectives.h). Operands and results are arrays; a variadic all-reduce has
// several of each.
struct CollectiveStep : CollectiveOp {
  std::vector<int> inputs, outputs;
  const std::vector<int>& outputs_or_outs() const { return outputs; }
  std::vector<hlo::PrimitiveType> types;
  // Element count of each operand (a variadic all-reduce's operand i and
  // result i have the shape of operand i).
  std::vector<int64_t> operand_elements;
  ExprOp op = ExprOp::kAdd;
};

using Step =
    std::variant<LoopStep, DotStep, ReduceStep, GenericReduceStep, CopyStep,
                 FillStep, DynamicSliceStep, CollectiveStep, KernelStep>;

class HostProgram : public Program {
 public:
  absl::Status Run(const RunContext& context) const override;
  int64_t scratch_bytes() const override { return scratch_bytes_; }
  int64_t host_memory_bytes() const override;
  const std::vector<hlo::Shape>& parameter_shapes() const override {
    return parameter_shapes_;
  }
  const std::vector<hlo::Shape>& result_shapes() const override {
    return result_shapes_;
  }
  std::vector<const CollectiveOp*> collectives() const override;

  // Built by the compiler.
  std::vector<BufferSlot> slots;
  std::vector<Step> steps;
  // Per step, the HLO instruction it comes from ("%add.3 (line 12)"), for
  // messages and listings; may be empty.
  std::vector<std::string> step_origins;
  // Constant data, 64-byte aligned through uint64_t storage.
  std::vector<std::vector<uint64_t>> constants;
  int64_t scratch_bytes_ = 0;
  std::vector<hlo::Shape> parameter_shapes_;
  std::vector<hlo::Shape> result_shapes_;
  // Per result: the parameter it is, unchanged (-1 if computed). A loop
  // keeps such state in place instead of copying it every iteration.
  std::vector<int> result_parameters;
  // Parameters and results of s4 and u4 are packed two per byte in their
  // buffers (the entry program); otherwise one per byte (a loop body or a
  // branch, run on the enclosing program's buffers).
  bool packed_edges = true;

  // A readable listing of slots and steps, for debugging and tests.
  std::string ToString() const;

  // OK if every step reads and writes only inside its slots: each affine
  // map's extreme offsets, each window and each dense range lies within the
  // slot's bytes, and scratch slots lie within scratch_bytes(). INTERNAL
  // naming the step and slot otherwise (a compiler bug, refused at compile
  // time rather than run).
  absl::Status CheckBounds() const;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_HOST_PROGRAM_H_
