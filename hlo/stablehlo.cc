// Implementation notes.
//
// One Builder per HLO computation being written: the entry, each function
// (memoized: a function called from many places is one computation), and
// each region. A Builder maps MLIR value names to HLO instruction names and
// shapes; a region's builder falls back to its parent's values only through
// the captures computed before the region is built (FreeValues), which
// become the computation's parameters. Every emitted line remembers the op
// it came from, so that positions can be mapped back after the HLO parser
// has read the text.
#include "hlo/stablehlo.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "hlo/float8.h"
#include "hlo/literal.h"
#include "hlo/mlir_text.h"
#include "hlo/parser.h"
#include "hlo/verifier.h"

namespace pjrt::hlo {

std::optional<ProgramFormat> ProgramFormatFromName(absl::string_view name) {
  if (name.empty() || name == "auto") return ProgramFormat::kAuto;
  if (name == "hlo") return ProgramFormat::kHlo;
  if (name == "stablehlo" || name == "mlir") return ProgramFormat::kStableHlo;
  return std::nullopt;
}

ProgramFormat DetectProgramFormat(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.substr(i, 2) == "/*") {
      const size_t end = text.find("*/", i + 2);
      i = end == absl::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  absl::string_view rest = text.substr(std::min(i, text.size()));
  for (absl::string_view lead :
       {"module", "func.func", "#", "\"builtin.module\"", "sdy.mesh", "{-#"}) {
    if (absl::StartsWith(rest, lead)) {
      if (lead == "module" && rest.size() > 6 &&
          (absl::ascii_isalnum(rest[6]) || rest[6] == '_')) {
        continue;
      }
      return ProgramFormat::kStableHlo;
    }
  }
  return ProgramFormat::kHlo;
}

namespace {

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
std::string SanitizeName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                          c == '_' || c == '.' || c == '-'
                      ? c
                      : '_');
  }
  if (out.empty() || absl::ascii_isdigit(out[0])) out.insert(0, "_");
  return out;
}

std::string Braced(const std::vector<int64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

// A float's bits as HLO literal text.
std::string FloatText(double value, bool is_double) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return is_double ? absl::StrFormat("%.17g", value)
                   : absl::StrFormat("%.9g", value);
}

// Value of `bits` (width per the type) of a floating-point type.
double FloatFromBits(PrimitiveType type, uint64_t bits) {
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
    case PrimitiveType::kF8E4M3FN:
      return Float8E4M3FN::ToFloat(static_cast<uint8_t>(bits));
    case PrimitiveType::kF8E5M2:
      return Float8E5M2::ToFloat(static_cast<uint8_t>(bits));
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

 private:
  struct Builder {
    Computation computation;
    absl::flat_hash_map<std::string, Value> values;
    int depth = 0;
  };

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
  // maximum/minimum of complex numbers: the lexicographic order of (real,
  // imaginary), as StableHLO defines it.
  absl::Status ComplexMinMax(Builder* b, const Operation& op, bool maximum);
  absl::Status Chlo(Builder* b, const Operation& op, absl::string_view name);
  absl::StatusOr<std::string> ReplicaGroups(const Operation& op);

  const mlir::Module& module_;
  absl::string_view text_;
  std::vector<Computation> computations_;
  absl::flat_hash_map<std::string, std::string> function_computations_;
  absl::flat_hash_set<std::string> functions_in_progress_;
  absl::flat_hash_set<const Attribute*> used_;
  absl::flat_hash_map<std::string, std::string> shared_regions_;
  int next_id_ = 0;
};

// Attributes that carry no meaning for running the program, or whose only
// meaning is a hint pjrtd does not need.
bool IsIgnorableAttribute(absl::string_view name) {
  if (name.find('.') != absl::string_view::npos) return true;  // mhlo.*, jax.*
  static const auto* const kNames =
      new absl::flat_hash_set<std::string>{"precision_config",
                                           "precision",
                                           "algorithm",
                                           "result_accuracy",
                                           "indices_are_sorted",
                                           "unique_indices",
                                           "backend_config",
                                           "api_version",
                                           "has_side_effect",
                                           "operand_layouts",
                                           "result_layouts",
                                           "output_operand_aliases",
                                           "known_expanding_dimensions",
                                           "known_nonexpanding_dimensions",
                                           "called_computations",
                                           "composite_attributes",
                                           "version",
                                           "largest"};
  return kNames->contains(name);
}

absl::Status Translator::CheckAttributesUsed(const Operation& op) {
  for (const auto& [key, value] : op.attributes) {
    if (used_.contains(&value) || IsIgnorableAttribute(key)) continue;
    return ErrorAt(
        value.position, absl::StatusCode::kUnimplemented,
        absl::StrFormat("%s: attribute %s is not supported", op.name, key));
  }
  return absl::OkStatus();
}

void Translator::CollectFree(const Region& region,
                             absl::flat_hash_set<std::string>* defined,
                             std::vector<std::string>* free,
                             absl::flat_hash_set<std::string>* seen,
                             int depth) {
  if (depth > kMaxDepth) return;
  for (const auto& a : region.arguments) defined->insert(a.name);
  for (const Operation& op : region.operations) {
    for (const auto& use : op.operands) {
      std::string name = use.name;
      if (!defined->contains(name) && absl::EndsWith(name, "#0") &&
          defined->contains(name.substr(0, name.size() - 2))) {
        continue;
      }
      if (!defined->contains(name) && seen->insert(name).second) {
        free->push_back(name);
      }
    }
    for (const Region& nested : op.regions) {
      CollectFree(nested, defined, free, seen, depth + 1);
    }
    for (const auto& r : op.results) defined->insert(r);
  }
}

