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
#include "hlo/float8.h"
#include "hlo/lexer.h"

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

namespace {

// Deepest nesting of tuple shapes, literals or nested instructions accepted.
constexpr int kMaxNesting = 512;
// Most replica ids an iota replica group list may expand to: every device of
// a launch.
constexpr int64_t kMaxIotaReplicaIds = kMaxProgramDevices;
// Most ids all the iota replica group lists of a module may expand to.
constexpr int64_t kMaxExpandedReplicaIds = int64_t{1} << 22;

// What an instruction says, before names are resolved and the Instruction is
// built.
struct OperandRef {
  std::string name;  // without '%'; empty for a nested instruction
  int draft = -1;    // index of the draft it refers to, once known
  int line = 0;
  int column = 0;
};

struct CalledRef {
  int order = 0;  // position in Instruction::called_computations order
  std::string attribute;
  std::string name;  // without '%'
  int line = 0;
  int column = 0;
};

struct Draft {
  std::string name;  // without '%'; empty for a nested instruction until named
  bool nested = false;
  int line = 0;
  int column = 0;
  std::optional<Shape> shape;
  Opcode opcode = Opcode::kOther;
  std::string opcode_name;
  std::vector<OperandRef> operands;
  Attributes attributes;
  std::vector<CalledRef> called;
  bool is_parameter = false;
};

struct ComputationState {
  std::string name;
  int line = 0;
  int column = 0;
  std::vector<Draft> drafts;
  absl::flat_hash_map<std::string, int> by_name;
  int root = -1;
  // The signature, if written: parameter shapes and where each is written.
  bool has_signature = false;
  std::vector<Shape> signature;
  std::vector<std::pair<int, int>> signature_positions;
};

struct PendingCalls {
  Instruction* instruction;
  std::vector<CalledRef> refs;
};

// For messages: "%add.3", or "the nested add" for an unnamed instruction.
std::string DisplayName(const Draft& draft) {
  if (draft.name.empty()) return absl::StrCat("the nested ", draft.opcode_name);
  return absl::StrCat("%", draft.name);
}

absl::string_view StripPercent(absl::string_view name) {
  if (!name.empty() && name[0] == '%') name.remove_prefix(1);
  return name;
}

bool IsOpener(TokenKind kind) {
  return kind == TokenKind::kLBrace || kind == TokenKind::kLBracket ||
         kind == TokenKind::kLParen;
}
bool IsCloser(TokenKind kind) {
  return kind == TokenKind::kRBrace || kind == TokenKind::kRBracket ||
         kind == TokenKind::kRParen;
}
char CloserFor(TokenKind opener) {
  switch (opener) {
    case TokenKind::kLBrace:
      return '}';
    case TokenKind::kLBracket:
      return ']';
    default:
      return ')';
  }
}

// "0", "0 and 2", "0, 2 and 3"; long lists are cut short.
std::string FormatNumberList(const std::vector<int64_t>& numbers) {
  constexpr size_t kMaxShown = 8;
  if (numbers.size() > kMaxShown) {
    std::vector<int64_t> head(numbers.begin(), numbers.begin() + kMaxShown);
    return absl::StrCat(absl::StrJoin(head, ", "), ", ... (", numbers.size(),
                        " in all)");
  }
  if (numbers.size() <= 1) return absl::StrJoin(numbers, "");
  std::vector<int64_t> head(numbers.begin(), numbers.end() - 1);
  return absl::StrCat(absl::StrJoin(head, ", "), " and ", numbers.back());
}

// The order of Instruction::called_computations, by attribute; -1 for
// attributes that do not name computations.
int CalledComputationOrder(absl::string_view attribute) {
  static constexpr std::pair<absl::string_view, int> kOrder[] = {
      {"to_apply", 0},
      {"calls", 1},
      {"called_computations", 1},
      {"condition", 2},
      {"body", 3},
      {"branch_computations", 4},
      {"true_computation", 5},
      {"false_computation", 6},
      {"comparator", 7},
      {"select", 8},
      {"scatter", 9},
  };
  for (const auto& [name, order] : kOrder) {
    if (name == attribute) return order;
  }
  return -1;
}

// Same shape as the operand (or the operand's dimensions with pred for
// comparisons): what lets XLA's printer leave the shape out.
enum class ShapeRule {
  kNone,
  kSameAsOperand0,
  kSameAsOperand1,
  kPredOfOperand0
};

ShapeRule ShapeRuleFor(Opcode opcode) {
  switch (FamilyOf(opcode)) {
    case OpFamily::kUnary:
    case OpFamily::kBinary:
      return ShapeRule::kSameAsOperand0;
    case OpFamily::kElementwise:
      if (opcode == Opcode::kSelect || opcode == Opcode::kClamp) {
        return ShapeRule::kSameAsOperand1;
      }
      if (opcode == Opcode::kCompare || opcode == Opcode::kIsFinite) {
        return ShapeRule::kPredOfOperand0;
      }
      return ShapeRule::kNone;
    case OpFamily::kDataMovement:
    case OpFamily::kCompute:
    case OpFamily::kCollective:
    case OpFamily::kStructure:
      return ShapeRule::kNone;
  }
  return ShapeRule::kNone;
}

bool IsUnconvertedFloatType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF8E4M3B11FNUZ:
    case PrimitiveType::kF8E5M2FNUZ:
    case PrimitiveType::kF8E4M3FNUZ:
    case PrimitiveType::kF8E4M3:
    case PrimitiveType::kF8E3M4:
    case PrimitiveType::kF4E2M1FN:
    case PrimitiveType::kF8E8M0FNU:
      return true;
    default:
      return false;
  }
}

