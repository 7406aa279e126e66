// The emitters of fused element-wise loops and of kernels (see lowering.h):
// a node the buffer assignment (lower_memory.cc) materializes becomes a loop
// over its fused operands, a permuted copy, or a kernel call.
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
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_control_flow.h"
#include "compiler/host/lowering.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host::lowering {

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
  // Random bits fill whole bytes: the sub-byte integers would leave their
  // range (rng-bit-generator takes no float results).
  if (n.inst->opcode() == Opcode::kRngBitGenerator ||
      n.inst->opcode() == Opcode::kRng) {
    for (const Shape& shape : args.output_shapes) {
      if (IsSubByteInt(shape.element_type())) {
        return absl::UnimplementedError(absl::StrFormat(
            "%s: %s of %s is not supported by the host compiler yet",
            n.inst->Describe(), n.inst->opcode_name(), shape.ToString()));
      }
    }
  }
  // Control flow and gather move complex values as bytes; scatter, sort,
  // the windows and map run their regions on them; convolution, fft,
  // triangular-solve and cholesky compute on them. Top-k and random
  // numbers take real values only.
  const Opcode op = n.inst->opcode();
  if (op == Opcode::kTopK || op == Opcode::kRng ||
      op == Opcode::kRngBitGenerator || op == Opcode::kCustomCall) {
    for (const auto* shapes : {&args.input_shapes, &args.output_shapes}) {
      for (const Shape& shape : *shapes) {
        if (hlo::IsComplex(shape.element_type())) {
          return absl::UnimplementedError(absl::StrFormat(
              "%s: %s of %s is not supported by the host compiler yet "
              "(complex types run through every op but top-k and random "
              "numbers)",
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
        if (!nested_ && hlo::IsPackedType(n.shape.element_type())) {
          // The buffer holds it packed: unpack once into scratch.
          const int packed = n.slot;
          program_->slots[packed].bytes = n.shape.ByteSize();
          n.slot = NewSlot(BufferSlot::Kind::kScratch, n.shape);
          program_->steps.push_back(KernelStep{SubByteEdgeKernel(
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
      // A loop's state leaf its body passes through is its initial value's
      // memory: read in place by every iteration, never copied (a scan's
      // weights, a loop's read-only operands).
      const int leaf = k - node;
      if (inst.opcode() == Opcode::kWhile &&
          static_cast<int>(n.operands.size()) == OutputsEnd(node) - node &&
          PassesThrough(inst, leaf)) {
        nodes_[k].slot = NewSlot(BufferSlot::Kind::kView, nodes_[k].shape,
                                 SlotOf(n.operands[leaf]));
        continue;
      }
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

}  // namespace pjrt::compiler::host::lowering
