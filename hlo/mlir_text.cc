// Implementation notes.
//
// A character-level recursive-descent reader: MLIR's grammar changes its
// lexical rules by context (inside tensor<4x8xf32> "4x8xf32" is dimensions
// and a type, in a pretty op "x" separates dimension lists), so there is no
// separate token pass. Every recursion takes a depth and fails past
// kMaxMlirNesting.
#include "hlo/mlir_text.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "hlo/parser.h"

namespace pjrt::hlo::mlir {

const Attribute* FindAttribute(const NamedAttributes& attributes,
                               absl::string_view name) {
  for (const auto& [key, value] : attributes) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {

bool IsIdStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '$' || c == '.';
}
bool IsSuffixIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '$' || c == '.' || c == '-';
}

std::string ElementTypeString(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
      return "i1";
    case PrimitiveType::kS2:
      return "i2";
    case PrimitiveType::kS4:
      return "i4";
    case PrimitiveType::kS8:
      return "i8";
    case PrimitiveType::kS16:
      return "i16";
    case PrimitiveType::kS32:
      return "i32";
    case PrimitiveType::kS64:
      return "i64";
    case PrimitiveType::kU2:
      return "ui2";
    case PrimitiveType::kU4:
      return "ui4";
    case PrimitiveType::kU8:
      return "ui8";
    case PrimitiveType::kU16:
      return "ui16";
    case PrimitiveType::kU32:
      return "ui32";
    case PrimitiveType::kU64:
      return "ui64";
    case PrimitiveType::kC64:
      return "complex<f32>";
    case PrimitiveType::kC128:
      return "complex<f64>";
    case PrimitiveType::kF8E4M3FN:
      return "f8E4M3FN";
    case PrimitiveType::kF8E5M2:
      return "f8E5M2";
    case PrimitiveType::kF8E4M3FNUZ:
      return "f8E4M3FNUZ";
    case PrimitiveType::kF8E5M2FNUZ:
      return "f8E5M2FNUZ";
    case PrimitiveType::kF8E4M3B11FNUZ:
      return "f8E4M3B11FNUZ";
    case PrimitiveType::kF8E4M3:
      return "f8E4M3";
    case PrimitiveType::kF8E3M4:
      return "f8E3M4";
    case PrimitiveType::kF4E2M1FN:
      return "f4E2M1FN";
    case PrimitiveType::kF8E8M0FNU:
      return "f8E8M0FNU";
    default:
      return std::string(PrimitiveTypeName(type));
  }
}

// The element type spelled `name` in MLIR ("f32", "i1", "ui8", "bf16").
std::optional<PrimitiveType> ElementTypeFromName(absl::string_view name) {
  static const auto* const kTypes =
      new absl::flat_hash_map<std::string, PrimitiveType>{
          {"i1", PrimitiveType::kPred},
          {"i2", PrimitiveType::kS2},
          {"si2", PrimitiveType::kS2},
          {"i4", PrimitiveType::kS4},
          {"si4", PrimitiveType::kS4},
          {"i8", PrimitiveType::kS8},
          {"si8", PrimitiveType::kS8},
          {"i16", PrimitiveType::kS16},
          {"si16", PrimitiveType::kS16},
          {"i32", PrimitiveType::kS32},
          {"si32", PrimitiveType::kS32},
          {"i64", PrimitiveType::kS64},
          {"si64", PrimitiveType::kS64},
          {"ui2", PrimitiveType::kU2},
          {"ui4", PrimitiveType::kU4},
          {"ui8", PrimitiveType::kU8},
          {"ui16", PrimitiveType::kU16},
          {"ui32", PrimitiveType::kU32},
          {"ui64", PrimitiveType::kU64},
          {"f16", PrimitiveType::kF16},
          {"bf16", PrimitiveType::kBf16},
          {"f32", PrimitiveType::kF32},
          {"f64", PrimitiveType::kF64},
          {"f8E4M3FN", PrimitiveType::kF8E4M3FN},
          {"f8E5M2", PrimitiveType::kF8E5M2},
          {"f8E4M3FNUZ", PrimitiveType::kF8E4M3FNUZ},
          {"f8E5M2FNUZ", PrimitiveType::kF8E5M2FNUZ},
          {"f8E4M3B11FNUZ", PrimitiveType::kF8E4M3B11FNUZ},
          {"f8E4M3", PrimitiveType::kF8E4M3},
          {"f8E3M4", PrimitiveType::kF8E3M4},
          {"f4E2M1FN", PrimitiveType::kF4E2M1FN},
          {"f8E8M0FNU", PrimitiveType::kF8E8M0FNU},
      };
  auto it = kTypes->find(name);
  if (it == kTypes->end()) return std::nullopt;
  return it->second;
}

class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i) {
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<Module> ReadModule();

