#include "base/metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pjrt {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      buckets_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) buckets_[i] = 0;
}

void Histogram::Observe(double value) {
  // The first bound at or above the value; NaN goes to +Inf.
  size_t bucket = std::isnan(value)
                      ? upper_bounds_.size()
                      : std::lower_bound(upper_bounds_.begin(),
                                         upper_bounds_.end(), value) -
                            upper_bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  snapshot.cumulative.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  // The buckets' total, so that count equals the +Inf bucket as the format
  // requires, whatever was observed while reading.
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> bounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,   0.5,     1,      2.5,   5,      10,    25,   50,    100};
  return bounds;
}

}  // namespace pjrt
