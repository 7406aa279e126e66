// The translators of Translator::Op's table (stablehlo_ops.cc): one per
// StableHLO op, or per family of ops that translate alike, each given the
// op's name without "stablehlo.".
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

absl::Status Translator::IotaOp(Builder* b, const Operation& op,
                                absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dim", "iota_dimension"}, {}));
  return Define(b, op,
                {Value{Emit(b, &op, shape, "iota", {},
                            absl::StrCat("iota_dimension=", dim)),
                       shape}});
}

absl::Status Translator::BroadcastInDimOp(Builder* b, const Operation& op,
                                          absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.empty()) return ExpectOperands(op, 1);
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        Ints(op, {"dims", "broadcast_dimensions"}));
  return BroadcastInDim(b, op, in[0], shape, dims);
}

absl::Status Translator::BroadcastOp(Builder* b, const Operation& op,
                                     absl::string_view /*name*/) {
  // Prepends broadcast_sizes dimensions.
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  Attr(op, {"broadcast_sizes", "sizes"});
  std::vector<int64_t> dims;
  const int added = shape.rank() - in[0].shape.rank();
  for (int i = 0; i < in[0].shape.rank(); ++i) dims.push_back(added + i);
  return BroadcastInDim(b, op, in[0], shape, dims);
}

absl::Status Translator::DynamicReshapeOp(Builder* b, const Operation& op,
                                          absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  if (in.size() != 2) return ExpectOperands(op, 2);
  return Define(b, op,
                {Value{Emit(b, &op, shape, "reshape", {in[0].name}), shape}});
}

absl::Status Translator::TransposeOrReverseOp(Builder* b, const Operation& op,
                                              absl::string_view name) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        Ints(op, {"dims", "permutation", "dimensions"}));
  return Define(b, op,
                {Value{Emit(b, &op, shape, name, {in[0].name},
                            absl::StrCat("dimensions=", Braced(dims))),
                       shape}});
}

absl::Status Translator::ConcatenateOp(Builder* b, const Operation& op,
                                       absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dim", "dimension"}, {}));
  const std::vector<std::string> names = Names(in);
  return Define(b, op,
                {Value{Emit(b, &op, shape, "concatenate", names,
                            absl::StrCat("dimensions={", dim, "}")),
                       shape}});
}

absl::Status Translator::PadOp(Builder* b, const Operation& op,
                               absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> low,
                        Ints(op, {"low", "edge_padding_low"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> high,
                        Ints(op, {"high", "edge_padding_high"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> interior,
                        Ints(op, {"interior", "interior_padding"}));
  const size_t rank = in[0].shape.rank();
  if (low.size() != rank || high.size() != rank ||
      (interior.size() != rank && !interior.empty())) {
    return Invalid(op, absl::StrFormat("the paddings must have one entry "
                                       "per dimension of the operand (%d)",
                                       rank));
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < rank; ++i) {
    parts.push_back(absl::StrCat(low[i], "_", high[i], "_",
                                 interior.empty() ? 0 : interior[i]));
  }
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "pad", {in[0].name, in[1].name},
                  absl::StrCat("padding=", absl::StrJoin(parts, "x"))),
             shape}});
}

absl::Status Translator::SliceOp(Builder* b, const Operation& op,
                                 absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  std::vector<int64_t> start, limit, strides;
  if (const Attribute* ranges = Attr(op, {"__index"})) {
    for (const Attribute& r : ranges->elements) {
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntsOf(op, r, "slice"));
      if (v.size() < 2 || v.size() > 3) {
        return Invalid(op,
                       "a slice range is start:limit or start:limit:stride");
      }
      start.push_back(v[0]);
      limit.push_back(v[1]);
      strides.push_back(v.size() == 3 ? v[2] : 1);
    }
  } else {
    PJRT_ASSIGN_OR_RETURN(start, Ints(op, {"start_indices"}));
    PJRT_ASSIGN_OR_RETURN(limit, Ints(op, {"limit_indices"}));
    PJRT_ASSIGN_OR_RETURN(strides, Ints(op, {"strides"}));
    if (strides.empty()) strides.assign(start.size(), 1);
  }
  if (start.size() != limit.size() || start.size() != strides.size() ||
      static_cast<int>(start.size()) != in[0].shape.rank()) {
    return Invalid(op, absl::StrFormat("needs one range per dimension of "
                                       "the operand (%d)",
                                       in[0].shape.rank()));
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < start.size(); ++i) {
    parts.push_back(
        absl::StrCat("[", start[i], ":", limit[i], ":", strides[i], "]"));
  }
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "slice", {in[0].name},
                  absl::StrCat("slice={", absl::StrJoin(parts, ", "), "}")),
             shape}});
}

