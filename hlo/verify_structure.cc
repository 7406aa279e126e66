// The verifier's checks of tuples, calls, control flow, fusions, tokens, custom
// calls and async wrappers.
#include "hlo/verifier_internal.h"

namespace pjrt::hlo::verifier_internal {

absl::Status Verifier::CheckStructureOp(const Instruction& inst) {
  [[maybe_unused]] const Attributes& a = inst.attributes();
  [[maybe_unused]] const auto operand = [&](int i) -> const Shape& {
    return inst.operand(i)->shape();
  };
  switch (inst.opcode()) {
    case Opcode::kOptimizationBarrier:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      return ExpectShape(inst, operand(0));
    case Opcode::kCustomCall: {
      if (a.custom_call_target == "TopK") {
        return CheckInferred(inst, InferTopKShape(inst));
      }
      if (!IsIdentityCustomCall(a.custom_call_target)) {
        return Unimplemented(
            inst,
            absl::StrFormat("custom-call target \"%s\" is not supported; pjrtd "
                            "runs TopK, the LAPACK and cuSOLVER calls JAX's "
                            "jnp.linalg lowers to (docs/stablehlo.md), and "
                            "Sharding, SPMDFullToShardShape, "
                            "SPMDShardToFullShape, annotate_device_placement, "
                            "MoveToHost and MoveToDevice (as identity)",
                            a.custom_call_target));
      }
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      if (inst.shape() != operand(0)) {
        return Unimplemented(
            inst,
            absl::StrFormat("custom-call %s changes the shape from %s to %s; "
                            "partitioned programs are not supported here",
                            a.custom_call_target, operand(0).ToString(),
                            inst.shape().ToString()));
      }
      return absl::OkStatus();
    }
    case Opcode::kTuple: {
      std::vector<Shape> elements;
      for (const Instruction* o : inst.operands())
        elements.push_back(o->shape());
      return ExpectShape(inst, Shape::Tuple(elements));
    }
    case Opcode::kGetTupleElement: {
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      const Shape& in = operand(0);
      if (!in.IsTuple()) {
        return Invalid(
            inst, absl::StrFormat("get-tuple-element needs a tuple operand, "
                                  "got %s",
                                  in.ToString()));
      }
      if (a.tuple_index < 0 ||
          a.tuple_index >= static_cast<int64_t>(in.tuple_shapes().size())) {
        return Invalid(inst, absl::StrFormat("index=%d is out of range for %s",
                                             a.tuple_index, in.ToString()));
      }
      return ExpectShape(inst, in.tuple_shapes()[a.tuple_index]);
    }
    case Opcode::kCall: {
      if (inst.called_computations().size() != 1) {
        return Invalid(inst, "call needs exactly one computation (to_apply=)");
      }
      const Computation& callee = *inst.called_computations()[0];
      PJRT_RETURN_IF_ERROR(CheckArguments(inst, callee, inst.operands()));
      return ExpectShape(inst, callee.root()->shape());
    }
    case Opcode::kWhile:
      return CheckInferred(inst, InferWhileShape(inst));
    case Opcode::kConditional:
      return CheckInferred(inst, InferConditionalShape(inst));
    case Opcode::kFusion: {
      if (inst.called_computations().size() != 1) {
        return Invalid(inst, "fusion needs exactly one computation (calls=)");
      }
      const Computation& callee = *inst.called_computations()[0];
      PJRT_RETURN_IF_ERROR(CheckArguments(inst, callee, inst.operands()));
      return ExpectShape(inst, callee.root()->shape());
    }
    case Opcode::kAfterAll:
      for (int i = 0; i < inst.operand_count(); ++i) {
        if (!operand(i).IsToken()) {
          return Invalid(
              inst, absl::StrFormat("operand %d is %s; after-all takes tokens",
                                    i, operand(i).ToString()));
        }
      }
      return ExpectShape(inst, Shape(PrimitiveType::kToken, {}));
    case Opcode::kDomain:
      // A sharding domain's boundary: its operand, unchanged.
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      return ExpectShape(inst, operand(0));
    case Opcode::kAddDependency:
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
      if (!operand(1).IsToken()) {
        return Invalid(inst, absl::StrFormat("operand 1 is %s; add-dependency "
                                             "takes a token there",
                                             operand(1).ToString()));
      }
      return ExpectShape(inst, operand(0));
    case Opcode::kAsyncStart: {
      if (inst.called_computations().size() != 1) {
        return Invalid(inst, "async-start needs one computation (calls=)");
      }
      const Computation& callee = *inst.called_computations()[0];
      PJRT_RETURN_IF_ERROR(CheckArguments(inst, callee, inst.operands()));
      const Shape& s = inst.shape();
      std::vector<Shape> args;
      for (const Instruction* o : inst.operands()) args.push_back(o->shape());
      if (!s.IsTuple() || s.tuple_shapes().size() < 2 ||
          s.tuple_shapes()[0] != Shape::Tuple(args) ||
          s.tuple_shapes()[1] != callee.root()->shape()) {
        return Invalid(
            inst,
            absl::StrFormat("async-start of %s must produce ((%s), %s, "
                            "context...), not %s",
                            callee.name(), ShapeList(inst.operands()),
                            callee.root()->shape().ToString(), s.ToString()));
      }
      return absl::OkStatus();
    }
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone: {
      PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
      const Instruction* start = inst.operand(0);
      while (start->opcode() == Opcode::kAsyncUpdate) start = start->operand(0);
      if (start->opcode() != Opcode::kAsyncStart) {
        return Invalid(inst,
                       absl::StrFormat("%s takes an async-start or "
                                       "async-update, not %%%s",
                                       inst.opcode_name(), start->name()));
      }
      return ExpectShape(inst, inst.opcode() == Opcode::kAsyncUpdate
                                   ? operand(0)
                                   : operand(0).tuple_shapes()[1]);
    }
    case Opcode::kOther:
      return Unimplemented(inst,
                           absl::StrFormat("op '%s' is not supported by pjrtd",
                                           inst.opcode_name()));
      // No default: -Wswitch makes a new Opcode without a case here a
      // compile error.
    default:
      return NotInFamily(inst, "structure");
  }
}

}  // namespace pjrt::hlo::verifier_internal