 private:
  // --- characters -------------------------------------------------------
  Position PositionAt(size_t offset) const {
    auto it =
        std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return Position{static_cast<int>(line),
                    static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }
  Position Here() {
    Skip();
    return PositionAt(pos_);
  }
  absl::Status ErrorAt(size_t offset, absl::string_view message) const {
    const Position p = PositionAt(offset);
    return absl::InvalidArgumentError(
        FormatErrorAt(text_, p.line, p.column, message));
  }
  absl::Status Error(absl::string_view message) {
    Skip();
    return ErrorAt(pos_, message);
  }
  absl::Status Unimplemented(size_t offset, absl::string_view message) const {
    const Position p = PositionAt(offset);
    return absl::UnimplementedError(
        FormatErrorAt(text_, p.line, p.column, message));
  }
  // What is at the cursor, for "expected X, found Y" messages.
  std::string Found() {
    Skip();
    if (pos_ >= text_.size()) return "the end of the program";
    size_t end = pos_ + 1;
    if (IsIdChar(text_[pos_]) || text_[pos_] == '%' || text_[pos_] == '@') {
      while (end < text_.size() && end - pos_ < 40 &&
             IsSuffixIdChar(text_[end]))
        ++end;
    }
    return absl::StrCat("'", text_.substr(pos_, end - pos_), "'");
  }
  absl::Status Expected(absl::string_view what) {
    return Error(absl::StrCat("expected ", what, ", found ", Found()));
  }

  void Skip() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() &&
                 text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  bool AtEnd() {
    Skip();
    return pos_ >= text_.size();
  }
  char PeekChar() {
    Skip();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool At(absl::string_view s) {
    Skip();
    return text_.substr(pos_, s.size()) == s;
  }
  bool TryConsume(absl::string_view s) {
    if (!At(s)) return false;
    pos_ += s.size();
    return true;
  }
  absl::Status Expect(absl::string_view s, absl::string_view what = "") {
    if (TryConsume(s)) return absl::OkStatus();
    return Expected(what.empty() ? absl::StrCat("'", s, "'")
                                 : absl::StrCat("'", s, "' ", what));
  }
  // A bare identifier at the cursor (without consuming it); empty if none.
  absl::string_view PeekIdentifier() {
    Skip();
    if (pos_ >= text_.size() || !IsIdStart(text_[pos_])) return {};
    size_t end = pos_ + 1;
    while (end < text_.size() && IsIdChar(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }
  bool AtKeyword(absl::string_view word) { return PeekIdentifier() == word; }
  bool TryKeyword(absl::string_view word) {
    if (!AtKeyword(word)) return false;
    pos_ += word.size();
    return true;
  }
  absl::StatusOr<std::string> Identifier(absl::string_view what) {
    absl::string_view id = PeekIdentifier();
    if (id.empty()) return Expected(what);
    pos_ += id.size();
    return std::string(id);
  }
  // %name (with its '%'), without a #N suffix.
  absl::StatusOr<std::string> ValueName(absl::string_view what) {
    Skip();
    if (pos_ >= text_.size() || text_[pos_] != '%') return Expected(what);
    size_t end = pos_ + 1;
    while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
    if (end == pos_ + 1) return Expected(what);
    std::string name(text_.substr(pos_, end - pos_));
    pos_ = end;
    return name;
  }
  absl::StatusOr<ValueUse> Use() {
    ValueUse use;
    use.position = Here();
    PJRT_ASSIGN_OR_RETURN(use.name, ValueName("a value (%name)"));
    if (pos_ < text_.size() && text_[pos_] == '#') {
      size_t end = pos_ + 1;
      while (end < text_.size() && absl::ascii_isdigit(text_[end])) ++end;
      if (end == pos_ + 1) return Expected("a result number after '#'");
      absl::StrAppend(&use.name, text_.substr(pos_, end - pos_));
      pos_ = end;
    }
    return use;
  }
  absl::StatusOr<std::string> StringLiteral() {
    Skip();
    if (pos_ >= text_.size() || text_[pos_] != '"') return Expected("a string");
    const size_t start = pos_;
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return ErrorAt(start, "this string is not closed");
      }
      const char c = text_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size())
        return ErrorAt(start, "this string is not closed");
      const char e = text_[pos_++];
      if (e == 'n') {
        out.push_back('\n');
      } else if (e == 't') {
        out.push_back('\t');
      } else if (e == '"' || e == '\\') {
        out.push_back(e);
      } else if (absl::ascii_isxdigit(e) && pos_ < text_.size() &&
                 absl::ascii_isxdigit(text_[pos_])) {
        int value = 0;
        for (char h : {e, text_[pos_]}) {
          value = value * 16 + (absl::ascii_isdigit(h)
                                    ? h - '0'
                                    : absl::ascii_tolower(h) - 'a' + 10);
        }
        ++pos_;
        out.push_back(static_cast<char>(value));
      } else {
        return ErrorAt(pos_ - 2,
                       absl::StrCat("unknown escape \\", std::string(1, e),
                                    " in a string"));
      }
    }
    return out;
  }
  // A number as written: -?digits(.digits)?(e[+-]?digits)? or 0x hex.
  absl::StatusOr<std::string> NumberText(bool* is_float) {
    Skip();
    const size_t start = pos_;
    size_t i = pos_;
    if (i < text_.size() && (text_[i] == '-' || text_[i] == '+')) ++i;
    if (i + 1 < text_.size() && text_[i] == '0' &&
        (text_[i + 1] == 'x' || text_[i + 1] == 'X')) {
      i += 2;
      const size_t digits = i;
      while (i < text_.size() && absl::ascii_isxdigit(text_[i])) ++i;
      if (i == digits) return Expected("hexadecimal digits after 0x");
      *is_float = false;
      pos_ = i;
      return std::string(text_.substr(start, i - start));
    }
    const size_t digits = i;
    while (i < text_.size() && absl::ascii_isdigit(text_[i])) ++i;
    if (i == digits) return Expected("a number");
    *is_float = false;
    if (i < text_.size() && text_[i] == '.') {
      *is_float = true;
      ++i;
      while (i < text_.size() && absl::ascii_isdigit(text_[i])) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (j < text_.size() && absl::ascii_isdigit(text_[j])) {
        *is_float = true;
        i = j;
        while (i < text_.size() && absl::ascii_isdigit(text_[i])) ++i;
      }
    }
    pos_ = i;
    return std::string(text_.substr(start, i - start));
  }
  bool AtNumber() {
    Skip();
    if (pos_ >= text_.size()) return false;
    size_t i = pos_;
    if (text_[i] == '-' || text_[i] == '+') ++i;
    return i < text_.size() && absl::ascii_isdigit(text_[i]);
  }
  absl::StatusOr<int64_t> Integer(absl::string_view what) {
    if (!AtNumber()) return Expected(what);
    const size_t start = pos_;
    bool is_float = false;
    PJRT_ASSIGN_OR_RETURN(std::string digits, NumberText(&is_float));
    int64_t value = 0;
    if (is_float || !absl::SimpleAtoi(digits, &value)) {
      return ErrorAt(
          start, absl::StrCat(what, ": ", digits, " is not a 64-bit integer"));
    }
    return value;
  }
  // The text between a '<' at the cursor and its matching '>' (strings and
  // nested brackets skipped); the cursor ends after the '>'.
  absl::StatusOr<std::string> AngleBody() {
    PJRT_RETURN_IF_ERROR(Expect("<"));
    const size_t start = pos_;
    int depth = 1;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        PJRT_RETURN_IF_ERROR(StringLiteral().status());
        continue;
      }
      if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        pos_ += 2;  // "->" inside #stablehlo.conv<...>
        continue;
      }
      if (c == '<' || c == '(' || c == '[' || c == '{') {
        if (++depth > kMaxMlirNesting) {
          return ErrorAt(pos_, absl::StrCat("nesting deeper than ",
                                            kMaxMlirNesting, " levels"));
        }
      }
      if (c == '>' || c == ')' || c == ']' || c == '}') --depth;
      ++pos_;
      if (depth == 0) {
        return std::string(text_.substr(start, pos_ - 1 - start));
      }
    }
    return ErrorAt(start - 1, "this '<' is not closed");
  }
  // Skips a loc(...) if one is at the cursor, returning its inner text.
  absl::StatusOr<std::string> TryLocation() {
    if (!At("loc(")) return std::string();
    pos_ += 3;
    const size_t open = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        PJRT_RETURN_IF_ERROR(StringLiteral().status());
        continue;
      }
      if (c == '(' || c == '[' || c == '<') ++depth;
      if (c == ')' || c == ']' || c == '>') --depth;
      ++pos_;
      if (depth == 0)
        return std::string(text_.substr(open + 1, pos_ - open - 2));
    }
    return ErrorAt(open, "this loc( is not closed");
  }

  // --- types ------------------------------------------------------------
  absl::StatusOr<Shape> Type(int depth);
  absl::StatusOr<PrimitiveType> ElementType(int depth);
  absl::StatusOr<std::vector<Shape>> TypeList(int depth);
  bool AtType() {
    Skip();
    return AtKeyword("tensor") || AtKeyword("tuple") || At("!") ||
           AtKeyword("complex") ||
           ElementTypeFromName(PeekIdentifier()).has_value();
  }

  // --- attributes -------------------------------------------------------
  absl::StatusOr<Attribute> ParseAttribute(int depth);
  absl::StatusOr<NamedAttributes> Dictionary(int depth);
  absl::Status DenseBody(int depth, Attribute* attribute);
  absl::Status DenseLevel(int depth, Attribute* attribute);
  absl::Status DenseScalar(Attribute* attribute);
  absl::StatusOr<Attribute> PrettyValue(int depth);

  // --- structure ----------------------------------------------------------
  absl::Status Function(Module* module);
  absl::Status RegionBody(int depth, Region* region);
  absl::StatusOr<Region> BracedRegion(int depth);
  absl::StatusOr<Argument> ArgumentDecl(int depth);
  absl::StatusOr<Operation> ParseOperation(int depth);
  absl::Status GenericOp(int depth, Operation* op);
  absl::Status PrettyOp(int depth, Operation* op, size_t name_offset);
  absl::Status Signature(int depth, Operation* op);
  absl::Status PrettyOperandsAndKeys(int depth, Operation* op);
  // %a, %b, ... (at least one).
  absl::Status OperandList(Operation* op);
  // ( [%a, %b, ...] )
  absl::Status ParenthesizedOperands(Operation* op);
  // A {...} dictionary at the cursor, added to the op's attributes.
  absl::Status AppendDictionary(int depth, Operation* op);
  // AppendDictionary when the cursor is at a '{'.
  absl::Status TrailingAttributes(int depth, Operation* op) {
    if (PeekChar() != '{') return absl::OkStatus();
    return AppendDictionary(depth, op);
  }
  absl::Status ReduceOp(int depth, Operation* op);
  absl::Status WhileOp(int depth, Operation* op);
  absl::Status ConvolutionOp(int depth, Operation* op);
  absl::Status CheckDepth(int depth) {
    if (depth > kMaxMlirNesting) {
      return Error(
          absl::StrCat("nesting deeper than ", kMaxMlirNesting, " levels"));
    }
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
};

