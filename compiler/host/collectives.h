// Collectives between the devices of one launch on the host platform.
//
// Every participant of a launch (one per replica × partition that this
// process runs) runs its own copy of the program on its own device's compute
// stream. At a collective, each participant arrives at a rendezvous with its
// input and output buffers (host memory, readable by all); once the whole
// group is there, each does its share of the work reading the peers' inputs
// and writing the peers' outputs directly, then waits until every member is
// done before anyone leaves (so no input is freed or overwritten while a peer
// still reads it).
//
// Every wait is bounded: a member that does not arrive in time, or that
// failed, ends the wait for the others with an error naming it. A waiting
// member whose run is cancelled stops waiting within
// Cancellation::kPollInterval, and its peers fail with it.
//
// Thread-safe.
#ifndef PJRT_COMPILER_HOST_COLLECTIVES_H_
#define PJRT_COMPILER_HOST_COLLECTIVES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/cancellation.h"
#include "base/mutex.h"

namespace pjrt::compiler::host {

// The participants of one launch and their rendezvous.
class CollectiveHub {
 public:
  // `num_replicas` × `num_partitions` participants, identified by their
  // flattened id replica * num_partitions + partition.
  CollectiveHub(int64_t num_replicas, int64_t num_partitions,
                absl::Duration timeout);
  CollectiveHub(const CollectiveHub&) = delete;
  CollectiveHub& operator=(const CollectiveHub&) = delete;

  int64_t num_replicas() const { return num_replicas_; }
  int64_t num_partitions() const { return num_partitions_; }

  struct Member {
    const void* input = nullptr;
    void* output = nullptr;
  };

  // Records that participant `id` (a flattened id) starts its part of the
  // launch. INVALID_ARGUMENT if it already did (two runs of one part would
  // meet at a rendezvous in one member's place) or if `id` is out of range.
  absl::Status Join(int64_t id);

  // Arrives at collective `key` (the same for every member of its group) as
  // member `index` of `group` (flattened ids), and returns every member's
  // buffers in group order once all have arrived. DEADLINE_EXCEEDED naming
  // the op (`name`, e.g. "%ar (line 7)") and the missing members after the
  // timeout; ABORTED if a member failed; the cancellation's reason if
  // `cancellation` (may be null) is cancelled meanwhile. Once every member
  // has arrived the rendezvous is committed: each then does its share and
  // must call Depart.
  absl::StatusOr<std::vector<Member>> Arrive(const std::string& key,
                                             absl::string_view name,
                                             absl::Span<const int64_t> group,
                                             int index, Member mine,
                                             const Cancellation* cancellation);

  // Called once after a successful Arrive and this member's share of the
  // work: waits until every member has finished its share (no member's
  // memory may be released while a peer still touches it). Never gives up:
  // the members it waits for are doing plain memory work.
  void Depart(const std::string& key);

  // Tells waiting and future members that participant `id` failed with
  // `status`.
  void Fail(int64_t id, const absl::Status& status);

  // "replica 2 partition 0".
  std::string Name(int64_t id) const;

 private:
  struct Rendezvous {
    std::vector<Member> members;
    std::vector<bool> arrived;
    int arrivals = 0;
    // Members of a committed rendezvous (all arrived) that have not
    // departed.
    int working = 0;
  };

  const int64_t num_replicas_;
  const int64_t num_partitions_;
  const absl::Duration timeout_;
  Mutex mu_;
  std::map<std::string, Rendezvous> rendezvous_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> joined_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_COLLECTIVES_H_