std::vector<std::string> Translator::FreeValues(const Region& region) {
  absl::flat_hash_set<std::string> defined, seen;
  std::vector<std::string> free;
  CollectFree(region, &defined, &free, &seen, 0);
  return free;
}

std::string Translator::Finish(Builder* b) {
  computations_.push_back(std::move(b->computation));
  return computations_.back().name;
}

absl::Status Translator::Ops(Builder* b, const std::vector<Operation>& ops,
                             std::vector<Value>* returned) {
  if (b->depth > kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "regions and calls nest more than ", kMaxDepth, " levels deep"));
  }
  bool done = false;
  for (const Operation& op : ops) {
    if (done) return Invalid(op, "follows the region's return");
    if (op.name == "func.return") {
      PJRT_ASSIGN_OR_RETURN(*returned, Operands(b, op));
      done = true;
      continue;
    }
    PJRT_RETURN_IF_ERROR(Op(b, op));
    PJRT_RETURN_IF_ERROR(CheckAttributesUsed(op));
  }
  if (!done) {
    return absl::InvalidArgumentError(
        "a function or region ends without a return");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Translator::ClosedRegion(Builder* parent,
                                                     const Operation& op,
                                                     const Region& region,
                                                     absl::string_view what) {
  // A reduce written `applies stablehlo.add` gets its region from the
  // reader; every such region of one op and element type is the same
  // computation, built once.
  std::string shared_key;
  if (!region.arguments.empty() &&
      absl::StartsWith(region.arguments[0].name, "%__reduce_") &&
      !region.operations.empty()) {
    shared_key = region.operations[0].name;
    for (const auto& a : region.arguments) {
      absl::StrAppend(&shared_key, " ", a.type.ToString());
    }
    auto it = shared_regions_.find(shared_key);
    if (it != shared_regions_.end()) return it->second;
  }
  std::vector<std::string> free = FreeValues(region);
  for (const std::string& name : free) {
    if (name.rfind("%__", 0) == 0) continue;
    return Unsupported(op, absl::StrCat("its ", what, " region uses ", name,
                                        ", defined outside it; such a region "
                                        "may use only its arguments"));
  }
  Builder b;
  b.depth = parent->depth + 1;
  b.computation.name = NewName(absl::StrCat("region_", what));
  for (size_t i = 0; i < region.arguments.size(); ++i) {
    const auto& a = region.arguments[i];
    b.values[a.name] = Value{
        EmitParameter(&b, a.type, static_cast<int64_t>(i), a.position), a.type};
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, region.operations, &returned));
  if (returned.empty()) {
    return Invalid(op, absl::StrCat("its ", what, " region returns nothing"));
  }
  MarkRoot(&b, ReturnValue(&b, &op, returned, /*tuple=*/false));
  std::string name = Finish(&b);
  if (!shared_key.empty()) shared_regions_[shared_key] = name;
  return name;
}

absl::StatusOr<std::string> Translator::TupleRegion(
    Builder* parent, const Operation& op, const Region& region,
    absl::string_view what, const std::vector<Value>& captured,
    const std::vector<std::string>& capture_names,
    const std::vector<Shape>& argument_shapes, bool pass_captures_through) {
  Builder b;
  b.depth = parent->depth + 1;
  b.computation.name = NewName(absl::StrCat("region_", what));
  std::vector<Shape> shapes = argument_shapes;
  for (const Value& v : captured) shapes.push_back(v.shape);
  const Shape tuple = Shape::Tuple(shapes);
  Value param{EmitLine(&b, &op, tuple, "parameter", "0"), tuple};
  if (region.arguments.size() != argument_shapes.size()) {
    return Invalid(op, absl::StrFormat("its %s region takes %d argument(s); "
                                       "it must take %d",
                                       what, region.arguments.size(),
                                       argument_shapes.size()));
  }
  std::vector<Value> elements;
  for (size_t i = 0; i < shapes.size(); ++i) {
    elements.push_back(
        Value{EmitGte(&b, &op, param, static_cast<int>(i)), shapes[i]});
  }
  for (size_t i = 0; i < region.arguments.size(); ++i) {
    b.values[region.arguments[i].name] = elements[i];
  }
  for (size_t i = 0; i < capture_names.size(); ++i) {
    b.values[capture_names[i]] = elements[argument_shapes.size() + i];
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, region.operations, &returned));
  if (pass_captures_through) {
    for (size_t i = argument_shapes.size(); i < elements.size(); ++i) {
      returned.push_back(elements[i]);
    }
  }
  MarkRoot(&b, ReturnValue(&b, &op, returned, pass_captures_through));
  return Finish(&b);
}