absl::StatusOr<PrimitiveType> Reader::ElementType(int depth) {
  Skip();
  const size_t start = pos_;
  if (TryKeyword("complex")) {
    PJRT_RETURN_IF_ERROR(Expect("<", "after complex"));
    PJRT_ASSIGN_OR_RETURN(PrimitiveType part, ElementType(depth + 1));
    PJRT_RETURN_IF_ERROR(Expect(">", "to end complex<...>"));
    if (part == PrimitiveType::kF32) return PrimitiveType::kC64;
    if (part == PrimitiveType::kF64) return PrimitiveType::kC128;
    return ErrorAt(start, absl::StrCat("complex<", ElementTypeString(part),
                                       "> is not a type pjrtd has; complex "
                                       "numbers are complex<f32> or "
                                       "complex<f64>"));
  }
  if (At("!quant")) {
    return Unimplemented(start,
                         "quantized element types (!quant.uniform) are "
                         "not supported; dequantize in the program "
                         "before it reaches pjrtd");
  }
  absl::string_view name = PeekIdentifier();
  std::optional<PrimitiveType> type = ElementTypeFromName(name);
  if (!type.has_value()) {
    if (name.empty()) return Expected("an element type (f32, i32, bf16...)");
    return Unimplemented(
        start, absl::StrCat("element type ", name, " is not supported"));
  }
  pos_ += name.size();
  return *type;
}