absl::Status Translator::DynamicSliceOp(Builder* b, const Operation& op,
                                        absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                        Ints(op, {"sizes", "slice_sizes"}));
  const std::vector<std::string> names = Names(in);
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "dynamic-slice", names,
                  absl::StrCat("dynamic_slice_sizes=", Braced(sizes))),
             shape}});
}

absl::Status Translator::GetTupleElementOp(Builder* b, const Operation& op,
                                           absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  int64_t index = 0;
  if (const Attribute* i = Attr(op, {"__index"})) {
    PJRT_ASSIGN_OR_RETURN(auto rows, Matrix(op, *i, "index"));
    if (rows.size() != 1 || rows[0].size() != 1) {
      return Invalid(op, "the index is one number: %t[N]");
    }
    index = rows[0][0];
  } else {
    PJRT_ASSIGN_OR_RETURN(index, Int(op, {"index"}, {}));
  }
  return Define(b, op,
                {Value{Emit(b, &op, shape, "get-tuple-element", {in[0].name},
                            absl::StrCat("index=", index)),
                       shape}});
}

absl::Status Translator::CompareOp(Builder* b, const Operation& op,
                                   absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* direction,
                        RequireAttr(op, {"comparison_direction"}));
  std::string attributes = absl::StrCat("direction=", Word(*direction));
  if (const Attribute* type = Attr(op, {"compare_type"})) {
    // Complex numbers compare (EQ, NE) as FLOAT in StableHLO; HLO gives
    // them no type.
    const std::string t = Word(*type);
    if (t != "NOTYPE" && !IsComplex(in[0].shape.element_type())) {
      absl::StrAppend(&attributes, ", type=", t);
    }
  }
  return Define(b, op,
                {Value{Emit(b, &op, shape, "compare", {in[0].name, in[1].name},
                            attributes),
                       shape}});
}

absl::Status Translator::DotOp(Builder* b, const Operation& op,
                               absl::string_view name) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  std::vector<int64_t> lb, rb, lc, rc;
  if (name == "dot") {
    lc = {std::max(0, in[0].shape.rank() - 1)};
    rc = {0};
  } else if (const Attribute* numbers = Attr(op, {"dot_dimension_numbers"})) {
    PJRT_ASSIGN_OR_RETURN(lb,
                          FieldInts(op, *numbers, "lhs_batching_dimensions"));
    PJRT_ASSIGN_OR_RETURN(rb,
                          FieldInts(op, *numbers, "rhs_batching_dimensions"));
    PJRT_ASSIGN_OR_RETURN(
        lc, FieldInts(op, *numbers, "lhs_contracting_dimensions"));
    PJRT_ASSIGN_OR_RETURN(
        rc, FieldInts(op, *numbers, "rhs_contracting_dimensions"));
  } else {
    for (auto [key, lhs, rhs] : {std::tuple{"batching_dims", &lb, &rb},
                                 std::tuple{"contracting_dims", &lc, &rc}}) {
      const Attribute* pair = Attr(op, {key});
      if (pair == nullptr) continue;
      if (pair->elements.size() != 2 || pair->text != "x") {
        return Invalid(op, absl::StrCat(key, " is written [lhs] x [rhs]"));
      }
      PJRT_ASSIGN_OR_RETURN(*lhs, IntsOf(op, pair->elements[0], key));
      PJRT_ASSIGN_OR_RETURN(*rhs, IntsOf(op, pair->elements[1], key));
    }
  }
  std::vector<std::string> parts;
  if (!lb.empty() || !rb.empty()) {
    parts.push_back(absl::StrCat("lhs_batch_dims=", Braced(lb)));
    parts.push_back(absl::StrCat("rhs_batch_dims=", Braced(rb)));
  }
  parts.push_back(absl::StrCat("lhs_contracting_dims=", Braced(lc)));
  parts.push_back(absl::StrCat("rhs_contracting_dims=", Braced(rc)));
  if (in[0].shape.rank() == 0 || in[1].shape.rank() == 0 ||
      (name == "dot" && in[1].shape.rank() == 0)) {
    return Invalid(op, "operands must have rank 1 or more");
  }
  return Define(b, op,
                {Value{Emit(b, &op, shape, "dot", {in[0].name, in[1].name},
                            absl::StrJoin(parts, ", ")),
                       shape}});
}

