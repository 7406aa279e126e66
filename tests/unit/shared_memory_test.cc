#include "daemon/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/socket_io.h"
#include "daemon/session.h"
#include "daemon/session_table.h"
#include "device/event.h"
#include "device/sub_allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pjrt/v1/buffer.pb.h"

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
  EXPECT_THAT(std::string(region.status().message()), HasSubstr("not a memfd"));
  fclose(file);
}

// A platform that records what is registered for DMA (the one call of
// device::Platform a region makes).
class RecordingPlatform : public device::Platform {
 public:
  const std::string& name() const override { return name_; }
  int device_count() const override { return 1; }
  device::DeviceDescription Describe(int) const override { return {}; }
  device::AllocationModel default_allocation_model() const override {
    return device::AllocationModel::kSynchronous;
  }
  bool host_can_access_device_memory() const override { return false; }
  absl::StatusOr<std::unique_ptr<device::Stream>> CreateStream(
      int, const std::string&) override {
    return absl::UnimplementedError("not in this test");
  }
  std::unique_ptr<device::Event> CreateEvent(int) override { return nullptr; }
  std::unique_ptr<device::SubAllocator> CreateDeviceMemoryAllocator(
      int) override {
    return nullptr;
  }
  std::unique_ptr<device::SubAllocator> CreateStagingMemoryAllocator(
      int) override {
    return nullptr;
  }
  absl::Status RegisterHostMemory(void* data, int64_t size) override {
    if (refuse) return absl::ResourceExhaustedError("RLIMIT_MEMLOCK");
    registered[data] = size;
    return absl::OkStatus();
  }
  void UnregisterHostMemory(void* data) override { registered.erase(data); }

  bool refuse = false;
  std::map<void*, int64_t> registered;

 private:
  const std::string name_ = "recording";
};

TEST(RegionTest, RegionsAreRegisteredForDmaWhileMapped) {
  RecordingPlatform platform;
  int fd = MakeMemfd(1 << 16);
  auto region = Region::Map(fd, 1 << 16, "weights", nullptr, &platform);
  close(fd);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_TRUE((*region)->registered());
  ASSERT_EQ(platform.registered.size(), 1u);
  EXPECT_EQ(platform.registered.begin()->first, *(*region)->Slice(0, 1));
  EXPECT_EQ(platform.registered.begin()->second, 1 << 16);
  region->reset();
  EXPECT_TRUE(platform.registered.empty());

  // A platform that cannot register it leaves a working, staged region.
  platform.refuse = true;
  fd = MakeMemfd(4096);
  auto staged = Region::Map(fd, 4096, "small", nullptr, &platform);
  close(fd);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_FALSE((*staged)->registered());
  EXPECT_TRUE((*staged)->Slice(0, 4096).ok());
}

TEST(RegionTest, SliceChecksBoundsWithoutOverflow) {
  auto region = MakeRegion(4096);
  EXPECT_TRUE(region->Slice(0, 4096).ok());
  EXPECT_TRUE(region->Slice(4096, 0).ok());
  EXPECT_TRUE(region->Slice(4000, 96).ok());
  for (auto [offset, bytes] : std::vector<std::pair<int64_t, int64_t>>{
           {4000, 97},
           {4097, 0},
           {-1, 1},
           {0, -1},
           {int64_t{1} << 62, int64_t{1} << 62},
           {1, INT64_MAX}}) {
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

TEST(RegionBudgetTest, BoundsRegionsAndBytesUntilUnmapped) {
  auto budget = std::make_shared<RegionBudget>(2, 10000);
  int fd = MakeMemfd(4096);
  auto a = Region::Map(fd, 4096, "a", budget);
  auto b = Region::Map(fd, 4096, "b", budget);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = Region::Map(fd, 1, "c", budget);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("max_regions"));
  a->reset();
  EXPECT_EQ(budget->regions(), 1);
  auto big =
      Region::Map(fd, 4096, "big", std::make_shared<RegionBudget>(8, 4000));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.status().message()),
              HasSubstr("max_region_bytes"));
  b->reset();
  EXPECT_EQ(budget->regions(), 0);
  EXPECT_EQ(budget->bytes(), 0);
  auto named = Region::Map(fd, 16, std::string(kMaxRegionNameBytes + 1, 'n'));
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  close(fd);
}

