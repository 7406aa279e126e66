#include "hlo/passes.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "hlo/op_attributes.h"
#include "hlo/passes_internal.h"

namespace pjrt::hlo {

namespace passes_internal {

Instruction* Add(Computation* c, const Instruction& at,
                 absl::string_view suffix, Opcode opcode,
                 absl::string_view opcode_name, Shape shape,
                 std::vector<Instruction*> operands) {
  auto made =
      std::make_unique<Instruction>(absl::StrCat(at.name(), suffix), opcode,
                                    std::string(opcode_name), std::move(shape));
  made->set_position(at.line(), at.column());
  for (Instruction* o : operands) made->AddOperand(o);
  return c->AddInstruction(std::move(made));
}

namespace {

// Whether `c` takes two scalars of `type` and gives their sum (`add`) or
// the second.
bool IsScalarRegion(const Computation& c, PrimitiveType type, bool add) {
  const Shape scalar(type, {});
  const Instruction* root = c.root();
  if (c.parameters().size() != 2 || root == nullptr ||
      c.parameters()[0]->shape() != scalar ||
      c.parameters()[1]->shape() != scalar) {
    return false;
  }
  if (!add) return root == c.parameters()[1];
  return root->opcode() == Opcode::kAdd &&
         root->operand(0) == c.parameters()[0] &&
         root->operand(1) == c.parameters()[1];
}

Computation* ScalarRegion(Module* module, PrimitiveType type, bool add) {
  const std::string base =
      absl::StrCat(add ? "pjrt.add." : "pjrt.second.", PrimitiveTypeName(type));
  std::string name = base;
  for (int n = 1;; ++n) {
    Computation* found = module->FindComputation(name);
    if (found == nullptr) break;
    if (IsScalarRegion(*found, type, add)) return found;
    name = absl::StrCat(base, ".", n);
  }
  auto region = std::make_unique<Computation>(name);
  const Shape scalar(type, {});
  Instruction* params[2];
  for (int i = 0; i < 2; ++i) {
    auto p = std::make_unique<Instruction>(
        absl::StrCat("p", i), Opcode::kParameter, "parameter", scalar);
    p->mutable_attributes()->parameter_number = i;
    params[i] = region->AddInstruction(std::move(p));
    region->mutable_parameters()->push_back(params[i]);
  }
  if (add) {
    auto sum =
        std::make_unique<Instruction>("sum", Opcode::kAdd, "add", scalar);
    sum->AddOperand(params[0]);
    sum->AddOperand(params[1]);
    region->set_root(region->AddInstruction(std::move(sum)));
  } else {
    region->set_root(params[1]);
  }
  return module->AddComputation(std::move(region));
}

}  // namespace

Computation* ScalarAddRegion(Module* module, PrimitiveType type) {
  return ScalarRegion(module, type, /*add=*/true);
}

Computation* ScalarSecondRegion(Module* module, PrimitiveType type) {
  return ScalarRegion(module, type, /*add=*/false);
}

}  // namespace passes_internal

namespace {

using passes_internal::Add;
using passes_internal::DimsOf;
using passes_internal::RewriteEach;

// Rewrites `conv` if it is a unit convolution; returns whether it did.
absl::StatusOr<bool> RewriteIfUnit(Computation* c, Instruction* conv) {
  const Instruction& lhs = *conv->operand(0);
  const Instruction& rhs = *conv->operand(1);
  const Shape& out = conv->shape();
  if (!out.IsArray() || lhs.shape().element_type() != out.element_type() ||
      rhs.shape().element_type() != out.element_type()) {
    return false;
  }
  const std::string* groups = conv->attributes().FindRaw("feature_group_count");
  const std::string* batch_groups =
      conv->attributes().FindRaw("batch_group_count");
  if ((groups != nullptr && *groups != "1") ||
      (batch_groups != nullptr && *batch_groups != "1")) {
    return false;
  }
  PJRT_ASSIGN_OR_RETURN(ConvolutionDimensions d,
                        ParseConvolutionDimensions(*conv));
  PJRT_ASSIGN_OR_RETURN(
      std::vector<WindowDimension> window,
      ParseWindow(*conv, static_cast<int>(d.input_spatial.size())));
  for (const WindowDimension& w : window) {
    if (w.size != 1 || w.stride != 1 || w.padding_low != 0 ||
        w.padding_high != 0 || w.base_dilation != 1 || w.window_dilation != 1 ||
        w.reversal) {
      return false;
    }
  }
  // The kernel without its spatial dimensions (all of size 1): a reshape
  // keeps the order of the input and output feature dimensions.
  std::vector<int64_t> kernel_dims;
  int64_t kernel_in = 0;
  for (int k = 0; k < rhs.shape().rank(); ++k) {
    if (k == d.kernel_input_feature) kernel_in = kernel_dims.size();
    if (k == d.kernel_input_feature || k == d.kernel_output_feature) {
      kernel_dims.push_back(rhs.shape().dimensions(k));
    }
  }
  Instruction* kernel =
      Add(c, *conv, ".kernel", Opcode::kReshape, "reshape",
          Shape(out.element_type(), kernel_dims), {conv->operand(1)});
  // dot: the input's dimensions but its feature, then the output feature.
  std::vector<int64_t> dot_dims;
  std::vector<int64_t> dot_source;  // input dimension of each, -1: feature
  for (int k = 0; k < lhs.shape().rank(); ++k) {
    if (k == d.input_feature) continue;
    dot_dims.push_back(lhs.shape().dimensions(k));
    dot_source.push_back(k);
  }
  dot_dims.push_back(out.dimensions(d.output_feature));
  dot_source.push_back(-1);
  Instruction* dot =
      Add(c, *conv, ".dot", Opcode::kDot, "dot",
          Shape(out.element_type(), dot_dims), {conv->operand(0), kernel});
  DotDimensionNumbers& numbers =
      dot->mutable_attributes()->dot_dimension_numbers;
  numbers.lhs_contracting_dimensions = {d.input_feature};
  numbers.rhs_contracting_dimensions = {kernel_in};
  // Output dimension j takes the dot dimension that holds it.
  std::vector<int64_t> order(out.rank());
  const auto dot_position = [&](int64_t input_dim) {
    return static_cast<int64_t>(
        std::find(dot_source.begin(), dot_source.end(), input_dim) -
        dot_source.begin());
  };
  order[d.output_batch] = dot_position(d.input_batch);
  order[d.output_feature] = dot_position(-1);
  for (size_t s = 0; s < d.output_spatial.size(); ++s) {
    order[d.output_spatial[s]] = dot_position(d.input_spatial[s]);
  }
  // The result keeps the convolution's layout (a bitcast of it reads it).
  Shape result_shape(out.element_type(), DimsOf(out));
  if (out.layout().has_value()) result_shape.set_layout(*out.layout());
  Instruction* result = Add(c, *conv, ".transpose", Opcode::kTranspose,
                            "transpose", result_shape, {dot});
  result->mutable_attributes()->dimensions = order;
  c->ReplaceUses(conv, result);
  return true;
}

// Writes the expansion of one batch norm into its computation: sums over
// every dimension but the feature one (reduce), the per-feature values
// broadcast along it, and element-wise ops in the operand's type: the
// StableHLO spec's decompositions (the formulas of XLA's batch norm
// expander, with the variance as the mean of the squared deviations).
class BatchNormExpansion {
 public:
  BatchNormExpansion(Module* module, Computation* c, Instruction* norm)
      : module_(module),
        c_(c),
        norm_(norm),
        x_(norm->operand(0)->shape().element_type(),
           DimsOf(norm->operand(0)->shape())),
        type_(x_.element_type()) {}