absl::Status Translator::ReduceOp(Builder* b, const Operation& op,
                                  absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(op, {"dimensions"}));
  if (op.regions.size() != 1) return Invalid(op, "needs one reducer region");
  PJRT_ASSIGN_OR_RETURN(std::string reducer,
                        ClosedRegion(b, op, op.regions[0], "reducer"));
  const std::vector<std::string> names = Names(in);
  return DefineFrom(b, op,
                    Value{Emit(b, &op, shape, "reduce", names,
                               absl::StrCat("dimensions=", Braced(dims),
                                            ", to_apply=%", reducer)),
                          shape});
}

absl::Status Translator::MapOp(Builder* b, const Operation& op,
                               absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(op, {"dimensions"}));
  if (op.regions.size() != 1) return Invalid(op, "needs one region");
  PJRT_ASSIGN_OR_RETURN(std::string f,
                        ClosedRegion(b, op, op.regions[0], "computation"));
  const std::vector<std::string> names = Names(in);
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "map", names,
                  absl::StrCat("dimensions=", Braced(dims), ", to_apply=%", f)),
             shape}});
}

absl::Status Translator::SortOp(Builder* b, const Operation& op,
                                absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.empty()) return Invalid(op, "needs at least one operand");
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dimension"}, -1));
  if (dim < 0) dim += in[0].shape.rank();
  bool stable = false;
  if (const Attribute* s = Attr(op, {"is_stable"})) {
    stable = s->kind == AttrKind::kUnit || s->boolean;
  }
  if (op.regions.size() != 1) return Invalid(op, "needs a comparator region");
  PJRT_ASSIGN_OR_RETURN(std::string comparator,
                        ClosedRegion(b, op, op.regions[0], "comparator"));
  const std::vector<std::string> names = Names(in);
  return DefineFrom(b, op,
                    Value{Emit(b, &op, shape, "sort", names,
                               absl::StrCat("dimensions={", dim, "}",
                                            stable ? ", is_stable=true" : "",
                                            ", to_apply=%", comparator)),
                          shape});
}

absl::Status Translator::WhileOp(Builder* b, const Operation& op,
                                 absl::string_view /*name*/) {
  return While(b, op);
}

absl::Status Translator::IfOrCaseOp(Builder* b, const Operation& op,
                                    absl::string_view /*name*/) {
  return Conditional(b, op);
}

absl::Status Translator::GatherOp(Builder* b, const Operation& op,
                                  absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* numbers,
                        RequireAttr(op, {"dimension_numbers"}));
  std::vector<std::string> parts;
  for (const char* field :
       {"offset_dims", "collapsed_slice_dims", "start_index_map",
        "operand_batching_dims", "start_indices_batching_dims"}) {
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          FieldInts(op, *numbers, field));
    parts.push_back(absl::StrCat(field, "=", Braced(v)));
  }
  const Attribute* ivd = Field(*numbers, "index_vector_dim");
  int64_t index_vector_dim = in[1].shape.rank();
  if (ivd != nullptr) {
    PJRT_ASSIGN_OR_RETURN(index_vector_dim,
                          IntOf(op, *ivd, "index_vector_dim"));
  }
  parts.push_back(absl::StrCat("index_vector_dim=", index_vector_dim));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Ints(op, {"slice_sizes"}));
  parts.push_back(absl::StrCat("slice_sizes=", Braced(sizes)));
  if (const Attribute* sorted = Attr(op, {"indices_are_sorted"})) {
    if (sorted->boolean) parts.push_back("indices_are_sorted=true");
  }
  return Define(b, op,
                {Value{Emit(b, &op, shape, "gather", {in[0].name, in[1].name},
                            absl::StrJoin(parts, ", ")),
                       shape}});
}

