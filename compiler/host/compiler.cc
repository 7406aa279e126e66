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
#include "compiler/host/host_kernels.h"
#include "compiler/host/lowering.h"
#include "compiler/host/thread_pool.h"
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

namespace lowering {

KernelBuilder KernelBuilderOf(const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::kWhile:
      return BuildWhile;
    case Opcode::kConditional:
      return BuildConditional;
    case Opcode::kMap:
      return BuildMap;
    case Opcode::kGather:
      return BuildGather;
    case Opcode::kScatter:
      return BuildScatter;
    case Opcode::kSort:
      return BuildSort;
    case Opcode::kTopK:
      return BuildTopK;
    case Opcode::kReduceWindow:
      return BuildReduceWindow;
    case Opcode::kSelectAndScatter:
      return BuildSelectAndScatter;
    case Opcode::kConvolution:
      return BuildConvolution;
    case Opcode::kRngBitGenerator:
      return BuildRngBitGenerator;
    case Opcode::kFft:
      return BuildFft;
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
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart:
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
    case Opcode::kFft:
    case Opcode::kCustomCall:  // TopK (others alias their operand)
      return Kind::kKernel;
    default:
      return Kind::kElementwise;
  }
}

absl::StatusOr<ExprOp> ElementwiseOp(const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::kAbs:
      return ExprOp::kAbs;
    case Opcode::kNegate:
      return ExprOp::kNegate;
    case Opcode::kSign:
      return ExprOp::kSign;
    case Opcode::kExp:
      return ExprOp::kExp;
    case Opcode::kExpm1:
      return ExprOp::kExpm1;
    case Opcode::kLog:
      return ExprOp::kLog;
    case Opcode::kLog1p:
      return ExprOp::kLog1p;
    case Opcode::kSqrt:
      return ExprOp::kSqrt;
    case Opcode::kRsqrt:
      return ExprOp::kRsqrt;
    case Opcode::kCbrt:
      return ExprOp::kCbrt;
    case Opcode::kTanh:
      return ExprOp::kTanh;
    case Opcode::kLogistic:
      return ExprOp::kLogistic;
    case Opcode::kSin:
      return ExprOp::kSin;
    case Opcode::kCos:
      return ExprOp::kCos;
    case Opcode::kTan:
      return ExprOp::kTan;
    case Opcode::kErf:
      return ExprOp::kErf;
    case Opcode::kFloor:
      return ExprOp::kFloor;
    case Opcode::kCeil:
      return ExprOp::kCeil;
    case Opcode::kRoundNearestAfz:
      return ExprOp::kRoundAfz;
    case Opcode::kRoundNearestEven:
      return ExprOp::kRoundEven;
    case Opcode::kIsFinite:
      return ExprOp::kIsFinite;
    case Opcode::kNot:
      return ExprOp::kNot;
    case Opcode::kPopcnt:
      return ExprOp::kPopcnt;
    case Opcode::kClz:
      return ExprOp::kClz;
    case Opcode::kReducePrecision:
      return ExprOp::kReducePrecision;
    case Opcode::kConvert:
      return ExprOp::kConvert;
    case Opcode::kBitcastConvert:
      return ExprOp::kBitcastConvert;
    case Opcode::kAdd:
      return ExprOp::kAdd;
    case Opcode::kSubtract:
      return ExprOp::kSubtract;
    case Opcode::kMultiply:
      return ExprOp::kMultiply;
    case Opcode::kDivide:
      return ExprOp::kDivide;
    case Opcode::kRemainder:
      return ExprOp::kRemainder;
    case Opcode::kPower:
      return ExprOp::kPower;
    case Opcode::kMaximum:
      return ExprOp::kMaximum;
    case Opcode::kMinimum:
      return ExprOp::kMinimum;
    case Opcode::kAtan2:
      return ExprOp::kAtan2;
    case Opcode::kAnd:
      return ExprOp::kAnd;
    case Opcode::kOr:
      return ExprOp::kOr;
    case Opcode::kXor:
      return ExprOp::kXor;
    case Opcode::kShiftLeft:
      return ExprOp::kShiftLeft;
    case Opcode::kShiftRightLogical:
      return ExprOp::kShiftRightLogical;
    case Opcode::kShiftRightArithmetic:
      return ExprOp::kShiftRightArithmetic;
    case Opcode::kCompare:
      return ExprOp::kCompare;
    case Opcode::kSelect:
      return ExprOp::kSelect;
    case Opcode::kClamp:
      return ExprOp::kClamp;
    case Opcode::kReal:
      return ExprOp::kReal;
    case Opcode::kImag:
      return ExprOp::kImag;
    case Opcode::kComplex:
      return ExprOp::kComplex;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: op '%s' (%%%s) cannot be computed element-wise by the "
          "host compiler",
          inst.line(), inst.opcode_name(), inst.name()));
  }
}

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

