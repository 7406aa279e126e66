#include "device/bfc_allocator.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "device/host/host_platform.h"
#include "gtest/gtest.h"

namespace pjrt::device {
namespace {

// A sub-allocator that counts what it hands out.
class CountingSubAllocator : public SubAllocator {
 public:
  explicit CountingSubAllocator(int64_t* live) : live_(live) {}
  absl::StatusOr<void*> Alloc(int64_t bytes) override {
    *live_ += bytes;
    return inner_.Alloc(bytes);
  }
  void Free(void* ptr, int64_t bytes) override {
    *live_ -= bytes;
    inner_.Free(ptr, bytes);
  }

 private:
  int64_t* live_;
  HostMemoryAllocator inner_;
};

std::unique_ptr<BfcAllocator> MakeAllocator(int64_t limit,
                                            int64_t* live = nullptr) {
  static int64_t ignored;
  return std::make_unique<BfcAllocator>(
      std::make_unique<CountingSubAllocator>(live ? live : &ignored),
      BfcAllocator::Options{.name = "test device",
                            .memory_limit = limit,
                            .initial_region_bytes = 1 << 20});
}

TEST(BfcAllocator, CountsRequestedBytesAndPeak) {
  auto a = MakeAllocator(16 << 20);
  void* p = *a->Allocate(1000);
  void* q = *a->Allocate(3000);
  AllocatorStats stats = a->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 4000);
  EXPECT_EQ(stats.num_allocs, 2);
  a->Deallocate(p);
  stats = a->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 3000);
  EXPECT_EQ(stats.peak_bytes_in_use, 4000);
  EXPECT_EQ(stats.total_allocs, 2);
  a->Deallocate(q);
  EXPECT_EQ(a->GetStats().bytes_in_use, 0);
  EXPECT_EQ(a->GetStats().num_allocs, 0);
}

