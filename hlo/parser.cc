// Implementation notes.
//
// The text is tokenized in one pass (hlo/lexer.h), then parsed by recursive
// descent over the token vector. Lookahead is free, which the grammar needs
// in a few places: an operand is `name`, `shape name`, or a nested
// instruction `[shape] opcode(...)`; an attribute list after a nested
// instruction must be told apart from the next operand (`, name=`); a value
// we do not interpret ends at a top-level ',' or where the next instruction
// begins.
//
// A computation is first read into drafts (one per instruction, nested ones
// included) and only built once its closing brace is read, because operands
// may name instructions defined further down, nested instructions have no
// name until the whole scope is known, and a few instructions are written
// without a shape and get one inferred from their operands. Called
// computations are resolved when the whole module has been read, since they
// may be defined anywhere.
//
// Nothing here trusts the input: every recursion (tuple shapes, literals,
// nested instructions) is capped at kMaxNesting levels, constants are sized
// against the text before anything is allocated for them, and every failure
// is an INVALID_ARGUMENT status pointing at the offending token.
#include "hlo/parser.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "hlo/lexer.h"
#include "hlo/minifloat.h"
#include "hlo/parser_internal.h"

namespace pjrt::hlo {

std::string FormatErrorAt(absl::string_view text, int line, int column,
                          absl::string_view message) {
  std::string out =
      absl::StrFormat("line %d, column %d: %s\n", line, column, message);
  // Find the line; a position past the end shows an empty line.
  absl::string_view source_line;
  if (line >= 1) {
    size_t start = 0;
    bool found = true;
    for (int current = 1; current < line; ++current) {
      size_t newline = text.find('\n', start);
      if (newline == absl::string_view::npos) {
        found = false;
        break;
      }
      start = newline + 1;
    }
    if (found) {
      size_t end = text.find('\n', start);
      if (end == absl::string_view::npos) end = text.size();
      source_line = text.substr(start, end - start);
      if (!source_line.empty() && source_line.back() == '\r') {
        source_line.remove_suffix(1);
      }
    }
  }
  // A long line (a big constant on one line) is shown as a window around
  // the column, so that a message never quotes more than a few hundred
  // bytes of the program.
  constexpr int kContext = 100;
  int first = 0;
  std::string lead;
  if (column - 1 > kContext) {
    first = column - 1 - kContext;
    // Do not start inside a UTF-8 sequence.
    while (static_cast<size_t>(first) < source_line.size() &&
           (static_cast<unsigned char>(source_line[first]) & 0xC0) == 0x80) {
      ++first;
    }
    lead = "...";
  }
  absl::string_view shown = source_line.substr(
      std::min(source_line.size(), static_cast<size_t>(first)));
  std::string trail;
  if (shown.size() > static_cast<size_t>(2 * kContext)) {
    size_t cut = 2 * kContext;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    shown = shown.substr(0, cut);
    trail = "...";
  }
  absl::StrAppend(&out, lead, shown, trail, "\n");
  // Tabs are repeated so that the caret lines up however tabs are shown.
  out.append(lead.size(), ' ');
  for (int i = first; i + 1 < column; ++i) {
    bool tab =
        static_cast<size_t>(i) < source_line.size() && source_line[i] == '\t';
    out.push_back(tab ? '\t' : ' ');
  }
  out.push_back('^');
  return out;
}

namespace parser_internal {

// ---------------------------------------------------------------------------
// Numbers

absl::StatusOr<IntValue> Parser::ParseIntToken(absl::string_view what) {
  const Token& token = Peek();
  if (token.kind != TokenKind::kInt) {
    return Expected(absl::StrCat("an integer for ", what));
  }
  IntValue value;
  absl::string_view digits = token.text;
  if (digits[0] == '-') {
    value.negative = true;
    digits.remove_prefix(1);
  }
  for (char c : digits) {
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (value.magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      return ErrorAt(token, absl::StrCat("integer ", token.text,
                                         " does not fit in 64 bits"));
    }
    value.magnitude = value.magnitude * 10 + d;
  }
  Next();
  return value;
}

absl::StatusOr<int64_t> Parser::ParseInt64(absl::string_view what) {
  const Token& token = Peek();
  PJRT_ASSIGN_OR_RETURN(IntValue value, ParseIntToken(what));
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  if (value.negative) {
    if (value.magnitude > kMax + 1) {
      return ErrorAt(token, absl::StrCat("integer ", token.text,
                                         " is below the int64 range"));
    }
    return static_cast<int64_t>(0 - value.magnitude);
  }
  if (value.magnitude > kMax) {
    return ErrorAt(token, absl::StrCat("integer ", token.text,
                                       " is above the int64 range"));
  }
  return static_cast<int64_t>(value.magnitude);
}

absl::StatusOr<int64_t> Parser::ParseNonNegativeInt(absl::string_view what) {
  const Token& token = Peek();
  PJRT_ASSIGN_OR_RETURN(int64_t value, ParseInt64(what));
  if (value < 0) {
    return ErrorAt(token,
                   absl::StrFormat("%s is %d; it must be >= 0", what, value));
  }
  return value;
}

// {1,2,3} or {}.
absl::StatusOr<std::vector<int64_t>> Parser::ParseIntList(
    absl::string_view what) {
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBrace, absl::StrCat("'{' to start ", what)));
  std::vector<int64_t> values;
  if (TryConsume(TokenKind::kRBrace)) return values;
  while (true) {
    PJRT_ASSIGN_OR_RETURN(int64_t value, ParseInt64(what));
    values.push_back(value);
    if (TryConsume(TokenKind::kComma)) continue;
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kRBrace, absl::StrCat("',' or '}' in ", what)));
    return values;
  }
}

