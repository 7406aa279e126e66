// Collectives between the devices of one launch, for every backend.
//
// CollectiveOp describes one collective of a compiled program in terms every
// backend shares (its kind, how replica_groups name participants, its
// shapes); CollectiveGroup and CheckCollectives interpret it. The runtime
// uses them to check a launch before it runs; backends use them to find a
// run's peers.
//
// CollectiveHub is a launch's rendezvous. On the host platform every
// participant of a launch (one per replica × partition that this
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
// Across tasks: a launch of a cluster may place its participants on the
// devices of several tasks (TaskPlacement). Each task's hub then holds only
// its own participants; a group that spans tasks meets in two steps. Its
// members on this task meet at the hub as above; then one of them (the
// task's leader, the member with the lowest index) moves the data between
// the tasks through a TaskTransport (Gloo on the host platform), while the
// others wait, and every member leaves with the leader's status.
//
// Thread-safe.
#ifndef PJRT_COMPILER_COLLECTIVES_H_
#define PJRT_COMPILER_COLLECTIVES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
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

namespace pjrt::compiler {

struct RunContext;

// Moves the data of collectives between the tasks of a cluster. One per
// daemon; the daemon implements it (Gloo for the host platform).
class TaskTransport {
 public:
  virtual ~TaskTransport() = default;

  // One exchange between tasks: every task of `tasks` makes the same call
  // with the same `id` at about the same time.
  struct Exchange {
    // Ascending task ids; this task is one of them.
    std::vector<int> tasks;
    // Names this exchange of this launch alike on every task (the launch's
    // identity, the collective and its group).
    std::string id;
    // The collective, for messages ("%all-reduce.3 (line 12)").
    std::string name;
    // Bound on the wait for the other tasks and on the transfer itself.
    absl::Duration timeout = absl::Seconds(30);
    // Ends the wait for the other tasks early; may be null.
    const Cancellation* cancellation = nullptr;
  };

  // acc[0..n) = acc op in, elementwise.
  using Reducer = std::function<void(void* acc, const void* in, int64_t n)>;

  // Reduces `data` (`elements` elements of `element_bytes` bytes: 1, 2, 4,
  // 8 or 16) with every other task's, in place, with `reduce` (commutative
  // and associative). Every task gets bit-identical results.
  virtual absl::Status AllReduce(const Exchange& exchange, void* data,
                                 int64_t elements, int element_bytes,
                                 const Reducer& reduce) = 0;

  // Concatenates every task's bytes into `out`, tasks in ascending order:
  // task tasks[i] gives bytes[i] bytes (this task's are `mine`).
  virtual absl::Status AllGather(const Exchange& exchange, const void* mine,
                                 absl::Span<const int64_t> bytes,
                                 void* out) = 0;

  // Sends every task its part of `send` and receives each task's part for
  // this one into `receive`, tasks in ascending order: send_bytes[i] bytes
  // go to tasks[i] (this task's own part included), receive_bytes[i] come
  // from tasks[i].
  virtual absl::Status AllToAll(const Exchange& exchange, const void* send,
                                absl::Span<const int64_t> send_bytes,
                                void* receive,
                                absl::Span<const int64_t> receive_bytes) = 0;
};

// Where the participants of a launch run when they span tasks.
struct TaskPlacement {
  TaskTransport* transport = nullptr;
  // This task's id.
  int self = 0;
  // The task of each participant, by flattened id (replica *
  // num_partitions + partition).
  std::vector<int> task_of;
  // The launch's identity, the same on every task (its launch id and the
  // program's fingerprint): what tells its exchanges from another launch's.
  std::string launch;
};

// One collective of a program, as XLA's op describes it.
struct CollectiveOp {
  enum class Kind {
    kAllReduce,
    kAllGather,
    kReduceScatter,
    kAllToAll,
    kCollectivePermute,
  };
  // How replica_groups name participants (XLA's group modes).
  enum class Mode {
    kCrossReplica,              // replica ids, within the partition
    kCrossReplicaAndPartition,  // replica ids, with all their partitions
    kFlattenedId,               // replica * num_partitions + partition
    kCrossPartition,            // partition ids, within the replica
  };
  Kind kind = Kind::kAllReduce;
  Mode mode = Mode::kCrossReplica;
  // Unique within the program; the rendezvous key.
  std::string key;
  // "%all-reduce.3 (line 12)", for messages.
  std::string name;
  // Dimensions of operand 0 and result 0 (the only ones, except for a
  // variadic all-reduce).
  std::vector<int64_t> input_dims;
  std::vector<int64_t> output_dims;
  // The gathered, scattered or exchanged dimension.
  int64_t dimension = 0;
  std::vector<std::vector<int64_t>> replica_groups;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
};

// The flattened ids (replica * num_partitions + partition) of the
// participants of `op` that include the run of `context` (replica_id,
// partition_id, num_replicas, num_partitions), in group order, and that
// run's index among them. INVALID_ARGUMENT when replica_groups leave the
// run out or name a replica the launch does not have.
absl::Status CollectiveGroup(const CollectiveOp& op, const RunContext& context,
                             std::vector<int64_t>* group, int* index);

// Checks at compile time that every collective in `ops` is well formed for
// a launch of `num_replicas` x `num_partitions`: replica_groups name each
// participant exactly once (no duplicates, nothing out of range, nobody left
// out), source_target_pairs name members of the group at most once as
// source and once as target, and every group size fits the op's shapes (an
// all-gather's result is the group size times its operand along the
// dimension; reduce-scatter and all-to-all split it evenly).
// INVALID_ARGUMENT naming the op and the value otherwise.
absl::Status CheckCollectives(absl::Span<const CollectiveOp* const> ops,
                              int64_t num_replicas, int64_t num_partitions);

// The participants of one launch and their rendezvous.
class CollectiveHub {
 public:
  // `num_replicas` × `num_partitions` participants, identified by their
  // flattened id replica * num_partitions + partition.
  // `placement` is null when every participant runs in this process; else
  // only this task's participants join this hub.
  CollectiveHub(int64_t num_replicas, int64_t num_partitions,
                absl::Duration timeout,
                std::shared_ptr<const TaskPlacement> placement = nullptr);
  CollectiveHub(const CollectiveHub&) = delete;
  CollectiveHub& operator=(const CollectiveHub&) = delete;

