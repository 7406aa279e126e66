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
#include "hlo/mlir_text_internal.h"
#include "hlo/parser.h"

namespace pjrt::hlo::mlir {

const Attribute* FindAttribute(const NamedAttributes& attributes,
                               absl::string_view name) {
  for (const auto& [key, value] : attributes) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace text_internal {

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
    if (quantization_allowed_ == 0) {
      return Unimplemented(start,
                           "quantized element types (!quant.uniform) are "
                           "supported in op signatures and function "
                           "arguments and results only");
    }
    return QuantizedType(depth);
  }
  absl::string_view name = PeekIdentifier();
  std::optional<PrimitiveType> type = ElementTypeFromName(name);
  if (name == "index") {
    // MLIR's index type, in attributes (a custom call's operand_layouts):
    // read as s64.
    type = PrimitiveType::kS64;
  }
  if (!type.has_value()) {
    if (name.empty()) return Expected("an element type (f32, i32, bf16...)");
    return Unimplemented(
        start, absl::StrCat("element type ", name, " is not supported"));
  }
  pos_ += name.size();
  return *type;
}

absl::StatusOr<PrimitiveType> Reader::QuantizedType(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  Quantization q;
  q.position = Here();
  if (!TryConsume("!quant.uniform")) {
    return Unimplemented(pos_,
                         "only uniform quantized types (!quant.uniform) are "
                         "supported");
  }
  PJRT_RETURN_IF_ERROR(Expect("<", "after !quant.uniform"));
  // The storage type: iN (signed) or uN (unsigned), MLIR's integer names
  // too.
  const size_t storage_at = pos_;
  const std::string storage(PeekIdentifier());
  std::optional<PrimitiveType> type;
  if (storage.size() > 1 && storage[0] == 'u' && storage[1] != 'i') {
    type = ElementTypeFromName(absl::StrCat("ui", storage.substr(1)));
  } else {
    type = ElementTypeFromName(storage);
  }
  if (!type.has_value() ||
      !(IsSignedInteger(*type) || IsUnsignedInteger(*type)) ||
      *type == PrimitiveType::kS64 || *type == PrimitiveType::kU64 ||
      *type == PrimitiveType::kS2 || *type == PrimitiveType::kU2) {
    return ErrorAt(storage_at,
                   absl::StrCat("quantized storage type ",
                                storage.empty() ? "(none)" : storage,
                                " is not one of i4, i8, i16, i32, u4, u8, "
                                "u16, u32"));
  }
  pos_ += storage.size();
  q.storage = *type;
  const int bits = BitWidth(q.storage);
  const bool is_signed = IsSignedInteger(q.storage);
  const int64_t lowest = is_signed ? -(int64_t{1} << (bits - 1)) : 0;
  const int64_t highest =
      is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
  q.storage_min = lowest;
  q.storage_max = highest;
  if (TryConsume("<")) {
    const size_t range_at = pos_;
    PJRT_ASSIGN_OR_RETURN(q.storage_min, Integer("the storage minimum"));
    PJRT_RETURN_IF_ERROR(
        Expect(":", "between the storage minimum and maximum"));
    PJRT_ASSIGN_OR_RETURN(q.storage_max, Integer("the storage maximum"));
    PJRT_RETURN_IF_ERROR(Expect(">", "to end the storage range"));
    if (q.storage_min < lowest || q.storage_max > highest ||
        q.storage_min > q.storage_max) {
      return ErrorAt(range_at,
                     absl::StrFormat("storage range [%d, %d] is not within "
                                     "%s's [%d, %d]",
                                     q.storage_min, q.storage_max, storage,
                                     lowest, highest));
    }
  }
  PJRT_RETURN_IF_ERROR(Expect(":", "and the expressed type"));
  const size_t expressed_at = pos_;
  PJRT_ASSIGN_OR_RETURN(q.expressed, ElementType(depth + 1));
  if (q.expressed != PrimitiveType::kF32 &&
      q.expressed != PrimitiveType::kF16 &&
      q.expressed != PrimitiveType::kBf16 &&
      q.expressed != PrimitiveType::kF64) {
    return ErrorAt(expressed_at,
                   absl::StrCat("quantized values express ",
                                ElementTypeString(q.expressed),
                                "; the expressed type is f16, bf16, f32 or "
                                "f64"));
  }
  if (TryConsume(":")) {
    PJRT_ASSIGN_OR_RETURN(q.dimension, Integer("the quantized dimension"));
    if (q.dimension < 0 || q.dimension >= kMaxRank) {
      return Error(absl::StrCat("quantized dimension ", q.dimension,
                                " is not a dimension"));
    }
  }
  PJRT_RETURN_IF_ERROR(Expect(",", "and the scale"));
  // scale[:zero_point], or {scale[:zero_point], ...} per axis.
  const auto scale_and_zero_point = [&]() -> absl::Status {
    const size_t at = pos_;
    bool is_float = false;
    PJRT_ASSIGN_OR_RETURN(std::string digits, NumberText(&is_float));
    double scale = 0;
    if (!absl::SimpleAtod(digits, &scale) || !std::isfinite(scale) ||
        scale <= 0) {
      return ErrorAt(at, absl::StrCat("scale ", digits,
                                      " is not a positive finite number"));
    }
    int64_t zero_point = 0;
    if (TryConsume(":")) {
      const size_t zp_at = pos_;
      PJRT_ASSIGN_OR_RETURN(zero_point, Integer("the zero point"));
      if (zero_point < q.storage_min || zero_point > q.storage_max) {
        return ErrorAt(
            zp_at, absl::StrFormat("zero point %d is outside the "
                                   "storage range [%d, %d]",
                                   zero_point, q.storage_min, q.storage_max));
      }
    }
    if (q.scales.size() >= static_cast<size_t>(kMaxArrayBytes)) {
      return ErrorAt(at, "too many scales");
    }
    q.scales.push_back(scale);
    q.zero_points.push_back(zero_point);
    return absl::OkStatus();
  };
  if (q.dimension >= 0) {
    PJRT_RETURN_IF_ERROR(Expect("{", "to start the per-axis scales"));
    do {
      PJRT_RETURN_IF_ERROR(scale_and_zero_point());
    } while (TryConsume(","));
    PJRT_RETURN_IF_ERROR(Expect("}", "to end the per-axis scales"));
  } else {
    PJRT_RETURN_IF_ERROR(scale_and_zero_point());
  }
  PJRT_RETURN_IF_ERROR(Expect(">", "to end !quant.uniform<...>"));
  pending_quantization_ = std::move(q);
  return *type;
}

absl::StatusOr<Shape> Reader::QuantizableType(int depth,
                                              std::optional<Quantization>* q) {
  ++quantization_allowed_;
  pending_quantization_.reset();
  absl::StatusOr<Shape> type = Type(depth);
  --quantization_allowed_;
  *q = std::exchange(pending_quantization_, std::nullopt);
  return type;
}

absl::StatusOr<std::vector<Shape>> Reader::QuantizableTypeList(
    int depth, Quantizations* qs) {
  std::vector<Shape> types;
  Quantizations all;
  bool any = false;
  do {
    std::optional<Quantization> q;
    PJRT_ASSIGN_OR_RETURN(Shape type, QuantizableType(depth, &q));
    types.push_back(std::move(type));
    any |= q.has_value();
    all.push_back(std::move(q));
  } while (TryConsume(","));
  if (any) *qs = std::move(all);
  return types;
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
      // Quantized types stand in tuples nowhere pjrtd reads them.
      const int allowed = std::exchange(quantization_allowed_, 0);
      absl::StatusOr<std::vector<Shape>> list = TypeList(depth + 1);
      quantization_allowed_ = allowed;
      PJRT_ASSIGN_OR_RETURN(elements, std::move(list));
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

absl::Status Reader::ArrayAttribute(int depth, Attribute* a) {
  ++pos_;
  a->kind = Attribute::Kind::kArray;
  if (TryConsume("]")) return absl::OkStatus();
  while (true) {
    PJRT_ASSIGN_OR_RETURN(Attribute element, ParseAttribute(depth + 1));
    a->elements.push_back(std::move(element));
    if (TryConsume(",")) continue;
    return Expect("]", "or ',' in the array");
  }
}

absl::Status Reader::SymbolAttribute(Attribute* a) {
  ++pos_;
  a->kind = Attribute::Kind::kSymbol;
  if (PeekChar() == '"') {
    PJRT_ASSIGN_OR_RETURN(a->text, StringLiteral());
  } else {
    size_t end = pos_;
    while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
    if (end == pos_) return Expected("a symbol name after '@'");
    a->text = std::string(text_.substr(pos_, end - pos_));
    pos_ = end;
  }
  return absl::OkStatus();
}

absl::Status Reader::DialectAttribute(int depth, Attribute* a) {
  a->kind = Attribute::Kind::kDialect;
  size_t end = pos_ + 1;
  while (end < text_.size() && IsSuffixIdChar(text_[end])) ++end;
  a->text = std::string(text_.substr(pos_, end - pos_));
  pos_ = end;
  if (pos_ >= text_.size() || text_[pos_] != '<') return absl::OkStatus();
  const size_t body_start = pos_ + 1;
  PJRT_ASSIGN_OR_RETURN(a->body, AngleBody());
  // key = value parameters, when the body has that form; read in place,
  // then the cursor goes back to after the '>'.
  const size_t after = pos_;
  const size_t body_end = body_start + a->body.size();
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
  if (ok) a->fields = std::move(fields);
  return absl::OkStatus();
}

absl::Status Reader::NumberAttribute(int depth, Attribute* a) {
  bool is_float = false;
  PJRT_ASSIGN_OR_RETURN(a->text, NumberText(&is_float));
  a->kind = is_float ? Attribute::Kind::kFloat : Attribute::Kind::kInt;
  if (TryConsume(":")) {
    PJRT_ASSIGN_OR_RETURN(a->type, Type(depth + 1));
    a->has_type = true;
    if (IsFloatingPoint(a->type.element_type()))
      a->kind = Attribute::Kind::kFloat;
  }
  return absl::OkStatus();
}

absl::Status Reader::DenseResourceAttribute(int depth, Attribute* a) {
  pos_ += 14;
  a->kind = Attribute::Kind::kDense;
  a->dense_resource = true;
  PJRT_ASSIGN_OR_RETURN(a->text, AngleBody());
  PJRT_RETURN_IF_ERROR(Expect(":", "and the type after dense_resource<...>"));
  PJRT_ASSIGN_OR_RETURN(a->type, Type(depth + 1));
  a->has_type = true;
  return absl::OkStatus();
}

absl::Status Reader::TypedArrayAttribute(int depth, Attribute* a) {
  pos_ += 5;
  a->kind = Attribute::Kind::kArray;
  PJRT_RETURN_IF_ERROR(Expect("<", "after array"));
  PJRT_ASSIGN_OR_RETURN(a->type, Type(depth + 1));
  a->has_type = true;
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
      a->elements.push_back(std::move(element));
    } while (TryConsume(","));
  }
  return Expect(">", "to end array<...>");
}

