// FairQueue: admission of executions to one device, shared fairly between
// tenants (docs/security.md).
//
// At most `depth` executions are admitted and unfinished at once. When more
// wait, tenants take turns in weighted round robin: a tenant of weight w
// has up to w executions admitted in its turn, then the next tenant with
// waiters goes. A tenant that queues thousands of executions therefore
// delays another tenant's execution by at most about `depth` plus the
// weights of the tenants ahead in the ring, not by its whole queue.
//
// Thread-safe.
#ifndef PJRT_DAEMON_FAIR_QUEUE_H_
#define PJRT_DAEMON_FAIR_QUEUE_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "base/mutex.h"

namespace pjrt::daemon {

class FairQueue {
 public:
  explicit FairQueue(int depth);
  FairQueue(const FairQueue&) = delete;
  FairQueue& operator=(const FairQueue&) = delete;

  // An admitted execution; releasing it (or destroying it) lets the next
  // one in. Movable.
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(FairQueue* queue) : queue_(queue) {}
    Ticket(Ticket&& other) noexcept : queue_(other.queue_) {
      other.queue_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    void Release();

   private:
    FairQueue* queue_ = nullptr;
  };

  // Waits for `tenant`'s turn (a key: one per tenant) and admits one
  // execution. Gives up with the cancellation's reason if `cancellation`
  // (may be null) is cancelled while waiting.
  absl::StatusOr<Ticket> Enter(const void* tenant, int weight,
                               const Cancellation* cancellation);

  // Admitted and unfinished; waiting.
  int in_flight() const;
  int waiting() const;

 private:
  struct Waiter {
    bool admitted = false;
  };
  struct TenantQueue {
    std::deque<Waiter*> waiters;
    int weight = 1;
    // Admissions left in the tenant's current turn.
    int credit = 0;
  };

  void Leave();
  // Admits waiters, in turn, while there is room.
  void AdmitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int depth_;
  mutable Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<const void*, TenantQueue> queues_ ABSL_GUARDED_BY(mu_);
  // Tenants with waiters, the one whose turn it is first.
  std::deque<const void*> ring_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_FAIR_QUEUE_H_
