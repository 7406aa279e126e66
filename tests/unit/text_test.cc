#include "base/text.h"

#include <string>

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

}  // namespace
}  // namespace pjrt