  absl::Status Run() {
    PJRT_ASSIGN_OR_RETURN(feature_,
                          ParseIntAttribute(*norm_, "feature_index", 0));
    PJRT_ASSIGN_OR_RETURN(const double epsilon,
                          ParseRequiredFloatAttribute(*norm_, "epsilon"));
    per_feature_ = Shape(type_, {x_.dimensions(feature_)});
    const int64_t features = x_.dimensions(feature_);
    count_ = features == 0 ? 0 : x_.ElementCount() / features;
    for (int64_t d = 0; d < x_.rank(); ++d) {
      if (d != feature_) others_.push_back(d);
    }
    Instruction* operand = norm_->operand(0);
    Instruction* replacement = nullptr;
    if (norm_->opcode() == Opcode::kBatchNormGrad) {
      Instruction* scale = norm_->operand(1);
      Instruction* dy = norm_->operand(4);
      Instruction* centered =
          Op(Opcode::kSubtract, operand, Along(norm_->operand(2)));
      Instruction* var_eps =
          Op(Opcode::kAdd, Along(norm_->operand(3)), Full(epsilon));
      Instruction* stddev = Make(Opcode::kSqrt, x_, {var_eps});
      Instruction* normalized = Op(Opcode::kDivide, centered, stddev);
      Instruction* n = Full(static_cast<double>(count_));
      // grad_operand = scale / stddev / n * (dy * n - sum(dy)
      //                - sum(dy * centered) * centered / (variance + eps))
      Instruction* i1 = Op(Opcode::kMultiply, dy, n);
      Instruction* sum_dy = Sum(dy);
      Instruction* i2 = Along(sum_dy);
      Instruction* i3 = Along(Sum(Op(Opcode::kMultiply, dy, centered)));
      Instruction* i5 =
          Op(Opcode::kDivide, Op(Opcode::kMultiply, i3, centered), var_eps);
      Instruction* i6 =
          Op(Opcode::kSubtract, Op(Opcode::kSubtract, i1, i2), i5);
      Instruction* grad_operand =
          Op(Opcode::kMultiply,
             Op(Opcode::kDivide, Op(Opcode::kDivide, Along(scale), stddev), n),
             i6);
      Instruction* grad_scale = Sum(Op(Opcode::kMultiply, dy, normalized));
      replacement = Make(Opcode::kTuple, norm_->shape(),
                         {grad_operand, grad_scale, sum_dy});
    } else {
      const bool training = norm_->opcode() == Opcode::kBatchNormTraining;
      Instruction* mean = training ? Mean(operand) : norm_->operand(3);
      Instruction* centered = Op(Opcode::kSubtract, operand, Along(mean));
      Instruction* variance =
          training ? Mean(Op(Opcode::kMultiply, centered, centered))
                   : norm_->operand(4);
      Instruction* stddev =
          Make(Opcode::kSqrt, x_,
               {Op(Opcode::kAdd, Along(variance), Full(epsilon))});
      Instruction* normalized = Op(Opcode::kDivide, centered, stddev);
      // Inference's result keeps the op's layout (a program's result
      // reads it); a tuple's elements keep theirs through the tuple.
      replacement =
          Make(Opcode::kAdd, training ? x_ : norm_->shape(),
               {Op(Opcode::kMultiply, Along(norm_->operand(1)), normalized),
                Along(norm_->operand(2))});
      if (training) {
        replacement =
            Make(Opcode::kTuple, norm_->shape(), {replacement, mean, variance});
      }
    }
    c_->ReplaceUses(norm_, replacement);
    return absl::OkStatus();
  }

