// The verifier's checks of ops that make or move values without arithmetic
// (parameters, constants, reshapes, slices, pads, gathers, scatters, copies).
#include <cstdint>
#include <limits>

#include "hlo/verifier_internal.h"

namespace pjrt::hlo::verifier_internal {

absl::Status Verifier::CheckDataMovementOp(const Instruction& inst) {
  const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  switch (inst.opcode()) {
    case Opcode::kParameter:
      return ExpectOperands(inst, 0);
    case Opcode::kConstant:
      return CheckConstant(inst);
    case Opcode::kIota:
      return CheckIota(inst);
    case Opcode::kBroadcast:
      return CheckBroadcast(inst);
    case Opcode::kReshape:
    case Opcode::kBitcast:
      return CheckReshapeOrBitcast(inst);
    case Opcode::kTranspose:
      return CheckTranspose(inst);
    case Opcode::kSlice:
      return CheckSlice(inst);
    case Opcode::kConcatenate:
      return CheckConcatenate(inst);
    case Opcode::kPad:
      return CheckPad(inst);
    case Opcode::kReverse:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
      PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(
          inst, inst.attributes().dimensions, operand(0).rank(), "dimension"));
      return ExpectShape(inst, operand(0));
    case Opcode::kGetDimensionSize: {
      // pjrtd's shapes are static: the size is a constant (hlo/passes.h).
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
      const std::vector<int64_t>& d = inst.attributes().dimensions;
      if (d.size() != 1) {
        return Invalid(inst, absl::StrFormat("get-dimension-size needs "
                                             "dimensions={d}, one dimension "
                                             "of %s",
                                             operand(0).ToString()));
      }
      PJRT_RETURN_IF_ERROR(
          ExpectDimensionsIn(inst, d, operand(0).rank(), "dimension"));
      if (operand(0).dimensions(d[0]) > std::numeric_limits<int32_t>::max()) {
        return Invalid(inst, absl::StrFormat("dimension %d of %s is %d, more "
                                             "than its s32 result holds",
                                             d[0], operand(0).ToString(),
                                             operand(0).dimensions(d[0])));
      }
      return ExpectShape(inst, Shape(PrimitiveType::kS32, {}));
    }
    case Opcode::kDynamicSlice:
      return CheckDynamicSlice(inst);
    case Opcode::kDynamicUpdateSlice:
      return CheckDynamicUpdateSlice(inst);
    case Opcode::kGather:
      return CheckInferred(inst, InferGatherShape(inst));
    case Opcode::kScatter:
      return CheckInferred(inst, InferScatterShape(inst));
    case Opcode::kCopyStart:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      return ExpectShape(inst, Shape::Tuple({operand(0), operand(0),
                                             Shape(PrimitiveType::kU32, {})}));
    case Opcode::kCopyDone:
      return CheckCopyDone(inst);
    default:
      return NotInFamily(inst, "data-movement");
  }
}

