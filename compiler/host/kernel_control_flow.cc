// while, conditional and map: kernels that run computations of the module
// (compiled as programs of their own, or as scalar expressions for map).
#include "compiler/host/kernel_control_flow.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/host_program.h"
#include "compiler/host/kernel_map.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"

namespace pjrt::compiler::host {

namespace {

// The value of `inst` if it is a constant s32, s64 or u32 scalar.
std::optional<int64_t> ScalarInteger(const hlo::Instruction* inst) {
  if (inst->opcode() != hlo::Opcode::kConstant || !inst->shape().IsArray() ||
      inst->shape().rank() != 0) {
    return std::nullopt;
  }
  const hlo::Literal& literal = inst->attributes().literal;
  switch (inst->shape().element_type()) {
    case hlo::PrimitiveType::kS32:
      return literal.Get<int32_t>(0);
    case hlo::PrimitiveType::kU32:
      return literal.Get<uint32_t>(0);
    case hlo::PrimitiveType::kS64:
      return literal.Get<int64_t>(0);
    default:
      return std::nullopt;
  }
}

// True if `inst` is get-tuple-element `index` of `param`.
bool IsElement(const hlo::Instruction* inst, const hlo::Instruction* param,
               int64_t index) {
  return inst->opcode() == hlo::Opcode::kGetTupleElement &&
         inst->operand(0) == param && inst->attributes().tuple_index == index;
}

}  // namespace

bool PassesThrough(const hlo::Instruction& loop, int leaf) {
  const hlo::Computation& body = *loop.called_computations()[1];
  const hlo::Instruction* root = body.root();
  if (body.parameters().size() != 1 || root == nullptr ||
      root->opcode() != hlo::Opcode::kTuple ||
      body.parameters()[0]->shape().tuple_depth() != 1 || leaf < 0 ||
      leaf >= root->operand_count()) {
    return false;
  }
  return IsElement(root->operand(leaf), body.parameters()[0], leaf);
}

int64_t KnownTripCount(const hlo::Instruction& loop) {
  const hlo::Computation& condition = *loop.called_computations()[0];
  const hlo::Computation& body = *loop.called_computations()[1];
  if (condition.parameters().size() != 1 || body.parameters().size() != 1 ||
      condition.root()->opcode() != hlo::Opcode::kCompare) {
    return -1;
  }
  // The state is the counter itself, or a tuple with the counter at k.
  const bool tuple = loop.shape().IsTuple();
  const hlo::Instruction* compare = condition.root();
  const auto is_counter = [&](const hlo::Instruction* inst,
                              const hlo::Instruction* param, int64_t k) {
    return tuple ? IsElement(inst, param, k) : inst == param;
  };
  // counter < limit (or <=), either way round.
  const hlo::Instruction* counter = compare->operand(0);
  const hlo::Instruction* limit = compare->operand(1);
  hlo::ComparisonDirection direction =
      compare->attributes().comparison_direction;
  if (ScalarInteger(counter).has_value()) {
    std::swap(counter, limit);
    if (direction == hlo::ComparisonDirection::kGt) {
      direction = hlo::ComparisonDirection::kLt;
    } else if (direction == hlo::ComparisonDirection::kGe) {
      direction = hlo::ComparisonDirection::kLe;
    } else {
      return -1;
    }
  }
  if (direction != hlo::ComparisonDirection::kLt &&
      direction != hlo::ComparisonDirection::kLe) {
    return -1;
  }
  const int64_t k = tuple && counter->opcode() == hlo::Opcode::kGetTupleElement
                        ? counter->attributes().tuple_index
                        : -1;
  const std::optional<int64_t> n = ScalarInteger(limit);
  if (!n.has_value() || !is_counter(counter, condition.parameters()[0], k)) {
    return -1;
  }
  // It starts at a constant...
  const hlo::Instruction* init = loop.operand(0);
  const hlo::Instruction* result = body.root();
  if (tuple) {
    if (init->opcode() != hlo::Opcode::kTuple ||
        result->opcode() != hlo::Opcode::kTuple || k >= init->operand_count() ||
        k >= result->operand_count()) {
      return -1;
    }
    init = init->operand(k);
    result = result->operand(k);
  }
  const std::optional<int64_t> start = ScalarInteger(init);
  if (!start.has_value() ||
      init->shape().element_type() != limit->shape().element_type()) {
    return -1;
  }
  // ...and the body adds one to it.
  if (result->opcode() != hlo::Opcode::kAdd) return -1;
  const hlo::Instruction* body_param = body.parameters()[0];
  const hlo::Instruction* a = result->operand(0);
  const hlo::Instruction* b = result->operand(1);
  if (!is_counter(a, body_param, k)) std::swap(a, b);
  if (!is_counter(a, body_param, k) ||
      ScalarInteger(b) != std::optional<int64_t>(1)) {
    return -1;
  }
  const bool inclusive = direction == hlo::ComparisonDirection::kLe;
  if (inclusive) {
    // counter <= the type's largest value holds forever (it wraps).
    const hlo::PrimitiveType t = limit->shape().element_type();
    const int64_t largest = t == hlo::PrimitiveType::kS32   ? INT32_MAX
                            : t == hlo::PrimitiveType::kU32 ? UINT32_MAX
                                                            : INT64_MAX;
    if (*n == largest) return -1;
  }
  if (*start > *n || (*start == *n && !inclusive)) return 0;
  const __int128 count =
      static_cast<__int128>(*n) - *start + (inclusive ? 1 : 0);
  return count > INT64_MAX ? -1 : static_cast<int64_t>(count);
}

absl::Status WhileKernel::Run(absl::Span<void* const> addresses,
                              const RunContext& context) const {
  const size_t n = state.size();
  std::vector<void*> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = addresses[state[i]];
    b[i] = spare[i] >= 0 ? addresses[spare[i]] : a[i];
    if (addresses[init[i]] != a[i]) {
      std::memmove(a[i], addresses[init[i]], bytes[i]);
    }
  }
  RunContext sub = context;
  sub.scratch = addresses[scratch];
  uint8_t pred = 0;
  void* const pred_result[1] = {&pred};
  for (int64_t iteration = 0;; ++iteration) {
    PJRT_RETURN_IF_ERROR(CheckCancelled(context.cancellation));
    sub.arguments = a;
    if (trip_count >= 0) {
      // The condition only counts: no need to run it.
      if (iteration == trip_count) break;
    } else {
      sub.results = pred_result;
      PJRT_RETURN_IF_ERROR(condition->Run(sub));
      if (pred == 0) break;
    }
    sub.results = b;
    PJRT_RETURN_IF_ERROR(body->Run(sub));
    std::swap(a, b);
  }
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != addresses[state[i]]) {
      std::memcpy(addresses[state[i]], a[i], bytes[i]);
    }
  }
  return absl::OkStatus();
}

