#include "device/host/host_event.h"

#include <thread>

#include "gtest/gtest.h"

namespace pjrt::device {
namespace {

TEST(HostEvent, WaitReturnsOnceCompletedFromAnotherThread) {
  HostEvent event;
  EXPECT_FALSE(event.IsComplete());
  std::thread producer([&] { event.Complete(); });
  event.Wait();
  producer.join();
  EXPECT_TRUE(event.IsComplete());
}

TEST(HostEvent, WaitForTimesOutWhilePending) {
  HostEvent event;
  EXPECT_FALSE(event.WaitFor(absl::Milliseconds(1)));
}

TEST(HostEvent, CompletesOnce) {
  HostEvent event;
  EXPECT_TRUE(event.Complete());
  EXPECT_FALSE(event.Complete());
}

TEST(HostEvent, CallbacksRunOnceWhetherAddedBeforeOrAfter) {
  HostEvent event;
  int before = 0, after = 0;
  event.AddCallback([&] { ++before; });
  event.Complete();
  event.AddCallback([&] { ++after; });
  EXPECT_EQ(before, 1);
  EXPECT_EQ(after, 1);
}

TEST(HostEvent, ResetMakesItPendingAgain) {
  HostEvent event;
  event.Complete();
  event.Reset();
  EXPECT_FALSE(event.IsComplete());
}

}  // namespace
}  // namespace pjrt::device
