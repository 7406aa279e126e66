#include "base/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"

namespace pjrt {
namespace {

// getrandom() costs a system call; ids are drawn from a refilled pool.
class RandomPool {
 public:
  uint64_t Next() {
    pjrt::MutexLock lock(&mu_);
    for (;;) {
      if (next_ == kSize) Refill();
      uint64_t value = pool_[next_++];
      if (value != 0) return value;
    }
  }

 private:
  static constexpr int kSize = 64;

  void Refill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    char* out = reinterpret_cast<char*>(pool_);
    size_t remaining = sizeof(pool_);
    while (remaining > 0) {
      ssize_t n = getrandom(out, remaining, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        // Without entropy no id is safe to hand out; this is not a client's
        // doing and cannot be recovered from.
        std::abort();
      }
      out += n;
      remaining -= static_cast<size_t>(n);
    }
    next_ = 0;
  }

  pjrt::Mutex mu_;
  uint64_t pool_[kSize] ABSL_GUARDED_BY(mu_) = {};
  int next_ ABSL_GUARDED_BY(mu_) = kSize;
};

}  // namespace

uint64_t SecureRandomId() {
  static RandomPool* pool = new RandomPool;
  return pool->Next();
}

}  // namespace pjrt
