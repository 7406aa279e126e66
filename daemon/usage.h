// Usage accounting: what each session used (device time by device, runs,
// bytes moved) and, over the daemon's life, what each client name used (the
// per-client series of the metrics; see daemon/metrics.h).
//
// A session's SessionUsage is told of its runs (it is the runs'
// runtime::RunObserver) and of its transfers; it adds each figure to the
// session's own counters and to those of its client name.
#ifndef PJRT_DAEMON_USAGE_H_
#define PJRT_DAEMON_USAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "runtime/execute.h"

namespace pjrt::daemon {

// Which way bytes moved, as the metrics name it.
enum class TransferDirection { kToDevice, kFromDevice };
// How they moved: streamed through gRPC, through a shared-memory region,
// over a data channel, or between tasks.
enum class TransferPath { kStream, kSharedMemory, kDataChannel, kPeer };

inline constexpr int kTransferDirections = 2;
inline constexpr int kTransferPaths = 4;
absl::string_view TransferDirectionName(TransferDirection direction);
absl::string_view TransferPathName(TransferPath path);

// Figures that add up: one session's, or all of one client name's.
struct UsageTotals {
  Counter device_seconds;
  Counter runs;
  Counter failed_runs;
  Counter bytes_to_device;
  Counter bytes_from_device;
};

class SessionUsage : public runtime::RunObserver {
 public:
  // `device_ids`: the id of each local device, by ordinal; `client` (may be
  // null): the client name's totals, which get every figure too.
  SessionUsage(std::vector<int> device_ids,
               std::shared_ptr<UsageTotals> client);

  void RunFinished(int device_ordinal, absl::Duration busy, bool ok) override;
  void Transferred(TransferDirection direction, int64_t bytes);

  const UsageTotals& totals() const { return totals_; }
  // Seconds of device time on each local device: (device id, seconds).
  std::vector<std::pair<int, double>> device_seconds() const;

 private:
  const std::vector<int> device_ids_;
  std::vector<Counter> per_device_;
  UsageTotals totals_;
  const std::shared_ptr<UsageTotals> client_;
};

// The totals of each client name since the daemon started. The first
// `max_named` names each get their own; later names share those of "other",
// so that the metrics' series stay few however many names clients choose
// (and a name's series, once there, only ever grows).
class ClientUsageTable {
 public:
  static constexpr char kOther[] = "other";
  // Longest name kept; longer ones are cut. Bytes other than printable
  // ASCII become '?'.
  static constexpr size_t kMaxNameBytes = 64;

  explicit ClientUsageTable(int max_named) : max_named_(max_named) {}

  std::shared_ptr<UsageTotals> For(absl::string_view client_name);

  // Every name with totals (and "other" once used), in no order.
  std::vector<std::pair<std::string, std::shared_ptr<UsageTotals>>> List()
      const;

 private:
  const int max_named_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<UsageTotals>> named_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<UsageTotals> other_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_USAGE_H_
