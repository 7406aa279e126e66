#include "hlo/passes.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "hlo/op_attributes.h"

namespace pjrt::hlo {
namespace {

std::vector<int64_t> DimsOf(const Shape& shape) {
  return std::vector<int64_t>(shape.dimensions().begin(),
                              shape.dimensions().end());
}

// A new instruction after the ones of `c`, at the position of `at` (for
// messages).
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

}  // namespace

absl::StatusOr<int> RewriteUnitConvolutionsAsDots(Module* module) {
  int rewritten = 0;
  for (const auto& computation : module->computations()) {
    // New instructions are appended: walk the ones that were there.
    const size_t count = computation->instructions().size();
    for (size_t i = 0; i < count; ++i) {
      Instruction* inst = computation->instructions()[i].get();
      if (inst->opcode() != Opcode::kConvolution) continue;
      PJRT_ASSIGN_OR_RETURN(bool done, RewriteIfUnit(computation.get(), inst));
      rewritten += done;
    }
  }
  return rewritten;
}

absl::StatusOr<int> SimplifyModule(Module* module) {
  return RewriteUnitConvolutionsAsDots(module);
}

}  // namespace pjrt::hlo
