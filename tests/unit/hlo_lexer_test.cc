// The HLO text lexer (hlo/lexer.h): positions, comments, numbers and the
// special forms, dimension labels, strings.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/lexer.h"

namespace pjrt::hlo {
namespace {

std::vector<Token> LexOrDie(absl::string_view text) {
  auto tokens = Tokenize(text);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *tokens : std::vector<Token>{};
}

TEST(HloLexer, TracksLinesAndColumnsAndSkipsComments) {
  auto tokens = LexOrDie("a /* x\n y */ b // rest\n  %c.1-d");
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[0].text, "a");
  EXPECT_EQ(tokens[1].text, "b");
  EXPECT_EQ(tokens[1].line, 2);
  EXPECT_EQ(tokens[1].column, 7);
  EXPECT_EQ(tokens[2].kind, TokenKind::kName);
  EXPECT_EQ(tokens[2].text, "%c.1-d");
  EXPECT_EQ(tokens[2].line, 3);
  EXPECT_EQ(tokens[2].column, 3);
  EXPECT_EQ(tokens[3].kind, TokenKind::kEof);
}

TEST(HloLexer, LexesNumbersAndSpecialForms) {
  auto tokens = LexOrDie(
      "1 -2 1.5 -2.366e+38 1e-05 inf -inf -nan 3x3 1_1x0_-2_1 "
      "18446744073709551616 ...");
  std::vector<TokenKind> kinds;
  for (const Token& t : tokens) kinds.push_back(t.kind);
  EXPECT_EQ(kinds,
            (std::vector<TokenKind>{
                TokenKind::kInt, TokenKind::kInt, TokenKind::kFloat,
                TokenKind::kFloat, TokenKind::kFloat, TokenKind::kName,
                TokenKind::kFloat, TokenKind::kFloat, TokenKind::kNumberWord,
                TokenKind::kNumberWord, TokenKind::kInt, TokenKind::kEllipsis,
                TokenKind::kEof}));
  EXPECT_EQ(tokens[9].text, "1_1x0_-2_1");
}

TEST(HloLexer, SplitsDimensionLabelsAtTheArrow) {
  auto tokens = LexOrDie("b01f_01io->b01f f32[<=4] ()->f32[]");
  ASSERT_GE(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].text, "b01f_01io");
  EXPECT_EQ(tokens[1].kind, TokenKind::kArrow);
  EXPECT_EQ(tokens[2].text, "b01f");
  EXPECT_EQ(tokens[5].kind, TokenKind::kLeq);
  EXPECT_EQ(tokens[10].kind, TokenKind::kArrow);
}

TEST(HloLexer, StringsKeepEscapesAndMaySpanLines) {
  auto tokens = LexOrDie("\"a\\\"b\\n\nc\" x");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].kind, TokenKind::kString);
  EXPECT_EQ(UnescapeString(tokens[0].text), "a\"b\n\nc");
  EXPECT_EQ(tokens[1].line, 2);
  EXPECT_EQ(DescribeToken(tokens[2]), "end of input");
}

}  // namespace
}  // namespace pjrt::hlo