// An integer token's value: sign and magnitude, any 64-bit magnitude.
struct IntValue {
  bool negative = false;
  uint64_t magnitude = 0;
};

class Parser {
 public:
  Parser(absl::string_view text, std::vector<Token> tokens)
      : text_(text), tokens_(std::move(tokens)) {}

  absl::StatusOr<std::unique_ptr<Module>> ParseModule();

 private:
  // Keeps track of recursion depth; see CheckNesting.
  class NestingScope {
   public:
    explicit NestingScope(Parser* parser) : parser_(parser) {
      ++parser_->depth_;
    }
    ~NestingScope() { --parser_->depth_; }
    NestingScope(const NestingScope&) = delete;
    NestingScope& operator=(const NestingScope&) = delete;

   private:
    Parser* parser_;
  };

  // ---- Tokens --------------------------------------------------------
  const Token& Peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool At(TokenKind kind, size_t ahead = 0) const {
    return Peek(ahead).kind == kind;
  }
  bool AtName(absl::string_view name, size_t ahead = 0) const {
    const Token& token = Peek(ahead);
    return token.kind == TokenKind::kName && token.text == name;
  }
  bool AtOther(char c) const {
    return At(TokenKind::kOther) && Peek().text[0] == c;
  }
  bool TryConsume(TokenKind kind) {
    if (!At(kind)) return false;
    Next();
    return true;
  }
  // End of the last consumed token, as an offset into the text.
  size_t EndOfPrevious() const {
    if (pos_ == 0) return 0;
    const Token& token = tokens_[pos_ - 1];
    return token.offset + token.text.size();
  }

  ABSL_ATTRIBUTE_NOINLINE absl::Status ErrorAt(
      int line, int column, absl::string_view message) const {
    return absl::InvalidArgumentError(
        FormatErrorAt(text_, line, column, message));
  }
  ABSL_ATTRIBUTE_NOINLINE absl::Status ErrorAt(
      const Token& token, absl::string_view message) const {
    return ErrorAt(token.line, token.column, message);
  }
  // "expected <what>, found <next token>" at the next token.
  ABSL_ATTRIBUTE_NOINLINE absl::Status Expected(absl::string_view what) const {
    return ErrorAt(Peek(), absl::StrCat("expected ", what, ", found ",
                                        DescribeToken(Peek())));
  }
  // Consumes a token of `kind` or fails with "expected <what>".
  absl::Status Expect(TokenKind kind, absl::string_view what) {
    if (!TryConsume(kind)) return Expected(what);
    return absl::OkStatus();
  }
  absl::Status CheckNesting() const {
    if (depth_ > kMaxNesting) return NestingError();
    return absl::OkStatus();
  }
  ABSL_ATTRIBUTE_NOINLINE absl::Status NestingError() const {
    return ErrorAt(Peek(), absl::StrFormat("nesting is deeper than %d levels",
                                           kMaxNesting));
  }