// [1,2,3] or [].
absl::StatusOr<std::vector<int64_t>> Parser::ParseBracketedInts(
    absl::string_view what) {
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBracket, absl::StrCat("'[' to start ", what)));
  std::vector<int64_t> values;
  if (TryConsume(TokenKind::kRBracket)) return values;
  while (true) {
    PJRT_ASSIGN_OR_RETURN(int64_t value, ParseInt64(what));
    values.push_back(value);
    if (TryConsume(TokenKind::kComma)) continue;
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kRBracket, absl::StrCat("',' or ']' in ", what)));
    return values;
  }
}

// ---------------------------------------------------------------------------
// Shapes

bool Parser::AtShape() const {
  if (At(TokenKind::kLParen)) return true;
  return At(TokenKind::kName) && At(TokenKind::kLBracket, 1) &&
         ParseAnyPrimitiveType(Peek().text).has_value();
}

absl::StatusOr<Shape> Parser::ParseShape(bool empty_layout_ok) {
  Shape shape;
  PJRT_RETURN_IF_ERROR(ParseShapeInto(&shape, empty_layout_ok));
  return shape;
}

absl::Status Parser::SkipShape() {
  Shape ignored;
  return ParseShapeInto(&ignored, /*empty_layout_ok=*/true);
}

absl::Status Parser::ParseShapeInto(Shape* shape, bool empty_layout_ok) {
  NestingScope scope(this);
  PJRT_RETURN_IF_ERROR(CheckNesting());
  if (!TryConsume(TokenKind::kLParen)) {
    PJRT_ASSIGN_OR_RETURN(*shape, ParseArrayShape(empty_layout_ok));
    return absl::OkStatus();
  }
  const Token& open = tokens_[pos_ - 1];
  // Elements are parsed in place: no Shape temporaries in this frame.
  std::vector<Shape> elements;
  if (!TryConsume(TokenKind::kRParen)) {
    while (true) {
      elements.emplace_back();
      PJRT_RETURN_IF_ERROR(ParseShapeInto(&elements.back(), true));
      if (TryConsume(TokenKind::kComma)) continue;
      PJRT_RETURN_IF_ERROR(
          Expect(TokenKind::kRParen, "',' or ')' in a tuple shape"));
      break;
    }
  }
  *shape = Shape::Tuple(std::move(elements));
  absl::Status limits = CheckShapeLimits(*shape);
  if (!limits.ok()) return ErrorAt(open, limits.message());
  return absl::OkStatus();
}

