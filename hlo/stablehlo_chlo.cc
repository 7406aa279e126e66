// The StableHLO translator's CHLO ops that take more than a line of HLO:
// chlo.scan (a while over the scanned dimension) and chlo.ragged_dot (HLO's
// ragged-dot, which the shared passes expand).
#include "hlo/dot_shapes.h"
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

absl::Status Translator::Scan(Builder* b, const Operation& op) {
  if (op.regions.size() != 1) return Invalid(op, "needs one body region");
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  // Which operands are inputs: the pretty form's count, or the generic
  // form's segment sizes.
  int64_t n = -1;
  if (const Attribute* a = Attr(op, {"__inputs"})) {
    PJRT_ASSIGN_OR_RETURN(n, IntOf(op, *a, "the input count"));
  } else if (const Attribute* segments =
                 Attr(op, {"operandSegmentSizes", "operand_segment_sizes"})) {
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          IntsOf(op, *segments, "operandSegmentSizes"));
    if (sizes.size() == 2 && sizes[0] >= 0 && sizes[1] >= 0 &&
        sizes[0] + sizes[1] == static_cast<int64_t>(in.size())) {
      n = sizes[0];
    }
  }
  if (n < 1 || n > static_cast<int64_t>(in.size())) {
    return Invalid(op, absl::StrFormat("needs at least one input and its inits "
                                       "told apart (inits(...)); it has %d "
                                       "operand(s)",
                                       in.size()));
  }
  const size_t inputs = static_cast<size_t>(n), carries = in.size() - inputs;
  PJRT_ASSIGN_OR_RETURN(int64_t d, Int(op, {"dimension"}, std::nullopt));
  PJRT_ASSIGN_OR_RETURN(int64_t reverse, Int(op, {"is_reverse"}, 0));
  for (const Value& v : in) {
    if (v.shape.IsTuple()) return Invalid(op, "takes no tuple operands");
  }
  const Shape& first = in[0].shape;
  if (d < 0 || d >= first.rank()) {
    return Invalid(op, absl::StrFormat("dimension %d is not a dimension of %s",
                                       d, mlir::MlirTypeString(first)));
  }
  const int64_t length = first.dimensions(d);
  // A shape with dimension d removed, or set to `size`.
  const auto without = [&](const Shape& s) {
    std::vector<int64_t> dims(s.dimensions().begin(), s.dimensions().end());
    dims.erase(dims.begin() + d);
    return Shape(s.element_type(), dims);
  };
  const auto with = [&](const Shape& s, int64_t size) {
    std::vector<int64_t> dims(s.dimensions().begin(), s.dimensions().end());
    dims[d] = size;
    return Shape(s.element_type(), dims);
  };
  std::vector<Shape> arguments;
  for (size_t j = 0; j < inputs; ++j) {
    const Shape& s = in[j].shape;
    if (s.rank() <= d || s.dimensions(d) != length) {
      return Invalid(
          op, absl::StrFormat("input %d is %s; every input needs dimension %d "
                              "of size %d, as input 0 has",
                              j, mlir::MlirTypeString(s), d, length));
    }
    arguments.push_back(without(s));
  }
  for (size_t j = inputs; j < in.size(); ++j) arguments.push_back(in[j].shape);
  if (op.result_types.size() != op.results.size() ||
      op.result_types.size() < carries) {
    return Invalid(op, absl::StrFormat("needs its outputs, then %d carried "
                                       "result(s)",
                                       carries));
  }
  const size_t outputs = op.result_types.size() - carries;
  std::vector<Shape> step_shapes;  // what the region returns
  for (size_t k = 0; k < outputs; ++k) {
    const Shape& s = op.result_types[k];
    if (s.IsTuple() || s.rank() <= d || s.dimensions(d) != length) {
      return Invalid(
          op, absl::StrFormat("result %d is %s; an output needs dimension %d "
                              "of size %d",
                              k, mlir::MlirTypeString(s), d, length));
    }
    step_shapes.push_back(without(s));
  }
  for (size_t j = 0; j < carries; ++j) {
    if (op.result_types[outputs + j] != in[inputs + j].shape) {
      return Invalid(op, absl::StrFormat(
                             "carried result %d is %s but its init is %s", j,
                             mlir::MlirTypeString(op.result_types[outputs + j]),
                             mlir::MlirTypeString(in[inputs + j].shape)));
    }
    step_shapes.push_back(in[inputs + j].shape);
  }
  if (length == 0) {
    // Nothing to scan: empty outputs, the inits as they are.
    std::vector<Value> results;
    for (size_t k = 0; k < outputs; ++k) {
      results.push_back(
          Value{EmitZeros(b, &op, op.result_types[k]), op.result_types[k]});
    }
    for (size_t j = 0; j < carries; ++j) results.push_back(in[inputs + j]);
    return Define(b, op, std::move(results));
  }
  // Values the region uses from outside ride along in the loop's state.
  std::vector<std::string> capture_names = FreeValues(op.regions[0]);
  std::vector<Value> captured;
  for (const std::string& name : capture_names) {
    PJRT_ASSIGN_OR_RETURN(Value v,
                          Lookup(b, mlir::ValueUse{name, op.position}));
    captured.push_back(std::move(v));
  }
  PJRT_ASSIGN_OR_RETURN(
      std::string step,
      TupleRegion(b, op, op.regions[0], "scan", captured, capture_names,
                  arguments, /*pass_captures_through=*/false));
  const Shape step_shape =
      step_shapes.size() == 1 ? step_shapes[0] : Shape::Tuple(step_shapes);
  // The loop's state: the step, the inputs, the carries, the outputs so
  // far, the captures.
  const Shape index(PrimitiveType::kS64, {});
  std::vector<Shape> state_shapes = {index};
  for (const Value& v : in) state_shapes.push_back(v.shape);
  for (size_t k = 0; k < outputs; ++k)
    state_shapes.push_back(op.result_types[k]);
  for (const Value& v : captured) state_shapes.push_back(v.shape);
  const Shape state = Shape::Tuple(state_shapes);

  Builder body;
  body.depth = b->depth + 1;
  body.computation.name = NewName("scan_body");
  const Value param{EmitLine(&body, &op, state, "parameter", "0"), state};
  std::vector<std::string> e;
  for (size_t i = 0; i < state_shapes.size(); ++i) {
    e.push_back(EmitGte(&body, &op, param, static_cast<int>(i)));
  }
  const std::string i = e[0];
  std::string at = i;
  if (reverse != 0) {
    at = Emit(
        &body, &op, index, "subtract",
        {EmitLine(&body, &op, index, "constant", absl::StrCat(length - 1)), i});
  }
  const std::string zero = EmitLine(&body, &op, index, "constant", "0");
  std::vector<std::string> step_in;
  for (size_t j = 0; j < inputs; ++j) {
    const Shape piece = with(in[j].shape, 1);
    std::vector<std::string> operands = {e[1 + j]};
    std::vector<std::string> starts_j(in[j].shape.rank(), zero);
    starts_j[d] = at;
    operands.insert(operands.end(), starts_j.begin(), starts_j.end());
    const std::vector<int64_t> sizes(piece.dimensions().begin(),
                                     piece.dimensions().end());
    step_in.push_back(
        Emit(&body, &op, arguments[j], "reshape",
             {Emit(&body, &op, piece, "dynamic-slice", operands,
                   absl::StrCat("dynamic_slice_sizes=", Braced(sizes)))}));
  }
  for (size_t j = 0; j < carries; ++j) step_in.push_back(e[1 + inputs + j]);
  std::vector<Shape> step_in_shapes = arguments;
  for (size_t c = 0; c < captured.size(); ++c) {
    step_in.push_back(e[1 + in.size() + outputs + c]);
    step_in_shapes.push_back(captured[c].shape);
  }
  const Value called{
      Emit(&body, &op, step_shape, "call",
           {Emit(&body, &op, Shape::Tuple(step_in_shapes), "tuple", step_in)},
           absl::StrCat("to_apply=%", step)),
      step_shape};
  std::vector<std::string> step_out;
  if (step_shapes.size() == 1) {
    step_out.push_back(called.name);
  } else {
    for (size_t k = 0; k < step_shapes.size(); ++k) {
      step_out.push_back(EmitGte(&body, &op, called, static_cast<int>(k)));
    }
  }
  std::vector<std::string> next = {
      Emit(&body, &op, index, "add",
           {i, EmitLine(&body, &op, index, "constant", "1")})};
  for (size_t j = 0; j < inputs; ++j) next.push_back(e[1 + j]);
  for (size_t j = 0; j < carries; ++j) next.push_back(step_out[outputs + j]);
  for (size_t k = 0; k < outputs; ++k) {
    const Shape& result = op.result_types[k];
    std::vector<std::string> operands = {
        e[1 + in.size() + k],
        Emit(&body, &op, with(result, 1), "reshape", {step_out[k]})};
    std::vector<std::string> starts_k(result.rank(), zero);
    starts_k[d] = at;
    operands.insert(operands.end(), starts_k.begin(), starts_k.end());
    next.push_back(Emit(&body, &op, result, "dynamic-update-slice", operands));
  }
  for (size_t c = 0; c < captured.size(); ++c) {
    next.push_back(e[1 + in.size() + outputs + c]);
  }
  MarkRoot(&body, Emit(&body, &op, state, "tuple", next));
  const std::string body_name = Finish(&body);

  Builder cond;
  cond.depth = b->depth + 1;
  cond.computation.name = NewName("scan_cond");
  const Value cond_param{EmitLine(&cond, &op, state, "parameter", "0"), state};
  MarkRoot(&cond,
           Emit(&cond, &op, Shape(PrimitiveType::kPred, {}), "compare",
                {EmitGte(&cond, &op, cond_param, 0),
                 EmitLine(&cond, &op, index, "constant", absl::StrCat(length))},
                "direction=LT"));
  const std::string cond_name = Finish(&cond);

  std::vector<std::string> init = {EmitLine(b, &op, index, "constant", "0")};
  for (const Value& v : in) init.push_back(v.name);
  for (size_t k = 0; k < outputs; ++k) {
    init.push_back(EmitZeros(b, &op, op.result_types[k]));
  }
  for (const Value& v : captured) init.push_back(v.name);
  const Value loop{
      Emit(b, &op, state, "while", {Emit(b, &op, state, "tuple", init)},
           absl::StrCat("condition=%", cond_name, ", body=%", body_name)),
      state};
  std::vector<Value> results;
  for (size_t k = 0; k < outputs; ++k) {
    results.push_back(
        Value{EmitGte(b, &op, loop, static_cast<int>(1 + in.size() + k)),
              op.result_types[k]});
  }
  for (size_t j = 0; j < carries; ++j) {
    results.push_back(
        Value{EmitGte(b, &op, loop, static_cast<int>(1 + inputs + j)),
              in[inputs + j].shape});
  }
  return Define(b, op, std::move(results));
}

