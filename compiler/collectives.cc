#include "compiler/collectives.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/program.h"

namespace pjrt::compiler {

CollectiveHub::CollectiveHub(int64_t num_replicas, int64_t num_partitions,
                             absl::Duration timeout,
                             std::shared_ptr<const TaskPlacement> placement)
    : num_replicas_(num_replicas),
      num_partitions_(num_partitions),
      timeout_(timeout),
      placement_(std::move(placement)) {}

int CollectiveHub::TaskOf(int64_t id) const {
  if (placement_ == nullptr) return 0;
  if (id < 0 || id >= static_cast<int64_t>(placement_->task_of.size())) {
    return -1;
  }
  return placement_->task_of[id];
}

bool CollectiveHub::SpansTasks(absl::Span<const int64_t> group) const {
  if (placement_ == nullptr) return false;
  for (int64_t id : group) {
    if (TaskOf(id) != placement_->self) return true;
  }
  return false;
}

std::string CollectiveHub::Name(int64_t id) const {
  return absl::StrFormat("replica %d partition %d", id / num_partitions_,
                         id % num_partitions_);
}

absl::Status CollectiveHub::Join(int64_t id) {
  MutexLock lock(&mu_);
  if (id < 0 || id >= num_replicas_ * num_partitions_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("participant %d is outside the launch's %d x %d", id,
                        num_replicas_, num_partitions_));
  }
  if (placement_ != nullptr && TaskOf(id) != placement_->self) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s runs on task %d, not on this task (%d)", Name(id),
                        TaskOf(id), placement_->self));
  }
  if (!joined_.insert(id).second) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of this launch was already started; each device's part of a "
        "launch runs once (give every launch its own launch_id)",
        Name(id)));
  }
  return absl::OkStatus();
}

std::string CollectiveHub::NextInstance(const std::string& key, int64_t id) {
  MutexLock lock(&mu_);
  int64_t& n = instances_[{key, id}];
  return absl::StrCat(key, "@", n++);
}

absl::StatusOr<std::vector<CollectiveHub::Member>> CollectiveHub::Arrive(
    const std::string& key, absl::string_view name,
    absl::Span<const int64_t> group, int index, Member mine,
    const Cancellation* cancellation) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  Rendezvous& r = rendezvous_[key];
  if (r.members.empty()) {
    r.members.resize(group.size());
    r.arrived.assign(group.size(), false);
  }
  if (index < 0 || index >= static_cast<int>(r.members.size()) ||
      r.arrived[index]) {
    // Two runs of one participant would let the rendezvous complete
    // without a member.
    failure_ = absl::InvalidArgumentError(absl::StrFormat(
        "%s: member %d of the group arrived twice", name, index));
    return failure_;
  }
  r.members[index] = mine;
  r.arrived[index] = true;
  r.arrivals++;
  // Only this task's members meet here.
  int size = 0;
  for (int64_t id : group) {
    size += placement_ == nullptr || TaskOf(id) == placement_->self;
  }
  // The last to arrive commits the rendezvous for everyone.
  if (r.arrivals == size) r.working = r.staying = size;
  // Once everyone is here the rendezvous is committed: each member does its
  // share in its peers' memory, so from then on nobody may give up (see
  // Depart). Until then a failure, a timeout or a cancellation ends the
  // wait, and no later member can arrive.
  const auto settled = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return rendezvous_[key].arrivals == size || !failure_.ok();
  };
  const absl::Time deadline = absl::Now() + timeout_;
  while (!settled()) {
    absl::Status cancelled = CheckCancelled(cancellation);
    if (!cancelled.ok()) {
      // The peers cannot complete without this member: they fail too.
      failure_ = absl::Status(
          cancelled.code(),
          absl::StrFormat("%s: %s stopped waiting: %s", name,
                          Name(group[index]), cancelled.message()));
      return failure_;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      std::vector<std::string> missing;
      for (size_t i = 0; i < group.size(); ++i) {
        const bool here =
            placement_ == nullptr || TaskOf(group[i]) == placement_->self;
        if (here && !r.arrived[i]) missing.push_back(Name(group[i]));
      }
      // Every peer still waiting gives up with the same error.
      failure_ = absl::DeadlineExceededError(absl::StrFormat(
          "%s: %s did not arrive within %s (was every device's part of the "
          "launch started, with the same launch_id?)",
          name, missing.empty() ? "a peer" : absl::StrJoin(missing, ", "),
          absl::FormatDuration(timeout_)));
      return failure_;
    }
    // In slices, so that a cancelled run stops waiting soon.
    mu_.AwaitWithTimeout(settled, std::min(left, Cancellation::kPollInterval));
  }
  if (rendezvous_[key].arrivals == size) return r.members;
  return failure_;
}