absl::Status Translator::ScatterOp(Builder* b, const Operation& op,
                                   absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* numbers,
                        RequireAttr(op, {"scatter_dimension_numbers"}));
  if (in.size() < 3 || in.size() % 2 != 1) {
    return Invalid(op, "takes N inputs, the indices and N updates");
  }
  const size_t n = (in.size() - 1) / 2;
  std::vector<std::string> parts;
  for (const char* field :
       {"update_window_dims", "inserted_window_dims",
        "scatter_dims_to_operand_dims", "input_batching_dims",
        "scatter_indices_batching_dims"}) {
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          FieldInts(op, *numbers, field));
    parts.push_back(absl::StrCat(field, "=", Braced(v)));
  }
  const Attribute* ivd = Field(*numbers, "index_vector_dim");
  int64_t index_vector_dim = in[n].shape.rank();
  if (ivd != nullptr) {
    PJRT_ASSIGN_OR_RETURN(index_vector_dim,
                          IntOf(op, *ivd, "index_vector_dim"));
  }
  parts.push_back(absl::StrCat("index_vector_dim=", index_vector_dim));
  if (const Attribute* sorted = Attr(op, {"indices_are_sorted"})) {
    if (sorted->boolean) parts.push_back("indices_are_sorted=true");
  }
  if (const Attribute* unique = Attr(op, {"unique_indices"})) {
    if (unique->boolean) parts.push_back("unique_indices=true");
  }
  if (op.regions.size() != 1) return Invalid(op, "needs an update region");
  PJRT_ASSIGN_OR_RETURN(std::string update,
                        ClosedRegion(b, op, op.regions[0], "update"));
  parts.push_back(absl::StrCat("to_apply=%", update));
  const std::vector<std::string> names = Names(in);
  return DefineFrom(
      b, op,
      Value{Emit(b, &op, shape, "scatter", names, absl::StrJoin(parts, ", ")),
            shape});
}