 private:
  Instruction* Make(Opcode opcode, Shape shape,
                    std::vector<Instruction*> operands) {
    return Add(c_, *norm_, absl::StrCat(".expanded", made_++), opcode,
               OpcodeName(opcode), std::move(shape), std::move(operands));
  }
  // An element-wise op on two values of the operand's shape.
  Instruction* Op(Opcode opcode, Instruction* l, Instruction* r) {
    return Make(opcode, x_, {l, r});
  }
  // A scalar of the operand's type: an f32 or f64 constant, converted to
  // a narrower type (as XLA's expander converts its f32 literals).
  Instruction* Scalar(double value) {
    const bool wide = type_ == PrimitiveType::kF64;
    const Shape constant_shape(wide ? PrimitiveType::kF64 : PrimitiveType::kF32,
                               {});
    Instruction* constant = Make(Opcode::kConstant, constant_shape, {});
    Literal literal(constant_shape);
    if (wide) {
      literal.Set<double>(0, value);
    } else {
      literal.Set<float>(0, static_cast<float>(value));
    }
    constant->mutable_attributes()->literal = std::move(literal);
    if (constant_shape.element_type() == type_) return constant;
    return Make(Opcode::kConvert, Shape(type_, {}), {constant});
  }
  Instruction* Broadcast(Instruction* v, const Shape& to,
                         std::vector<int64_t> dimensions) {
    Instruction* b = Make(Opcode::kBroadcast, to, {v});
    b->mutable_attributes()->dimensions = std::move(dimensions);
    return b;
  }
  // `value` in every element of the operand's shape.
  Instruction* Full(double value) { return Broadcast(Scalar(value), x_, {}); }
  // A per-feature value along the feature dimension of the operand's shape.
  Instruction* Along(Instruction* v) { return Broadcast(v, x_, {feature_}); }
  // Per-feature sums of a value of the operand's shape.
  Instruction* Sum(Instruction* v) {
    Instruction* sum = Make(Opcode::kReduce, per_feature_, {v, Scalar(0)});
    sum->mutable_attributes()->dimensions = others_;
    sum->AddCalledComputation(passes_internal::ScalarAddRegion(module_, type_));
    return sum;
  }
  Instruction* Mean(Instruction* v) {
    Instruction* n =
        Broadcast(Scalar(static_cast<double>(count_)), per_feature_, {});
    return Make(Opcode::kDivide, per_feature_, {Sum(v), n});
  }
  Module* module_;
  Computation* c_;
  Instruction* norm_;
  Shape x_;  // the operand's shape, without its layout
  PrimitiveType type_;
  Shape per_feature_;
  int64_t feature_ = 0;
  int64_t count_ = 0;  // elements per feature
  std::vector<int64_t> others_;
  int made_ = 0;
};

// A constant of `literal` (an array or a tuple of them, nested), as array
// constants and tuples of them, at the position of `at`. Recursive: the
// verifier bounds tuples to kMaxTupleDepth levels.
Instruction* SplitConstant(Computation* c, const Instruction& at,
                           const Literal& literal, const std::string& suffix) {
  if (!literal.shape().IsTuple()) {
    Instruction* constant =
        Add(c, at, suffix, Opcode::kConstant, "constant", literal.shape(), {});
    constant->mutable_attributes()->literal = literal;
    return constant;
  }
  std::vector<Instruction*> elements;
  for (size_t i = 0; i < literal.tuple_elements().size(); ++i) {
    elements.push_back(SplitConstant(c, at, literal.tuple_elements()[i],
                                     absl::StrCat(suffix, ".", i)));
  }
  return Add(c, at, suffix, Opcode::kTuple, "tuple", literal.shape(),
             std::move(elements));
}

// collective-broadcast as collective-permutes: the k-th of them sends each
// group's first member's operand to the group's k-th member (the 0-th to
// the first member itself), with a pred that marks where it arrived; each
// member keeps what its permute brought, and members of no group get
// zeros (a permute's result where nothing arrives).
void ExpandCollectiveBroadcast(Computation* c, Instruction* inst) {
  const Attributes& a = inst->attributes();
  size_t longest = 0;
  for (const auto& g : a.replica_groups) longest = std::max(longest, g.size());
  const Shape pred(PrimitiveType::kPred, {});
  Instruction* yes =
      Add(c, *inst, ".true", Opcode::kConstant, "constant", pred, {});
  {
    Literal literal(pred);
    literal.Set<uint8_t>(0, 1);
    yes->mutable_attributes()->literal = std::move(literal);
  }
  std::vector<Instruction*> results;
  for (int i = 0; i < inst->operand_count(); ++i) {
    Instruction* operand = inst->operand(i);
    const Shape& shape = operand->shape();
    Instruction* zero =
        Add(c, *inst, absl::StrCat(".zero", i), Opcode::kConstant, "constant",
            Shape(shape.element_type(), {}), {});
    zero->mutable_attributes()->literal =
        Literal(Shape(shape.element_type(), {}));
    Instruction* value = Add(c, *inst, absl::StrCat(".zeros", i),
                             Opcode::kBroadcast, "broadcast", shape, {zero});
    for (size_t k = 0; k < longest; ++k) {
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (const auto& g : a.replica_groups) {
        if (g.size() > k) pairs.emplace_back(g[0], g[k]);
      }
      const auto permute = [&](Instruction* of, const Shape& s,
                               absl::string_view what) {
        Instruction* p =
            Add(c, *inst, absl::StrCat(".", what, i, ".", k),
                Opcode::kCollectivePermute, "collective-permute", s, {of});
        Attributes& pa = *p->mutable_attributes();
        pa.channel_id = a.channel_id;
        pa.source_target_pairs = pairs;
        return p;
      };
      Instruction* arrived =
          Add(c, *inst, absl::StrCat(".arrived", i, ".", k), Opcode::kBroadcast,
              "broadcast", shape.WithElementType(PrimitiveType::kPred),
              {permute(yes, pred, "mark")});
      value = Add(c, *inst, absl::StrCat(".value", i, ".", k), Opcode::kSelect,
                  "select", shape,
                  {arrived, permute(operand, shape, "sent"), value});
    }
    results.push_back(value);
  }
  c->ReplaceUses(inst, results.size() == 1 && !inst->shape().IsTuple()
                           ? results[0]
                           : Add(c, *inst, ".results", Opcode::kTuple, "tuple",
                                 inst->shape(), std::move(results)));
}

// all-to-all's tuple form (operand k to the group's k-th member) as its
// array form: the operands stacked along a new leading dimension, exchanged
// along it, and sliced apart again.
void StackTupleAllToAll(Computation* c, Instruction* inst) {
  const int64_t n = inst->operand_count();
  const Shape& piece = inst->operand(0)->shape();
  std::vector<int64_t> one = DimsOf(piece);
  one.insert(one.begin(), 1);
  std::vector<int64_t> stacked_dims = one;
  stacked_dims[0] = n;
  const Shape row(piece.element_type(), one);
  const Shape stacked_shape(piece.element_type(), stacked_dims);
  std::vector<Instruction*> rows;
  for (int64_t k = 0; k < n; ++k) {
    rows.push_back(Add(c, *inst, absl::StrCat(".row", k), Opcode::kReshape,
                       "reshape", row, {inst->operand(static_cast<int>(k))}));
  }
  Instruction* stacked = Add(c, *inst, ".stacked", Opcode::kConcatenate,
                             "concatenate", stacked_shape, rows);
  stacked->mutable_attributes()->dimensions = {0};
  Instruction* exchanged = Add(c, *inst, ".exchanged", Opcode::kAllToAll,
                               "all-to-all", stacked_shape, {stacked});
  *exchanged->mutable_attributes() = inst->attributes();
  exchanged->mutable_attributes()->dimensions = {0};
  std::vector<Instruction*> results;
  for (int64_t k = 0; k < n; ++k) {
    Instruction* slice = Add(c, *inst, absl::StrCat(".slice", k),
                             Opcode::kSlice, "slice", row, {exchanged});
    std::vector<SliceDimension>& bounds = slice->mutable_attributes()->slice;
    bounds.push_back(SliceDimension{k, k + 1, 1});
    for (int64_t d : DimsOf(piece)) bounds.push_back(SliceDimension{0, d, 1});
    results.push_back(Add(c, *inst, absl::StrCat(".result", k),
                          Opcode::kReshape, "reshape",
                          Shape(piece.element_type(), DimsOf(piece)), {slice}));
  }
  c->ReplaceUses(inst, Add(c, *inst, ".results", Opcode::kTuple, "tuple",
                           inst->shape(), std::move(results)));
}

}  // namespace

absl::StatusOr<int> ExpandBatchNorms(Module* module) {
  return RewriteEach(
      module, [&](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        const Opcode op = inst->opcode();
        if (op != Opcode::kBatchNormTraining &&
            op != Opcode::kBatchNormInference && op != Opcode::kBatchNormGrad) {
          return false;
        }
        PJRT_RETURN_IF_ERROR(BatchNormExpansion(module, c, inst).Run());
        return true;
      });
}

absl::StatusOr<int> FoldDimensionSizes(Module* module) {
  return RewriteEach(
      module, [](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() != Opcode::kGetDimensionSize) return false;
        const Shape s32(PrimitiveType::kS32, {});
        Instruction* size =
            Add(c, *inst, ".size", Opcode::kConstant, "constant", s32, {});
        Literal literal(s32);
        // The verifier checked that the size fits an s32.
        literal.Set<int32_t>(
            0, static_cast<int32_t>(inst->operand(0)->shape().dimensions(
                   inst->attributes().dimensions[0])));
        size->mutable_attributes()->literal = std::move(literal);
        c->ReplaceUses(inst, size);
        return true;
      });
}