namespace {

// The dimensions of `shape` from major to minor (its layout reversed;
// row-major when it has none).
std::vector<int64_t> MajorToMinor(const Shape& shape) {
  std::vector<int64_t> order(shape.rank());
  if (shape.layout().has_value() &&
      static_cast<int>(shape.layout()->size()) == shape.rank()) {
    order.assign(shape.layout()->rbegin(), shape.layout()->rend());
  } else {
    for (int d = 0; d < shape.rank(); ++d) order[d] = d;
  }
  return order;
}

bool IsIdentityOrder(const std::vector<int64_t>& order) {
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d] != static_cast<int64_t>(d)) return false;
  }
  return true;
}

}  // namespace

Lowering::Value Lowering::LowerBitcast(const Instruction& inst,
                                       const Value& operand) {
  const Shape& in = inst.operand(0)->shape();
  const Shape& out = inst.shape();
  const std::vector<int64_t> in_order = MajorToMinor(in);
  const std::vector<int64_t> out_order = MajorToMinor(out);
  Value v;
  const auto add = [&](const Instruction* made, const Shape& shape, int from) {
    const int id = NewNode(made, shape, {from});
    nodes_[id].first_output = id;
    return id;
  };
  if (IsIdentityOrder(in_order) && IsIdentityOrder(out_order)) {
    v.node = add(&inst, out, operand.node);  // a view
    return v;
  }
  // XLA reinterprets the physical buffer: bring the operand into its
  // physical (major-to-minor) order, view that as the result's physical
  // dimensions, and bring those into the result's logical order.
  const auto synthetic = [&](Opcode op, absl::string_view op_name,
                             const Shape& shape,
                             std::vector<int64_t> dimensions) {
    auto made =
        std::make_unique<Instruction>(absl::StrCat(inst.name(), ".", op_name),
                                      op, std::string(op_name), shape);
    made->set_position(inst.line(), inst.column());
    made->mutable_attributes()->dimensions = std::move(dimensions);
    synthetic_.push_back(std::move(made));
    return synthetic_.back().get();
  };
  int node = operand.node;
  const auto physical = [](const Shape& s, const std::vector<int64_t>& order) {
    std::vector<int64_t> dims;
    for (int64_t d : order) dims.push_back(s.dimensions(d));
    return Shape(s.element_type(), dims);
  };
  if (!IsIdentityOrder(in_order)) {
    const Shape shape = physical(in, in_order);
    node = add(synthetic(Opcode::kTranspose, "transpose", shape, in_order),
               shape, node);
  }
  const Shape out_physical = physical(out, out_order);
  node = add(synthetic(Opcode::kReshape, "reshape", out_physical, {}),
             out_physical, node);
  if (!IsIdentityOrder(out_order)) {
    std::vector<int64_t> inverse(out_order.size());
    for (size_t k = 0; k < out_order.size(); ++k) inverse[out_order[k]] = k;
    Shape logical(
        out.element_type(),
        std::vector<int64_t>(out.dimensions().begin(), out.dimensions().end()));
    node = add(synthetic(Opcode::kTranspose, "transpose", logical, inverse),
               logical, node);
  }
  v.node = node;
  return v;
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
      for (int i = 0; i < inst.operand_count(); ++i)
        call_args.push_back(operand(i));
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
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart: {
      // (operand, result): the collective runs here, synchronously.
      if (operand(0).is_tuple()) break;  // refused below
      Value result;
      result.node =
          NewNode(&inst, inst.shape().tuple_shapes()[1], {operand(0).node});
      nodes_[result.node].first_output = result.node;
      return Value::Tuple({operand(0), result});
    }
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteDone:
      return operand(0).tuple()[1];
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
    case Opcode::kBitcast:
      return LowerBitcast(inst, operand(0));
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
        for (const Shape& e : shape.tuple_shapes())
          elements.push_back(build(e));
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
    if (inst.opcode() != Opcode::kReduce &&
        inst.opcode() != Opcode::kAllReduce &&
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
  std::vector<std::pair<const Instruction*, int>> stack = {
      {computation.root(), 0}};
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
    if (transpose.inst->opcode() != Opcode::kTranspose ||
        transpose.shape.rank() != 2 ||
        transpose.inst->attributes().dimensions != std::vector<int64_t>{1, 0}) {
      continue;
    }
    const int d = transpose.operands[0];
    Node& dot = nodes_[d];
    if (dot.inst->opcode() != Opcode::kDot || dot.dot_swapped || is_result[d] ||
        users[d].size() != 1 ||
        !dot.inst->attributes()
             .dot_dimension_numbers.lhs_batch_dimensions.empty()) {
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
    distinct.erase(std::unique(distinct.begin(), distinct.end()),
                   distinct.end());
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
        case Opcode::kAllGatherStart:
        case Opcode::kReduceScatter:
        case Opcode::kAllToAll:
        case Opcode::kCollectivePermute:
        case Opcode::kCollectivePermuteStart:
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

int Lowering::NewSlot(BufferSlot::Kind kind, const Shape& shape,
                      int64_t index) {
  BufferSlot slot;
  slot.kind = kind;
  slot.shape = shape;
  slot.index = index;
  slot.bytes = shape.UnpackedByteSize();
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
  input.contiguous = input.map.offset == 0 &&
                     input.map.strides == RowMajorStrides(lb.step.dims);
  lb.step.inputs.push_back(input);
  return lb.step.expr.AddInput(static_cast<int>(lb.step.inputs.size()) - 1,
                               input.type);
}

absl::StatusOr<int> Lowering::Build(LoopBuilder& lb, int node,
                                    const Transform& t) {
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
        "%%%s should have been materialized before use in a loop",
        inst.name()));
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
  PJRT_ASSIGN_OR_RETURN(int out,
                        Build(lb, node, Transform::Identity(n.shape.rank())));
  lb.step.expr.AddOutput(out);
  lb.step.expr.Finalize();
  program_->steps.push_back(std::move(lb.step));
  return absl::OkStatus();
}

absl::StatusOr<int> Lowering::EmitPermuted(int node,
                                           const std::vector<int64_t>& order,
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
  // Random bits fill whole bytes: s4 and u4 would leave their range.
  if (n.inst->opcode() == Opcode::kRngBitGenerator ||
      n.inst->opcode() == Opcode::kRng) {
    for (const Shape& shape : args.output_shapes) {
      if (IsInt4(shape.element_type())) {
        return absl::UnimplementedError(absl::StrFormat(
            "%s: %s of %s is not supported by the host compiler yet",
            n.inst->Describe(), n.inst->opcode_name(), shape.ToString()));
      }
    }
  }
  // Control flow and gather move complex values as bytes and fft computes
  // on them; the other kernels compute on real values only.
  const Opcode op = n.inst->opcode();
  if (op != Opcode::kWhile && op != Opcode::kConditional &&
      op != Opcode::kGather && op != Opcode::kFft) {
    for (const auto* shapes : {&args.input_shapes, &args.output_shapes}) {
      for (const Shape& shape : *shapes) {
        if (hlo::IsComplex(shape.element_type())) {
          return absl::UnimplementedError(absl::StrFormat(
              "%s: %s of %s is not supported by the host compiler yet "
              "(complex types run through element-wise ops, dot, reduce, "
              "fft, gather, data movement and control flow)",
              n.inst->Describe(), n.inst->opcode_name(), shape.ToString()));
        }
      }
    }
  }
  KernelBuilder builder = KernelBuilderOf(*n.inst);
  if (builder == nullptr) {
    return absl::InternalError(
        absl::StrFormat("%s has no host kernel", n.inst->Describe()));
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
        n.slot =
            NewSlot(BufferSlot::Kind::kParameter, n.shape, n.parameter_number);
        if (!nested_ && IsInt4(n.shape.element_type())) {
          // The buffer holds it packed: unpack once into scratch.
          const int packed = n.slot;
          program_->slots[packed].bytes = n.shape.ByteSize();
          n.slot = NewSlot(BufferSlot::Kind::kScratch, n.shape);
          program_->steps.push_back(KernelStep{Int4EdgeKernel(
              /*pack=*/false, n.shape.element_type(), n.shape.ElementCount(),
              packed, n.slot)});
        }
      } else {
        const std::vector<uint8_t>& data = inst.attributes().literal.data();
        std::vector<uint64_t> storage((data.size() + 7) / 8 + 1, 0);
        if (!data.empty())
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
    case Opcode::kAllGatherStart:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart:
      return EmitCollective(node);
    default:
      return EmitLoop(node);
  }
}

absl::StatusOr<std::unique_ptr<HostProgram>> Lowering::Compile(
    const Computation& entry) {
  std::vector<Value> args;
  // One program parameter per array leaf of the entry's parameters.
  // Tokens carry nothing: no argument (in a loop's state, nothing to keep).
  bool has_token = false;
  std::function<Value(const Instruction*, const Shape&)> leaves =
      [&](const Instruction* p, const Shape& shape) {
        Value v;
        if (shape.IsToken()) {
          has_token = true;
          return Value::Tuple({});
        }
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
  if (has_token && !nested_) {
    return absl::UnimplementedError(absl::StrFormat(
        "computation %s takes a token parameter; the host compiler supports "
        "tokens only inside a program",
        entry.name()));
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
  std::function<int64_t(const Shape&)> arrays = [&](const Shape& s) {
    if (s.IsToken()) return int64_t{0};
    if (!s.IsTuple()) return int64_t{1};
    int64_t n = 0;
    for (const Shape& e : s.tuple_shapes()) n += arrays(e);
    return n;
  };
  if (static_cast<int64_t>(results_.size()) != arrays(entry.root()->shape())) {
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
    // The steps just made come from this node's instruction.
    const Instruction* inst = nodes_[i].inst;
    program_->step_origins.resize(
        program_->steps.size(),
        inst != nullptr
            ? absl::StrFormat("%%%s (line %d)", inst->name(), inst->line())
            : std::string());
  }
  PJRT_RETURN_IF_ERROR(EmitResults());
  program_->step_origins.resize(program_->steps.size(),
                                "the program's results");
  PJRT_RETURN_IF_ERROR(PlanScratch());
  program_->step_origins.resize(program_->steps.size());
  // Every access of every step must stay inside its buffer: the last line
  // of defence between a compiler bug and another session's memory.
  PJRT_RETURN_IF_ERROR(program_->CheckBounds());
  return std::move(program_);
}

}  // namespace lowering

absl::StatusOr<std::unique_ptr<HostProgram>> CompileForHost(
    const hlo::Module& module, const HostCompileOptions& options) {
  return lowering::Lowering(module, options).Compile(*module.entry());
}

namespace {

class HostBackend : public Backend {
 public:
  // Chooses the host kernels now (HostKernels()), so that a module that
  // does not load is reported when the platform starts, not at its first
  // run.
  explicit HostBackend(const device::Platform& platform)
      : kind_(platform.device_count() > 0 ? platform.Describe(0).kind : "cpu"),
        kernels_(HostKernelsDescription()) {}

  const std::string& platform() const override { return platform_; }
  std::string fingerprint() const override {
    // Host programs are data for this very binary's loops: nothing but the
    // device kind varies.
    return absl::StrCat("host;", kind_);
  }
  std::string Describe() const override {
#if defined(PJRT_HAVE_ONEDNN)
    constexpr const char* kDot = "oneDNN f32 dot, Eigen dot";
#else
    constexpr const char* kDot = "Eigen dot";
#endif
    return absl::StrFormat(
        "host: fused loops, %s and FFT, %d compute threads; kernels %s", kDot,
        ThreadPool::Get().num_threads(), kernels_);
  }
  std::string target() const override { return HostKernels().isa; }
  absl::StatusOr<std::unique_ptr<Program>> Compile(
      const hlo::Module& module, const BackendOptions& options) const override {
    HostCompileOptions host_options;
    host_options.aliases = options.aliases;
    PJRT_ASSIGN_OR_RETURN(std::unique_ptr<HostProgram> program,
                          CompileForHost(module, host_options));
    return std::unique_ptr<Program>(std::move(program));
  }

 private:
  const std::string platform_ = "host";
  const std::string kind_;
  const std::string kernels_;  // HostKernelsDescription()
};

}  // namespace

std::unique_ptr<Backend> CreateHostBackend(const device::Platform& platform) {
  return std::make_unique<HostBackend>(platform);
}

}  // namespace pjrt::compiler::host