absl::StatusOr<Shape> Reader::Type(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  Skip();
  const size_t start = pos_;
  if (TryKeyword("tensor")) {
    if (!TryConsume("<")) return Expected("'<' after tensor");
    std::vector<int64_t> dims;
    // Dimensions: (N|?) 'x' ... then the element type.
    while (true) {
      Skip();
      if (pos_ < text_.size() && text_[pos_] == '?') {
        return Unimplemented(pos_,
                             "dynamic dimensions ('?') are not "
                             "supported: give the program static "
                             "shapes");
      }
      if (pos_ >= text_.size() || !absl::ascii_isdigit(text_[pos_])) break;
      size_t end = pos_;
      while (end < text_.size() && absl::ascii_isdigit(text_[end])) ++end;
      if (end >= text_.size() || text_[end] != 'x') break;
      int64_t dim = 0;
      if (!absl::SimpleAtoi(text_.substr(pos_, end - pos_), &dim) ||
          dim > kMaxArrayBytes) {
        return ErrorAt(
            pos_, absl::StrCat("dimension ", text_.substr(pos_, end - pos_),
                               " is too large"));
      }
      if (dims.size() >= static_cast<size_t>(kMaxRank)) {
        return ErrorAt(pos_,
                       absl::StrCat("more than ", kMaxRank, " dimensions"));
      }
      dims.push_back(dim);
      pos_ = end + 1;
    }
    PJRT_ASSIGN_OR_RETURN(PrimitiveType element, ElementType(depth + 1));
    if (TryConsume(",")) {
      return Unimplemented(pos_,
                           "tensor encodings (bounded or sparse "
                           "tensors) are not supported");
    }
    PJRT_RETURN_IF_ERROR(Expect(">", "to end the tensor type"));
    Shape shape(element, std::move(dims));
    absl::Status limits = CheckShapeLimits(shape);
    if (!limits.ok()) return ErrorAt(start, limits.message());
    return shape;
  }
  if (TryKeyword("tuple")) {
    PJRT_RETURN_IF_ERROR(Expect("<", "after tuple"));
    std::vector<Shape> elements;
    if (!TryConsume(">")) {
      PJRT_ASSIGN_OR_RETURN(elements, TypeList(depth + 1));
      PJRT_RETURN_IF_ERROR(Expect(">", "to end the tuple type"));
    }
    Shape shape = Shape::Tuple(std::move(elements));
    absl::Status limits = CheckShapeLimits(shape);
    if (!limits.ok()) return ErrorAt(start, limits.message());
    return shape;
  }
  if (TryConsume("!stablehlo.token") || TryConsume("!mhlo.token")) {
    return Shape(PrimitiveType::kToken, {});
  }
  if (At("!")) {
    size_t end = pos_ + 1;
    while (end < text_.size() && IsIdChar(text_[end])) ++end;
    return Unimplemented(start,
                         absl::StrCat("type ", text_.substr(pos_, end - pos_),
                                      " is not supported"));
  }
  if (AtKeyword("index") || AtKeyword("none")) {
    return Unimplemented(
        start, absl::StrCat("type ", PeekIdentifier(), " is not supported"));
  }
  // A bare element type: a scalar (as in "1 : i64").
  PJRT_ASSIGN_OR_RETURN(PrimitiveType element, ElementType(depth + 1));
  return Shape(element, {});
}

absl::StatusOr<std::vector<Shape>> Reader::TypeList(int depth) {
  std::vector<Shape> types;
  do {
    PJRT_ASSIGN_OR_RETURN(Shape type, Type(depth));
    types.push_back(std::move(type));
  } while (TryConsume(","));
  return types;
}