  // ---- Numbers -------------------------------------------------------
  absl::StatusOr<IntValue> ParseIntToken(absl::string_view what);
  absl::StatusOr<int64_t> ParseInt64(absl::string_view what);
  absl::StatusOr<int64_t> ParseNonNegativeInt(absl::string_view what);
  absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view what);
  absl::StatusOr<std::vector<int64_t>> ParseBracketedInts(
      absl::string_view what);

  // ---- Shapes --------------------------------------------------------
  bool AtShape() const;
  // `empty_layout_ok`: whether `{}` after a shape is its layout (false where
  // a computation body may follow).
  absl::StatusOr<Shape> ParseShape(bool empty_layout_ok = true);
  absl::Status ParseShapeInto(Shape* shape, bool empty_layout_ok);
  ABSL_ATTRIBUTE_NOINLINE absl::Status SkipShape();
  // The recursive functions keep their own frames small (big locals live in
  // these helpers) so that kMaxNesting levels fit in a modest thread stack.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Shape> ParseArrayShape(
      bool empty_layout_ok);
  absl::Status ParseLayout(Shape* shape);

  // ---- Module structure ----------------------------------------------
  absl::Status ParseHeaderAttribute(Module* module);
  absl::Status ParseInputOutputAlias(ModuleConfig* config);
  absl::Status ParseEntryComputationLayout(ModuleConfig* config);
  absl::Status ParseComputation(Module* module);
  absl::Status ParseInstruction(ComputationState* state);
  // Parses `[shape] opcode(operands)[, attributes]` into `draft`; nested
  // instructions met on the way are appended to state->drafts.
  absl::Status ParseInstructionRhs(ComputationState* state, Draft* draft,
                                   bool nested);
  ABSL_ATTRIBUTE_NOINLINE absl::Status ParseParameterOrConstant(
      const Token& opcode_token, Draft* draft);
  ABSL_ATTRIBUTE_NOINLINE absl::Status ParseOperands(ComputationState* state,
                                                     Draft* draft);
  ABSL_ATTRIBUTE_NOINLINE absl::Status ParseNestedInstruction(
      ComputationState* state, size_t start, OperandRef* ref);
  absl::Status FinishComputation(ComputationState* state, Module* module);
  absl::Status InferShapes(ComputationState* state);
  absl::Status CheckParameters(ComputationState* state);
  absl::Status ResolveCalls(Module* module);

  // ---- Attributes ----------------------------------------------------
  ABSL_ATTRIBUTE_NOINLINE absl::Status ParseAttribute(Draft* draft);
  absl::Status ParseKnownAttribute(absl::string_view name, Draft* draft,
                                   bool* known);
  absl::Status ParseComputationRefs(absl::string_view attribute, int order,
                                    Draft* draft);
  absl::Status ParseReplicaGroups(Attributes* attributes);
  absl::Status ParseSlice(Attributes* attributes);
  absl::Status ParsePadding(Attributes* attributes);
  absl::StatusOr<bool> ParseBool(absl::string_view what);
  // Skips a value we keep only as text: balanced brackets, strings, up to a
  // top-level ',' or closer, or the start of what follows on a new line.
  absl::Status SkipRawValue(absl::string_view attribute);

  // ---- Literals ------------------------------------------------------
  absl::Status CheckConstantShape(const Shape& shape, const Draft& draft);
  absl::Status ParseLiteral(const Shape& shape, const Draft& draft,
                            Literal* literal);
  absl::Status ParseLiteralValue(const Shape& shape, const Draft& draft,
                                 Literal* literal);
  absl::Status ParseArrayLevel(const Shape& shape, int level,
                               const Draft& draft, Literal* literal,
                               int64_t* index);
  absl::Status ParseElement(const Shape& shape, const Draft& draft,
                            Literal* literal, int64_t index);
  absl::StatusOr<double> ParseFloatValue(PrimitiveType type);
  absl::Status ElidedConstantError(const Draft& draft) const;

  absl::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int64_t expanded_replica_ids_ = 0;

  std::vector<PendingCalls> pending_calls_;
  absl::flat_hash_map<std::string, Computation*> computations_by_name_;
  Computation* entry_ = nullptr;
};

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

// ---------------------------------------------------------------------------
// Attributes