void CollectiveHub::Depart(const std::string& key) {
  DepartWith(key, absl::OkStatus()).IgnoreError();
}

absl::Status CollectiveHub::DepartWith(const std::string& key,
                                       const absl::Status& status) {
  MutexLock lock(&mu_);
  auto it = rendezvous_.find(key);
  Rendezvous& r = it->second;  // committed: it stays until all have left
  if (!status.ok() && r.status.ok()) r.status = status;
  r.working--;
  // Bounded: every member that got the member list is doing plain memory
  // work, and its buffers may not be freed (its run may not end) while a
  // peer could still read or write them.
  mu_.Await([&r]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return r.working == 0; });
  absl::Status result = r.status;
  // The last to leave removes it: a collective in a loop meets under a new
  // key each iteration (NextInstance).
  if (--r.staying == 0) rendezvous_.erase(it);
  return result;
}

void CollectiveHub::Fail(int64_t id, const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = absl::AbortedError(
      absl::StrFormat("%s failed, so the collective cannot complete: %s",
                      Name(id), status.message()));
}

// The flattened ids of the participants of `step` that include this run, in
// group order, and this run's index among them.
absl::Status CollectiveGroup(const CollectiveOp& step, const RunContext& c,
                             std::vector<int64_t>* group, int* index) {
  const int64_t R = c.num_replicas, P = c.num_partitions;
  const int64_t r = c.replica_id, p = c.partition_id;
  const int64_t me = r * P + p;
  group->clear();
  const auto find = [&](int64_t id,
                        int64_t count) -> const std::vector<int64_t>* {
    if (step.replica_groups.empty()) return nullptr;
    for (const auto& g : step.replica_groups) {
      if (std::find(g.begin(), g.end(), id) != g.end()) return &g;
    }
    (void)count;
    return nullptr;
  };
  const auto all = [](int64_t n) {
    std::vector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = i;
    return v;
  };
  std::vector<int64_t> ids;
  switch (step.mode) {
    case CollectiveOp::Mode::kCrossReplica:
    case CollectiveOp::Mode::kCrossReplicaAndPartition: {
      const std::vector<int64_t>* g = find(r, R);
      if (g == nullptr && !step.replica_groups.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: replica %d is in none of its replica_groups", step.name, r));
      }
      std::vector<int64_t> replicas = g != nullptr ? *g : all(R);
      for (int64_t x : replicas) {
        if (x < 0 || x >= R) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: replica_groups names replica %d but the launch has %d",
              step.name, x, R));
        }
      }
      if (step.mode == CollectiveOp::Mode::kCrossReplica) {
        for (int64_t x : replicas) ids.push_back(x * P + p);
      } else {
        // The group's replicas in every partition, partition by partition
        // (StableHLO's cross_replica_and_partition, as XLA orders it).
        for (int64_t q = 0; q < P; ++q) {
          for (int64_t x : replicas) ids.push_back(x * P + q);
        }
      }
      break;
    }
    case CollectiveOp::Mode::kFlattenedId: {
      const std::vector<int64_t>* g = find(me, R * P);
      if (g == nullptr && !step.replica_groups.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: device %d (replica %d partition %d) is in none of its "
            "replica_groups",
            step.name, me, r, p));
      }
      ids = g != nullptr ? *g : all(R * P);
      break;
    }
    case CollectiveOp::Mode::kCrossPartition: {
      // replica_groups lists partition ids here; none: every partition.
      const std::vector<int64_t>* g = find(p, P);
      if (g == nullptr && !step.replica_groups.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: partition %d is in none of its replica_groups", step.name, p));
      }
      for (int64_t q : g != nullptr ? *g : all(P)) {
        if (q < 0 || q >= P) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: replica_groups names partition %d but the launch has %d",
              step.name, q, P));
        }
        ids.push_back(r * P + q);
      }
      break;
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == me) *index = static_cast<int>(i);
  }
  *group = std::move(ids);
  return absl::OkStatus();
}