absl::StatusOr<NamedAttributes> Reader::Dictionary(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  PJRT_RETURN_IF_ERROR(Expect("{"));
  NamedAttributes fields;
  if (TryConsume("}")) return fields;
  while (true) {
    std::string key;
    if (PeekChar() == '"') {
      PJRT_ASSIGN_OR_RETURN(key, StringLiteral());
    } else {
      PJRT_ASSIGN_OR_RETURN(key, Identifier("an attribute name"));
    }
    Attribute value;
    value.position = Here();
    if (TryConsume("=")) {
      PJRT_ASSIGN_OR_RETURN(value, ParseAttribute(depth + 1));
    }
    fields.emplace_back(std::move(key), std::move(value));
    if (TryConsume(",")) continue;
    PJRT_RETURN_IF_ERROR(Expect("}", "or ',' in the attribute dictionary"));
    return fields;
  }
}

absl::Status Reader::DenseScalar(Attribute* attribute) {
  Skip();
  const size_t start = pos_;
  if (TryKeyword("true") || TryKeyword("false")) {
    attribute->scalars.push_back(text_.substr(start, pos_ - start));
  } else if (TryConsume("(")) {
    attribute->dense_complex = true;
    for (int part = 0; part < 2; ++part) {
      if (part == 1) PJRT_RETURN_IF_ERROR(Expect(",", "between complex parts"));
      bool is_float = false;
      if (!AtNumber()) return Expected("a number in a complex value");
      const size_t number_start = pos_;
      PJRT_RETURN_IF_ERROR(NumberText(&is_float).status());
      attribute->scalars.push_back(
          text_.substr(number_start, pos_ - number_start));
    }
    PJRT_RETURN_IF_ERROR(Expect(")", "to end a complex value"));
  } else if (AtNumber()) {
    bool is_float = false;
    PJRT_RETURN_IF_ERROR(NumberText(&is_float).status());
    attribute->scalars.push_back(text_.substr(start, pos_ - start));
  } else {
    return Expected("an element value (a number, true, false or (re, im))");
  }
  return absl::OkStatus();
}

absl::Status Reader::DenseLevel(int depth, Attribute* attribute) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  if (!TryConsume("[")) return DenseScalar(attribute);
  if (TryConsume("]")) return absl::OkStatus();
  while (true) {
    PJRT_RETURN_IF_ERROR(DenseLevel(depth + 1, attribute));
    if (TryConsume(",")) continue;
    return Expect("]", "or ',' in the dense value");
  }
}

absl::Status Reader::DenseBody(int depth, Attribute* attribute) {
  attribute->kind = Attribute::Kind::kDense;
  PJRT_RETURN_IF_ERROR(Expect("<", "after dense"));
  if (PeekChar() == '"') {
    const size_t start = pos_;
    PJRT_ASSIGN_OR_RETURN(std::string hex, StringLiteral());
    if (hex.size() < 2 || hex[0] != '0' || (hex[1] != 'x' && hex[1] != 'X')) {
      return ErrorAt(start,
                     "a dense string value must be hexadecimal bytes "
                     "(\"0x...\")");
    }
    attribute->dense_hex = true;
    attribute->hex = hex.substr(2);
  } else if (!At(">")) {
    PJRT_RETURN_IF_ERROR(DenseLevel(depth + 1, attribute));
  }
  PJRT_RETURN_IF_ERROR(Expect(">", "to end the dense value"));
  PJRT_RETURN_IF_ERROR(Expect(":", "and the type after dense<...>"));
  PJRT_ASSIGN_OR_RETURN(attribute->type, Type(depth + 1));
  attribute->has_type = true;
  return absl::OkStatus();
}