absl::Status Translator::ReduceWindowOp(Builder* b, const Operation& op,
                                        absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  if (in.empty() || in.size() % 2 != 0) {
    return Invalid(op, "takes N inputs and N initial values");
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                        Ints(op, {"window_dimensions"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                        Ints(op, {"window_strides"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> lhs, Ints(op, {"base_dilations"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> rhs,
                        Ints(op, {"window_dilations"}));
  std::vector<std::vector<int64_t>> pad;
  if (const Attribute* p = Attr(op, {"padding"})) {
    PJRT_ASSIGN_OR_RETURN(pad, Matrix(op, *p, "padding"));
  }
  const size_t rank = in[0].shape.rank();
  if (size.size() != rank || (!stride.empty() && stride.size() != rank) ||
      (!lhs.empty() && lhs.size() != rank) ||
      (!rhs.empty() && rhs.size() != rank) ||
      (!pad.empty() && pad.size() != rank)) {
    return Invalid(op, absl::StrFormat("the window attributes need one "
                                       "entry per dimension of the input "
                                       "(%d)",
                                       rank));
  }
  if (op.regions.size() != 1) return Invalid(op, "needs a reducer region");
  PJRT_ASSIGN_OR_RETURN(std::string reducer,
                        ClosedRegion(b, op, op.regions[0], "reducer"));
  std::string attributes = WindowText(size, stride, pad, lhs, rhs, {});
  if (!attributes.empty()) attributes += ", ";
  absl::StrAppend(&attributes, "to_apply=%", reducer);
  const std::vector<std::string> names = Names(in);
  return DefineFrom(
      b, op,
      Value{Emit(b, &op, shape, "reduce-window", names, attributes), shape});
}

absl::Status Translator::SelectAndScatterOp(Builder* b, const Operation& op,
                                            absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 3));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                        Ints(op, {"window_dimensions"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                        Ints(op, {"window_strides"}));
  std::vector<std::vector<int64_t>> pad;
  if (const Attribute* p = Attr(op, {"padding"})) {
    PJRT_ASSIGN_OR_RETURN(pad, Matrix(op, *p, "padding"));
  }
  const size_t rank = in[0].shape.rank();
  if (size.empty()) size.assign(rank, 1);
  if (size.size() != rank || (!stride.empty() && stride.size() != rank) ||
      (!pad.empty() && pad.size() != rank)) {
    return Invalid(op, absl::StrFormat("the window attributes need one "
                                       "entry per dimension of the operand "
                                       "(%d)",
                                       rank));
  }
  if (op.regions.size() != 2) {
    return Invalid(op, "needs a select and a scatter region");
  }
  PJRT_ASSIGN_OR_RETURN(std::string select,
                        ClosedRegion(b, op, op.regions[0], "select"));
  PJRT_ASSIGN_OR_RETURN(std::string scatter,
                        ClosedRegion(b, op, op.regions[1], "scatter"));
  std::string attributes = WindowText(size, stride, pad, {}, {}, {});
  if (!attributes.empty()) attributes += ", ";
  absl::StrAppend(&attributes, "select=%", select, ", scatter=%", scatter);
  return Define(b, op,
                {Value{Emit(b, &op, shape, "select-and-scatter",
                            {in[0].name, in[1].name, in[2].name}, attributes),
                       shape}});
}

absl::Status Translator::ConvolutionOp(Builder* b, const Operation& op,
                                       absl::string_view /*name*/) {
  return Convolution(b, op);
}

absl::Status Translator::RngBitGeneratorOp(Builder* b, const Operation& op,
                                           absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  std::string algorithm = "DEFAULT";
  if (const Attribute* a = Attr(op, {"algorithm", "rng_algorithm"})) {
    algorithm = Word(*a);
  }
  const std::string hlo = algorithm == "THREE_FRY" ? "rng_three_fry"
                          : algorithm == "PHILOX"  ? "rng_philox"
                                                   : "rng_default";
  if (!shape.IsTuple()) return Invalid(op, "has two results");
  return DefineFrom(b, op,
                    Value{Emit(b, &op, shape, "rng-bit-generator", {in[0].name},
                               absl::StrCat("algorithm=", hlo)),
                          shape});
}

absl::Status Translator::RngOp(Builder* b, const Operation& op,
                               absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.size() != 3) return ExpectOperands(op, 3);
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* d,
                        RequireAttr(op, {"distribution", "rng_distribution"}));
  const std::string distribution =
      Word(*d) == "NORMAL" ? "rng_normal" : "rng_uniform";
  return Define(b, op,
                {Value{Emit(b, &op, shape, "rng", {in[0].name, in[1].name},
                            absl::StrCat("distribution=", distribution)),
                       shape}});
}

absl::Status Translator::FftOp(Builder* b, const Operation& op,
                               absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* type,
                        RequireAttr(op, {"type", "fft_type"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> length,
                        Ints(op, {"length", "fft_length"}));
  return Define(b, op,
                {Value{Emit(b, &op, shape, "fft", {in[0].name},
                            absl::StrCat("fft_type=", Word(*type),
                                         ", fft_length=", Braced(length))),
                       shape}});
}

absl::Status Translator::LinalgOp(Builder* b, const Operation& op,
                                  absl::string_view name) {
  const bool solve = name == "triangular_solve";
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, solve ? 2 : 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  std::vector<std::string> flags;
  for (const char* flag :
       solve ? std::vector<const char*>{"left_side", "lower", "unit_diagonal"}
             : std::vector<const char*>{"lower"}) {
    bool value = false;
    if (const Attribute* a = Attr(op, {flag})) {
      PJRT_ASSIGN_OR_RETURN(int64_t v, IntOf(op, *a, flag));
      value = v != 0;
    }
    flags.push_back(absl::StrCat(flag, "=", value ? "true" : "false"));
  }
  std::vector<std::string> operands = {in[0].name};
  if (solve) {
    operands.push_back(in[1].name);
    const Attribute* transpose = Attr(op, {"transpose_a"});
    flags.push_back(absl::StrCat(
        "transpose_a=", transpose ? Word(*transpose) : "NO_TRANSPOSE"));
  }
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, solve ? "triangular-solve" : "cholesky",
                  operands, absl::StrJoin(flags, ", ")),
             shape}});
}

