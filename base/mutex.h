// Mutex: a std::mutex with abseil's thread-safety annotations and
// absl::Mutex-style waiting on conditions.
//
// Why not absl::Mutex: the project builds against Debian's abseil, whose
// synchronisation primitives are not instrumented for ThreadSanitizer, so
// TSan builds could not see the happens-before edges they create. std::mutex
// and std::condition_variable go through pthreads, which TSan understands.
//
// Await(cond) blocks until `cond()` holds. As with absl::Mutex, Unlock()
// (and an Await that blocks, which releases the mutex too) evaluates the
// conditions of the threads waiting and wakes them only when one of them
// holds, so a thread that waits for work is not woken by every
// other user of the mutex; conditions must therefore depend only on state
// guarded by this mutex (and be cheap and free of side effects).
#ifndef PJRT_BASE_MUTEX_H_
#define PJRT_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/check.h"

namespace pjrt {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    if (PJRT_DCHECK_IS_ON) holder_ = std::this_thread::get_id();
  }
  // Wakes the waiters, if a condition holds, before unlocking: a waiter
  // cannot return (and perhaps destroy this mutex with the object around
  // it) until it has the lock again, so the notification never touches a
  // destroyed condition variable.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    AssertHeld();
    if (PJRT_DCHECK_IS_ON) holder_ = std::thread::id();
    WakeWaitersWhoseConditionHolds();
    mu_.unlock();
  }

  // In debug and sanitizer builds, aborts unless the calling thread holds
  // the mutex (see base/check.h); tells the thread-safety analysis that it
  // does.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {
    PJRT_DCHECK(holder_ == std::this_thread::get_id())
        << "pjrt::Mutex not held by this thread";
  }

  // Blocks until `cond()` is true. REQUIRES: held; `cond` reads only state
  // guarded by this mutex.
  template <typename Condition>
  void Await(Condition cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithTimeout(std::move(cond), absl::InfiniteDuration());
  }

  // As Await, giving up after `timeout`. Returns cond()'s final value.
  // (The analysis is off inside: `cond` is evaluated with this mutex held,
  // which the analysis cannot match with the capability its caller names.)
  template <typename Condition>
  bool AwaitWithTimeout(Condition cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    AssertHeld();
    if (cond()) return true;
    // Blocking releases the mutex as Unlock does: what this thread changed
    // while holding it may be what another waiter waits for.
    WakeWaitersWhoseConditionHolds();
    Waiter waiter{&Holds<Condition>, &cond, waiters_};
    waiters_ = &waiter;
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    bool result;
    if (timeout == absl::InfiniteDuration()) {
      cv_.wait(lock, cond);
      result = true;
    } else {
      result = cv_.wait_until(
          lock,
          std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout),
          cond);
    }
    lock.release();
    if (PJRT_DCHECK_IS_ON) holder_ = std::this_thread::get_id();
    for (Waiter** w = &waiters_; *w != nullptr; w = &(*w)->next) {
      if (*w == &waiter) {
        *w = waiter.next;
        break;
      }
    }
    return result;
  }

 private:
  // A thread blocked in Await, with its condition; a list on its stack.
  struct Waiter {
    bool (*holds)(void* cond);
    void* cond;
    Waiter* next;
  };
  template <typename Condition>
  static bool Holds(void* cond) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return (*static_cast<Condition*>(cond))();
  }
  void WakeWaitersWhoseConditionHolds() {
    for (Waiter* w = waiters_; w != nullptr; w = w->next) {
      if (w->holds(w->cond)) {
        cv_.notify_all();
        return;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  Waiter* waiters_ = nullptr;
  // The thread that holds mu_, kept only in debug and sanitizer builds.
  // Guarded by mu_.
  std::thread::id holder_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace pjrt

#endif  // PJRT_BASE_MUTEX_H_
