// The verifier's checks of dots, reductions, windows, convolutions, fft, sort,
// top-k, random bits, triangular-solve, cholesky, batch norms and ragged
// dots.
#include "hlo/verifier_internal.h"

namespace pjrt::hlo::verifier_internal {

absl::Status Verifier::CheckComputeOp(const Instruction& inst) {
  [[maybe_unused]] const Attributes& a = inst.attributes();
  [[maybe_unused]] const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  switch (inst.opcode()) {
    case Opcode::kDot:
      return CheckDot(inst);
    case Opcode::kReduce:
      return CheckReduce(inst);
    case Opcode::kSort:
      return CheckInferred(inst, InferSortShape(inst));
    case Opcode::kReduceWindow:
      return CheckInferred(inst, InferReduceWindowShape(inst));
    case Opcode::kSelectAndScatter:
      return CheckInferred(inst, InferSelectAndScatterShape(inst));
    case Opcode::kConvolution:
      return CheckInferred(inst, InferConvolutionShape(inst));
    case Opcode::kFft:
      return CheckInferred(inst, InferFftShape(inst));
    case Opcode::kTriangularSolve:
      return CheckInferred(inst, InferTriangularSolveShape(inst));
    case Opcode::kCholesky:
      return CheckInferred(inst, InferCholeskyShape(inst));
    case Opcode::kBatchNormTraining:
    case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
      return CheckInferred(inst, InferBatchNormShape(inst));
    case Opcode::kRaggedDot:
      return CheckInferred(inst, InferRaggedDotShape(inst));
    case Opcode::kRngBitGenerator:
      return CheckInferred(inst, InferRngBitGeneratorShape(inst));
    case Opcode::kRng:
      return CheckInferred(inst, InferRngShape(inst));
    case Opcode::kTopK:
      return CheckInferred(inst, InferTopKShape(inst));
    case Opcode::kRngGetAndUpdateState:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
      return ExpectShape(inst, Shape(PrimitiveType::kU64, {2}));
    default:
      return NotInFamily(inst, "compute");
  }
}

absl::Status Verifier::CheckDot(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const Shape& lhs = inst.operand(0)->shape();
  const Shape& rhs = inst.operand(1)->shape();
  for (const Shape* s : {&lhs, &rhs}) {
    if (s->element_type() == PrimitiveType::kPred) {
      return Invalid(inst, "dot needs numeric operands, not pred");
    }
  }
  absl::StatusOr<std::vector<int64_t>> dims =
      DotResultDimensions(lhs, rhs, inst.attributes().dot_dimension_numbers);
  if (!dims.ok()) {
    return Fail(inst, dims.status().code(), dims.status().message());
  }
  if (!inst.shape().IsArray() ||
      inst.shape().element_type() == PrimitiveType::kPred) {
    return Invalid(inst, absl::StrFormat("dot produces a numeric array, not %s",
                                         inst.shape().ToString()));
  }
  return ExpectShape(inst, Shape(inst.shape().element_type(), *dims));
}

absl::Status Verifier::CheckReduce(const Instruction& inst) {
  const Attributes& a = inst.attributes();
  if (inst.operand_count() < 2 || inst.operand_count() % 2 != 0) {
    return Invalid(
        inst, absl::StrFormat("reduce takes N inputs and N initial values; "
                              "got %d operands",
                              inst.operand_count()));
  }
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
  const int n = inst.operand_count() / 2;
  const Shape& first = inst.operand(0)->shape();
  for (int i = 0; i < n; ++i) {
    const Shape& input = inst.operand(i)->shape();
    const Shape& init = inst.operand(n + i)->shape();
    if (!SameDims(input, first)) {
      return Invalid(
          inst, absl::StrFormat("inputs must have the same dimensions; input "
                                "0 is %s but input %d is %s",
                                first.ToString(), i, input.ToString()));
    }
    if (init.rank() != 0 || init.element_type() != input.element_type()) {
      return Invalid(
          inst, absl::StrFormat("initial value %d must be a %s scalar, got %s",
                                i, PrimitiveTypeName(input.element_type()),
                                init.ToString()));
    }
  }
  PJRT_RETURN_IF_ERROR(
      ExpectDimensionsIn(inst, a.dimensions, first.rank(), "dimension"));
  if (inst.called_computations().size() != 1) {
    return Invalid(inst, "reduce needs a computation (to_apply=)");
  }
  const Computation& region = *inst.called_computations()[0];
  if (static_cast<int>(region.parameters().size()) != 2 * n) {
    return Invalid(
        inst,
        absl::StrFormat("the reducer %s takes %d parameter(s); a reduce "
                        "of %d input(s) needs %d",
                        region.name(), region.parameters().size(), n, 2 * n));
  }
  std::vector<Shape> scalars;
  for (int i = 0; i < n; ++i) {
    scalars.push_back(Shape(inst.operand(i)->shape().element_type(), {}));
  }
  for (int i = 0; i < 2 * n; ++i) {
    if (region.parameters()[i]->shape() != scalars[i % n]) {
      return Invalid(inst,
                     absl::StrFormat("parameter %d of the reducer %s is %s; "
                                     "expected %s",
                                     i, region.name(),
                                     region.parameters()[i]->shape().ToString(),
                                     scalars[i % n].ToString()));
    }
  }
  Shape region_result = n == 1 ? scalars[0] : Shape::Tuple(scalars);
  if (region.root()->shape() != region_result) {
    return Invalid(
        inst, absl::StrFormat("the reducer %s returns %s; expected %s",
                              region.name(), region.root()->shape().ToString(),
                              region_result.ToString()));
  }
  std::vector<int64_t> kept;
  for (int i = 0; i < first.rank(); ++i) {
    if (std::find(a.dimensions.begin(), a.dimensions.end(), i) ==
        a.dimensions.end()) {
      kept.push_back(first.dimensions(i));
    }
  }
  std::vector<Shape> results;
  for (int i = 0; i < n; ++i) {
    results.push_back(Shape(inst.operand(i)->shape().element_type(), kept));
  }
  return ExpectShape(inst, n == 1 ? results[0] : Shape::Tuple(results));
}

}  // namespace pjrt::hlo::verifier_internal