int64_t WhileKernel::host_memory_bytes() const {
  return condition->host_memory_bytes() + body->host_memory_bytes();
}

absl::Status ConditionalKernel::Run(absl::Span<void* const> addresses,
                                    const RunContext& context) const {
  const void* chosen_by = addresses[selector];
  int64_t branch = 0;
  if (selector_is_pred) {
    branch = *static_cast<const uint8_t*>(chosen_by) != 0 ? 0 : 1;
  } else {
    int32_t index = 0;
    std::memcpy(&index, chosen_by, sizeof(index));
    const int64_t last = static_cast<int64_t>(branches.size()) - 1;
    // XLA: an index out of range runs the last branch.
    branch = index < 0 || index > last ? last : index;
  }
  const Branch& b = branches[branch];
  std::vector<void*> arguments, results;
  for (int slot : b.inputs) arguments.push_back(addresses[slot]);
  for (int slot : outputs) results.push_back(addresses[slot]);
  RunContext sub = context;
  sub.arguments = arguments;
  sub.results = results;
  sub.scratch = addresses[scratch];
  return b.program->Run(sub);
}

int64_t ConditionalKernel::host_memory_bytes() const {
  int64_t bytes = 0;
  for (const Branch& b : branches) bytes += b.program->host_memory_bytes();
  return bytes;
}

