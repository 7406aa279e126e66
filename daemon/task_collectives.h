// Collectives between the tasks of a cluster (host platform).
//
// ExchangeDirectory is the rendezvous the cluster needs, kept by task 0 and
// reached by the others over the authenticated peer channel (Peer.StoreSet,
// StoreGet, Meet): a key-value store for Gloo's context addresses, and
// barriers that tell who has arrived at an exchange. No extra service to
// deploy.
//
// GlooTransport moves the data (compiler::TaskTransport). An exchange first
// meets its tasks at a barrier in the directory, so that a task that never
// arrives is named after the collective timeout; then it runs Gloo's
// allreduce or allgatherv on the connections of its set of tasks. Those
// connections (a Gloo context, full mesh over TCP) are made once per set of
// tasks and kept; they are keyed by the tasks and their incarnations, so a
// task that restarts gets new ones, and dropped after any failure. Each set's
// connections carry a generation that the tasks report at the barrier: one
// that dropped its connections reports a higher one, and every task then
// connects anew at the highest, so that no task keeps using connections its
// peers have given up.
//
// Thread-safe.
#ifndef PJRT_DAEMON_TASK_COLLECTIVES_H_
#define PJRT_DAEMON_TASK_COLLECTIVES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "compiler/collectives.h"
#include "pjrt/v1/cluster.pb.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace pjrt::daemon {

class Cluster;

// Bounds on what the directory holds (peers are authenticated, but a
// confused one must not grow it without end).
inline constexpr int kMaxDirectoryEntries = 65536;
inline constexpr int kMaxDirectoryKeyBytes = 1024;
inline constexpr int kMaxDirectoryValueBytes = 64 << 10;
// How long an entry, or a barrier nobody touches, is kept.
inline constexpr absl::Duration kDirectoryEntryLifetime = absl::Minutes(10);
// The longest one StoreGet or Meet call waits; callers call again.
inline constexpr absl::Duration kDirectoryMaxWait = absl::Seconds(1);

class ExchangeDirectory {
 public:
  ExchangeDirectory() = default;
  ExchangeDirectory(const ExchangeDirectory&) = delete;
  ExchangeDirectory& operator=(const ExchangeDirectory&) = delete;

  // INVALID_ARGUMENT for a key or value past the bounds above,
  // RESOURCE_EXHAUSTED when the directory is full.
  absl::Status Set(const std::string& key, const std::string& value);
  // Waits up to `timeout` (at most kDirectoryMaxWait) for every key.
  v1::StoreGetResponse Get(const std::vector<std::string>& keys,
                           absl::Duration timeout);
  // See Peer.Meet. INVALID_ARGUMENT when the caller is not among `tasks`,
  // the tasks are not ascending, or they differ from the barrier's.
  absl::StatusOr<v1::MeetResponse> Meet(const v1::MeetRequest& request);

 private:
  struct Entry {
    std::string value;
    absl::Time set;
  };
  struct Barrier {
    std::vector<int> tasks;
    std::map<int, int64_t> values;
    // Tasks that were told the barrier completed.
    std::set<int> told;
    absl::Time touched;
  };
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Barrier> barriers_ ABSL_GUARDED_BY(mu_);
  absl::Time last_expiry_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

class GlooTransport final : public compiler::TaskTransport {
 public:
  // `directory` is this task's own on task 0, null elsewhere (then task 0's
  // is called over the peer channel). `cluster` must be formed.
  GlooTransport(Cluster* cluster, ExchangeDirectory* directory);
  ~GlooTransport() override;
  GlooTransport(const GlooTransport&) = delete;
  GlooTransport& operator=(const GlooTransport&) = delete;

  absl::Status AllReduce(const Exchange& exchange, void* data, int64_t elements,
                         int element_bytes, const Reducer& reduce) override;
  absl::Status AllGather(const Exchange& exchange, const void* mine,
                         absl::Span<const int64_t> bytes, void* out) override;
  absl::Status AllToAll(const Exchange& exchange, const void* send,
                        absl::Span<const int64_t> send_bytes, void* receive,
                        absl::Span<const int64_t> receive_bytes) override;

  // The directory's calls, on task 0's directory wherever this task is.
  absl::Status StoreSet(const std::string& key, const std::string& value);
  absl::StatusOr<v1::StoreGetResponse> StoreGet(
      const std::vector<std::string>& keys, absl::Duration timeout);
  absl::StatusOr<v1::MeetResponse> Meet(const v1::MeetRequest& request);

 private:
  // The connections of one set of tasks.
  struct Connections {
    Mutex mu;
    int64_t generation ABSL_GUARDED_BY(mu) = 0;
    std::shared_ptr<gloo::Context> context ABSL_GUARDED_BY(mu);
  };

  // Meets the exchange's tasks and returns connections every one of them
  // uses (made now if needed), with `*connections` set for Failed.
  absl::StatusOr<std::shared_ptr<gloo::Context>> Prepare(
      const Exchange& exchange, std::shared_ptr<Connections>* connections);
  // Drops the connections after a failed transfer and says what failed,
  // naming the tasks that are gone when it can tell.
  absl::Status Failed(const Exchange& exchange, Connections* connections,
                      absl::string_view what);
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> Device();

  Cluster* const cluster_;
  ExchangeDirectory* const directory_;
  Mutex mu_;
  std::shared_ptr<gloo::transport::Device> device_ ABSL_GUARDED_BY(mu_);
  // By tasks and their incarnations ("0,1@5a..,c3.."); only the newest
  // incarnations of a set of tasks are kept.
  std::map<std::string, std::shared_ptr<Connections>> connections_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_TASK_COLLECTIVES_H_