absl::Status Parser::ParseAttribute(Draft* draft) {
  if (!At(TokenKind::kName) || Peek().text[0] == '%') {
    return Expected(
        absl::StrCat("an attribute name after ',' in ", DisplayName(*draft)));
  }
  const Token& name_token = Next();
  const std::string name(name_token.text);
  if (draft->attributes.has(name)) {
    return ErrorAt(name_token,
                   absl::StrFormat("attribute %s of %s is given twice", name,
                                   DisplayName(*draft)));
  }
  PJRT_RETURN_IF_ERROR(Expect(TokenKind::kEqual,
                              absl::StrFormat("'=' after attribute %s", name)));
  const size_t start_pos = pos_;
  const size_t start = Peek().offset;
  bool known = false;
  absl::Status status = ParseKnownAttribute(name, draft, &known);
  if (!status.ok()) {
    // An op pjrtd does not know may use a known name differently: keep it
    // as text rather than reject it.
    if (draft->opcode != Opcode::kOther) return status;
    pos_ = start_pos;
    known = false;
  }
  if (!known) PJRT_RETURN_IF_ERROR(SkipRawValue(name));
  const size_t end = std::max(start, EndOfPrevious());
  draft->attributes.present.push_back(name);
  draft->attributes.raw.emplace_back(
      name, std::string(text_.substr(start, end - start)));
  return absl::OkStatus();
}