absl::StatusOr<Shape> Parser::ParseArrayShape(bool empty_layout_ok) {
  const Token& type_token = Peek();
  std::optional<PrimitiveType> type;
  if (type_token.kind == TokenKind::kName) {
    type = ParseAnyPrimitiveType(type_token.text);
  }
  if (!type.has_value()) {
    return Expected("a shape (such as f32[2,3] or (f32[], s32[]))");
  }
  Next();
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBracket,
             absl::StrCat("'[' after element type ", type_token.text)));
  std::vector<int64_t> dims;
  std::vector<bool> dynamic;
  bool any_dynamic = false;
  if (!TryConsume(TokenKind::kRBracket)) {
    while (true) {
      if (static_cast<int>(dims.size()) == kMaxRank) {
        return ErrorAt(
            Peek(),
            absl::StrFormat("shape has more than %d dimensions", kMaxRank));
      }
      if (AtOther('?')) {
        // Unbounded dynamic dimension: recorded as -1.
        Next();
        dims.push_back(-1);
        dynamic.push_back(true);
        any_dynamic = true;
      } else {
        bool bounded = TryConsume(TokenKind::kLeq);
        PJRT_ASSIGN_OR_RETURN(int64_t dim,
                              ParseNonNegativeInt("a dimension size"));
        dims.push_back(dim);
        dynamic.push_back(bounded);
        any_dynamic |= bounded;
      }
      if (TryConsume(TokenKind::kComma)) continue;
      PJRT_RETURN_IF_ERROR(
          Expect(TokenKind::kRBracket, "',' or ']' in the dimensions"));
      break;
    }
  }
  if ((*type == PrimitiveType::kToken || *type == PrimitiveType::kOpaque) &&
      !dims.empty()) {
    return ErrorAt(type_token,
                   absl::StrCat(type_token.text, " shapes have no dimensions"));
  }
  Shape shape(*type, std::move(dims));
  {
    // Limits before anything is sized from the shape ("?" counts as 0).
    std::vector<int64_t> sizes(shape.dimensions().begin(),
                               shape.dimensions().end());
    for (int64_t& d : sizes) d = std::max<int64_t>(d, 0);
    absl::Status limits = CheckShapeLimits(Shape(*type, std::move(sizes)));
    if (!limits.ok()) return ErrorAt(type_token, limits.message());
  }
  if (any_dynamic) shape.set_dynamic_dimensions(std::move(dynamic));
  if (At(TokenKind::kLBrace) &&
      (At(TokenKind::kInt, 1) || At(TokenKind::kColon, 1) ||
       (empty_layout_ok && At(TokenKind::kRBrace, 1)))) {
    PJRT_RETURN_IF_ERROR(ParseLayout(&shape));
  }
  return shape;
}

// {1,0} or {1,0:T(8,128)(2,1)S(1)}: the minor-to-major order, then tiling,
// memory space and other suffixes that pjrtd ignores.
absl::Status Parser::ParseLayout(Shape* shape) {
  const Token& open = Next();  // '{'
  std::vector<int64_t> minor_to_major;
  while (At(TokenKind::kInt)) {
    PJRT_ASSIGN_OR_RETURN(int64_t dim, ParseInt64("a layout dimension"));
    minor_to_major.push_back(dim);
    if (!TryConsume(TokenKind::kComma)) break;
  }
  if (TryConsume(TokenKind::kColon)) {
    // Suffixes: skip to the matching '}', keeping brackets balanced.
    int depth = 0;
    while (true) {
      const Token& token = Peek();
      if (token.kind == TokenKind::kEof) {
        return ErrorAt(open, "layout '{' is never closed");
      }
      if (token.kind == TokenKind::kRBrace && depth == 0) break;
      if (IsOpener(token.kind)) ++depth;
      if (IsCloser(token.kind)) --depth;
      if (depth < 0) return Expected("'}' to end the layout");
      Next();
    }
  }
  PJRT_RETURN_IF_ERROR(Expect(TokenKind::kRBrace, "',' or '}' in the layout"));
  const int rank = shape->rank();
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(minor_to_major.size()) == rank;
  for (int64_t dim : minor_to_major) {
    if (!valid || dim < 0 || dim >= rank || seen[dim]) {
      valid = false;
      break;
    }
    seen[dim] = true;
  }
  if (!valid) {
    return ErrorAt(open,
                   absl::StrFormat("layout {%s} is not a permutation of the %d "
                                   "dimensions of %s",
                                   absl::StrJoin(minor_to_major, ","), rank,
                                   shape->ToString()));
  }
  shape->set_layout(std::move(minor_to_major));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Module structure

absl::StatusOr<std::unique_ptr<Module>> Parser::ParseModule() {
  if (!AtName("HloModule")) {
    return Expected("'HloModule' at the start of the text");
  }
  Next();
  if (!At(TokenKind::kName)) return Expected("the module name after HloModule");
  auto module =
      std::make_unique<Module>(std::string(StripPercent(Next().text)));
  while (TryConsume(TokenKind::kComma)) {
    PJRT_RETURN_IF_ERROR(ParseHeaderAttribute(module.get()));
  }
  while (!At(TokenKind::kEof)) {
    PJRT_RETURN_IF_ERROR(ParseComputation(module.get()));
  }
  if (module->computations().empty()) {
    return ErrorAt(Peek(), "the module has no computations");
  }
  PJRT_RETURN_IF_ERROR(ResolveCalls(module.get()));
  Computation* entry =
      entry_ != nullptr ? entry_ : module->computations().back().get();
  entry->set_is_entry(true);
  module->set_entry(entry);
  return module;
}

absl::Status Parser::ParseHeaderAttribute(Module* module) {
  if (!At(TokenKind::kName)) {
    return Expected("a module attribute name after ','");
  }
  const Token& name_token = Next();
  absl::string_view name = name_token.text;
  PJRT_RETURN_IF_ERROR(Expect(
      TokenKind::kEqual, absl::StrCat("'=' after module attribute ", name)));
  const size_t start = Peek().offset;
  ModuleConfig* config = module->mutable_config();
  if (name == "replica_count" || name == "num_partitions") {
    const Token& value_token = Peek();
    PJRT_ASSIGN_OR_RETURN(int64_t value, ParseInt64(name));
    if (value < 1 || value > kMaxProgramDevices) {
      return ErrorAt(value_token,
                     absl::StrFormat("%s is %d; it must lie in [1, %d]", name,
                                     value, kMaxProgramDevices));
    }
    (name == "replica_count" ? config->replica_count : config->num_partitions) =
        value;
  } else if (name == "input_output_alias") {
    PJRT_RETURN_IF_ERROR(ParseInputOutputAlias(config));
  } else if (name == "entry_computation_layout") {
    PJRT_RETURN_IF_ERROR(ParseEntryComputationLayout(config));
  } else {
    PJRT_RETURN_IF_ERROR(SkipRawValue(name));
  }
  size_t end = std::max(start, EndOfPrevious());
  config->raw.emplace_back(std::string(name),
                           std::string(text_.substr(start, end - start)));
  return absl::OkStatus();
}

// { {0}: (1, {}, may-alias), {1}: (0, {2}) }
absl::Status Parser::ParseInputOutputAlias(ModuleConfig* config) {
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBrace, "'{' to start input_output_alias"));
  if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
  while (true) {
    InputOutputAlias alias;
    PJRT_ASSIGN_OR_RETURN(
        alias.output_index,
        ParseIntList("an output index of input_output_alias"));
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kColon, "':' after the output index"));
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLParen, "'(' to start an aliased parameter"));
    PJRT_ASSIGN_OR_RETURN(
        alias.parameter_number,
        ParseNonNegativeInt("the parameter number of input_output_alias"));
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kComma, "',' after the parameter number"));
    PJRT_ASSIGN_OR_RETURN(
        alias.parameter_index,
        ParseIntList("a parameter index of input_output_alias"));
    if (TryConsume(TokenKind::kComma)) {
      if (AtName("must-alias")) {
        alias.must_alias = true;
      } else if (!AtName("may-alias")) {
        return Expected("may-alias or must-alias");
      }
      Next();
    }
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kRParen, "')' to end an aliased parameter"));
    config->input_output_aliases.push_back(std::move(alias));
    if (TryConsume(TokenKind::kComma)) continue;
    return Expect(TokenKind::kRBrace, "',' or '}' in input_output_alias");
  }
}

