// The MLIR text reader's operations: generic and pretty forms, operand
// lists, regions and signatures, and the ops whose pretty form needs its
// own reading (reduce, while, convolution).
#include "hlo/mlir_text_internal.h"

namespace pjrt::hlo::mlir::text_internal {

absl::StatusOr<Argument> Reader::ArgumentDecl(int depth) {
  Argument argument;
  argument.position = Here();
  PJRT_ASSIGN_OR_RETURN(argument.name, ValueName("an argument (%name)"));
  PJRT_RETURN_IF_ERROR(Expect(":", "and the argument's type"));
  PJRT_ASSIGN_OR_RETURN(argument.type,
                        QuantizableType(depth + 1, &argument.quantization));
  if (PeekChar() == '{') {
    PJRT_ASSIGN_OR_RETURN(argument.attributes, Dictionary(depth + 1));
  }
  PJRT_RETURN_IF_ERROR(TryLocation().status());
  return argument;
}

absl::Status Reader::Signature(int depth, Operation* op) {
  PJRT_RETURN_IF_ERROR(Expect(":", "and the op's types"));
  std::vector<Shape> inputs;
  std::vector<Shape> outputs;
  Quantizations input_quantizations, output_quantizations;
  bool function_type = false;
  if (TryConsume("(")) {
    function_type = true;
    if (!TryConsume(")")) {
      PJRT_ASSIGN_OR_RETURN(
          inputs, QuantizableTypeList(depth + 1, &input_quantizations));
      PJRT_RETURN_IF_ERROR(Expect(")", "to end the operand types"));
    }
    PJRT_RETURN_IF_ERROR(Expect("->", "and the result types"));
  } else {
    PJRT_ASSIGN_OR_RETURN(inputs,
                          QuantizableTypeList(depth + 1, &input_quantizations));
    function_type = TryConsume("->");
  }
  if (function_type) {
    if (TryConsume("(")) {
      if (!TryConsume(")")) {
        PJRT_ASSIGN_OR_RETURN(
            outputs, QuantizableTypeList(depth + 1, &output_quantizations));
        PJRT_RETURN_IF_ERROR(Expect(")", "to end the result types"));
      }
    } else {
      std::optional<Quantization> q;
      PJRT_ASSIGN_OR_RETURN(Shape type, QuantizableType(depth + 1, &q));
      outputs.push_back(std::move(type));
      if (q.has_value()) output_quantizations.push_back(std::move(q));
    }
    op->operand_types = std::move(inputs);
    op->operand_quantizations = std::move(input_quantizations);
    op->has_operand_types = true;
    op->result_types = std::move(outputs);
    op->result_quantizations = std::move(output_quantizations);
    return absl::OkStatus();
  }
  // A list of types: the results are its last ones (`tensor<2xi1>,
  // tensor<2xf32>` for select; one type for element-wise ops).
  const size_t n = op->results.size();
  if (n > inputs.size()) {
    return Error(
        absl::StrFormat("%s defines %d result(s) but its types name "
                        "only %d",
                        op->name, n, inputs.size()));
  }
  op->result_types.assign(inputs.end() - n, inputs.end());
  if (!input_quantizations.empty()) {
    op->result_quantizations.assign(input_quantizations.end() - n,
                                    input_quantizations.end());
  }
  op->has_operand_types = inputs.size() == op->operands.size();
  op->operand_types = std::move(inputs);
  op->operand_quantizations = std::move(input_quantizations);
  return absl::OkStatus();
}

absl::StatusOr<Region> Reader::BracedRegion(int depth) {
  Region region;
  region.position = Here();
  PJRT_RETURN_IF_ERROR(Expect("{", "to start a region"));
  PJRT_RETURN_IF_ERROR(RegionBody(depth + 1, &region));
  return region;
}

// After the '{': an optional ^bb0(args): label, operations, '}'.
absl::Status Reader::RegionBody(int depth, Region* region) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  if (TryConsume("^")) {
    PJRT_RETURN_IF_ERROR(Identifier("a block label").status());
    if (TryConsume("(")) {
      if (!TryConsume(")")) {
        do {
          PJRT_ASSIGN_OR_RETURN(Argument a, ArgumentDecl(depth + 1));
          region->arguments.push_back(std::move(a));
        } while (TryConsume(","));
        PJRT_RETURN_IF_ERROR(Expect(")", "to end the block arguments"));
      }
    }
    PJRT_RETURN_IF_ERROR(Expect(":", "after the block label"));
  }
  while (!TryConsume("}")) {
    if (AtEnd()) return Error("this region is not closed: expected '}'");
    if (At("^")) {
      return Unimplemented(pos_,
                           "regions with more than one block are not "
                           "supported");
    }
    PJRT_ASSIGN_OR_RETURN(Operation op, ParseOperation(depth + 1));
    region->operations.push_back(std::move(op));
  }
  return absl::OkStatus();
}