std::string Translator::AddComputation(PrimitiveType type) {
  auto done = add_computations_.find(type);
  if (done != add_computations_.end()) return done->second;
  Builder b;
  b.computation.name = NewName("add");
  const Shape scalar(type, {});
  const std::string x = EmitLine(&b, nullptr, scalar, "parameter", "0");
  const std::string y = EmitLine(&b, nullptr, scalar, "parameter", "1");
  MarkRoot(&b, Emit(&b, nullptr, scalar,
                    type == PrimitiveType::kPred ? "or" : "add", {x, y}));
  std::string name = Finish(&b);
  add_computations_[type] = name;
  return name;
}

std::string Translator::ScalarComputation(PrimitiveType type,
                                          absl::string_view opcode) {
  const auto key = std::make_pair(std::string(opcode), type);
  auto done = scalar_computations_.find(key);
  if (done != scalar_computations_.end()) return done->second;
  Builder b;
  b.computation.name = NewName(opcode);
  const Shape scalar(type, {});
  const std::string x = EmitLine(&b, nullptr, scalar, "parameter", "0");
  const std::string y = EmitLine(&b, nullptr, scalar, "parameter", "1");
  MarkRoot(&b, Emit(&b, nullptr, scalar, opcode, {x, y}));
  std::string name = Finish(&b);
  scalar_computations_[key] = name;
  return name;
}

