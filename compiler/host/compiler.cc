#include "compiler/host/compiler.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/host/types.h"
#include "hlo/verifier.h"

namespace pjrt::compiler::host {

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * dims[d + 1];
  }
  return strides;
}

namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Two's-complement arithmetic without undefined behaviour on overflow.
int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t WrapMultiply(int64_t a, int64_t b) {
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
  kReshape,      // reshape, bitcast: a view of a buffer
  kRunValue,     // replica-id, partition-id
  kOpaque,       // dot, reduce, pad, concatenate, dynamic slices
  kKernel,       // while, gather, sort...: a Kernel over buffers
};

// The kernel builder of an op that runs as a Kernel, or nullptr.
KernelBuilder KernelBuilderOf(const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::kWhile: return BuildWhile;
    case Opcode::kConditional: return BuildConditional;
    case Opcode::kMap: return BuildMap;
    case Opcode::kGather: return BuildGather;
    case Opcode::kScatter: return BuildScatter;
    case Opcode::kSort: return BuildSort;
    case Opcode::kTopK: return BuildTopK;
    case Opcode::kReduceWindow: return BuildReduceWindow;
    case Opcode::kSelectAndScatter: return BuildSelectAndScatter;
    case Opcode::kConvolution: return BuildConvolution;
    case Opcode::kRngBitGenerator: return BuildRngBitGenerator;
    case Opcode::kRng:
    case Opcode::kRngGetAndUpdateState:
      return BuildRng;
    case Opcode::kCustomCall:
      return inst.attributes().custom_call_target == "TopK" ? BuildTopK
                                                            : nullptr;
    default:
      return nullptr;
  }
}

Kind KindOf(Opcode op) {
  switch (op) {
    case Opcode::kParameter:
    case Opcode::kConstant:
      return Kind::kSource;
    case Opcode::kBroadcast:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kReverse:
      return Kind::kIndex;
    case Opcode::kIota:
      return Kind::kIota;
    case Opcode::kReshape:
    case Opcode::kBitcast:
      return Kind::kReshape;
    case Opcode::kReplicaId:
    case Opcode::kPartitionId:
      return Kind::kRunValue;
    case Opcode::kDot:
    case Opcode::kReduce:
    case Opcode::kPad:
    case Opcode::kConcatenate:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
    case Opcode::kAllReduceStart:
      return Kind::kOpaque;
    case Opcode::kWhile:
    case Opcode::kConditional:
    case Opcode::kMap:
    case Opcode::kGather:
    case Opcode::kScatter:
    case Opcode::kSort:
    case Opcode::kTopK:
    case Opcode::kReduceWindow:
    case Opcode::kSelectAndScatter:
    case Opcode::kConvolution:
    case Opcode::kRngBitGenerator:
    case Opcode::kRng:
    case Opcode::kRngGetAndUpdateState:
    case Opcode::kCustomCall:  // TopK (others alias their operand)
      return Kind::kKernel;
    default:
      return Kind::kElementwise;
  }
}

// The ExprOp of an element-wise opcode.
absl::StatusOr<ExprOp> ElementwiseOp(const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::kAbs: return ExprOp::kAbs;
    case Opcode::kNegate: return ExprOp::kNegate;
    case Opcode::kSign: return ExprOp::kSign;
    case Opcode::kExp: return ExprOp::kExp;
    case Opcode::kExpm1: return ExprOp::kExpm1;
    case Opcode::kLog: return ExprOp::kLog;
    case Opcode::kLog1p: return ExprOp::kLog1p;
    case Opcode::kSqrt: return ExprOp::kSqrt;
    case Opcode::kRsqrt: return ExprOp::kRsqrt;
    case Opcode::kCbrt: return ExprOp::kCbrt;
    case Opcode::kTanh: return ExprOp::kTanh;
    case Opcode::kLogistic: return ExprOp::kLogistic;
    case Opcode::kSin: return ExprOp::kSin;
    case Opcode::kCos: return ExprOp::kCos;
    case Opcode::kTan: return ExprOp::kTan;
    case Opcode::kErf: return ExprOp::kErf;
    case Opcode::kFloor: return ExprOp::kFloor;
    case Opcode::kCeil: return ExprOp::kCeil;
    case Opcode::kRoundNearestAfz: return ExprOp::kRoundAfz;
    case Opcode::kRoundNearestEven: return ExprOp::kRoundEven;
    case Opcode::kIsFinite: return ExprOp::kIsFinite;
    case Opcode::kNot: return ExprOp::kNot;
    case Opcode::kPopcnt: return ExprOp::kPopcnt;
    case Opcode::kClz: return ExprOp::kClz;
    case Opcode::kReducePrecision: return ExprOp::kReducePrecision;
    case Opcode::kConvert: return ExprOp::kConvert;
    case Opcode::kBitcastConvert: return ExprOp::kBitcastConvert;
    case Opcode::kAdd: return ExprOp::kAdd;
    case Opcode::kSubtract: return ExprOp::kSubtract;
    case Opcode::kMultiply: return ExprOp::kMultiply;
    case Opcode::kDivide: return ExprOp::kDivide;
    case Opcode::kRemainder: return ExprOp::kRemainder;
    case Opcode::kPower: return ExprOp::kPower;
    case Opcode::kMaximum: return ExprOp::kMaximum;
    case Opcode::kMinimum: return ExprOp::kMinimum;
    case Opcode::kAtan2: return ExprOp::kAtan2;
    case Opcode::kAnd: return ExprOp::kAnd;
    case Opcode::kOr: return ExprOp::kOr;
    case Opcode::kXor: return ExprOp::kXor;
    case Opcode::kShiftLeft: return ExprOp::kShiftLeft;
    case Opcode::kShiftRightLogical: return ExprOp::kShiftRightLogical;
    case Opcode::kShiftRightArithmetic: return ExprOp::kShiftRightArithmetic;
    case Opcode::kCompare: return ExprOp::kCompare;
    case Opcode::kSelect: return ExprOp::kSelect;
    case Opcode::kClamp: return ExprOp::kClamp;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: op '%s' (%%%s) cannot be computed element-wise by the "
          "host compiler",
          inst.line(), inst.opcode_name(), inst.name()));
  }
}

// Fills an ExprNode's attributes from an element-wise instruction.
void SetNodeAttributes(const Instruction& inst, ExprNode* node) {
  const hlo::Attributes& a = inst.attributes();
  node->direction = a.comparison_direction;
  node->total_order = a.comparison_type == hlo::ComparisonType::kTotalOrder;
  // More bits than any type has change nothing (the verifier bounds them).
  node->exponent_bits =
      static_cast<int>(std::min<int64_t>(a.exponent_bits, 64));
  node->mantissa_bits =
      static_cast<int>(std::min<int64_t>(a.mantissa_bits, 64));
}

// The single binary op of a reducer region (add, multiply, maximum, minimum,
// and, or) applied to its two parameters, if that is all it is.
std::optional<ExprOp> SimpleReducer(const Computation& region) {
  if (region.parameters().size() != 2) return std::nullopt;
  const Instruction* root = region.root();
  if (root->operand_count() != 2) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter ||
      a == b) {
    return std::nullopt;
  }
  switch (root->opcode()) {
    case Opcode::kAdd: return ExprOp::kAdd;
    case Opcode::kMultiply: return ExprOp::kMultiply;
    case Opcode::kMaximum: return ExprOp::kMaximum;
    case Opcode::kMinimum: return ExprOp::kMinimum;
    case Opcode::kAnd: return ExprOp::kAnd;
    case Opcode::kOr: return ExprOp::kOr;
    default: return std::nullopt;
  }
}

// Longest chain of element-wise and re-indexing ops fused into one loop.
constexpr int kMaxFusedDepth = 128;

class Lowering : public KernelCompiler {
 public:
  // `nested`: compiling the body of a loop or a branch (no collectives).
  Lowering(const hlo::Module& module, const HostCompileOptions& options,
           bool nested = false)
      : module_(module), options_(options), nested_(nested) {}

  // Compiles `computation` (the entry, or a loop body or branch) as a
  // program: one argument per array leaf of its parameters.
  absl::StatusOr<std::unique_ptr<HostProgram>> Compile(
      const Computation& computation);