absl::StatusOr<std::string> Translator::FunctionComputation(
    const std::string& symbol, const Operation& at, int depth) {
  auto done = function_computations_.find(symbol);
  if (done != function_computations_.end()) return done->second;
  if (depth > kMaxDepth) {
    return Invalid(at, absl::StrCat("calls nest more than ", kMaxDepth,
                                    " functions deep"));
  }
  const mlir::Function* f = nullptr;
  for (const auto& candidate : module_.functions) {
    if (candidate.name == symbol) f = &candidate;
  }
  if (f == nullptr) {
    return Invalid(at, absl::StrCat("calls @", symbol,
                                    ", which the program does not define"));
  }
  if (!functions_in_progress_.insert(symbol).second) {
    return Unsupported(at, absl::StrCat("@", symbol,
                                        " calls itself; recursion is not "
                                        "supported"));
  }
  Builder b;
  b.depth = depth;
  b.computation.name = NewName(symbol);
  for (size_t i = 0; i < f->arguments.size(); ++i) {
    const auto& a = f->arguments[i];
    b.values[a.name] = Value{
        EmitParameter(&b, a.type, static_cast<int64_t>(i), a.position), a.type};
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, f->body.operations, &returned));
  PJRT_RETURN_IF_ERROR(CheckReturned(*f, returned));
  MarkRoot(&b, ReturnValue(&b, nullptr, returned, /*tuple=*/false));
  functions_in_progress_.erase(symbol);
  std::string name = Finish(&b);
  function_computations_[symbol] = name;
  return name;
}

absl::StatusOr<std::string> Translator::LiteralText(const Operation& op,
                                                    const Attribute& value,
                                                    const Shape& shape,
                                                    bool* splat) {
  const PrimitiveType type = shape.element_type();
  if (value.dense_resource) {
    return Unsupported(op, absl::StrCat("dense_resource<", value.text,
                                        "> constants are not supported; "
                                        "print the program with its "
                                        "constants in full"));
  }
  if (value.kind != AttrKind::kDense) {
    return Invalid(op, "the value must be dense<...>");
  }
  if (!shape.IsArray() && !IsParsableArrayType(type)) {
    return Unsupported(
        op, absl::StrCat("constants of type ", mlir::MlirTypeString(shape),
                         " are not supported"));
  }
  const bool complex = IsComplex(type);
  const int64_t count = shape.ElementCount();
  const PrimitiveType part = type == PrimitiveType::kC64 ? PrimitiveType::kF32
                             : type == PrimitiveType::kC128
                                 ? PrimitiveType::kF64
                                 : type;
  const bool is_float = IsFloatingPoint(part);
  const bool wide = part == PrimitiveType::kF64;
  const int parts = complex ? 2 : 1;
  // Scalars are read one at a time, from the text or the hex bytes, so that
  // a large constant costs its HLO text and no more.
  int64_t scalar_count = 0;
  std::function<absl::StatusOr<std::string>(int64_t)> scalar;
  if (value.dense_hex) {
    const int bits = type == PrimitiveType::kPred ? 8 : BitWidth(part);
    const int bytes = std::max(1, bits / 8);
    const std::string& hex = value.hex;
    if (hex.size() % 2 != 0) return Invalid(op, "odd number of hex digits");
    const int64_t total = static_cast<int64_t>(hex.size() / 2);
    const int64_t per = int64_t{bytes} * parts;
    if (total != per && total != per * count) {
      return Invalid(op, absl::StrFormat("the hex value holds %d bytes; %s "
                                         "needs %d (or %d for a splat)",
                                         total, mlir::MlirTypeString(shape),
                                         per * count, per));
    }
    for (char h : hex) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(h))) {
        return Invalid(op,
                       "the hex value holds a character that is not a "
                       "hexadecimal digit");
      }
    }
    scalar_count = total / bytes;
    scalar = [&hex, bytes, bits, type, part, is_float,
              wide](int64_t e) -> absl::StatusOr<std::string> {
      uint64_t pattern = 0;
      for (int k = 0; k < bytes; ++k) {
        int v = 0;
        for (int d = 0; d < 2; ++d) {
          const char h = hex[2 * (e * bytes + k) + d];
          v = v * 16 + (absl::ascii_isdigit(h)
                            ? h - '0'
                            : absl::ascii_tolower(h) - 'a' + 10);
        }
        pattern |= static_cast<uint64_t>(v) << (8 * k);
      }
      if (is_float) return FloatText(FloatFromBits(part, pattern), wide);
      if (type == PrimitiveType::kPred)
        return std::string(pattern ? "true" : "false");
      if (IsSignedInteger(type) && bits < 64 && ((pattern >> (bits - 1)) & 1)) {
        return absl::StrCat(
            static_cast<int64_t>(pattern | (~uint64_t{0} << bits)));
      }
      return absl::StrCat(pattern);
    };
  } else {
    if (value.dense_complex && !complex) {
      return Invalid(
          op, absl::StrCat("complex values for ", mlir::MlirTypeString(shape)));
    }
    // Real values for a complex type have zero imaginary parts.
    const bool widen = complex && !value.dense_complex;
    scalar_count = static_cast<int64_t>(value.scalars.size()) * (widen ? 2 : 1);
    scalar = [&value, &op, this, widen, type, is_float, part,
              wide](int64_t k) -> absl::StatusOr<std::string> {
      if (widen && k % 2 == 1) return std::string("0");
      const absl::string_view s = value.scalars[widen ? k / 2 : k];
      if (s == "true" || s == "false") {
        if (type == PrimitiveType::kPred) return std::string(s);
        return std::string(s == "true" ? "1" : "0");
      }
      absl::string_view digits = s;
      const bool negative = absl::ConsumePrefix(&digits, "-");
      if (absl::StartsWith(digits, "0x") || absl::StartsWith(digits, "0X")) {
        uint64_t pattern = 0;
        if (!absl::SimpleHexAtoi(digits, &pattern)) {
          return Invalid(op, absl::StrCat("cannot read ", s));
        }
        if (is_float) {
          const double v = FloatFromBits(part, pattern);
          return FloatText(negative ? -v : v, wide);
        }
        return absl::StrCat(negative ? "-" : "", pattern);
      }
      return std::string(s);
    };
  }
  const int64_t n = scalar_count / parts;
  if (n != 1 && n != count) {
    return Invalid(op, absl::StrFormat("the value has %d element(s); %s has %d",
                                       n, mlir::MlirTypeString(shape), count));
  }
  const auto element = [&](int64_t i) -> absl::StatusOr<std::string> {
    PJRT_ASSIGN_OR_RETURN(std::string first, scalar(parts * i));
    if (!complex) return first;
    PJRT_ASSIGN_OR_RETURN(std::string second, scalar(parts * i + 1));
    return absl::StrCat("(", first, ", ", second, ")");
  };
  if (count == 0) {
    // No elements: a broadcast of a zero scalar, however large the other
    // dimensions (HLO text would spell out their braces).
    *splat = true;
    return std::string(type == PrimitiveType::kPred ? "false"
                       : complex                    ? "(0, 0)"
                                                    : "0");
  }
  *splat = n == 1 && count != 1;
  const int rank = shape.rank();
  if (*splat || rank == 0) return element(0);
  std::string out;
  // One level of braces per dimension, opened and closed as the row-major
  // index rolls over.
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int open = rank;
    for (int d = rank - 1; d >= 0 && index[d] == 0; --d) open = d;
    if (i > 0) out += ", ";
    out.append(static_cast<size_t>(rank - open), '{');
    PJRT_ASSIGN_OR_RETURN(std::string text, element(i));
    out += text;
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape.dimensions(d)) break;
      index[d] = 0;
      out += "}";
    }
  }
  return out;
}

