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
    case Opcode::kTriangularSolve:
      return BuildTriangularSolve;
    case Opcode::kCholesky:
      return BuildCholesky;
    case Opcode::kRaggedDot:
      return BuildRaggedDot;
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
    case Opcode::kTriangularSolve:
    case Opcode::kCholesky:
    case Opcode::kRaggedDot:
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
    case Opcode::kDomain:
    case Opcode::kAsyncUpdate:
    case Opcode::kAllReduceDone:
      return operand(0);
    case Opcode::kCustomCall:
      // Identity annotations (verified); TopK is a kernel.
      if (inst.attributes().custom_call_target != "TopK") return operand(0);
      break;
    case Opcode::kBitcast:
      return LowerBitcast(inst, operand(0));
    case Opcode::kBitcastConvert: {
      // Across widths, or of complex numbers, a view of the operand's
      // bytes (buffers are row-major, little-endian, as XLA's are).
      const hlo::PrimitiveType from = inst.operand(0)->shape().element_type();
      const hlo::PrimitiveType to = inst.shape().element_type();
      if (hlo::ByteWidth(from) == hlo::ByteWidth(to) && !hlo::IsComplex(from) &&
          !hlo::IsComplex(to)) {
        break;  // element-wise
      }
      auto view = std::make_unique<Instruction>(
          absl::StrCat(inst.name(), ".bitcast"), Opcode::kBitcast, "bitcast",
          inst.shape());
      view->set_position(inst.line(), inst.column());
      synthetic_.push_back(std::move(view));
      Value v;
      v.node =
          NewNode(synthetic_.back().get(), inst.shape(), {operand(0).node});
      nodes_[v.node].first_output = v.node;
      return v;
    }
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
  for (const Instruction* inst : computation.PostOrder()) {
    PJRT_ASSIGN_OR_RETURN(Value value, LowerInstruction(*inst, args, done));
    done.emplace(inst, std::move(value));
  }
  return done.at(computation.root());
}

absl::StatusOr<std::unique_ptr<HostProgram>> Lowering::Compile(
    const Computation& entry) {
  computation_name_ = entry.name();
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

hlo::SimplifyOptions HostSimplifyOptions() {
  hlo::SimplifyOptions options;
  options.keep_plain_ragged_dots = true;
  return options;
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
  hlo::SimplifyOptions simplify_options() const override {
    return HostSimplifyOptions();
  }
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