absl::Status Parser::ParseKnownAttribute(absl::string_view name, Draft* draft,
                                         bool* known) {
  *known = true;
  Attributes& a = draft->attributes;
  const std::string what = absl::StrCat(name, "= of ", DisplayName(*draft));
  if (int order = CalledComputationOrder(name); order >= 0) {
    return ParseComputationRefs(name, order, draft);
  }
  if (name == "dimensions") {
    // Usually {0,1}; a bare number is accepted too.
    if (At(TokenKind::kInt)) {
      PJRT_ASSIGN_OR_RETURN(int64_t d, ParseInt64(what));
      a.dimensions = {d};
      return absl::OkStatus();
    }
    PJRT_ASSIGN_OR_RETURN(a.dimensions, ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "lhs_batch_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.lhs_batch_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "rhs_batch_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.rhs_batch_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "lhs_contracting_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.lhs_contracting_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "rhs_contracting_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.rhs_contracting_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "dynamic_slice_sizes") {
    PJRT_ASSIGN_OR_RETURN(a.dynamic_slice_sizes, ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "iota_dimension") {
    PJRT_ASSIGN_OR_RETURN(a.iota_dimension, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "index") {
    PJRT_ASSIGN_OR_RETURN(a.tuple_index, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "exponent_bits") {
    PJRT_ASSIGN_OR_RETURN(a.exponent_bits, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "mantissa_bits") {
    PJRT_ASSIGN_OR_RETURN(a.mantissa_bits, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "channel_id") {
    PJRT_ASSIGN_OR_RETURN(int64_t id, ParseInt64(what));
    a.channel_id = id;
    return absl::OkStatus();
  }
  if (name == "custom_call_target") {
    if (!At(TokenKind::kString))
      return Expected(absl::StrCat("a string for ", what));
    a.custom_call_target = UnescapeString(Next().text);
    return absl::OkStatus();
  }
  if (name == "use_global_device_ids") {
    PJRT_ASSIGN_OR_RETURN(a.use_global_device_ids, ParseBool(what));
    return absl::OkStatus();
  }
  if (name == "is_stable") {
    PJRT_ASSIGN_OR_RETURN(a.is_stable, ParseBool(what));
    return absl::OkStatus();
  }
  if (name == "replica_groups") return ParseReplicaGroups(&a);
  if (name == "source_target_pairs") {
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLBrace, absl::StrCat("'{' to start ", what)));
    if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
    while (true) {
      const Token& pair_start = Peek();
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> pair, ParseIntList(what));
      if (pair.size() != 2) {
        return ErrorAt(pair_start,
                       absl::StrFormat("a source-target pair has 2 numbers, "
                                       "found %d in {%s}",
                                       pair.size(), absl::StrJoin(pair, ",")));
      }
      a.source_target_pairs.emplace_back(pair[0], pair[1]);
      if (TryConsume(TokenKind::kComma)) continue;
      return Expect(TokenKind::kRBrace, absl::StrCat("',' or '}' in ", what));
    }
  }
  if (name == "slice") return ParseSlice(&a);
  if (name == "padding" && draft->opcode == Opcode::kPad) {
    return ParsePadding(&a);
  }
  if (name == "direction" && draft->opcode == Opcode::kCompare) {
    static constexpr std::pair<absl::string_view, ComparisonDirection>
        kDirections[] = {
            {"EQ", ComparisonDirection::kEq}, {"NE", ComparisonDirection::kNe},
            {"LT", ComparisonDirection::kLt}, {"LE", ComparisonDirection::kLe},
            {"GT", ComparisonDirection::kGt}, {"GE", ComparisonDirection::kGe},
        };
    for (const auto& [spelling, direction] : kDirections) {
      if (AtName(spelling)) {
        Next();
        a.comparison_direction = direction;
        return absl::OkStatus();
      }
    }
    return Expected(absl::StrCat("EQ, NE, LT, LE, GT or GE for ", what));
  }
  if (name == "type" && draft->opcode == Opcode::kCompare) {
    static constexpr std::pair<absl::string_view, ComparisonType> kTypes[] = {
        {"FLOAT", ComparisonType::kFloat},
        {"TOTALORDER", ComparisonType::kTotalOrder},
        {"SIGNED", ComparisonType::kSigned},
        {"UNSIGNED", ComparisonType::kUnsigned},
    };
    for (const auto& [spelling, type] : kTypes) {
      if (AtName(spelling)) {
        Next();
        a.comparison_type = type;
        return absl::OkStatus();
      }
    }
    return Expected(
        absl::StrCat("FLOAT, TOTALORDER, SIGNED or UNSIGNED for ", what));
  }
  *known = false;
  return absl::OkStatus();
}

// name or {name, name, ...}
absl::Status Parser::ParseComputationRefs(absl::string_view attribute,
                                          int order, Draft* draft) {
  const auto parse_one = [&]() -> absl::Status {
    if (!At(TokenKind::kName)) {
      return Expected(absl::StrFormat("a computation name for %s= of %s",
                                      attribute, DisplayName(*draft)));
    }
    const Token& token = Next();
    CalledRef ref;
    ref.order = order;
    ref.attribute = std::string(attribute);
    ref.name = std::string(StripPercent(token.text));
    ref.line = token.line;
    ref.column = token.column;
    draft->called.push_back(std::move(ref));
    return absl::OkStatus();
  };
  if (!TryConsume(TokenKind::kLBrace)) return parse_one();
  if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
  while (true) {
    PJRT_RETURN_IF_ERROR(parse_one());
    if (TryConsume(TokenKind::kComma)) continue;
    return Expect(TokenKind::kRBrace,
                  absl::StrFormat("',' or '}' in %s=", attribute));
  }
}

// {{0,1},{2,3}}, or [G,S]<=[dims] with an optional T(permutation): the ids
// 0..N-1 laid out as `dims`, transposed, and cut into G groups of S.
absl::Status Parser::ParseReplicaGroups(Attributes* attributes) {
  if (At(TokenKind::kLBrace)) {
    Next();
    if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
    while (true) {
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group,
                            ParseIntList("a replica group"));
      attributes->replica_groups.push_back(std::move(group));
      if (TryConsume(TokenKind::kComma)) continue;
      return Expect(TokenKind::kRBrace, "',' or '}' in replica_groups=");
    }
  }
  const Token& start = Peek();
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group_shape,
                        ParseBracketedInts("the replica group shape"));
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLeq, "'<=' after the replica group shape"));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        ParseBracketedInts("the replica id layout"));
  std::vector<int64_t> permutation;
  if (AtName("T") && At(TokenKind::kLParen, 1)) {
    Next();
    Next();
    while (true) {
      PJRT_ASSIGN_OR_RETURN(int64_t p, ParseInt64("the transpose permutation"));
      permutation.push_back(p);
      if (TryConsume(TokenKind::kComma)) continue;
      PJRT_RETURN_IF_ERROR(Expect(TokenKind::kRParen,
                                  "',' or ')' in the transpose permutation"));
      break;
    }
  } else {
    for (size_t i = 0; i < dims.size(); ++i) {
      permutation.push_back(static_cast<int64_t>(i));
    }
  }
  const std::string written =
      std::string(text_.substr(start.offset, EndOfPrevious() - start.offset));
  if (group_shape.size() != 2 || group_shape[0] < 0 || group_shape[1] < 0) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: the group shape must be "
                                   "[number of groups, group size]",
                                   written));
  }
  int64_t total = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && total > kMaxIotaReplicaIds / d)) {
      return ErrorAt(
          start, absl::StrFormat("replica_groups=%s: the id layout must have "
                                 "non-negative sizes and at most %d ids",
                                 written, kMaxIotaReplicaIds));
    }
    total *= d;
  }
  if (group_shape[0] > 0 && group_shape[1] > total / group_shape[0]) {
    total = -1;  // cannot match
  }
  if (group_shape[1] == 0 && group_shape[0] > 0) {
    return ErrorAt(start, absl::StrFormat("replica_groups=%s: groups of 0 ids "
                                          "are not groups",
                                          written));
  }
  if (total < 0 || group_shape[0] * group_shape[1] != total) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: %d groups of %d do not "
                                   "cover the %d ids of the layout",
                                   written, group_shape[0], group_shape[1],
                                   total < 0 ? 0 : total));
  }
  // Each list may name every device of a launch; all of them together are
  // bounded too, since a short attribute expands to a long list.
  expanded_replica_ids_ += total;
  if (expanded_replica_ids_ > kMaxExpandedReplicaIds) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: the module's iota "
                                   "replica groups expand to more than %d ids "
                                   "in all",
                                   written, kMaxExpandedReplicaIds));
  }
  std::vector<bool> seen(dims.size(), false);
  bool valid = permutation.size() == dims.size();
  for (int64_t p : permutation) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(dims.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid) {
    return ErrorAt(
        start,
        absl::StrFormat("replica_groups=%s: T(%s) is not a permutation "
                        "of the %d layout dimensions",
                        written, absl::StrJoin(permutation, ","), dims.size()));
  }
  // Element r of the transposed array, at index idx, is the id at index
  // idx' of the layout with idx'[permutation[i]] = idx[i].
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  std::vector<int64_t> transposed_dims(rank);
  for (size_t i = 0; i < rank; ++i) transposed_dims[i] = dims[permutation[i]];
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> ids;
  ids.reserve(total);
  for (int64_t r = 0; r < total; ++r) {
    int64_t id = 0;
    for (size_t i = 0; i < rank; ++i) id += index[i] * strides[permutation[i]];
    ids.push_back(id);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < transposed_dims[i]) break;
      index[i] = 0;
    }
  }
  attributes->replica_groups.assign(group_shape[0], {});
  for (int64_t g = 0; g < group_shape[0]; ++g) {
    attributes->replica_groups[g].assign(
        ids.begin() + g * group_shape[1],
        ids.begin() + (g + 1) * group_shape[1]);
  }
  return absl::OkStatus();
}

