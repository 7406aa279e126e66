// The StableHLO op dispatch: the element-wise table, the ops pjrtd knows
// but does not run, Translator::Op for every other op, and CHLO.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

// Element-wise ops named alike (stablehlo.x -> HLO x with '_' as '-').
const absl::flat_hash_map<std::string, std::string>& ElementwiseOps() {
  static const auto* const kOps =
      new absl::flat_hash_map<std::string, std::string>{
          {"abs", "abs"},
          {"add", "add"},
          {"and", "and"},
          {"atan2", "atan2"},
          {"cbrt", "cbrt"},
          {"ceil", "ceil"},
          {"cosine", "cosine"},
          {"count_leading_zeros", "count-leading-zeros"},
          {"divide", "divide"},
          {"exponential", "exponential"},
          {"exponential_minus_one", "exponential-minus-one"},
          {"floor", "floor"},
          {"imag", "imag"},
          {"is_finite", "is-finite"},
          {"log", "log"},
          {"log_plus_one", "log-plus-one"},
          {"logistic", "logistic"},
          {"maximum", "maximum"},
          {"minimum", "minimum"},
          {"multiply", "multiply"},
          {"negate", "negate"},
          {"not", "not"},
          {"or", "or"},
          {"popcnt", "popcnt"},
          {"power", "power"},
          {"real", "real"},
          {"remainder", "remainder"},
          {"round_nearest_afz", "round-nearest-afz"},
          {"round_nearest_even", "round-nearest-even"},
          {"rsqrt", "rsqrt"},
          {"shift_left", "shift-left"},
          {"shift_right_arithmetic", "shift-right-arithmetic"},
          {"shift_right_logical", "shift-right-logical"},
          {"sign", "sign"},
          {"sine", "sine"},
          {"sqrt", "sqrt"},
          {"subtract", "subtract"},
          {"tan", "tan"},
          {"tanh", "tanh"},
          {"xor", "xor"},
          {"complex", "complex"},
          {"convert", "convert"},
          {"bitcast_convert", "bitcast-convert"},
          {"reshape", "reshape"},
          {"select", "select"},
          {"clamp", "clamp"},
          {"dynamic_update_slice", "dynamic-update-slice"},
          {"tuple", "tuple"},
          {"after_all", "after-all"},
          {"create_token", "after-all"},
          {"replica_id", "replica-id"},
          {"partition_id", "partition-id"},
      };
  return *kOps;
}

// StableHLO ops with an HLO counterpart that pjrtd does not run.
bool IsKnownUnsupported(absl::string_view op) {
  static const auto* const kOps =
      new absl::flat_hash_set<std::string>{"batch_norm_grad",
                                           "batch_norm_inference",
                                           "batch_norm_training",
                                           "cholesky",
                                           "triangular_solve",
                                           "infeed",
                                           "outfeed",
                                           "send",
                                           "recv",
                                           "collective_broadcast",
                                           "uniform_quantize",
                                           "uniform_dequantize",
                                           "dynamic_conv",
                                           "dynamic_gather",
                                           "dynamic_pad",
                                           "real_dynamic_slice",
                                           "set_dimension_size",
                                           "compute_reshape_shape",
                                           "cstr_reshapable",
                                           "einsum",
                                           "unary_einsum",
                                           "torch_index_select",
                                           "trace",
                                           "rng_uniform"};
  return kOps->contains(op);
}