namespace {

// The sizes of the groups `step` forms among `count` ids (replica ids or
// flattened ids), after checking that its replica_groups cover [0, count)
// exactly once; empty groups mean one group of everyone.
absl::StatusOr<std::vector<int64_t>> PartitionSizes(const CollectiveOp& step,
                                                    int64_t count,
                                                    const char* what) {
  if (step.replica_groups.empty()) return std::vector<int64_t>{count};
  std::vector<bool> seen(static_cast<size_t>(count), false);
  std::vector<int64_t> sizes;
  int64_t covered = 0;
  for (const auto& g : step.replica_groups) {
    if (g.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: replica_groups has an empty group", step.name));
    }
    for (int64_t id : g) {
      if (id < 0 || id >= count) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: replica_groups names %s %d, but the launch has %d (ids 0 to "
            "%d)",
            step.name, what, id, count, count - 1));
      }
      if (seen[id]) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: replica_groups names %s %d more than once",
                            step.name, what, id));
      }
      seen[id] = true;
      ++covered;
    }
    sizes.push_back(static_cast<int64_t>(g.size()));
  }
  if (covered != count) {
    for (int64_t id = 0; id < count; ++id) {
      if (!seen[id]) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: replica_groups leaves out %s %d; every one of the launch's "
            "%d must be in exactly one group",
            step.name, what, id, count));
      }
    }
  }
  return sizes;
}

}  // namespace

absl::Status CheckCollectives(absl::Span<const CollectiveOp* const> ops,
                              int64_t num_replicas, int64_t num_partitions) {
  const int64_t R = num_replicas, P = num_partitions;
  for (const CollectiveOp* op : ops) {
    const CollectiveOp& s = *op;
    std::vector<int64_t> sizes;
    switch (s.mode) {
      case CollectiveOp::Mode::kCrossReplica: {
        PJRT_ASSIGN_OR_RETURN(sizes, PartitionSizes(s, R, "replica"));
        break;
      }
      case CollectiveOp::Mode::kCrossReplicaAndPartition: {
        PJRT_ASSIGN_OR_RETURN(sizes, PartitionSizes(s, R, "replica"));
        for (int64_t& n : sizes) n *= P;
        break;
      }
      case CollectiveOp::Mode::kFlattenedId: {
        PJRT_ASSIGN_OR_RETURN(sizes, PartitionSizes(s, R * P, "device"));
        break;
      }
      case CollectiveOp::Mode::kCrossPartition:
        PJRT_ASSIGN_OR_RETURN(sizes, PartitionSizes(s, P, "partition"));
        break;
    }
    const int rank = static_cast<int>(s.input_dims.size());
    for (int64_t n : sizes) {
      if (s.kind == CollectiveOp::Kind::kCollectivePermute) {
        std::vector<bool> source(n, false), target(n, false);
        for (const auto& [from, to] : s.source_target_pairs) {
          if (from < 0 || from >= n || to < 0 || to >= n) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s: source_target_pairs has {%d,%d}, but its groups have %d "
                "members (ids 0 to %d)",
                s.name, from, to, n, n - 1));
          }
          if (source[from] || target[to]) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s: source_target_pairs names %d twice as a %s", s.name,
                source[from] ? from : to, source[from] ? "source" : "target"));
          }
          source[from] = target[to] = true;
        }
        continue;
      }
      if (s.kind == CollectiveOp::Kind::kAllReduce) continue;
      const int64_t dim = rank > 0 ? s.input_dims[s.dimension] : 0;
      const int64_t out = rank > 0 ? s.output_dims[s.dimension] : 0;
      bool fits = rank > 0;
      if (fits && s.kind == CollectiveOp::Kind::kAllGather) {
        fits = dim > 0 ? out % dim == 0 && out / dim == n : out == 0;
      } else if (fits) {
        fits = dim % n == 0 &&
               (s.kind == CollectiveOp::Kind::kAllToAll || out == dim / n);
      }
      if (!fits) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: dimension %d of its operand (%d) and of its result (%d) do "
            "not fit a group of %d participants",
            s.name, s.dimension, dim, out, n));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pjrt::compiler
