// Cross-host transfers: the receives a task has handed out descriptors for,
// the descriptor format, and the sender's push.
//
// The receiving task makes receive buffers (allocated, not yet defined) and
// one descriptor per buffer: the 4 bytes "PJXD" and a serialized
// v1::CrossHostDescriptor naming the task, its incarnation, the device, a
// receive id, a 16-byte random token, the shape and an expiry. The sending
// task streams the bytes to the receiving task's Peer.PushTransfer with the
// descriptor in front; Claim() checks it and hands the push handler the
// receive, once. A receive ends in exactly one way: complete (the buffer is
// defined), failed or cancelled (an error is bound to the buffer), or
// expired (DEADLINE_EXCEEDED bound to the buffer). Ended receives are
// remembered for a while so that a late or repeated descriptor is refused
// with the reason.
//
// Thread-safe.
#ifndef PJRT_DAEMON_CROSS_HOST_H_
#define PJRT_DAEMON_CROSS_HOST_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "daemon/cluster.h"
#include "hlo/shape.h"
#include "pjrt/v1/cluster.pb.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/host_to_device_transfer.h"

namespace pjrt::daemon {

inline constexpr uint32_t kDescriptorVersion = 1;

// "PJXD" + the message. INVALID_ARGUMENT saying what is wrong for bytes that
// are not a descriptor of a version this build reads.
std::string SerializeDescriptor(const v1::CrossHostDescriptor& descriptor);
absl::StatusOr<v1::CrossHostDescriptor> ParseDescriptor(
    absl::string_view bytes);

class CrossHostReceives {
 public:
  CrossHostReceives(runtime::Client* client, int task_id, uint64_t incarnation);
  // Fails every receive still waiting (the daemon is going away).
  ~CrossHostReceives();
  CrossHostReceives(const CrossHostReceives&) = delete;
  CrossHostReceives& operator=(const CrossHostReceives&) = delete;

  struct Made {
    std::vector<std::shared_ptr<runtime::Buffer>> buffers;
    std::vector<std::string> descriptors;
  };
  // Allocates one receive buffer per shape on `device`, valid for `timeout`.
  // RESOURCE_EXHAUSTED (and nothing made) if they do not fit.
  absl::StatusOr<Made> Make(absl::Span<const hlo::Shape> shapes,
                            runtime::Device* device, absl::Duration timeout);

  // A receive handed to the push handler that fills it.
  struct Claimed {
    uint64_t receive_id = 0;
    std::unique_ptr<runtime::HostToDeviceTransfer> transfer;
    absl::Time expiry;
  };
  // Checks `descriptor` against the receives of this task and hands out the
  // one it names. Refusals say why: another task or an earlier run of this
  // one (FAILED_PRECONDITION), unknown receive or wrong token
  // (PERMISSION_DENIED: forged), already used, cancelled or expired
  // (FAILED_PRECONDITION), shape mismatch (INVALID_ARGUMENT).
  absl::StatusOr<Claimed> Claim(const v1::CrossHostDescriptor& descriptor);
  // Ends a claimed receive: defined if `status` is OK and every byte came,
  // otherwise `status` is bound to the buffer.
  void Complete(Claimed claimed, absl::Status status);

  // Cancels the waiting receives of these buffers; returns how many were
  // waiting.
  int Cancel(absl::Span<const std::shared_ptr<runtime::Buffer>> buffers);
  // Expires overdue receives and forgets those whose buffer was deleted.
  // Returns how many ended.
  int Reap(absl::Time now);

  // Receives waiting for data.
  int pending() const;
  // Bytes pushed into receives since start-up (counted as they arrive).
  void CountReceived(int64_t bytes) { bytes_received_.fetch_add(bytes); }
  int64_t bytes_received() const { return bytes_received_.load(); }

 private:
  struct Pending {
    std::unique_ptr<runtime::HostToDeviceTransfer> transfer;
    std::string token;
    hlo::Shape shape;
    int device_id = 0;
    absl::Time expiry;
  };
  void RememberEnded(uint64_t id, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  runtime::Client* const client_;
  const int task_id_;
  const uint64_t incarnation_;
  std::atomic<int64_t> bytes_received_{0};

  mutable pjrt::Mutex mu_;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Why each recently ended receive ended, oldest first in `ended_order_`.
  absl::flat_hash_map<uint64_t, std::string> ended_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> ended_order_ ABSL_GUARDED_BY(mu_);
};

// The sending side: streams the bytes of `buffer` (defined by now) to the
// receive that `descriptor` (as the receiving task serialized it) names on
// task `task`, in chunks of at most `chunk_bytes`, through that task's
// Peer.PushTransfer; straight from device memory, under an external
// reference, where the host can read it (`host_reads_device_memory`), else
// through the device-to-host stream. Stops when `cancelled` says so.
// Returns the bytes sent (all of them) once the receiver has them; an error
// names the task and how far the copy got.
absl::StatusOr<int64_t> PushToTask(Cluster& cluster,
                                   bool host_reads_device_memory,
                                   runtime::Buffer& buffer, int task,
                                   const std::string& descriptor,
                                   int64_t chunk_bytes,
                                   const std::function<bool()>& cancelled);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_CROSS_HOST_H_