  absl::StatusOr<std::unique_ptr<HostProgram>> CompileComputation(
      const Computation& computation) override {
    return Lowering(module_, HostCompileOptions(), /*nested=*/true)
        .Compile(computation);
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
  std::unique_ptr<HostProgram> program_ = std::make_unique<HostProgram>();
  std::vector<Node> nodes_;
  std::vector<int> results_;
};

int Lowering::NewNode(const Instruction* inst, const Shape& shape,
                      std::vector<int> operands) {
  Node node;
  node.inst = inst;
  node.shape = shape;
  node.operands = std::move(operands);
  node.kind = KindOf(inst->opcode());
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

absl::StatusOr<Lowering::Value> Lowering::LowerInstruction(
    const Instruction& inst, const std::vector<Value>& args,
    const absl::flat_hash_map<const Instruction*, Value>& done) {
  const auto operand = [&](int i) -> const Value& {
    return done.at(inst.operand(i));
  };
  switch (inst.opcode()) {
    case Opcode::kParameter:
      return args[inst.attributes().parameter_number];
    case Opcode::kTuple: {
      std::vector<Value> elements;
      for (int i = 0; i < inst.operand_count(); ++i) {
        elements.push_back(operand(i));
      }
      return Value::Tuple(std::move(elements));
    }
    case Opcode::kGetTupleElement: {
      const std::vector<Value>& elements = operand(0).tuple();
      const int64_t index = inst.attributes().tuple_index;
      if (index >= static_cast<int64_t>(elements.size())) {
        // The context element of an async op: nothing a program computes.
        return absl::UnimplementedError(absl::StrFormat(
            "line %d: %%%s reads element %d of %%%s, which the host compiler "
            "does not keep",
            inst.line(), inst.name(), index, inst.operand(0)->name()));
      }
      return elements[index];
    }
    case Opcode::kCall:
    case Opcode::kFusion:
    case Opcode::kAsyncStart: {
      std::vector<Value> call_args;
      for (int i = 0; i < inst.operand_count(); ++i) call_args.push_back(operand(i));
      PJRT_ASSIGN_OR_RETURN(
          Value result,
          LowerComputation(*inst.called_computations()[0], call_args));
      if (inst.opcode() != Opcode::kAsyncStart) return result;
      // ((operands), result, context...): the op runs synchronously here.
      return Value::Tuple({Value::Tuple(call_args), result});
    }
    case Opcode::kAsyncDone:
      return operand(0).tuple()[1];
    case Opcode::kCopyStart:
      return Value::Tuple({operand(0), operand(0)});
    case Opcode::kCopyDone:
      return operand(0).tuple()[0];
    case Opcode::kAfterAll:
      return Value::Tuple({});  // a token holds nothing
    case Opcode::kCopy:
    case Opcode::kOptimizationBarrier:
    case Opcode::kAddDependency:
    case Opcode::kAsyncUpdate:
    case Opcode::kAllReduceDone:
      return operand(0);
    case Opcode::kCustomCall:
      // Identity annotations (verified); TopK is a kernel.
      if (inst.attributes().custom_call_target != "TopK") return operand(0);
      break;
    default:
      break;
  }
  if (KindOf(inst.opcode()) == Kind::kKernel) {
    // Operands and results as array leaves.
    std::vector<int> leaves;
    std::vector<int> counts;
    std::function<void(const Value&)> flatten = [&](const Value& v) {
      if (!v.is_tuple()) {
        leaves.push_back(v.node);
        return;
      }
      for (const Value& e : v.tuple()) flatten(e);
    };
    for (int i = 0; i < inst.operand_count(); ++i) {
      const size_t before = leaves.size();
      flatten(operand(i));
      counts.push_back(static_cast<int>(leaves.size() - before));
    }
    int first = -1;
    std::function<Value(const Shape&)> build = [&](const Shape& shape) {
      if (shape.IsTuple()) {
        std::vector<Value> elements;
        for (const Shape& e : shape.tuple_shapes()) elements.push_back(build(e));
        return Value::Tuple(std::move(elements));
      }
      if (shape.IsToken()) return Value::Tuple({});
      Value v;
      v.node = NewNode(&inst, shape, leaves);
      if (first < 0) first = v.node;
      nodes_[v.node].output_index = v.node - first;
      nodes_[v.node].first_output = first;
      return v;
    };
    Value result = build(inst.shape());
    if (first >= 0) nodes_[first].operand_leaves = std::move(counts);
    return result;
  }
  std::vector<int> operands;
  for (int i = 0; i < inst.operand_count(); ++i) {
    if (operand(i).is_tuple()) {
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: %%%s takes a tuple operand, which the host compiler does "
          "not support for '%s'",
          inst.line(), inst.name(), inst.opcode_name()));
    }
    operands.push_back(operand(i).node);
  }
  if (inst.shape().IsTuple()) {
    // Variadic reduce and all-reduce: one node per output.
    if (inst.opcode() != Opcode::kReduce && inst.opcode() != Opcode::kAllReduce &&
        inst.opcode() != Opcode::kAllReduceStart) {
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: %%%s produces a tuple, which the host compiler supports "
          "only for reduce and all-reduce",
          inst.line(), inst.name()));
    }
    std::vector<Value> outputs;
    int first = -1;
    for (size_t j = 0; j < inst.shape().tuple_shapes().size(); ++j) {
      int id = NewNode(&inst, inst.shape().tuple_shapes()[j], operands);
      if (j == 0) first = id;
      nodes_[id].output_index = static_cast<int>(j);
      nodes_[id].first_output = first;
      Value element;
      element.node = id;
      outputs.push_back(element);
    }
    return Value::Tuple(std::move(outputs));
  }
  Value v;
  v.node = NewNode(&inst, inst.shape(), operands);
  nodes_[v.node].first_output = v.node;
  return v;
}

absl::StatusOr<Lowering::Value> Lowering::LowerComputation(
    const Computation& computation, const std::vector<Value>& args) {
  absl::flat_hash_map<const Instruction*, Value> done;
  // Iterative post-order from the root: programs can be deep.
  std::vector<std::pair<const Instruction*, int>> stack = {{computation.root(), 0}};
  while (!stack.empty()) {
    auto& [inst, next] = stack.back();
    if (done.contains(inst)) {
      stack.pop_back();
      continue;
    }
    if (next < inst->operand_count()) {
      const Instruction* operand = inst->operand(next++);
      if (!done.contains(operand)) stack.push_back({operand, 0});
      continue;
    }
    PJRT_ASSIGN_OR_RETURN(Value value, LowerInstruction(*inst, args, done));
    done.emplace(inst, std::move(value));
    stack.pop_back();
  }
  return done.at(computation.root());
}

void Lowering::FoldTransposedDots() {
  std::vector<std::vector<int>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (int o : nodes_[i].operands) {
      if (users[o].empty() || users[o].back() != static_cast<int>(i)) {
        users[o].push_back(static_cast<int>(i));
      }
    }
  }
  std::vector<bool> is_result(nodes_.size(), false);
  for (int r : results_) is_result[r] = true;
  for (size_t t = 0; t < nodes_.size(); ++t) {
    Node& transpose = nodes_[t];
    if (transpose.inst->opcode() != Opcode::kTranspose || transpose.shape.rank() != 2 ||
        transpose.inst->attributes().dimensions != std::vector<int64_t>{1, 0}) {
      continue;
    }
    const int d = transpose.operands[0];
    Node& dot = nodes_[d];
    if (dot.inst->opcode() != Opcode::kDot || dot.dot_swapped || is_result[d] ||
        users[d].size() != 1 ||
        !dot.inst->attributes().dot_dimension_numbers.lhs_batch_dimensions.empty()) {
      continue;
    }
    std::swap(dot.operands[0], dot.operands[1]);
    dot.dot_swapped = true;
    dot.shape = transpose.shape;
    transpose.kind = Kind::kReshape;  // now a view of the dot's result
  }
}

