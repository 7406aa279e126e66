#include "daemon/handle_table.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

TEST(HandleTableTest, LooksUpWhatWasInserted) {
  HandleTable<std::string> table("name", "a name", "never given");
  table.Insert(0x17, std::make_shared<std::string>("seventeen"));
  auto found = table.Lookup(0x17);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(**found, "seventeen");
  EXPECT_TRUE(table.contains(0x17));
  EXPECT_EQ(table.size(), 1);
  EXPECT_EQ(*table.Find(0x17), "seventeen");
  EXPECT_EQ(table.Find(0x18), nullptr);
}

TEST(HandleTableTest, AMissingHandleIsNotFoundNamingItAndWhy) {
  HandleTable<std::string> table("region", "a region",
                                 "never registered, or already unregistered");
  auto found = table.Lookup(0xabc);
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(found.status().message(),
            "region handle 0xabc is not a region of this session (never "
            "registered, or already unregistered)");
  EXPECT_EQ(table.NotFound(0xabc), found.status());
}

TEST(HandleTableTest, TakeRemovesAndReturnsTheObject) {
  HandleTable<std::string> table("name", "a name", "never given");
  table.Insert(1, std::make_shared<std::string>("one"));
  std::shared_ptr<std::string> taken = table.Take(1);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, "one");
  EXPECT_FALSE(table.contains(1));
  EXPECT_EQ(table.Take(1), nullptr);
  EXPECT_TRUE(table.empty());
}

TEST(HandleTableTest, EraseIfAndTakeAllEmptyIt) {
  HandleTable<std::string> table("name", "a name", "never given");
  for (int i = 1; i <= 4; ++i) {
    table.Insert(i, std::make_shared<std::string>(i % 2 ? "odd" : "even"));
  }
  table.EraseIf([](const std::string& s) { return s == "odd"; });
  EXPECT_EQ(table.size(), 2);
  EXPECT_FALSE(table.contains(1));
  EXPECT_TRUE(table.contains(2));
  auto all = table.TakeAll();
  EXPECT_EQ(all.size(), 2u);
  for (const auto& s : all) EXPECT_EQ(*s, "even");
  EXPECT_TRUE(table.empty());
}

}  // namespace
}  // namespace pjrt::daemon
