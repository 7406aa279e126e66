// The StableHLO op dispatch: the element-wise table, the ops pjrtd knows
// but does not run, the table of the other ops' translators
// (stablehlo_op_translators.cc), Translator::Op over them, and CHLO.
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
      new absl::flat_hash_set<std::string>{"infeed",
                                           "outfeed",
                                           "send",
                                           "recv",
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

// The StableHLO ops, by name without "stablehlo.", that Op hands to a
// translator of their own.
const absl::flat_hash_map<std::string, Translator::OpTranslator>&
Translator::OpTranslators() {
  static const auto* const kTranslators =
      new absl::flat_hash_map<std::string, OpTranslator>{
          {"iota", &Translator::IotaOp},
          {"dynamic_iota", &Translator::IotaOp},
          {"broadcast_in_dim", &Translator::BroadcastInDimOp},
          {"dynamic_broadcast_in_dim", &Translator::BroadcastInDimOp},
          {"broadcast", &Translator::BroadcastOp},
          {"dynamic_reshape", &Translator::DynamicReshapeOp},
          {"transpose", &Translator::TransposeOrReverseOp},
          {"reverse", &Translator::TransposeOrReverseOp},
          {"concatenate", &Translator::ConcatenateOp},
          {"pad", &Translator::PadOp},
          {"slice", &Translator::SliceOp},
          {"dynamic_slice", &Translator::DynamicSliceOp},
          {"get_tuple_element", &Translator::GetTupleElementOp},
          {"compare", &Translator::CompareOp},
          {"dot_general", &Translator::DotOp},
          {"dot", &Translator::DotOp},
          {"reduce", &Translator::ReduceOp},
          {"map", &Translator::MapOp},
          {"sort", &Translator::SortOp},
          {"while", &Translator::WhileOp},
          {"if", &Translator::IfOrCaseOp},
          {"case", &Translator::IfOrCaseOp},
          {"gather", &Translator::GatherOp},
          {"scatter", &Translator::ScatterOp},
          {"reduce_window", &Translator::ReduceWindowOp},
          {"select_and_scatter", &Translator::SelectAndScatterOp},
          {"convolution", &Translator::ConvolutionOp},
          {"rng_bit_generator", &Translator::RngBitGeneratorOp},
          {"rng", &Translator::RngOp},
          {"fft", &Translator::FftOp},
          {"triangular_solve", &Translator::LinalgOp},
          {"cholesky", &Translator::LinalgOp},
          {"reduce_precision", &Translator::ReducePrecisionOp},
          {"optimization_barrier", &Translator::OptimizationBarrierOp},
          {"custom_call", &Translator::CustomCallOp},
          {"composite", &Translator::CompositeOp},
          {"get_dimension_size", &Translator::GetDimensionSizeOp},
          {"all_reduce", &Translator::AllReduceOp},
          {"all_gather", &Translator::AllGatherOp},
          {"reduce_scatter", &Translator::ReduceScatterOp},
          {"all_to_all", &Translator::AllToAllOp},
          {"collective_permute", &Translator::CollectivePermuteOp},
          {"collective_broadcast", &Translator::CollectiveBroadcast},
          {"collective_reduce", &Translator::CollectiveReduce},
          {"dynamic_pad", &Translator::DynamicWithConstants},
          {"dynamic_gather", &Translator::DynamicWithConstants},
          {"dynamic_conv", &Translator::DynamicWithConstants},
          {"real_dynamic_slice", &Translator::DynamicWithConstants},
      };
  return *kTranslators;
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
  if (name == "batch_norm_training" || name == "batch_norm_inference" ||
      name == "batch_norm_grad") {
    return BatchNorm(b, op, name);
  }
  if ((name == "maximum" || name == "minimum") && op.result_types.size() == 1 &&
      IsComplex(op.result_types[0].element_type())) {
    return ComplexMinMax(b, op, name == "maximum");
  }
  if (name == "bitcast_convert" && op.result_types.size() == 1 &&
      op.operands.size() == 1) {
    PJRT_ASSIGN_OR_RETURN(Value in, Lookup(b, op.operands[0]));
    const bool from_bits = in.shape.element_type() == PrimitiveType::kPred;
    const bool to_bits =
        op.result_types[0].element_type() == PrimitiveType::kPred;
    if (from_bits != to_bits) return BitcastBits(b, op, in);
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
  auto translator = OpTranslators().find(name);
  if (translator == OpTranslators().end()) {
    return Unsupported(op, "this operation is not supported");
  }
  return (this->*translator->second)(b, op, name);
}

absl::Status Translator::Chlo(Builder* b, const Operation& op,
                              absl::string_view name) {
  static const auto* const kChlo = new absl::flat_hash_set<std::string>{
      "erf",  "tan",   "top_k", "sinh",  "cosh",   "atan",    "asin",
      "acos", "asinh", "acosh", "atanh", "square", "erf_inv", "mulhi"};
  static const auto* const kSpecial = new absl::flat_hash_set<std::string>{
      "lgamma",     "digamma", "erfc",       "bessel_i1e", "zeta", "polygamma",
      "next_after", "is_inf",  "is_pos_inf", "is_neg_inf", "conj"};
  if (name == "scan") return Scan(b, op);
  if (name == "ragged_dot") return RaggedDot(b, op);
  if (kSpecial->contains(name)) return Special(b, op, name);
  if (!kChlo->contains(name)) {
    return Unsupported(op, "this CHLO operation is not supported");
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (name == "mulhi") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
    PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
    const PrimitiveType t = shape.element_type();
    if (!(IsSignedInteger(t) || IsUnsignedInteger(t)) || BitWidth(t) < 8) {
      return Unsupported(
          op, absl::StrCat("chlo.mulhi on ", mlir::MlirTypeString(shape),
                           " is not supported (integers of 8 "
                           "to 64 bits only)"));
    }
    return Define(b, op,
                  {Value{MulHi(b, op, shape, in[0].name, in[1].name), shape}});
  }
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
  PJRT_ASSIGN_OR_RETURN(
      std::string result,
      ChloDecomposition(ChloEmitter{this, b, op, shape}, name, in[0].name));
  return Define(b, op, {Value{result, shape}});
}

std::string Translator::MulHi(Builder* b, const Operation& op,
                              const Shape& shape, const std::string& x,
                              const std::string& y) {
  const PrimitiveType t = shape.element_type();
  const bool is_signed = IsSignedInteger(t);
  const int width = BitWidth(t);
  const Shape wide = shape.WithElementType(is_signed ? PrimitiveType::kS64
                                                     : PrimitiveType::kU64);
  const Shape u64 = shape.WithElementType(PrimitiveType::kU64);
  // `value` of `s`'s type, broadcast to its shape.
  const auto constant = [&](const Shape& s, uint64_t value) {
    const std::string c = EmitLine(b, &op, Shape(s.element_type(), {}),
                                   "constant", absl::StrCat(value));
    return Emit(b, &op, s, "broadcast", {c}, "dimensions={}");
  };
  const auto binary = [&](const Shape& s, absl::string_view opcode,
                          const std::string& l, const std::string& r) {
    return Emit(b, &op, s, opcode, {l, r});
  };
  if (width < 64) {
    // The whole product fits in 64 bits: its bits above `width`.
    const std::string product =
        binary(wide, "multiply", Emit(b, &op, wide, "convert", {x}),
               Emit(b, &op, wide, "convert", {y}));
    const std::string high = binary(
        wide, is_signed ? "shift-right-arithmetic" : "shift-right-logical",
        product, constant(wide, width));
    return Emit(b, &op, shape, "convert", {high});
  }
  // 64 bits: the unsigned product from 32-bit halves, then for signed
  // operands minus the other operand for each negative one (mod 2^64).
  const auto bits = [&](const std::string& v) {
    return is_signed ? Emit(b, &op, u64, "bitcast-convert", {v}) : v;
  };
  const std::string ux = bits(x), uy = bits(y);
  const std::string mask = constant(u64, 0xFFFFFFFFu);
  const std::string half = constant(u64, 32);
  const auto low = [&](const std::string& v) {
    return binary(u64, "and", v, mask);
  };
  const auto high = [&](const std::string& v) {
    return binary(u64, "shift-right-logical", v, half);
  };
  const std::string xl = low(ux), xh = high(ux), yl = low(uy), yh = high(uy);
  const std::string ll = binary(u64, "multiply", xl, yl);
  const std::string lh = binary(u64, "multiply", xl, yh);
  const std::string hl = binary(u64, "multiply", xh, yl);
  const std::string hh = binary(u64, "multiply", xh, yh);
  const std::string mid =
      binary(u64, "add", binary(u64, "add", high(ll), low(lh)), low(hl));
  std::string result =
      binary(u64, "add",
             binary(u64, "add", binary(u64, "add", hh, high(lh)), high(hl)),
             high(mid));
  if (!is_signed) return result;
  const std::string zero = constant(u64, 0);
  const std::string zero_s = constant(shape, 0);
  const Shape pred = shape.WithElementType(PrimitiveType::kPred);
  for (const auto& [v, other] : {std::pair{x, uy}, std::pair{y, ux}}) {
    const std::string negative =
        Emit(b, &op, pred, "compare", {v, zero_s}, "direction=LT");
    result = binary(u64, "subtract", result,
                    Emit(b, &op, u64, "select", {negative, other, zero}));
  }
  return Emit(b, &op, shape, "bitcast-convert", {result});
}

std::string Translator::ChloEmitter::Unary(absl::string_view opcode,
                                           const std::string& a) const {
  return translator->Emit(b, &op, shape, opcode, {a});
}

std::string Translator::ChloEmitter::Binary(absl::string_view opcode,
                                            const std::string& a,
                                            const std::string& c) const {
  return translator->Emit(b, &op, shape, opcode, {a, c});
}

std::string Translator::ChloEmitter::Constant(double value) const {
  const std::string c =
      translator->EmitLine(b, &op, Shape(shape.element_type(), {}), "constant",
                           FloatText(value, true));
  return translator->Emit(b, &op, shape, "broadcast", {c}, "dimensions={}");
}

std::string Translator::ChloEmitter::Compare(
    const std::vector<std::string>& operands,
    absl::string_view direction) const {
  return translator->Emit(b, &op, shape.WithElementType(PrimitiveType::kPred),
                          "compare", operands,
                          absl::StrCat("direction=", direction));
}

std::string Translator::ChloEmitter::Select(
    const std::vector<std::string>& operands) const {
  return translator->Emit(b, &op, shape, "select", operands);
}

absl::StatusOr<std::string> Translator::ChloDecomposition(
    const ChloEmitter& e, absl::string_view name, const std::string& x) {
  std::string result;
  if (name == "sinh" || name == "cosh") {
    // (e^x -/+ e^-x) / 2, as expm1 for sinh so that small x keeps its bits.
    const std::string neg = e.Unary("negate", x);
    const std::string half = e.Constant(0.5);
    if (name == "sinh") {
      result =
          e.Binary("multiply",
                   e.Binary("subtract", e.Unary("exponential-minus-one", x),
                            e.Unary("exponential-minus-one", neg)),
                   half);
    } else {
      result = e.Binary("multiply",
                        e.Binary("add", e.Unary("exponential", x),
                                 e.Unary("exponential", neg)),
                        half);
    }
  } else if (name == "atan") {
    result = e.Binary("atan2", x, e.Constant(1));
  } else if (name == "asin") {
    // 2 * atan2(x, 1 + sqrt(1 - x^2))
    const std::string one = e.Constant(1);
    const std::string root =
        e.Unary("sqrt", e.Binary("subtract", one, e.Binary("multiply", x, x)));
    result = e.Binary("multiply", e.Constant(2),
                      e.Binary("atan2", x, e.Binary("add", one, root)));
  } else if (name == "acos") {
    // 2 * atan2(sqrt(1 - x^2), 1 + x), and pi at x = -1.
    const std::string one = e.Constant(1);
    const std::string root =
        e.Unary("sqrt", e.Binary("subtract", one, e.Binary("multiply", x, x)));
    const std::string general =
        e.Binary("multiply", e.Constant(2),
                 e.Binary("atan2", root, e.Binary("add", one, x)));
    const std::string at_minus_one = e.Compare({x, e.Constant(-1)}, "EQ");
    result = e.Select({at_minus_one, e.Constant(M_PI), general});
  } else if (name == "asinh") {
    // sign(x) * log(|x| + sqrt(x^2 + 1))
    const std::string ax = e.Unary("abs", x);
    const std::string value = e.Unary(
        "log",
        e.Binary("add", ax,
                 e.Unary("sqrt", e.Binary("add", e.Binary("multiply", ax, ax),
                                          e.Constant(1)))));
    result = e.Binary("multiply", e.Unary("sign", x), value);
  } else if (name == "acosh") {
    // log(x + sqrt((x + 1)(x - 1)))
    const std::string one = e.Constant(1);
    result = e.Unary(
        "log",
        e.Binary("add", x,
                 e.Unary("sqrt", e.Binary("multiply", e.Binary("add", x, one),
                                          e.Binary("subtract", x, one)))));
  } else if (name == "atanh") {
    // (log1p(x) - log1p(-x)) / 2
    result = e.Binary("multiply",
                      e.Binary("subtract", e.Unary("log-plus-one", x),
                               e.Unary("log-plus-one", e.Unary("negate", x))),
                      e.Constant(0.5));
  } else if (name == "square") {
    result = e.Binary("multiply", x, x);
  } else if (name == "erf_inv") {
    PJRT_ASSIGN_OR_RETURN(result, ErfInv(e, x));
  } else {
    return Unsupported(e.op, "this CHLO operation is not supported");
  }
  return result;
}

absl::StatusOr<std::string> Translator::ErfInv(const ChloEmitter& e,
                                               const std::string& x) {
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
  if (e.shape.element_type() == PrimitiveType::kF64) {
    return Unsupported(e.op, "chlo.erf_inv on f64 is not supported");
  }
  // w = -log(1 - x^2)
  const std::string w = e.Unary(
      "negate",
      e.Unary("log-plus-one", e.Unary("negate", e.Binary("multiply", x, x))));
  const std::string small = e.Compare({w, e.Constant(5)}, "LT");
  const std::string ws = e.Binary("subtract", w, e.Constant(2.5));
  const std::string wl =
      e.Binary("subtract", e.Unary("sqrt", w), e.Constant(3));
  const std::string v = e.Select({small, ws, wl});
  std::string p =
      e.Select({small, e.Constant(kSmall[0]), e.Constant(kLarge[0])});
  for (int i = 1; i < 9; ++i) {
    const std::string c =
        e.Select({small, e.Constant(kSmall[i]), e.Constant(kLarge[i])});
    p = e.Binary("add", c, e.Binary("multiply", p, v));
  }
  // |x| == 1 gives +-inf.
  const std::string general = e.Binary("multiply", p, x);
  const std::string edge = e.Compare({e.Unary("abs", x), e.Constant(1)}, "EQ");
  return e.Select(
      {edge, e.Binary("multiply", x, e.Constant(INFINITY)), general});
}

}  // namespace pjrt::hlo::stablehlo_internal
