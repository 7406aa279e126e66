#include "device/host/host_event.h"

#include <thread>

#include "gtest/gtest.h"

namespace pjrt::device {
namespace {

TEST(HostEvent, WaitReturnsTheCompletionStatus) {
  HostEvent event;
  EXPECT_FALSE(event.IsComplete());
  std::thread producer(
      [&] { event.Complete(absl::DataLossError("producer failed")); });
  absl::Status status = event.Wait();
  producer.join();
  EXPECT_TRUE(event.IsComplete());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
}

TEST(HostEvent, WaitForTimesOutWhilePending) {
  HostEvent event;
  EXPECT_EQ(event.WaitFor(absl::Milliseconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(HostEvent, FirstCompletionWins) {
  HostEvent event;
  EXPECT_TRUE(event.Complete(absl::OkStatus()));
  EXPECT_FALSE(event.Complete(absl::InternalError("late")));
  EXPECT_TRUE(event.Wait().ok());
}

TEST(HostEvent, CallbacksRunOnceWhetherAddedBeforeOrAfter) {
  HostEvent event;
  int before = 0, after = 0;
  event.AddCallback([&](absl::Status s) { before += s.ok() ? 1 : 100; });
  event.Complete(absl::OkStatus());
  event.AddCallback([&](absl::Status s) { after += s.ok() ? 1 : 100; });
  EXPECT_EQ(before, 1);
  EXPECT_EQ(after, 1);
}

}  // namespace
}  // namespace pjrt::device
