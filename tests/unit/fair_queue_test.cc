// FairQueue: admission depth, turns between tenants by weight, giving up.
#include "daemon/fair_queue.h"

#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

// Waits (bounded) until `queue` has `n` waiters.
void AwaitWaiting(const FairQueue& queue, int n) {
  for (int i = 0; i < 100000 && queue.waiting() != n; ++i) {
    std::this_thread::yield();
  }
  ASSERT_EQ(queue.waiting(), n);
}

// With depth 1 and one admitted execution held, queues `a` waiters of
// tenant "A" (weight `weight_a`), then one of "B"; lets them in one at a
// time and returns the order in which the tenants were admitted.
std::string AdmissionOrder(int a, int weight_a) {
  FairQueue queue(1);
  static const char kA = 'A', kB = 'B';
  auto held = queue.Enter(&kA, weight_a, nullptr);
  EXPECT_TRUE(held.ok());
  Mutex mu;
  std::string order;
  std::vector<std::thread> threads;
  const auto waiter = [&](const char* tenant, int weight) {
    threads.emplace_back([&, tenant, weight] {
      auto ticket = queue.Enter(tenant, weight, nullptr);
      ASSERT_TRUE(ticket.ok());
      MutexLock lock(&mu);
      order.push_back(*tenant);
      // The ticket goes when this thread ends: the next one gets in.
    });
  };
  for (int i = 0; i < a; ++i) {
    waiter(&kA, weight_a);
    AwaitWaiting(queue, i + 1);
  }
  waiter(&kB, 1);
  AwaitWaiting(queue, a + 1);
  held->Release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(queue.in_flight(), 0);
  return order;
}

TEST(FairQueue, AdmitsUpToItsDepthAtOnce) {
  FairQueue queue(2);
  int tenant = 0;
  auto a = queue.Enter(&tenant, 1, nullptr);
  auto b = queue.Enter(&tenant, 1, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(queue.in_flight(), 2);
  std::thread third(
      [&] { ASSERT_TRUE(queue.Enter(&tenant, 1, nullptr).ok()); });
  AwaitWaiting(queue, 1);
  EXPECT_EQ(queue.in_flight(), 2);  // the third waits
  a->Release();
  third.join();
  EXPECT_EQ(queue.waiting(), 0);
  EXPECT_EQ(queue.in_flight(), 1);
}

TEST(FairQueue, AWaitingTenantGoesAfterOneTurnOfAnother) {
  // A queued five before B came; B still goes second.
  EXPECT_EQ(AdmissionOrder(5, 1), "ABAAAA");
}

TEST(FairQueue, WeightIsTheLengthOfATurn) {
  EXPECT_EQ(AdmissionOrder(5, 3), "AAABAA");
}

TEST(FairQueue, AWaiterThatIsCancelledLeavesTheLine) {
  FairQueue queue(1);
  int a = 0, b = 0;
  auto held = queue.Enter(&a, 1, nullptr);
  ASSERT_TRUE(held.ok());
  Cancellation cancellation;
  std::thread waiter([&] {
    auto ticket = queue.Enter(&b, 1, &cancellation);
    ASSERT_FALSE(ticket.ok());
    EXPECT_EQ(ticket.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(ticket.status().message().find("device's queue"),
              std::string::npos);
  });
  AwaitWaiting(queue, 1);
  cancellation.Cancel(absl::DeadlineExceededError("the call's deadline"));
  waiter.join();
  EXPECT_EQ(queue.waiting(), 0);
  held->Release();
  EXPECT_EQ(queue.in_flight(), 0);
  // The queue still works.
  EXPECT_TRUE(queue.Enter(&b, 1, nullptr).ok());
}

}  // namespace
}  // namespace pjrt::daemon
