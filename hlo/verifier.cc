#include "hlo/verifier.h"

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
#include "hlo/op_shapes.h"
#include "hlo/parser.h"

namespace pjrt::hlo {

bool IsIdentityCustomCall(absl::string_view target) {
  return target == "Sharding" || target == "SPMDFullToShardShape" ||
         target == "SPMDShardToFullShape" ||
         target == "annotate_device_placement" || target == "MoveToHost" ||
         target == "MoveToDevice";
}

bool IsSupportedOpcode(Opcode opcode) {
  switch (opcode) {
    case Opcode::kOther:
      return false;
    default:
      return true;
  }
}

namespace {

bool IsNumeric(PrimitiveType t) {
  return IsArrayType(t) && t != PrimitiveType::kPred;
}
bool IsIntegral(PrimitiveType t) {
  return IsSignedInteger(t) || IsUnsignedInteger(t);
}
bool IsFloatOrComplex(PrimitiveType t) {
  return IsFloatingPoint(t) || IsComplex(t);
}
bool IsOrdered(PrimitiveType t) { return IsArrayType(t) && !IsComplex(t); }
bool IsOrderedNumeric(PrimitiveType t) { return IsNumeric(t) && !IsComplex(t); }

// The real type of a complex type's parts (f32 for c64, f64 for c128).
PrimitiveType ComplexPartType(PrimitiveType t) {
  return t == PrimitiveType::kC128 ? PrimitiveType::kF64 : PrimitiveType::kF32;
}

bool SameDims(const Shape& a, const Shape& b) {
  return a.dimensions() == b.dimensions();
}

std::string ShapeList(absl::Span<Instruction* const> operands) {
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
  absl::Status CheckCallGraph() {
    // 1 while on the path, 2 once done.
    absl::flat_hash_map<const Computation*, int> state;
    // Instructions of a computation with its callees inlined (saturating),
    // and the depth of calls below it.
    absl::flat_hash_map<const Computation*, int64_t> inlined;
    absl::flat_hash_map<const Computation*, int> depth;
    struct Frame {
      const Computation* computation;
      size_t instruction = 0;
      size_t callee = 0;
    };
    std::vector<Frame> path = {{module_.entry()}};
    state[module_.entry()] = 1;
    while (!path.empty()) {
      Frame& frame = path.back();
      const Computation* c = frame.computation;
      const auto& instructions = c->instructions();
      if (frame.instruction < instructions.size()) {
        const auto& callees =
            instructions[frame.instruction]->called_computations();
        if (frame.callee >= callees.size()) {
          ++frame.instruction;
          frame.callee = 0;
          continue;
        }
        const Computation* callee = callees[frame.callee++];
        int& s = state[callee];
        if (s == 2) continue;
        if (s == 1) {
          std::vector<std::string> names;
          bool on = false;
          for (const Frame& f : path) {
            on = on || f.computation == callee;
            if (on) names.push_back(f.computation->name());
          }
          names.push_back(callee->name());
          return absl::InvalidArgumentError(FormatErrorAt(
              text_, callee->line(), 1,
              absl::StrCat("computation ", callee->name(), " calls itself: ",
                           Excerpt(absl::StrJoin(names, " -> "), 1024))));
        }
        if (path.size() > static_cast<size_t>(kMaxCallDepth)) {
          const Instruction& call = *instructions[frame.instruction];
          return Invalid(call,
                         absl::StrFormat("calls nest more than %d computations "
                                         "deep (from the entry down to %s)",
                                         kMaxCallDepth, callee->name()));
        }
        s = 1;
        path.push_back({callee});
        continue;
      }
      // Every callee is done: sum up.
      int64_t total = static_cast<int64_t>(instructions.size());
      int deepest = 0;
      for (const auto& inst : instructions) {
        for (const Computation* callee : inst->called_computations()) {
          total =
              std::min(total + inlined[callee], kMaxInlinedInstructions + 1);
          deepest = std::max(deepest, depth[callee] + 1);
        }
      }
      if (total > kMaxInlinedInstructions) {
        return absl::InvalidArgumentError(FormatErrorAt(
            text_, c->line(), 1,
            absl::StrFormat("computation %s holds more than %d instructions "
                            "once the computations it calls are inlined; "
                            "pjrtd compiles at most %d",
                            c->name(), kMaxInlinedInstructions,
                            kMaxInlinedInstructions)));
      }
      inlined[c] = total;
      depth[c] = deepest;
      state[c] = 2;
      reachable_.push_back(c);
      path.pop_back();
    }
    return absl::OkStatus();
  }

  absl::Status CheckCycles(const Computation& c) {
    absl::flat_hash_map<const Instruction*, int> state;
    std::vector<const Instruction*> path;
    // Iterative DFS: a cycle may be long, and input comes from clients.
    for (const auto& start : c.instructions()) {
      if (state[start.get()] == 2) continue;
      std::vector<std::pair<const Instruction*, int>> stack = {
          {start.get(), 0}};
      state[start.get()] = 1;
      while (!stack.empty()) {
        auto& [inst, next] = stack.back();
        if (next < inst->operand_count()) {
          const Instruction* operand = inst->operand(next++);
          int& s = state[operand];
          if (s == 1) {
            std::vector<std::string> names;
            bool on = false;
            for (const auto& [frame, unused] : stack) {
              on = on || frame == operand;
              if (on) names.push_back("%" + frame->name());
            }
            names.push_back("%" + operand->name());
            return Invalid(*operand,
                           absl::StrCat("depends on itself: ",
                                        absl::StrJoin(names, " uses ")));
          }
          if (s == 0) {
            s = 1;
            stack.push_back({operand, 0});
          }
          continue;
        }
        state[inst] = 2;
        stack.pop_back();
      }
    }
    return absl::OkStatus();
  }

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
                    "pred, s4, s8, s16, s32, s64, u4, u8, u16, u32, u64, "
                    "f8e4m3fn, f8e5m2, f16, bf16, f32, f64, c64, c128)",
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

  absl::Status CheckInstruction(const Instruction& inst) {
    if (!IsSupportedOpcode(inst.opcode())) {
      return Unimplemented(
          inst, absl::StrFormat("op '%s' is not supported by pjrtd%s",
                                inst.opcode_name(),
                                inst.opcode() == Opcode::kOther ? "" : " yet"));
    }
    PJRT_RETURN_IF_ERROR(CheckTypes(inst, inst.shape()));
    const Attributes& a = inst.attributes();
    const auto operand = [&](int i) -> const Shape& {
      return inst.operand(i)->shape();
    };
    switch (inst.opcode()) {
      case Opcode::kParameter:
        return ExpectOperands(inst, 0);
      case Opcode::kConstant:
        if (a.literal.shape() != inst.shape()) {
          return Invalid(
              inst, absl::StrFormat("the literal is %s but the declared shape "
                                    "is %s",
                                    a.literal.shape().ToString(),
                                    inst.shape().ToString()));
        }
        return absl::OkStatus();
      case Opcode::kIota:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
        if (!inst.shape().IsArray() || inst.shape().rank() == 0) {
          return Invalid(inst, "iota needs an array shape of rank >= 1");
        }
        if (a.iota_dimension < 0 || a.iota_dimension >= inst.shape().rank()) {
          return Invalid(
              inst, absl::StrFormat("iota_dimension %d is out of range for %s",
                                    a.iota_dimension, inst.shape().ToString()));
        }
        if (inst.shape().element_type() == PrimitiveType::kPred) {
          return Invalid(inst, "iota of pred is not defined");
        }
        return absl::OkStatus();
      case Opcode::kBroadcast: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        const Shape& out = inst.shape();
        if (!out.IsArray() || out.element_type() != in.element_type()) {
          return Invalid(inst,
                         absl::StrFormat("broadcast of %s cannot produce %s",
                                         in.ToString(), out.ToString()));
        }
        if (static_cast<int>(a.dimensions.size()) != in.rank()) {
          return Invalid(
              inst,
              absl::StrFormat("dimensions={%s} has %d entries but the "
                              "operand %s has rank %d",
                              absl::StrJoin(a.dimensions, ","),
                              a.dimensions.size(), in.ToString(), in.rank()));
        }
        PJRT_RETURN_IF_ERROR(
            ExpectDimensionsIn(inst, a.dimensions, out.rank(), "dimension"));
        for (int i = 0; i < in.rank(); ++i) {
          if (in.dimensions(i) != out.dimensions(a.dimensions[i])) {
            return Invalid(
                inst, absl::StrFormat("operand dimension %d (size %d) maps to "
                                      "output dimension %d of size %d; sizes "
                                      "must match exactly",
                                      i, in.dimensions(i), a.dimensions[i],
                                      out.dimensions(a.dimensions[i])));
          }
        }
        return absl::OkStatus();
      }
      case Opcode::kReshape:
      case Opcode::kBitcast: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        if (!inst.shape().IsArray() ||
            inst.shape().element_type() != in.element_type() ||
            inst.shape().ElementCount() != in.ElementCount()) {
          return Invalid(inst, absl::StrFormat(
                                   "%s of %s (%d elements) cannot produce %s",
                                   inst.opcode_name(), in.ToString(),
                                   in.ElementCount(), inst.shape().ToString()));
        }
        return absl::OkStatus();
      }
      case Opcode::kTranspose: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        if (static_cast<int>(a.dimensions.size()) != in.rank()) {
          return Invalid(
              inst, absl::StrFormat("dimensions={%s} is not a permutation of "
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
      case Opcode::kConvert: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        if (!inst.shape().IsArray() || !SameDims(inst.shape(), operand(0))) {
          return Invalid(
              inst,
              absl::StrFormat("convert of %s cannot produce %s",
                              operand(0).ToString(), inst.shape().ToString()));
        }
        return absl::OkStatus();
      }
      case Opcode::kBitcastConvert: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        if (IsComplex(in.element_type()) ||
            IsComplex(inst.shape().element_type())) {
          return Unimplemented(
              inst,
              absl::StrFormat("bitcast-convert of complex types (%s to "
                              "%s) is not supported",
                              PrimitiveTypeName(in.element_type()),
                              PrimitiveTypeName(inst.shape().element_type())));
        }
        if (BitWidth(in.element_type()) !=
            BitWidth(inst.shape().element_type())) {
          return Unimplemented(
              inst, absl::StrFormat(
                        "bitcast-convert between types of different widths "
                        "(%s to %s) is not supported",
                        PrimitiveTypeName(in.element_type()),
                        PrimitiveTypeName(inst.shape().element_type())));
        }
        if (!SameDims(in, inst.shape())) {
          return Invalid(
              inst, absl::StrFormat("bitcast-convert of %s cannot produce %s",
                                    in.ToString(), inst.shape().ToString()));
        }
        return absl::OkStatus();
      }
      case Opcode::kCopy:
      case Opcode::kOptimizationBarrier:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        return ExpectShape(inst, operand(0));
      case Opcode::kCustomCall: {
        if (a.custom_call_target == "TopK") {
          return CheckInferred(inst, InferTopKShape(inst));
        }
        if (!IsIdentityCustomCall(a.custom_call_target)) {
          return Unimplemented(
              inst, absl::StrFormat(
                        "custom-call target \"%s\" is not supported; pjrtd "
                        "runs TopK, and Sharding, SPMDFullToShardShape, "
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
          return Invalid(inst,
                         absl::StrFormat("index=%d is out of range for %s",
                                         a.tuple_index, in.ToString()));
        }
        return ExpectShape(inst, in.tuple_shapes()[a.tuple_index]);
      }
      case Opcode::kCall: {
        if (inst.called_computations().size() != 1) {
          return Invalid(inst,
                         "call needs exactly one computation (to_apply=)");
        }
        const Computation& callee = *inst.called_computations()[0];
        PJRT_RETURN_IF_ERROR(CheckArguments(inst, callee, inst.operands()));
        return ExpectShape(inst, callee.root()->shape());
      }
      case Opcode::kSelect: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 3));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& p = operand(0);
        if (p.element_type() != PrimitiveType::kPred ||
            (p.rank() != 0 && !SameDims(p, operand(1)))) {
          return Invalid(
              inst, absl::StrFormat("the predicate must be pred with the "
                                    "dimensions of the other operands (or a "
                                    "scalar), got %s",
                                    p.ToString()));
        }
        if (operand(1) != operand(2)) {
          return Invalid(
              inst,
              absl::StrFormat("on_true (%s) and on_false (%s) must have "
                              "the same shape",
                              operand(1).ToString(), operand(2).ToString()));
        }
        return ExpectShape(inst, operand(1));
      }
      case Opcode::kClamp: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 3));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& x = operand(1);
        for (int i : {0, 2}) {
          if (operand(i).element_type() != x.element_type() ||
              (operand(i).rank() != 0 && !SameDims(operand(i), x))) {
            return Invalid(
                inst, absl::StrFormat("bound %s must be a scalar or have the "
                                      "shape of %s",
                                      operand(i).ToString(), x.ToString()));
          }
        }
        if (!IsOrderedNumeric(x.element_type())) {
          return Invalid(
              inst, absl::StrFormat("clamp needs real numeric operands, not %s",
                                    PrimitiveTypeName(x.element_type())));
        }
        return ExpectShape(inst, x);
      }
      case Opcode::kCompare: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        if (operand(0) != operand(1)) {
          return Invalid(
              inst,
              absl::StrFormat("operands must have the same shape; got %s "
                              "and %s",
                              operand(0).ToString(), operand(1).ToString()));
        }
        if (!a.has("direction")) {
          return Invalid(inst, "compare needs direction=EQ|NE|LT|LE|GT|GE");
        }
        PrimitiveType t = operand(0).element_type();
        if (IsComplex(t) &&
            a.comparison_direction != ComparisonDirection::kEq &&
            a.comparison_direction != ComparisonDirection::kNe) {
          return Invalid(
              inst,
              absl::StrFormat("%s operands compare with EQ or NE only, "
                              "not direction=%s",
                              PrimitiveTypeName(t), *a.FindRaw("direction")));
        }
        if (a.comparison_type == ComparisonType::kTotalOrder ||
            a.comparison_type == ComparisonType::kFloat) {
          if (!IsFloatingPoint(t)) {
            return Invalid(inst, absl::StrFormat(
                                     "type=%s needs floating-point operands, "
                                     "not %s",
                                     *a.FindRaw("type"), PrimitiveTypeName(t)));
          }
        }
        return ExpectShape(
            inst, Shape(PrimitiveType::kPred,
                        std::vector<int64_t>(operand(0).dimensions().begin(),
                                             operand(0).dimensions().end())));
      }
      case Opcode::kAbs:
      case Opcode::kReal:
      case Opcode::kImag: {
        // Of a complex operand: its real part type; otherwise the same.
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const PrimitiveType t = operand(0).element_type();
        const bool ok =
            inst.opcode() == Opcode::kAbs ? IsNumeric(t) : IsFloatOrComplex(t);
        if (!ok) {
          return Invalid(inst,
                         absl::StrFormat("%s needs %s operands, not %s",
                                         inst.opcode_name(),
                                         inst.opcode() == Opcode::kAbs
                                             ? "numeric"
                                             : "floating-point or complex",
                                         PrimitiveTypeName(t)));
        }
        return ExpectShape(
            inst, Shape(IsComplex(t) ? ComplexPartType(t) : t,
                        std::vector<int64_t>(operand(0).dimensions().begin(),
                                             operand(0).dimensions().end())));
      }
      case Opcode::kComplex: {
        PJRT_RETURN_IF_ERROR(CheckElementwiseOperands(inst, 2));
        const PrimitiveType t = operand(0).element_type();
        if (t != PrimitiveType::kF32 && t != PrimitiveType::kF64) {
          return Invalid(
              inst, absl::StrFormat("complex needs f32 or f64 operands, not %s",
                                    PrimitiveTypeName(t)));
        }
        return ExpectShape(
            inst, Shape(t == PrimitiveType::kF64 ? PrimitiveType::kC128
                                                 : PrimitiveType::kC64,
                        std::vector<int64_t>(operand(0).dimensions().begin(),
                                             operand(0).dimensions().end())));
      }
      case Opcode::kNegate:
      case Opcode::kSign:
        return CheckElementwise(inst, 1, IsNumeric, "numeric");
      case Opcode::kExp:
      case Opcode::kExpm1:
      case Opcode::kLog:
      case Opcode::kLog1p:
      case Opcode::kSqrt:
      case Opcode::kRsqrt:
      case Opcode::kTanh:
      case Opcode::kLogistic:
      case Opcode::kSin:
      case Opcode::kCos:
      case Opcode::kTan:
        return CheckElementwise(inst, 1, IsFloatOrComplex,
                                "floating-point or complex");
      case Opcode::kCbrt:
      case Opcode::kErf:
      case Opcode::kFloor:
      case Opcode::kCeil:
      case Opcode::kRoundNearestAfz:
      case Opcode::kRoundNearestEven:
        return CheckElementwise(inst, 1, IsFloatingPoint, "floating-point");
      case Opcode::kReducePrecision:
        if (a.exponent_bits < 1 || a.mantissa_bits < 0 ||
            a.exponent_bits > INT32_MAX || a.mantissa_bits > INT32_MAX) {
          return Invalid(
              inst, absl::StrFormat("exponent_bits=%d and mantissa_bits=%d are "
                                    "invalid (need >= 1 and >= 0, and 32-bit "
                                    "integers)",
                                    a.exponent_bits, a.mantissa_bits));
        }
        return CheckElementwise(inst, 1, IsFloatingPoint, "floating-point");
      case Opcode::kIsFinite: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        if (!IsFloatingPoint(operand(0).element_type())) {
          return Invalid(
              inst, absl::StrFormat("is-finite needs a floating-point operand, "
                                    "not %s",
                                    operand(0).ToString()));
        }
        return ExpectShape(
            inst, Shape(PrimitiveType::kPred,
                        std::vector<int64_t>(operand(0).dimensions().begin(),
                                             operand(0).dimensions().end())));
      }
      case Opcode::kNot:
        return CheckElementwise(
            inst, 1,
            [](PrimitiveType t) {
              return t == PrimitiveType::kPred || IsIntegral(t);
            },
            "pred or integer");
      case Opcode::kPopcnt:
      case Opcode::kClz:
        return CheckElementwise(inst, 1, IsIntegral, "integer");
      case Opcode::kAdd:
      case Opcode::kSubtract:
      case Opcode::kMultiply:
      case Opcode::kDivide:
      case Opcode::kPower:
        return CheckElementwise(inst, 2, IsNumeric, "numeric");
      case Opcode::kRemainder:
        return CheckElementwise(inst, 2, IsOrderedNumeric, "real numeric");
      case Opcode::kMaximum:
      case Opcode::kMinimum:
        return CheckElementwise(inst, 2, IsOrdered, "non-complex");
      case Opcode::kAtan2:
        return CheckElementwise(inst, 2, IsFloatingPoint, "floating-point");
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor:
        return CheckElementwise(
            inst, 2,
            [](PrimitiveType t) {
              return t == PrimitiveType::kPred || IsIntegral(t);
            },
            "pred or integer");
      case Opcode::kShiftLeft:
      case Opcode::kShiftRightLogical:
      case Opcode::kShiftRightArithmetic:
        return CheckElementwise(inst, 2, IsIntegral, "integer");
      case Opcode::kDot:
        return CheckDot(inst);
      case Opcode::kReduce:
        return CheckReduce(inst);
      case Opcode::kSlice: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        if (static_cast<int>(a.slice.size()) != in.rank()) {
          return Invalid(inst, absl::StrFormat(
                                   "slice has %d ranges but the operand %s has "
                                   "rank %d",
                                   a.slice.size(), in.ToString(), in.rank()));
        }
        std::vector<int64_t> dims;
        for (int i = 0; i < in.rank(); ++i) {
          const SliceDimension& s = a.slice[i];
          if (s.start < 0 || s.start > s.limit || s.limit > in.dimensions(i) ||
              s.stride < 1) {
            return Invalid(
                inst, absl::StrFormat("slice range [%d:%d:%d] is invalid for "
                                      "dimension %d of size %d",
                                      s.start, s.limit, s.stride, i,
                                      in.dimensions(i)));
          }
          const int64_t span = s.limit - s.start;  // >= 0, checked above
          dims.push_back(span / s.stride + (span % s.stride != 0 ? 1 : 0));
        }
        return ExpectShape(inst, Shape(in.element_type(), dims));
      }
      case Opcode::kConcatenate: {
        if (inst.operand_count() < 1) {
          return Invalid(inst, "concatenate needs at least one operand");
        }
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        if (a.dimensions.size() != 1) {
          return Invalid(
              inst, absl::StrFormat("concatenate needs dimensions={d} (one "
                                    "dimension), got %d",
                                    a.dimensions.size()));
        }
        const Shape& first = operand(0);
        int64_t d = a.dimensions[0];
        if (d < 0 || d >= first.rank()) {
          return Invalid(
              inst, absl::StrFormat("dimension %d is out of range for %s", d,
                                    first.ToString()));
        }
        std::vector<int64_t> dims(first.dimensions().begin(),
                                  first.dimensions().end());
        for (int i = 1; i < inst.operand_count(); ++i) {
          const Shape& s = operand(i);
          bool ok = s.element_type() == first.element_type() &&
                    s.rank() == first.rank();
          for (int k = 0; ok && k < s.rank(); ++k) {
            ok = k == d || s.dimensions(k) == first.dimensions(k);
          }
          if (!ok) {
            return Invalid(
                inst,
                absl::StrFormat("operand %d (%s) does not fit operand 0 "
                                "(%s) for concatenation along dimension %d",
                                i, s.ToString(), first.ToString(), d));
          }
          if (__builtin_add_overflow(dims[d], s.dimensions(d), &dims[d]) ||
              dims[d] > kMaxArrayBytes) {
            return Invalid(
                inst, absl::StrFormat("concatenating along dimension %d gives "
                                      "a dimension larger than %d",
                                      d, kMaxArrayBytes));
          }
        }
        return ExpectShape(inst, Shape(first.element_type(), dims));
      }
      case Opcode::kPad: {
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        if (operand(1).rank() != 0 ||
            operand(1).element_type() != in.element_type()) {
          return Invalid(inst, absl::StrFormat(
                                   "the padding value must be a %s scalar, got "
                                   "%s",
                                   PrimitiveTypeName(in.element_type()),
                                   operand(1).ToString()));
        }
        if (static_cast<int>(a.padding.size()) != in.rank()) {
          return Invalid(inst, absl::StrFormat(
                                   "padding has %d entries but the operand %s "
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
                inst, absl::StrFormat("padding %d_%d_%d of dimension %d (size "
                                      "%d) is invalid: interior must be >= 0, "
                                      "the padded size >= 0, and each of them "
                                      "at most %d (2^56) in magnitude",
                                      p.low, p.high, p.interior, i, d,
                                      kMaxArrayBytes));
          }
          dims.push_back(size);
        }
        return ExpectShape(inst, Shape(in.element_type(), dims));
      }
      case Opcode::kReverse:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(
            inst, a.dimensions, operand(0).rank(), "dimension"));
        return ExpectShape(inst, operand(0));
      case Opcode::kDynamicSlice: {
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        const Shape& in = operand(0);
        PJRT_RETURN_IF_ERROR(CheckStartIndices(inst, 1, in.rank()));
        if (static_cast<int>(a.dynamic_slice_sizes.size()) != in.rank()) {
          return Invalid(
              inst, absl::StrFormat("dynamic_slice_sizes has %d entries for "
                                    "rank %d",
                                    a.dynamic_slice_sizes.size(), in.rank()));
        }
        for (int i = 0; i < in.rank(); ++i) {
          int64_t size = a.dynamic_slice_sizes[i];
          if (size < 0 || size > in.dimensions(i)) {
            return Invalid(
                inst, absl::StrFormat("slice size %d is invalid for dimension "
                                      "%d of size %d",
                                      size, i, in.dimensions(i)));
          }
        }
        return ExpectShape(inst,
                           Shape(in.element_type(), a.dynamic_slice_sizes));
      }
      case Opcode::kDynamicUpdateSlice: {
        PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
        if (inst.operand_count() < 2) {
          return Invalid(inst,
                         "dynamic-update-slice needs an operand and an "
                         "update");
        }
        const Shape& in = operand(0);
        const Shape& update = operand(1);
        bool ok = update.element_type() == in.element_type() &&
                  update.rank() == in.rank();
        for (int i = 0; ok && i < in.rank(); ++i) {
          ok = update.dimensions(i) <= in.dimensions(i);
        }
        if (!ok) {
          return Invalid(
              inst, absl::StrFormat("the update %s does not fit in the operand "
                                    "%s",
                                    update.ToString(), in.ToString()));
        }
        PJRT_RETURN_IF_ERROR(CheckStartIndices(inst, 2, in.rank()));
        return ExpectShape(inst, in);
      }
      case Opcode::kAllReduce:
      case Opcode::kAllGather:
      case Opcode::kReduceScatter:
      case Opcode::kAllToAll:
      case Opcode::kCollectivePermute:
        return CheckCollective(inst);
      case Opcode::kReplicaId:
      case Opcode::kPartitionId:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
        return ExpectShape(inst, Shape(PrimitiveType::kU32, {}));
      case Opcode::kWhile:
        return CheckInferred(inst, InferWhileShape(inst));
      case Opcode::kConditional:
        return CheckInferred(inst, InferConditionalShape(inst));
      case Opcode::kMap:
        return CheckInferred(inst, InferMapShape(inst));
      case Opcode::kGather:
        return CheckInferred(inst, InferGatherShape(inst));
      case Opcode::kScatter:
        return CheckInferred(inst, InferScatterShape(inst));
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
      case Opcode::kRngBitGenerator:
        return CheckInferred(inst, InferRngBitGeneratorShape(inst));
      case Opcode::kRng:
        return CheckInferred(inst, InferRngShape(inst));
      case Opcode::kTopK:
        return CheckInferred(inst, InferTopKShape(inst));
      case Opcode::kRngGetAndUpdateState:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 0));
        return ExpectShape(inst, Shape(PrimitiveType::kU64, {2}));
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
            return Invalid(inst, absl::StrFormat(
                                     "operand %d is %s; after-all takes tokens",
                                     i, operand(i).ToString()));
          }
        }
        return ExpectShape(inst, Shape(PrimitiveType::kToken, {}));
      case Opcode::kAddDependency:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
        if (!operand(1).IsToken()) {
          return Invalid(inst,
                         absl::StrFormat("operand 1 is %s; add-dependency "
                                         "takes a token there",
                                         operand(1).ToString()));
        }
        return ExpectShape(inst, operand(0));
      case Opcode::kCopyStart:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        return ExpectShape(inst,
                           Shape::Tuple({operand(0), operand(0),
                                         Shape(PrimitiveType::kU32, {})}));
      case Opcode::kCopyDone:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        if (!operand(0).IsTuple() || operand(0).tuple_shapes().size() != 3) {
          return Invalid(inst, absl::StrFormat("copy-done takes a copy-start's "
                                               "(dest, src, context), not %s",
                                               operand(0).ToString()));
        }
        return ExpectShape(inst, operand(0).tuple_shapes()[0]);
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
        while (start->opcode() == Opcode::kAsyncUpdate)
          start = start->operand(0);
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
      case Opcode::kAllReduceStart:
        return CheckCollective(inst);
      case Opcode::kAllGatherStart:
      case Opcode::kCollectivePermuteStart: {
        // (operand, result, context...): the op's result is element 1.
        const Shape& s = inst.shape();
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
              inst,
              absl::StrFormat("%s takes the result of an %s, not %%%s (%s)",
                              inst.opcode_name(), OpcodeName(start),
                              inst.operand(0)->name(),
                              inst.operand(0)->opcode_name()));
        }
        return ExpectShape(inst, operand(0).tuple_shapes()[1]);
      }
      case Opcode::kAllReduceDone:
        PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 1));
        if (inst.operand(0)->opcode() != Opcode::kAllReduceStart) {
          return Invalid(
              inst, absl::StrFormat("all-reduce-done takes the result of an "
                                    "all-reduce-start, not %%%s (%s)",
                                    inst.operand(0)->name(),
                                    inst.operand(0)->opcode_name()));
        }
        return ExpectShape(inst, operand(0));
      case Opcode::kOther:
        return Unimplemented(
            inst, absl::StrFormat("op '%s' is not supported by pjrtd",
                                  inst.opcode_name()));
        // No default: -Wswitch makes a new Opcode without a case here a
        // compile error.
    }
    return absl::InternalError(
        absl::StrFormat("%%%s: the verifier has no check for opcode %d",
                        inst.name(), static_cast<int>(inst.opcode())));
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
                               const Shape* result = nullptr) {
    const Attributes& a = inst.attributes();
    if (inst.operand_count() < 1) {
      return Invalid(
          inst, absl::StrFormat("%s needs an operand", inst.opcode_name()));
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
    if (inst.operand_count() != 1) {
      return Unimplemented(
          inst, absl::StrFormat("%s of several operands is not supported",
                                inst.opcode_name()));
    }
    const Shape& out = result != nullptr ? *result : inst.shape();
    if (inst.opcode() == Opcode::kCollectivePermute)
      return ExpectShape(inst, in);
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
      return inst.opcode() == Opcode::kAllToAll && a.dimensions.empty()
                 ? Unimplemented(inst,
                                 "all-to-all without dimensions= (the tuple "
                                 "form) is not supported")
                 : Invalid(inst,
                           absl::StrFormat(
                               "%s needs dimensions={d} with d a dimension "
                               "of %s",
                               inst.opcode_name(), in.ToString()));
    }
    const int64_t d = a.dimensions[0];
    bool ok = out.IsArray() && out.element_type() == in.element_type() &&
              out.rank() == in.rank();
    for (int i = 0; ok && i < in.rank(); ++i) {
      if (i == d) {
        if (inst.opcode() == Opcode::kAllGather ||
            inst.opcode() == Opcode::kAllGatherStart) {
          ok =
              in.dimensions(d) > 0 && out.dimensions(d) % in.dimensions(d) == 0;
        } else if (inst.opcode() == Opcode::kReduceScatter) {
          ok = out.dimensions(d) > 0 &&
               in.dimensions(d) % out.dimensions(d) == 0;
        } else {
          ok = out.dimensions(d) == in.dimensions(d);
        }
      } else {
        ok = out.dimensions(i) == in.dimensions(i);
      }
    }
    if (!ok) {
      return Invalid(
          inst, absl::StrFormat("%s of %s along dimension %d cannot produce %s",
                                inst.opcode_name(), in.ToString(), d,
                                out.ToString()));
    }
    if (inst.opcode() == Opcode::kReduceScatter &&
        inst.called_computations().size() != 1) {
      return Invalid(inst, "reduce-scatter needs a computation (to_apply=)");
    }
    return absl::OkStatus();
  }

  absl::Status CheckDot(const Instruction& inst) {
    PJRT_RETURN_IF_ERROR(ExpectOperands(inst, 2));
    PJRT_RETURN_IF_ERROR(ExpectArrays(inst));
    const Shape& lhs = inst.operand(0)->shape();
    const Shape& rhs = inst.operand(1)->shape();
    const DotDimensionNumbers& d = inst.attributes().dot_dimension_numbers;
    for (const Shape* s : {&lhs, &rhs}) {
      if (s->element_type() == PrimitiveType::kPred) {
        return Invalid(inst, "dot needs numeric operands, not pred");
      }
    }
    PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(inst, d.lhs_batch_dimensions,
                                            lhs.rank(), "lhs batch dimension"));
    PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(inst, d.rhs_batch_dimensions,
                                            rhs.rank(), "rhs batch dimension"));
    PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(inst, d.lhs_contracting_dimensions,
                                            lhs.rank(),
                                            "lhs contracting dimension"));
    PJRT_RETURN_IF_ERROR(ExpectDimensionsIn(inst, d.rhs_contracting_dimensions,
                                            rhs.rank(),
                                            "rhs contracting dimension"));
    if (d.lhs_batch_dimensions.size() != d.rhs_batch_dimensions.size() ||
        d.lhs_contracting_dimensions.size() !=
            d.rhs_contracting_dimensions.size()) {
      return Invalid(inst,
                     "lhs and rhs must have as many batch dimensions, and "
                     "as many contracting dimensions, as each other");
    }
    for (size_t i = 0; i < d.lhs_batch_dimensions.size(); ++i) {
      if (lhs.dimensions(d.lhs_batch_dimensions[i]) !=
          rhs.dimensions(d.rhs_batch_dimensions[i])) {
        return Invalid(
            inst,
            absl::StrFormat(
                "batch dimension %d has size %d in lhs %s but "
                "%d in rhs %s",
                i, lhs.dimensions(d.lhs_batch_dimensions[i]), lhs.ToString(),
                rhs.dimensions(d.rhs_batch_dimensions[i]), rhs.ToString()));
      }
    }
    for (size_t i = 0; i < d.lhs_contracting_dimensions.size(); ++i) {
      if (lhs.dimensions(d.lhs_contracting_dimensions[i]) !=
          rhs.dimensions(d.rhs_contracting_dimensions[i])) {
        return Invalid(
            inst,
            absl::StrFormat("contracting dimension %d has size %d in lhs "
                            "%s but %d in rhs %s",
                            i, lhs.dimensions(d.lhs_contracting_dimensions[i]),
                            lhs.ToString(),
                            rhs.dimensions(d.rhs_contracting_dimensions[i]),
                            rhs.ToString()));
      }
    }
    const auto is_in = [](const std::vector<int64_t>& v, int64_t x) {
      return std::find(v.begin(), v.end(), x) != v.end();
    };
    std::vector<int64_t> dims;
    for (int64_t b : d.lhs_batch_dimensions) dims.push_back(lhs.dimensions(b));
    for (int i = 0; i < lhs.rank(); ++i) {
      if (!is_in(d.lhs_batch_dimensions, i) &&
          !is_in(d.lhs_contracting_dimensions, i)) {
        dims.push_back(lhs.dimensions(i));
      }
    }
    for (int i = 0; i < rhs.rank(); ++i) {
      if (!is_in(d.rhs_batch_dimensions, i) &&
          !is_in(d.rhs_contracting_dimensions, i)) {
        dims.push_back(rhs.dimensions(i));
      }
    }
    if (!inst.shape().IsArray() ||
        inst.shape().element_type() == PrimitiveType::kPred) {
      return Invalid(inst,
                     absl::StrFormat("dot produces a numeric array, not %s",
                                     inst.shape().ToString()));
    }
    return ExpectShape(inst, Shape(inst.shape().element_type(), dims));
  }

  absl::Status CheckReduce(const Instruction& inst) {
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
        return Invalid(inst, absl::StrFormat(
                                 "initial value %d must be a %s scalar, got %s",
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
        return Invalid(
            inst, absl::StrFormat("parameter %d of the reducer %s is %s; "
                                  "expected %s",
                                  i, region.name(),
                                  region.parameters()[i]->shape().ToString(),
                                  scalars[i % n].ToString()));
      }
    }
    Shape region_result = n == 1 ? scalars[0] : Shape::Tuple(scalars);
    if (region.root()->shape() != region_result) {
      return Invalid(inst, absl::StrFormat(
                               "the reducer %s returns %s; expected %s",
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

  const Module& module_;
  absl::string_view text_;
  std::vector<const Computation*> reachable_;
  absl::flat_hash_set<const void*> checked_tuples_;
};

}  // namespace

absl::Status VerifyModule(const Module& module, absl::string_view text) {
  return Verifier(module, text).Run();
}

}  // namespace pjrt::hlo