absl::StatusOr<int> SplitTupleConstants(Module* module) {
  return RewriteEach(
      module, [](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() != Opcode::kConstant || !inst->shape().IsTuple()) {
          return false;
        }
        c->ReplaceUses(inst, SplitConstant(c, *inst, inst->attributes().literal,
                                           ".element"));
        return true;
      });
}

absl::StatusOr<int> SplitCombinedCollectives(Module* module) {
  return RewriteEach(
      module, [](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() == Opcode::kCollectiveBroadcast) {
          ExpandCollectiveBroadcast(c, inst);
          return true;
        }
        if (inst->opcode() == Opcode::kAllToAll &&
            inst->attributes().dimensions.empty()) {
          StackTupleAllToAll(c, inst);
          return true;
        }
        if (inst->opcode() == Opcode::kCollectivePermuteDone &&
            inst->operand(0)->operand_count() > 1) {
          // A combined start and its done: a start and a done per operand.
          const Instruction* start = inst->operand(0);
          std::vector<Instruction*> parts;
          for (int k = 0; k < start->operand_count(); ++k) {
            Instruction* operand = start->operand(k);
            Instruction* part = Add(
                c, *start, absl::StrCat(".", k),
                Opcode::kCollectivePermuteStart, start->opcode_name(),
                Shape::Tuple({operand->shape(), operand->shape()}), {operand});
            *part->mutable_attributes() = start->attributes();
            parts.push_back(Add(c, *inst, absl::StrCat(".", k),
                                Opcode::kCollectivePermuteDone,
                                inst->opcode_name(), operand->shape(), {part}));
          }
          c->ReplaceUses(inst, Add(c, *inst, ".parts", Opcode::kTuple, "tuple",
                                   inst->shape(), std::move(parts)));
          return true;
        }
        if (inst->opcode() != Opcode::kCollectivePermute ||
            inst->operand_count() < 2) {
          return false;
        }
        std::vector<Instruction*> parts;
        for (int k = 0; k < inst->operand_count(); ++k) {
          Instruction* part =
              Add(c, *inst, absl::StrCat(".", k), Opcode::kCollectivePermute,
                  inst->opcode_name(), inst->operand(k)->shape(),
                  {inst->operand(k)});
          *part->mutable_attributes() = inst->attributes();
          parts.push_back(part);
        }
        c->ReplaceUses(inst, Add(c, *inst, ".parts", Opcode::kTuple, "tuple",
                                 inst->shape(), std::move(parts)));
        return true;
      });
}

absl::StatusOr<int> RewriteUnitConvolutionsAsDots(Module* module) {
  return RewriteEach(
      module, [](Computation* c, Instruction* inst) -> absl::StatusOr<bool> {
        if (inst->opcode() != Opcode::kConvolution) return false;
        return RewriteIfUnit(c, inst);
      });
}

absl::StatusOr<int> SimplifyModule(Module* module,
                                   const SimplifyOptions& options) {
  int rewritten = 0;
  for (auto* pass : {&FoldDimensionSizes, &SplitTupleConstants,
                     &SplitCombinedCollectives, &ExpandBatchNorms}) {
    PJRT_ASSIGN_OR_RETURN(const int made, pass(module));
    rewritten += made;
  }
  PJRT_ASSIGN_OR_RETURN(
      const int ragged,
      ExpandRaggedDots(module, options.keep_plain_ragged_dots));
  rewritten += ragged;
  for (auto* pass : {&ExpandRaggedAllToAlls, &RewriteUnitConvolutionsAsDots}) {
    PJRT_ASSIGN_OR_RETURN(const int made, pass(module));
    rewritten += made;
  }
  return rewritten;
}

}  // namespace pjrt::hlo
