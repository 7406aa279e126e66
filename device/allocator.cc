#include "device/allocator.h"

#include "absl/strings/str_format.h"

namespace pjrt::device {

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB",
                                           "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%d B", bytes);
  return absl::StrFormat("%.4g %s", value, kUnits[unit]);
}

std::string AllocatorStats::ToString() const {
  return absl::StrFormat(
      "%s in use of a %s limit (peak %s, %d live allocations, largest free "
      "block %s, fragmentation %.2f)",
      HumanBytes(bytes_in_use), HumanBytes(bytes_limit),
      HumanBytes(peak_bytes_in_use), num_allocs, HumanBytes(largest_free_block),
      fragmentation);
}

}  // namespace pjrt::device