absl::Status Verifier::CheckConstant(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  if (a.literal.shape() != inst.shape()) {
    return Invalid(
        inst,
        absl::StrFormat("the literal is %s but the declared shape "
                        "is %s",
                        a.literal.shape().ToString(), inst.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckIota(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
  if (!inst.shape().IsArray() || inst.shape().rank() == 0) {
    return Invalid(inst, "iota needs an array shape of rank >= 1");
  }
  if (a.iota_dimension < 0 || a.iota_dimension >= inst.shape().rank()) {
    return Invalid(inst,
                   absl::StrFormat("iota_dimension %d is out of range for %s",
                                   a.iota_dimension, inst.shape().ToString()));
  }
  if (inst.shape().element_type() == PrimitiveType::kPred) {
    return Invalid(inst, "iota of pred is not defined");
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckBroadcast(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  const Shape& out = inst.shape();
  if (!out.IsArray() || out.element_type() != in.element_type()) {
    return Invalid(inst, absl::StrFormat("broadcast of %s cannot produce %s",
                                         in.ToString(), out.ToString()));
  }
  if (static_cast<int>(a.dimensions.size()) != in.rank()) {
    return Invalid(
        inst, absl::StrFormat("dimensions={%s} has %d entries but "
                              "the operand %s has rank %d",
                              absl::StrJoin(a.dimensions, ","),
                              a.dimensions.size(), in.ToString(), in.rank()));
  }
  PJRT_RETURN_IF_ERROR(
      ExpectDimensionsIn(inst, a.dimensions, out.rank(), "dimension"));
  for (int i = 0; i < in.rank(); ++i) {
    if (in.dimensions(i) != out.dimensions(a.dimensions[i])) {
      return Invalid(inst,
                     absl::StrFormat("operand dimension %d (size %d) maps to "
                                     "output dimension %d of size %d; sizes "
                                     "must match exactly",
                                     i, in.dimensions(i), a.dimensions[i],
                                     out.dimensions(a.dimensions[i])));
    }
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckReshapeOrBitcast(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  if (!inst.shape().IsArray() ||
      inst.shape().element_type() != in.element_type() ||
      inst.shape().ElementCount() != in.ElementCount()) {
    return Invalid(inst,
                   absl::StrFormat("%s of %s (%d elements) cannot produce %s",
                                   inst.opcode_name(), in.ToString(),
                                   in.ElementCount(), inst.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckTranspose(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  if (static_cast<int>(a.dimensions.size()) != in.rank()) {
    return Invalid(inst,
                   absl::StrFormat("dimensions={%s} is not a permutation of "
                                   "the %d dimensions of %s",
                                   absl::StrJoin(a.dimensions, ","), in.rank(),
                                   in.ToString()));
  }
  PJRT_RETURN_IF_ERROR(
      ExpectDimensionsIn(inst, a.dimensions, in.rank(), "dimension"));
  std::vector<int64_t> dims;
  for (int64_t d : a.dimensions) dims.push_back(in.dimensions(d));
  return ExpectShape(inst, Shape(in.element_type(), dims));
}

absl::Status Verifier::CheckSlice(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  if (static_cast<int>(a.slice.size()) != in.rank()) {
    return Invalid(inst,
                   absl::StrFormat("slice has %d ranges but the operand %s has "
                                   "rank %d",
                                   a.slice.size(), in.ToString(), in.rank()));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const SliceDimension& s = a.slice[i];
    if (s.start < 0 || s.start > s.limit || s.limit > in.dimensions(i) ||
        s.stride < 1) {
      return Invalid(
          inst,
          absl::StrFormat("slice range [%d:%d:%d] is invalid for "
                          "dimension %d of size %d",
                          s.start, s.limit, s.stride, i, in.dimensions(i)));
    }
    const int64_t span = s.limit - s.start;  // >= 0, checked above
    dims.push_back(span / s.stride + (span % s.stride != 0 ? 1 : 0));
  }
  return ExpectShape(inst, Shape(in.element_type(), dims));
}

absl::Status Verifier::CheckConcatenate(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  if (inst.operand_count() < 1) {
    return Invalid(inst, "concatenate needs at least one operand");
  }
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  if (a.dimensions.size() != 1) {
    return Invalid(inst,
                   absl::StrFormat("concatenate needs dimensions={d} (one "
                                   "dimension), got %d",
                                   a.dimensions.size()));
  }
  const Shape& first = inst.operand(0)->shape();
  int64_t d = a.dimensions[0];
  if (d < 0 || d >= first.rank()) {
    return Invalid(inst, absl::StrFormat("dimension %d is out of range for %s",
                                         d, first.ToString()));
  }
  std::vector<int64_t> dims(first.dimensions().begin(),
                            first.dimensions().end());
  for (int i = 1; i < inst.operand_count(); ++i) {
    const Shape& s = inst.operand(i)->shape();
    bool ok =
        s.element_type() == first.element_type() && s.rank() == first.rank();
    for (int k = 0; ok && k < s.rank(); ++k) {
      ok = k == d || s.dimensions(k) == first.dimensions(k);
    }
    if (!ok) {
      return Invalid(
          inst, absl::StrFormat("operand %d (%s) does not fit operand 0 "
                                "(%s) for concatenation along dimension %d",
                                i, s.ToString(), first.ToString(), d));
    }
    if (__builtin_add_overflow(dims[d], s.dimensions(d), &dims[d]) ||
        dims[d] > kMaxArrayBytes) {
      return Invalid(inst,
                     absl::StrFormat("concatenating along dimension %d gives "
                                     "a dimension larger than %d",
                                     d, kMaxArrayBytes));
    }
  }
  return ExpectShape(inst, Shape(first.element_type(), dims));
}

absl::Status Verifier::CheckPad(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  const Shape& value = inst.operand(1)->shape();
  if (value.rank() != 0 || value.element_type() != in.element_type()) {
    return Invalid(inst,
                   absl::StrFormat("the padding value must be a %s scalar, got "
                                   "%s",
                                   PrimitiveTypeName(in.element_type()),
                                   value.ToString()));
  }
  if (static_cast<int>(a.padding.size()) != in.rank()) {
    return Invalid(inst,
                   absl::StrFormat("padding has %d entries but the operand %s "
                                   "has rank %d",
                                   a.padding.size(), in.ToString(), in.rank()));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const PadDimension& p = a.padding[i];
    int64_t d = in.dimensions(i);
    // low + high + d + (d - 1) * interior, refusing overflow.
    int64_t size = 0;
    bool overflow = p.interior < 0 || p.interior > kMaxArrayBytes ||
                    __builtin_mul_overflow(std::max<int64_t>(d - 1, 0),
                                           p.interior, &size) ||
                    __builtin_add_overflow(size, d, &size) ||
                    __builtin_add_overflow(size, p.low, &size) ||
                    __builtin_add_overflow(size, p.high, &size);
    if (overflow || size < 0 || size > kMaxArrayBytes ||
        p.low < -kMaxArrayBytes || p.low > kMaxArrayBytes ||
        p.high < -kMaxArrayBytes || p.high > kMaxArrayBytes) {
      return Invalid(
          inst,
          absl::StrFormat("padding %d_%d_%d of dimension %d (size "
                          "%d) is invalid: interior must be >= 0, "
                          "the padded size >= 0, and each of them "
                          "at most %d (2^56) in magnitude",
                          p.low, p.high, p.interior, i, d, kMaxArrayBytes));
    }
    dims.push_back(size);
  }
  return ExpectShape(inst, Shape(in.element_type(), dims));
}

absl::Status Verifier::CheckDynamicSlice(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& in = inst.operand(0)->shape();
  PJRT_RETURN_IF_ERROR(CheckStartIndices(inst, 1, in.rank()));
  if (static_cast<int>(a.dynamic_slice_sizes.size()) != in.rank()) {
    return Invalid(inst,
                   absl::StrFormat("dynamic_slice_sizes has %d entries for "
                                   "rank %d",
                                   a.dynamic_slice_sizes.size(), in.rank()));
  }
  for (int i = 0; i < in.rank(); ++i) {
    int64_t size = a.dynamic_slice_sizes[i];
    if (size < 0 || size > in.dimensions(i)) {
      return Invalid(inst,
                     absl::StrFormat("slice size %d is invalid for dimension "
                                     "%d of size %d",
                                     size, i, in.dimensions(i)));
    }
  }
  return ExpectShape(inst, Shape(in.element_type(), a.dynamic_slice_sizes));
}

absl::Status Verifier::CheckDynamicUpdateSlice(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  if (inst.operand_count() < 2) {
    return Invalid(inst,
                   "dynamic-update-slice needs an operand and an "
                   "update");
  }
  const Shape& in = inst.operand(0)->shape();
  const Shape& update = inst.operand(1)->shape();
  bool ok =
      update.element_type() == in.element_type() && update.rank() == in.rank();
  for (int i = 0; ok && i < in.rank(); ++i) {
    ok = update.dimensions(i) <= in.dimensions(i);
  }
  if (!ok) {
    return Invalid(inst,
                   absl::StrFormat("the update %s does not fit in the operand "
                                   "%s",
                                   update.ToString(), in.ToString()));
  }
  PJRT_RETURN_IF_ERROR(CheckStartIndices(inst, 2, in.rank()));
  return ExpectShape(inst, in);
}

absl::Status Verifier::CheckCopyDone(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
  const Shape& in = inst.operand(0)->shape();
  if (!in.IsTuple() || in.tuple_shapes().size() != 3) {
    return Invalid(inst, absl::StrFormat("copy-done takes a copy-start's "
                                         "(dest, src, context), not %s",
                                         in.ToString()));
  }
  return ExpectShape(inst, in.tuple_shapes()[0]);
}

}  // namespace pjrt::hlo::verifier_internal