void Lowering::DecideMaterialization() {
  // Users are counted once each, however many times they use the value
  // (multiply(s, s) reads s once per element).
  for (Node& n : nodes_) {
    std::vector<int> distinct = n.operands;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int o : distinct) nodes_[o].users++;
  }
  for (int r : results_) nodes_[r].materialize = true;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    switch (n.kind) {
      case Kind::kSource:
      case Kind::kRunValue:
      case Kind::kOpaque:
      case Kind::kKernel:
      case Kind::kReshape:
        n.materialize = true;
        break;
      case Kind::kElementwise:
        if (n.users > 1) n.materialize = true;
        break;
      default:
        break;
    }
    // Operands that must be buffers.
    const Opcode op = n.inst->opcode();
    for (size_t k = 0; k < n.operands.size(); ++k) {
      Node& operand = nodes_[n.operands[k]];
      // Kernels read buffers.
      bool needs_buffer = n.kind == Kind::kKernel;
      switch (op) {
        case Opcode::kReshape:
        case Opcode::kBitcast:
        case Opcode::kPad:
        case Opcode::kConcatenate:
        case Opcode::kDynamicSlice:
        case Opcode::kDynamicUpdateSlice:
        case Opcode::kAllReduce:
        case Opcode::kAllReduceStart:
        case Opcode::kAllGather:
        case Opcode::kReduceScatter:
        case Opcode::kAllToAll:
        case Opcode::kCollectivePermute:
          needs_buffer = true;
          break;
        case Opcode::kReduce:
          // Initial values are read as scalars.
          needs_buffer = k >= n.operands.size() / 2;
          break;
        case Opcode::kBroadcast:
          // Computing the operand once beats recomputing it per copy.
          needs_buffer = operand.kind == Kind::kElementwise;
          break;
        default:
          break;
      }
      if (needs_buffer) operand.materialize = true;
    }
  }
  LimitFusion();
}

void Lowering::LimitFusion() {
  // An element-wise value read at more than one place of a loop, through
  // re-indexing nodes (a slice and a reverse of it, say), would be computed
  // once per place, and chains of such diamonds double the work at every
  // level. Count, for each node, the places it is read from (through
  // re-indexings that are not materialized), and materialize element-wise
  // values read from more than one. Users come after their operands.
  std::vector<std::vector<int>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<int> distinct = nodes_[i].operands;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()),
                   distinct.end());
    for (int o : distinct) users[o].push_back(static_cast<int>(i));
  }
  std::vector<int64_t> reads(nodes_.size(), 0);
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    int64_t count = 0;
    for (int u : users[i]) {
      const Node& user = nodes_[u];
      const int64_t through =
          user.kind == Kind::kIndex && !user.materialize ? reads[u] : 1;
      count = std::min<int64_t>(count + through, int64_t{1} << 40);
    }
    reads[i] = count;
    Node& n = nodes_[i];
    if (n.kind == Kind::kElementwise && count > 1) n.materialize = true;
  }
  // A fused expression is evaluated by recursion over its operands; cut
  // chains longer than kMaxFusedDepth into loops of their own, so that a
  // long chain of element-wise ops neither overflows the compiler's stack
  // nor builds one enormous loop body.
  std::vector<int> depth(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (n.kind != Kind::kElementwise && n.kind != Kind::kIndex) continue;
    int d = 0;
    for (int o : n.operands) {
      if (!nodes_[o].materialize) d = std::max(d, depth[o]);
    }
    depth[i] = d + 1;
    if (depth[i] >= kMaxFusedDepth) {
      n.materialize = true;
      depth[i] = 0;
    }
  }
}

int Lowering::NewSlot(BufferSlot::Kind kind, const Shape& shape, int64_t index) {
  BufferSlot slot;
  slot.kind = kind;
  slot.shape = shape;
  slot.index = index;
  slot.bytes = shape.ByteSize();
  program_->slots.push_back(slot);
  return static_cast<int>(program_->slots.size()) - 1;
}

int Lowering::LeafInput(LoopBuilder& lb, int node, const Transform& t) {
  const Node& n = nodes_[node];
  LoopInput input;
  input.kind = LoopInput::Kind::kBuffer;
  input.slot = n.slot;
  input.type = n.shape.element_type();
  std::vector<int64_t> strides = RowMajorStrides(n.shape.dimensions());
  const int loop_rank = static_cast<int>(lb.step.dims.size());
  input.map.strides.assign(loop_rank, 0);
  // Wrapping arithmetic: a valid program stays far from overflow, and
  // HostProgram::CheckBounds refuses any map that reaches outside its slot.
  for (size_t j = 0; j < strides.size(); ++j) {
    input.map.offset =
        WrapAdd(input.map.offset, WrapMultiply(t.offset[j], strides[j]));
    for (int i = 0; i < loop_rank; ++i) {
      input.map.strides[i] =
          WrapAdd(input.map.strides[i], WrapMultiply(t.coef[j][i], strides[j]));
    }
  }
  input.contiguous =
      input.map.offset == 0 && input.map.strides == RowMajorStrides(lb.step.dims);
  lb.step.inputs.push_back(input);
  return lb.step.expr.AddInput(static_cast<int>(lb.step.inputs.size()) - 1,
                               input.type);
}

absl::StatusOr<int> Lowering::Build(LoopBuilder& lb, int node, const Transform& t) {
  std::string key = absl::StrCat(node, "|", t.Key());
  if (auto it = lb.memo.find(key); it != lb.memo.end()) return it->second;
  const Node& n = nodes_[node];
  const Instruction& inst = *n.inst;
  const int loop_rank = static_cast<int>(lb.step.dims.size());
  int result;
  if (node != lb.root && n.materialize) {
    if (inst.opcode() == Opcode::kConstant && n.shape.rank() == 0) {
      result = lb.step.expr.AddSplatFromStorage(
          n.shape.element_type(), inst.attributes().literal.data().data());
    } else {
      result = LeafInput(lb, node, t);
    }
  } else if (n.kind == Kind::kIota) {
    LoopInput input;
    input.kind = LoopInput::Kind::kIota;
    input.type = n.shape.element_type();
    const int64_t dim = inst.attributes().iota_dimension;
    input.map.offset = t.offset[dim];
    input.map.strides.assign(loop_rank, 0);
    for (int i = 0; i < loop_rank; ++i) input.map.strides[i] = t.coef[dim][i];
    lb.step.inputs.push_back(input);
    result = lb.step.expr.AddInput(static_cast<int>(lb.step.inputs.size()) - 1,
                                   input.type);
  } else if (n.kind == Kind::kIndex) {
    const Shape& in_shape = nodes_[n.operands[0]].shape;
    const hlo::Attributes& a = inst.attributes();
    Transform u;
    const int in_rank = in_shape.rank();
    u.offset.assign(in_rank, 0);
    u.coef.assign(in_rank, std::vector<int64_t>(loop_rank, 0));
    switch (inst.opcode()) {
      case Opcode::kBroadcast:
        for (int k = 0; k < in_rank; ++k) {
          u.offset[k] = t.offset[a.dimensions[k]];
          u.coef[k] = t.coef[a.dimensions[k]];
        }
        break;
      case Opcode::kTranspose:
        for (int i = 0; i < in_rank; ++i) {
          u.offset[a.dimensions[i]] = t.offset[i];
          u.coef[a.dimensions[i]] = t.coef[i];
        }
        break;
      case Opcode::kSlice:
        for (int d = 0; d < in_rank; ++d) {
          const hlo::SliceDimension& s = a.slice[d];
          u.offset[d] = WrapAdd(s.start, WrapMultiply(s.stride, t.offset[d]));
          for (int i = 0; i < loop_rank; ++i) {
            u.coef[d][i] = WrapMultiply(s.stride, t.coef[d][i]);
          }
        }
        break;
      default: {  // reverse
        u = t;
        for (int64_t d : a.dimensions) {
          u.offset[d] = in_shape.dimensions(d) - 1 - t.offset[d];
          for (int i = 0; i < loop_rank; ++i) u.coef[d][i] = -t.coef[d][i];
        }
        break;
      }
    }
    // The index of a loop dimension of size 1 is always 0: its coefficient
    // does not matter, and keeping it 0 keeps every coefficient bounded by
    // the index ranges it really spans (strides of nested slices would
    // otherwise multiply up).
    for (int i = 0; i < loop_rank; ++i) {
      if (lb.step.dims[i] > 1) continue;
      for (auto& row : u.coef) row[i] = 0;
    }
    PJRT_ASSIGN_OR_RETURN(result, Build(lb, n.operands[0], u));
  } else if (n.kind == Kind::kElementwise) {
    PJRT_ASSIGN_OR_RETURN(ExprOp op, ElementwiseOp(inst));
    ExprNode e;
    e.op = op;
    e.type = n.shape.element_type();
    SetNodeAttributes(inst, &e);
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const Node& operand = nodes_[n.operands[k]];
      // Scalar operands of select and clamp broadcast over the others.
      Transform ut = operand.shape.rank() == 0 && n.shape.rank() > 0
                         ? Transform::Empty()
                         : t;
      PJRT_ASSIGN_OR_RETURN(e.operands[k], Build(lb, n.operands[k], ut));
    }
    result = lb.step.expr.Add(e);
  } else {
    return absl::InternalError(absl::StrFormat(
        "%%%s should have been materialized before use in a loop", inst.name()));
  }
  lb.memo.emplace(std::move(key), result);
  return result;
}

