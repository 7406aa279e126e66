#include "hlo/lexer.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/parser.h"

namespace pjrt::hlo {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsNameStart(char c) { return IsLetter(c) || c == '_'; }
bool IsNameChar(char c) {
  return IsLetter(c) || IsDigit(c) || c == '_' || c == '.' || c == '-';
}

// -?[0-9]+
bool LooksLikeInt(absl::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

// -?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)? with a '.' or an exponent.
bool LooksLikeFloat(absl::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  size_t digits = i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == digits) return false;
  bool fraction_or_exponent = false;
  if (i < s.size() && s[i] == '.') {
    fraction_or_exponent = true;
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    fraction_or_exponent = true;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exponent = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == exponent) return false;
  }
  return fraction_or_exponent && i == s.size();
}

class Lexer {
 public:
  explicit Lexer(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<Token>> Run() {
    std::vector<Token> tokens;
    tokens.reserve(text_.size() / 4 + 1);
    while (true) {
      absl::Status status = SkipSpaceAndComments();
      if (!status.ok()) return status;
      if (pos_ >= text_.size()) break;
      absl::StatusOr<Token> token = Lex();
      if (!token.ok()) return token.status();
      tokens.push_back(*token);
    }
    Token eof;
    eof.kind = TokenKind::kEof;
    eof.line = line_;
    eof.column = Column(pos_);
    eof.offset = text_.size();
    eof.text = text_.substr(text_.size(), 0);
    tokens.push_back(eof);
    return tokens;
  }

 private:
  int Column(size_t pos) const {
    return static_cast<int>(pos - line_start_) + 1;
  }
  char At(size_t pos) const { return pos < text_.size() ? text_[pos] : '\0'; }

  // Moves past text_[pos_], keeping line and line start current.
  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }

  absl::Status ErrorAt(int line, int column, absl::string_view message) {
    return absl::InvalidArgumentError(
        FormatErrorAt(text_, line, column, message));
  }