absl::StatusOr<Operation> Reader::ParseOperation(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  Operation op;
  op.position = Here();
  if (PeekChar() == '%') {
    do {
      PJRT_ASSIGN_OR_RETURN(std::string name, ValueName("a result name"));
      if (pos_ < text_.size() && text_[pos_] == ':' &&
          pos_ + 1 < text_.size() && absl::ascii_isdigit(text_[pos_ + 1])) {
        ++pos_;
        PJRT_ASSIGN_OR_RETURN(int64_t count, Integer("a result count"));
        if (count < 1 || count > kMaxTupleLeaves) {
          return Error(
              absl::StrFormat("%s:%d: a result group has 1 to %d "
                              "results",
                              name, count, kMaxTupleLeaves));
        }
        for (int64_t i = 0; i < count; ++i) {
          op.results.push_back(absl::StrCat(name, "#", i));
        }
      } else {
        op.results.push_back(std::move(name));
      }
    } while (TryConsume(","));
    PJRT_RETURN_IF_ERROR(Expect("=", "after the result names"));
  }
  Skip();
  const size_t name_offset = pos_;
  op.position = PositionAt(pos_);
  if (PeekChar() == '"') {
    PJRT_ASSIGN_OR_RETURN(op.name, StringLiteral());
    PJRT_RETURN_IF_ERROR(GenericOp(depth, &op));
    if (op.name == "stablehlo.return" || op.name == "return") {
      op.name = "func.return";
    }
  } else {
    PJRT_ASSIGN_OR_RETURN(op.name, Identifier("an operation"));
    PJRT_RETURN_IF_ERROR(PrettyOp(depth, &op, name_offset));
  }
  PJRT_ASSIGN_OR_RETURN(op.location, TryLocation());
  return op;
}

absl::Status Reader::OperandList(Operation* op) {
  do {
    PJRT_ASSIGN_OR_RETURN(ValueUse use, Use());
    op->operands.push_back(std::move(use));
  } while (TryConsume(","));
  return absl::OkStatus();
}

absl::Status Reader::ParenthesizedOperands(Operation* op) {
  PJRT_RETURN_IF_ERROR(Expect("(", "and the operands"));
  if (TryConsume(")")) return absl::OkStatus();
  PJRT_RETURN_IF_ERROR(OperandList(op));
  return Expect(")", "to end the operands");
}

absl::Status Reader::AppendDictionary(int depth, Operation* op) {
  PJRT_ASSIGN_OR_RETURN(NamedAttributes attributes, Dictionary(depth + 1));
  for (auto& a : attributes) op->attributes.push_back(std::move(a));
  return absl::OkStatus();
}

absl::Status Reader::GenericOp(int depth, Operation* op) {
  PJRT_RETURN_IF_ERROR(ParenthesizedOperands(op));
  if (At("[")) {
    return Unimplemented(pos_,
                         "operations with successor blocks are not "
                         "supported");
  }
  if (TryConsume("<{")) {
    pos_ -= 1;  // back onto the '{'
    PJRT_RETURN_IF_ERROR(AppendDictionary(depth, op));
    PJRT_RETURN_IF_ERROR(Expect(">", "to end the properties <{...}>"));
  }
  if (TryConsume("(")) {
    do {
      PJRT_ASSIGN_OR_RETURN(Region region, BracedRegion(depth + 1));
      op->regions.push_back(std::move(region));
    } while (TryConsume(","));
    PJRT_RETURN_IF_ERROR(Expect(")", "to end the regions"));
  }
  PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
  return Signature(depth, op);
}

