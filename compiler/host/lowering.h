// The host compiler's lowering, shared by its files (internal to
// compiler/host): compiler.cc lowers HLO to nodes, decides what is fused and
// emits loops; lower_ops.cc emits dots, reductions, data movement and
// collectives; lower_memory.cc places results and scratch; region.cc turns
// scalar computations into expressions.
#ifndef PJRT_COMPILER_HOST_LOWERING_H_
#define PJRT_COMPILER_HOST_LOWERING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/host/compiler.h"
#include "compiler/host/host_program.h"
#include "compiler/host/kernel.h"
#include "hlo/ir.h"

namespace pjrt::compiler::host::lowering {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Two's-complement arithmetic without undefined behaviour on overflow.
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
inline int64_t WrapMultiply(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}

// Maps a loop's multi-index (rank L) to a node's multi-index (rank r):
// node[j] = offset[j] + sum_i coef[j][i] * loop[i].
struct Transform {
  std::vector<int64_t> offset;
  std::vector<std::vector<int64_t>> coef;

  static Transform Identity(int rank) {
    Transform t;
    t.offset.assign(rank, 0);
    t.coef.assign(rank, std::vector<int64_t>(rank, 0));
    for (int i = 0; i < rank; ++i) t.coef[i][i] = 1;
    return t;
  }
  // The loop index space's rank.
  static Transform Empty() { return Transform(); }

  std::string Key() const {
    std::string key;
    for (size_t j = 0; j < offset.size(); ++j) {
      absl::StrAppend(&key, offset[j], ":", absl::StrJoin(coef[j], ","), ";");
    }
    return key;
  }
};

enum class Kind {
  kSource,       // parameter, constant
  kElementwise,  // computes per element
  kIndex,        // broadcast, transpose, slice, reverse: pure re-indexing
  kIota,
  kReshape,   // reshape, bitcast: a view of a buffer
  kRunValue,  // replica-id, partition-id
  kOpaque,    // dot, reduce, pad, concatenate, dynamic slices
  kKernel,    // while, gather, sort...: a Kernel over buffers
};

// The kernel builder of an op that runs as a Kernel, or nullptr.
KernelBuilder KernelBuilderOf(const Instruction& inst);
Kind KindOf(Opcode op);
// The ExprOp of an element-wise opcode; UNIMPLEMENTED for others.
absl::StatusOr<ExprOp> ElementwiseOp(const Instruction& inst);
// Fills an ExprNode's attributes from an element-wise instruction.
void SetNodeAttributes(const Instruction& inst, ExprNode* node);

// Longest chain of element-wise and re-indexing ops fused into one loop.
inline constexpr int kMaxFusedDepth = 128;

class Lowering : public KernelCompiler {
 public:
  // `nested`: compiling the body of a loop or a branch.
  Lowering(const hlo::Module& module, const HostCompileOptions& options,
           bool nested = false)
      : module_(module), options_(options), nested_(nested) {}

  // Compiles `computation` (the entry, or a loop body or branch) as a
  // program: one argument per array leaf of its parameters.
  absl::StatusOr<std::unique_ptr<HostProgram>> Compile(
      const Computation& computation);

  absl::StatusOr<std::unique_ptr<HostProgram>> CompileComputation(
      const Computation& computation,
      std::vector<std::pair<int, int>> aliases = {}) override {
    // A body or branch takes the dot and memory options; its aliases are
    // its own.
    HostCompileOptions nested = options_;
    nested.aliases = std::move(aliases);
    return Lowering(module_, nested, /*nested=*/true).Compile(computation);
  }
  int NewScratch(int64_t bytes) override {
    return NewSlot(BufferSlot::Kind::kScratch,
                   Shape(PrimitiveType::kU8, {std::max<int64_t>(bytes, 1)}));
  }

 private:
  struct Node {
    const Instruction* inst = nullptr;
    std::vector<int> operands;
    Shape shape;
    Kind kind = Kind::kElementwise;
    int users = 0;
    bool materialize = false;
    int slot = -1;
    // Variadic reduce: which output of the instruction this node is, and
    // the node of output 0.
    int output_index = 0;
    int first_output = -1;
    int parameter_number = -1;
    // A dot computing the transpose of its HLO result (operands swapped),
    // so that a transpose of it is a view.
    bool dot_swapped = false;
    // A kernel's output 0: the number of leaves of each HLO operand
    // (operands holds them all, flattened).
    std::vector<int> operand_leaves;
  };