absl::Status Translator::Op(Builder* b, const Operation& op) {
  absl::string_view name = op.name;
  if (absl::StartsWith(name, "chlo.")) return Chlo(b, op, name.substr(5));
  if (name == "func.call") {
    PJRT_ASSIGN_OR_RETURN(const Attribute* callee, RequireAttr(op, {"callee"}));
    PJRT_ASSIGN_OR_RETURN(std::string computation,
                          FunctionComputation(callee->text, op, b->depth + 1));
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
    const std::vector<std::string> names = Names(in);
    if (op.results.empty()) return absl::OkStatus();
    return DefineFrom(b, op,
                      Value{Emit(b, &op, shape, "call", names,
                                 absl::StrCat("to_apply=%", computation)),
                            shape});
  }
  if (!absl::ConsumePrefix(&name, "stablehlo.")) {
    if (absl::StartsWith(name, "check.")) {
      return Unsupported(op,
                         "check ops are for StableHLO's interpreter "
                         "tests; return the checked values instead");
    }
    return Unsupported(op, "this operation is not supported");
  }
  if (IsKnownUnsupported(name)) {
    return Unsupported(op, "pjrtd does not run this operation");
  }
  if ((name == "maximum" || name == "minimum") && op.result_types.size() == 1 &&
      IsComplex(op.result_types[0].element_type())) {
    return ComplexMinMax(b, op, name == "maximum");
  }
  auto elementwise = ElementwiseOps().find(std::string(name));
  if (elementwise != ElementwiseOps().end()) {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    const std::vector<std::string> names = Names(in);
    std::string opcode = elementwise->second;
    if (shape.element_type() == PrimitiveType::kPred) {
      // On booleans StableHLO's add and maximum are or, multiply and
      // minimum are and.
      if (opcode == "add" || opcode == "maximum") opcode = "or";
      if (opcode == "multiply" || opcode == "minimum") opcode = "and";
    }
    return Define(b, op, {Value{Emit(b, &op, shape, opcode, names), shape}});
  }
  if (name == "constant") return Constant(b, op);
  if (name == "iota" || name == "dynamic_iota") {
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dim", "iota_dimension"}, {}));
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "iota", {},
                              absl::StrCat("iota_dimension=", dim)),
                         shape}});
  }
  if (name == "broadcast_in_dim" || name == "dynamic_broadcast_in_dim") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    if (in.empty()) return ExpectOperands(op, 1);
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                          Ints(op, {"dims", "broadcast_dimensions"}));
    return BroadcastInDim(b, op, in[0], shape, dims);
  }
  if (name == "broadcast") {
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
  if (name == "dynamic_reshape") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    if (in.size() != 2) return ExpectOperands(op, 2);
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "reshape", {in[0].name}), shape}});
  }
  if (name == "transpose" || name == "reverse") {
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
  if (name == "concatenate") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"dim", "dimension"}, {}));
    const std::vector<std::string> names = Names(in);
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "concatenate", names,
                              absl::StrCat("dimensions={", dim, "}")),
                         shape}});
  }
  if (name == "pad") {
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
  if (name == "slice") {
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
  if (name == "dynamic_slice") {
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
  if (name == "get_tuple_element") {
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
  if (name == "compare") {
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
                  {Value{Emit(b, &op, shape, "compare",
                              {in[0].name, in[1].name}, attributes),
                         shape}});
  }
  if (name == "dot_general" || name == "dot") {
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
  if (name == "reduce") {
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
  if (name == "map") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(op, {"dimensions"}));
    if (op.regions.size() != 1) return Invalid(op, "needs one region");
    PJRT_ASSIGN_OR_RETURN(std::string f,
                          ClosedRegion(b, op, op.regions[0], "computation"));
    const std::vector<std::string> names = Names(in);
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "map", names,
                              absl::StrCat("dimensions=", Braced(dims),
                                           ", to_apply=%", f)),
                         shape}});
  }
  if (name == "sort") {
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
  if (name == "while") return While(b, op);
  if (name == "if" || name == "case") return Conditional(b, op);
  if (name == "gather") {
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
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          Ints(op, {"slice_sizes"}));
    parts.push_back(absl::StrCat("slice_sizes=", Braced(sizes)));
    if (const Attribute* sorted = Attr(op, {"indices_are_sorted"})) {
      if (sorted->boolean) parts.push_back("indices_are_sorted=true");
    }
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "gather", {in[0].name, in[1].name},
                              absl::StrJoin(parts, ", ")),
                         shape}});
  }
  if (name == "scatter") {
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
  if (name == "reduce_window") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
    if (in.empty() || in.size() % 2 != 0) {
      return Invalid(op, "takes N inputs and N initial values");
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                          Ints(op, {"window_dimensions"}));
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                          Ints(op, {"window_strides"}));
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> lhs,
                          Ints(op, {"base_dilations"}));
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
  if (name == "select_and_scatter") {
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
  if (name == "convolution") return Convolution(b, op);
  if (name == "rng_bit_generator") {
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
                      Value{Emit(b, &op, shape, "rng-bit-generator",
                                 {in[0].name}, absl::StrCat("algorithm=", hlo)),
                            shape});
  }
  if (name == "rng") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    if (in.size() != 3) return ExpectOperands(op, 3);
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    PJRT_ASSIGN_OR_RETURN(
        const Attribute* d,
        RequireAttr(op, {"distribution", "rng_distribution"}));
    const std::string distribution =
        Word(*d) == "NORMAL" ? "rng_normal" : "rng_uniform";
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "rng", {in[0].name, in[1].name},
                              absl::StrCat("distribution=", distribution)),
                         shape}});
  }
  if (name == "fft") {
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
  if (name == "reduce_precision") {
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
  if (name == "optimization_barrier") {
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
  if (name == "custom_call") {
    PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
    PJRT_ASSIGN_OR_RETURN(const Attribute* target,
                          RequireAttr(op, {"call_target_name"}));
    if (op.result_types.size() != op.results.size()) {
      return Invalid(
          op, absl::StrFormat("has %d result(s) but %d result "
                              "type(s)",
                              op.results.size(), op.result_types.size()));
    }
    Shape shape = op.result_types.size() == 1 ? op.result_types[0]
                                              : Shape::Tuple(op.result_types);
    const std::vector<std::string> names = Names(in);
    std::string attributes = absl::StrCat("custom_call_target=\"",
                                          absl::CEscape(target->text), "\"");
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
  if (name == "composite") {
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
  if (name == "get_dimension_size") {
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
  if (name == "all_reduce") return Collective(b, op, "all-reduce", "");
  if (name == "all_gather") {
    PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"all_gather_dim"}, {}));
    return Collective(b, op, "all-gather",
                      absl::StrCat("dimensions={", dim, "}"));
  }
  if (name == "reduce_scatter") {
    PJRT_ASSIGN_OR_RETURN(int64_t dim, Int(op, {"scatter_dimension"}, {}));
    return Collective(b, op, "reduce-scatter",
                      absl::StrCat("dimensions={", dim, "}"));
  }
  if (name == "all_to_all") return AllToAll(b, op);
  if (name == "collective_permute") {
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
  return Unsupported(op, "this operation is not supported");
}

absl::Status Translator::Chlo(Builder* b, const Operation& op,
                              absl::string_view name) {
  static const auto* const kChlo = new absl::flat_hash_set<std::string>{
      "erf",  "tan",   "top_k", "sinh",  "cosh",   "atan",   "asin",
      "acos", "asinh", "acosh", "atanh", "square", "erf_inv"};
  if (!kChlo->contains(name)) {
    return Unsupported(op, "this CHLO operation is not supported");
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (name == "erf" || name == "tan") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    return Define(b, op,
                  {Value{Emit(b, &op, shape, name, {in[0].name}), shape}});
  }
  if (name == "top_k") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
    PJRT_ASSIGN_OR_RETURN(int64_t k, Int(op, {"k"}, {}));
    return DefineFrom(b, op,
                      Value{Emit(b, &op, shape, "topk", {in[0].name},
                                 absl::StrCat("k=", k, ", largest=true")),
                            shape});
  }
  // Decompositions over HLO ops, as CHLO documents them.
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  const PrimitiveType type = shape.element_type();
  if (!IsFloatingPoint(type) || IsComplex(type)) {
    return Unsupported(
        op, absl::StrCat("chlo.", name, " on ", mlir::MlirTypeString(shape),
                         " is not supported (real floating "
                         "point only)"));
  }
  const std::string x = in[0].name;
  const auto unary = [&](absl::string_view opcode, const std::string& a) {
    return Emit(b, &op, shape, opcode, {a});
  };
  const auto binary = [&](absl::string_view opcode, const std::string& a,
                          const std::string& c) {
    return Emit(b, &op, shape, opcode, {a, c});
  };
  const auto constant = [&](double value) {
    const std::string c =
        EmitLine(b, &op, Shape(type, {}), "constant", FloatText(value, true));
    return Emit(b, &op, shape, "broadcast", {c}, "dimensions={}");
  };
  std::string result;
  if (name == "sinh" || name == "cosh") {
    // (e^x -/+ e^-x) / 2, as expm1 for sinh so that small x keeps its bits.
    const std::string neg = unary("negate", x);
    const std::string half = constant(0.5);
    if (name == "sinh") {
      result = binary("multiply",
                      binary("subtract", unary("exponential-minus-one", x),
                             unary("exponential-minus-one", neg)),
                      half);
    } else {
      result = binary(
          "multiply",
          binary("add", unary("exponential", x), unary("exponential", neg)),
          half);
    }
  } else if (name == "atan") {
    result = binary("atan2", x, constant(1));
  } else if (name == "asin") {
    // 2 * atan2(x, 1 + sqrt(1 - x^2))
    const std::string one = constant(1);
    const std::string root =
        unary("sqrt", binary("subtract", one, binary("multiply", x, x)));
    result = binary("multiply", constant(2),
                    binary("atan2", x, binary("add", one, root)));
  } else if (name == "acos") {
    // 2 * atan2(sqrt(1 - x^2), 1 + x), and pi at x = -1.
    const std::string one = constant(1);
    const std::string root =
        unary("sqrt", binary("subtract", one, binary("multiply", x, x)));
    const std::string general = binary(
        "multiply", constant(2), binary("atan2", root, binary("add", one, x)));
    const Shape pred(PrimitiveType::kPred,
                     std::vector<int64_t>(shape.dimensions().begin(),
                                          shape.dimensions().end()));
    const std::string at_minus_one =
        Emit(b, &op, pred, "compare", {x, constant(-1)}, "direction=EQ");
    result =
        Emit(b, &op, shape, "select", {at_minus_one, constant(M_PI), general});
  } else if (name == "asinh") {
    // sign(x) * log(|x| + sqrt(x^2 + 1))
    const std::string ax = unary("abs", x);
    const std::string value = unary(
        "log", binary("add", ax,
                      unary("sqrt", binary("add", binary("multiply", ax, ax),
                                           constant(1)))));
    result = binary("multiply", unary("sign", x), value);
  } else if (name == "acosh") {
    // log(x + sqrt((x + 1)(x - 1)))
    const std::string one = constant(1);
    result = unary(
        "log", binary("add", x,
                      unary("sqrt", binary("multiply", binary("add", x, one),
                                           binary("subtract", x, one)))));
  } else if (name == "atanh") {
    // (log1p(x) - log1p(-x)) / 2
    result = binary("multiply",
                    binary("subtract", unary("log-plus-one", x),
                           unary("log-plus-one", unary("negate", x))),
                    constant(0.5));
  } else if (name == "square") {
    result = binary("multiply", x, x);
  } else if (name == "erf_inv") {
    // Giles' single-precision approximation ("Approximating the erfinv
    // function", 2010), as XLA expands it for f16/bf16/f32.
    static constexpr double kSmall[] = {
        2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
        -4.39150654e-06, 0.00021858087,  -0.00125372503,
        -0.00417768164,  0.246640727,    1.50140941};
    static constexpr double kLarge[] = {
        -0.000200214257, 0.000100950558, 0.00134934322,
        -0.00367342844,  0.00573950773,  -0.0076224613,
        0.00943887047,   1.00167406,     2.83297682};
    if (type == PrimitiveType::kF64) {
      return Unsupported(op, "chlo.erf_inv on f64 is not supported");
    }
    const Shape pred(PrimitiveType::kPred,
                     std::vector<int64_t>(shape.dimensions().begin(),
                                          shape.dimensions().end()));
    // w = -log(1 - x^2)
    const std::string w =
        unary("negate",
              unary("log-plus-one", unary("negate", binary("multiply", x, x))));
    const std::string small =
        Emit(b, &op, pred, "compare", {w, constant(5)}, "direction=LT");
    const std::string ws = binary("subtract", w, constant(2.5));
    const std::string wl = binary("subtract", unary("sqrt", w), constant(3));
    const std::string v = Emit(b, &op, shape, "select", {small, ws, wl});
    std::string p = Emit(b, &op, shape, "select",
                         {small, constant(kSmall[0]), constant(kLarge[0])});
    for (int i = 1; i < 9; ++i) {
      const std::string c =
          Emit(b, &op, shape, "select",
               {small, constant(kSmall[i]), constant(kLarge[i])});
      p = binary("add", c, binary("multiply", p, v));
    }
    // |x| == 1 gives +-inf.
    const std::string general = binary("multiply", p, x);
    const std::string edge =
        Emit(b, &op, pred, "compare", {unary("abs", x), constant(1)},
             "direction=EQ");
    result = Emit(b, &op, shape, "select",
                  {edge, binary("multiply", x, constant(INFINITY)), general});
  } else {
    return Unsupported(op, "this CHLO operation is not supported");
  }
  return Define(b, op, {Value{result, shape}});
}

}  // namespace pjrt::hlo::stablehlo_internal
