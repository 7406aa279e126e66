#include "daemon/usage.h"

#include <algorithm>
#include <utility>

namespace pjrt::daemon {

absl::string_view TransferDirectionName(TransferDirection direction) {
  switch (direction) {
    case TransferDirection::kToDevice:
      return "to_device";
    case TransferDirection::kFromDevice:
      return "from_device";
  }
  return "unknown";
}

absl::string_view TransferPathName(TransferPath path) {
  switch (path) {
    case TransferPath::kStream:
      return "stream";
    case TransferPath::kSharedMemory:
      return "shared_memory";
    case TransferPath::kDataChannel:
      return "data_channel";
    case TransferPath::kPeer:
      return "peer";
  }
  return "unknown";
}

SessionUsage::SessionUsage(std::vector<int> device_ids,
                           std::shared_ptr<UsageTotals> client)
    : device_ids_(std::move(device_ids)),
      per_device_(device_ids_.size()),
      client_(std::move(client)) {}

void SessionUsage::RunFinished(int device_ordinal, absl::Duration busy,
                               bool ok) {
  const double seconds = absl::ToDoubleSeconds(busy);
  if (device_ordinal >= 0 &&
      device_ordinal < static_cast<int>(per_device_.size())) {
    per_device_[device_ordinal].Add(seconds);
  }
  for (UsageTotals* totals : {&totals_, client_.get()}) {
    if (totals == nullptr) continue;
    totals->device_seconds.Add(seconds);
    totals->runs.Add();
    if (!ok) totals->failed_runs.Add();
  }
}

void SessionUsage::Transferred(TransferDirection direction, int64_t bytes) {
  for (UsageTotals* totals : {&totals_, client_.get()}) {
    if (totals == nullptr) continue;
    (direction == TransferDirection::kToDevice ? totals->bytes_to_device
                                               : totals->bytes_from_device)
        .Add(static_cast<double>(bytes));
  }
}

std::vector<std::pair<int, double>> SessionUsage::device_seconds() const {
  std::vector<std::pair<int, double>> seconds;
  seconds.reserve(per_device_.size());
  for (size_t i = 0; i < per_device_.size(); ++i) {
    seconds.emplace_back(device_ids_[i], per_device_[i].value());
  }
  return seconds;
}

std::shared_ptr<UsageTotals> ClientUsageTable::For(
    absl::string_view client_name) {
  // Printable ASCII only: a label value must be valid UTF-8, and a name of
  // stray bytes must not make the whole scrape unreadable.
  std::string name(client_name.substr(0, kMaxNameBytes));
  for (char& c : name) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (name.empty()) name = "unnamed";
  MutexLock lock(&mu_);
  if (auto it = named_.find(name); it != named_.end()) return it->second;
  if (static_cast<int>(named_.size()) < max_named_ && name != kOther) {
    auto totals = std::make_shared<UsageTotals>();
    named_.emplace(std::move(name), totals);
    return totals;
  }
  if (other_ == nullptr) other_ = std::make_shared<UsageTotals>();
  return other_;
}

std::vector<std::pair<std::string, std::shared_ptr<UsageTotals>>>
ClientUsageTable::List() const {
  MutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::shared_ptr<UsageTotals>>> list(
      named_.begin(), named_.end());
  if (other_ != nullptr) list.emplace_back(kOther, other_);
  return list;
}

}  // namespace pjrt::daemon
