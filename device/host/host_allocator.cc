#include "device/host/host_allocator.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "base/log.h"

namespace pjrt::device {

namespace {
constexpr int64_t kAlignment = 64;
}  // namespace

HostAllocator::HostAllocator(std::string name, int64_t bytes_limit)
    : name_(std::move(name)) {
  stats_.bytes_limit = bytes_limit;
}

HostAllocator::~HostAllocator() {
  absl::MutexLock lock(&mu_);
  if (!sizes_.empty()) {
    spdlog::warn("{}: {} allocations ({} bytes) still live at shutdown", name_,
                 sizes_.size(), stats_.bytes_in_use);
  }
  for (auto& [ptr, size] : sizes_) std::free(ptr);
}

absl::StatusOr<void*> HostAllocator::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot allocate %d bytes", name_, bytes));
  }
  {
    absl::MutexLock lock(&mu_);
    if (bytes > stats_.bytes_limit - stats_.bytes_in_use) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "out of memory on %s: cannot allocate %d bytes (%s); %s", name_,
          bytes, FormatByteSize(bytes), stats_.ToString()));
    }
    // Reserve before allocating so that concurrent requests cannot jointly
    // overshoot the limit.
    stats_.bytes_in_use += bytes;
  }
  int64_t rounded = (std::max<int64_t>(bytes, 1) + kAlignment - 1) /
                    kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
  absl::MutexLock lock(&mu_);
  if (ptr == nullptr) {
    stats_.bytes_in_use -= bytes;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory on %s: the host could not provide %d bytes (%s); %s",
        name_, bytes, FormatByteSize(bytes), stats_.ToString()));
  }
  sizes_[ptr] = bytes;
  stats_.num_allocs++;
  stats_.total_allocs++;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void HostAllocator::Deallocate(void* ptr) {
  {
    absl::MutexLock lock(&mu_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) {
      spdlog::critical("{}: free of unknown pointer {}", name_, ptr);
      std::abort();
    }
    stats_.bytes_in_use -= it->second;
    stats_.num_allocs--;
    sizes_.erase(it);
  }
  std::free(ptr);
}

AllocatorStats HostAllocator::GetStats() const {
  absl::MutexLock lock(&mu_);
  AllocatorStats stats = stats_;
  stats.largest_free_block = stats.bytes_limit - stats.bytes_in_use;
  stats.fragmentation = 0;
  return stats;
}

}  // namespace pjrt::device