absl::Status Lowering::EmitLoop(int node) {
  Node& n = nodes_[node];
  LoopBuilder lb;
  lb.root = node;
  lb.step.dims.assign(n.shape.dimensions().begin(), n.shape.dimensions().end());
  lb.step.output_slot = n.slot;
  lb.step.output_type = n.shape.element_type();
  PJRT_ASSIGN_OR_RETURN(int out, Build(lb, node, Transform::Identity(n.shape.rank())));
  lb.step.expr.AddOutput(out);
  lb.step.expr.Finalize();
  program_->steps.push_back(std::move(lb.step));
  return absl::OkStatus();
}

absl::StatusOr<int> Lowering::EmitPermuted(int node, const std::vector<int64_t>& order,
                                          PrimitiveType type) {
  const Node& n = nodes_[node];
  LoopBuilder lb;
  lb.root = -1;
  std::vector<int64_t> dims;
  for (int64_t d : order) dims.push_back(n.shape.dimensions(d));
  lb.step.dims = dims;
  lb.step.output_type = type;
  Transform t;
  const int rank = n.shape.rank();
  t.offset.assign(rank, 0);
  t.coef.assign(rank, std::vector<int64_t>(rank, 0));
  for (int i = 0; i < rank; ++i) t.coef[order[i]][i] = 1;
  PJRT_ASSIGN_OR_RETURN(int value, Build(lb, node, t));
  if (n.shape.element_type() != type) {
    ExprNode convert;
    convert.op = ExprOp::kConvert;
    convert.type = type;
    convert.operands[0] = value;
    value = lb.step.expr.Add(convert);
  }
  lb.step.expr.AddOutput(value);
  lb.step.expr.Finalize();
  lb.step.output_slot = NewSlot(BufferSlot::Kind::kScratch, Shape(type, dims));
  int slot = lb.step.output_slot;
  program_->steps.push_back(std::move(lb.step));
  return slot;
}

