// The verifier's shared part (hlo/verifier.cc has the module-wide checks):
// the Verifier class, whose per-instruction checks are split by op family
// (hlo/opcode.h) into verify_*.cc. Not part of the interface.
#ifndef PJRT_HLO_VERIFIER_INTERNAL_H_
#define PJRT_HLO_VERIFIER_INTERNAL_H_

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "hlo/dot_shapes.h"
#include "hlo/op_shapes.h"
#include "hlo/parser.h"
#include "hlo/verifier.h"

namespace pjrt::hlo::verifier_internal {

inline bool IsNumeric(PrimitiveType t) {
  return IsArrayType(t) && t != PrimitiveType::kPred;
}
inline bool IsIntegral(PrimitiveType t) {
  return IsSignedInteger(t) || IsUnsignedInteger(t);
}
inline bool IsFloatOrComplex(PrimitiveType t) {
  return IsFloatingPoint(t) || IsComplex(t);
}
inline bool IsOrdered(PrimitiveType t) {
  return IsArrayType(t) && !IsComplex(t);
}
inline bool IsOrderedNumeric(PrimitiveType t) {
  return IsNumeric(t) && !IsComplex(t);
}

inline bool SameDims(const Shape& a, const Shape& b) {
  return a.dimensions() == b.dimensions();
}

inline std::string ShapeList(absl::Span<Instruction* const> operands) {
  std::vector<std::string> parts;
  for (const Instruction* o : operands) parts.push_back(o->shape().ToString());
  return absl::StrJoin(parts, ", ");
}

class Verifier {
 public:
  Verifier(const Module& module, absl::string_view text)
      : module_(module), text_(text) {}