absl::Status Translator::Constant(Builder* b, const Operation& op) {
  PJRT_ASSIGN_OR_RETURN(const Attribute* value, RequireAttr(op, {"value"}));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  if (shape.IsTuple() || shape.IsToken()) {
    return Unsupported(op, "tuple and token constants are not supported");
  }
  bool splat = false;
  PJRT_ASSIGN_OR_RETURN(std::string literal,
                        LiteralText(op, *value, shape, &splat));
  if (splat) {
    const std::string scalar =
        EmitLine(b, &op, Shape(shape.element_type(), {}), "constant", literal);
    return Define(
        b, op,
        {Value{Emit(b, &op, shape, "broadcast", {scalar}, "dimensions={}"),
               shape}});
  }
  return Define(b, op,
                {Value{EmitLine(b, &op, shape, "constant", literal), shape}});
}

absl::Status Translator::BroadcastInDim(Builder* b, const Operation& op,
                                        Value operand, const Shape& result,
                                        const std::vector<int64_t>& dims) {
  if (static_cast<int>(dims.size()) != operand.shape.rank()) {
    return Invalid(
        op, absl::StrFormat("broadcast_dimensions has %d entries; "
                            "the operand %s has rank %d",
                            dims.size(), mlir::MlirTypeString(operand.shape),
                            operand.shape.rank()));
  }
  // HLO's broadcast keeps each operand dimension's size; StableHLO's also
  // expands size-1 dimensions, which are reshaped away first.
  std::vector<int64_t> kept_dims, kept_sizes;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= result.rank()) {
      return Invalid(op,
                     absl::StrFormat("broadcast dimension %d is out of "
                                     "range for the result %s",
                                     dims[i], mlir::MlirTypeString(result)));
    }
    const int64_t size = operand.shape.dimensions(i);
    if (size == 1 && result.dimensions(dims[i]) != 1) continue;
    kept_dims.push_back(dims[i]);
    kept_sizes.push_back(size);
  }
  if (kept_dims.size() != dims.size()) {
    const Shape reshaped(operand.shape.element_type(), kept_sizes);
    operand =
        Value{Emit(b, &op, reshaped, "reshape", {operand.name}), reshaped};
  }
  return Define(b, op,
                {Value{Emit(b, &op, result, "broadcast", {operand.name},
                            absl::StrCat("dimensions=", Braced(kept_dims))),
                       result}});
}

