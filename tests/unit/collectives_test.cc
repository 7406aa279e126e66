// CollectiveHub with participants on several tasks: only this task's meet
// at the hub, and the leader's status reaches every member.
#include "compiler/collectives.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::compiler {
namespace {

using ::testing::HasSubstr;

// Four replicas: 0 and 1 on task 0 (this one), 2 on task 1, 3 on task 2.
std::shared_ptr<CollectiveHub> HubOnTaskZero() {
  auto placement = std::make_shared<TaskPlacement>();
  placement->self = 0;
  placement->task_of = {0, 0, 1, 2};
  placement->launch = "7:fingerprint";
  return std::make_shared<CollectiveHub>(4, 1, absl::Seconds(5),
                                         std::move(placement));
}

TEST(CollectiveHubAcrossTasks, OnlyThisTasksParticipantsJoin) {
  auto hub = HubOnTaskZero();
  EXPECT_TRUE(hub->Join(0).ok());
  EXPECT_TRUE(hub->Join(1).ok());
  const absl::Status remote = hub->Join(2);
  EXPECT_EQ(remote.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(remote.message()),
              HasSubstr("replica 2 partition 0 runs on task 1"));
}

TEST(CollectiveHubAcrossTasks, TellsGroupsThatSpanTasks) {
  auto hub = HubOnTaskZero();
  const std::vector<int64_t> here = {0, 1}, spanning = {1, 3};
  EXPECT_FALSE(hub->SpansTasks(here));
  EXPECT_TRUE(hub->SpansTasks(spanning));
  EXPECT_EQ(hub->TaskOf(3), 2);
  EXPECT_EQ(hub->placement()->launch, "7:fingerprint");
  CollectiveHub alone(4, 1, absl::Seconds(5));
  EXPECT_FALSE(alone.SpansTasks(spanning));
}

TEST(CollectiveHubAcrossTasks,
     TheLocalMembersMeetAndLeaveWithTheLeadersStatus) {
  auto hub = HubOnTaskZero();
  const std::vector<int64_t> group = {0, 1, 2, 3};
  int in0 = 0, in1 = 0, out0 = 0, out1 = 0;
  absl::Status second;
  std::thread member([&] {
    auto members = hub->Arrive("k", "%ar", group, 1, {&in1, &out1}, nullptr);
    ASSERT_TRUE(members.ok()) << members.status();
    second = hub->DepartWith("k", absl::OkStatus());
  });
  // Completes without the other tasks' members.
  auto members = hub->Arrive("k", "%ar", group, 0, {&in0, &out0}, nullptr);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ((*members)[0].input, &in0);
  EXPECT_EQ((*members)[1].output, &out1);
  EXPECT_EQ((*members)[2].input, nullptr);
  EXPECT_EQ((*members)[3].output, nullptr);
  const absl::Status first =
      hub->DepartWith("k", absl::UnavailableError("task 2 is down"));
  member.join();
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.message()), HasSubstr("task 2 is down"));
}

TEST(CollectiveHubAcrossTasks, AMissingLocalMemberIsNamedNotTheRemoteOnes) {
  auto placement = std::make_shared<TaskPlacement>();
  placement->task_of = {0, 0, 1, 2};
  CollectiveHub hub(4, 1, absl::Milliseconds(50), std::move(placement));
  const std::vector<int64_t> group = {0, 1, 2, 3};
  int in = 0, out = 0;
  auto members = hub.Arrive("k", "%ar", group, 0, {&in, &out}, nullptr);
  ASSERT_EQ(members.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string message(members.status().message());
  EXPECT_THAT(message, HasSubstr("replica 1 partition 0 did not arrive"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("replica 2")));
}

// A collective in a loop body meets once per iteration: each member's n-th
// arrival at its key is one meeting (NextInstance), and a meeting everyone
// has left is gone, so a second iteration does not find the first's
// members there (which would be "arrived twice").
TEST(CollectiveHub, EachIterationOfALoopMeetsAnew) {
  CollectiveHub hub(2, 1, absl::Seconds(30));
  const std::vector<int64_t> group = {0, 1};
  constexpr int kIterations = 50;
  std::vector<int> seen(2 * kIterations, -1);
  const auto member = [&](int index) {
    for (int i = 0; i < kIterations; ++i) {
      int in = 100 * index + i;
      const std::string key = hub.NextInstance("body/3", group[index]);
      EXPECT_EQ(key, absl::StrCat("body/3@", i));
      auto members =
          hub.Arrive(key, "%ar", group, index, {&in, nullptr}, nullptr);
      ASSERT_TRUE(members.ok()) << members.status();
      // The peer's value of this same iteration.
      seen[2 * i + index] =
          *static_cast<const int*>((*members)[1 - index].input);
      hub.Depart(key);
    }
  };
  std::thread peer(member, 1);
  member(0);
  peer.join();
  for (int i = 0; i < kIterations; ++i) {
    EXPECT_EQ(seen[2 * i], 100 + i);
    EXPECT_EQ(seen[2 * i + 1], i);
  }
  EXPECT_EQ(hub.open_meetings(), 0);
}

}  // namespace
}  // namespace pjrt::compiler
