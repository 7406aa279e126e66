#include "device/host/host_platform.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_format.h"
#include "device/host/host_event.h"
#include "device/host/host_stream.h"

namespace pjrt::device {
namespace {

constexpr int kMaxHostDevices = 256;
constexpr int64_t kAlignment = 256;
constexpr int64_t kHugePageBytes = int64_t{2} << 20;

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 34;
  return static_cast<int64_t>(pages) * page_size;
}

}  // namespace

absl::StatusOr<void*> HostMemoryAllocator::Alloc(int64_t bytes) {
  // Large regions sit on huge-page boundaries and ask for transparent huge
  // pages: where the kernel backs memory only on first touch (and a virtual
  // machine's host does the same beneath it), 4 KiB pages cost a fault each,
  // 15-20x the copy into them; a 2 MiB page costs one fault per 512.
  const bool huge = bytes >= kHugePageBytes;
  const int64_t alignment = huge ? kHugePageBytes : kAlignment;
  int64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* ptr = std::aligned_alloc(alignment, static_cast<size_t>(rounded));
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the host could not provide %d bytes of memory", bytes));
  }
  // Advice only: where huge pages are off, the memory is as before.
  if (huge) madvise(ptr, static_cast<size_t>(rounded), MADV_HUGEPAGE);
  return ptr;
}

void HostMemoryAllocator::Free(void* ptr, int64_t) { std::free(ptr); }

HostPlatform::HostPlatform(int device_count)
    : device_count_(device_count), memory_bytes_(PhysicalMemoryBytes()) {}

DeviceDescription HostPlatform::Describe(int) const {
  return DeviceDescription{.kind = "cpu", .memory_bytes = memory_bytes_};
}

absl::StatusOr<std::unique_ptr<Stream>> HostPlatform::CreateStream(
    int, const std::string& name) {
  return std::make_unique<HostStream>(name);
}

std::unique_ptr<Event> HostPlatform::CreateEvent(int) {
  return std::make_unique<HostEvent>();
}

std::unique_ptr<SubAllocator> HostPlatform::CreateDeviceMemoryAllocator(int) {
  return std::make_unique<HostMemoryAllocator>();
}

std::unique_ptr<SubAllocator> HostPlatform::CreateStagingMemoryAllocator(int) {
  return std::make_unique<HostMemoryAllocator>();
}

absl::StatusOr<std::unique_ptr<Platform>> CreateHostPlatform(int device_count) {
  if (device_count < 1 || device_count > kMaxHostDevices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host device count %d is out of range; expected 1 to %d", device_count,
        kMaxHostDevices));
  }
  return std::make_unique<HostPlatform>(device_count);
}

}  // namespace pjrt::device
