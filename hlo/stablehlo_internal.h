// The StableHLO translator's shared part: the Translator class (MLIR ops to
// HLO text) and what it builds with, split over stablehlo.cc (functions,
// regions, the module), stablehlo_ops.cc (the op dispatch, element-wise
// table and CHLO), stablehlo_op_translators.cc (one translator per op or
// family of ops), stablehlo_lowering.cc (ops that need more than a line:
// constants, convolutions, collectives, control flow) and stablehlo_chlo.cc
// (chlo.scan and chlo.ragged_dot). Not part of the interface.
#ifndef PJRT_HLO_STABLEHLO_INTERNAL_H_
#define PJRT_HLO_STABLEHLO_INTERNAL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "hlo/literal.h"
#include "hlo/minifloat.h"
#include "hlo/mlir_text.h"
#include "hlo/parser.h"
#include "hlo/stablehlo.h"
#include "hlo/verifier.h"

namespace pjrt::hlo::stablehlo_internal {

using mlir::Attribute;
using mlir::Operation;
using mlir::Region;
using AttrKind = mlir::Attribute::Kind;

// Deepest nesting of regions and calls the translation follows.
constexpr int kMaxDepth = 256;
// Most integers one attribute (a splat of dense<...> included) expands to.
constexpr int64_t kMaxAttributeValues = int64_t{1} << 20;

struct Value {
  std::string name;  // HLO instruction name, without '%'
  Shape shape;
  // A quantized value: `shape` holds its storage integers
  // (stablehlo_quantized.cc).
  std::optional<mlir::Quantization> quantization;
};

struct Line {
  std::string text;
  const Operation* origin = nullptr;
  mlir::Position position;
};

struct Computation {
  std::string name;
  std::vector<Line> lines;
  bool entry = false;
};

// An HLO name from anything: letters, digits, '_', '.', '-'.
inline std::string SanitizeName(absl::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  // Not empty, and not starting with a digit.
  if (name.empty() ||
      absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) {
    out.push_back('_');
  }
  for (char c : name) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                          c == '_' || c == '.' || c == '-'
                      ? c
                      : '_');
  }
  return out;
}