TEST(BfcAllocator, AlignsTo256Bytes) {
  auto a = MakeAllocator(16 << 20);
  std::vector<void*> ptrs;
  for (int64_t size : {1, 7, 255, 256, 257, 4096, 100000}) {
    void* p = *a->Allocate(size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << size;
    ptrs.push_back(p);
  }
  for (void* p : ptrs) a->Deallocate(p);
}

TEST(BfcAllocator, ZeroBytesIsNullAndFree) {
  auto a = MakeAllocator(1 << 20);
  auto p = a->Allocate(0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, nullptr);
  a->Deallocate(nullptr);
  EXPECT_EQ(a->GetStats().num_allocs, 0);
}

TEST(BfcAllocator, ReusesFreedMemoryWithoutNewRegions) {
  int64_t live = 0;
  auto a = MakeAllocator(64 << 20, &live);
  void* p = *a->Allocate(100000);
  int64_t reserved = live;
  a->Deallocate(p);
  for (int i = 0; i < 100; ++i) {
    void* q = *a->Allocate(100000);
    EXPECT_EQ(q, p);  // best fit, lowest address
    a->Deallocate(q);
  }
  EXPECT_EQ(live, reserved);
}

TEST(BfcAllocator, CoalescesNeighboursOnFree) {
  auto a = MakeAllocator(1 << 20);  // one region of 1 MiB
  std::vector<void*> ptrs;
  for (int i = 0; i < 4; ++i) ptrs.push_back(*a->Allocate(256 << 10));
  EXPECT_FALSE(a->Allocate(1).ok());  // full
  // Free in an order that needs merging on both sides.
  a->Deallocate(ptrs[1]);
  a->Deallocate(ptrs[3]);
  a->Deallocate(ptrs[2]);
  a->Deallocate(ptrs[0]);
  auto whole = a->Allocate(1 << 20);
  ASSERT_TRUE(whole.ok()) << whole.status();
  a->Deallocate(*whole);
}

TEST(BfcAllocator, ReportsFragmentation) {
  auto a = MakeAllocator(1 << 20);
  std::vector<void*> ptrs;
  for (int i = 0; i < 8; ++i) ptrs.push_back(*a->Allocate(128 << 10));
  for (int i = 0; i < 8; i += 2) a->Deallocate(ptrs[i]);
  AllocatorStats stats = a->GetStats();
  // 512 KiB free in four separate 128 KiB holes.
  EXPECT_EQ(stats.largest_free_block, 128 << 10);
  EXPECT_NEAR(stats.fragmentation, 0.75, 1e-9);
  for (int i = 1; i < 8; i += 2) a->Deallocate(ptrs[i]);
  EXPECT_NEAR(a->GetStats().fragmentation, 0.0, 1e-9);
}

TEST(BfcAllocator, OutOfMemoryIsResourceExhaustedWithTheNumbers) {
  auto a = MakeAllocator(1 << 20);
  void* p = *a->Allocate(600 << 10);
  auto r = a->Allocate(600 << 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(r.status().message());
  EXPECT_NE(message.find("test device"), std::string::npos) << message;
  EXPECT_NE(message.find("614400 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("600 KiB in use"), std::string::npos) << message;
  EXPECT_NE(message.find("1 MiB limit"), std::string::npos) << message;
  a->Deallocate(p);
}

TEST(BfcAllocator, ReleasesFreeRegionsWhenTheLimitIsReached) {
  int64_t live = 0;
  auto a = MakeAllocator(8 << 20, &live);
  // Regions of 1, 2 and 4 MiB, then free everything.
  void* p1 = *a->Allocate(1 << 20);
  void* p2 = *a->Allocate(2 << 20);
  void* p3 = *a->Allocate(4 << 20);
  a->Deallocate(p1);
  a->Deallocate(p2);
  a->Deallocate(p3);
  // 6 MiB needs one region: only possible after returning the free ones.
  auto big = a->Allocate(6 << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_LE(live, 8 << 20);
  a->Deallocate(*big);
}

TEST(BfcAllocator, ChargedBytesCountAgainstTheLimitWithoutBeingReserved) {
  int64_t live = 0;
  auto a = MakeAllocator(8 << 20, &live);
  ASSERT_TRUE(a->Charge(5 << 20).ok());
  AllocatorStats stats = a->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 5 << 20);
  EXPECT_EQ(stats.num_allocs, 1);
  EXPECT_EQ(stats.bytes_reserved, 0);
  EXPECT_EQ(live, 0);
  EXPECT_EQ(stats.largest_free_block, 3 << 20);
  // Neither an allocation nor another charge fits beside it.
  auto r = a->Allocate(4 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  absl::Status charged = a->Charge(4 << 20);
  EXPECT_EQ(charged.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(charged.message().find("4194304 bytes"), std::string::npos)
      << charged.message();
  void* p = *a->Allocate(2 << 20);
  a->Discharge(5 << 20);
  EXPECT_EQ(a->GetStats().bytes_in_use, 2 << 20);
  EXPECT_EQ(a->GetStats().num_allocs, 1);
  auto big = a->Allocate(5 << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  a->Deallocate(p);
  a->Deallocate(*big);
  EXPECT_EQ(a->GetStats().bytes_in_use, 0);
}

TEST(BfcAllocator, ChargeReturnsFreeRegionsToMakeRoom) {
  int64_t live = 0;
  auto a = MakeAllocator(8 << 20, &live);
  a->Deallocate(*a->Allocate(6 << 20));
  EXPECT_GE(live, 6 << 20);
  ASSERT_TRUE(a->Charge(7 << 20).ok());
  EXPECT_EQ(live, 0);
  a->Discharge(7 << 20);
  EXPECT_EQ(a->Charge(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BfcAllocator, RandomWorkloadKeepsAccountsExact) {
  auto a = MakeAllocator(64 << 20);
  std::mt19937 gen(42);
  std::vector<std::pair<void*, int64_t>> live;
  int64_t expected = 0;
  for (int step = 0; step < 5000; ++step) {
    if (!live.empty() && (gen() % 2 == 0 || live.size() > 200)) {
      size_t i = gen() % live.size();
      a->Deallocate(live[i].first);
      expected -= live[i].second;
      live.erase(live.begin() + static_cast<long>(i));
    } else {
      int64_t size = 1 + gen() % (256 << 10);
      auto p = a->Allocate(size);
      ASSERT_TRUE(p.ok()) << p.status();
      // Write the whole block: ASan catches overlaps with neighbours.
      std::memset(*p, 0xA5, static_cast<size_t>(size));
      live.emplace_back(*p, size);
      expected += size;
    }
    ASSERT_EQ(a->GetStats().bytes_in_use, expected);
  }
  for (auto& [p, size] : live) a->Deallocate(p);
  EXPECT_EQ(a->GetStats().bytes_in_use, 0);
  EXPECT_NEAR(a->GetStats().fragmentation, 0.0, 1e-9);
}

}  // namespace
}  // namespace pjrt::device
