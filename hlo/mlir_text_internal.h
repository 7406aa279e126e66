// The MLIR text reader's shared part: the Reader class, split over
// mlir_text.cc (types, attributes, functions, the module) and
// mlir_text_ops.cc (operations, regions and the pretty forms of the ops
// that have one). Not part of the interface.
#ifndef PJRT_HLO_MLIR_TEXT_INTERNAL_H_
#define PJRT_HLO_MLIR_TEXT_INTERNAL_H_

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
#include "hlo/mlir_text.h"
#include "hlo/parser.h"

namespace pjrt::hlo::mlir::text_internal {

inline bool IsIdStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_';
}
inline bool IsIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '$' || c == '.';
}
inline bool IsSuffixIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '$' || c == '.' || c == '-';
}

inline std::string ElementTypeString(PrimitiveType type) {
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
    case PrimitiveType::kF6E2M3FN:
      return "f6E2M3FN";
    case PrimitiveType::kF6E3M2FN:
      return "f6E3M2FN";
    default:
      return std::string(PrimitiveTypeName(type));
  }
}

// The element type spelled `name` in MLIR ("f32", "i1", "ui8", "bf16").
inline std::optional<PrimitiveType> ElementTypeFromName(
    absl::string_view name) {
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
          {"f6E2M3FN", PrimitiveType::kF6E2M3FN},
          {"f6E3M2FN", PrimitiveType::kF6E3M2FN},
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
  // Where a quantized element type may stand (op signatures, function
  // arguments and results): the type, and its quantization in `q`.
  absl::StatusOr<Shape> QuantizableType(int depth,
                                        std::optional<Quantization>* q);
  // A list of them; `qs` stays empty when none is quantized.
  absl::StatusOr<std::vector<Shape>> QuantizableTypeList(int depth,
                                                         Quantizations* qs);
  // !quant.uniform<...> at the cursor: its storage type, the rest in
  // pending_quantization_.
  absl::StatusOr<PrimitiveType> QuantizedType(int depth);
  bool AtType() {
    Skip();
    return AtKeyword("tensor") || AtKeyword("tuple") || At("!") ||
           AtKeyword("complex") ||
           ElementTypeFromName(PeekIdentifier()).has_value();
  }

  // --- attributes -------------------------------------------------------
  absl::StatusOr<Attribute> ParseAttribute(int depth);
  // The kinds of attribute that ParseAttribute reads in more than a few
  // lines, from the cursor at their first character or keyword, into `a`:
  // [a, b], @symbol, #dialect<...>, a number with its optional type,
  // dense_resource<...> : type and array<type: ...>.
  absl::Status ArrayAttribute(int depth, Attribute* a);
  absl::Status SymbolAttribute(Attribute* a);
  absl::Status DialectAttribute(int depth, Attribute* a);
  absl::Status NumberAttribute(int depth, Attribute* a);
  absl::Status DenseResourceAttribute(int depth, Attribute* a);
  absl::Status TypedArrayAttribute(int depth, Attribute* a);
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
  // chlo.scan: its inputs, then its inits; "__inputs" counts the inputs.
  absl::Status ScanOp(int depth, Operation* op);
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
  // Above 0 while a quantizable type is read (QuantizableType).
  int quantization_allowed_ = 0;
  std::optional<Quantization> pending_quantization_;
};

}  // namespace pjrt::hlo::mlir::text_internal

#endif  // PJRT_HLO_MLIR_TEXT_INTERNAL_H_
