// The HLO parser's constants: literal values of every element type, nested
// by dimension, checked against the declared shape.
#include "hlo/parser_internal.h"

namespace pjrt::hlo::parser_internal {

absl::Status Parser::ElidedConstantError(const Draft& draft) const {
  return ErrorAt(
      Peek(), absl::StrFormat("the value of constant %s was elided by the "
                              "printer ({...}); print the module with large "
                              "constants, e.g. "
                              "HloPrintOptions().set_print_large_constants("
                              "true), or in JAX "
                              "`lowered.compiler_ir('hlo').as_hlo_text(True)`",
                              DisplayName(draft)));
}

// A constant's elements are all written out, one token or more each, so it
// cannot have more elements than there are tokens left; checking this first
// keeps a hostile shape from allocating without bound.
absl::Status Parser::CheckConstantShape(const Shape& shape,
                                        const Draft& draft) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) {
      PJRT_RETURN_IF_ERROR(CheckConstantShape(element, draft));
    }
    return absl::OkStatus();
  }
  if (!IsArrayType(shape.element_type())) {
    return ErrorAt(draft.line, draft.column,
                   absl::StrFormat("constant %s has shape %s; constants are "
                                   "arrays or tuples of arrays",
                                   DisplayName(draft), shape.ToString()));
  }
  int64_t count = 1;
  for (int64_t d : shape.dimensions()) {
    if (d < 0) {
      return ErrorAt(draft.line, draft.column,
                     absl::StrFormat("constant %s has a dynamic dimension "
                                     "in %s; constants must be static",
                                     DisplayName(draft), shape.ToString()));
    }
    if (d == 0) count = 0;
    const int64_t tokens_left = static_cast<int64_t>(tokens_.size() - pos_);
    if (count > 0 && d > tokens_left / count) {
      return ErrorAt(draft.line, draft.column,
                     absl::StrFormat("constant %s of shape %s has more "
                                     "elements than the rest of the text "
                                     "holds values",
                                     DisplayName(draft), shape.ToString()));
    }
    count *= d;
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseLiteral(const Shape& shape, const Draft& draft,
                                  Literal* literal) {
  if (At(TokenKind::kLBrace) && At(TokenKind::kEllipsis, 1)) {
    return ElidedConstantError(draft);
  }
  PJRT_RETURN_IF_ERROR(CheckConstantShape(shape, draft));
  *literal = Literal(shape);
  return ParseLiteralValue(shape, draft, literal);
}

absl::Status Parser::ParseLiteralValue(const Shape& shape, const Draft& draft,
                                       Literal* literal) {
  NestingScope scope(this);
  PJRT_RETURN_IF_ERROR(CheckNesting());
  if (shape.IsTuple()) {
    const size_t expected = shape.tuple_shapes().size();
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLParen,
               absl::StrFormat("'(' to start the %s tuple value of constant %s",
                               shape.ToString(), DisplayName(draft))));
    for (size_t i = 0; i < expected; ++i) {
      if (i > 0) {
        PJRT_RETURN_IF_ERROR(
            Expect(TokenKind::kComma,
                   absl::StrFormat("',' after element %d of the tuple value of "
                                   "constant %s, which has %d elements",
                                   i - 1, DisplayName(draft), expected)));
      }
      PJRT_RETURN_IF_ERROR(
          ParseLiteralValue(shape.tuple_shapes()[i], draft,
                            &(*literal->mutable_tuple_elements())[i]));
    }
    return Expect(TokenKind::kRParen,
                  absl::StrFormat("')' to end the tuple value of constant %s, "
                                  "which has %d elements",
                                  DisplayName(draft), expected));
  }
  if (shape.rank() == 0) return ParseElement(shape, draft, literal, 0);
  int64_t index = 0;
  return ParseArrayLevel(shape, 0, draft, literal, &index);
}

