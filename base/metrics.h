// Counter and Histogram: the building blocks of the daemon's metrics (see
// daemon/metrics.h). Both are updated lock-free from any thread; a reader
// sees each figure as it was at some moment while it read (a histogram's
// buckets, count and sum may disagree by the observations made meanwhile).
#ifndef PJRT_BASE_METRICS_H_
#define PJRT_BASE_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace pjrt {

// A value that only grows.
class Counter {
 public:
  void Add(double amount = 1) {
    value_.fetch_add(amount, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted in buckets by upper bound, with their count and sum,
// as Prometheus histograms are.
class Histogram {
 public:
  // `upper_bounds` ascending; the bucket +Inf is implied.
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    // Observations <= each bound (cumulative), then all of them (+Inf).
    std::vector<uint64_t> cumulative;
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> upper_bounds_;
  // One per bound and one for +Inf: observations that fell there (not
  // cumulative).
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// Bounds for durations from 100 microseconds to about 100 seconds.
const std::vector<double>& DurationBuckets();

}  // namespace pjrt

#endif  // PJRT_BASE_METRICS_H_