  int64_t num_replicas() const { return num_replicas_; }
  int64_t num_partitions() const { return num_partitions_; }
  absl::Duration timeout() const { return timeout_; }

  struct Member {
    const void* input = nullptr;
    void* output = nullptr;
  };

  // Records that participant `id` (a flattened id) starts its part of the
  // launch. INVALID_ARGUMENT if it already did (two runs of one part would
  // meet at a rendezvous in one member's place), if `id` is out of range,
  // or if it runs on another task.
  absl::Status Join(int64_t id);

  // Whether `group` (flattened ids) has members on other tasks.
  bool SpansTasks(absl::Span<const int64_t> group) const;
  // The task of participant `id`; this task's when the launch spans none.
  int TaskOf(int64_t id) const;
  // The transport and identity of a launch that spans tasks; null
  // otherwise.
  const TaskPlacement* placement() const { return placement_.get(); }

  // The key of participant `id`'s next meeting at collective `key`: a
  // collective in a loop body or a branch meets once per run of it, and
  // every participant runs its collectives in the same order (as XLA
  // requires), so the n-th arrival of each member at `key` is one meeting.
  std::string NextInstance(const std::string& key, int64_t id);

  // Arrives at collective `key` (the same for every member of its group) as
  // member `index` of `group` (flattened ids), and returns every member's
  // buffers in group order once all have arrived. For a group that spans
  // tasks, "all" are the members on this task; the others' entries are
  // null. DEADLINE_EXCEEDED naming
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

  // Depart for a member whose share may fail (the leader's transfer
  // between tasks): records `status` (the first error wins) and returns the
  // rendezvous' error once every member has departed, so that every member
  // fails alike.
  absl::Status DepartWith(const std::string& key, const absl::Status& status);

  // Tells waiting and future members that participant `id` failed with
  // `status`.
  void Fail(int64_t id, const absl::Status& status);

  // "replica 2 partition 0".
  std::string Name(int64_t id) const;

  // Rendezvous that members have arrived at and not all left.
  int64_t open_meetings() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return static_cast<int64_t>(rendezvous_.size());
  }

 private:
  struct Rendezvous {
    std::vector<Member> members;
    std::vector<bool> arrived;
    int arrivals = 0;
    // Members of a committed rendezvous (all arrived) that have not
    // finished their share (called Depart)...
    int working = 0;
    // ...and that have not returned from Depart: the last to return
    // removes the rendezvous.
    int staying = 0;
    // The first error of a member's share (DepartWith).
    absl::Status status;
  };

  const int64_t num_replicas_;
  const int64_t num_partitions_;
  const absl::Duration timeout_;
  const std::shared_ptr<const TaskPlacement> placement_;
  Mutex mu_;
  std::map<std::string, Rendezvous> rendezvous_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> joined_ ABSL_GUARDED_BY(mu_);
  // Meetings so far per (collective key, participant).
  std::map<std::pair<std::string, int64_t>, int64_t> instances_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::compiler

#endif  // PJRT_COMPILER_COLLECTIVES_H_