// {(f32[2]{0}, s32[])->f32[2]{0}}
absl::Status Parser::ParseEntryComputationLayout(ModuleConfig* config) {
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBrace, "'{' to start entry_computation_layout"));
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLParen, "'(' to start the parameter layouts"));
  std::vector<Shape> parameters;
  if (!TryConsume(TokenKind::kRParen)) {
    while (true) {
      PJRT_ASSIGN_OR_RETURN(Shape shape, ParseShape());
      parameters.push_back(std::move(shape));
      if (TryConsume(TokenKind::kComma)) continue;
      PJRT_RETURN_IF_ERROR(
          Expect(TokenKind::kRParen, "',' or ')' in the parameter layouts"));
      break;
    }
  }
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kArrow, "'->' before the result layout"));
  PJRT_ASSIGN_OR_RETURN(Shape result, ParseShape());
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kRBrace, "'}' to end entry_computation_layout"));
  config->entry_parameter_layouts = std::move(parameters);
  config->entry_result_layout = std::move(result);
  return absl::OkStatus();
}

// [ENTRY] name [(p: shape, ...) -> shape] { instructions } [, attr=value]*
absl::Status Parser::ParseComputation(Module* module) {
  bool is_entry = false;
  const Token* entry_token = nullptr;
  if (AtName("ENTRY")) {
    entry_token = &Next();
    is_entry = true;
  }
  if (!At(TokenKind::kName)) {
    return Expected(is_entry ? "a computation name after ENTRY"
                             : "a computation (such as 'ENTRY main { ... }')");
  }
  const Token& name_token = Next();
  ComputationState state;
  state.name = std::string(StripPercent(name_token.text));
  state.line = name_token.line;
  state.column = name_token.column;
  if (computations_by_name_.contains(state.name)) {
    const Computation* first = computations_by_name_[state.name];
    return ErrorAt(name_token,
                   absl::StrFormat("duplicate computation name %%%s; it is "
                                   "already defined at line %d",
                                   state.name, first->line()));
  }
  if (is_entry && entry_ != nullptr) {
    return ErrorAt(*entry_token,
                   absl::StrFormat("a second ENTRY computation %%%s; %%%s "
                                   "(line %d) is already the entry",
                                   state.name, entry_->name(), entry_->line()));
  }
  if (TryConsume(TokenKind::kLParen)) {
    state.has_signature = true;
    if (!TryConsume(TokenKind::kRParen)) {
      while (true) {
        if (!At(TokenKind::kName)) {
          return Expected(absl::StrFormat(
              "a parameter name in the signature of %%%s", state.name));
        }
        const Token& param = Next();
        PJRT_RETURN_IF_ERROR(
            Expect(TokenKind::kColon,
                   absl::StrCat("':' after parameter ", param.text)));
        PJRT_ASSIGN_OR_RETURN(Shape shape, ParseShape());
        state.signature.push_back(std::move(shape));
        state.signature_positions.emplace_back(param.line, param.column);
        if (TryConsume(TokenKind::kComma)) continue;
        PJRT_RETURN_IF_ERROR(
            Expect(TokenKind::kRParen,
                   absl::StrFormat("',' or ')' in the signature of %%%s",
                                   state.name)));
        break;
      }
    }
    if (TryConsume(TokenKind::kArrow)) {
      PJRT_RETURN_IF_ERROR(ParseShape(/*empty_layout_ok=*/false).status());
    }
  }
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLBrace,
             absl::StrFormat("'{' to start the body of computation %%%s",
                             state.name)));
  while (!At(TokenKind::kRBrace)) {
    if (At(TokenKind::kEof)) {
      return Expected(
          absl::StrFormat("'}' to end computation %%%s", state.name));
    }
    PJRT_RETURN_IF_ERROR(ParseInstruction(&state));
  }
  const Token& close = Next();
  if (state.drafts.empty()) {
    return ErrorAt(
        close,
        absl::StrFormat("computation %%%s has no instructions", state.name));
  }
  // Attributes of the computation itself (execution_thread=...): skipped.
  while (At(TokenKind::kComma)) {
    Next();
    if (!At(TokenKind::kName)) {
      return Expected("a computation attribute name after ','");
    }
    const Token& attribute = Next();
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kEqual,
               absl::StrCat("'=' after attribute ", attribute.text)));
    PJRT_RETURN_IF_ERROR(SkipRawValue(attribute.text));
  }
  PJRT_RETURN_IF_ERROR(FinishComputation(&state, module));
  Computation* computation = module->computations().back().get();
  computations_by_name_[state.name] = computation;
  if (is_entry) entry_ = computation;
  return absl::OkStatus();
}

