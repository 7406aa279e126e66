// Lowering of dots, reductions, pad, concatenate, dynamic slices and
// collectives (see lowering.h).
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
#include "compiler/host/lowering.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host::lowering {

absl::Status Lowering::EmitDot(int node) {
  Node& n = nodes_[node];
  hlo::DotDimensionNumbers d = n.inst->attributes().dot_dimension_numbers;
  if (n.dot_swapped) {
    std::swap(d.lhs_batch_dimensions, d.rhs_batch_dimensions);
    std::swap(d.lhs_contracting_dimensions, d.rhs_contracting_dimensions);
  }
  const PrimitiveType out_type = n.shape.element_type();
  PrimitiveType type = PrimitiveType::kS64;
  if (out_type == PrimitiveType::kF64 || hlo::IsComplex(out_type)) {
    type = out_type;
  } else if (hlo::IsFloatingPoint(out_type)) {
    type = PrimitiveType::kF32;
  }
  const auto free_dims = [](int rank, const std::vector<int64_t>& batch,
                            const std::vector<int64_t>& contracting) {
    std::vector<int64_t> free;
    for (int i = 0; i < rank; ++i) {
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(contracting.begin(), contracting.end(), i) ==
              contracting.end()) {
        free.push_back(i);
      }
    }
    return free;
  };
  const int lhs = n.operands[0], rhs = n.operands[1];
  const Shape& ls = nodes_[lhs].shape;
  const Shape& rs = nodes_[rhs].shape;
  std::vector<int64_t> lhs_free = free_dims(ls.rank(), d.lhs_batch_dimensions,
                                            d.lhs_contracting_dimensions);
  std::vector<int64_t> rhs_free = free_dims(rs.rank(), d.rhs_batch_dimensions,
                                            d.rhs_contracting_dimensions);
  DotStep step;
  step.type = type;
  step.operand_type = type;
  if (options_.half_dot_operands && type == PrimitiveType::kF32 &&
      ls.element_type() == rs.element_type() &&
      (ls.element_type() == PrimitiveType::kBf16 ||
       ls.element_type() == PrimitiveType::kF16)) {
    step.operand_type = ls.element_type();
  }
  step.batch = 1;
  for (int64_t b : d.lhs_batch_dimensions) step.batch *= ls.dimensions(b);
  step.m = 1;
  for (int64_t f : lhs_free) step.m *= ls.dimensions(f);
  step.n = 1;
  for (int64_t f : rhs_free) step.n *= rs.dimensions(f);
  step.k = 1;
  for (int64_t c : d.lhs_contracting_dimensions) step.k *= ls.dimensions(c);
  // fp8 operands stay fp8 where the matmul takes them: both with the
  // contracting dimension innermost.
  const auto fp8 = [](PrimitiveType t) {
    return t == PrimitiveType::kF8E4M3FN || t == PrimitiveType::kF8E5M2;
  };
  const bool fp8_operands =
      options_.fp8_dot_operands && type == PrimitiveType::kF32 &&
      fp8(ls.element_type()) && fp8(rs.element_type()) &&
      !(ls.element_type() == PrimitiveType::kF8E5M2 &&
        rs.element_type() == PrimitiveType::kF8E5M2) &&
      step.k > 0 && step.m % 16 == 0 && step.n % 16 == 0 && step.k % 16 == 0;
  if (fp8_operands) {
    step.operand_type = ls.element_type();
    if (rs.element_type() != ls.element_type()) {
      step.rhs_operand_type = rs.element_type();
    }
  }

  // Returns the operand's slot in the layout [batch, a, b] (or [batch, b,
  // a] with transposed set), preparing a copy if its buffer does not fit;
  // with `flip` given, only in the layout it names: [batch, b, a] (and
  // transposed set) where true, [batch, a, b] where false.
  const auto prepare =
      [&](int operand, PrimitiveType operand_type,
          const std::vector<int64_t>& batch, const std::vector<int64_t>& a,
          const std::vector<int64_t>& b, std::optional<bool> flip,
          bool* transposed) -> absl::StatusOr<int> {
    const Node& o = nodes_[operand];
    std::vector<int64_t> normal = batch, flipped = batch;
    normal.insert(normal.end(), a.begin(), a.end());
    normal.insert(normal.end(), b.begin(), b.end());
    flipped.insert(flipped.end(), b.begin(), b.end());
    flipped.insert(flipped.end(), a.begin(), a.end());
    std::vector<int64_t> identity(o.shape.rank());
    for (int i = 0; i < o.shape.rank(); ++i) identity[i] = i;
    *transposed = flip.value_or(false);
    if (o.materialize && o.shape.element_type() == operand_type) {
      if (normal == identity && !flip.value_or(false)) return o.slot;
      if (flipped == identity && flip.value_or(true)) {
        *transposed = true;
        return o.slot;
      }
    }
    return EmitPermuted(operand, *transposed ? flipped : normal, operand_type);
  };
  // cuBLASLt's fp8 matmuls take the lhs [batch, m, k] and the rhs
  // [batch, n, k].
  const std::optional<bool> lhs_flip =
      fp8_operands ? std::optional<bool>(false) : std::nullopt;
  const std::optional<bool> rhs_flip =
      fp8_operands ? std::optional<bool>(true) : std::nullopt;
  PJRT_ASSIGN_OR_RETURN(
      step.lhs,
      prepare(lhs, step.operand_type, d.lhs_batch_dimensions, lhs_free,
              d.lhs_contracting_dimensions, lhs_flip, &step.lhs_transposed));
  PJRT_ASSIGN_OR_RETURN(
      step.rhs, prepare(rhs, step.rhs_type(), d.rhs_batch_dimensions,
                        d.rhs_contracting_dimensions, rhs_free, rhs_flip,
                        &step.rhs_transposed));
  if (out_type == type) {
    step.out = n.slot;
    program_->steps.push_back(step);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(n.shape.dimensions().begin(),
                            n.shape.dimensions().end());
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
  for (int j = 0; j < count; ++j)
    in_place = in_place && nodes_[n.operands[j]].materialize;
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
        PJRT_ASSIGN_OR_RETURN(
            int slot,
            EmitPermuted(n.operands[j], order, input.shape.element_type()));
        inputs.push_back(slot);
      }
    }
  } else {
    std::vector<int64_t> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    for (int64_t k : kept) outer *= in_shape.dimensions(k);
    for (int64_t k : reduced) r *= in_shape.dimensions(k);
    for (int j = 0; j < count; ++j) {
      PJRT_ASSIGN_OR_RETURN(
          int slot, EmitPermuted(n.operands[j], order,
                                 nodes_[n.operands[j]].shape.element_type()));
      inputs.push_back(slot);
    }
  }
  const Computation& region = *inst.called_computations()[0];
  // Complex reductions, and sub-byte integer ones (which wrap to their
  // bits), run through the generic reducer.
  std::optional<ExprOp> simple =
      count == 1 && !hlo::IsComplex(n.shape.element_type()) &&
              !IsSubByteInt(n.shape.element_type())
          ? SimpleReducer(region)
          : std::nullopt;
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
    int64_t last =
        out - 1 - p.low < 0 ? -1 : std::min(in - 1, (out - 1 - p.low) / step);
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
  step.array_dims.assign(array.shape.dimensions().begin(),
                         array.shape.dimensions().end());
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
    step.sizes.assign(upd.shape.dimensions().begin(),
                      upd.shape.dimensions().end());
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
  CollectiveStep step;
  switch (inst.opcode()) {
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
      step.kind = CollectiveStep::Kind::kAllReduce;
      break;
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart:
      step.kind = CollectiveStep::Kind::kAllGather;
      break;
    case Opcode::kReduceScatter:
      step.kind = CollectiveStep::Kind::kReduceScatter;
      break;
    case Opcode::kAllToAll:
      step.kind = CollectiveStep::Kind::kAllToAll;
      break;
    default:
      step.kind = CollectiveStep::Kind::kCollectivePermute;
      break;
  }
  // XLA's group modes: collective-permute, and an all-to-all without
  // use_global_device_ids, work across partitions when they have a channel
  // id.
  if (step.kind == CollectiveStep::Kind::kCollectivePermute ||
      (step.kind == CollectiveStep::Kind::kAllToAll &&
       !a.use_global_device_ids)) {
    step.mode = a.channel_id.has_value() ? CollectiveStep::Mode::kCrossPartition
                                         : CollectiveStep::Mode::kCrossReplica;
  } else if (!a.channel_id.has_value()) {
    step.mode = CollectiveStep::Mode::kCrossReplica;
  } else if (a.use_global_device_ids) {
    step.mode = CollectiveStep::Mode::kFlattenedId;
  } else {
    step.mode = CollectiveStep::Mode::kCrossReplicaAndPartition;
  }
  // One key per collective of the program (a loop body's or a branch's
  // meet once per run of it: CollectiveHub::NextInstance).
  step.key = absl::StrCat(computation_name_, "/", node);
  step.name = absl::StrCat(inst.opcode_name(), " ", inst.Describe());
  step.replica_groups = a.replica_groups;
  step.source_target_pairs = a.source_target_pairs;
  if (!a.dimensions.empty()) step.dimension = a.dimensions[0];
  const Shape& in = nodes_[n.operands[0]].shape;
  step.input_dims.assign(in.dimensions().begin(), in.dimensions().end());
  step.output_dims.assign(n.shape.dimensions().begin(),
                          n.shape.dimensions().end());
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
    for (int operand : n.operands) {
      if (IsSubByteInt(TypeOf(operand))) {
        return absl::UnimplementedError(absl::StrFormat(
            "line %d: %%%s reduces %s values, which the host platform's "
            "collectives do not support yet",
            inst.line(), inst.name(), hlo::PrimitiveTypeName(TypeOf(operand))));
      }
    }
    if (!op.has_value()) {
      return absl::UnimplementedError(absl::StrFormat(
          "line %d: %%%s reduces with computation %s; the host platform's "
          "collectives support add, multiply, maximum, minimum, and, or",
          inst.line(), inst.name(), inst.called_computations()[0]->name()));
    }
    for (int operand : n.operands) {
      // NCCL has no complex numbers: the CUDA backend sums their parts as
      // real numbers, which a product cannot be.
      if (hlo::IsComplex(TypeOf(operand)) && *op != ExprOp::kAdd) {
        return absl::UnimplementedError(absl::StrFormat(
            "line %d: %%%s reduces %s values with %s; collectives reduce "
            "complex values with add only",
            inst.line(), inst.name(), hlo::PrimitiveTypeName(TypeOf(operand)),
            inst.called_computations()[0]->name()));
      }
    }
    step.op = *op;
  }
  program_->steps.push_back(std::move(step));
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::host::lowering
