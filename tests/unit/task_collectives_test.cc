#include "daemon/task_collectives.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::MeetRequest Request(const std::string& id, int task, std::vector<int> tasks,
                        int64_t value, int timeout_ms) {
  v1::MeetRequest request;
  request.set_id(id);
  request.set_task_id(task);
  for (int t : tasks) request.add_tasks(t);
  request.set_value(value);
  request.set_timeout_ms(timeout_ms);
  return request;
}

TEST(ExchangeDirectory, AMeetingCompletesWithEveryTasksValue) {
  ExchangeDirectory directory;
  v1::MeetResponse first;
  std::thread waiter([&] {
    first = *directory.Meet(Request("x", 0, {0, 2}, 5, 1000));
  });
  auto second = directory.Meet(Request("x", 2, {0, 2}, 7, 1000));
  waiter.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(second->values(), ElementsAre(5, 7));
  EXPECT_THAT(first.values(), ElementsAre(5, 7));
  EXPECT_EQ(second->missing_size(), 0);
}

TEST(ExchangeDirectory, AnIncompleteMeetingNamesTheMissingTasks) {
  ExchangeDirectory directory;
  auto response = directory.Meet(Request("x", 1, {0, 1, 2}, 0, 10));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->values_size(), 0);
  EXPECT_THAT(response->missing(), ElementsAre(0, 2));
  // Calling again keeps the arrival; the others complete it.
  std::thread zero([&] {
    (void)directory.Meet(Request("x", 0, {0, 1, 2}, 0, 1000));
  });
  auto two = directory.Meet(Request("x", 2, {0, 1, 2}, 3, 1000));
  zero.join();
  ASSERT_TRUE(two.ok());
  EXPECT_THAT(two->values(), ElementsAre(0, 0, 3));
}

TEST(ExchangeDirectory, AnIdIsUsedAgainOnceEveryTaskWasTold) {
  ExchangeDirectory directory;
  for (int round = 0; round < 3; ++round) {
    std::thread other([&] {
      auto r = directory.Meet(Request("again", 1, {0, 1}, round, 1000));
      ASSERT_TRUE(r.ok());
      EXPECT_THAT(r->values(), ElementsAre(round, round));
    });
    auto r = directory.Meet(Request("again", 0, {0, 1}, round, 1000));
    other.join();
    ASSERT_TRUE(r.ok());
    EXPECT_THAT(r->values(), ElementsAre(round, round)) << "round " << round;
  }
}

TEST(ExchangeDirectory, ATaskThatMeetsAgainBeforeItsPeerWasToldWaits) {
  ExchangeDirectory directory;
  std::thread first([&] {
    (void)directory.Meet(Request("r", 0, {0, 1}, 1, 1000));
  });
  auto done = directory.Meet(Request("r", 1, {0, 1}, 1, 1000));
  first.join();
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->values_size(), 2);
  // Both were told: a new round starts, and task 1 alone does not complete
  // it with the old round's arrival of task 0.
  auto alone = directory.Meet(Request("r", 1, {0, 1}, 2, 10));
  ASSERT_TRUE(alone.ok());
  EXPECT_THAT(alone->missing(), ElementsAre(0));
}

TEST(ExchangeDirectory, BadMeetingsAreRefused) {
  ExchangeDirectory directory;
  auto outsider = directory.Meet(Request("x", 3, {0, 1}, 0, 10));
  EXPECT_EQ(outsider.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outsider.status().message()), HasSubstr("task 3"));
  auto unsorted = directory.Meet(Request("x", 0, {1, 0}, 0, 10));
  EXPECT_EQ(unsorted.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(directory.Meet(Request("y", 0, {0, 1}, 0, 10)).ok());
  auto other_tasks = directory.Meet(Request("y", 1, {1, 2}, 0, 10));
  EXPECT_EQ(other_tasks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other_tasks.status().message()),
              HasSubstr("the others meet [0, 1]"));
  auto empty = directory.Meet(Request("", 0, {0, 1}, 0, 10));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExchangeDirectory, TheStoreWaitsForKeysAndBoundsWhatItHolds) {
  ExchangeDirectory directory;
  auto missing = directory.Get({"a", "b"}, absl::Milliseconds(10));
  EXPECT_THAT(missing.missing(), ElementsAre("a", "b"));
  std::thread setter([&] {
    ASSERT_TRUE(directory.Set("a", "1").ok());
    ASSERT_TRUE(directory.Set("b", "2").ok());
  });
  v1::StoreGetResponse got;
  for (int i = 0; i < 100 && got.values_size() == 0; ++i) {
    got = directory.Get({"a", "b"}, absl::Seconds(1));
  }
  setter.join();
  EXPECT_THAT(got.values(), ElementsAre("1", "2"));
  EXPECT_EQ(directory.Set("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      directory.Set(std::string(kMaxDirectoryKeyBytes + 1, 'k'), "x").code(),
      absl::StatusCode::kInvalidArgument);
  const absl::Status big =
      directory.Set("big", std::string(kMaxDirectoryValueBytes + 1, 'v'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.message()), HasSubstr("big"));
}

}  // namespace
}  // namespace pjrt::daemon