absl::Status MapKernel::Run(absl::Span<void* const> addresses,
                            const RunContext& context) const {
  const int64_t blocks = (count + kBlockElements - 1) / kBlockElements;
  ThreadPool::Get().ParallelFor(
      blocks, expr.CyclesPerElement() * kBlockElements,
      [&](int64_t first, int64_t last) {
        RegionRunner runner(expr);
        runner.SetOutputTypes({output_type});
        std::vector<std::vector<uint64_t>> in(
            inputs.size(), std::vector<uint64_t>(kBlockWords));
        std::vector<uint64_t> out(kBlockWords);
        std::vector<const void*> in_ptrs(inputs.size());
        for (int64_t block = first; block < last; ++block) {
          if (IsCancelled(context.cancellation)) return;
          const int64_t begin = block * kBlockElements;
          const int64_t n = std::min(kBlockElements, count - begin);
          for (size_t i = 0; i < inputs.size(); ++i) {
            const int width = hlo::ByteWidth(types[i]);
            StorageToCompute(
                types[i],
                static_cast<const char*>(addresses[inputs[i]]) + begin * width,
                in[i].data(), n);
            in_ptrs[i] = in[i].data();
          }
          void* out_ptr = out.data();
          runner.Evaluate(in_ptrs, n, {&out_ptr, 1});
          ComputeToStorage(output_type, out.data(),
                           static_cast<char*>(addresses[output]) +
                               begin * hlo::ByteWidth(output_type),
                           n);
        }
      });
  return CheckCancelled(context.cancellation);
}