  // A value of HLO: an array node, or a tuple of values. A tuple's elements
  // are shared between copies, so that tuples of tuples cost one entry per
  // element however they nest (a program may build them cheaply).
  struct Value {
    int node = -1;
    std::shared_ptr<const std::vector<Value>> elements;
    bool is_tuple() const { return node < 0; }
    const std::vector<Value>& tuple() const {
      static const std::vector<Value>* const kEmpty = new std::vector<Value>();
      return elements != nullptr ? *elements : *kEmpty;
    }
    static Value Tuple(std::vector<Value> elements) {
      Value v;
      v.elements =
          std::make_shared<const std::vector<Value>>(std::move(elements));
      return v;
    }
  };

  // Builds one fused loop's Expression.
  struct LoopBuilder {
    LoopStep step;
    int root = -1;  // the node the loop computes (-1: a preparation loop)
    absl::flat_hash_map<std::string, int> memo;
  };

  absl::StatusOr<Value> LowerComputation(const Computation& computation,
                                         const std::vector<Value>& args);
  absl::StatusOr<Value> LowerInstruction(
      const Instruction& inst, const std::vector<Value>& args,
      const absl::flat_hash_map<const Instruction*, Value>& done);
  int NewNode(const Instruction* inst, const Shape& shape,
              std::vector<int> operands);
  // A bitcast: a view of its operand when both layouts are row-major;
  // otherwise the physical buffer reinterpreted, as XLA defines it
  // (transpose to physical order, view, transpose to logical order).
  Value LowerBitcast(const Instruction& inst, const Value& operand);

  void DecideMaterialization();
  // Part of DecideMaterialization: bounds the size and depth of every fused
  // loop's expression (see kMaxFusedDepth).
  void LimitFusion();
  // transpose(dot(a, b)) of matrices -> dot(b, a): the product comes out in
  // the layout its consumers read, instead of being read strided.
  void FoldTransposedDots();
  int NewSlot(BufferSlot::Kind kind, const Shape& shape, int64_t index = 0);
  absl::Status Emit(int node);
  absl::StatusOr<int> Build(LoopBuilder& lb, int node, const Transform& t);
  int LeafInput(LoopBuilder& lb, int node, const Transform& t);
  // Emits a loop computing `node` permuted so that loop dimension i is the
  // node's dimension order[i], converted to `type`, into a new slot.
  absl::StatusOr<int> EmitPermuted(int node, const std::vector<int64_t>& order,
                                   PrimitiveType type);
  absl::Status EmitLoop(int node);
  absl::Status EmitDot(int node);
  absl::Status EmitReduce(int node);
  absl::Status EmitPad(int node);
  absl::Status EmitConcatenate(int node);
  absl::Status EmitDynamicSlice(int node, bool update);
  absl::Status EmitCollective(int node);
  absl::Status EmitKernel(int node);
  absl::Status EmitResults();
  // Places scratch slots by liveness. RESOURCE_EXHAUSTED if one run's
  // scratch would exceed the largest array (hlo::kMaxArrayBytes).
  absl::Status PlanScratch();

  // One past the last output node of multi-output `node` (its outputs are
  // the nodes made right after it, in order).
  int OutputsEnd(int node) const {
    int end = node + 1;
    while (end < static_cast<int>(nodes_.size()) &&
           nodes_[end].first_output == node) {
      ++end;
    }
    return end;
  }
  // A slot whose contents are node's (materialized) value.
  int SlotOf(int node) const { return nodes_[node].slot; }
  PrimitiveType TypeOf(int node) const {
    return nodes_[node].shape.element_type();
  }

  const hlo::Module& module_;
  const HostCompileOptions options_;
  const bool nested_;
  // The computation Compile lowers.
  std::string computation_name_;
  std::unique_ptr<HostProgram> program_ = std::make_unique<HostProgram>();
  std::vector<Node> nodes_;
  std::vector<int> results_;
  // Instructions the lowering makes itself (a bitcast's transposes).
  std::vector<std::unique_ptr<Instruction>> synthetic_;
};

}  // namespace pjrt::compiler::host::lowering

#endif  // PJRT_COMPILER_HOST_LOWERING_H_