TEST(SessionRegionLimits, CountAndBytesPerSessionAreBounded) {
  Session session(1, 1, "s", "p", absl::Seconds(10), absl::Now(),
                  SessionLimits{.max_regions = 2, .max_region_bytes = 10000});
  ASSERT_TRUE(session.AddRegion(MakeRegion(4096)).ok());
  auto too_big = session.AddRegion(MakeRegion(8192));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.status().message()),
              HasSubstr("max_region_bytes_per_session"));
  auto second = session.AddRegion(MakeRegion(4096));
  ASSERT_TRUE(second.ok());
  auto third = session.AddRegion(MakeRegion(16));
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("max_regions_per_session"));
  ASSERT_TRUE(session.UnregisterRegion(*second).ok());
  EXPECT_TRUE(session.AddRegion(MakeRegion(16)).ok());
}

// A client of the region socket, as the Python and C++ clients are.
class RegionServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto session = table_.Open("test", "peer", absl::ZeroDuration());
    ASSERT_TRUE(session.ok());
    session_ = *session;
  }
  void Start(RegionServerOptions options) {
    server_ = std::make_unique<RegionServer>(&table_, options);
    ASSERT_TRUE(server_->Start(address_).ok());
  }

  int Connect() {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, address_.data() + 1, address_.size() - 1);
    socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                              address_.size());
    EXPECT_EQ(connect(s, reinterpret_cast<sockaddr*>(&addr), length), 0);
    timeval timeout{.tv_sec = 10, .tv_usec = 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return s;
  }

  // Registers a fresh memfd of `size` over a new connection; returns the
  // reply, or an error code of -1 if the server closed the connection.
  v1::RegisterRegionResponse Register(int64_t size, int connection = -1) {
    if (connection < 0) connection = Connect();
    v1::RegisterRegionRequest request;
    request.set_session_id(session_->id());
    request.set_size_bytes(size);
    request.set_name("r");
    const std::string bytes = request.SerializeAsString();
    int fd = MakeMemfd(size);
    v1::RegisterRegionResponse response;
    response.set_error_code(-1);
    if (SendWithDescriptor(connection, bytes.data(), bytes.size(), fd)) {
      char reply[4096];
      ssize_t n = recv(connection, reply, sizeof(reply), 0);
      if (n > 0) response.ParseFromArray(reply, static_cast<int>(n));
    }
    close(fd);
    close(connection);
    return response;
  }

  SessionTable table_{SessionTableOptions{}};
  std::shared_ptr<Session> session_;
  const std::string address_ =
      absl::StrFormat("@pjrtd-region-test-%d-%d", getpid(), rand());
  std::unique_ptr<RegionServer> server_;
};

TEST_F(RegionServerTest, IdleConnectionsDoNotHoldUpOthers) {
  Start({.max_connections_per_peer = 100, .max_connections = 100});
  // Clients that connect and send nothing.
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) idle.push_back(Connect());
  const absl::Time start = absl::Now();
  v1::RegisterRegionResponse response = Register(4096);
  EXPECT_NE(response.region_handle(), 0u) << response.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  for (int s : idle) close(s);
}

TEST_F(RegionServerTest, ConnectionsBeyondAPeersBoundAreClosedAtOnce) {
  Start({.max_connections_per_peer = 2, .max_connections = 100});
  int a = Connect(), b = Connect();
  // This process is one peer: a third connection is refused...
  v1::RegisterRegionResponse refused = Register(4096);
  EXPECT_EQ(refused.error_code(), -1);
  // ...until one of the first two goes.
  close(a);
  v1::RegisterRegionResponse response;
  for (int attempt = 0; attempt < 100 && response.region_handle() == 0;
       ++attempt) {
    response = Register(4096);
    if (response.region_handle() == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_NE(response.region_handle(), 0u) << response.error_message();
  close(b);
}

TEST_F(RegionServerTest, ConnectionsBeyondAUsersBoundAreClosedAtOnce) {
  Start({.max_connections_per_peer = 100,
         .max_connections_per_user = 2,
         .max_connections = 100});
  int a = Connect(), b = Connect();
  EXPECT_EQ(Register(4096).error_code(), -1);
  close(a);
  close(b);
}

TEST_F(RegionServerTest, TheDaemonWideBudgetIsEnforced) {
  Start({.max_regions = 2});
  EXPECT_NE(Register(4096).region_handle(), 0u);
  EXPECT_NE(Register(4096).region_handle(), 0u);
  v1::RegisterRegionResponse refused = Register(4096);
  EXPECT_EQ(refused.region_handle(), 0u);
  EXPECT_EQ(refused.error_code(),
            static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.error_message(), HasSubstr("max_regions"));
  EXPECT_EQ(server_->budget()->regions(), 2);
  table_.Close(session_->id(), absl::OkStatus()).IgnoreError();
  EXPECT_EQ(server_->budget()->regions(), 0);
}

}  // namespace
}  // namespace pjrt::daemon