namespace {

// The state leaves (of `leaves`) that `body` returns as a
// dynamic-update-slice of the same leaf of its parameter: a scan's stacked
// outputs, an accumulator written a tile at a time. The body is compiled
// with each such result aliased to its argument, so that the update is
// written into the state where it lies instead of into a copy of it.
std::vector<int> UpdatedInPlace(const hlo::Computation& body, size_t leaves) {
  std::vector<int> in_place;
  const hlo::Instruction* root = body.root();
  // A flat tuple of arrays: element i is leaf i.
  if (body.parameters().size() != 1 || root == nullptr ||
      root->opcode() != hlo::Opcode::kTuple ||
      static_cast<size_t>(root->operand_count()) != leaves ||
      body.parameters()[0]->shape().tuple_depth() != 1) {
    return in_place;
  }
  for (int i = 0; i < root->operand_count(); ++i) {
    const hlo::Instruction* result = root->operand(i);
    if (result->opcode() != hlo::Opcode::kDynamicUpdateSlice ||
        !result->shape().IsArray()) {
      continue;
    }
    if (IsElement(result->operand(0), body.parameters()[0], i)) {
      in_place.push_back(i);
    }
  }
  return in_place;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildWhile(const KernelArgs& args,
                                                   KernelCompiler& compiler) {
  const hlo::Instruction& inst = *args.inst;
  auto kernel = std::make_shared<WhileKernel>();
  PJRT_ASSIGN_OR_RETURN(kernel->condition, compiler.CompileComputation(
                                               *inst.called_computations()[0]));
  const hlo::Computation& body = *inst.called_computations()[1];
  const std::vector<int> in_place = UpdatedInPlace(body, args.outputs.size());
  std::vector<std::pair<int, int>> aliases;
  for (int i : in_place) aliases.emplace_back(i, i);
  PJRT_ASSIGN_OR_RETURN(kernel->body,
                        compiler.CompileComputation(body, std::move(aliases)));
  const size_t n = args.outputs.size();
  if (args.inputs.size() != n || kernel->body->result_parameters.size() != n) {
    return absl::InternalError(absl::StrFormat("%s: %d state leaves in, %d out",
                                               inst.Describe(),
                                               args.inputs.size(), n));
  }
  kernel->trip_count = KnownTripCount(inst);
  for (size_t i = 0; i < n; ++i) {
    const int64_t bytes = args.output_shapes[i].UnpackedByteSize();
    kernel->init.push_back(args.inputs[i]);
    kernel->state.push_back(args.outputs[i]);
    kernel->bytes.push_back(bytes);
    // A leaf the body passes through, or updates in place, has no spare:
    // the body's result is the argument's memory.
    const bool pass_through =
        kernel->body->result_parameters[i] == static_cast<int>(i);
    const bool updated = std::find(in_place.begin(), in_place.end(),
                                   static_cast<int>(i)) != in_place.end();
    kernel->spare.push_back(
        pass_through || updated ? -1 : compiler.NewScratch(bytes));
    kernel->reads.push_back({args.inputs[i], bytes});
    kernel->writes.push_back({args.outputs[i], bytes});
    if (kernel->spare.back() >= 0) {
      kernel->writes.push_back({kernel->spare.back(), bytes});
    }
  }
  const int64_t scratch = std::max(kernel->condition->scratch_bytes(),
                                   kernel->body->scratch_bytes());
  kernel->scratch = compiler.NewScratch(scratch);
  kernel->writes.push_back({kernel->scratch, scratch});
  return kernel;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildConditional(
    const KernelArgs& args, KernelCompiler& compiler) {
  const hlo::Instruction& inst = *args.inst;
  auto kernel = std::make_shared<ConditionalKernel>();
  kernel->selector = args.inputs[0];
  kernel->selector_is_pred =
      args.input_shapes[0].element_type() == hlo::PrimitiveType::kPred;
  kernel->reads.push_back(
      {args.inputs[0], args.input_shapes[0].UnpackedByteSize()});
  int64_t scratch = 0;
  size_t next = static_cast<size_t>(args.operand_leaves[0]);
  for (size_t b = 0; b < inst.called_computations().size(); ++b) {
    ConditionalKernel::Branch branch;
    PJRT_ASSIGN_OR_RETURN(branch.program, compiler.CompileComputation(
                                              *inst.called_computations()[b]));
    for (int k = 0; k < args.operand_leaves[b + 1]; ++k, ++next) {
      branch.inputs.push_back(args.inputs[next]);
      kernel->reads.push_back(
          {args.inputs[next], args.input_shapes[next].UnpackedByteSize()});
    }
    if (branch.program->result_shapes().size() != args.outputs.size()) {
      return absl::InternalError(absl::StrFormat(
          "%s: branch %d returns %d leaves, not %d", inst.Describe(), b,
          branch.program->result_shapes().size(), args.outputs.size()));
    }
    scratch = std::max(scratch, branch.program->scratch_bytes());
    kernel->branches.push_back(std::move(branch));
  }
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    kernel->outputs.push_back(args.outputs[i]);
    kernel->writes.push_back(
        {args.outputs[i], args.output_shapes[i].UnpackedByteSize()});
  }
  kernel->scratch = compiler.NewScratch(scratch);
  kernel->writes.push_back({kernel->scratch, scratch});
  return kernel;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildMap(const KernelArgs& args,
                                                 KernelCompiler&) {
  auto kernel = std::make_shared<MapKernel>();
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    kernel->inputs.push_back(args.inputs[i]);
    kernel->types.push_back(args.input_shapes[i].element_type());
    kernel->reads.push_back(
        {args.inputs[i], args.input_shapes[i].UnpackedByteSize()});
  }
  PJRT_ASSIGN_OR_RETURN(
      kernel->expr, ScalarRegionExpression(*args.inst->called_computations()[0],
                                           kernel->types));
  kernel->output = args.outputs[0];
  kernel->output_type = args.output_shapes[0].element_type();
  kernel->count = args.output_shapes[0].ElementCount();
  kernel->writes.push_back(
      {args.outputs[0], args.output_shapes[0].UnpackedByteSize()});
  return kernel;
}

}  // namespace pjrt::compiler::host
