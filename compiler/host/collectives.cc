#include "compiler/host/collectives.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pjrt::compiler::host {

CollectiveHub::CollectiveHub(int64_t num_replicas, int64_t num_partitions,
                             absl::Duration timeout)
    : num_replicas_(num_replicas),
      num_partitions_(num_partitions),
      timeout_(timeout) {}

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
  if (!joined_.insert(id).second) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of this launch was already started; each device's part of a "
        "launch runs once (give every launch its own launch_id)",
        Name(id)));
  }
  return absl::OkStatus();
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
  const int size = static_cast<int>(group.size());
  // The last to arrive commits the rendezvous for everyone.
  if (r.arrivals == size) r.working = size;
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
        if (!r.arrived[i]) missing.push_back(Name(group[i]));
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
  MutexLock lock(&mu_);
  Rendezvous& r = rendezvous_[key];
  r.working--;
  // Bounded: every member that got the member list is doing plain memory
  // work, and its buffers may not be freed (its run may not end) while a
  // peer could still read or write them.
  mu_.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return rendezvous_[key].working == 0;
  });
}

void CollectiveHub::Fail(int64_t id, const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = absl::AbortedError(absl::StrFormat(
      "%s failed, so the collective cannot complete: %s", Name(id),
      status.message()));
}

}  // namespace pjrt::compiler::host