// [ROOT] name = [shape] opcode(operands)[, attr=value]*
absl::Status Parser::ParseInstruction(ComputationState* state) {
  bool is_root = false;
  if (AtName("ROOT") && At(TokenKind::kName, 1)) {
    Next();
    is_root = true;
  }
  if (!At(TokenKind::kName)) {
    return Expected(absl::StrFormat(
        "an instruction (such as 'x = f32[] add(a, b)') or '}' in "
        "computation %%%s",
        state->name));
  }
  const Token& name_token = Next();
  Draft draft;
  draft.name = std::string(StripPercent(name_token.text));
  draft.line = name_token.line;
  draft.column = name_token.column;
  if (auto it = state->by_name.find(draft.name); it != state->by_name.end()) {
    return ErrorAt(name_token,
                   absl::StrFormat("duplicate instruction name %%%s in "
                                   "computation %%%s; it is already defined "
                                   "at line %d",
                                   draft.name, state->name,
                                   state->drafts[it->second].line));
  }
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kEqual,
             absl::StrFormat("'=' after instruction name %%%s", draft.name)));
  PJRT_RETURN_IF_ERROR(ParseInstructionRhs(state, &draft, /*nested=*/false));
  const int index = static_cast<int>(state->drafts.size());
  if (is_root) {
    if (state->root >= 0) {
      return ErrorAt(name_token,
                     absl::StrFormat("computation %%%s has a second ROOT %%%s; "
                                     "%s is already its root",
                                     state->name, draft.name,
                                     DisplayName(state->drafts[state->root])));
    }
    state->root = index;
  }
  state->by_name.emplace(draft.name, index);
  state->drafts.push_back(std::move(draft));
  return absl::OkStatus();
}