absl::Status Translator::ReducePrecisionOp(Builder* b, const Operation& op,
                                           absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  int64_t exponent = 0, mantissa = 0;
  if (const Attribute* format = Attr(op, {"format"})) {
    // e5m10
    const std::string w = Word(*format);
    std::vector<std::string> parts = absl::StrSplit(w.substr(1), 'm');
    if (w.empty() || w[0] != 'e' || parts.size() != 2 ||
        !absl::SimpleAtoi(parts[0], &exponent) ||
        !absl::SimpleAtoi(parts[1], &mantissa)) {
      return Invalid(op,
                     absl::StrCat("format ", w, " is not eNmM (like e5m10)"));
    }
  } else {
    PJRT_ASSIGN_OR_RETURN(exponent, Int(op, {"exponent_bits"}, {}));
    PJRT_ASSIGN_OR_RETURN(mantissa, Int(op, {"mantissa_bits"}, {}));
  }
  return Define(b, op,
                {Value{Emit(b, &op, shape, "reduce-precision", {in[0].name},
                            absl::StrCat("exponent_bits=", exponent,
                                         ", mantissa_bits=", mantissa)),
                       shape}});
}

absl::Status Translator::OptimizationBarrierOp(Builder* b, const Operation& op,
                                               absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  std::vector<Shape> shapes;
  std::vector<std::string> names;
  for (const Value& v : in) {
    shapes.push_back(v.shape);
    names.push_back(v.name);
  }
  const Shape tuple = Shape::Tuple(shapes);
  const std::string t = Emit(b, &op, tuple, "tuple", names);
  Value barrier{Emit(b, &op, tuple, "opt-barrier", {t}), tuple};
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    results.push_back(
        Value{EmitGte(b, &op, barrier, static_cast<int>(i)), shapes[i]});
  }
  return Define(b, op, std::move(results));
}

absl::Status Translator::CustomCallOp(Builder* b, const Operation& op,
                                      absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* target,
                        RequireAttr(op, {"call_target_name"}));
  if (op.result_types.size() != op.results.size()) {
    return Invalid(op,
                   absl::StrFormat("has %d result(s) but %d result "
                                   "type(s)",
                                   op.results.size(), op.result_types.size()));
  }
  Shape shape = op.result_types.size() == 1 ? op.result_types[0]
                                            : Shape::Tuple(op.result_types);
  const std::vector<std::string> names = Names(in);
  if (target->text == "ragged_all_to_all") {
    return RaggedAllToAll(b, op, names, shape);
  }
  if (IsLapackTarget(target->text)) {
    return LapackCall(b, op, target->text, in);
  }
  if (IsLapackQrTarget(target->text)) {
    return LapackQr(b, op, target->text, in);
  }
  if (IsLapackEighTarget(target->text)) {
    return Syevd(b, op, target->text, in);
  }
  if (IsSvdTarget(target->text)) {
    return Svd(b, op, target->text, in);
  }
  if (IsTridiagonalTarget(target->text)) {
    return Gtsv(b, op, target->text, in);
  }
  std::string attributes =
      absl::StrCat("custom_call_target=\"", absl::CEscape(target->text), "\"");
  if (const Attribute* sharding = Attr(op, {"mhlo.sharding"})) {
    if (sharding->kind == AttrKind::kString && !sharding->text.empty() &&
        sharding->text[0] == '{') {
      absl::StrAppend(&attributes, ", sharding=", sharding->text);
    }
  }
  const Value v{Emit(b, &op, shape, "custom-call", names, attributes), shape};
  if (op.results.empty()) return absl::OkStatus();
  return DefineFrom(b, op, v);
}

