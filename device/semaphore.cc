#include "device/semaphore.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/check.h"

namespace pjrt::device {

Semaphore::Semaphore(int64_t capacity) : capacity_(capacity) {
  PJRT_DCHECK(capacity >= 1) << "capacity " << capacity;
}

void Semaphore::Acquire(int64_t amount) {
  PJRT_DCHECK(amount >= 1 && amount <= capacity_) << "amount " << amount;
  MutexLock lock(&mu_);
  mu_.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return in_use_ + amount <= capacity_;
  });
  in_use_ += amount;
  peak_ = std::max(peak_, in_use_);
}

bool Semaphore::AcquireFor(int64_t amount, absl::Duration timeout) {
  PJRT_DCHECK(amount >= 1 && amount <= capacity_) << "amount " << amount;
  MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return in_use_ + amount <= capacity_;
          },
          timeout)) {
    return false;
  }
  in_use_ += amount;
  peak_ = std::max(peak_, in_use_);
  return true;
}

Semaphore::ScopedReservation Semaphore::ScopedAcquire(int64_t amount) {
  Acquire(amount);
  return ScopedReservation(this, amount);
}

void Semaphore::Release(int64_t amount) {
  MutexLock lock(&mu_);
  in_use_ -= amount;
}

int64_t Semaphore::in_use() const {
  MutexLock lock(&mu_);
  return in_use_;
}

int64_t Semaphore::peak_in_use() const {
  MutexLock lock(&mu_);
  return peak_;
}

Semaphore::ScopedReservation::~ScopedReservation() {
  if (semaphore_ != nullptr) semaphore_->Release(amount_);
}

Semaphore::ScopedReservation::ScopedReservation(
    ScopedReservation&& other) noexcept
    : semaphore_(std::exchange(other.semaphore_, nullptr)),
      amount_(other.amount_) {}

Semaphore::ScopedReservation& Semaphore::ScopedReservation::operator=(
    ScopedReservation&& other) noexcept {
  if (this != &other) {
    if (semaphore_ != nullptr) semaphore_->Release(amount_);
    semaphore_ = std::exchange(other.semaphore_, nullptr);
    amount_ = other.amount_;
  }
  return *this;
}

}  // namespace pjrt::device