// operand (',' operand)* (',' key '=' value)* [dict] — the shape of most
// pretty ops. An operand may be followed by [ranges] (slice) or [N]
// (get_tuple_element).
absl::Status Reader::PrettyOperandsAndKeys(int depth, Operation* op) {
  bool first = true;
  while (true) {
    Skip();
    if (!first && !TryConsume(",")) break;
    if (PeekChar() == '%') {
      PJRT_ASSIGN_OR_RETURN(ValueUse use, Use());
      op->operands.push_back(std::move(use));
      if (PeekChar() == '[') {
        // slice ranges [a:b:c, ...] or a tuple index [N].
        Attribute ranges;
        ranges.kind = Attribute::Kind::kArray;
        ranges.position = Here();
        ++pos_;
        if (!TryConsume("]")) {
          do {
            Attribute range;
            range.kind = Attribute::Kind::kArray;
            range.position = Here();
            do {
              Attribute bound;
              bound.kind = Attribute::Kind::kInt;
              bound.position = Here();
              PJRT_ASSIGN_OR_RETURN(int64_t v, Integer("an index"));
              bound.text = absl::StrCat(v);
              range.elements.push_back(std::move(bound));
            } while (TryConsume(":"));
            ranges.elements.push_back(std::move(range));
          } while (TryConsume(","));
          PJRT_RETURN_IF_ERROR(Expect("]", "to end the index list"));
        }
        op->attributes.emplace_back("__index", std::move(ranges));
      }
    } else if (!PeekIdentifier().empty()) {
      const size_t save = pos_;
      std::string key(PeekIdentifier());
      pos_ += key.size();
      if (!TryConsume("=")) {
        pos_ = save;
        if (first) break;
        return Expected("'key = value' or an operand after ','");
      }
      PJRT_ASSIGN_OR_RETURN(Attribute value, PrettyValue(depth + 1));
      op->attributes.emplace_back(std::move(key), std::move(value));
    } else {
      if (first) break;
      return Expected("an operand or 'key = value' after ','");
    }
    first = false;
  }
  PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
  return absl::OkStatus();
}