absl::Status Translator::RaggedAllToAll(Builder* b, const Operation& op,
                                        const std::vector<std::string>& names,
                                        const Shape& shape) {
  // JAX's lowering of lax.ragged_all_to_all: a custom call whose
  // backend_config dictionary holds the groups (and, under SPMD, a channel
  // id), for HLO's ragged-all-to-all.
  const Attribute* config = Attr(op, {"backend_config"});
  const Attribute* groups = config != nullptr && config->kind == AttrKind::kDict
                                ? Field(*config, "replica_groups")
                                : nullptr;
  if (groups == nullptr) {
    return Invalid(op,
                   "ragged_all_to_all needs backend_config = "
                   "{replica_groups = dense<...>}");
  }
  Attr(op, {"api_version"});
  if (names.size() != 6 || !shape.IsArray()) {
    return Invalid(op,
                   absl::StrFormat("ragged_all_to_all takes (input, output, "
                                   "input_offsets, send_sizes, output_offsets, "
                                   "recv_sizes) and gives one array; it has %d "
                                   "operand(s) and gives %s",
                                   names.size(), shape.ToString()));
  }
  PJRT_ASSIGN_OR_RETURN(std::string attributes, ReplicaGroupsOf(op, groups));
  if (const Attribute* channel = Field(*config, "channel_id")) {
    PJRT_ASSIGN_OR_RETURN(int64_t id, IntOf(op, *channel, "channel_id"));
    if (id > 0) absl::StrAppend(&attributes, ", channel_id=", id);
  }
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "ragged-all-to-all", names, attributes),
             shape}});
}

absl::Status Translator::CompositeOp(Builder* b, const Operation& op,
                                     absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(const Attribute* decomposition,
                        RequireAttr(op, {"decomposition"}));
  Attr(op, {"name"});
  PJRT_ASSIGN_OR_RETURN(
      std::string computation,
      FunctionComputation(decomposition->text, op, b->depth + 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  const std::vector<std::string> names = Names(in);
  return DefineFrom(b, op,
                    Value{Emit(b, &op, shape, "call", names,
                               absl::StrCat("to_apply=%", computation)),
                          shape});
}

absl::Status Translator::GetDimensionSizeOp(Builder* b, const Operation& op,
                                            absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dim", "dimension"}, {}));
  if (in.size() != 1 || dim < 0 || dim >= in[0].shape.rank()) {
    return Invalid(op, absl::StrCat("dimension ", dim, " is out of range"));
  }
  return Define(b, op,
                {Value{EmitLine(b, &op, shape, "constant",
                                absl::StrCat(in[0].shape.dimensions(dim))),
                       shape}});
}

absl::Status Translator::AllReduceOp(Builder* b, const Operation& op,
                                     absl::string_view /*name*/) {
  return Collective(b, op, "all-reduce", "");
}

absl::Status Translator::AllGatherOp(Builder* b, const Operation& op,
                                     absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"all_gather_dim"}, {}));
  return Collective(b, op, "all-gather",
                    absl::StrCat("dimensions={", dim, "}"));
}

absl::Status Translator::ReduceScatterOp(Builder* b, const Operation& op,
                                         absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"scatter_dimension"}, {}));
  return Collective(b, op, "reduce-scatter",
                    absl::StrCat("dimensions={", dim, "}"));
}

absl::Status Translator::AllToAllOp(Builder* b, const Operation& op,
                                    absl::string_view /*name*/) {
  return AllToAll(b, op);
}