std::string Translator::WindowText(const std::vector<int64_t>& size,
                                   const std::vector<int64_t>& stride,
                                   const std::vector<std::vector<int64_t>>& pad,
                                   const std::vector<int64_t>& lhs_dilate,
                                   const std::vector<int64_t>& rhs_dilate,
                                   const std::vector<int64_t>& reversal) {
  if (size.empty()) return "";
  std::string out = absl::StrCat("window={size=", absl::StrJoin(size, "x"));
  if (!stride.empty())
    absl::StrAppend(&out, " stride=", absl::StrJoin(stride, "x"));
  if (!pad.empty()) {
    std::vector<std::string> parts;
    for (const auto& p : pad) {
      parts.push_back(
          absl::StrCat(p.size() > 0 ? p[0] : 0, "_", p.size() > 1 ? p[1] : 0));
    }
    absl::StrAppend(&out, " pad=", absl::StrJoin(parts, "x"));
  }
  if (!lhs_dilate.empty()) {
    absl::StrAppend(&out, " lhs_dilate=", absl::StrJoin(lhs_dilate, "x"));
  }
  if (!rhs_dilate.empty()) {
    absl::StrAppend(&out, " rhs_dilate=", absl::StrJoin(rhs_dilate, "x"));
  }
  if (!reversal.empty()) {
    absl::StrAppend(&out, " rhs_reversal=", absl::StrJoin(reversal, "x"));
  }
  out += "}";
  return out;
}

absl::Status Translator::Convolution(Builder* b, const Operation& op) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape result, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* numbers,
                        RequireAttr(op, {"dimension_numbers"}));
  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  std::string labels[3];
  std::vector<int64_t> kernel_spatial;
  {
    std::string body = numbers->body;
    std::vector<std::string> parts;
    size_t x = body.find("]x[");
    size_t arrow = body.find("->");
    if (x == std::string::npos || arrow == std::string::npos) {
      return ErrorAt(numbers->position, absl::StatusCode::kUnimplemented,
                     absl::StrCat(op.name, ": dimension numbers '", body,
                                  "' are not in the [b, 0, 1, f]x[0, 1, i, "
                                  "o]->[b, 0, 1, f] form"));
    }
    parts = {body.substr(0, x + 1), body.substr(x + 2, arrow - x - 2),
             body.substr(arrow + 2)};
    for (int p = 0; p < 3; ++p) {
      for (char c : parts[p]) {
        if (c == '[' || c == ']' || c == ',' || c == ' ') continue;
        labels[p].push_back(c);
      }
    }
    // Spatial sizes of the kernel, in spatial order.
    int spatial = 0;
    for (char c : labels[1]) spatial += absl::ascii_isdigit(c) ? 1 : 0;
    kernel_spatial.assign(spatial, 1);
    if (static_cast<int>(labels[1].size()) != in[1].shape.rank()) {
      return Invalid(op, absl::StrFormat("the kernel labels %s do not match "
                                         "the kernel's rank %d",
                                         labels[1], in[1].shape.rank()));
    }
    for (size_t i = 0; i < labels[1].size(); ++i) {
      const char c = labels[1][i];
      if (absl::ascii_isdigit(c) && c - '0' < spatial) {
        kernel_spatial[c - '0'] = in[1].shape.dimensions(i);
      }
    }
  }
  const size_t s = kernel_spatial.size();
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                        Ints(op, {"window_strides"}));
  std::vector<std::vector<int64_t>> pad;
  if (const Attribute* p = Attr(op, {"padding"})) {
    PJRT_ASSIGN_OR_RETURN(pad, Matrix(op, *p, "padding"));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> lhs, Ints(op, {"lhs_dilation"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> rhs, Ints(op, {"rhs_dilation"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> reversal,
                        Ints(op, {"window_reversal"}));
  for (auto* v : {&stride, &lhs, &rhs, &reversal}) {
    if (!v->empty() && v->size() != s) {
      return Invalid(op, absl::StrFormat("a window attribute has %d entries "
                                         "for %d spatial dimensions",
                                         v->size(), s));
    }
  }
  if (!pad.empty() && pad.size() != s) {
    return Invalid(op, absl::StrFormat("padding has %d rows for %d spatial "
                                       "dimensions",
                                       pad.size(), s));
  }
  PJRT_ASSIGN_OR_RETURN(int64_t features, Int(op, {"feature_group_count"}, 1));
  PJRT_ASSIGN_OR_RETURN(int64_t batches, Int(op, {"batch_group_count"}, 1));
  std::string attributes =
      WindowText(kernel_spatial, stride, pad, lhs, rhs, reversal);
  if (!attributes.empty()) attributes += ", ";
  absl::StrAppend(&attributes, "dim_labels=", labels[0], "_", labels[1], "->",
                  labels[2]);
  if (features != 1) {
    absl::StrAppend(&attributes, ", feature_group_count=", features);
  }
  if (batches != 1)
    absl::StrAppend(&attributes, ", batch_group_count=", batches);
  return Define(b, op,
                {Value{Emit(b, &op, result, "convolution",
                            {in[0].name, in[1].name}, attributes),
                       result}});
}

absl::Status Translator::AllToAll(Builder* b, const Operation& op) {
  PJRT_ASSIGN_OR_RETURN(int64_t split, Int(op, {"split_dimension"}, {}));
  PJRT_ASSIGN_OR_RETURN(int64_t concat, Int(op, {"concat_dimension"}, {}));
  PJRT_ASSIGN_OR_RETURN(int64_t count, Int(op, {"split_count"}, {}));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.empty() || op.result_types.size() != in.size()) {
    return Invalid(op, "needs one result per operand");
  }
  PJRT_ASSIGN_OR_RETURN(std::string tail, ReplicaGroups(op));
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value()) absl::StrAppend(&tail, ", channel_id=", *channel);
  // Each operand is an all-to-all of its own. HLO's array all-to-all splits
  // and concatenates one dimension; with two, the split dimension is first
  // made [count, size / count], the all-to-all exchanges along the count
  // axis, and a transpose and a reshape move what arrived into the concat
  // dimension, in the order of the senders.
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& shape = in[i].shape;
    const Shape& result = op.result_types[i];
    const int rank = shape.rank();
    if (split < 0 || split >= rank || concat < 0 || concat >= rank ||
        count < 1 || shape.dimensions(split) % count != 0) {
      return Invalid(
          op,
          absl::StrFormat("split_dimension %d, concat_dimension %d and "
                          "split_count %d do not fit the operand %s",
                          split, concat, count, mlir::MlirTypeString(shape)));
    }
    if (split == concat) {
      results.push_back(
          Value{Emit(b, &op, result, "all-to-all", {in[i].name},
                     absl::StrCat("dimensions={", split, "}, ", tail)),
                result});
      continue;
    }
    std::vector<int64_t> dims(shape.dimensions().begin(),
                              shape.dimensions().end());
    std::vector<int64_t> y = dims;
    y[split] = count;
    y.insert(y.begin() + split + 1, dims[split] / count);
    const Shape split_shape(shape.element_type(), y);
    const std::string reshaped =
        Emit(b, &op, split_shape, "reshape", {in[i].name});
    const std::string exchanged =
        Emit(b, &op, split_shape, "all-to-all", {reshaped},
             absl::StrCat("dimensions={", split, "}, ", tail));
    // The count axis goes just before the concat dimension (numbered in y).
    const int64_t c = concat < split ? concat : concat + 1;
    std::vector<int64_t> order;
    for (int64_t a = 0; a < static_cast<int64_t>(y.size()); ++a) {
      if (a == split) continue;
      if (a == c) order.push_back(split);
      order.push_back(a);
    }
    std::vector<int64_t> t;
    for (int64_t a : order) t.push_back(y[a]);
    const Shape transposed_shape(shape.element_type(), t);
    const std::string transposed =
        Emit(b, &op, transposed_shape, "transpose", {exchanged},
             absl::StrCat("dimensions=", Braced(order)));
    results.push_back(
        Value{Emit(b, &op, result, "reshape", {transposed}), result});
  }
  return Define(b, op, std::move(results));
}

