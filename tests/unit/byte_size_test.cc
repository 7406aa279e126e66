#include "base/byte_size.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pjrt {
namespace {

TEST(ParseByteSize, AcceptsPlainNumbersAndBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("0"), 0);
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576);
  EXPECT_EQ(*ParseByteSize("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("16 GiB"), int64_t{16} << 30);
  EXPECT_EQ(*ParseByteSize("2G"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("3k"), 3072);
  EXPECT_EQ(*ParseByteSize("1GB"), 1000000000);
}

TEST(ParseByteSize, RejectsGarbageNamingIt) {
  for (const char* bad : {"", "GiB", "-5", "1.5G", "12 parsecs", "0x10"}) {
    auto parsed = ParseByteSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(absl::StrCat("'", bad, "'")),
              absl::string_view::npos)
        << parsed.status();
  }
}

TEST(ParseByteSize, RejectsOverflow) {
  EXPECT_FALSE(ParseByteSize("9999999999999 TiB").ok());
}

TEST(FormatByteSize, UsesBinaryUnits) {
  EXPECT_EQ(FormatByteSize(512), "512 B");
  EXPECT_EQ(FormatByteSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatByteSize(int64_t{16} << 30), "16 GiB");
}

}  // namespace
}  // namespace pjrt
