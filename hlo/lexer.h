// The HLO text tokenizer: turns the whole text into a vector of tokens, each
// with its 1-based line and column, skipping `// ...` and `/* ... */`
// comments wherever they occur.
//
// Tokens are views into the text, which must outlive them. The lexer decides
// nothing about meaning: opcode and type names are plain names, and the
// special forms of attribute values (`3x3`, `1_1x0_-2_1`) come back as one
// kNumberWord token whose text the parser interprets where it expects one.
// `b01f_01io->b01f` lexes as name, arrow, name. Characters that are no part
// of the grammar come back as kOther tokens, so that attribute values the
// parser skips may contain them; only unterminated strings and block
// comments are lexing errors.
#ifndef PJRT_HLO_LEXER_H_
#define PJRT_HLO_LEXER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pjrt::hlo {

enum class TokenKind {
  kEof,
  // [a-zA-Z_][a-zA-Z0-9_.-]* or %[a-zA-Z0-9_.-]+ (text keeps the '%'); a
  // '-' directly followed by '>' ends the name.
  kName,
  kInt,         // -?[0-9]+, any magnitude
  kFloat,       // 1.5, -2.366e+38, 1e-05, -inf, -nan ("inf"/"nan" are names)
  kNumberWord,  // other words starting with a digit: 3x3, 1_1x0_2, 0_-1
  kString,      // "..." with backslash escapes; text keeps the quotes
  kLBrace,      // {
  kRBrace,      // }
  kLBracket,    // [
  kRBracket,    // ]
  kLParen,      // (
  kRParen,      // )
  kComma,       // ,
  kEqual,       // =
  kColon,       // :
  kStar,        // *
  kArrow,       // ->
  kLeq,         // <=
  kEllipsis,    // ...
  kOther,       // any other single character
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  absl::string_view text;  // empty for kEof
  int line = 1;            // 1-based
  int column = 1;          // 1-based, in bytes
  size_t offset = 0;       // byte offset of text in the whole input
};

// Tokenizes `text`. The result always ends with one kEof token placed just
// after the last character. Errors are INVALID_ARGUMENT in the parser's
// format (FormatErrorAt): an unterminated string or block comment, reported
// where it starts.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view text);

// For messages: "'}'", "'add.3'", "end of input", "string \"abc\"".
std::string DescribeToken(const Token& token);

// The value of a kString token's text: quotes removed, the escapes n, t and
// r after a backslash resolved, and any other escaped character (a quote, a
// backslash) standing for itself.
std::string UnescapeString(absl::string_view quoted);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_LEXER_H_