absl::Status Translator::CollectivePermuteOp(Builder* b, const Operation& op,
                                             absl::string_view /*name*/) {
  PJRT_ASSIGN_OR_RETURN(const Attribute* pairs,
                        RequireAttr(op, {"source_target_pairs"}));
  PJRT_ASSIGN_OR_RETURN(auto rows, Matrix(op, *pairs, "source_target_pairs"));
  std::vector<std::string> parts;
  for (const auto& r : rows) parts.push_back(Braced(r));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  std::string attributes =
      absl::StrCat("source_target_pairs={", absl::StrJoin(parts, ","), "}");
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value()) {
    absl::StrAppend(&attributes, ", channel_id=", *channel);
  }
  if (in.size() != 1) return ExpectOperands(op, 1);
  return Define(b, op,
                {Value{Emit(b, &op, shape, "collective-permute", {in[0].name},
                            attributes),
                       shape}});
}

absl::Status Translator::BitcastBits(Builder* b, const Operation& op,
                                     const Value& in) {
  const Shape& result = op.result_types[0];
  const bool pack = in.shape.element_type() == PrimitiveType::kPred;
  const Shape& bits = pack ? in.shape : result;
  const Shape& wide = pack ? result : in.shape;
  const PrimitiveType t = wide.element_type();
  const int width = BitWidth(t);
  const std::optional<PrimitiveType> word =
      width == 8    ? std::optional(PrimitiveType::kU8)
      : width == 16 ? std::optional(PrimitiveType::kU16)
      : width == 32 ? std::optional(PrimitiveType::kU32)
      : width == 64 ? std::optional(PrimitiveType::kU64)
                    : std::nullopt;
  if (!word.has_value() || wide.IsTuple() || bits.IsTuple()) {
    return Unsupported(
        op, absl::StrFormat("bitcast_convert between i1 and %s is not "
                            "supported (i1 packs into types of 8, 16, 32 "
                            "or 64 bits)",
                            mlir::MlirTypeString(wide)));
  }
  std::vector<int64_t> expanded(wide.dimensions().begin(),
                                wide.dimensions().end());
  expanded.push_back(width);
  if (bits.dimensions() != absl::Span<const int64_t>(expanded)) {
    return Invalid(
        op, absl::StrFormat(
                "%s of i1 holds the bits of %s; "
                "it must be %s",
                mlir::MlirTypeString(bits), mlir::MlirTypeString(wide),
                mlir::MlirTypeString(Shape(PrimitiveType::kPred, expanded))));
  }
  const Shape words(*word, expanded);
  const std::string shifts = Emit(b, &op, words, "iota", {},
                                  absl::StrCat("iota_dimension=", wide.rank()));
  const Shape packed(*word, std::vector<int64_t>(wide.dimensions().begin(),
                                                 wide.dimensions().end()));
  const std::string zero = EmitLine(b, &op, Shape(*word, {}), "constant", "0");
  if (pack) {
    // Bit k of each word is element k of its row: disjoint bits, so the
    // sum is their or.
    const std::string shifted =
        Emit(b, &op, words, "shift-left",
             {Emit(b, &op, words, "convert", {in.name}), shifts});
    std::string value =
        Emit(b, &op, packed, "reduce", {shifted, zero},
             absl::StrCat("dimensions={", wide.rank(), "}, to_apply=%",
                          AddComputation(*word)));
    if (t != *word) value = Emit(b, &op, result, "bitcast-convert", {value});
    return Define(b, op, {Value{value, result}});
  }
  std::string value = in.name;
  if (t != *word) value = Emit(b, &op, packed, "bitcast-convert", {value});
  std::vector<int64_t> spread;
  for (int i = 0; i < wide.rank(); ++i) spread.push_back(i);
  const std::string bit =
      Emit(b, &op, words, "and",
           {Emit(b, &op, words, "shift-right-logical",
                 {Emit(b, &op, words, "broadcast", {value},
                       absl::StrCat("dimensions=", Braced(spread))),
                  shifts}),
            Emit(b, &op, words, "broadcast",
                 {EmitLine(b, &op, Shape(*word, {}), "constant", "1")},
                 "dimensions={}")});
  return Define(
      b, op,
      {Value{
          Emit(b, &op, result, "compare",
               {bit, Emit(b, &op, words, "broadcast", {zero}, "dimensions={}")},
               "direction=NE"),
          result}});
}

}  // namespace pjrt::hlo::stablehlo_internal