absl::Status Translator::ComplexMinMax(Builder* b, const Operation& op,
                                       bool maximum) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  const PrimitiveType part = shape.element_type() == PrimitiveType::kC64
                                 ? PrimitiveType::kF32
                                 : PrimitiveType::kF64;
  std::vector<int64_t> dims(shape.dimensions().begin(),
                            shape.dimensions().end());
  const Shape real(part, dims), pred(PrimitiveType::kPred, dims);
  const auto compare = [&](const std::string& x, const std::string& y,
                           absl::string_view direction) {
    return Emit(b, &op, pred, "compare", {x, y},
                absl::StrCat("direction=", direction));
  };
  const std::string ar = Emit(b, &op, real, "real", {in[0].name});
  const std::string br = Emit(b, &op, real, "real", {in[1].name});
  const std::string ai = Emit(b, &op, real, "imag", {in[0].name});
  const std::string bi = Emit(b, &op, real, "imag", {in[1].name});
  // The first operand wins when its real part is beyond the second's, or
  // equal to it with the imaginary part beyond or equal.
  const std::string beyond = compare(ar, br, maximum ? "GT" : "LT");
  const std::string tie =
      Emit(b, &op, pred, "and",
           {compare(ar, br, "EQ"), compare(ai, bi, maximum ? "GE" : "LE")});
  const std::string pick = Emit(b, &op, pred, "or", {beyond, tie});
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "select", {pick, in[0].name, in[1].name}),
             shape}});
}

absl::StatusOr<std::string> Translator::ReplicaGroups(const Operation& op) {
  const Attribute* a = Attr(op, {"replica_groups"});
  if (a == nullptr) return std::string("replica_groups={}");
  PJRT_ASSIGN_OR_RETURN(auto rows, Matrix(op, *a, "replica_groups"));
  std::vector<std::string> groups;
  for (const auto& row : rows) {
    std::vector<int64_t> ids;
    for (int64_t id : row) {
      if (id >= 0) ids.push_back(id);  // -1 pads ragged groups
    }
    groups.push_back(Braced(ids));
  }
  return absl::StrCat("replica_groups={", absl::StrJoin(groups, ","), "}");
}

absl::Status Translator::Collective(Builder* b, const Operation& op,
                                    absl::string_view opcode,
                                    std::string attributes) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  PJRT_ASSIGN_OR_RETURN(std::string groups, ReplicaGroups(op));
  std::vector<std::string> parts;
  if (!attributes.empty()) parts.push_back(attributes);
  parts.push_back(groups);
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value())
    parts.push_back(absl::StrCat("channel_id=", *channel));
  if (const Attribute* global = Attr(op, {"use_global_device_ids"})) {
    if (global->kind == AttrKind::kUnit || global->boolean) {
      parts.push_back("use_global_device_ids=true");
    }
  }
  if (!op.regions.empty()) {
    PJRT_ASSIGN_OR_RETURN(std::string reducer,
                          ClosedRegion(b, op, op.regions[0], "reducer"));
    parts.push_back(absl::StrCat("to_apply=%", reducer));
  }
  const std::vector<std::string> names = Names(in);
  return DefineFrom(
      b, op,
      Value{Emit(b, &op, shape, opcode, names, absl::StrJoin(parts, ", ")),
            shape});
}

