#include "compiler/disk_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace pjrt::compiler {
namespace {

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    dir_ = absl::StrFormat(
        "%s/pjrt-disk-cache-%d-%s", base ? base : "/tmp", getpid(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string ReadAll(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)),
                       std::istreambuf_iterator<char>());
  }
  void WriteAll(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::string dir_;
};

TEST_F(DiskCacheTest, StoresAndFindsPayloadsByKey) {
  DiskCache cache(dir_ + "/nested/folder");
  EXPECT_FALSE(cache.Get("k1").has_value());
  ASSERT_TRUE(cache.Put("k1", std::string("cubin\0bytes", 11)).ok());
  ASSERT_TRUE(cache.Put("k2", "other").ok());
  EXPECT_EQ(cache.Get("k1"), std::string("cubin\0bytes", 11));
  EXPECT_EQ(cache.Get("k2"), "other");
  EXPECT_FALSE(cache.Get("k3").has_value());
  // A second cache on the same folder (a restarted daemon) finds them.
  EXPECT_EQ(DiskCache(dir_ + "/nested/folder").Get("k2"), "other");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(dir_ + "/nested/folder")) {
    EXPECT_EQ(e.path().extension(), ".bin");
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST_F(DiskCacheTest,
       CorruptTruncatedAndForeignEntriesAreIgnoredThenRewritten) {
  DiskCache cache(dir_);
  ASSERT_TRUE(cache.Put("key", "payload-bytes").ok());
  const std::string path = cache.PathFor("key");
  const std::string good = ReadAll(path);

  std::string corrupt = good;
  corrupt.back() ^= 1;
  WriteAll(path, corrupt);
  EXPECT_FALSE(cache.Get("key").has_value());

  WriteAll(path, good.substr(0, good.size() - 3));
  EXPECT_FALSE(cache.Get("key").has_value());

  WriteAll(path, good + "x");
  EXPECT_FALSE(cache.Get("key").has_value());

  WriteAll(path, "not a cache entry at all");
  EXPECT_FALSE(cache.Get("key").has_value());

  // Another key's valid entry in this key's file is not this key's.
  ASSERT_TRUE(cache.Put("other", "payload-bytes").ok());
  WriteAll(path, ReadAll(cache.PathFor("other")));
  EXPECT_FALSE(cache.Get("key").has_value());

  ASSERT_TRUE(cache.Put("key", "payload-bytes").ok());
  EXPECT_EQ(cache.Get("key"), "payload-bytes");
}

TEST_F(DiskCacheTest, ADisabledCacheKeepsNothing) {
  DiskCache cache("");
  EXPECT_FALSE(cache.enabled());
  EXPECT_TRUE(cache.Put("k", "v").ok());
  EXPECT_FALSE(cache.Get("k").has_value());
}

TEST_F(DiskCacheTest, AnUnwritableFolderIsAnErrorNotACrash) {
  WriteAll(dir_, "a file where the folder should be");
  DiskCache cache(dir_ + "/sub");
  const absl::Status s = cache.Put("k", "v");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_), absl::string_view::npos) << s;
  EXPECT_FALSE(cache.Get("k").has_value());
  std::filesystem::remove(dir_);
}

}  // namespace
}  // namespace pjrt::compiler