// 0, 1, ..., n - 1: the leading (batch) dimensions of a shape.
inline std::vector<int64_t> FirstDimensions(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// The type of a complex type's parts; a real type itself.
inline PrimitiveType RealPartType(PrimitiveType type) {
  return IsComplex(type) ? ComplexPartType(type) : type;
}

// The element type a LAPACK routine's prefix names (s, d, c, z); kInvalid
// for any other letter.
inline PrimitiveType LapackType(char prefix) {
  switch (prefix) {
    case 's':
      return PrimitiveType::kF32;
    case 'd':
      return PrimitiveType::kF64;
    case 'c':
      return PrimitiveType::kC64;
    case 'z':
      return PrimitiveType::kC128;
    default:
      return PrimitiveType::kInvalid;
  }
}

// The element type a linear-algebra call computes in: the one its LAPACK
// name carries (lapack_s...), else (cuSOLVER's, hipSOLVER's) its first
// operand's where that is f32, f64, c64 or c128; kInvalid otherwise.
inline PrimitiveType LinalgCallType(absl::string_view target,
                                    const Shape* first_operand) {
  if (absl::StartsWith(target, "lapack_") && target.size() > 7) {
    return LapackType(target[7]);
  }
  if (first_operand == nullptr || !first_operand->IsArray()) {
    return PrimitiveType::kInvalid;
  }
  const PrimitiveType t = first_operand->element_type();
  return t == PrimitiveType::kF32 || t == PrimitiveType::kF64 ||
                 t == PrimitiveType::kC64 || t == PrimitiveType::kC128
             ? t
             : PrimitiveType::kInvalid;
}

inline std::string Braced(const std::vector<int64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

// A float's bits as HLO literal text.
inline std::string FloatText(double value, bool is_double) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return is_double ? absl::StrFormat("%.17g", value)
                   : absl::StrFormat("%.9g", value);
}

// Value of `bits` (width per the type) of a floating-point type.
inline double FloatFromBits(PrimitiveType type, uint64_t bits) {
  if (IsMiniFloat(type))
    return MiniFloatToFloat(type, static_cast<uint8_t>(bits));
  switch (type) {
    case PrimitiveType::kF64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case PrimitiveType::kF32:
    case PrimitiveType::kC64: {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case PrimitiveType::kF16:
      return HalfToFloat(static_cast<uint16_t>(bits));
    case PrimitiveType::kBf16:
      return Bfloat16ToFloat(static_cast<uint16_t>(bits));
    default: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
  }
}

class Translator {
 public:
  Translator(const mlir::Module& module, absl::string_view text)
      : module_(module), text_(text) {}

  absl::StatusOr<StableHloTranslation> Run();

  // Whether a custom call's target is a library call the translator
  // computes (LAPACK's, cuSOLVER's and hipSOLVER's linear algebra).
  static bool IsLibraryCall(absl::string_view target);

 private:
  struct Builder {
    Computation computation;
    absl::flat_hash_map<std::string, Value> values;
    // The values of the integer constants (up to kMaxConstantOperand
    // elements) defined in this region, flattened: what the dynamic ops'
    // shape operands are read from.
    absl::flat_hash_map<std::string, std::vector<int64_t>> integer_constants;
    int depth = 0;
  };
  static constexpr int64_t kMaxConstantOperand = 4096;

  // --- errors ---------------------------------------------------------------
  absl::Status ErrorAt(mlir::Position p, absl::StatusCode code,
                       absl::string_view message) const {
    return absl::Status(code, FormatErrorAt(text_, p.line, p.column, message));
  }
  absl::Status Invalid(const Operation& op, absl::string_view message) const {
    return ErrorAt(op.position, absl::StatusCode::kInvalidArgument,
                   absl::StrCat(op.name, ": ", message));
  }
  absl::Status Unsupported(const Operation& op,
                           absl::string_view message) const {
    return ErrorAt(op.position, absl::StatusCode::kUnimplemented,
                   absl::StrCat(op.name, ": ", message));
  }

  // --- attributes -----------------------------------------------------------
  // The attribute of `op` under any of `names`, marked as used; nullptr.
  const Attribute* Attr(const Operation& op,
                        std::initializer_list<absl::string_view> names) {
    for (absl::string_view name : names) {
      for (const auto& [key, value] : op.attributes) {
        if (key == name) {
          used_.insert(&value);
          return &value;
        }
      }
    }
    return nullptr;
  }
  absl::StatusOr<const Attribute*> RequireAttr(
      const Operation& op, std::initializer_list<absl::string_view> names) {
    const Attribute* a = Attr(op, names);
    if (a == nullptr) {
      return Invalid(op, absl::StrCat("needs the attribute ", *names.begin()));
    }
    return a;
  }
  absl::StatusOr<int64_t> IntOf(const Operation& op, const Attribute& a,
                                absl::string_view what) {
    int64_t v = 0;
    if (a.kind == AttrKind::kInt && absl::SimpleAtoi(a.text, &v)) return v;
    if (a.kind == AttrKind::kBool) return a.boolean ? 1 : 0;
    if (a.kind == AttrKind::kDense && a.scalars.size() == 1 &&
        absl::SimpleAtoi(a.scalars[0], &v)) {
      return v;
    }
    return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                   absl::StrCat(op.name, ": ", what, " must be an integer"));
  }
  absl::StatusOr<std::vector<int64_t>> IntsOf(const Operation& op,
                                              const Attribute& a,
                                              absl::string_view what) {
    std::vector<int64_t> out;
    if (a.kind == AttrKind::kArray) {
      for (const Attribute& e : a.elements) {
        PJRT_ASSIGN_OR_RETURN(int64_t v, IntOf(op, e, what));
        out.push_back(v);
      }
      return out;
    }
    if (a.kind == AttrKind::kDense && !a.dense_hex) {
      for (absl::string_view s : a.scalars) {
        int64_t v = 0;
        if (s == "true" || s == "false") {
          v = s == "true";
        } else if (!absl::SimpleAtoi(s, &v)) {
          return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                         absl::StrCat(op.name, ": ", what,
                                      " must hold integers, not ", s));
        }
        out.push_back(v);
      }
      if (out.size() == 1 && a.type.rank() == 1 && a.type.dimensions(0) > 1) {
        if (a.type.dimensions(0) > kMaxAttributeValues) {
          return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                         absl::StrFormat("%s: %s holds %d values; an "
                                         "attribute holds at most %d",
                                         op.name, what, a.type.dimensions(0),
                                         kMaxAttributeValues));
        }
        out.assign(a.type.dimensions(0), out[0]);  // a splat
      }
      return out;
    }
    return ErrorAt(
        a.position, absl::StatusCode::kInvalidArgument,
        absl::StrCat(op.name, ": ", what, " must be a list of integers"));
  }
  absl::StatusOr<std::vector<int64_t>> Ints(
      const Operation& op, std::initializer_list<absl::string_view> names) {
    const Attribute* a = Attr(op, names);
    if (a == nullptr) return std::vector<int64_t>();
    return IntsOf(op, *a, *names.begin());
  }
  absl::StatusOr<int64_t> Int(const Operation& op,
                              std::initializer_list<absl::string_view> names,
                              std::optional<int64_t> default_value) {
    const Attribute* a = Attr(op, names);
    if (a == nullptr) {
      if (default_value.has_value()) return *default_value;
      return Invalid(op, absl::StrCat("needs the attribute ", *names.begin()));
    }
    return IntOf(op, *a, *names.begin());
  }
  // A list of rows ([[1, 2], [3, 4]] or dense<...> : tensor<RxCxi64>).
  absl::StatusOr<std::vector<std::vector<int64_t>>> Matrix(
      const Operation& op, const Attribute& a, absl::string_view what) {
    std::vector<std::vector<int64_t>> rows;
    if (a.kind == AttrKind::kDense) {
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> flat, IntsOf(op, a, what));
      if (a.type.rank() != 2) {
        return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                       absl::StrCat(op.name, ": ", what, " must be a matrix"));
      }
      const int64_t r = a.type.dimensions(0), c = a.type.dimensions(1);
      if (r * c > kMaxAttributeValues) {
        return ErrorAt(
            a.position, absl::StatusCode::kInvalidArgument,
            absl::StrFormat("%s: %s holds %d values; an attribute "
                            "holds at most %d",
                            op.name, what, r * c, kMaxAttributeValues));
      }
      if (flat.size() == 1 && r * c > 1) flat.assign(r * c, flat[0]);
      if (static_cast<int64_t>(flat.size()) != r * c) {
        return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                       absl::StrCat(op.name, ": ", what, " holds ", flat.size(),
                                    " values for a ", r, "x", c, " matrix"));
      }
      for (int64_t i = 0; i < r; ++i) {
        rows.emplace_back(flat.begin() + i * c, flat.begin() + (i + 1) * c);
      }
      return rows;
    }
    if (a.kind == AttrKind::kArray) {
      for (const Attribute& row : a.elements) {
        PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> r, IntsOf(op, row, what));
        rows.push_back(std::move(r));
      }
      return rows;
    }
    return ErrorAt(a.position, absl::StatusCode::kInvalidArgument,
                   absl::StrCat(op.name, ": ", what, " must be a matrix"));
  }
  // The last word of an enum attribute: DEFAULT, #stablehlo<fft_type FFT>.
  std::string Word(const Attribute& a) {
    if (a.kind == AttrKind::kWord || a.kind == AttrKind::kString) return a.text;
    if (a.kind == AttrKind::kDialect) {
      std::vector<absl::string_view> words =
          absl::StrSplit(a.body, ' ', absl::SkipEmpty());
      if (!words.empty()) return std::string(words.back());
    }
    return "";
  }
  const Attribute* Field(const Attribute& a, absl::string_view name) {
    return mlir::FindAttribute(a.fields, name);
  }
  absl::StatusOr<std::vector<int64_t>> FieldInts(const Operation& op,
                                                 const Attribute& a,
                                                 absl::string_view name) {
    const Attribute* f = Field(a, name);
    if (f == nullptr) return std::vector<int64_t>();
    return IntsOf(op, *f, name);
  }
  absl::Status CheckAttributesUsed(const Operation& op);

  // --- emission -------------------------------------------------------------
  std::string NewName(absl::string_view base) {
    return absl::StrCat(SanitizeName(base), ".", next_id_++);
  }
  // One instruction: `opcode(inside), attributes`; returns its name.
  std::string EmitLine(Builder* b, const Operation* origin, const Shape& shape,
                       absl::string_view opcode, absl::string_view inside,
                       absl::string_view attributes = "") {
    const std::string name = NewName(opcode);
    std::string line = absl::StrCat("  %", name, " = ", shape.ToString(), " ",
                                    opcode, "(", inside, ")");
    if (!attributes.empty()) absl::StrAppend(&line, ", ", attributes);
    b->computation.lines.push_back(
        Line{std::move(line), origin,
             origin != nullptr ? origin->position : mlir::Position()});
    return name;
  }
  // An instruction of `operands` (instruction names).
  std::string Emit(Builder* b, const Operation* origin, const Shape& shape,
                   absl::string_view opcode,
                   const std::vector<std::string>& operands,
                   absl::string_view attributes = "") {
    std::vector<std::string> refs;
    for (const std::string& o : operands) refs.push_back(absl::StrCat("%", o));
    return EmitLine(b, origin, shape, opcode, absl::StrJoin(refs, ", "),
                    attributes);
  }
  // A scalar zero of `type` (false for pred), and an array of zeros.
  std::string EmitZero(Builder* b, const Operation* origin,
                       PrimitiveType type) {
    const char* text = type == PrimitiveType::kPred ? "false"
                       : IsComplex(type)            ? "(0, 0)"
                                                    : "0";
    return EmitLine(b, origin, Shape(type, {}), "constant", text);
  }
  std::string EmitZeros(Builder* b, const Operation* origin,
                        const Shape& shape) {
    return Emit(b, origin, shape, "broadcast",
                {EmitZero(b, origin, shape.element_type())}, "dimensions={}");
  }
  // Parameter `number`, written where `argument` is.
  std::string EmitParameter(Builder* b, const Shape& shape, int64_t number,
                            mlir::Position argument) {
    const std::string name =
        EmitLine(b, nullptr, shape, "parameter", absl::StrCat(number));
    b->computation.lines.back().position = argument;
    return name;
  }
  // The channel id of a collective: its channel_handle's handle when
  // positive.
  absl::StatusOr<std::optional<int64_t>> ChannelId(const Operation& op) {
    const Attribute* channel = Attr(op, {"channel_handle"});
    if (channel == nullptr) return std::nullopt;
    const Attribute* handle = Field(*channel, "handle");
    if (handle == nullptr) return std::nullopt;
    PJRT_ASSIGN_OR_RETURN(int64_t id, IntOf(op, *handle, "channel handle"));
    if (id <= 0) return std::nullopt;
    return id;
  }
  std::string EmitGte(Builder* b, const Operation* origin, const Value& tuple,
                      int index) {
    return Emit(b, origin, tuple.shape.tuple_shapes()[index],
                "get-tuple-element", {tuple.name},
                absl::StrCat("index=", index));
  }
  absl::StatusOr<Value> Lookup(Builder* b, const mlir::ValueUse& use) {
    auto it = b->values.find(use.name);
    if (it == b->values.end() && absl::EndsWith(use.name, "#0")) {
      it = b->values.find(use.name.substr(0, use.name.size() - 2));
    }
    if (it == b->values.end()) {
      return ErrorAt(use.position, absl::StatusCode::kInvalidArgument,
                     absl::StrCat("use of undefined value ", use.name));
    }
    return it->second;
  }
  absl::StatusOr<std::vector<Value>> Operands(Builder* b, const Operation& op) {
    std::vector<Value> values;
    for (const mlir::ValueUse& use : op.operands) {
      PJRT_ASSIGN_OR_RETURN(Value v, Lookup(b, use));
      values.push_back(std::move(v));
    }
    return values;
  }
  absl::Status Define(Builder* b, const Operation& op,
                      std::vector<Value> results) {
    if (results.size() != op.results.size()) {
      return Invalid(op, absl::StrFormat("defines %d result(s) where it has %d",
                                         op.results.size(), results.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      if (!b->values.emplace(op.results[i], results[i]).second) {
        return Invalid(op, absl::StrCat("redefines ", op.results[i]));
      }
    }
    return absl::OkStatus();
  }
  // Defines op's results from one HLO value: itself for one result, its
  // elements for several (the value is a tuple).
  absl::Status DefineFrom(Builder* b, const Operation& op, const Value& v) {
    if (op.results.size() == 1 &&
        !(v.shape.IsTuple() && op.result_types.size() == 1 &&
          !op.result_types[0].IsTuple())) {
      return Define(b, op, {v});
    }
    if (!v.shape.IsTuple() ||
        v.shape.tuple_shapes().size() != op.results.size()) {
      return Invalid(op,
                     absl::StrFormat("defines %d result(s) where it has %s",
                                     op.results.size(), v.shape.ToString()));
    }
    std::vector<Value> results;
    for (size_t i = 0; i < op.results.size(); ++i) {
      results.push_back(Value{EmitGte(b, &op, v, static_cast<int>(i)),
                              v.shape.tuple_shapes()[i]});
    }
    return Define(b, op, std::move(results));
  }
  absl::StatusOr<Shape> ResultType(const Operation& op, size_t i = 0) {
    if (op.result_types.size() != op.results.size()) {
      return Invalid(
          op, absl::StrFormat("has %d result(s) but %d result "
                              "type(s)",
                              op.results.size(), op.result_types.size()));
    }
    if (i >= op.result_types.size()) {
      return Invalid(op, absl::StrFormat("needs at least %d result(s)", i + 1));
    }
    return op.result_types[i];
  }
  // The results' shape: the one result's, or a tuple of them.
  absl::StatusOr<Shape> ResultsShape(const Operation& op) {
    if (op.result_types.size() != op.results.size()) {
      return Invalid(
          op, absl::StrFormat("has %d result(s) but %d result "
                              "type(s)",
                              op.results.size(), op.result_types.size()));
    }
    if (op.result_types.size() == 1) return op.result_types[0];
    return Shape::Tuple(op.result_types);
  }
  absl::Status ExpectOperands(const Operation& op, size_t n) {
    if (op.operands.size() != n) {
      return Invalid(op, absl::StrFormat("takes %d operand(s), not %d", n,
                                         op.operands.size()));
    }
    return absl::OkStatus();
  }

  // --- structure ------------------------------------------------------------
  absl::Status Ops(Builder* b, const std::vector<Operation>& ops,
                   std::vector<Value>* returned);
  absl::Status Op(Builder* b, const Operation& op);
  // Translates one StableHLO op; the name is the op's without "stablehlo.".
  using OpTranslator = absl::Status (Translator::*)(Builder* b,
                                                    const Operation& op,
                                                    absl::string_view name);
  static const absl::flat_hash_map<std::string, OpTranslator>& OpTranslators();
  absl::StatusOr<std::string> FunctionComputation(const std::string& symbol,
                                                  const Operation& at,
                                                  int depth);
  // A computation from a region that may not use outer values (reducers,
  // comparators): parameters are the region's arguments.
  absl::StatusOr<std::string> ClosedRegion(Builder* parent, const Operation& op,
                                           const Region& region,
                                           absl::string_view what);
  // A computation with one tuple parameter: the region's arguments (from
  // `argument_shapes`), then `captures`.
  absl::StatusOr<std::string> TupleRegion(
      Builder* parent, const Operation& op, const Region& region,
      absl::string_view what, const std::vector<Value>& captured,
      const std::vector<std::string>& capture_names,
      const std::vector<Shape>& argument_shapes, bool pass_captures_through);
  std::vector<std::string> FreeValues(const Region& region);
  void CollectFree(const Region& region,
                   absl::flat_hash_set<std::string>* defined,
                   std::vector<std::string>* free,
                   absl::flat_hash_set<std::string>* seen, int depth);
  std::string Finish(Builder* b);
  // The values a function returns against the types it declares.
  absl::Status CheckReturned(const mlir::Function& f,
                             const std::vector<Value>& returned) const {
    if (returned.size() != f.result_types.size()) {
      return ErrorAt(
          f.position, absl::StatusCode::kInvalidArgument,
          absl::StrFormat("@%s returns %d value(s) but declares %d", f.name,
                          returned.size(), f.result_types.size()));
    }
    for (size_t i = 0; i < returned.size(); ++i) {
      if (returned[i].shape != f.result_types[i]) {
        return ErrorAt(
            f.position, absl::StatusCode::kInvalidArgument,
            absl::StrFormat("@%s returns %s as result %d but "
                            "declares %s",
                            f.name, mlir::MlirTypeString(returned[i].shape), i,
                            mlir::MlirTypeString(f.result_types[i])));
      }
    }
    return absl::OkStatus();
  }
  static std::vector<std::string> Names(const std::vector<Value>& values) {
    std::vector<std::string> names;
    names.reserve(values.size());
    for (const Value& v : values) names.push_back(v.name);
    return names;
  }
  // What a computation returns: its one value, or a tuple of its values
  // (a tuple always with `tuple`).
  std::string ReturnValue(Builder* b, const Operation* origin,
                          const std::vector<Value>& values, bool tuple) {
    if (values.size() == 1 && !tuple) return values[0].name;
    std::vector<Shape> shapes;
    for (const Value& v : values) shapes.push_back(v.shape);
    return Emit(b, origin, Shape::Tuple(shapes), "tuple", Names(values));
  }
  // Marks the instruction named `root` as its computation's ROOT.
  static void MarkRoot(Builder* b, const std::string& root) {
    const std::string prefix = absl::StrCat("  %", root, " = ");
    for (auto it = b->computation.lines.rbegin();
         it != b->computation.lines.rend(); ++it) {
      if (absl::StartsWith(it->text, prefix)) {
        it->text.replace(0, 2, "  ROOT ");
        return;
      }
    }
  }

  // --- ops ------------------------------------------------------------------
  absl::Status Constant(Builder* b, const Operation& op);
  absl::StatusOr<std::string> LiteralText(const Operation& op,
                                          const Attribute& value,
                                          const Shape& shape, bool* splat);
  absl::Status BroadcastInDim(Builder* b, const Operation& op, Value operand,
                              const Shape& result,
                              const std::vector<int64_t>& dims);
  absl::Status While(Builder* b, const Operation& op);
  // chlo.scan: a while over the scanned dimension whose body slices each
  // input, calls the region on the slices and carries, and writes its
  // outputs into place.
  absl::Status Scan(Builder* b, const Operation& op);
  // chlo.ragged_dot (stablehlo_chlo.cc): HLO's ragged-dot, checked here
  // so that messages name the op.
  absl::Status RaggedDot(Builder* b, const Operation& op);
  // batch_norm_training, batch_norm_inference and batch_norm_grad
  // (stablehlo_batch_norm.cc), as the spec decomposes them.
  absl::Status BatchNorm(Builder* b, const Operation& op,
                         absl::string_view name);
  // A float attribute (1.0e-3, or 0x... bits of an f32 or f64).
  absl::StatusOr<double> FloatOf(const Operation& op, const Attribute& a,
                                 absl::string_view what);
  // A computation adding two scalars of `type` (or for pred), made once.
  std::string AddComputation(PrimitiveType type);
  // The scalar computation applying `opcode` (maximum, minimum...) to its
  // two parameters of `type`, made once per module.
  std::string ScalarComputation(PrimitiveType type, absl::string_view opcode);
  std::string MaxComputation(PrimitiveType type) {
    return ScalarComputation(type, "maximum");
  }
  std::string MinComputation(PrimitiveType type) {
    return ScalarComputation(type, "minimum");
  }
  absl::Status Conditional(Builder* b, const Operation& op);
  absl::Status Collective(Builder* b, const Operation& op,
                          absl::string_view opcode, std::string attributes);
  std::string WindowText(const std::vector<int64_t>& size,
                         const std::vector<int64_t>& stride,
                         const std::vector<std::vector<int64_t>>& pad,
                         const std::vector<int64_t>& lhs_dilate,
                         const std::vector<int64_t>& rhs_dilate,
                         const std::vector<int64_t>& reversal);
  absl::Status Convolution(Builder* b, const Operation& op);
  absl::Status AllToAll(Builder* b, const Operation& op);
  // dynamic_pad, dynamic_gather, dynamic_conv and real_dynamic_slice whose
  // shape operands are integer constants: their static ops, the constants
  // as attributes. UNIMPLEMENTED when one is computed at run time.
  absl::Status DynamicWithConstants(Builder* b, const Operation& op,
                                    absl::string_view name);
  // Operand `i`'s values, when an integer constant of this region defines
  // it.
  absl::StatusOr<std::vector<int64_t>> ConstantOperand(Builder* b,
                                                       const Operation& op,
                                                       size_t i,
                                                       absl::string_view what);
  // collective_broadcast: each group's first process keeps its operand, the
  // others receive it by collective-permutes (one per place in the longest
  // group), processes in no group get zeros; the bits are moved, never
  // computed on.
  absl::Status CollectiveBroadcast(Builder* b, const Operation& op,
                                   absl::string_view name);
  // collective_broadcast with has_dynamic_root: its last operand holds
  // each operand's root (a place in the group); every process all-gathers
  // its group's operands and keeps the root's (groups of one size, across
  // replicas).
  absl::Status DynamicRootBroadcast(Builder* b, const Operation& op);
  // collective_reduce: an all-reduce of each group (the processes up to the
  // largest named that are in none, alone) whose first process keeps the
  // result; the others get zeros.
  absl::Status CollectiveReduce(Builder* b, const Operation& op,
                                absl::string_view name);
  // This process's place in its group of `groups` (by replica-id, or
  // partition-id), an s32 scalar: -1 in none.
  absl::StatusOr<std::string> PlaceInGroup(
      Builder* b, const Operation& op,
      const std::vector<std::vector<int64_t>>& groups, bool by_partition);
  // maximum/minimum of complex numbers: the lexicographic order of (real,
  // imaginary), as StableHLO defines it.
  absl::Status ComplexMinMax(Builder* b, const Operation& op, bool maximum);
  // bitcast_convert between i1 and a wider type: StableHLO's i1 is one bit,
  // so the i1 side has a minor dimension of the other type's width, bit 0
  // (least significant) first; packed by shifts and a sum, unpacked by
  // shifts and a compare.
  absl::Status BitcastBits(Builder* b, const Operation& op, const Value& in);
  absl::Status Chlo(Builder* b, const Operation& op, absl::string_view name);

  // --- quantized types (stablehlo_quantized.cc) ------------------------------
  // Whether `op` takes or gives a quantized value.
  absl::StatusOr<bool> Quantized(Builder* b, const Operation& op);
  // Translates such an op: uniform_quantize, uniform_dequantize, a
  // bitcast_convert to or from the storage type, and any other op as the
  // spec's dequantize_op_quantize (the op on the values the operands
  // express, its quantized results quantized).
  absl::Status QuantizedOp(Builder* b, const Operation& op);
  // The values `v` (quantized) expresses, and those of `x` (of the
  // expressed type, shaped `shape`) quantized as `q`.
  absl::StatusOr<Value> Dequantize(Builder* b, const Operation& op,
                                   const Value& v);
  absl::StatusOr<Value> Quantize(Builder* b, const Operation& op,
                                 const Value& x, const mlir::Quantization& q,
                                 const Shape& storage_shape);
  // The scales (or zero points) of `q` as an array shaped like `shape` (of
  // its expressed type): a broadcast of one value, or of one per index of
  // the quantized dimension.
  absl::StatusOr<std::string> QuantizationParameter(Builder* b,
                                                    const Operation& op,
                                                    const mlir::Quantization& q,
                                                    const Shape& shape,
                                                    bool scales);
  // Emits the element-wise HLO of a CHLO decomposition: every value of
  // `shape` (a comparison's of pred), each line attributed to `op`.
  struct ChloEmitter {
    std::string Unary(absl::string_view opcode, const std::string& a) const;
    std::string Binary(absl::string_view opcode, const std::string& a,
                       const std::string& c) const;
    // `value` broadcast to `shape`.
    std::string Constant(double value) const;
    // pred of `shape`'s dimensions: operands[0] <direction> operands[1].
    // (Operands come as a braced list so that those emitted in place are
    // emitted in order.)
    std::string Compare(const std::vector<std::string>& operands,
                        absl::string_view direction) const;
    // The predicate, then the values.
    std::string Select(const std::vector<std::string>& operands) const;

    Translator* translator;
    Builder* b;
    const Operation& op;
    const Shape& shape;
  };
  // The CHLO ops that become several HLO ops, on `x` of real floating-point
  // shape; returns the result's name.
  absl::StatusOr<std::string> ChloDecomposition(const ChloEmitter& e,
                                                absl::string_view name,
                                                const std::string& x);
  absl::StatusOr<std::string> ErfInv(const ChloEmitter& e,
                                     const std::string& x);
  // --- CHLO's special functions, in stablehlo_special.cc --------------------
  // chlo.lgamma, digamma, erfc, bessel_i1e, zeta, polygamma (computed in
  // f64), next_after, is_inf, is_pos_inf, is_neg_inf and conj.
  absl::Status Special(Builder* b, const Operation& op, absl::string_view name);
  // Lanczos' approximation (g = 7) at x, for lgamma and digamma: whether x
  // is reflected (below 1/2), z (x - 1, or -x), A(z), -A'(z), t = z + g +
  // 1/2 and log(t).
  struct LanczosTerms {
    std::string reflect, z, sum, slope, t, log_t;
  };
  LanczosTerms Lanczos(const ChloEmitter& e, const std::string& x);
  // Each on values of e.shape (f64), returning the result's name.
  std::string Lgamma(const ChloEmitter& e, const std::string& x);
  std::string Digamma(const ChloEmitter& e, const std::string& x);
  std::string Erfc(const ChloEmitter& e, const std::string& x);
  std::string BesselI1e(const ChloEmitter& e, const std::string& x);
  std::string Zeta(const ChloEmitter& e, const std::string& s,
                   const std::string& q);
  std::string Polygamma(const ChloEmitter& e, const std::string& n,
                        const std::string& x);
  // On e.shape's own float type (16 to 64 bits).
  absl::StatusOr<std::string> NextAfter(const ChloEmitter& e,
                                        const std::string& x,
                                        const std::string& y);
  // chlo.mulhi: the high half of x * y's double-width product, for
  // integers of 8 to 64 bits (through 64-bit products, or for 64-bit
  // operands from their 32-bit halves).
  std::string MulHi(Builder* b, const Operation& op, const Shape& shape,
                    const std::string& x, const std::string& y);

  // --- translators of OpTranslators(), in stablehlo_op_translators.cc -------
  // Shapes and layout: iota, broadcasts, reshape, transpose and reverse,
  // concatenation, padding, slices, tuple elements.
  absl::Status IotaOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status BroadcastInDimOp(Builder* b, const Operation& op,
                                absl::string_view name);
  absl::Status BroadcastOp(Builder* b, const Operation& op,
                           absl::string_view name);
  absl::Status DynamicReshapeOp(Builder* b, const Operation& op,
                                absl::string_view name);
  absl::Status TransposeOrReverseOp(Builder* b, const Operation& op,
                                    absl::string_view name);
  absl::Status ConcatenateOp(Builder* b, const Operation& op,
                             absl::string_view name);
  absl::Status PadOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status SliceOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status DynamicSliceOp(Builder* b, const Operation& op,
                              absl::string_view name);
  absl::Status GetTupleElementOp(Builder* b, const Operation& op,
                                 absl::string_view name);
  // Comparison and dot products (dot and dot_general).
  absl::Status CompareOp(Builder* b, const Operation& op,
                         absl::string_view name);
  absl::Status DotOp(Builder* b, const Operation& op, absl::string_view name);
  // Ops with regions: reductions, map, sort, control flow (if and case in
  // one), gather and scatter, windows, convolution.
  absl::Status ReduceOp(Builder* b, const Operation& op,
                        absl::string_view name);
  absl::Status MapOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status SortOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status WhileOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status IfOrCaseOp(Builder* b, const Operation& op,
                          absl::string_view name);
  absl::Status GatherOp(Builder* b, const Operation& op,
                        absl::string_view name);
  absl::Status ScatterOp(Builder* b, const Operation& op,
                         absl::string_view name);
  absl::Status ReduceWindowOp(Builder* b, const Operation& op,
                              absl::string_view name);
  absl::Status SelectAndScatterOp(Builder* b, const Operation& op,
                                  absl::string_view name);
  absl::Status ConvolutionOp(Builder* b, const Operation& op,
                             absl::string_view name);
  // Random numbers, FFT, precision and the optimization barrier.
  absl::Status RngBitGeneratorOp(Builder* b, const Operation& op,
                                 absl::string_view name);
  absl::Status RngOp(Builder* b, const Operation& op, absl::string_view name);
  absl::Status FftOp(Builder* b, const Operation& op, absl::string_view name);
  // triangular_solve and cholesky, their flags spelled out.
  absl::Status LinalgOp(Builder* b, const Operation& op,
                        absl::string_view name);
  absl::Status ReducePrecisionOp(Builder* b, const Operation& op,
                                 absl::string_view name);
  absl::Status OptimizationBarrierOp(Builder* b, const Operation& op,
                                     absl::string_view name);
  // Custom calls, composites and dimension sizes.
  absl::Status CustomCallOp(Builder* b, const Operation& op,
                            absl::string_view name);
  absl::Status CompositeOp(Builder* b, const Operation& op,
                           absl::string_view name);
  absl::Status GetDimensionSizeOp(Builder* b, const Operation& op,
                                  absl::string_view name);
  // Collectives.
  absl::Status AllReduceOp(Builder* b, const Operation& op,
                           absl::string_view name);
  absl::Status AllGatherOp(Builder* b, const Operation& op,
                           absl::string_view name);
  absl::Status ReduceScatterOp(Builder* b, const Operation& op,
                               absl::string_view name);
  absl::Status AllToAllOp(Builder* b, const Operation& op,
                          absl::string_view name);
  absl::Status CollectivePermuteOp(Builder* b, const Operation& op,
                                   absl::string_view name);
  absl::StatusOr<std::string> ReplicaGroups(const Operation& op);
  // The same of a replica_groups attribute found elsewhere (a custom call's
  // backend_config); replica_groups={} for none.
  absl::StatusOr<std::string> ReplicaGroupsOf(const Operation& op,
                                              const Attribute* groups);
  // custom_call @lapack_?getrf_ffi, @lapack_?potrf_ffi, @lapack_?trsm_ffi,
  // @cusolver_getrf_ffi and @cu_lu_pivots_to_permutation (and hipSOLVER's
  // alike), as JAX lowers LU and Cholesky (stablehlo_linalg.cc).
  static bool IsLapackTarget(absl::string_view target);
  // A library call's layouts, aliases and backend config, read (what they
  // say is known from its name and operands).
  void UseFfiAttributes(const Operation& op);
  // ", the first <shape>" of a call's operands, for messages.
  static std::string FirstOperandText(const std::vector<Value>& in);
  // A character attribute of the backend config (uplo = 76 : ui8), one of
  // `allowed`; INVALID_ARGUMENT naming it otherwise.
  absl::StatusOr<char> ConfigLetter(const Operation& op,
                                    absl::string_view target,
                                    absl::string_view name,
                                    absl::string_view allowed);
  // Complex helpers of the linear-algebra calls, each `v` itself where
  // `shape` is real: `v`, of `shape`'s real part type, as `shape`'s complex
  // type (imaginary part 0); `v`'s conjugate; |v|^2 element by element, in
  // the real part type.
  std::string AsTyped(Builder* b, const Operation* origin, const std::string& v,
                      const Shape& shape);
  std::string Conjugate(Builder* b, const Operation* origin,
                        const std::string& v, const Shape& shape);
  std::string MagnitudeSquared(Builder* b, const Operation* origin,
                               const std::string& v, const Shape& shape);
  // Whether no result of `op` has an element (a batch of none, as JAX
  // lowers an empty vmap): the library calls then give zeros of each
  // result's shape through DefineZeros rather than loop over what is not
  // there.
  static bool NoResultElements(const Operation& op);
  absl::Status DefineZeros(Builder* b, const Operation& op);
  // OK where a library call's results are `want`; else INVALID_ARGUMENT
  // naming both ("<target> of <operand> gives <want>, not <results>").
  absl::Status ExpectResults(const Operation& op, absl::string_view target,
                             const Shape& operand,
                             const std::vector<Shape>& want);
  // A boolean attribute of the backend config (lower = true); `otherwise`
  // where it is not there.
  absl::StatusOr<bool> ConfigFlag(const Operation& op, absl::string_view name,
                                  bool otherwise);
  // Starts the body of a loop over `state` (a tuple) in `x`, named after
  // `name`: its parameter, and a get-tuple-element of each element of the
  // state, returned in order.
  std::vector<std::string> StartLoopBody(Builder* x, const Shape& state,
                                         absl::string_view name);
  // The condition of a loop whose state's element 0 counts up to `limit`.
  std::string CountingCondition(const Shape& state, int64_t limit,
                                absl::string_view name);
  absl::Status LapackCall(Builder* b, const Operation& op,
                          absl::string_view target,
                          const std::vector<Value>& in);
  absl::Status Getrf(Builder* b, const Operation& op, const Value& a);
  absl::Status Potrf(Builder* b, const Operation& op, const Value& a,
                     bool lower);
  absl::Status Trsm(Builder* b, const Operation& op, absl::string_view target,
                    const std::vector<Value>& in);
  // custom_call @lapack_?geqrf_ffi and @lapack_?orgqr_ffi / ?ungqr_ffi, as
  // JAX lowers QR for CPUs (stablehlo_qr.cc).
  static bool IsLapackQrTarget(absl::string_view target);
  absl::Status LapackQr(Builder* b, const Operation& op,
                        absl::string_view target, const std::vector<Value>& in);
  // Householder QR of `a` [..., m, n]: (R above the diagonal with the
  // reflectors below it, tau [..., min(m, n)]), as ?geqr2 leaves them.
  // With `jpvt` ([..., n] s32), ?geqp3's column pivoting: the columns
  // whose jpvt is nonzero first (FixColumns), then at each step the free
  // column with the longest remaining part; *jpvt becomes the 1-based
  // columns in their places.
  std::pair<Value, Value> Geqrf(Builder* b, const Operation& op, const Value& a,
                                Value* jpvt = nullptr);
  std::tuple<std::string, std::string, std::string> FixColumns(
      Builder* b, const Operation& op, const Value& a, const Value& jpvt);
  // Columns k and j ([...] s32 each) of `mat` (shape `s`) swapped, and
  // elements k and j of `pivots` ([..., n] s32).
  std::pair<std::string, std::string> SwapColumns(Builder* x, const Shape& s,
                                                  const std::string& mat,
                                                  const std::string& pivots,
                                                  const std::string& k,
                                                  const std::string& j);
  // Q [..., m, n] from reflectors [..., m, n] (n <= m) and tau [..., k]
  // (k <= n), as ?org2r computes it.
  Value Orgqr(Builder* b, const Operation& op, const Value& a,
              const Value& tau);
  struct QrStep;
  // custom_call @lapack_ssyevd_ffi and @lapack_dsyevd_ffi, as JAX lowers
  // eigh (stablehlo_eigh.cc), Hermitian ones too.
  static bool IsLapackEighTarget(absl::string_view target);
  absl::Status Syevd(Builder* b, const Operation& op, absl::string_view target,
                     const std::vector<Value>& in);
  // custom_call @lapack_?gtsv_ffi and @cusparse_gtsv2_ffi (hipSPARSE's
  // alike), as JAX lowers tridiagonal_solve (stablehlo_tridiagonal.cc).
  static bool IsTridiagonalTarget(absl::string_view target);
  absl::Status Gtsv(Builder* b, const Operation& op, absl::string_view target,
                    const std::vector<Value>& in);
  // custom_call @lapack_?gesdd_ffi, @lapack_?gesvd_ffi, @cusolver_gesvd_ffi
  // and @cusolver_gesvdj_ffi (and hipSOLVER's alike), as JAX lowers svd
  // (stablehlo_svd.cc).
  static bool IsSvdTarget(absl::string_view target);
  absl::Status Svd(Builder* b, const Operation& op, absl::string_view target,
                   const std::vector<Value>& in);
  // The singular values [..., k] of `a` [..., m, n] (its real part type,
  // descending) and its singular vectors as columns: U [..., m, m or k] and
  // V [..., n, n or k], `full` choosing.
  struct SvdParts {
    Value s, u, v;
  };
  SvdParts JacobiSvd(Builder* b, const Operation& op, const Value& a,
                     bool full);
  struct JacobiEmitter;
  // One-sided Jacobi rotations of the columns of `w` (shape `s`): the
  // rotated columns and the rotations' product V.
  std::pair<std::string, std::string> JacobiColumns(JacobiEmitter& e,
                                                    const std::string& w,
                                                    const Shape& s);
  // The most columns JacobiColumns takes: its loop counts steps in s32.
  static constexpr int64_t kMaxJacobiColumns = int64_t{1} << 20;
  // The eigenvalues [..., n] (real, in no order) and eigenvectors, as
  // columns, of the Hermitian `hermitian` (shape `s`, [..., n, n]).
  std::pair<std::string, std::string> JacobiEigen(Builder* b,
                                                  const Operation& op,
                                                  const std::string& hermitian,
                                                  const Shape& s);
  // The comparator of a sort of (key, value) pairs of these types by key,
  // the keys compared by `direction` (LT, GT).
  std::string KeyOrderComputation(PrimitiveType key, PrimitiveType value,
                                  absl::string_view direction);
  // The conjugate transpose of `a`'s last two dimensions.
  Value Adjoint(Builder* b, const Operation& op, const Value& a);
  absl::Status PivotsToPermutation(Builder* b, const Operation& op,
                                   absl::string_view target,
                                   const std::vector<Value>& in);
  // custom_call @ragged_all_to_all, as JAX lowers lax.ragged_all_to_all.
  absl::Status RaggedAllToAll(Builder* b, const Operation& op,
                              const std::vector<std::string>& names,
                              const Shape& shape);

  const mlir::Module& module_;
  absl::string_view text_;
  std::vector<Computation> computations_;
  absl::flat_hash_map<std::string, std::string> function_computations_;
  // AddComputation's, by element type.
  absl::flat_hash_map<PrimitiveType, std::string> add_computations_;
  // ScalarComputation's, by opcode and element type.
  absl::flat_hash_map<std::pair<std::string, PrimitiveType>, std::string>
      scalar_computations_;
  absl::flat_hash_set<std::string> functions_in_progress_;
  absl::flat_hash_set<const Attribute*> used_;
  absl::flat_hash_map<std::string, std::string> shared_regions_;
  // The ops QuantizedOp translates in place of quantized ones: lines,
  // regions and used_ point into them, so they live as long as this.
  std::deque<Operation> dequantized_ops_;
  // Whether a quantized value may exist (an argument's, or QuantizedOp's
  // result): until then no op's operands need looking at.
  bool quantized_values_ = false;
  int next_id_ = 0;
};

// Replaces HLO text's custom calls to the library calls the translator
// computes by calls of the computations it makes of them
// (stablehlo_library_calls.cc); errors point into `text`.
absl::Status ExpandLibraryCalls(Module* module, absl::string_view text);

}  // namespace pjrt::hlo::stablehlo_internal

#endif  // PJRT_HLO_STABLEHLO_INTERNAL_H_