absl::Status Translator::While(Builder* b, const Operation& op) {
  if (op.regions.size() != 2) return Invalid(op, "needs cond and body regions");
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  // Values either region uses from outside become loop-carried elements
  // that the body passes through unchanged.
  std::vector<std::string> capture_names;
  {
    absl::flat_hash_set<std::string> seen;
    for (const Region& r : op.regions) {
      for (std::string& name : FreeValues(r)) {
        if (seen.insert(name).second) capture_names.push_back(std::move(name));
      }
    }
  }
  std::vector<Value> captured;
  for (const std::string& name : capture_names) {
    PJRT_ASSIGN_OR_RETURN(Value v,
                          Lookup(b, mlir::ValueUse{name, op.position}));
    captured.push_back(std::move(v));
  }
  std::vector<Shape> shapes;
  std::vector<std::string> names;
  for (const Value& v : in) {
    shapes.push_back(v.shape);
    names.push_back(v.name);
  }
  std::vector<Shape> all = shapes;
  for (const Value& v : captured) {
    all.push_back(v.shape);
    names.push_back(v.name);
  }
  const Shape tuple = Shape::Tuple(all);
  PJRT_ASSIGN_OR_RETURN(
      std::string cond,
      TupleRegion(b, op, op.regions[0], "cond", captured, capture_names, shapes,
                  /*pass_captures_through=*/false));
  PJRT_ASSIGN_OR_RETURN(
      std::string body,
      TupleRegion(b, op, op.regions[1], "body", captured, capture_names, shapes,
                  /*pass_captures_through=*/true));
  const std::string init = Emit(b, &op, tuple, "tuple", names);
  Value loop{Emit(b, &op, tuple, "while", {init},
                  absl::StrCat("condition=%", cond, ", body=%", body)),
             tuple};
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    results.push_back(
        Value{EmitGte(b, &op, loop, static_cast<int>(i)), shapes[i]});
  }
  return Define(b, op, std::move(results));
}

absl::Status Translator::Conditional(Builder* b, const Operation& op) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  const bool is_if = op.name == "stablehlo.if";
  if (is_if && op.regions.size() != 2) {
    return Invalid(op, "needs a true and a false region");
  }
  if (op.regions.empty()) return Invalid(op, "needs at least one branch");
  std::vector<std::string> operands = {in[0].name};
  std::vector<std::string> branches;
  for (size_t r = 0; r < op.regions.size(); ++r) {
    std::vector<std::string> capture_names = FreeValues(op.regions[r]);
    std::vector<Value> captured;
    std::vector<Shape> shapes;
    std::vector<std::string> names;
    for (const std::string& name : capture_names) {
      PJRT_ASSIGN_OR_RETURN(Value v,
                            Lookup(b, mlir::ValueUse{name, op.position}));
      shapes.push_back(v.shape);
      names.push_back(v.name);
      captured.push_back(std::move(v));
    }
    operands.push_back(Emit(b, &op, Shape::Tuple(shapes), "tuple", names));
    PJRT_ASSIGN_OR_RETURN(
        std::string branch,
        TupleRegion(b, op, op.regions[r], "branch", captured, capture_names, {},
                    /*pass_captures_through=*/false));
    branches.push_back(absl::StrCat("%", branch));
  }
  std::string attributes =
      is_if ? absl::StrCat("true_computation=", branches[0],
                           ", false_computation=", branches[1])
            : absl::StrCat("branch_computations={",
                           absl::StrJoin(branches, ", "), "}");
  return DefineFrom(
      b, op,
      Value{Emit(b, &op, shape, "conditional", operands, attributes), shape});
}

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