// {[0:2:1], [1:3]} or {}.
absl::Status Parser::ParseSlice(Attributes* attributes) {
  PJRT_RETURN_IF_ERROR(Expect(TokenKind::kLBrace, "'{' to start slice="));
  if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
  while (true) {
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLBracket,
               "'[' to start a dimension of slice=, as in [0:2:1]"));
    SliceDimension dim;
    PJRT_ASSIGN_OR_RETURN(dim.start, ParseInt64("a slice start"));
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kColon, "':' after the slice start"));
    PJRT_ASSIGN_OR_RETURN(dim.limit, ParseInt64("a slice limit"));
    if (TryConsume(TokenKind::kColon)) {
      PJRT_ASSIGN_OR_RETURN(dim.stride, ParseInt64("a slice stride"));
    }
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kRBracket, "']' to end a dimension of slice="));
    attributes->slice.push_back(dim);
    if (TryConsume(TokenKind::kComma)) continue;
    return Expect(TokenKind::kRBrace, "',' or '}' in slice=");
  }
}

// low_high[_interior] per dimension, joined by 'x': 0_0x1_-1_2.
absl::Status Parser::ParsePadding(Attributes* attributes) {
  const Token& token = Peek();
  if (token.kind != TokenKind::kNumberWord && token.kind != TokenKind::kInt) {
    // A rank-0 pad prints as `padding=` with nothing after it.
    if (token.kind == TokenKind::kComma || token.kind == TokenKind::kRBrace ||
        token.kind == TokenKind::kEof ||
        (pos_ > 0 && token.line != tokens_[pos_ - 1].line)) {
      return absl::OkStatus();
    }
    return Expected("a padding such as 0_0x1_1 for padding=");
  }
  const auto bad = [&]() {
    return ErrorAt(token, absl::StrCat("padding ", token.text,
                                       " is not of the form low_high or "
                                       "low_high_interior per dimension, "
                                       "joined by 'x' (as in 0_0x1_-1_2)"));
  };
  for (absl::string_view part : absl::StrSplit(token.text, 'x')) {
    std::vector<absl::string_view> numbers = absl::StrSplit(part, '_');
    if (numbers.size() != 2 && numbers.size() != 3) return bad();
    int64_t values[3] = {0, 0, 0};
    for (size_t i = 0; i < numbers.size(); ++i) {
      if (!absl::SimpleAtoi(numbers[i], &values[i]) || numbers[i].empty() ||
          numbers[i][0] == '+') {
        return bad();
      }
    }
    attributes->padding.push_back({values[0], values[1], values[2]});
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<bool> Parser::ParseBool(absl::string_view what) {
  if (AtName("true")) {
    Next();
    return true;
  }
  if (AtName("false")) {
    Next();
    return false;
  }
  return Expected(absl::StrCat("true or false for ", what));
}

absl::Status Parser::SkipRawValue(absl::string_view attribute) {
  const Token& first = Peek();
  if (first.kind == TokenKind::kComma || first.kind == TokenKind::kEof ||
      IsCloser(first.kind)) {
    return Expected(absl::StrCat("a value for attribute ", attribute));
  }
  std::vector<const Token*> open;
  int last_line = first.line;
  bool first_token = true;
  while (true) {
    const Token& token = Peek();
    if (open.empty() && !first_token) {
      // At the top level the value ends at ',', at a closer that is not its
      // own, or where something new starts: a new line, `name=`, ENTRY, ROOT.
      if (token.kind == TokenKind::kComma || token.kind == TokenKind::kEof ||
          IsCloser(token.kind) || token.line != last_line ||
          (token.kind == TokenKind::kName &&
           (At(TokenKind::kEqual, 1) || token.text == "ENTRY" ||
            token.text == "ROOT"))) {
        return absl::OkStatus();
      }
    }
    if (token.kind == TokenKind::kEof) {
      const Token& opener = *open.back();
      return ErrorAt(
          opener, absl::StrFormat("'%s' in the value of attribute %s is never "
                                  "closed",
                                  opener.text, attribute));
    }
    if (IsOpener(token.kind)) {
      open.push_back(&token);
    } else if (IsCloser(token.kind)) {
      const Token& opener = *open.back();
      if (token.text[0] != CloserFor(opener.kind)) {
        return ErrorAt(
            token,
            absl::StrFormat("expected '%c' to close '%s' (line %d, "
                            "column %d) in the value of attribute %s, "
                            "found %s",
                            CloserFor(opener.kind), opener.text, opener.line,
                            opener.column, attribute, DescribeToken(token)));
      }
      open.pop_back();
    }
    last_line = token.line;
    first_token = false;
    Next();
  }
}

// ---------------------------------------------------------------------------
// Literals

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
  if (!IsParsableArrayType(shape.element_type())) {
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
  if (IsUnconvertedFloatType(shape.element_type())) {
    // Values are checked for syntax but not converted: data stays empty.
    literal->mutable_data()->clear();
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

  // s2 and u2 are parse-only; s4 and u4 are integers like the others.
  const bool is_s2 = type == PrimitiveType::kS2;
  if (IsSignedInteger(type) || IsUnsignedInteger(type) || is_s2 ||
      type == PrimitiveType::kU2) {
    if (token.kind != TokenKind::kInt) {
      return Expected(absl::StrFormat("an integer %s value in constant %s",
                                      type_name, DisplayName(draft)));
    }
    PJRT_ASSIGN_OR_RETURN(IntValue value, ParseIntToken(type_name));
    const bool is_signed = IsSignedInteger(type) || is_s2;
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
    case PrimitiveType::kF8E4M3FN: {
      const uint8_t b = Float8E4M3FN::FromFloat(static_cast<float>(value));
      if (finite && (b & 0x7fu) == 0x7fu) return out_of_range();
      literal->Set<uint8_t>(index, b);
      break;
    }
    case PrimitiveType::kF8E5M2: {
      const uint8_t b = Float8E5M2::FromFloat(static_cast<float>(value));
      if (finite && (b & 0x7fu) == 0x7cu) return out_of_range();
      literal->Set<uint8_t>(index, b);
      break;
    }
    default:
      break;  // the other f8 and f4 types: checked, not stored.
  }
  Next();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> ParseHloModule(absl::string_view text) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  Parser parser(text, std::move(tokens));
  return parser.ParseModule();
}

}  // namespace pjrt::hlo