absl::StatusOr<Attribute> Reader::ParseAttribute(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  Attribute a;
  a.position = Here();
  const size_t start = pos_;
  const char c = PeekChar();
  if (c == '[') {
    ++pos_;
    a.kind = Attribute::Kind::kArray;
    if (TryConsume("]")) return a;
    while (true) {
      PJRT_ASSIGN_OR_RETURN(Attribute element, ParseAttribute(depth + 1));
      a.elements.push_back(std::move(element));
      if (TryConsume(",")) continue;
      PJRT_RETURN_IF_ERROR(Expect("]", "or ',' in the array"));
      return a;
    }
  }
  if (c == '{') {
    a.kind = Attribute::Kind::kDict;
    PJRT_ASSIGN_OR_RETURN(a.fields, Dictionary(depth + 1));
    return a;
  }
  if (c == '"') {
    a.kind = Attribute::Kind::kString;
    PJRT_ASSIGN_OR_RETURN(a.text, StringLiteral());
    if (TryConsume(":")) {
      PJRT_ASSIGN_OR_RETURN(a.type, Type(depth + 1));
      a.has_type = true;
    }
    return a;
  }
  if (c == '@') {
    ++pos_;
    a.kind = Attribute::Kind::kSymbol;
    if (PeekChar() == '"') {
      PJRT_ASSIGN_OR_RETURN(a.text, StringLiteral());
    } else {
      size_t end = pos_;
      while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
      if (end == pos_) return Expected("a symbol name after '@'");
      a.text = std::string(text_.substr(pos_, end - pos_));
      pos_ = end;
    }
    return a;
  }
  if (c == '#') {
    a.kind = Attribute::Kind::kDialect;
    size_t end = pos_ + 1;
    while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
    a.text = std::string(text_.substr(pos_, end - pos_));
    pos_ = end;
    if (pos_ < text_.size() && text_[pos_] == '<') {
      const size_t body_start = pos_ + 1;
      PJRT_ASSIGN_OR_RETURN(a.body, AngleBody());
      // key = value parameters, when the body has that form; read in place,
      // then the cursor goes back to after the '>'.
      const size_t after = pos_;
      const size_t body_end = body_start + a.body.size();
      pos_ = body_start;
      NamedAttributes fields;
      bool ok = true;
      while (ok) {
        absl::string_view key = PeekIdentifier();
        if (key.empty()) {
          ok = false;
          break;
        }
        pos_ += key.size();
        if (!TryConsume("=")) {
          ok = false;
          break;
        }
        absl::StatusOr<Attribute> value = PrettyValue(depth + 1);
        if (!value.ok() || pos_ > body_end) {
          ok = false;
          break;
        }
        fields.emplace_back(std::string(key), *std::move(value));
        if (TryConsume(",")) continue;
        Skip();
        ok = pos_ == body_end;
        break;
      }
      pos_ = after;
      if (ok) a.fields = std::move(fields);
    }
    return a;
  }
  if (c == '<') {
    a.kind = Attribute::Kind::kDialect;
    PJRT_ASSIGN_OR_RETURN(a.body, AngleBody());
    return a;
  }
  if (AtNumber()) {
    bool is_float = false;
    PJRT_ASSIGN_OR_RETURN(a.text, NumberText(&is_float));
    a.kind = is_float ? Attribute::Kind::kFloat : Attribute::Kind::kInt;
    if (TryConsume(":")) {
      PJRT_ASSIGN_OR_RETURN(a.type, Type(depth + 1));
      a.has_type = true;
      if (IsFloatingPoint(a.type.element_type()))
        a.kind = Attribute::Kind::kFloat;
    }
    return a;
  }
  if (TryKeyword("true") || TryKeyword("false")) {
    a.kind = Attribute::Kind::kBool;
    a.boolean = text_[start] == 't';
    return a;
  }
  if (TryKeyword("unit")) return a;
  if (AtKeyword("dense")) {
    pos_ += 5;
    PJRT_RETURN_IF_ERROR(DenseBody(depth + 1, &a));
    return a;
  }
  if (AtKeyword("dense_resource")) {
    pos_ += 14;
    a.kind = Attribute::Kind::kDense;
    a.dense_resource = true;
    PJRT_ASSIGN_OR_RETURN(a.text, AngleBody());
    PJRT_RETURN_IF_ERROR(Expect(":", "and the type after dense_resource<...>"));
    PJRT_ASSIGN_OR_RETURN(a.type, Type(depth + 1));
    a.has_type = true;
    return a;
  }
  if (AtKeyword("array")) {
    pos_ += 5;
    a.kind = Attribute::Kind::kArray;
    PJRT_RETURN_IF_ERROR(Expect("<", "after array"));
    PJRT_ASSIGN_OR_RETURN(a.type, Type(depth + 1));
    a.has_type = true;
    if (TryConsume(":")) {
      do {
        Attribute element;
        element.position = Here();
        if (TryKeyword("true")) {
          element.kind = Attribute::Kind::kBool;
          element.boolean = true;
        } else if (TryKeyword("false")) {
          element.kind = Attribute::Kind::kBool;
        } else {
          bool is_float = false;
          if (!AtNumber()) return Expected("a number in array<...>");
          PJRT_ASSIGN_OR_RETURN(element.text, NumberText(&is_float));
          element.kind =
              is_float ? Attribute::Kind::kFloat : Attribute::Kind::kInt;
        }
        a.elements.push_back(std::move(element));
      } while (TryConsume(","));
    }
    PJRT_RETURN_IF_ERROR(Expect(">", "to end array<...>"));
    return a;
  }
  if (AtType()) {
    a.kind = Attribute::Kind::kType;
    PJRT_ASSIGN_OR_RETURN(a.type, Type(depth + 1));
    a.has_type = true;
    return a;
  }
  absl::string_view word = PeekIdentifier();
  if (!word.empty()) {
    a.kind = Attribute::Kind::kWord;
    a.text = std::string(word);
    pos_ += word.size();
    return a;
  }
  return Expected("an attribute value");
}

// A value in a pretty op's `key = value`: [1, 2], [0] x [1], a word, a
// number, <...>, or any attribute.
absl::StatusOr<Attribute> Reader::PrettyValue(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  if (AtNumber()) {
    // A bare number: the ':' after it starts the op's types, not its type.
    Attribute number;
    number.position = Here();
    bool is_float = false;
    PJRT_ASSIGN_OR_RETURN(number.text, NumberText(&is_float));
    number.kind = is_float ? Attribute::Kind::kFloat : Attribute::Kind::kInt;
    return number;
  }
  PJRT_ASSIGN_OR_RETURN(Attribute value, ParseAttribute(depth + 1));
  if (value.kind == Attribute::Kind::kArray && AtKeyword("x")) {
    // lhs x rhs dimension lists (dot_general's batching_dims = [0] x [0]).
    pos_ += 1;
    PJRT_ASSIGN_OR_RETURN(Attribute rhs, ParseAttribute(depth + 1));
    Attribute pair;
    pair.kind = Attribute::Kind::kArray;
    pair.position = value.position;
    pair.text = "x";
    pair.elements.push_back(std::move(value));
    pair.elements.push_back(std::move(rhs));
    return pair;
  }
  return value;
}