  absl::Status Run() {
    if (module_.entry() == nullptr) {
      return absl::InvalidArgumentError("the module has no computations");
    }
    PJRT_RETURN_IF_ERROR(CheckCallGraph());
    for (const Computation* c : reachable_) {
      PJRT_RETURN_IF_ERROR(CheckCycles(*c));
      for (const auto& inst : c->instructions()) {
        PJRT_RETURN_IF_ERROR(CheckInstruction(*inst));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const Instruction& inst, absl::StatusCode code,
                    absl::string_view message) {
    std::string text = absl::StrCat("%", inst.name(), ": ", message);
    if (!inst.source_location().empty()) {
      absl::StrAppend(&text, " (at ", inst.source_location(), ")");
    }
    return absl::Status(code,
                        FormatErrorAt(text_, inst.line(), inst.column(), text));
  }
  absl::Status Invalid(const Instruction& inst, absl::string_view message) {
    return Fail(inst, absl::StatusCode::kInvalidArgument, message);
  }
  absl::Status Unimplemented(const Instruction& inst,
                             absl::string_view message) {
    return Fail(inst, absl::StatusCode::kUnimplemented, message);
  }

  // Collects the computations reachable from the entry, refusing recursion,
  // calls nested deeper than kMaxCallDepth, and programs that would grow
  // beyond kMaxInlinedInstructions once every call is inlined (a computation
  // calling the next one twice, 40 times over, is tiny as text). Iterative:
  // the call graph comes from the client.
  absl::Status CheckCallGraph();

  absl::Status CheckCycles(const Computation& c);

  absl::Status CheckTypes(const Instruction& inst, const Shape& shape) {
    if (shape.IsTuple()) {
      // Tuples share their elements (an inferred tuple(t, x) reuses t's):
      // each shared set of elements is checked once, so that the work
      // stays linear in the program however its tuples nest.
      if (!checked_tuples_.insert(shape.tuple_identity()).second) {
        return absl::OkStatus();
      }
      for (const Shape& s : shape.tuple_shapes()) {
        PJRT_RETURN_IF_ERROR(CheckTypes(inst, s));
      }
      return absl::OkStatus();
    }
    if (!shape.dynamic_dimensions().empty()) {
      return Unimplemented(
          inst, absl::StrFormat("%s has dynamic dimensions (<=N or ?), which "
                                "pjrtd does not support",
                                Excerpt(shape.ToString(), 200)));
    }
    if (shape.IsToken()) return absl::OkStatus();
    if (!IsArrayType(shape.element_type())) {
      return Unimplemented(
          inst, absl::StrFormat(
                    "element type %s is not supported by pjrtd (supported: "
                    "pred, s2, s4, s8, s16, s32, s64, u2, u4, u8, u16, u32, "
                    "u64, "
                    "f8e4m3fn, f8e5m2, f8e4m3, f8e3m4, f8e4m3fnuz, "
                    "f8e5m2fnuz, f8e4m3b11fnuz, f8e8m0fnu, f6e2m3fn, "
                    "f6e3m2fn, f4e2m1fn, f16, bf16, f32, f64, c64, c128)",
                    PrimitiveTypeName(shape.element_type())));
    }
    return absl::OkStatus();
  }

  absl::Status ExpectOperands(const Instruction& inst, int count) {
    if (inst.operand_count() != count) {
      return Invalid(inst, absl::StrFormat("%s takes %d operand(s), got %d",
                                           inst.opcode_name(), count,
                                           inst.operand_count()));
    }
    return absl::OkStatus();
  }

  absl::Status ExpectShape(const Instruction& inst, const Shape& inferred) {
    if (inst.shape() != inferred) {
      return Invalid(inst, absl::StrFormat(
                               "declared shape %s does not match the shape %s "
                               "that %s computes from its operands (%s)",
                               inst.shape().ToString(), inferred.ToString(),
                               inst.opcode_name(), ShapeList(inst.operands())));
    }
    return absl::OkStatus();
  }

  // The shape an op's inference computed must be the declared one.
  absl::Status CheckInferred(const Instruction& inst,
                             const absl::StatusOr<Shape>& inferred) {
    if (!inferred.ok()) {
      return Fail(inst, inferred.status().code(), inferred.status().message());
    }
    return ExpectShape(inst, *inferred);
  }

  absl::Status ExpectArrays(const Instruction& inst) {
    for (int i = 0; i < inst.operand_count(); ++i) {
      if (!inst.operand(i)->shape().IsArray()) {
        return Invalid(inst,
                       absl::StrFormat("operand %d (%%%s) is %s; %s needs "
                                       "an array",
                                       i, inst.operand(i)->name(),
                                       inst.operand(i)->shape().ToString(),
                                       inst.opcode_name()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ExpectDimensionsIn(const Instruction& inst,
                                  const std::vector<int64_t>& dims, int rank,
                                  absl::string_view what) {
    absl::flat_hash_set<int64_t> seen;
    for (int64_t d : dims) {
      if (d < 0 || d >= rank) {
        return Invalid(
            inst, absl::StrFormat("%s %d is out of range for rank %d", what, d,
                                  rank));
      }
      if (!seen.insert(d).second) {
        return Invalid(inst, absl::StrFormat("%s %d is listed twice", what, d));
      }
    }
    return absl::OkStatus();
  }

  // `arity` array operands of one shape.
  absl::Status CheckElementwiseOperands(const Instruction& inst, int arity) {
    PJRT_RETURN_IF_ERROR(ExpectOperands(inst, arity));
    PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
    const Shape& first = inst.operand(0)->shape();
    for (int i = 1; i < arity; ++i) {
      if (inst.operand(i)->shape() != first) {
        return Invalid(
            inst, absl::StrFormat("operands must have the same shape; operand "
                                  "0 is %s but operand %d is %s",
                                  first.ToString(), i,
                                  inst.operand(i)->shape().ToString()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckElementwise(const Instruction& inst, int arity,
                                bool (*type_ok)(PrimitiveType),
                                absl::string_view type_words) {
    PJRT_RETURN_IF_ERROR(CheckElementwiseOperands(inst, arity));
    const Shape& first = inst.operand(0)->shape();
    if (!type_ok(first.element_type())) {
      return Invalid(
          inst,
          absl::StrFormat("%s needs %s operands, not %s", inst.opcode_name(),
                          type_words, PrimitiveTypeName(first.element_type())));
    }
    return ExpectShape(inst, first);
  }

  absl::Status CheckInstruction(const Instruction& inst);

  // One family of ops each (hlo/opcode.h): verify_elementwise.cc,
  // verify_data_movement.cc, verify_compute.cc, verify_collectives.cc and
  // verify_structure.cc.
  absl::Status CheckElementwiseOp(const Instruction& inst);
  absl::Status CheckDataMovementOp(const Instruction& inst);
  absl::Status CheckComputeOp(const Instruction& inst);
  absl::Status CheckCollectiveOp(const Instruction& inst);
  absl::Status CheckStructureOp(const Instruction& inst);
  // The element-wise ops that need more than the shared checks above.
  absl::Status CheckConvert(const Instruction& inst);
  absl::Status CheckBitcastConvert(const Instruction& inst);
  absl::Status CheckSelect(const Instruction& inst);
  absl::Status CheckClamp(const Instruction& inst);
  absl::Status CheckCompare(const Instruction& inst);
  absl::Status CheckAbsRealOrImag(const Instruction& inst);
  absl::Status CheckComplex(const Instruction& inst);
  absl::Status CheckReducePrecision(const Instruction& inst);
  absl::Status CheckIsFinite(const Instruction& inst);
  // The data-movement ops whose checks take more than a few lines.
  absl::Status CheckConstant(const Instruction& inst);
  absl::Status CheckIota(const Instruction& inst);
  absl::Status CheckBroadcast(const Instruction& inst);
  absl::Status CheckReshapeOrBitcast(const Instruction& inst);
  absl::Status CheckTranspose(const Instruction& inst);
  absl::Status CheckSlice(const Instruction& inst);
  absl::Status CheckConcatenate(const Instruction& inst);
  absl::Status CheckPad(const Instruction& inst);
  absl::Status CheckDynamicSlice(const Instruction& inst);
  // all-to-all without dimensions=: one operand per group member.
  absl::Status CheckTupleAllToAll(const Instruction& inst);
  absl::Status CheckRaggedAllToAll(const Instruction& inst);
  absl::Status CheckDynamicUpdateSlice(const Instruction& inst);
  absl::Status CheckCopyDone(const Instruction& inst);
  // An opcode that reached the checks of a family it is not in: a bug of
  // the verifier, never of the program.
  absl::Status NotInFamily(const Instruction& inst, absl::string_view family) {
    return absl::InternalError(absl::StrFormat(
        "%%%s: the verifier has no check for opcode %s among its %s ops",
        inst.name(), inst.opcode_name(), family));
  }

  // Operands [first, first + rank) must be integer scalars.
  absl::Status CheckStartIndices(const Instruction& inst, int first, int rank) {
    if (inst.operand_count() != first + rank) {
      return Invalid(
          inst, absl::StrFormat("%s needs %d start indices (one scalar per "
                                "dimension), got %d",
                                inst.opcode_name(), rank,
                                inst.operand_count() - first));
    }
    for (int i = first; i < first + rank; ++i) {
      const Shape& s = inst.operand(i)->shape();
      if (s.rank() != 0 || !IsIntegral(s.element_type())) {
        return Invalid(
            inst, absl::StrFormat("start index %d must be an integer scalar, "
                                  "got %s",
                                  i - first, s.ToString()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckArguments(const Instruction& inst,
                              const Computation& callee,
                              absl::Span<Instruction* const> args) {
    if (callee.parameters().size() != args.size()) {
      return Invalid(
          inst, absl::StrFormat("computation %s takes %d parameter(s) but %d "
                                "are passed",
                                callee.name(), callee.parameters().size(),
                                args.size()));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (callee.parameters()[i]->shape() != args[i]->shape()) {
        return Invalid(
            inst,
            absl::StrFormat("argument %d is %s but parameter %d of %s is "
                            "%s",
                            i, args[i]->shape().ToString(), i, callee.name(),
                            callee.parameters()[i]->shape().ToString()));
      }
    }
    return absl::OkStatus();
  }

  // `result`: the op's result shape when it is not the instruction's (the
  // start of an asynchronous pair).
  absl::Status CheckCollective(const Instruction& inst,
                               const Shape* result = nullptr);

  absl::Status CheckDot(const Instruction& inst);

  absl::Status CheckReduce(const Instruction& inst);

  const Module& module_;
  absl::string_view text_;
  std::vector<const Computation*> reachable_;
  absl::flat_hash_set<const void*> checked_tuples_;
};

}  // namespace pjrt::hlo::verifier_internal

#endif  // PJRT_HLO_VERIFIER_INTERNAL_H_