absl::Status Parser::ParseInstructionRhs(ComputationState* state, Draft* draft,
                                         bool nested) {
  NestingScope scope(this);
  PJRT_RETURN_IF_ERROR(CheckNesting());
  if (AtShape()) {
    draft->shape.emplace();
    PJRT_RETURN_IF_ERROR(ParseShapeInto(&*draft->shape, true));
  }
  if (!At(TokenKind::kName) || !At(TokenKind::kLParen, 1)) {
    if (nested) return Expected("an opcode and '(' in a nested instruction");
    return Expected(absl::StrFormat(
        "%s and '(' for %s",
        draft->shape.has_value() ? "an opcode" : "a shape or an opcode",
        DisplayName(*draft)));
  }
  const Token& opcode_token = Next();
  draft->opcode_name = std::string(opcode_token.text);
  draft->opcode = OpcodeFromName(opcode_token.text);
  Next();  // '('
  if (draft->opcode == Opcode::kParameter ||
      draft->opcode == Opcode::kConstant) {
    PJRT_RETURN_IF_ERROR(ParseParameterOrConstant(opcode_token, draft));
  } else {
    PJRT_RETURN_IF_ERROR(ParseOperands(state, draft));
  }

  // Attributes. After a nested instruction, a ',' may instead separate the
  // next operand; an attribute is always `name=`.
  while (At(TokenKind::kComma) &&
         (!nested || (At(TokenKind::kName, 1) && At(TokenKind::kEqual, 2)))) {
    Next();
    PJRT_RETURN_IF_ERROR(ParseAttribute(draft));
  }
  return absl::OkStatus();
}

// What follows '(' in parameter(N) and constant(value).
absl::Status Parser::ParseParameterOrConstant(const Token& opcode_token,
                                              Draft* draft) {
  if (draft->opcode == Opcode::kParameter) {
    draft->is_parameter = true;
    PJRT_ASSIGN_OR_RETURN(
        draft->attributes.parameter_number,
        ParseNonNegativeInt(
            absl::StrCat("the parameter number of ", DisplayName(*draft))));
    PJRT_RETURN_IF_ERROR(Expect(
        TokenKind::kRParen, absl::StrCat("')' after the parameter number of ",
                                         DisplayName(*draft))));
    if (!draft->shape.has_value()) {
      return ErrorAt(opcode_token,
                     absl::StrCat("parameter ", DisplayName(*draft),
                                  " needs a shape before 'parameter'"));
    }
  } else if (draft->opcode == Opcode::kConstant) {
    if (!draft->shape.has_value()) {
      return ErrorAt(opcode_token,
                     absl::StrCat("constant ", DisplayName(*draft),
                                  " needs a shape before 'constant'"));
    }
    PJRT_RETURN_IF_ERROR(
        ParseLiteral(*draft->shape, *draft, &draft->attributes.literal));
    PJRT_RETURN_IF_ERROR(Expect(
        TokenKind::kRParen,
        absl::StrCat("')' after the value of constant ", DisplayName(*draft))));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseOperands(ComputationState* state, Draft* draft) {
  if (TryConsume(TokenKind::kRParen)) return absl::OkStatus();
  while (true) {
    const int number = static_cast<int>(draft->operands.size()) + 1;
    const size_t start_pos = pos_;
    const Token& start = Peek();
    OperandRef ref;
    ref.line = start.line;
    ref.column = start.column;
    bool has_shape = false;
    if (AtShape()) {
      // The operand's shape is informative only; the verifier checks shapes.
      PJRT_RETURN_IF_ERROR(SkipShape());
      has_shape = true;
    }
    if (At(TokenKind::kName) && At(TokenKind::kLParen, 1)) {
      // A nested instruction: `[shape] opcode(...)`. Rewind to its shape so
      // that it is parsed with it.
      if (has_shape) pos_ = start_pos;
      PJRT_RETURN_IF_ERROR(ParseNestedInstruction(state, start_pos, &ref));
    } else if (At(TokenKind::kName)) {
      const Token& name = Next();
      ref.name = std::string(StripPercent(name.text));
      ref.line = name.line;
      ref.column = name.column;
    } else {
      return Expected(
          absl::StrFormat("operand %d of %s (a name, or a shape and a name)",
                          number, DisplayName(*draft)));
    }
    draft->operands.push_back(std::move(ref));
    if (TryConsume(TokenKind::kComma)) continue;
    if (TryConsume(TokenKind::kRParen)) return absl::OkStatus();
    return Expected(absl::StrFormat("',' or ')' after operand %d of %s", number,
                                    DisplayName(*draft)));
  }
}

absl::Status Parser::ParseNestedInstruction(ComputationState* state,
                                            size_t start, OperandRef* ref) {
  // On the heap: a Draft is large, and this recursion may be deep.
  auto nested = std::make_unique<Draft>();
  nested->nested = true;
  nested->line = tokens_[start].line;
  nested->column = tokens_[start].column;
  PJRT_RETURN_IF_ERROR(ParseInstructionRhs(state, nested.get(), true));
  ref->draft = static_cast<int>(state->drafts.size());
  state->drafts.push_back(std::move(*nested));
  return absl::OkStatus();
}

absl::Status Parser::FinishComputation(ComputationState* state,
                                       Module* module) {
  std::vector<Draft>& drafts = state->drafts;

  // Name the nested instructions: opcode.N, clear of every written name.
  int counter = 0;
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (!drafts[i].nested) continue;
    std::string name;
    do {
      name = absl::StrCat(drafts[i].opcode_name, ".", ++counter);
    } while (state->by_name.contains(name));
    drafts[i].name = name;
    state->by_name.emplace(std::move(name), static_cast<int>(i));
  }

  // Resolve operands by name.
  for (Draft& draft : drafts) {
    for (size_t j = 0; j < draft.operands.size(); ++j) {
      OperandRef& ref = draft.operands[j];
      if (ref.draft >= 0) continue;
      auto it = state->by_name.find(ref.name);
      if (it == state->by_name.end()) {
        return ErrorAt(
            ref.line, ref.column,
            absl::StrFormat("operand %d of %s is %%%s, which is "
                            "not defined in computation %%%s",
                            j + 1, DisplayName(draft), ref.name, state->name));
      }
      ref.draft = it->second;
    }
  }

  PJRT_RETURN_IF_ERROR(InferShapes(state));
  PJRT_RETURN_IF_ERROR(CheckParameters(state));

  auto computation = std::make_unique<Computation>(state->name);
  computation->set_line(state->line);
  std::vector<Instruction*> built;
  built.reserve(drafts.size());
  for (Draft& draft : drafts) {
    auto instruction = std::make_unique<Instruction>(
        draft.name, draft.opcode, draft.opcode_name, std::move(*draft.shape));
    instruction->set_position(draft.line, draft.column);
    *instruction->mutable_attributes() = std::move(draft.attributes);
    built.push_back(computation->AddInstruction(std::move(instruction)));
  }
  for (size_t i = 0; i < drafts.size(); ++i) {
    for (const OperandRef& ref : drafts[i].operands) {
      built[i]->AddOperand(built[ref.draft]);
    }
    if (!drafts[i].called.empty()) {
      pending_calls_.push_back({built[i], std::move(drafts[i].called)});
    }
  }
  const size_t root =
      state->root >= 0 ? static_cast<size_t>(state->root) : drafts.size() - 1;
  computation->set_root(built[root]);
  Computation* added = module->AddComputation(std::move(computation));
  // CheckParameters has validated numbering; list the parameters by number.
  std::vector<Instruction*>* parameters = added->mutable_parameters();
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (!drafts[i].is_parameter) continue;
    size_t number =
        static_cast<size_t>(built[i]->attributes().parameter_number);
    if (parameters->size() <= number) parameters->resize(number + 1);
    (*parameters)[number] = built[i];
  }
  return absl::OkStatus();
}