absl::Status Lowering::EmitDot(int node) {
  Node& n = nodes_[node];
  hlo::DotDimensionNumbers d = n.inst->attributes().dot_dimension_numbers;
  if (n.dot_swapped) {
    std::swap(d.lhs_batch_dimensions, d.rhs_batch_dimensions);
    std::swap(d.lhs_contracting_dimensions, d.rhs_contracting_dimensions);
  }
  const PrimitiveType out_type = n.shape.element_type();
  PrimitiveType type = PrimitiveType::kS64;
  if (out_type == PrimitiveType::kF64) {
    type = PrimitiveType::kF64;
  } else if (hlo::IsFloatingPoint(out_type)) {
    type = PrimitiveType::kF32;
  }
  const auto free_dims = [](int rank, const std::vector<int64_t>& batch,
                            const std::vector<int64_t>& contracting) {
    std::vector<int64_t> free;
    for (int i = 0; i < rank; ++i) {
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(contracting.begin(), contracting.end(), i) == contracting.end()) {
        free.push_back(i);
      }
    }
    return free;
  };
  const int lhs = n.operands[0], rhs = n.operands[1];
  const Shape& ls = nodes_[lhs].shape;
  const Shape& rs = nodes_[rhs].shape;
  std::vector<int64_t> lhs_free =
      free_dims(ls.rank(), d.lhs_batch_dimensions, d.lhs_contracting_dimensions);
  std::vector<int64_t> rhs_free =
      free_dims(rs.rank(), d.rhs_batch_dimensions, d.rhs_contracting_dimensions);
  DotStep step;
  step.type = type;
  step.batch = 1;
  for (int64_t b : d.lhs_batch_dimensions) step.batch *= ls.dimensions(b);
  step.m = 1;
  for (int64_t f : lhs_free) step.m *= ls.dimensions(f);
  step.n = 1;
  for (int64_t f : rhs_free) step.n *= rs.dimensions(f);
  step.k = 1;
  for (int64_t c : d.lhs_contracting_dimensions) step.k *= ls.dimensions(c);

  // Returns the operand's slot in the layout [batch, a, b] (or [batch, b,
  // a] with transposed set), preparing a copy if its buffer does not fit.
  const auto prepare = [&](int operand, const std::vector<int64_t>& batch,
                           const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b,
                           bool* transposed) -> absl::StatusOr<int> {
    const Node& o = nodes_[operand];
    std::vector<int64_t> normal = batch, flipped = batch;
    normal.insert(normal.end(), a.begin(), a.end());
    normal.insert(normal.end(), b.begin(), b.end());
    flipped.insert(flipped.end(), b.begin(), b.end());
    flipped.insert(flipped.end(), a.begin(), a.end());
    std::vector<int64_t> identity(o.shape.rank());
    for (int i = 0; i < o.shape.rank(); ++i) identity[i] = i;
    *transposed = false;
    if (o.materialize && o.shape.element_type() == type) {
      if (normal == identity) return o.slot;
      if (flipped == identity) {
        *transposed = true;
        return o.slot;
      }
    }
    return EmitPermuted(operand, normal, type);
  };
  PJRT_ASSIGN_OR_RETURN(step.lhs, prepare(lhs, d.lhs_batch_dimensions, lhs_free,
                                          d.lhs_contracting_dimensions,
                                          &step.lhs_transposed));
  PJRT_ASSIGN_OR_RETURN(step.rhs, prepare(rhs, d.rhs_batch_dimensions,
                                          d.rhs_contracting_dimensions, rhs_free,
                                          &step.rhs_transposed));
  if (out_type == type) {
    step.out = n.slot;
    program_->steps.push_back(step);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(n.shape.dimensions().begin(), n.shape.dimensions().end());
  step.out = NewSlot(BufferSlot::Kind::kScratch, Shape(type, dims));
  program_->steps.push_back(step);
  // Convert the accumulator to the result type.
  LoopStep convert;
  convert.dims = dims;
  LoopInput input;
  input.slot = step.out;
  input.type = type;
  input.map.strides = RowMajorStrides(dims);
  input.contiguous = true;
  convert.inputs.push_back(input);
  ExprNode c;
  c.op = ExprOp::kConvert;
  c.type = out_type;
  c.operands[0] = convert.expr.AddInput(0, type);
  convert.expr.AddOutput(convert.expr.Add(c));
  convert.expr.Finalize();
  convert.output_slot = n.slot;
  convert.output_type = out_type;
  program_->steps.push_back(std::move(convert));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> BuildScalarRegion(const Computation& region,
                                                   Expression* expr,
                                                   std::vector<int> params) {
  // Scalar values of the region: expression nodes, or tuples of them
  // (shared between copies, as Value's).
  struct ScalarValue {
    int node = -1;
    std::shared_ptr<const std::vector<ScalarValue>> elements;
    const std::vector<ScalarValue>& tuple() const {
      static const std::vector<ScalarValue>* const kEmpty =
          new std::vector<ScalarValue>();
      return elements != nullptr ? *elements : *kEmpty;
    }
  };
  const auto make_tuple = [](std::vector<ScalarValue> elements) {
    ScalarValue v;
    v.elements =
        std::make_shared<const std::vector<ScalarValue>>(std::move(elements));
    return v;
  };
  absl::flat_hash_map<const Instruction*, ScalarValue> done;
  std::vector<std::pair<const Instruction*, int>> stack = {{region.root(), 0}};
  while (!stack.empty()) {
    auto& [inst, next] = stack.back();
    if (done.contains(inst)) {
      stack.pop_back();
      continue;
    }
    if (next < inst->operand_count()) {
      const Instruction* operand = inst->operand(next++);
      if (!done.contains(operand)) stack.push_back({operand, 0});
      continue;
    }
    const auto operand = [&](int i) -> const ScalarValue& {
      return done.at(inst->operand(i));
    };
    ScalarValue v;
    switch (inst->opcode()) {
      case Opcode::kParameter:
        v.node = params[inst->attributes().parameter_number];
        break;
      case Opcode::kConstant:
        if (inst->shape().rank() != 0) {
          return absl::UnimplementedError(absl::StrFormat(
              "line %d: reducer %s uses a non-scalar constant", inst->line(),
              region.name()));
        }
        v.node = expr->AddSplatFromStorage(inst->shape().element_type(),
                                           inst->attributes().literal.data().data());
        break;
      case Opcode::kTuple: {
        std::vector<ScalarValue> elements;
        for (int i = 0; i < inst->operand_count(); ++i) {
          elements.push_back(operand(i));
        }
        v = make_tuple(std::move(elements));
        break;
      }
      case Opcode::kGetTupleElement:
        v = operand(0).tuple()[inst->attributes().tuple_index];
        break;
      case Opcode::kCopy:
      case Opcode::kOptimizationBarrier:
      case Opcode::kReshape:
      case Opcode::kBroadcast:
        v = operand(0);  // scalar to scalar
        break;
      case Opcode::kCall: {
        std::vector<int> call_params;
        for (int i = 0; i < inst->operand_count(); ++i) {
          if (operand(i).node < 0) {
            return absl::UnimplementedError("tuple arguments inside a reducer");
          }
          call_params.push_back(operand(i).node);
        }
        PJRT_ASSIGN_OR_RETURN(std::vector<int> outs,
                              BuildScalarRegion(*inst->called_computations()[0],
                                                expr, call_params));
        if (outs.size() == 1 && !inst->shape().IsTuple()) {
          v.node = outs[0];
        } else {
          std::vector<ScalarValue> elements;
          for (int o : outs) elements.push_back(ScalarValue{o, nullptr});
          v = make_tuple(std::move(elements));
        }
        break;
      }
      default: {
        PJRT_ASSIGN_OR_RETURN(ExprOp op, ElementwiseOp(*inst));
        ExprNode e;
        e.op = op;
        e.type = inst->shape().element_type();
        SetNodeAttributes(*inst, &e);
        for (int i = 0; i < inst->operand_count(); ++i) e.operands[i] = operand(i).node;
        v.node = expr->Add(e);
        break;
      }
    }
    done.emplace(inst, std::move(v));
    stack.pop_back();
  }
  const ScalarValue& root = done.at(region.root());
  std::vector<int> outputs;
  if (root.node >= 0) {
    outputs.push_back(root.node);
  } else {
    for (const ScalarValue& e : root.tuple()) outputs.push_back(e.node);
  }
  return outputs;
}

absl::StatusOr<Expression> ScalarRegionExpression(
    const Computation& region, absl::Span<const PrimitiveType> types) {
  Expression expr;
  std::vector<int> params;
  for (size_t i = 0; i < types.size(); ++i) {
    params.push_back(expr.AddInput(static_cast<int>(i), types[i]));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int> outs,
                        BuildScalarRegion(region, &expr, params));
  for (int o : outs) expr.AddOutput(o);
  expr.Finalize();
  return expr;
}

namespace {

absl::Status Lowering::EmitReduce(int node) {
  Node& n = nodes_[node];
  const Instruction& inst = *n.inst;
  const int count = inst.operand_count() / 2;
  const std::vector<int64_t>& reduced = inst.attributes().dimensions;
  const Shape& in_shape = nodes_[n.operands[0]].shape;
  const int rank = in_shape.rank();
  std::vector<int64_t> sorted = reduced;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> kept;
  for (int i = 0; i < rank; ++i) {
    if (!std::binary_search(sorted.begin(), sorted.end(), i)) kept.push_back(i);
  }
  // In place when every input is a buffer whose reduced dimensions are
  // adjacent: then the layout is [outer, reduced, inner] as is.
  bool in_place = !sorted.empty() && sorted.back() - sorted.front() + 1 ==
                                         static_cast<int64_t>(sorted.size());
  for (int j = 0; j < count; ++j) in_place = in_place && nodes_[n.operands[j]].materialize;
  int64_t outer = 1, r = 1, inner = 1;
  std::vector<int> inputs;
  if (in_place || sorted.empty()) {
    for (int i = 0; i < rank; ++i) {
      int64_t size = in_shape.dimensions(i);
      if (!sorted.empty() && i < sorted.front()) {
        outer *= size;
      } else if (!sorted.empty() && i > sorted.back()) {
        inner *= size;
      } else if (!sorted.empty()) {
        r *= size;
      } else {
        outer *= size;
      }
    }
    for (int j = 0; j < count; ++j) {
      const Node& input = nodes_[n.operands[j]];
      if (input.materialize) {
        inputs.push_back(input.slot);
      } else {
        std::vector<int64_t> order(rank);
        for (int i = 0; i < rank; ++i) order[i] = i;
        PJRT_ASSIGN_OR_RETURN(int slot, EmitPermuted(n.operands[j], order,
                                                     input.shape.element_type()));
        inputs.push_back(slot);
      }
    }
  } else {
    std::vector<int64_t> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    for (int64_t k : kept) outer *= in_shape.dimensions(k);
    for (int64_t k : reduced) r *= in_shape.dimensions(k);
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(int slot, EmitPermuted(n.operands[j], order,
                                                   nodes_[n.operands[j]].shape.element_type()));
      inputs.push_back(slot);
    }
  }
  const Computation& region = *inst.called_computations()[0];
  std::optional<ExprOp> simple = count == 1 ? SimpleReducer(region) : std::nullopt;
  if (simple.has_value()) {
    ReduceStep step;
    step.input = inputs[0];
    step.init = SlotOf(n.operands[1]);
    step.out = n.slot;
    step.type = n.shape.element_type();
    step.op = *simple;
    step.outer = outer;
    step.reduced = r;
    step.inner = inner;
    program_->steps.push_back(step);
    return absl::OkStatus();
  }
  GenericReduceStep step;
  step.inputs = inputs;
  step.outer = outer;
  step.reduced = r;
  step.inner = inner;
  std::vector<int> params;
  for (int j = 0; j < count; ++j) {
    step.types.push_back(nodes_[n.operands[j]].shape.element_type());
    step.inits.push_back(SlotOf(n.operands[count + j]));
  }
  for (int j = 0; j < 2 * count; ++j) {
    params.push_back(step.region.AddInput(j, step.types[j % count]));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int> outs,
                        BuildScalarRegion(region, &step.region, params));
  for (int o : outs) step.region.AddOutput(o);
  step.region.Finalize();
  // The outputs are this node and its siblings.
  for (int k = node; k < OutputsEnd(node); ++k)
    step.outs.push_back(nodes_[k].slot);
  program_->steps.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status Lowering::EmitPad(int node) {
  const Node& n = nodes_[node];
  const Node& operand = nodes_[n.operands[0]];
  const int bytes = hlo::ByteWidth(n.shape.element_type());
  FillStep fill;
  fill.dst = n.slot;
  fill.value = SlotOf(n.operands[1]);
  fill.element_bytes = bytes;
  fill.count = n.shape.ElementCount();
  program_->steps.push_back(fill);
  CopyStep copy;
  copy.src = operand.slot;
  copy.dst = n.slot;
  copy.element_bytes = bytes;
  std::vector<int64_t> in_strides = RowMajorStrides(operand.shape.dimensions());
  std::vector<int64_t> out_strides = RowMajorStrides(n.shape.dimensions());
  copy.src_map.strides = in_strides;
  copy.dst_map.strides.resize(out_strides.size());
  for (int d = 0; d < n.shape.rank(); ++d) {
    const hlo::PadDimension& p = n.inst->attributes().padding[d];
    const int64_t step = p.interior + 1;
    const int64_t in = operand.shape.dimensions(d);
    const int64_t out = n.shape.dimensions(d);
    // Input i lands at low + i * step; keep the i that land in [0, out).
    int64_t first = p.low >= 0 ? 0 : (-p.low + step - 1) / step;
    int64_t last = out - 1 - p.low < 0 ? -1 : std::min(in - 1, (out - 1 - p.low) / step);
    int64_t count = std::max<int64_t>(0, last - first + 1);
    copy.dims.push_back(count);
    copy.src_map.offset += first * in_strides[d];
    copy.dst_map.offset += (p.low + first * step) * out_strides[d];
    copy.dst_map.strides[d] = step * out_strides[d];
  }
  program_->steps.push_back(std::move(copy));
  return absl::OkStatus();
}

absl::Status Lowering::EmitConcatenate(int node) {
  const Node& n = nodes_[node];
  const int64_t dim = n.inst->attributes().dimensions[0];
  std::vector<int64_t> out_strides = RowMajorStrides(n.shape.dimensions());
  int64_t position = 0;
  for (int operand : n.operands) {
    const Node& o = nodes_[operand];
    CopyStep copy;
    copy.src = o.slot;
    copy.dst = n.slot;
    copy.element_bytes = hlo::ByteWidth(n.shape.element_type());
    copy.dims.assign(o.shape.dimensions().begin(), o.shape.dimensions().end());
    copy.src_map.strides = RowMajorStrides(o.shape.dimensions());
    copy.dst_map.offset = position * out_strides[dim];
    copy.dst_map.strides = out_strides;
    position += o.shape.dimensions(dim);
    program_->steps.push_back(std::move(copy));
  }
  return absl::OkStatus();
}

absl::Status Lowering::EmitDynamicSlice(int node, bool update) {
  const Node& n = nodes_[node];
  const int bytes = hlo::ByteWidth(n.shape.element_type());
  const int first_index = update ? 2 : 1;
  DynamicSliceStep step;
  step.update = update;
  step.element_bytes = bytes;
  const Node& array = nodes_[n.operands[0]];
  step.array_dims.assign(array.shape.dimensions().begin(), array.shape.dimensions().end());
  for (size_t k = first_index; k < n.operands.size(); ++k) {
    step.start_slots.push_back(SlotOf(n.operands[k]));
    step.start_types.push_back(TypeOf(n.operands[k]));
  }
  if (update) {
    // Copy the operand, then write the update into the copy.
    CopyStep copy;
    copy.src = array.slot;
    copy.dst = n.slot;
    copy.element_bytes = bytes;
    copy.dims = {n.shape.ElementCount()};
    copy.src_map.strides = {1};
    copy.dst_map.strides = {1};
    program_->steps.push_back(std::move(copy));
    const Node& upd = nodes_[n.operands[1]];
    step.sizes.assign(upd.shape.dimensions().begin(), upd.shape.dimensions().end());
    step.src = upd.slot;
    step.dst = n.slot;
  } else {
    step.sizes = n.inst->attributes().dynamic_slice_sizes;
    step.src = array.slot;
    step.dst = n.slot;
  }
  program_->steps.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status Lowering::EmitCollective(int node) {
  const Node& n = nodes_[node];
  const Instruction& inst = *n.inst;
  const hlo::Attributes& a = inst.attributes();
  if (nested_) {
    // Rendezvous are keyed per step, not per iteration.
    return absl::UnimplementedError(absl::StrFormat(
        "line %d: %%%s is a collective inside a while body or a conditional "
        "branch, which the host compiler does not support yet",
        inst.line(), inst.name()));
  }
  CollectiveStep step;
  switch (inst.opcode()) {
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
      step.kind = CollectiveStep::Kind::kAllReduce;
      break;
    case Opcode::kAllGather: step.kind = CollectiveStep::Kind::kAllGather; break;
    case Opcode::kReduceScatter: step.kind = CollectiveStep::Kind::kReduceScatter; break;
    case Opcode::kAllToAll: step.kind = CollectiveStep::Kind::kAllToAll; break;
    default: step.kind = CollectiveStep::Kind::kCollectivePermute; break;
  }
  if (inst.opcode() == Opcode::kCollectivePermute) {
    step.mode = a.channel_id.has_value() ? CollectiveStep::Mode::kCrossPartition
                                         : CollectiveStep::Mode::kCrossReplica;
  } else if (!a.channel_id.has_value()) {
    step.mode = CollectiveStep::Mode::kCrossReplica;
  } else if (a.use_global_device_ids) {
    step.mode = CollectiveStep::Mode::kFlattenedId;
  } else {
    step.mode = CollectiveStep::Mode::kCrossReplicaAndPartition;
  }
  step.key = absl::StrCat(node);
  step.name = absl::StrCat(inst.opcode_name(), " ", inst.Describe());
  step.replica_groups = a.replica_groups;
  step.source_target_pairs = a.source_target_pairs;
  if (!a.dimensions.empty()) step.dimension = a.dimensions[0];
  const Shape& in = nodes_[n.operands[0]].shape;
  step.input_dims.assign(in.dimensions().begin(), in.dimensions().end());
  step.output_dims.assign(n.shape.dimensions().begin(), n.shape.dimensions().end());
  for (int operand : n.operands) {
    step.inputs.push_back(SlotOf(operand));
    step.types.push_back(TypeOf(operand));
    step.operand_elements.push_back(nodes_[operand].shape.ElementCount());
  }
  for (int k = node; k < OutputsEnd(node); ++k)
    step.outputs.push_back(nodes_[k].slot);
  if (step.kind == CollectiveStep::Kind::kAllReduce ||
      step.kind == CollectiveStep::Kind::kReduceScatter) {
    std::optional<ExprOp> op = SimpleReducer(*inst.called_computations()[0]);
    if (!op.has_value()) {
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: %%%s reduces with computation %s; the host platform's "
          "collectives support add, multiply, maximum, minimum, and, or",
          inst.line(), inst.name(), inst.called_computations()[0]->name()));
    }
    step.op = *op;
  }
  program_->steps.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status Lowering::EmitKernel(int node) {
  const Node& n = nodes_[node];
  KernelArgs args;
  args.inst = n.inst;
  for (int operand : n.operands) {
    args.inputs.push_back(SlotOf(operand));
    args.input_shapes.push_back(nodes_[operand].shape);
  }
  args.operand_leaves = n.operand_leaves;
  for (int k = node; k < OutputsEnd(node); ++k) {
    args.outputs.push_back(nodes_[k].slot);
    args.output_shapes.push_back(nodes_[k].shape);
  }
  KernelBuilder builder = KernelBuilderOf(*n.inst);
  if (builder == nullptr) {
    return absl::InternalError(absl::StrFormat(
        "%s has no host kernel", n.inst->Describe()));
  }
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<Kernel> kernel, builder(args, *this));
  if (kernel->name.empty()) {
    kernel->name = absl::StrCat(n.inst->opcode_name(), " ", n.inst->Describe());
  }
  program_->steps.push_back(KernelStep{std::move(kernel)});
  return absl::OkStatus();
}

absl::Status Lowering::Emit(int node) {
  Node& n = nodes_[node];
  if (!n.materialize) return absl::OkStatus();
  const Instruction& inst = *n.inst;
  // Slots first.
  switch (n.kind) {
    case Kind::kSource:
      if (inst.opcode() == Opcode::kParameter) {
        n.slot = NewSlot(BufferSlot::Kind::kParameter, n.shape, n.parameter_number);
      } else {
        const std::vector<uint8_t>& data = inst.attributes().literal.data();
        std::vector<uint64_t> storage((data.size() + 7) / 8 + 1, 0);
        std::memcpy(storage.data(), data.data(), data.size());
        program_->constants.push_back(std::move(storage));
        n.slot = NewSlot(BufferSlot::Kind::kConstant, n.shape,
                         static_cast<int64_t>(program_->constants.size()) - 1);
      }
      return absl::OkStatus();
    case Kind::kRunValue:
      n.slot = NewSlot(inst.opcode() == Opcode::kReplicaId
                           ? BufferSlot::Kind::kReplicaId
                           : BufferSlot::Kind::kPartitionId,
                       n.shape);
      return absl::OkStatus();
    case Kind::kReshape:
      n.slot = NewSlot(BufferSlot::Kind::kView, n.shape, SlotOf(n.operands[0]));
      return absl::OkStatus();
    default:
      break;
  }
  const bool multi_output = n.kind == Kind::kKernel ||
                            inst.opcode() == Opcode::kReduce ||
                            inst.opcode() == Opcode::kAllReduce ||
                            inst.opcode() == Opcode::kAllReduceStart;
  if (multi_output && n.first_output != node) {
    return absl::OkStatus();  // emitted with output 0
  }
  if (multi_output) {
    for (int k = node; k < OutputsEnd(node); ++k) {
      nodes_[k].slot = NewSlot(BufferSlot::Kind::kScratch, nodes_[k].shape);
    }
    if (n.kind == Kind::kKernel) return EmitKernel(node);
    return inst.opcode() == Opcode::kReduce ? EmitReduce(node)
                                            : EmitCollective(node);
  }
  n.slot = NewSlot(BufferSlot::Kind::kScratch, n.shape);
  switch (inst.opcode()) {
    case Opcode::kDot:
      return EmitDot(node);
    case Opcode::kPad:
      return EmitPad(node);
    case Opcode::kConcatenate:
      return EmitConcatenate(node);
    case Opcode::kDynamicSlice:
      return EmitDynamicSlice(node, /*update=*/false);
    case Opcode::kDynamicUpdateSlice:
      return EmitDynamicSlice(node, /*update=*/true);
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return EmitCollective(node);
    default:
      return EmitLoop(node);
  }
}

// Who reads and writes each slot, for deciding where donated results may
// be computed in place. Built once per program: O(steps + slots).
struct SlotUses {
  // Per base slot (views resolved): the last step that reads it (-1: none).
  std::vector<int> last_reader;
  // Per slot: the last step that writes it (-1: none), and whether that
  // step is a loop.
  std::vector<int> writer;
  std::vector<bool> writer_is_loop;
};

int BaseSlot(const HostProgram& program, int x) {
  while (x >= 0 && program.slots[x].kind == BufferSlot::Kind::kView) {
    x = static_cast<int>(program.slots[x].index);
  }
  return x;
}

// Calls read(slot, contiguous_loop_input) for every slot `step` reads.
template <typename F>
void ForEachRead(const Step& step, F read) {
  std::visit(
      [&](const auto& st) {
        using S = std::decay_t<decltype(st)>;
        if constexpr (std::is_same_v<S, LoopStep>) {
          for (const LoopInput& in : st.inputs) {
            if (in.kind == LoopInput::Kind::kBuffer)
              read(in.slot, in.contiguous);
          }
        } else if constexpr (std::is_same_v<S, DotStep>) {
          read(st.lhs, false);
          read(st.rhs, false);
        } else if constexpr (std::is_same_v<S, ReduceStep>) {
          read(st.input, false);
          read(st.init, false);
        } else if constexpr (std::is_same_v<S, GenericReduceStep>) {
          for (int x : st.inputs) read(x, false);
          for (int x : st.inits) read(x, false);
        } else if constexpr (std::is_same_v<S, CopyStep>) {
          read(st.src, false);
        } else if constexpr (std::is_same_v<S, FillStep>) {
          read(st.value, false);
        } else if constexpr (std::is_same_v<S, CollectiveStep>) {
          for (int x : st.inputs) read(x, false);
        } else if constexpr (std::is_same_v<S, KernelStep>) {
          for (const SlotAccess& x : st.kernel->reads) read(x.slot, false);
        } else {
          read(st.src, false);
          for (int x : st.start_slots) read(x, false);
        }
      },
      step);
}

SlotUses FindSlotUses(const HostProgram& program) {
  SlotUses uses;
  uses.last_reader.assign(program.slots.size(), -1);
  uses.writer.assign(program.slots.size(), -1);
  uses.writer_is_loop.assign(program.slots.size(), false);
  for (int i = 0; i < static_cast<int>(program.steps.size()); ++i) {
    const Step& step = program.steps[i];
    ForEachRead(step, [&](int slot, bool) {
      const int base = BaseSlot(program, slot);
      if (base >= 0) uses.last_reader[base] = i;
    });
    const auto wrote = [&](int slot) {
      if (slot < 0) return;
      uses.writer[slot] = i;
      uses.writer_is_loop[slot] = std::holds_alternative<LoopStep>(step);
    };
    std::visit(
        [&](const auto& st) {
          using S = std::decay_t<decltype(st)>;
          if constexpr (std::is_same_v<S, LoopStep>) {
            wrote(st.output_slot);
          } else if constexpr (std::is_same_v<S, DotStep> ||
                               std::is_same_v<S, ReduceStep>) {
            wrote(st.out);
          } else if constexpr (std::is_same_v<S, GenericReduceStep> ||
                               std::is_same_v<S, CollectiveStep>) {
            for (int x : st.outputs_or_outs()) wrote(x);
          } else if constexpr (std::is_same_v<S, KernelStep>) {
            for (const SlotAccess& x : st.kernel->writes) wrote(x.slot);
          } else {
            wrote(st.dst);
          }
        },
        step);
  }
  return uses;
}

// True if step `s` reads base slot `slot` other than through contiguous
// loop inputs, or if any later step reads it.
bool UnsafeToOverwrite(const HostProgram& program, const SlotUses& uses,
                       int slot, int s) {
  if (uses.last_reader[slot] > s) return true;
  bool unsafe = false;
  ForEachRead(program.steps[s], [&](int x, bool contiguous) {
    if (BaseSlot(program, x) == slot && !contiguous) unsafe = true;
  });
  return unsafe;
}

absl::Status Lowering::EmitResults() {
  std::vector<bool> claimed(program_->slots.size(), false);
  // Results that may share memory with a parameter (donation).
  std::vector<int> aliased_param(results_.size(), -1);
  for (const auto& [result, param] : options_.aliases) {
    if (result >= 0 && result < static_cast<int>(results_.size())) {
      aliased_param[result] = param;
    }
  }
  const SlotUses uses = FindSlotUses(*program_);
  std::vector<int> slot_of_parameter;
  for (size_t k = 0; k < program_->slots.size(); ++k) {
    const BufferSlot& b = program_->slots[k];
    if (b.kind != BufferSlot::Kind::kParameter) continue;
    if (slot_of_parameter.size() <= static_cast<size_t>(b.index)) {
      slot_of_parameter.resize(b.index + 1, -1);
    }
    slot_of_parameter[b.index] = static_cast<int>(k);
  }
  // Copies that read parameters run before copies into aliased results.
  std::vector<CopyStep> early, late;
  const auto copy_to = [&](int src, int dst, const Shape& shape) {
    CopyStep copy;
    copy.src = src;
    copy.dst = dst;
    copy.element_bytes = hlo::ByteWidth(shape.element_type());
    copy.dims = {shape.ElementCount()};
    copy.src_map.strides = {1};
    copy.dst_map.strides = {1};
    return copy;
  };
  for (size_t i = 0; i < results_.size(); ++i) {
    const Node& n = nodes_[results_[i]];
    BufferSlot& slot = program_->slots[n.slot];
    if (aliased_param[i] >= 0) {
      const int param_slot =
          static_cast<size_t>(aliased_param[i]) < slot_of_parameter.size()
              ? slot_of_parameter[aliased_param[i]]
              : -1;
      const bool scratch =
          slot.kind == BufferSlot::Kind::kScratch && !claimed[n.slot];
      const int writer = scratch ? uses.writer[n.slot] : -1;
      const bool is_loop = scratch && uses.writer_is_loop[n.slot];
      if (writer >= 0 && is_loop &&
          (param_slot < 0 ||
           !UnsafeToOverwrite(*program_, uses, param_slot, writer))) {
        // The loop reads the parameter element by element before writing
        // the same element, and nothing reads it afterwards.
        slot.kind = BufferSlot::Kind::kResult;
        slot.index = static_cast<int64_t>(i);
        claimed[n.slot] = true;
        continue;
      }
      // Otherwise compute elsewhere and copy in at the very end (the copy
      // is skipped at run time when source and destination coincide).
      int result = NewSlot(BufferSlot::Kind::kResult, n.shape, static_cast<int64_t>(i));
      claimed.push_back(true);
      late.push_back(copy_to(n.slot, result, n.shape));
      continue;
    }
    if (slot.kind == BufferSlot::Kind::kScratch && !claimed[n.slot]) {
      // The step that computes it writes straight into the result.
      slot.kind = BufferSlot::Kind::kResult;
      slot.index = static_cast<int64_t>(i);
      claimed[n.slot] = true;
      continue;
    }
    int result = NewSlot(BufferSlot::Kind::kResult, n.shape, static_cast<int64_t>(i));
    claimed.push_back(true);
    early.push_back(copy_to(n.slot, result, n.shape));
  }
  for (CopyStep& c : early) program_->steps.push_back(std::move(c));
  for (CopyStep& c : late) program_->steps.push_back(std::move(c));
  return absl::OkStatus();
}

absl::Status Lowering::PlanScratch() {
  std::vector<BufferSlot>& slots = program_->slots;
  const auto base = [&](int s) {
    while (slots[s].kind == BufferSlot::Kind::kView) s = static_cast<int>(slots[s].index);
    return s;
  };
  const int num_slots = static_cast<int>(slots.size());
  std::vector<int> first(num_slots, -1), last(num_slots, -1);
  const auto touch = [&](int s, int step) {
    if (s < 0) return;
    s = base(s);
    if (first[s] < 0) first[s] = step;
    last[s] = std::max(last[s], step);
  };
  for (int i = 0; i < static_cast<int>(program_->steps.size()); ++i) {
    std::visit(
        [&](const auto& s) {
          using S = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<S, LoopStep>) {
            for (const LoopInput& in : s.inputs) {
              if (in.kind == LoopInput::Kind::kBuffer) touch(in.slot, i);
            }
            touch(s.output_slot, i);
          } else if constexpr (std::is_same_v<S, DotStep>) {
            touch(s.lhs, i); touch(s.rhs, i); touch(s.out, i);
          } else if constexpr (std::is_same_v<S, ReduceStep>) {
            touch(s.input, i); touch(s.init, i); touch(s.out, i);
          } else if constexpr (std::is_same_v<S, GenericReduceStep>) {
            for (int x : s.inputs) touch(x, i);
            for (int x : s.inits) touch(x, i);
            for (int x : s.outs) touch(x, i);
          } else if constexpr (std::is_same_v<S, CopyStep>) {
            touch(s.src, i); touch(s.dst, i);
          } else if constexpr (std::is_same_v<S, FillStep>) {
            touch(s.value, i); touch(s.dst, i);
          } else if constexpr (std::is_same_v<S, CollectiveStep>) {
            for (int x : s.inputs) touch(x, i);
            for (int x : s.outputs) touch(x, i);
          } else if constexpr (std::is_same_v<S, KernelStep>) {
            for (const SlotAccess& x : s.kernel->reads) touch(x.slot, i);
            for (const SlotAccess& x : s.kernel->writes) touch(x.slot, i);
          } else {
            touch(s.src, i); touch(s.dst, i);
            for (int x : s.start_slots) touch(x, i);
          }
        },
        program_->steps[i]);
  }
  // Best fit over the free gaps below the frontier (the end of the highest
  // live block), in O(log n) per slot: a program may have a million.
  std::map<int64_t, int64_t> gaps;                // offset -> size
  std::set<std::pair<int64_t, int64_t>> by_size;  // (size, offset)
  int64_t frontier = 0, top = 0;
  // Live blocks by the last step that uses them: (end, offset, size).
  using Live = std::tuple<int, int64_t, int64_t>;
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  const auto add_gap = [&](int64_t offset, int64_t size) {
    gaps[offset] = size;
    by_size.insert({size, offset});
  };
  const auto remove_gap = [&](std::map<int64_t, int64_t>::iterator it) {
    by_size.erase({it->second, it->first});
    return gaps.erase(it);
  };
  const auto release = [&](int64_t offset, int64_t size) {
    // Coalesce with the gaps on either side.
    auto next = gaps.lower_bound(offset);
    if (next != gaps.end() && next->first == offset + size) {
      size += next->second;
      next = remove_gap(next);
    }
    if (next != gaps.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        remove_gap(prev);
      }
    }
    if (offset + size == frontier) {
      frontier = offset;  // the space above the highest live block
    } else {
      add_gap(offset, size);
    }
  };
  std::vector<int> order;
  for (int s = 0; s < num_slots; ++s) {
    if (slots[s].kind == BufferSlot::Kind::kScratch) order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return first[a] < first[b]; });
  for (int s : order) {
    const int64_t size = std::max<int64_t>((slots[s].bytes + 63) / 64 * 64, 64);
    const int start = first[s];
    // Memory of slots last used before this one is first written is free.
    while (!live.empty() && std::get<0>(live.top()) < start) {
      auto [unused, offset, bytes] = live.top();
      live.pop();
      release(offset, bytes);
    }
    int64_t offset = frontier;
    auto fit = by_size.lower_bound({size, INT64_MIN});
    if (fit != by_size.end()) {
      const auto [gap, at] = *fit;
      remove_gap(gaps.find(at));
      if (gap > size) add_gap(at + size, gap - size);
      offset = at;
    } else {
      frontier += size;
    }
    slots[s].offset = offset;
    live.push({std::max(last[s], start), offset, size});
    top = std::max(top, offset + size);
    if (top > hlo::kMaxArrayBytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the program needs more than %d bytes of scratch memory per run",
          hlo::kMaxArrayBytes));
    }
  }
  program_->scratch_bytes_ = top;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HostProgram>> Lowering::Compile(
    const Computation& entry) {
  std::vector<Value> args;
  // One program parameter per array leaf of the entry's parameters.
  std::function<Value(const Instruction*, const Shape&)> leaves =
      [&](const Instruction* p, const Shape& shape) {
        Value v;
        if (shape.IsTuple()) {
          std::vector<Value> elements;
          for (const Shape& element : shape.tuple_shapes()) {
            elements.push_back(leaves(p, element));
          }
          return Value::Tuple(std::move(elements));
        }
        v.node = NewNode(p, shape, {});
        nodes_[v.node].parameter_number =
            static_cast<int>(program_->parameter_shapes_.size());
        nodes_[v.node].first_output = v.node;
        program_->parameter_shapes_.push_back(shape);
        return v;
      };
  for (const Instruction* p : entry.parameters()) {
    args.push_back(leaves(p, p->shape()));
  }
  PJRT_ASSIGN_OR_RETURN(Value root, LowerComputation(entry, args));
  // Flatten the root into results.
  std::vector<const Value*> pending = {&root};
  std::function<void(const Value&)> flatten = [&](const Value& v) {
    if (!v.is_tuple()) {
      results_.push_back(v.node);
      return;
    }
    for (const Value& e : v.tuple()) flatten(e);
  };
  flatten(root);
  if (static_cast<int64_t>(results_.size()) != entry.root()->shape().leaf_count()) {
    return absl::UnimplementedError(absl::StrFormat(
        "computation %s returns %s, whose parts the host compiler cannot all "
        "produce (an async op's context or a token)",
        entry.name(), entry.root()->shape().ToString()));
  }
  for (int r : results_) {
    program_->result_shapes_.push_back(nodes_[r].shape);
    program_->result_parameters.push_back(nodes_[r].parameter_number);
  }

  FoldTransposedDots();
  DecideMaterialization();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    PJRT_RETURN_IF_ERROR(Emit(static_cast<int>(i)));
  }
  PJRT_RETURN_IF_ERROR(EmitResults());
  PJRT_RETURN_IF_ERROR(PlanScratch());
  // Every access of every step must stay inside its buffer: the last line
  // of defence between a compiler bug and another session's memory.
  PJRT_RETURN_IF_ERROR(program_->CheckBounds());
  return std::move(program_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostProgram>> CompileForHost(
    const hlo::Module& module, const HostCompileOptions& options) {
  return Lowering(module, options).Compile(*module.entry());
}

}  // namespace pjrt::compiler::host
