#include "base/mutex.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace pjrt {
namespace {

TEST(MutexTest, ExcludesOtherHolders) {
  Mutex mu;
  int64_t count = 0;  // guarded by mu; a race would lose increments
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  for (auto& t : threads) t.join();
  MutexLock lock(&mu);
  EXPECT_EQ(count, 40000);
}

TEST(MutexTest, AwaitReturnsAtOnceWhenTheConditionHolds) {
  Mutex mu;
  bool ready = true;
  int evaluations = 0;
  MutexLock lock(&mu);
  mu.Await([&] {
    ++evaluations;
    return ready;
  });
  EXPECT_EQ(evaluations, 1);
}

TEST(MutexTest, AwaitBlocksUntilAnotherThreadMakesTheConditionTrue) {
  Mutex mu;
  int stage = 0;
  std::thread other([&] {
    MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stage == 1; });
    stage = 2;
  });
  {
    MutexLock lock(&mu);
    stage = 1;
  }
  {
    MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stage == 2; });
    EXPECT_EQ(stage, 2);
  }
  other.join();
}

TEST(MutexTest, AwaitWithTimeoutGivesUpWithTheConditionFalse) {
  Mutex mu;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(
      mu.AwaitWithTimeout([] { return false; }, absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
}

TEST(MutexTest, AwaitWithTimeoutReturnsTrueOnceTheConditionHolds) {
  Mutex mu;
  bool ready = false;
  std::thread other([&] {
    MutexLock lock(&mu);
    ready = true;
  });
  {
    MutexLock lock(&mu);
    // Far longer than the other thread needs: returning true proves it was
    // woken by the unlock, not by the timeout.
    EXPECT_TRUE(mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ready; },
        absl::Seconds(60)));
  }
  other.join();
}

// A thread that makes another's condition true and then blocks in Await
// wakes it at once: blocking releases the mutex as Unlock does. (Without
// that, each wait below would last its whole timeout.)
TEST(MutexTest, AnAwaitThatBlocksWakesAWaiterWhoseConditionItMadeTrue) {
  Mutex mu;
  bool waiting = false;
  int stage = 0;
  bool other_saw_stage_1 = false;
  std::thread other([&] {
    MutexLock lock(&mu);
    waiting = true;
    other_saw_stage_1 = mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stage == 1; },
        absl::Seconds(120));
    stage = 2;
  });
  const absl::Time start = absl::Now();
  {
    MutexLock lock(&mu);
    // Woken when `other` blocks.
    mu.AwaitWithTimeout([&]()
                            ABSL_NO_THREAD_SAFETY_ANALYSIS { return waiting; },
                        absl::Seconds(120));
    stage = 1;
    // Blocks, releasing the mutex: `other` wakes, and wakes us in turn.
    mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stage == 2; },
        absl::Seconds(120));
    EXPECT_EQ(stage, 2);
  }
  other.join();
  EXPECT_TRUE(other_saw_stage_1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
}

// Unlock wakes a waiter only when its condition holds: a thread waiting for
// the 1000th step is not woken by the 999 before it.
TEST(MutexTest, UnlockDoesNotWakeAWaiterWhoseConditionIsFalse) {
  Mutex mu;
  int step = 0;
  bool waiting = false;
  std::atomic<int> evaluations_on_waiter{0};
  std::thread waiter([&] {
    const std::thread::id me = std::this_thread::get_id();
    MutexLock lock(&mu);
    waiting = true;
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (std::this_thread::get_id() == me) ++evaluations_on_waiter;
      return step == 1000;
    });
  });
  {
    MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return waiting; });
  }
  for (int i = 0; i < 1000; ++i) {
    MutexLock lock(&mu);
    ++step;
  }
  waiter.join();
  // One evaluation before blocking, one after the wake-up; a spurious
  // wake-up of the condition variable may add a few, never hundreds.
  EXPECT_LE(evaluations_on_waiter.load(), 20);
  EXPECT_GE(evaluations_on_waiter.load(), 2);
}

TEST(MutexTest, WaitersWithDifferentConditionsEachWakeForTheirOwn) {
  Mutex mu;
  int value = 0;
  int arrived = 0;
  std::vector<std::thread> waiters;
  std::vector<int> woke_at(4, -1);
  for (int w = 0; w < 4; ++w) {
    waiters.emplace_back([&, w] {
      MutexLock lock(&mu);
      ++arrived;
      mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return value >= w + 1; });
      woke_at[w] = value;
    });
  }
  {
    MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return arrived == 4; });
  }
  for (int v = 1; v <= 4; ++v) {
    MutexLock lock(&mu);
    value = v;
    // Waiter v-1 now returns; the next step waits for it so that every
    // waiter sees the value it waited for.
    mu.Await(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return woke_at[v - 1] != -1; });
  }
  for (auto& t : waiters) t.join();
  for (int w = 0; w < 4; ++w) EXPECT_EQ(woke_at[w], w + 1) << "waiter " << w;
}

// A waiter may destroy the mutex (with the object around it) as soon as its
// Await returns: Unlock does not touch the mutex after the waiter can run.
// AddressSanitizer and ThreadSanitizer builds catch a use after free here.
TEST(MutexTest, AWaiterMayDestroyTheMutexOnceAwaitReturns) {
  struct Box {
    Mutex mu;
    bool done = false;
  };
  for (int round = 0; round < 200; ++round) {
    auto* box = new Box;
    std::thread signaller([box] {
      MutexLock lock(&box->mu);
      box->done = true;
    });
    {
      MutexLock lock(&box->mu);
      box->mu.Await([box]()
                        ABSL_NO_THREAD_SAFETY_ANALYSIS { return box->done; });
    }
    delete box;  // the signaller may still be inside its Unlock
    signaller.join();
  }
}

}  // namespace
}  // namespace pjrt
