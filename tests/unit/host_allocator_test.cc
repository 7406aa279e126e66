#include "device/host/host_allocator.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace pjrt::device {
namespace {

TEST(HostAllocator, TracksBytesInUseAndPeak) {
  HostAllocator allocator("test device", 1 << 20);
  void* a = *allocator.Allocate(1000);
  void* b = *allocator.Allocate(3000);
  AllocatorStats stats = allocator.GetStats();
  EXPECT_EQ(stats.bytes_in_use, 4000);
  EXPECT_EQ(stats.num_allocs, 2);
  allocator.Deallocate(a);
  stats = allocator.GetStats();
  EXPECT_EQ(stats.bytes_in_use, 3000);
  EXPECT_EQ(stats.peak_bytes_in_use, 4000);
  EXPECT_EQ(stats.total_allocs, 2);
  allocator.Deallocate(b);
  EXPECT_EQ(allocator.GetStats().bytes_in_use, 0);
}

TEST(HostAllocator, AlignsTo64Bytes) {
  HostAllocator allocator("test device", 1 << 20);
  for (int64_t size : {1, 7, 64, 100, 4096}) {
    void* p = *allocator.Allocate(size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    allocator.Deallocate(p);
  }
}

TEST(HostAllocator, OverLimitIsResourceExhaustedWithNumbers) {
  HostAllocator allocator("test device", 1000);
  void* p = *allocator.Allocate(600);
  auto result = allocator.Allocate(500);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(result.status().message().find("500 bytes"),
            absl::string_view::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("600 B in use"),
            absl::string_view::npos)
      << result.status();
  allocator.Deallocate(p);
  EXPECT_TRUE(allocator.Allocate(500).ok());
}

}  // namespace
}  // namespace pjrt::device
