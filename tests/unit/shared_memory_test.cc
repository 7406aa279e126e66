#include "daemon/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "daemon/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

using ::testing::HasSubstr;

// A memfd of `size` bytes, sealed against shrinking unless told not to.
int MakeMemfd(int64_t size, bool seal = true) {
  int fd = memfd_create("shared-memory-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, size), 0);
  if (seal) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  }
  return fd;
}

std::shared_ptr<Region> MakeRegion(int64_t size) {
  int fd = MakeMemfd(size);
  auto region = Region::Map(fd, size, "test");
  close(fd);
  EXPECT_TRUE(region.ok()) << region.status();
  return *region;
}

TEST(RegionTest, MapsASealedMemfdSharedWithTheClient) {
  int fd = MakeMemfd(1 << 16);
  auto* client_view = static_cast<uint8_t*>(
      mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(client_view, MAP_FAILED);
  auto region = Region::Map(fd, 1 << 16, "r");
  close(fd);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->size(), 1 << 16);
  EXPECT_EQ((*region)->name(), "r");
  std::memcpy(client_view + 100, "hello", 5);
  auto slice = (*region)->Slice(100, 5);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(std::memcmp(*slice, "hello", 5), 0);
  std::memcpy(*slice, "HELLO", 5);
  EXPECT_EQ(std::memcmp(client_view + 100, "HELLO", 5), 0);
  munmap(client_view, 1 << 16);
}

TEST(RegionTest, RefusesDescriptorsThatCouldShrinkOrAreTooShort) {
  int unsealed = MakeMemfd(4096, /*seal=*/false);
  auto region = Region::Map(unsealed, 4096, "");
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(region.status().message()),
              HasSubstr("F_SEAL_SHRINK"));
  close(unsealed);

  int sealed = MakeMemfd(4096);
  region = Region::Map(sealed, 8192, "");
  EXPECT_THAT(std::string(region.status().message()),
              HasSubstr("size_bytes is 8192 but its memfd holds only 4096"));
  region = Region::Map(sealed, 0, "");
  EXPECT_THAT(std::string(region.status().message()),
              HasSubstr("must be positive"));
  close(sealed);

  FILE* file = tmpfile();
  ASSERT_NE(file, nullptr);
  region = Region::Map(fileno(file), 1, "");
  EXPECT_THAT(std::string(region.status().message()),
              HasSubstr("not a memfd"));
  fclose(file);
}

TEST(RegionTest, SliceChecksBoundsWithoutOverflow) {
  auto region = MakeRegion(4096);
  EXPECT_TRUE(region->Slice(0, 4096).ok());
  EXPECT_TRUE(region->Slice(4096, 0).ok());
  EXPECT_TRUE(region->Slice(4000, 96).ok());
  for (auto [offset, bytes] : std::vector<std::pair<int64_t, int64_t>>{
           {4000, 97}, {4097, 0}, {-1, 1}, {0, -1},
           {int64_t{1} << 62, int64_t{1} << 62}, {1, INT64_MAX}}) {
    auto slice = region->Slice(offset, bytes);
    EXPECT_EQ(slice.status().code(), absl::StatusCode::kInvalidArgument)
        << offset << " " << bytes;
    EXPECT_THAT(std::string(slice.status().message()),
                HasSubstr("outside the region of 4096 bytes"));
  }
}

TEST(RegionTest, UsesCountWhileTheyLive) {
  auto region = MakeRegion(4096);
  EXPECT_EQ(region->uses(), 0);
  {
    Region::Use a = region->Acquire();
    Region::Use b = region->Acquire();
    EXPECT_EQ(region->uses(), 2);
    Region::Use c = std::move(a);
    EXPECT_EQ(region->uses(), 2);
    b = Region::Use();
    EXPECT_EQ(region->uses(), 1);
  }
  EXPECT_EQ(region->uses(), 0);
  // A use keeps the mapping alive after everyone else let go.
  std::weak_ptr<Region> weak = region;
  Region::Use last = region->Acquire();
  region.reset();
  EXPECT_FALSE(weak.expired());
  last = Region::Use();
  EXPECT_TRUE(weak.expired());
}

class SessionRegionTest : public ::testing::Test {
 protected:
  Session session_{1, 1, "test", "peer", absl::Seconds(10), absl::Now()};
};

TEST_F(SessionRegionTest, UnregisterIsRefusedWhileInUse) {
  auto handle = session_.AddRegion(MakeRegion(4096));
  ASSERT_TRUE(handle.ok());
  auto region = session_.LookupRegion(*handle);
  ASSERT_TRUE(region.ok());
  Region::Use use = (*region)->Acquire();
  absl::Status refused = session_.UnregisterRegion(*handle);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("in use by 1"));
  EXPECT_TRUE(session_.LookupRegion(*handle).ok());
  use = Region::Use();
  EXPECT_TRUE(session_.UnregisterRegion(*handle).ok());
  EXPECT_EQ(session_.LookupRegion(*handle).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(session_.UnregisterRegion(*handle).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SessionRegionTest, CloseDropsRegionsAndRefusesNewOnes) {
  std::weak_ptr<Region> weak;
  {
    auto region = MakeRegion(4096);
    weak = region;
    ASSERT_TRUE(session_.AddRegion(region).ok());
  }
  ASSERT_TRUE(session_.AddRegion(MakeRegion(4096)).ok());
  EXPECT_EQ(session_.region_count(), 2);
  SessionCloseStats stats = session_.Close(absl::CancelledError("test"));
  EXPECT_EQ(stats.regions_freed, 2);
  EXPECT_EQ(session_.region_count(), 0);
  EXPECT_TRUE(weak.expired());  // unmapped
  EXPECT_EQ(session_.AddRegion(MakeRegion(4096)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionRegionTest, RegionHandlesAreNotBufferHandles) {
  auto handle = session_.AddRegion(MakeRegion(4096));
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(session_.LookupBuffer(*handle).status().code(),
            absl::StatusCode::kNotFound);
  // Nor can a client claim one for a result.
  absl::Status taken = session_.CheckNewHandles({*handle});
  EXPECT_EQ(taken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(taken.message()), HasSubstr("already in use"));
  EXPECT_THAT(std::string(session_.CheckNewHandles({7, 7}).message()),
              HasSubstr("are both 0x7"));
  EXPECT_TRUE(session_.CheckNewHandles({7, 8}).ok());
}

}  // namespace
}  // namespace pjrt::daemon