absl::StatusOr<Argument> Reader::ArgumentDecl(int depth) {
  Argument argument;
  argument.position = Here();
  PJRT_ASSIGN_OR_RETURN(argument.name, ValueName("an argument (%name)"));
  PJRT_RETURN_IF_ERROR(Expect(":", "and the argument's type"));
  PJRT_ASSIGN_OR_RETURN(argument.type, Type(depth + 1));
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
  bool function_type = false;
  if (TryConsume("(")) {
    function_type = true;
    if (!TryConsume(")")) {
      PJRT_ASSIGN_OR_RETURN(inputs, TypeList(depth + 1));
      PJRT_RETURN_IF_ERROR(Expect(")", "to end the operand types"));
    }
    PJRT_RETURN_IF_ERROR(Expect("->", "and the result types"));
  } else {
    PJRT_ASSIGN_OR_RETURN(inputs, TypeList(depth + 1));
    function_type = TryConsume("->");
  }
  if (function_type) {
    if (TryConsume("(")) {
      if (!TryConsume(")")) {
        PJRT_ASSIGN_OR_RETURN(outputs, TypeList(depth + 1));
        PJRT_RETURN_IF_ERROR(Expect(")", "to end the result types"));
      }
    } else {
      PJRT_ASSIGN_OR_RETURN(Shape type, Type(depth + 1));
      outputs.push_back(std::move(type));
    }
    op->operand_types = std::move(inputs);
    op->has_operand_types = true;
    op->result_types = std::move(outputs);
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
  op->has_operand_types = inputs.size() == op->operands.size();
  op->operand_types = std::move(inputs);
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
      PJRT_ASSIGN_OR_RETURN(op->operand_types, TypeList(depth + 1));
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

absl::Status Reader::Function(Module* module) {
  ::pjrt::hlo::mlir::Function f;
  f.position = Here();
  f.visibility = "public";
  for (const char* v : {"public", "private", "nested"}) {
    if (TryKeyword(v)) f.visibility = v;
  }
  if (PeekChar() != '@') return Expected("the function's name (@name)");
  PJRT_ASSIGN_OR_RETURN(Attribute symbol, ParseAttribute(1));
  f.name = symbol.text;
  PJRT_RETURN_IF_ERROR(Expect("(", "and the function's arguments"));
  if (!TryConsume(")")) {
    do {
      PJRT_ASSIGN_OR_RETURN(Argument a, ArgumentDecl(1));
      f.arguments.push_back(std::move(a));
    } while (TryConsume(","));
    PJRT_RETURN_IF_ERROR(Expect(")", "to end the arguments"));
  }
  if (TryConsume("->")) {
    // Only a parenthesized result list has attributes: after a lone type,
    // '{' opens the body.
    const auto result = [&](bool in_list) -> absl::Status {
      PJRT_ASSIGN_OR_RETURN(Shape type, Type(1));
      f.result_types.push_back(std::move(type));
      NamedAttributes attributes;
      if (in_list && PeekChar() == '{') {
        PJRT_ASSIGN_OR_RETURN(attributes, Dictionary(1));
      }
      f.result_attributes.push_back(std::move(attributes));
      return TryLocation().status();
    };
    if (TryConsume("(")) {
      if (!TryConsume(")")) {
        do {
          PJRT_RETURN_IF_ERROR(result(true));
        } while (TryConsume(","));
        PJRT_RETURN_IF_ERROR(Expect(")", "to end the result types"));
      }
    } else {
      PJRT_RETURN_IF_ERROR(result(false));
    }
  }
  if (TryKeyword("attributes")) {
    PJRT_ASSIGN_OR_RETURN(f.attributes, Dictionary(1));
  }
  if (PeekChar() != '{') {
    return Unimplemented(pos_, absl::StrCat("function @", f.name,
                                            " has no body: external "
                                            "functions are not supported"));
  }
  PJRT_ASSIGN_OR_RETURN(f.body, BracedRegion(1));
  f.body.arguments = f.arguments;
  PJRT_RETURN_IF_ERROR(TryLocation().status());
  module->functions.push_back(std::move(f));
  return absl::OkStatus();
}

absl::StatusOr<Module> Reader::ReadModule() {
  Module module;
  bool in_module = false;
  bool seen_module = false;
  while (true) {
    if (AtEnd()) break;
    if (At("{-#")) {
      // A resource blob section: skipped (dense_resource is refused where
      // it is used).
      const size_t end = text_.find("#-}", pos_);
      if (end == absl::string_view::npos) return Error("'{-#' is not closed");
      pos_ = end + 3;
      continue;
    }
    if (At("#")) {
      // #alias = loc(...) or #alias = attribute.
      const size_t start = pos_;
      size_t end = pos_ + 1;
      while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
      std::string alias(text_.substr(pos_, end - pos_));
      pos_ = end;
      PJRT_RETURN_IF_ERROR(Expect("=", "after the alias name"));
      if (At("loc(")) {
        PJRT_ASSIGN_OR_RETURN(std::string loc, TryLocation());
        module.location_aliases[alias] = std::move(loc);
      } else {
        absl::StatusOr<Attribute> value = ParseAttribute(1);
        if (!value.ok()) {
          return ErrorAt(start,
                         absl::StrCat("cannot read the definition of ", alias));
        }
      }
      continue;
    }
    if (in_module && TryConsume("}")) {
      in_module = false;
      PJRT_RETURN_IF_ERROR(TryLocation().status());
      continue;
    }
    if (!in_module && !seen_module && TryKeyword("module")) {
      seen_module = true;
      if (PeekChar() == '@') {
        PJRT_ASSIGN_OR_RETURN(Attribute symbol, ParseAttribute(1));
        module.name = symbol.text;
      }
      if (TryKeyword("attributes")) {
        PJRT_ASSIGN_OR_RETURN(module.attributes, Dictionary(1));
      }
      PJRT_RETURN_IF_ERROR(Expect("{", "to start the module's body"));
      in_module = true;
      continue;
    }
    if (TryKeyword("func.func")) {
      PJRT_RETURN_IF_ERROR(Function(&module));
      continue;
    }
    if (TryKeyword("sdy.mesh")) {
      // sdy.mesh @mesh = <["x"=2]>: the mesh of the sharding annotations.
      PJRT_RETURN_IF_ERROR(ParseAttribute(1).status());
      PJRT_RETURN_IF_ERROR(Expect("="));
      PJRT_RETURN_IF_ERROR(ParseAttribute(1).status());
      PJRT_RETURN_IF_ERROR(TryLocation().status());
      continue;
    }
    if (in_module || !seen_module) {
      absl::string_view word = PeekIdentifier();
      if (!word.empty() || PeekChar() == '"') {
        const size_t at = pos_;
        std::string what = word.empty() ? "this operation" : std::string(word);
        return Unimplemented(at, absl::StrCat(what,
                                              " at the top level of a "
                                              "module: only func.func "
                                              "is supported there"));
      }
    }
    return Expected(in_module ? "func.func or '}'" : "func.func or module");
  }
  if (in_module) return Error("the module is not closed: expected '}'");
  if (module.functions.empty()) {
    return Error("the program defines no function (func.func)");
  }
  return module;
}

}  // namespace

absl::StatusOr<Module> ParseMlirModule(absl::string_view text) {
  Reader reader(text);
  return reader.ReadModule();
}

std::string LocationResolver::Resolve(absl::string_view location) {
  Found found = Scan(location, 0);
  return found.file.empty() ? found.name : found.file;
}

// The first "file":line:col in `text` and the first name before it,
// following #aliases (each resolved once: a chain of aliases that name each
// other twice over costs its length, not 2^length).
LocationResolver::Found LocationResolver::Scan(absl::string_view text,
                                               int depth) {
  Found found;
  if (depth > kMaxMlirNesting) return found;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') {
        if (text[end] == '\\') ++end;
        ++end;
      }
      const absl::string_view s =
          text.substr(i + 1, std::min(end, text.size()) - i - 1);
      i = end + 1;
      if (i < text.size() && text[i] == ':') {
        size_t j = i + 1;
        while (j < text.size() &&
               (absl::ascii_isdigit(text[j]) || text[j] == ':')) {
          ++j;
        }
        absl::string_view numbers = text.substr(i, j - i);
        while (!numbers.empty() && numbers.back() == ':') {
          numbers.remove_suffix(1);
        }
        found.file = absl::StrCat(s, numbers);
        return found;
      }
      if (found.name.empty()) found.name = std::string(s);
      continue;
    }
    if (c == '#') {
      size_t end = i + 1;
      while (end < text.size() && IsSuffixIdChar(text[end])) ++end;
      const std::string alias(text.substr(i, end - i));
      i = end;
      auto it = memo_.find(alias);
      if (it == memo_.end()) {
        // In progress: a cycle reads as nothing.
        memo_[alias] = Found();
        auto definition = module_.location_aliases.find(alias);
        Found inner;
        if (definition != module_.location_aliases.end()) {
          inner = Scan(definition->second, depth + 1);
        }
        it = memo_.insert_or_assign(alias, std::move(inner)).first;
      }
      if (found.name.empty()) found.name = it->second.name;
      if (!it->second.file.empty()) {
        found.file = it->second.file;
        return found;
      }
      continue;
    }
    ++i;
  }
  return found;
}

std::string MlirTypeString(const Shape& shape) {
  if (shape.IsToken()) return "!stablehlo.token";
  if (shape.IsTuple()) {
    std::vector<std::string> parts;
    for (const Shape& s : shape.tuple_shapes())
      parts.push_back(MlirTypeString(s));
    return absl::StrCat("tuple<", absl::StrJoin(parts, ", "), ">");
  }
  std::string out = "tensor<";
  for (int64_t d : shape.dimensions()) absl::StrAppend(&out, d, "x");
  absl::StrAppend(&out, ElementTypeString(shape.element_type()), ">");
  return out;
}

}  // namespace pjrt::hlo::mlir
