#include "device/allocator.h"

#include "absl/strings/str_format.h"
#include "base/byte_size.h"

namespace pjrt::device {

std::string AllocatorStats::ToString() const {
  return absl::StrFormat(
      "%s in use of a %s limit (peak %s, %d live allocations, largest free "
      "block %s, fragmentation %.2f)",
      FormatByteSize(bytes_in_use), FormatByteSize(bytes_limit),
      FormatByteSize(peak_bytes_in_use), num_allocs,
      FormatByteSize(largest_free_block), fragmentation);
}

}  // namespace pjrt::device
