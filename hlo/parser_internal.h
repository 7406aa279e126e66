// The HLO text parser's shared part: the Parser class and the drafts it
// fills, split over parser.cc (module, computations, instructions,
// shapes), parser_attributes.cc (attributes) and parser_literals.cc
// (constants). Not part of the interface.
#ifndef PJRT_HLO_PARSER_INTERNAL_H_
#define PJRT_HLO_PARSER_INTERNAL_H_

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
#include "hlo/parser.h"

namespace pjrt::hlo::parser_internal {

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
inline std::string DisplayName(const Draft& draft) {
  if (draft.name.empty()) return absl::StrCat("the nested ", draft.opcode_name);
  return absl::StrCat("%", draft.name);
}

inline absl::string_view StripPercent(absl::string_view name) {
  if (!name.empty() && name[0] == '%') name.remove_prefix(1);
  return name;
}

inline bool IsOpener(TokenKind kind) {
  return kind == TokenKind::kLBrace || kind == TokenKind::kLBracket ||
         kind == TokenKind::kLParen;
}
inline bool IsCloser(TokenKind kind) {
  return kind == TokenKind::kRBrace || kind == TokenKind::kRBracket ||
         kind == TokenKind::kRParen;
}
inline char CloserFor(TokenKind opener) {
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
inline std::string FormatNumberList(const std::vector<int64_t>& numbers) {
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
inline int CalledComputationOrder(absl::string_view attribute) {
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

inline ShapeRule ShapeRuleFor(Opcode opcode) {
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

// Rewrites the forms XLA's parser still reads but its IR no longer has,
// as XLA's parser does: dynamic-slice and dynamic-update-slice with their
// start indices in one vector (an s32[rank] operand) get one scalar per
// dimension (a slice and a reshape of the vector each). Anything else that
// does not fit is left for the verifier to name.
void UpgradeLegacyForms(Module* module);

}  // namespace pjrt::hlo::parser_internal

#endif  // PJRT_HLO_PARSER_INTERNAL_H_
