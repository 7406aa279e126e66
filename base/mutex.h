// Mutex: a std::mutex with abseil's thread-safety annotations and
// absl::Mutex-style waiting on conditions.
//
// Why not absl::Mutex: the project builds against Debian's abseil, whose
// synchronisation primitives are not instrumented for ThreadSanitizer, so
// TSan builds could not see the happens-before edges they create. std::mutex
// and std::condition_variable go through pthreads, which TSan understands.
//
// Await(cond) blocks until `cond()` holds. Every Unlock() wakes the waiters so
// that they re-check their conditions, as absl::Mutex does; conditions must
// depend only on state guarded by this mutex.
#ifndef PJRT_BASE_MUTEX_H_
#define PJRT_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace pjrt {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes waiters before unlocking: a waiter cannot return (and perhaps
  // destroy this mutex with the object around it) until it has the lock
  // again, so the notification never touches a destroyed condition variable.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    cv_.notify_all();
    mu_.unlock();
  }

  // Blocks until `cond()` is true. REQUIRES: held; `cond` reads only state
  // guarded by this mutex.
  template <typename Condition>
  void Await(Condition cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv_.wait(lock, cond);
    lock.release();
  }

  // As Await, giving up after `timeout`. Returns cond()'s final value.
  template <typename Condition>
  bool AwaitWithTimeout(Condition cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
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
    return result;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
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