absl::Status Reader::ReduceOp(int depth, Operation* op) {
  // (%a init: %b), (%c init: %d) [applies op] across dimensions = [..]
  std::vector<ValueUse> inputs, inits;
  do {
    PJRT_RETURN_IF_ERROR(Expect("(", "before a reduce input"));
    PJRT_ASSIGN_OR_RETURN(ValueUse input, Use());
    PJRT_RETURN_IF_ERROR(Expect("init", "after the reduce input"));
    PJRT_RETURN_IF_ERROR(Expect(":", "after init"));
    PJRT_ASSIGN_OR_RETURN(ValueUse init, Use());
    PJRT_RETURN_IF_ERROR(Expect(")", "after the initial value"));
    inputs.push_back(std::move(input));
    inits.push_back(std::move(init));
  } while (TryConsume(","));
  for (auto& u : inputs) op->operands.push_back(std::move(u));
  for (auto& u : inits) op->operands.push_back(std::move(u));
  std::string applies;
  Position applies_at;
  if (TryKeyword("applies")) {
    applies_at = Here();
    PJRT_ASSIGN_OR_RETURN(applies, Identifier("the reducing op"));
  }
  PJRT_RETURN_IF_ERROR(Expect("across", "in the reduce"));
  PJRT_RETURN_IF_ERROR(Expect("dimensions", "after across"));
  PJRT_RETURN_IF_ERROR(Expect("="));
  PJRT_ASSIGN_OR_RETURN(Attribute dims, ParseAttribute(depth + 1));
  op->attributes.emplace_back("dimensions", std::move(dims));
  PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
  PJRT_RETURN_IF_ERROR(Signature(depth, op));
  const size_t n = inputs.size();
  if (!applies.empty()) {
    // A region applying the named binary op to each input's pair.
    Region region;
    region.position = applies_at;
    std::vector<Shape> scalars;
    for (size_t i = 0; i < n; ++i) {
      const Shape& t =
          i < op->result_types.size() ? op->result_types[i] : Shape();
      scalars.push_back(Shape(t.element_type(), {}));
    }
    for (int side = 0; side < 2; ++side) {
      for (size_t i = 0; i < n; ++i) {
        region.arguments.push_back(
            Argument{absl::StrCat("%__reduce_", side, "_", i),
                     scalars[i],
                     {},
                     applies_at});
      }
    }
    Operation ret;
    ret.name = "func.return";
    ret.position = applies_at;
    for (size_t i = 0; i < n; ++i) {
      Operation apply;
      apply.name = applies;
      apply.position = applies_at;
      apply.results.push_back(absl::StrCat("%__reduce_out_", i));
      apply.operands.push_back(
          ValueUse{absl::StrCat("%__reduce_0_", i), applies_at});
      apply.operands.push_back(
          ValueUse{absl::StrCat("%__reduce_1_", i), applies_at});
      apply.result_types.push_back(scalars[i]);
      region.operations.push_back(std::move(apply));
      ret.operands.push_back(
          ValueUse{absl::StrCat("%__reduce_out_", i), applies_at});
    }
    region.operations.push_back(std::move(ret));
    op->regions.push_back(std::move(region));
    return absl::OkStatus();
  }
  // reducer(%a: t, %b: t) (%c: t, %d: t) { ... }: one pair per input, which
  // the region takes as (a, c, b, d).
  PJRT_RETURN_IF_ERROR(Expect("reducer", "or 'applies' in the reduce"));
  std::vector<Argument> lhs, rhs;
  for (size_t i = 0; i < n; ++i) {
    PJRT_RETURN_IF_ERROR(Expect("(", "before the reducer's arguments"));
    PJRT_ASSIGN_OR_RETURN(Argument a, ArgumentDecl(depth + 1));
    PJRT_RETURN_IF_ERROR(Expect(","));
    PJRT_ASSIGN_OR_RETURN(Argument b, ArgumentDecl(depth + 1));
    PJRT_RETURN_IF_ERROR(Expect(")", "after the reducer's arguments"));
    lhs.push_back(std::move(a));
    rhs.push_back(std::move(b));
  }
  PJRT_ASSIGN_OR_RETURN(Region region, BracedRegion(depth + 1));
  for (auto& a : lhs) region.arguments.push_back(std::move(a));
  for (auto& a : rhs) region.arguments.push_back(std::move(a));
  op->regions.push_back(std::move(region));
  return absl::OkStatus();
}

absl::Status Reader::WhileOp(int depth, Operation* op) {
  // (%iterArg = %init, ...) : types [attributes {...}] cond {...} do {...}
  PJRT_RETURN_IF_ERROR(Expect("(", "after stablehlo.while"));
  std::vector<std::string> names;
  std::vector<Position> positions;
  if (!TryConsume(")")) {
    do {
      positions.push_back(Here());
      PJRT_ASSIGN_OR_RETURN(std::string name, ValueName("a loop variable"));
      PJRT_RETURN_IF_ERROR(Expect("=", "after the loop variable"));
      PJRT_ASSIGN_OR_RETURN(ValueUse init, Use());
      names.push_back(std::move(name));
      op->operands.push_back(std::move(init));
    } while (TryConsume(","));
    PJRT_RETURN_IF_ERROR(Expect(")", "to end the loop variables"));
  }
  std::vector<Shape> types;
  if (TryConsume(":")) {
    PJRT_ASSIGN_OR_RETURN(types, TypeList(depth + 1));
  }
  if (types.size() != names.size()) {
    return Error(
        absl::StrFormat("the while has %d loop variable(s) but %d "
                        "type(s)",
                        names.size(), types.size()));
  }
  if (TryKeyword("attributes")) {
    PJRT_RETURN_IF_ERROR(AppendDictionary(depth, op));
  }
  op->result_types = types;
  op->operand_types = types;
  op->has_operand_types = true;
  for (const char* keyword : {"cond", "do"}) {
    PJRT_RETURN_IF_ERROR(Expect(keyword, "in the while"));
    PJRT_ASSIGN_OR_RETURN(Region region, BracedRegion(depth + 1));
    for (size_t i = 0; i < names.size(); ++i) {
      region.arguments.push_back(
          Argument{names[i], types[i], {}, positions[i]});
    }
    op->regions.push_back(std::move(region));
  }
  return absl::OkStatus();
}

