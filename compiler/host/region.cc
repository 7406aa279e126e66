// Scalar computations (reducers, comparators, update computations, map)
// as expressions (see kernel.h).
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

namespace pjrt::compiler::host {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using lowering::ElementwiseOp;
using lowering::SetNodeAttributes;

absl::StatusOr<std::vector<int>> BuildScalarRegion(const Computation& region,
                                                   Expression* expr,
                                                   std::vector<int> params) {
  // Scalar values of the region: expression nodes, or tuples of them
  // (shared between copies, as Value's).
  struct ScalarValue {
    int node = -1;
    std::shared_ptr<const std::vector<ScalarValue>> elements;
    const std::vector<ScalarValue>& tuple() const {
      static const std::vector<ScalarValue>* const kEmpty =
          new std::vector<ScalarValue>();
      return elements != nullptr ? *elements : *kEmpty;
    }
  };
  const auto make_tuple = [](std::vector<ScalarValue> elements) {
    ScalarValue v;
    v.elements =
        std::make_shared<const std::vector<ScalarValue>>(std::move(elements));
    return v;
  };
  absl::flat_hash_map<const Instruction*, ScalarValue> done;
  for (const Instruction* inst : region.PostOrder()) {
    const auto operand = [&done, current = inst](int i) -> const ScalarValue& {
      return done.at(current->operand(i));
    };
    ScalarValue v;
    switch (inst->opcode()) {
      case Opcode::kParameter:
        v.node = params[inst->attributes().parameter_number];
        break;
      case Opcode::kConstant:
        if (inst->shape().rank() != 0) {
          return absl::UnimplementedError(
              absl::StrFormat("line %d: reducer %s uses a non-scalar constant",
                              inst->line(), region.name()));
        }
        v.node =
            expr->AddSplatFromStorage(inst->shape().element_type(),
                                      inst->attributes().literal.data().data());
        break;
      case Opcode::kTuple: {
        std::vector<ScalarValue> elements;
        for (int i = 0; i < inst->operand_count(); ++i) {
          elements.push_back(operand(i));
        }
        v = make_tuple(std::move(elements));
        break;
      }
      case Opcode::kGetTupleElement:
        v = operand(0).tuple()[inst->attributes().tuple_index];
        break;
      case Opcode::kCopy:
      case Opcode::kOptimizationBarrier:
      case Opcode::kDomain:
      case Opcode::kReshape:
      case Opcode::kBroadcast:
        v = operand(0);  // scalar to scalar
        break;
      case Opcode::kCall: {
        std::vector<int> call_params;
        for (int i = 0; i < inst->operand_count(); ++i) {
          if (operand(i).node < 0) {
            return absl::UnimplementedError("tuple arguments inside a reducer");
          }
          call_params.push_back(operand(i).node);
        }
        PJRT_ASSIGN_OR_RETURN(std::vector<int> outs,
                              BuildScalarRegion(*inst->called_computations()[0],
                                                expr, call_params));
        if (outs.size() == 1 && !inst->shape().IsTuple()) {
          v.node = outs[0];
        } else {
          std::vector<ScalarValue> elements;
          for (int o : outs) elements.push_back(ScalarValue{o, nullptr});
          v = make_tuple(std::move(elements));
        }
        break;
      }
      default: {
        PJRT_ASSIGN_OR_RETURN(ExprOp op, ElementwiseOp(*inst));
        ExprNode e;
        e.op = op;
        e.type = inst->shape().element_type();
        SetNodeAttributes(*inst, &e);
        for (int i = 0; i < inst->operand_count(); ++i)
          e.operands[i] = operand(i).node;
        v.node = expr->Add(e);
        break;
      }
    }
    done.emplace(inst, std::move(v));
  }
  const ScalarValue& root = done.at(region.root());
  std::vector<int> outputs;
  if (root.node >= 0) {
    outputs.push_back(root.node);
  } else {
    for (const ScalarValue& e : root.tuple()) outputs.push_back(e.node);
  }
  return outputs;
}

absl::StatusOr<Expression> ScalarRegionExpression(
    const Computation& region, absl::Span<const PrimitiveType> types) {
  Expression expr;
  std::vector<int> params;
  for (size_t i = 0; i < types.size(); ++i) {
    params.push_back(expr.AddInput(static_cast<int>(i), types[i]));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int> outs,
                        BuildScalarRegion(region, &expr, params));
  for (int o : outs) expr.AddOutput(o);
  expr.Finalize();
  return expr;
}
std::optional<ExprOp> SimpleReducer(const Computation& region) {
  if (region.parameters().size() != 2) return std::nullopt;
  const Instruction* root = region.root();
  if (root->operand_count() != 2) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter ||
      a == b) {
    return std::nullopt;
  }
  switch (root->opcode()) {
    case Opcode::kAdd:
      return ExprOp::kAdd;
    case Opcode::kMultiply:
      return ExprOp::kMultiply;
    case Opcode::kMaximum:
      return ExprOp::kMaximum;
    case Opcode::kMinimum:
      return ExprOp::kMinimum;
    case Opcode::kAnd:
      return ExprOp::kAnd;
    case Opcode::kOr:
      return ExprOp::kOr;
    default:
      return std::nullopt;
  }
}

}  // namespace pjrt::compiler::host