absl::Status Parser::ParseArrayLevel(const Shape& shape, int level,
                                     const Draft& draft, Literal* literal,
                                     int64_t* index) {
  if (At(TokenKind::kLBrace) && At(TokenKind::kEllipsis, 1)) {
    return ElidedConstantError(draft);
  }
  if (!At(TokenKind::kLBrace)) {
    return Expected(absl::StrFormat(
        "'{' to start dimension %d of constant %s (a %s value has %d levels "
        "of braces)",
        level, DisplayName(draft), shape.ToString(), shape.rank()));
  }
  Next();
  const int64_t expected = shape.dimensions(level);
  int64_t count = 0;
  if (!At(TokenKind::kRBrace)) {
    while (true) {
      if (count == expected) {
        return ErrorAt(
            Peek(), absl::StrFormat("too many elements in dimension %d of "
                                    "constant %s: %s has %d there",
                                    level, DisplayName(draft), shape.ToString(),
                                    expected));
      }
      if (level + 1 == shape.rank()) {
        PJRT_RETURN_IF_ERROR(ParseElement(shape, draft, literal, (*index)++));
      } else {
        PJRT_RETURN_IF_ERROR(
            ParseArrayLevel(shape, level + 1, draft, literal, index));
      }
      ++count;
      if (TryConsume(TokenKind::kComma)) continue;
      if (At(TokenKind::kRBrace)) break;
      return Expected(absl::StrFormat("',' or '}' in the value of constant %s",
                                      DisplayName(draft)));
    }
  }
  if (count != expected) {
    return ErrorAt(
        Peek(), absl::StrFormat("dimension %d of constant %s has %d elements, "
                                "but its shape %s needs %d",
                                level, DisplayName(draft), count,
                                shape.ToString(), expected));
  }
  Next();  // '}'
  return absl::OkStatus();
}

// A floating-point value: a number, inf, -inf, nan or -nan.
absl::StatusOr<double> Parser::ParseFloatValue(PrimitiveType type) {
  const Token& token = Peek();
  double value = 0;
  bool finite_text = true;
  if (token.kind == TokenKind::kName &&
      (token.text == "inf" || token.text == "nan")) {
    value = token.text == "inf" ? std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::quiet_NaN();
    finite_text = false;
  } else if (token.kind == TokenKind::kFloat && token.text == "-inf") {
    value = -std::numeric_limits<double>::infinity();
    finite_text = false;
  } else if (token.kind == TokenKind::kFloat && token.text == "-nan") {
    value = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
    finite_text = false;
  } else if (token.kind == TokenKind::kInt || token.kind == TokenKind::kFloat) {
    if (!absl::SimpleAtod(token.text, &value)) {
      return ErrorAt(token,
                     absl::StrCat("cannot read ", token.text, " as a number"));
    }
  } else {
    return Expected(absl::StrCat("a ", PrimitiveTypeName(type),
                                 " value (a number, inf, -inf or nan)"));
  }
  if (finite_text && std::isinf(value)) {
    return ErrorAt(token,
                   absl::StrCat("value ", token.text, " is out of range for ",
                                PrimitiveTypeName(type)));
  }
  return value;
}