absl::Status Translator::RaggedDot(Builder* b, const Operation& op) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 3));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape result, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* numbers,
                        RequireAttr(op, {"ragged_dot_dimension_numbers"}));
  DotDimensionNumbers d;
  PJRT_ASSIGN_OR_RETURN(d.lhs_batch_dimensions,
                        FieldInts(op, *numbers, "lhs_batching_dimensions"));
  PJRT_ASSIGN_OR_RETURN(d.rhs_batch_dimensions,
                        FieldInts(op, *numbers, "rhs_batching_dimensions"));
  PJRT_ASSIGN_OR_RETURN(d.lhs_contracting_dimensions,
                        FieldInts(op, *numbers, "lhs_contracting_dimensions"));
  PJRT_ASSIGN_OR_RETURN(d.rhs_contracting_dimensions,
                        FieldInts(op, *numbers, "rhs_contracting_dimensions"));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> ragged,
                        FieldInts(op, *numbers, "lhs_ragged_dimensions"));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group,
                        FieldInts(op, *numbers, "rhs_group_dimensions"));
  for (const Value& v : in) {
    if (v.shape.IsTuple()) return Invalid(op, "takes no tuple operands");
  }
  // Checked here so that the message names this op; HLO's ragged-dot,
  // which the shared passes expand (hlo/passes.h), computes it.
  absl::StatusOr<hlo::RaggedDot> checked =
      AnalyzeRaggedDot(in[0].shape, in[1].shape, in[2].shape, d, ragged, group);
  if (!checked.ok()) return Invalid(op, checked.status().message());
  std::string attributes;
  if (!d.lhs_batch_dimensions.empty()) {
    attributes =
        absl::StrCat("lhs_batch_dims=", Braced(d.lhs_batch_dimensions),
                     ", rhs_batch_dims=", Braced(d.rhs_batch_dimensions), ", ");
  }
  absl::StrAppend(
      &attributes,
      "lhs_contracting_dims=", Braced(d.lhs_contracting_dimensions),
      ", rhs_contracting_dims=", Braced(d.rhs_contracting_dimensions),
      ", lhs_ragged_dims=", Braced(ragged));
  if (!group.empty()) {
    absl::StrAppend(&attributes, ", rhs_group_dims=", Braced(group));
  }
  return Define(
      b, op,
      {Value{Emit(b, &op, result, "ragged-dot", Names(in), attributes),
             result}});
}

}  // namespace pjrt::hlo::stablehlo_internal
