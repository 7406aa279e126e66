#include "compiler/host/collectives.h"

#include <functional>
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

absl::Status CollectiveHub::WaitFor(
    const std::string& key, absl::string_view name,
    absl::Span<const int64_t> group,
    const std::function<bool(const Rendezvous&)>& done,
    std::vector<bool> Rendezvous::*present, const char* what) {
  const bool ok = mu_.AwaitWithTimeout(
      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !failure_.ok() || done(rendezvous_[key]);
      },
      timeout_);
  if (!failure_.ok()) return failure_;
  if (ok) return absl::OkStatus();
  const Rendezvous& r = rendezvous_[key];
  std::vector<std::string> missing;
  for (size_t i = 0; i < group.size(); ++i) {
    if (!(r.*present)[i]) missing.push_back(Name(group[i]));
  }
  // Every peer still waiting gives up with the same error.
  failure_ = absl::DeadlineExceededError(absl::StrFormat(
      "%s: %s did not %s within %s (was every device's part of "
      "the launch started, with the same launch_id?)",
      name, missing.empty() ? "a peer" : absl::StrJoin(missing, ", "), what,
      absl::FormatDuration(timeout_)));
  return failure_;
}

absl::StatusOr<std::vector<CollectiveHub::Member>> CollectiveHub::Arrive(
    const std::string& key, absl::string_view name,
    absl::Span<const int64_t> group, int index, Member mine) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  Rendezvous& r = rendezvous_[key];
  if (r.members.empty()) {
    r.members.resize(group.size());
    r.arrived.assign(group.size(), false);
    r.departed.assign(group.size(), false);
  }
  r.members[index] = mine;
  r.arrived[index] = true;
  r.arrivals++;
  const int size = static_cast<int>(group.size());
  absl::Status status = WaitFor(
      key, name, group, [size](const Rendezvous& x) { return x.arrivals == size; },
      &Rendezvous::arrived, "arrive");
  if (!status.ok()) return status;
  return rendezvous_[key].members;
}

absl::Status CollectiveHub::Depart(const std::string& key,
                                   absl::string_view name,
                                   absl::Span<const int64_t> group, int index) {
  MutexLock lock(&mu_);
  Rendezvous& r = rendezvous_[key];
  r.departures++;
  r.departed[index] = true;
  const int size = static_cast<int>(group.size());
  return WaitFor(
      key, name, group, [size](const Rendezvous& x) { return x.departures == size; },
      &Rendezvous::departed, "finish");
}

void CollectiveHub::Fail(int64_t id, const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = absl::AbortedError(absl::StrFormat(
      "%s failed, so the collective cannot complete: %s", Name(id),
      status.message()));
}

}  // namespace pjrt::compiler::host