absl::Status Reader::ScanOp(int depth, Operation* op) {
  // (%a, ...) inits(%b, ...) [key = value]* [attributes {...}] {region} : sig
  const Position at = Here();
  PJRT_RETURN_IF_ERROR(ParenthesizedOperands(op));
  Attribute inputs;
  inputs.kind = Attribute::Kind::kInt;
  inputs.text = absl::StrCat(op->operands.size());
  inputs.position = at;
  op->attributes.emplace_back("__inputs", std::move(inputs));
  PJRT_RETURN_IF_ERROR(Expect("inits", "after the scan's inputs"));
  PJRT_RETURN_IF_ERROR(ParenthesizedOperands(op));
  while (true) {
    Skip();
    TryConsume(",");
    if (AtKeyword("attributes") || PeekIdentifier().empty()) break;
    std::string key(PeekIdentifier());
    pos_ += key.size();
    PJRT_RETURN_IF_ERROR(Expect("=", "after the scan's attribute name"));
    PJRT_ASSIGN_OR_RETURN(Attribute value, PrettyValue(depth + 1));
    op->attributes.emplace_back(std::move(key), std::move(value));
  }
  if (TryKeyword("attributes")) {
    PJRT_RETURN_IF_ERROR(AppendDictionary(depth, op));
  }
  PJRT_ASSIGN_OR_RETURN(Region region, BracedRegion(depth + 1));
  op->regions.push_back(std::move(region));
  return Signature(depth, op);
}

absl::Status Reader::ConvolutionOp(int depth, Operation* op) {
  // (%lhs, %rhs) dim_numbers = [..]x[..]->[..], window = {...} {attrs} : sig
  PJRT_RETURN_IF_ERROR(Expect("(", "after stablehlo.convolution"));
  PJRT_RETURN_IF_ERROR(OperandList(op));
  PJRT_RETURN_IF_ERROR(Expect(")", "to end the convolution's operands"));
  while (!AtKeyword("dim_numbers") && !AtKeyword("window") && At(",")) ++pos_;
  while (true) {
    if (TryKeyword("dim_numbers")) {
      PJRT_RETURN_IF_ERROR(Expect("="));
      Attribute labels;
      labels.kind = Attribute::Kind::kDialect;
      labels.text = "#stablehlo.conv";
      labels.position = Here();
      const size_t start = pos_;
      // Three bracketed lists: [..]x[..]->[..].
      for (int part = 0; part < 3; ++part) {
        if (part == 1) PJRT_RETURN_IF_ERROR(Expect("x"));
        if (part == 2) PJRT_RETURN_IF_ERROR(Expect("->"));
        PJRT_RETURN_IF_ERROR(Expect("[", "in dim_numbers"));
        while (pos_ < text_.size() && text_[pos_] != ']' && text_[pos_] != '\n')
          ++pos_;
        PJRT_RETURN_IF_ERROR(Expect("]", "in dim_numbers"));
      }
      labels.body = std::string(text_.substr(start, pos_ - start));
      op->attributes.emplace_back("dimension_numbers", std::move(labels));
    } else if (TryKeyword("window")) {
      PJRT_RETURN_IF_ERROR(Expect("="));
      PJRT_ASSIGN_OR_RETURN(NamedAttributes window, Dictionary(depth + 1));
      for (auto& [key, value] : window) {
        std::string name = key == "stride"       ? "window_strides"
                           : key == "pad"        ? "padding"
                           : key == "lhs_dilate" ? "lhs_dilation"
                           : key == "rhs_dilate" ? "rhs_dilation"
                           : key == "reverse"    ? "window_reversal"
                                                 : key;
        op->attributes.emplace_back(std::move(name), std::move(value));
      }
    } else {
      break;
    }
    TryConsume(",");
  }
  PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
  return Signature(depth, op);
}