// Gives a shape to instructions written without one, from their operands,
// in dependency order (operands may be written after their users), so that
// the work is linear in the number of instructions.
absl::Status Parser::InferShapes(ComputationState* state) {
  std::vector<Draft>& drafts = state->drafts;
  // Infers `draft`'s shape if its operands' shapes are known.
  const auto infer = [&](Draft& draft) -> absl::Status {
    const auto operand_shape = [&](size_t i) -> const Shape* {
      if (i >= draft.operands.size()) return nullptr;
      const Draft& operand = drafts[draft.operands[i].draft];
      return operand.shape.has_value() ? &*operand.shape : nullptr;
    };
    for (size_t i = 0; i < draft.operands.size(); ++i) {
      if (operand_shape(i) == nullptr) return absl::OkStatus();
    }
    std::optional<Shape> inferred;
    switch (ShapeRuleFor(draft.opcode)) {
      case ShapeRule::kSameAsOperand0:
        if (const Shape* s = operand_shape(0)) inferred = *s;
        break;
      case ShapeRule::kSameAsOperand1:
        if (const Shape* s = operand_shape(1)) inferred = *s;
        break;
      case ShapeRule::kPredOfOperand0:
        if (const Shape* s = operand_shape(0); s && !s->IsTuple()) {
          std::vector<int64_t> dims(s->dimensions().begin(),
                                    s->dimensions().end());
          inferred = Shape(PrimitiveType::kPred, std::move(dims));
        }
        break;
      case ShapeRule::kNone:
        if (draft.opcode == Opcode::kTuple) {
          std::vector<Shape> elements;
          for (size_t i = 0; i < draft.operands.size(); ++i) {
            elements.push_back(*operand_shape(i));
          }
          inferred = Shape::Tuple(std::move(elements));
          // Tuples of tuples grow fast; stop before anything walks them.
          absl::Status limits = CheckShapeLimits(*inferred);
          if (!limits.ok()) {
            return ErrorAt(
                draft.line, draft.column,
                absl::StrCat(DisplayName(draft), ": ", limits.message()));
          }
        } else if (draft.opcode == Opcode::kGetTupleElement &&
                   draft.attributes.has("index")) {
          const Shape* s = operand_shape(0);
          int64_t index = draft.attributes.tuple_index;
          if (s && s->IsTuple() && index >= 0 &&
              index < static_cast<int64_t>(s->tuple_shapes().size())) {
            inferred = s->tuple_shapes()[index];
          }
        }
        break;
    }
    draft.shape = std::move(inferred);
    return absl::OkStatus();
  };
  // Iterative post-order over the operands still without a shape.
  std::vector<uint8_t> visited(drafts.size(), 0);
  for (size_t start = 0; start < drafts.size(); ++start) {
    if (drafts[start].shape.has_value() || visited[start]) continue;
    visited[start] = 1;
    std::vector<std::pair<int, size_t>> stack = {{static_cast<int>(start), 0}};
    while (!stack.empty()) {
      const int d = stack.back().first;
      const size_t next = stack.back().second++;
      if (next < drafts[d].operands.size()) {
        const int o = drafts[d].operands[next].draft;
        if (!drafts[o].shape.has_value() && !visited[o]) {
          visited[o] = 1;
          stack.push_back({o, 0});
        }
        continue;
      }
      PJRT_RETURN_IF_ERROR(infer(drafts[d]));
      stack.pop_back();
    }
  }
  for (const Draft& draft : drafts) {
    if (draft.shape.has_value()) continue;
    return ErrorAt(draft.line, draft.column,
                   absl::StrFormat("%s (%s) has no shape, and none can be "
                                   "inferred from its operands; write the "
                                   "shape before the opcode",
                                   DisplayName(draft), draft.opcode_name));
  }
  return absl::OkStatus();
}

