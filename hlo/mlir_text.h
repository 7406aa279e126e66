// The MLIR textual form, as far as StableHLO programs use it: a syntax tree
// of functions, operations, regions, attributes and types, read from either
// the pretty syntax that `jax.jit(f).lower(x).as_text()` prints or MLIR's
// generic syntax ("stablehlo.add"(%0, %1) : (...) -> ...). hlo/stablehlo.h
// turns the tree into HLO.
//
// The reader knows the custom syntax of every StableHLO op that has one
// (compare, constant, iota, slice, reduce, while, convolution, custom_call,
// composite, get_tuple_element, return, call) and reads every other op's
// pretty form as `operands, key = value, ... {attributes} : types`. Pretty
// keys are kept as written (`dims`, `sizes`, `contracting_dims`); the
// converter knows both spellings.
//
// Nothing here trusts the input: nesting of regions, attributes, locations
// and types is capped at kMaxMlirNesting levels, and every error is
// INVALID_ARGUMENT "line L, column C: ..." with the line and a caret.
#ifndef PJRT_HLO_MLIR_TEXT_H_
#define PJRT_HLO_MLIR_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/shape.h"

namespace pjrt::hlo::mlir {

inline constexpr int kMaxMlirNesting = 256;

struct Position {
  int line = 0;
  int column = 0;
};

struct Attribute;
struct NamedAttribute;
// `name = value` pairs in the order written (a vector of an incomplete
// type, which std::vector allows; std::pair would not be).
using NamedAttributes = std::vector<NamedAttribute>;

struct Attribute {
  enum class Kind {
    kUnit,     // a name without a value
    kBool,     // true, false
    kInt,      // 3, -1, 3 : i64 (text holds the digits)
    kFloat,    // 1.5, 0x7FC00000 : f32
    kString,   // "..." (text holds the unescaped bytes)
    kWord,     // a bare keyword: DEFAULT, FFT, e5m10, b (pretty syntax)
    kSymbol,   // @name (text holds the name)
    kArray,    // [a, b], array<i64: 1, 2> (elements are kInt/kBool)
    kDense,    // dense<...> : type; dense_resource<...>
    kDict,     // {a = 1, b}
    kType,     // a type used as an attribute
    kDialect,  // #dialect.name<body> or #dialect<body>
  };
  Kind kind = Kind::kUnit;
  Position position;
  bool boolean = false;
  std::string text;
  std::vector<Attribute> elements;  // kArray
  NamedAttributes fields;           // kDict; kDialect's key = value params
  std::string body;                 // kDialect: the text between < and >
  bool has_type = false;
  Shape type;  // kDense, kType, and a typed number
  // kDense: the scalars as written, flattened ("1", "-2.5e+00", "0x7FC00000",
  // "true"), pointing into the program's text (which must outlive the
  // Module); a complex element is two entries, real then imaginary. A splat
  // has one element. `hex` holds dense<"0x..."> raw bytes instead.
  std::vector<absl::string_view> scalars;
  bool dense_complex = false;
  bool dense_hex = false;
  std::string hex;
  bool dense_resource = false;
};

struct NamedAttribute {
  NamedAttribute(std::string name, Attribute value)
      : first(std::move(name)), second(std::move(value)) {}
  std::string first;  // the name
  Attribute second;   // the value
};

// A use of a value: %name, or %name#N for result N of a multi-result op.
struct ValueUse {
  std::string name;  // "%x" or "%x#1"
  Position position;
};

// A quantized element type, !quant.uniform<i8:f32, 0.5:-20> (per tensor)
// or !quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5}> (per axis): values
// are held as `storage` integers q standing for (q - zero_point) * scale.
// The type's Shape (Argument::type, Operation::result_types...) has the
// storage type as its element type.
struct Quantization {
  PrimitiveType storage = PrimitiveType::kS8;
  PrimitiveType expressed = PrimitiveType::kF32;
  int64_t storage_min = 0, storage_max = 0;
  // Per axis: the dimension whose index picks the scale and zero point;
  // -1 for one of each for the whole tensor.
  int64_t dimension = -1;
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  Position position;  // of the !quant
};
// The quantization of each of a list of types (nullopt: not quantized);
// empty when none is.
using Quantizations = std::vector<std::optional<Quantization>>;

struct Argument {
  std::string name;  // "%arg0"
  Shape type;
  NamedAttributes attributes;
  Position position;
  std::optional<Quantization> quantization;
};

struct Operation;

struct Region {
  std::vector<Argument> arguments;
  std::vector<Operation> operations;
  Position position;
};

struct Operation {
  std::string name;  // "stablehlo.add", "func.return"
  Position position;
  // The values the op defines, as uses will name them: "%x" for a lone
  // result, "%x#0", "%x#1" for %x:2, "%a", "%b" for %a, %b.
  std::vector<std::string> results;
  std::vector<ValueUse> operands;
  NamedAttributes attributes;  // properties and attributes, merged
  std::vector<Region> regions;
  // The types after ':' as written: operand types (when the form gives
  // them) and result types.
  std::vector<Shape> operand_types;
  std::vector<Shape> result_types;
  Quantizations operand_quantizations, result_quantizations;
  bool has_operand_types = false;
  // The loc(...) after the op, unresolved (text between the parentheses).
  std::string location;
};

struct Function {
  std::string name;
  std::string visibility;  // "public" (default), "private", "nested"
  std::vector<Argument> arguments;
  std::vector<Shape> result_types;
  Quantizations result_quantizations;
  std::vector<NamedAttributes> result_attributes;
  NamedAttributes attributes;
  Region body;
  Position position;
};

struct Module {
  std::string name;  // module @name; empty when absent
  NamedAttributes attributes;
  std::vector<Function> functions;
  // #loc3 = loc(...) definitions: alias name (with '#') to the text inside
  // loc(...).
  absl::flat_hash_map<std::string, std::string> location_aliases;
};

// Reads a whole program: `module [@name] [attributes {...}] { ... }`, or
// function definitions at the top level (as StableHLO's tests write them).
// The Module points into `text`, which must outlive it.
absl::StatusOr<Module> ParseMlirModule(absl::string_view text);

// Resolves loc(...) texts of one module: "file.py:12:3" for the first file
// location inside (following #aliases, callsite callee first, fused
// locations in order); otherwise the first name in it ("jit(f)/add"); empty
// when it has neither. Each alias is resolved once, whatever the number of
// ops that name it.
class LocationResolver {
 public:
  explicit LocationResolver(const Module& module) : module_(module) {}
  std::string Resolve(absl::string_view location);

 private:
  struct Found {
    std::string file;
    std::string name;
  };
  Found Scan(absl::string_view text, int depth);

  const Module& module_;
  absl::flat_hash_map<std::string, Found> memo_;
};

// The attribute named `name`, or nullptr.
const Attribute* FindAttribute(const NamedAttributes& attributes,
                               absl::string_view name);

// "tensor<2x3xf32>" for `shape` (tuple<...>, !stablehlo.token).
std::string MlirTypeString(const Shape& shape);

}  // namespace pjrt::hlo::mlir

#endif  // PJRT_HLO_MLIR_TEXT_H_