absl::Status Reader::PrettyOp(int depth, Operation* op, size_t name_offset) {
  absl::string_view name = op->name;
  if (name == "return" || name == "func.return" || name == "stablehlo.return") {
    op->name = "func.return";
    if (PeekChar() == '%') {
      PJRT_RETURN_IF_ERROR(OperandList(op));
      PJRT_RETURN_IF_ERROR(Expect(":", "and the returned types"));
      PJRT_ASSIGN_OR_RETURN(
          op->operand_types,
          QuantizableTypeList(depth + 1, &op->operand_quantizations));
      op->has_operand_types = true;
    }
    return absl::OkStatus();
  }
  if (name == "call" || name == "func.call" ||
      name == "stablehlo.custom_call") {
    op->name =
        name == "stablehlo.custom_call" ? "stablehlo.custom_call" : "func.call";
    Attribute callee;
    callee.position = Here();
    if (PeekChar() != '@') return Expected("the callee (@name)");
    PJRT_ASSIGN_OR_RETURN(callee, ParseAttribute(depth + 1));
    op->attributes.emplace_back(
        op->name == "func.call" ? "callee" : "call_target_name",
        std::move(callee));
    PJRT_RETURN_IF_ERROR(ParenthesizedOperands(op));
    PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
    return Signature(depth, op);
  }
  if (name == "stablehlo.constant") {
    PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
    PJRT_ASSIGN_OR_RETURN(Attribute value, ParseAttribute(depth + 1));
    if (!value.has_type) return Expected("the constant's value and type");
    op->result_types.push_back(value.type);
    op->attributes.emplace_back("value", std::move(value));
    return absl::OkStatus();
  }
  if (name == "stablehlo.compare") {
    Attribute direction;
    direction.kind = Attribute::Kind::kWord;
    direction.position = Here();
    PJRT_ASSIGN_OR_RETURN(direction.text,
                          Identifier("a comparison direction (EQ, LT...)"));
    op->attributes.emplace_back("comparison_direction", std::move(direction));
    for (int i = 0; i < 2; ++i) {
      PJRT_RETURN_IF_ERROR(Expect(","));
      PJRT_ASSIGN_OR_RETURN(ValueUse use, Use());
      op->operands.push_back(std::move(use));
    }
    if (TryConsume(",")) {
      Attribute type;
      type.kind = Attribute::Kind::kWord;
      type.position = Here();
      PJRT_ASSIGN_OR_RETURN(type.text,
                            Identifier("a comparison type (FLOAT, SIGNED...)"));
      op->attributes.emplace_back("compare_type", std::move(type));
    }
    PJRT_RETURN_IF_ERROR(TrailingAttributes(depth, op));
    return Signature(depth, op);
  }
  if (name == "stablehlo.composite") {
    Attribute composite_name;
    composite_name.kind = Attribute::Kind::kString;
    composite_name.position = Here();
    PJRT_ASSIGN_OR_RETURN(composite_name.text, StringLiteral());
    op->attributes.emplace_back("name", std::move(composite_name));
    PJRT_RETURN_IF_ERROR(PrettyOperandsAndKeys(depth, op));
    return Signature(depth, op);
  }
  if (name == "stablehlo.reduce") return ReduceOp(depth, op);
  if (name == "stablehlo.while") return WhileOp(depth, op);
  if (name == "stablehlo.convolution") return ConvolutionOp(depth, op);
  if (name == "chlo.scan") return ScanOp(depth, op);
  if (name == "sdy.mesh") {
    return Unimplemented(name_offset, "sdy.mesh inside a function");
  }
  // The common shape: operands, key = value pairs, attributes, ':' types.
  // chlo.top_k writes its operands in parentheses. An op outside the
  // stablehlo dialect that does not read this way has a syntax of its own,
  // which this reader does not know: the op is unsupported.
  const auto common = [&]() -> absl::Status {
    const bool parenthesized = TryConsume("(");
    PJRT_RETURN_IF_ERROR(PrettyOperandsAndKeys(depth, op));
    if (parenthesized) PJRT_RETURN_IF_ERROR(Expect(")", "to end the operands"));
    if (!At(":")) {
      return Expected(absl::StrCat("':' and the types of ", op->name));
    }
    return Signature(depth, op);
  };
  absl::Status status = common();
  if (!status.ok() && !absl::StartsWith(op->name, "stablehlo.") &&
      status.code() == absl::StatusCode::kInvalidArgument) {
    return Unimplemented(name_offset, absl::StrCat(op->name,
                                                   ": this operation is not "
                                                   "supported"));
  }
  return status;
}

}  // namespace pjrt::hlo::mlir::text_internal