  absl::Status SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
          c == '\v') {
        Advance();
      } else if (c == '/' && At(pos_ + 1) == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '/' && At(pos_ + 1) == '*') {
        int line = line_;
        int column = Column(pos_);
        size_t end = text_.find("*/", pos_ + 2);
        if (end == absl::string_view::npos) {
          return ErrorAt(line, column,
                         "unterminated comment: '/*' has no matching '*/'");
        }
        while (pos_ < end + 2) Advance();
      } else {
        break;
      }
    }
    return absl::OkStatus();
  }

  Token Make(TokenKind kind, size_t start, int line, int column) {
    Token token;
    token.kind = kind;
    token.text = text_.substr(start, pos_ - start);
    token.line = line;
    token.column = column;
    token.offset = start;
    return token;
  }

  // Consumes name characters; a '-' directly followed by '>' is left for
  // the arrow ("b01f_01io->b01f").
  void ConsumeNameChars() {
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) {
      if (text_[pos_] == '-' && At(pos_ + 1) == '>') break;
      ++pos_;
    }
  }

  // A word starting with a digit or '-' and a digit: numbers and the
  // attribute forms 3x3, 1_1x0_2, 0_-1, 1e-05. A sign may follow an
  // exponent 'e', and a '-' may follow '_' or 'x'.
  void ConsumeNumberWord() {
    if (text_[pos_] == '-') ++pos_;
    ++pos_;  // the first digit
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      char prev = text_[pos_ - 1];
      if (IsLetter(c) || IsDigit(c) || c == '_' || c == '.') {
        ++pos_;
      } else if ((c == '-' || c == '+') && (prev == 'e' || prev == 'E') &&
                 IsDigit(At(pos_ + 1))) {
        ++pos_;
      } else if (c == '-' && (prev == '_' || prev == 'x') &&
                 IsDigit(At(pos_ + 1))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  absl::StatusOr<Token> Lex() {
    size_t start = pos_;
    int line = line_;
    int column = Column(pos_);
    char c = text_[pos_];
    auto single = [&](TokenKind kind) {
      ++pos_;
      return Make(kind, start, line, column);
    };
    switch (c) {
      case '{':
        return single(TokenKind::kLBrace);
      case '}':
        return single(TokenKind::kRBrace);
      case '[':
        return single(TokenKind::kLBracket);
      case ']':
        return single(TokenKind::kRBracket);
      case '(':
        return single(TokenKind::kLParen);
      case ')':
        return single(TokenKind::kRParen);
      case ',':
        return single(TokenKind::kComma);
      case '=':
        return single(TokenKind::kEqual);
      case ':':
        return single(TokenKind::kColon);
      case '*':
        return single(TokenKind::kStar);
      default:
        break;
    }
    if (c == '"') {
      ++pos_;
      while (pos_ < text_.size() && text_[pos_] != '"') {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) Advance();
        Advance();
      }
      if (pos_ >= text_.size()) {
        return ErrorAt(line, column,
                       "unterminated string: '\"' has no closing '\"'");
      }
      ++pos_;
      return Make(TokenKind::kString, start, line, column);
    }
    if (IsNameStart(c)) {
      ++pos_;
      ConsumeNameChars();
      return Make(TokenKind::kName, start, line, column);
    }
    if (c == '%' && IsNameChar(At(pos_ + 1))) {
      ++pos_;
      ConsumeNameChars();
      if (pos_ == start + 1) {  // "%->": the '%' alone
        pos_ = start;
        return single(TokenKind::kOther);
      }
      return Make(TokenKind::kName, start, line, column);
    }
    if (c == '-' && At(pos_ + 1) == '>') {
      pos_ += 2;
      return Make(TokenKind::kArrow, start, line, column);
    }
    if (c == '<' && At(pos_ + 1) == '=') {
      pos_ += 2;
      return Make(TokenKind::kLeq, start, line, column);
    }
    if (c == '.' && At(pos_ + 1) == '.' && At(pos_ + 2) == '.') {
      pos_ += 3;
      return Make(TokenKind::kEllipsis, start, line, column);
    }
    if (c == '-' && !IsNameChar(At(pos_ + 4)) &&
        (text_.substr(pos_ + 1, 3) == "inf" ||
         text_.substr(pos_ + 1, 3) == "nan")) {
      pos_ += 4;
      return Make(TokenKind::kFloat, start, line, column);
    }
    if (IsDigit(c) || (c == '-' && IsDigit(At(pos_ + 1)))) {
      ConsumeNumberWord();
      Token token = Make(TokenKind::kNumberWord, start, line, column);
      if (LooksLikeInt(token.text)) {
        token.kind = TokenKind::kInt;
      } else if (LooksLikeFloat(token.text)) {
        token.kind = TokenKind::kFloat;
      }
      return token;
    }
    return single(TokenKind::kOther);
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view text) {
  return Lexer(text).Run();
}

std::string DescribeToken(const Token& token) {
  constexpr size_t kMaxShown = 40;
  switch (token.kind) {
    case TokenKind::kEof:
      return "end of input";
    case TokenKind::kString:
      if (token.text.size() > kMaxShown) {
        return absl::StrCat("string ", token.text.substr(0, kMaxShown), "...");
      }
      return absl::StrCat("string ", token.text);
    case TokenKind::kOther: {
      unsigned char c = static_cast<unsigned char>(token.text[0]);
      if (!std::isprint(c)) return absl::StrFormat("byte 0x%02x", c);
      break;
    }
    default:
      break;
  }
  if (token.text.size() > kMaxShown) {
    return absl::StrCat("'", token.text.substr(0, kMaxShown), "...'");
  }
  return absl::StrCat("'", token.text, "'");
}

std::string UnescapeString(absl::string_view quoted) {
  if (quoted.size() >= 2 && quoted.front() == '"' && quoted.back() == '"') {
    quoted = quoted.substr(1, quoted.size() - 2);
  }
  std::string out;
  out.reserve(quoted.size());
  for (size_t i = 0; i < quoted.size(); ++i) {
    char c = quoted[i];
    if (c != '\\' || i + 1 == quoted.size()) {
      out.push_back(c);
      continue;
    }
    char e = quoted[++i];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      default:
        out.push_back(e);  // \\ \" \' and anything else
        break;
    }
  }
  return out;
}

}  // namespace pjrt::hlo