absl::Status Parser::CheckParameters(ComputationState* state) {
  const std::vector<Draft>& drafts = state->drafts;
  absl::flat_hash_map<int64_t, int> by_number;
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (!drafts[i].is_parameter) continue;
    int64_t number = drafts[i].attributes.parameter_number;
    auto [it, inserted] = by_number.emplace(number, static_cast<int>(i));
    if (!inserted) {
      return ErrorAt(
          drafts[i].line, drafts[i].column,
          absl::StrFormat("duplicate parameter number %d in computation "
                          "%%%s: %s (line %d) is already parameter %d",
                          number, state->name, DisplayName(drafts[it->second]),
                          drafts[it->second].line, number));
    }
    numbers.push_back(number);
  }
  std::sort(numbers.begin(), numbers.end());
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (numbers[i] == static_cast<int64_t>(i)) continue;
    const Draft& offender = drafts[by_number[numbers[i]]];
    return ErrorAt(
        offender.line, offender.column,
        absl::StrFormat("parameter %d is missing: the computation "
                        "%%%s has parameter%s %s",
                        i, state->name, numbers.size() == 1 ? "" : "s",
                        FormatNumberList(numbers)));
  }
  if (!state->has_signature) return absl::OkStatus();
  if (state->signature.size() != numbers.size()) {
    return ErrorAt(state->line, state->column,
                   absl::StrFormat("the signature of computation %%%s declares "
                                   "%d parameter%s, but the body has %d",
                                   state->name, state->signature.size(),
                                   state->signature.size() == 1 ? "" : "s",
                                   numbers.size()));
  }
  for (size_t i = 0; i < numbers.size(); ++i) {
    const Draft& parameter = drafts[by_number[static_cast<int64_t>(i)]];
    if (*parameter.shape == state->signature[i]) continue;
    return ErrorAt(
        parameter.line, parameter.column,
        absl::StrFormat("parameter %d (%s) has shape %s, but the "
                        "signature of %%%s declares %s (line %d, "
                        "column %d)",
                        i, DisplayName(parameter), parameter.shape->ToString(),
                        state->name, state->signature[i].ToString(),
                        state->signature_positions[i].first,
                        state->signature_positions[i].second));
  }
  return absl::OkStatus();
}

absl::Status Parser::ResolveCalls(Module* module) {
  for (PendingCalls& pending : pending_calls_) {
    std::stable_sort(pending.refs.begin(), pending.refs.end(),
                     [](const CalledRef& a, const CalledRef& b) {
                       return a.order < b.order;
                     });
    for (const CalledRef& ref : pending.refs) {
      auto it = computations_by_name_.find(ref.name);
      if (it == computations_by_name_.end()) {
        return ErrorAt(
            ref.line, ref.column,
            absl::StrFormat("unknown computation %%%s in %s= of %s", ref.name,
                            ref.attribute, pending.instruction->Describe()));
      }
      pending.instruction->AddCalledComputation(it->second);
    }
  }
  return absl::OkStatus();
}

}  // namespace parser_internal

absl::StatusOr<std::unique_ptr<Module>> ParseHloModule(absl::string_view text) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  parser_internal::Parser parser(text, std::move(tokens));
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, parser.ParseModule());
  parser_internal::UpgradeLegacyForms(module.get());
  return module;
}

}  // namespace pjrt::hlo