absl::StatusOr<StableHloTranslation> Translator::Run() {
  // The entry: @main, else the last public function.
  const mlir::Function* entry = nullptr;
  for (const auto& f : module_.functions) {
    if (f.name == "main") entry = &f;
  }
  if (entry == nullptr) {
    for (const auto& f : module_.functions) {
      if (f.visibility == "public") entry = &f;
    }
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        "the program has no public function to run: name the entry @main");
  }
  Builder b;
  b.computation.name = "main";
  b.computation.entry = true;
  function_computations_[entry->name] = "main";
  functions_in_progress_.insert(entry->name);
  next_id_ = 0;
  for (size_t i = 0; i < entry->arguments.size(); ++i) {
    const auto& a = entry->arguments[i];
    const std::string name = absl::StrCat("Arg_", i, ".", next_id_++);
    b.computation.lines.push_back(
        Line{absl::StrCat("  %", name, " = ", a.type.ToString(), " parameter(",
                          i, ")"),
             nullptr, a.position});
    b.values[a.name] = Value{name, a.type};
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, entry->body.operations, &returned));
  PJRT_RETURN_IF_ERROR(CheckReturned(*entry, returned));
  MarkRoot(&b, ReturnValue(&b, nullptr, returned, /*tuple=*/false));
  Finish(&b);

  // Module header: name, replicas, partitions, donations.
  std::string header = absl::StrCat(
      "HloModule ",
      SanitizeName(module_.name.empty() ? entry->name : module_.name));
  for (const auto& [key, attr] : module_.attributes) {
    int64_t v = 0;
    if (attr.kind != AttrKind::kInt || !absl::SimpleAtoi(attr.text, &v))
      continue;
    if (key == "mhlo.num_replicas")
      absl::StrAppend(&header, ", replica_count=", v);
    if (key == "mhlo.num_partitions") {
      absl::StrAppend(&header, ", num_partitions=", v);
    }
  }
  std::vector<std::string> aliases;
  for (size_t i = 0; i < entry->arguments.size(); ++i) {
    const Attribute* alias = mlir::FindAttribute(entry->arguments[i].attributes,
                                                 "tf.aliasing_output");
    if (alias == nullptr) continue;
    int64_t output = 0;
    if (alias->kind != AttrKind::kInt ||
        !absl::SimpleAtoi(alias->text, &output) || output < 0 ||
        output >= static_cast<int64_t>(entry->result_types.size())) {
      return ErrorAt(alias->position, absl::StatusCode::kInvalidArgument,
                     absl::StrFormat("tf.aliasing_output of argument %d names "
                                     "result %s; @%s has %d result(s)",
                                     i, alias->text, entry->name,
                                     entry->result_types.size()));
    }
    aliases.push_back(absl::StrFormat(
        "%s: (%d, {}, may-alias)",
        entry->result_types.size() == 1 ? "{}" : absl::StrCat("{", output, "}"),
        i));
  }
  if (!aliases.empty()) {
    absl::StrAppend(&header, ", input_output_alias={ ",
                    absl::StrJoin(aliases, ", "), " }");
  }

  StableHloTranslation out;
  mlir::LocationResolver locations(module_);
  out.hlo_text = header + "\n";
  out.origins.push_back(SourceOrigin{1, 1, ""});
  const auto add_line = [&](const std::string& text, const Line* line) {
    absl::StrAppend(&out.hlo_text, text, "\n");
    SourceOrigin origin;
    if (line != nullptr) {
      origin.line = line->position.line;
      origin.column = line->position.column;
      if (line->origin != nullptr && !line->origin->location.empty()) {
        origin.location = locations.Resolve(line->origin->location);
      }
    }
    out.origins.push_back(std::move(origin));
  };
  // Callees first; the entry (finished last) last.
  for (const Computation& c : computations_) {
    add_line("", nullptr);
    add_line(absl::StrCat(c.entry ? "ENTRY " : "", "%", c.name, " {"), nullptr);
    for (const Line& line : c.lines) add_line(line.text, &line);
    add_line("}", nullptr);
  }
  return out;
}

}  // namespace

absl::StatusOr<StableHloTranslation> TranslateStableHlo(
    absl::string_view mlir_text) {
  PJRT_ASSIGN_OR_RETURN(mlir::Module module, mlir::ParseMlirModule(mlir_text));
  Translator translator(module, mlir_text);
  return translator.Run();
}

absl::StatusOr<std::unique_ptr<Module>> ParseAndVerifyProgram(
    absl::string_view text, ProgramFormat format) {
  if (format == ProgramFormat::kAuto) format = DetectProgramFormat(text);
  if (format == ProgramFormat::kHlo) {
    PJRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, ParseHloModule(text));
    PJRT_RETURN_IF_ERROR(VerifyModule(*module, text));
    return module;
  }
  PJRT_ASSIGN_OR_RETURN(StableHloTranslation translation,
                        TranslateStableHlo(text));
  const auto origin_of = [&](int hlo_line) -> const SourceOrigin* {
    if (hlo_line < 1 ||
        hlo_line > static_cast<int>(translation.origins.size())) {
      return nullptr;
    }
    return &translation.origins[hlo_line - 1];
  };
  absl::StatusOr<std::unique_ptr<Module>> parsed =
      ParseHloModule(translation.hlo_text);
  if (!parsed.ok()) {
    // A message about the generated text: point at the op it came from.
    const absl::string_view message = parsed.status().message();
    int line = 0;
    absl::string_view what = message;
    if (absl::ConsumePrefix(&what, "line ")) {
      const size_t comma = what.find(',');
      const size_t colon = what.find(": ");
      if (comma != absl::string_view::npos &&
          colon != absl::string_view::npos &&
          absl::SimpleAtoi(what.substr(0, comma), &line)) {
        what = what.substr(colon + 2);
        what = what.substr(0, what.find('\n'));
      }
    }
    const SourceOrigin* origin = origin_of(line);
    if (origin == nullptr || origin->line == 0) return parsed.status();
    std::string text_message(what);
    if (!origin->location.empty())
      absl::StrAppend(&text_message, " (at ", origin->location, ")");
    return absl::Status(
        parsed.status().code(),
        FormatErrorAt(text, origin->line, origin->column, text_message));
  }
  std::unique_ptr<Module> module = *std::move(parsed);
  for (const auto& c : module->computations()) {
    for (const auto& inst : c->instructions()) {
      const SourceOrigin* origin = origin_of(inst->line());
      if (origin == nullptr || origin->line == 0) {
        inst->set_position(0, 0);
        continue;
      }
      inst->set_position(origin->line, origin->column);
      inst->set_source_location(origin->location);
    }
  }
  PJRT_RETURN_IF_ERROR(VerifyModule(*module, text));
  return module;
}

}  // namespace pjrt::hlo