absl::StatusOr<Attribute> Reader::ParseAttribute(int depth) {
  PJRT_RETURN_IF_ERROR(CheckDepth(depth));
  Attribute a;
  a.position = Here();
  const size_t start = pos_;
  const char c = PeekChar();
  if (c == '[') {
    PJRT_RETURN_IF_ERROR(ArrayAttribute(depth, &a));
    return a;
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
    PJRT_RETURN_IF_ERROR(SymbolAttribute(&a));
    return a;
  }
  if (c == '#') {
    PJRT_RETURN_IF_ERROR(DialectAttribute(depth, &a));
    return a;
  }
  if (c == '<') {
    a.kind = Attribute::Kind::kDialect;
    PJRT_ASSIGN_OR_RETURN(a.body, AngleBody());
    return a;
  }
  if (AtNumber()) {
    PJRT_RETURN_IF_ERROR(NumberAttribute(depth, &a));
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
    PJRT_RETURN_IF_ERROR(DenseResourceAttribute(depth, &a));
    return a;
  }
  if (AtKeyword("array")) {
    PJRT_RETURN_IF_ERROR(TypedArrayAttribute(depth, &a));
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
    Quantizations quantizations;
    const auto result = [&](bool in_list) -> absl::Status {
      std::optional<Quantization> q;
      PJRT_ASSIGN_OR_RETURN(Shape type, QuantizableType(1, &q));
      f.result_types.push_back(std::move(type));
      quantizations.push_back(std::move(q));
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
    for (const auto& q : quantizations) {
      if (q.has_value()) f.result_quantizations = std::move(quantizations);
      if (q.has_value()) break;
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

}  // namespace text_internal

using text_internal::ElementTypeString;
using text_internal::IsSuffixIdChar;

absl::StatusOr<Module> ParseMlirModule(absl::string_view text) {
  text_internal::Reader reader(text);
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
