// CollectiveHub with participants on several tasks: only this task's meet
// at the hub, and the leader's status reaches every member.
#include "compiler/collectives.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace pjrt::compiler
