#include "device/worker_thread.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace pjrt::device {
namespace {

// A one-shot signal on the project's mutex, which ThreadSanitizer sees
// (Debian's abseil is not instrumented).
class Signal {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  void WaitForNotification() {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return notified_; });
  }

 private:
  Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(WorkerThreadTest, RunsClosuresInOrderOnItsThread) {
  WorkerThread worker("test-worker");
  std::vector<int> order;
  std::thread::id ran_on;
  Signal done;
  for (int i = 0; i < 100; ++i) {
    worker.Schedule([&order, i] { order.push_back(i); });
  }
  worker.Schedule([&] {
    ran_on = std::this_thread::get_id();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkerThreadTest, TheInlineCallerRunsItsClosuresWhenIdle) {
  WorkerThread worker("test-worker");
  std::thread::id ran_on;
  {
    WorkerThread::InlineCaller caller = worker.LetCallerRunWhenIdle();
    ASSERT_TRUE(caller.active());
    worker.Schedule([&] { ran_on = std::this_thread::get_id(); });
    // Ran before Schedule returned.
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    EXPECT_EQ(worker.pending(), 0);
  }
  // Once the caller is gone it goes to the worker again.
  Signal done;
  worker.Schedule([&] {
    ran_on = std::this_thread::get_id();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(WorkerThreadTest, TheInlineCallerQueuesBehindBusyWorkAndKeepsOrder) {
  WorkerThread worker("test-worker");
  Signal release, started;
  std::vector<int> order;
  worker.Schedule([&] {
    started.Notify();
    release.WaitForNotification();
    order.push_back(0);
  });
  started.WaitForNotification();
  std::thread::id ran_on;
  {
    WorkerThread::InlineCaller caller = worker.LetCallerRunWhenIdle();
    // The worker is busy: this one must wait its turn, on the worker.
    worker.Schedule([&] {
      order.push_back(1);
      ran_on = std::this_thread::get_id();
    });
    EXPECT_EQ(worker.pending(), 2);
  }
  release.Notify();
  Signal done;
  worker.Schedule([&] { done.Notify(); });
  done.WaitForNotification();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(WorkerThreadTest, WorkScheduledDuringAnInlineClosureRunsAfterIt) {
  WorkerThread worker("test-worker");
  std::vector<int> order;
  Signal done;
  {
    WorkerThread::InlineCaller caller = worker.LetCallerRunWhenIdle();
    worker.Schedule([&] {
      order.push_back(0);
      // Nested: queued (the inline closure counts as running), so it runs
      // after this one on the worker.
      worker.Schedule([&] {
        order.push_back(2);
        done.Notify();
      });
      order.push_back(1);
    });
  }
  done.WaitForNotification();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(WorkerThreadTest, InlineAndQueuedClosuresFromManyThreadsNeverOverlap) {
  WorkerThread worker("test-worker");
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        std::optional<WorkerThread::InlineCaller> caller;
        if ((i + t) % 2 == 0) caller.emplace(worker.LetCallerRunWhenIdle());
        worker.Schedule([&] {
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          ran.fetch_add(1);
          inside.fetch_sub(1);
        });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Signal done;
  worker.Schedule([&] { done.Notify(); });
  done.WaitForNotification();
  EXPECT_EQ(ran.load(), 2000);
  EXPECT_EQ(overlaps.load(), 0);
}

// One inline caller at a time, and only the caller's own closures run
// inline: another thread's go to the worker.
TEST(WorkerThreadTest, OnlyTheInlineCallerRunsInline) {
  WorkerThread worker("test-worker");
  WorkerThread::InlineCaller caller = worker.LetCallerRunWhenIdle();
  ASSERT_TRUE(caller.active());
  std::thread::id other_id, ran_on;
  bool second_active = true;
  Signal done;
  std::thread other([&] {
    other_id = std::this_thread::get_id();
    WorkerThread::InlineCaller second = worker.LetCallerRunWhenIdle();
    second_active = second.active();
    worker.Schedule([&] {
      ran_on = std::this_thread::get_id();
      done.Notify();
    });
  });
  other.join();
  done.WaitForNotification();
  EXPECT_FALSE(second_active);
  EXPECT_NE(ran_on, other_id);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// The worker's own closures never make it an inline caller of itself.
TEST(WorkerThreadTest, TheWorkerCannotBeItsOwnInlineCaller) {
  WorkerThread worker("test-worker");
  bool active = true;
  Signal done;
  worker.Schedule([&] {
    active = worker.LetCallerRunWhenIdle().active();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_FALSE(active);
}

}  // namespace
}  // namespace pjrt::device
