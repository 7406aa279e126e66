#include "base/text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pjrt {
namespace {

TEST(Excerpt, KeepsShortTextAndCutsLongTextSayingHowMuch) {
  EXPECT_EQ(Excerpt("short", 10), "short");
  std::string cut = Excerpt(std::string(10000, 'a'), 100);
  EXPECT_LE(cut.size(), 100u);
  EXPECT_NE(cut.find("more bytes)"), std::string::npos) << cut;
  EXPECT_EQ(cut.substr(0, 10), std::string(10, 'a'));
}

TEST(Excerpt, NeverSplitsAUtf8Sequence) {
  // "é" is two bytes; cut so that the limit falls inside one.
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\xc3\xa9";
  std::string cut = Excerpt(text, 32 + 7);
  const size_t kept = cut.find(" ...");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ(kept % 2, 0u) << cut;
}

TEST(EscapeForLog, EscapesWhatCouldForgeOrCorruptALogLine) {
  EXPECT_EQ(EscapeForLog("a\nb\tc\\d\x01"), "a\\nb\\tc\\\\d\\x01");
  EXPECT_EQ(EscapeForLog("plain text"), "plain text");
  std::string long_name(10 << 20, 'x');
  std::string escaped = EscapeForLog(long_name, 64);
  EXPECT_LT(escaped.size(), 100u);
  EXPECT_NE(escaped.find("more bytes"), std::string::npos);
}

TEST(BoundMessage, CutsLongMessagesKeepingTheCode) {
  absl::Status status =
      BoundMessage(absl::InvalidArgumentError(std::string(100000, 'm')));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LE(status.message().size(), kMaxMessageBytes);
  absl::Status small = absl::NotFoundError("x");
  EXPECT_EQ(BoundMessage(small), small);
}

TEST(FirstNonUtf8, AcceptsWellFormedTextOfEveryLength) {
  EXPECT_EQ(FirstNonUtf8(""), absl::string_view::npos);
  // 1, 2, 3 and 4 bytes; the ends of each range.
  EXPECT_EQ(FirstNonUtf8("a\x7f \xc2\x80\xdf\xbf \xe0\xa0\x80\xed\x9f\xbf"
                         "\xef\xbf\xbf \xf0\x90\x80\x80\xf4\x8f\xbf\xbf"),
            absl::string_view::npos);
}

TEST(FirstNonUtf8, FindsTheFirstByteOfWhatIsNotUtf8) {
  struct Case {
    std::string text;
    size_t bad;
  };
  for (const Case& c : std::vector<Case>{
           {"ab\xff", 2},                // never in UTF-8
           {"\x80", 0},                  // a lone continuation byte
           {"a\xc3", 1},                 // cut short at the end
           {"\xc3(", 0},                 // not continued
           {"\xc0\xaf", 0},              // overlong '/'
           {"\xe0\x80\xaf", 0},          // overlong, 3 bytes
           {"\xf0\x80\x80\xaf", 0},      // overlong, 4 bytes
           {"x\xed\xa0\x80", 1},         // a surrogate (U+D800)
           {"\xf4\x90\x80\x80", 0},      // past U+10FFFF
           {"\xf5\x80\x80\x80", 0},      // never in UTF-8
           {"\xe2\x82\xac\xe2\x82", 3},  // a whole sequence, then half
       }) {
    EXPECT_EQ(FirstNonUtf8(c.text), c.bad) << EscapeForLog(c.text);
  }
}

TEST(CheckUtf8, NamesTheByteItsLineAndColumn) {
  EXPECT_TRUE(CheckUtf8("caf\xc3\xa9\n", "the text").ok());
  absl::Status s = CheckUtf8("HloModule m\nENTRY \xff", "the program text");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the program text is not UTF-8: byte 0xff at line 2, column 7 "
            "(offset 18) begins no well-formed sequence");
}

}  // namespace
}  // namespace pjrt
