// The verifier's checks of collectives across replicas and partitions, and
// their ids.
#include "hlo/verifier_internal.h"

namespace pjrt::hlo::verifier_internal {

absl::Status Verifier::CheckCollectiveOp(const Instruction& inst) {
  [[maybe_unused]] const Attributes& a = inst.attributes();
  [[maybe_unused]] const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  switch (inst.opcode()) {
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return CheckCollective(inst);
    case Opcode::kRaggedAllToAll:
      return CheckRaggedAllToAll(inst);
    case Opcode::kCollectiveBroadcast: {
      // Each group's first member sends its operands to the others (the
      // shared passes make it collective-permutes).
      PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
      if (inst.operand_count() < 1) {
        return Invalid(inst, "collective-broadcast needs an operand");
      }
      if (a.replica_groups.empty()) {
        return Invalid(inst, "collective-broadcast needs replica_groups");
      }
      // One pair of permutes per operand and place in the longest group:
      // bounds on them.
      constexpr size_t kMaxGroup = 1024;
      constexpr size_t kMaxPermutes = 16384;
      size_t longest = 0;
      for (const std::vector<int64_t>& group : a.replica_groups) {
        longest = std::max(longest, group.size());
        if (group.empty()) {
          return Invalid(inst,
                         "collective-broadcast's groups may not be "
                         "empty");
        }
        if (group.size() > kMaxGroup) {
          return Unimplemented(
              inst, absl::StrFormat("collective-broadcast over a group of %d "
                                    "processes; at most %d are supported",
                                    group.size(), kMaxGroup));
        }
      }
      // An int of operands times at most 1024: no overflow in 64 bits.
      const size_t permutes =
          static_cast<size_t>(inst.operand_count()) * longest;
      if (permutes > kMaxPermutes) {
        return Unimplemented(
            inst, absl::StrFormat("collective-broadcast of %d operands over a "
                                  "group of %d processes takes %d permutes; "
                                  "at most %d are supported",
                                  inst.operand_count(), longest, permutes,
                                  kMaxPermutes));
      }
      std::vector<Shape> shapes;
      for (const Instruction* o : inst.operands()) shapes.push_back(o->shape());
      return ExpectShape(inst,
                         shapes.size() == 1 ? shapes[0] : Shape::Tuple(shapes));
    }
    case Opcode::kReplicaId:
    case Opcode::kPartitionId:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
      return ExpectShape(inst, Shape(PrimitiveType::kU32, {}));
    case Opcode::kAllReduceStart:
      return CheckCollective(inst);
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart: {
      // (operand, result, context...): the op's result is element 1.
      const Shape& s = inst.shape();
      if (inst.opcode() == Opcode::kCollectivePermuteStart &&
          inst.operand_count() > 1 && !a.has("slice_sizes")) {
        // Combined: ((operands), (results)), a permute of each operand
        // (the shared passes split it).
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        std::vector<Shape> shapes;
        for (const Instruction* o : inst.operands()) {
          shapes.push_back(o->shape());
        }
        const Shape parts = Shape::Tuple(shapes);
        return ExpectShape(inst, Shape::Tuple({parts, parts}));
      }
      if (!s.IsTuple() || s.tuple_shapes().size() < 2 ||
          inst.operand_count() != 1 || s.tuple_shapes()[0] != operand(0)) {
        return Invalid(inst,
                       absl::StrFormat("%s of one operand produces (operand, "
                                       "result, context...); %s is declared",
                                       inst.opcode_name(), s.ToString()));
      }
      return CheckCollective(inst, &s.tuple_shapes()[1]);
    }
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteDone: {
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      const Opcode start = inst.opcode() == Opcode::kAllGatherDone
                               ? Opcode::kAllGatherStart
                               : Opcode::kCollectivePermuteStart;
      if (inst.operand(0)->opcode() != start) {
        return Invalid(
            inst, absl::StrFormat("%s takes the result of an %s, not %%%s (%s)",
                                  inst.opcode_name(), OpcodeName(start),
                                  inst.operand(0)->name(),
                                  inst.operand(0)->opcode_name()));
      }
      return ExpectShape(inst, operand(0).tuple_shapes()[1]);
    }
    case Opcode::kAllReduceDone:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      if (inst.operand(0)->opcode() != Opcode::kAllReduceStart) {
        return Invalid(inst,
                       absl::StrFormat("all-reduce-done takes the result of an "
                                       "all-reduce-start, not %%%s (%s)",
                                       inst.operand(0)->name(),
                                       inst.operand(0)->opcode_name()));
      }
      return ExpectShape(inst, operand(0));
    default:
      return NotInFamily(inst, "collective");
  }
}

absl::Status Verifier::CheckCollective(const Instruction& inst,
                                       const Shape* result) {
  const Attributes& a = inst.attributes();
  if (inst.operand_count() < 1) {
    return Invalid(inst,
                   absl::StrFormat("%s needs an operand", inst.opcode_name()));
  }
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  if (a.use_global_device_ids && !a.channel_id.has_value()) {
    return Invalid(inst, "use_global_device_ids=true needs a channel_id");
  }
  const Shape& in = inst.operand(0)->shape();
  if (inst.opcode() == Opcode::kAllReduce ||
      inst.opcode() == Opcode::kAllReduceStart) {
    std::vector<Shape> shapes;
    for (const Instruction* o : inst.operands()) shapes.push_back(o->shape());
    if (inst.called_computations().size() != 1) {
      return Invalid(inst, "all-reduce needs a computation (to_apply=)");
    }
    return ExpectShape(inst,
                       shapes.size() == 1 ? shapes[0] : Shape::Tuple(shapes));
  }
  if (inst.opcode() == Opcode::kAllToAll && a.dimensions.empty()) {
    return CheckTupleAllToAll(inst);
  }
  if (inst.opcode() == Opcode::kCollectivePermute && inst.operand_count() > 1 &&
      !a.has("slice_sizes")) {
    // Combined: one permute per operand (the shared passes split it).
    std::vector<Shape> shapes;
    for (const Instruction* o : inst.operands()) shapes.push_back(o->shape());
    return ExpectShape(inst, Shape::Tuple(shapes));
  }
  if (inst.operand_count() != 1) {
    return Unimplemented(
        inst, absl::StrFormat("%s of several operands is not supported",
                              inst.opcode_name()));
  }
  const Shape& out = result != nullptr ? *result : inst.shape();
  if (inst.opcode() == Opcode::kCollectivePermute) return ExpectShape(inst, in);
  if (inst.opcode() == Opcode::kCollectivePermuteStart) {
    if (out != in) {
      return Invalid(inst, absl::StrFormat("%s of %s produces %s, not %s",
                                           inst.opcode_name(), in.ToString(),
                                           in.ToString(), out.ToString()));
    }
    return absl::OkStatus();
  }
  if (a.dimensions.size() != 1 || a.dimensions[0] < 0 ||
      a.dimensions[0] >= in.rank()) {
    return Invalid(inst, absl::StrFormat("%s needs dimensions={d} with d a "
                                         "dimension of %s",
                                         inst.opcode_name(), in.ToString()));
  }
  const int64_t d = a.dimensions[0];
  bool ok = out.IsArray() && out.element_type() == in.element_type() &&
            out.rank() == in.rank();
  for (int i = 0; ok && i < in.rank(); ++i) {
    if (i == d) {
      if (inst.opcode() == Opcode::kAllGather ||
          inst.opcode() == Opcode::kAllGatherStart) {
        ok = in.dimensions(d) > 0 && out.dimensions(d) % in.dimensions(d) == 0;
      } else if (inst.opcode() == Opcode::kReduceScatter) {
        ok = out.dimensions(d) > 0 && in.dimensions(d) % out.dimensions(d) == 0;
      } else {
        ok = out.dimensions(d) == in.dimensions(d);
      }
    } else {
      ok = out.dimensions(i) == in.dimensions(i);
    }
  }
  if (!ok) {
    return Invalid(
        inst,
        absl::StrFormat("%s of %s along dimension %d cannot produce %s",
                        inst.opcode_name(), in.ToString(), d, out.ToString()));
  }
  if (inst.opcode() == Opcode::kReduceScatter &&
      inst.called_computations().size() != 1) {
    return Invalid(inst, "reduce-scatter needs a computation (to_apply=)");
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckTupleAllToAll(const Instruction& inst) {
  // Operand k goes to the group's k-th member; result k comes from it.
  const Attributes& a = inst.attributes();
  const int64_t n = inst.operand_count();
  const Shape& in = inst.operand(0)->shape();
  for (int k = 1; k < n; ++k) {
    if (inst.operand(k)->shape() != in) {
      return Unimplemented(
          inst,
          absl::StrFormat("all-to-all's tuple form with operands of "
                          "several shapes (%s, then %s) is not supported",
                          in.ToString(), inst.operand(k)->shape().ToString()));
    }
  }
  for (const std::vector<int64_t>& group : a.replica_groups) {
    if (static_cast<int64_t>(group.size()) != n) {
      return Invalid(
          inst, absl::StrFormat("all-to-all of %d operands needs "
                                "groups of %d; {%s} has %d",
                                n, n, absl::StrJoin(group, ","), group.size()));
    }
  }
  if (a.replica_groups.empty()) {
    // One group of every replica (of every partition, with a channel id).
    const ModuleConfig& config = module_.config();
    const int64_t size =
        a.channel_id.has_value() ? config.num_partitions : config.replica_count;
    if (size != n) {
      return Invalid(
          inst,
          absl::StrFormat("all-to-all of %d operands over one group of "
                          "all %d %s needs %d operands",
                          n, size,
                          a.channel_id.has_value() ? "partitions" : "replicas",
                          size));
    }
  }
  std::vector<Shape> shapes(n, in);
  return ExpectShape(inst, Shape::Tuple(shapes));
}

absl::Status Verifier::CheckRaggedAllToAll(const Instruction& inst) {
  // (input, output, input_offsets, send_sizes, output_offsets, recv_sizes):
  // rows of input go into rows of the group members' outputs.
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 6));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  if (a.use_global_device_ids && !a.channel_id.has_value()) {
    return Invalid(inst, "use_global_device_ids=true needs a channel_id");
  }
  const Shape& in = inst.operand(0)->shape();
  const Shape& out = inst.operand(1)->shape();
  bool rows_match = in.rank() >= 1 && in.rank() == out.rank() &&
                    in.element_type() == out.element_type();
  for (int i = 1; rows_match && i < in.rank(); ++i) {
    rows_match = in.dimensions(i) == out.dimensions(i);
  }
  if (!rows_match) {
    return Invalid(inst,
                   absl::StrFormat("ragged-all-to-all writes rows of its input "
                                   "into rows of its output: they need one "
                                   "element type and the same dimensions after "
                                   "the first; the input is %s, the output %s",
                                   in.ToString(), out.ToString()));
  }
  const Shape& offsets = inst.operand(2)->shape();
  for (int i = 2; i < 6; ++i) {
    const Shape& s = inst.operand(i)->shape();
    if (s.rank() != 1 || s.dimensions(0) != offsets.dimensions(0) ||
        (s.element_type() != PrimitiveType::kS32 &&
         s.element_type() != PrimitiveType::kS64)) {
      return Invalid(
          inst,
          absl::StrFormat(
              "operand %d (%%%s) is %s; input_offsets, send_sizes, "
              "output_offsets and recv_sizes are s32 or s64 vectors of "
              "one length (operand 2 is %s)",
              i, inst.operand(i)->name(), s.ToString(), offsets.ToString()));
    }
  }
  int64_t members = 0;
  if (a.replica_groups.empty()) {
    const ModuleConfig& config = module_.config();
    members =
        a.channel_id.has_value() ? config.num_partitions : config.replica_count;
  } else {
    members = static_cast<int64_t>(a.replica_groups[0].size());
    for (const std::vector<int64_t>& group : a.replica_groups) {
      if (static_cast<int64_t>(group.size()) != members) {
        return Invalid(
            inst,
            absl::StrFormat("ragged-all-to-all's groups must be of one "
                            "size; {%s} has %d members, {%s} %d",
                            absl::StrJoin(a.replica_groups[0], ","), members,
                            absl::StrJoin(group, ","), group.size()));
      }
    }
  }
  const int64_t updates = offsets.dimensions(0);
  if (members < 1 || updates % members != 0) {
    return Invalid(
        inst, absl::StrFormat("ragged-all-to-all over groups of %d needs "
                              "offsets and sizes with a multiple of %d "
                              "entries (the same number of updates to each "
                              "member); they have %d",
                              members, std::max<int64_t>(members, 1), updates));
  }
  // What the exchange moves: every row of the input for every update.
  std::vector<int64_t> exchanged = {updates};
  exchanged.insert(exchanged.end(), in.dimensions().begin(),
                   in.dimensions().end());
  if (absl::Status fits = CheckShapeLimits(Shape(in.element_type(), exchanged));
      !fits.ok()) {
    return Invalid(inst, absl::StrCat("ragged-all-to-all exchanges each of "
                                      "its updates as a copy of the input: ",
                                      fits.message()));
  }
  return ExpectShape(inst, out);
}

}  // namespace pjrt::hlo::verifier_internal
