// Semaphore: a counting semaphore whose capacity is fixed at creation. The
// compute semaphore of a device bounds how many executions the host may
// enqueue ahead of it (pacing, not correctness).
//
// Thread-safe.
#ifndef PJRT_DEVICE_SEMAPHORE_H_
#define PJRT_DEVICE_SEMAPHORE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace pjrt::device {

class Semaphore {
 public:
  // REQUIRES: capacity >= 1.
  explicit Semaphore(int64_t capacity);

  // Holds `amount` units until destroyed (or moved from).
  class ScopedReservation {
   public:
    ScopedReservation(Semaphore* semaphore, int64_t amount)
        : semaphore_(semaphore), amount_(amount) {}
    ~ScopedReservation();
    ScopedReservation(ScopedReservation&& other) noexcept;
    ScopedReservation& operator=(ScopedReservation&& other) noexcept;
    ScopedReservation(const ScopedReservation&) = delete;
    ScopedReservation& operator=(const ScopedReservation&) = delete;

   private:
    Semaphore* semaphore_;
    int64_t amount_;
  };

  // Blocks until `amount` units are free, then takes them.
  // REQUIRES: 1 <= amount <= capacity().
  void Acquire(int64_t amount);
  // As Acquire, giving up after `timeout`; returns whether it took them.
  // REQUIRES: 1 <= amount <= capacity().
  bool AcquireFor(int64_t amount, absl::Duration timeout);
  ScopedReservation ScopedAcquire(int64_t amount);
  void Release(int64_t amount);

  int64_t capacity() const { return capacity_; }
  // Units taken and not yet released.
  int64_t in_use() const;
  // Most units ever held at once.
  int64_t peak_in_use() const;

 private:
  const int64_t capacity_;
  mutable Mutex mu_;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_SEMAPHORE_H_