absl::Status Parser::ParseElement(const Shape& shape, const Draft& draft,
                                  Literal* literal, int64_t index) {
  const PrimitiveType type = shape.element_type();
  const absl::string_view type_name = PrimitiveTypeName(type);
  const Token& token = Peek();
  if (token.kind == TokenKind::kLBrace) {
    if (At(TokenKind::kEllipsis, 1)) return ElidedConstantError(draft);
    return ErrorAt(
        token, absl::StrFormat("expected a %s value in constant %s, found '{': "
                               "a %s value has %d levels of braces",
                               type_name, DisplayName(draft), shape.ToString(),
                               shape.rank()));
  }
  const auto out_of_range = [&]() {
    return ErrorAt(token, absl::StrCat("value ", token.text,
                                       " is out of range for ", type_name));
  };

  if (type == PrimitiveType::kPred) {
    uint8_t value;
    if (AtName("true") ||
        (token.kind == TokenKind::kInt && (token.text == "1"))) {
      value = 1;
    } else if (AtName("false") || (token.kind == TokenKind::kInt &&
                                   (token.text == "0" || token.text == "-0"))) {
      value = 0;
    } else {
      return Expected(
          absl::StrFormat("true, false, 0 or 1 for a pred value in constant %s",
                          DisplayName(draft)));
    }
    Next();
    literal->Set<uint8_t>(index, value);
    return absl::OkStatus();
  }

  // s2, u2, s4 and u4 are integers like the others.
  if (IsSignedInteger(type) || IsUnsignedInteger(type)) {
    if (token.kind != TokenKind::kInt) {
      return Expected(absl::StrFormat("an integer %s value in constant %s",
                                      type_name, DisplayName(draft)));
    }
    PJRT_ASSIGN_OR_RETURN(IntValue value, ParseIntToken(type_name));
    const bool is_signed = IsSignedInteger(type);
    const int bits = BitWidth(type);
    uint64_t pattern;
    if (!is_signed) {
      if (value.negative && value.magnitude != 0) {
        return ErrorAt(token, absl::StrCat("negative value ", token.text,
                                           " for unsigned type ", type_name));
      }
      if (bits < 64 && value.magnitude > (uint64_t{1} << bits) - 1) {
        return out_of_range();
      }
      pattern = value.magnitude;
    } else if (value.negative) {
      if (value.magnitude > (uint64_t{1} << (bits - 1))) return out_of_range();
      pattern = 0 - value.magnitude;
    } else {
      // s64 takes values above its range as u64 bit patterns.
      if (bits < 64 && value.magnitude > (uint64_t{1} << (bits - 1)) - 1) {
        return out_of_range();
      }
      pattern = value.magnitude;
    }
    switch (ByteWidth(type)) {
      case 1:
        literal->Set<uint8_t>(index, static_cast<uint8_t>(pattern));
        break;
      case 2:
        literal->Set<uint16_t>(index, static_cast<uint16_t>(pattern));
        break;
      case 4:
        literal->Set<uint32_t>(index, static_cast<uint32_t>(pattern));
        break;
      default:
        literal->Set<uint64_t>(index, pattern);
        break;
    }
    return absl::OkStatus();
  }

  if (type == PrimitiveType::kC64 || type == PrimitiveType::kC128) {
    // (real, imaginary); a bare number is a real value.
    double parts[2] = {0, 0};
    if (TryConsume(TokenKind::kLParen)) {
      PJRT_ASSIGN_OR_RETURN(parts[0], ParseFloatValue(type));
      Next();
      PJRT_RETURN_IF_ERROR(Expect(TokenKind::kComma,
                                  "',' between the parts of a complex value"));
      PJRT_ASSIGN_OR_RETURN(parts[1], ParseFloatValue(type));
      Next();
      PJRT_RETURN_IF_ERROR(
          Expect(TokenKind::kRParen, "')' to end a complex value"));
    } else {
      PJRT_ASSIGN_OR_RETURN(parts[0], ParseFloatValue(type));
      Next();
    }
    for (int i = 0; i < 2; ++i) {
      if (type == PrimitiveType::kC64) {
        float f = static_cast<float>(parts[i]);
        if (std::isinf(f) && !std::isinf(parts[i])) return out_of_range();
        literal->Set<float>(2 * index + i, f);
      } else {
        literal->Set<double>(2 * index + i, parts[i]);
      }
    }
    return absl::OkStatus();
  }

  PJRT_ASSIGN_OR_RETURN(double value, ParseFloatValue(type));
  const bool finite = std::isfinite(value);
  if (IsMiniFloat(type)) {
    const uint8_t b = MiniFloatFromFloat(type, static_cast<float>(value));
    // A finite value past the largest one became infinity or NaN; the
    // finite-only formats saturate, so check the value against the point
    // where rounding would leave their largest one.
    if (finite && !std::isfinite(MiniFloatToFloat(type, b))) {
      return out_of_range();
    }
    if (!finite && IsFiniteOnlyFloat(type)) {
      return ErrorAt(token, absl::StrCat(type_name,
                                         " has no infinity or NaN; "
                                         "got ",
                                         token.text));
    }
    if (finite && IsFiniteOnlyFloat(type)) {
      // The largest code: every bit but the sign's.
      const uint8_t max_code =
          static_cast<uint8_t>((1 << (MiniFloatCodeBits(type) - 1)) - 1);
      const double largest = MiniFloatToFloat(type, max_code);
      const double below = MiniFloatToFloat(type, max_code - 1);
      if (std::fabs(value) >= largest + (largest - below) / 2) {
        return out_of_range();
      }
    }
    literal->Set<uint8_t>(index, b);
    Next();
    return absl::OkStatus();
  }
  switch (type) {
    case PrimitiveType::kF64:
      literal->Set<double>(index, value);
      break;
    case PrimitiveType::kF32: {
      float f = static_cast<float>(value);
      if (finite && std::isinf(f)) return out_of_range();
      literal->Set<float>(index, f);
      break;
    }
    case PrimitiveType::kF16: {
      uint16_t h = FloatToHalf(static_cast<float>(value));
      if (finite && (h & 0x7fffu) == 0x7c00u) return out_of_range();
      literal->Set<uint16_t>(index, h);
      break;
    }
    case PrimitiveType::kBf16: {
      uint16_t b = FloatToBfloat16(static_cast<float>(value));
      if (finite && (b & 0x7fffu) == 0x7f80u) return out_of_range();
      literal->Set<uint16_t>(index, b);
      break;
    }
    default:
      break;
  }
  Next();
  return absl::OkStatus();
}

}  // namespace pjrt::hlo::parser_internal
