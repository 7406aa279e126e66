// The receive table of cross-host transfers, the descriptor format and the
// cluster's handshake checks, on a real host-platform runtime client.
#include "daemon/cross_host.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/cluster.h"
#include "daemon/proto_convert.h"
#include "gtest/gtest.h"
#include "runtime/client.h"

namespace pjrt::daemon {
namespace {

constexpr uint64_t kIncarnation = 0x1234;

bool Contains(const absl::Status& status, absl::string_view text) {
  return absl::StrContains(status.message(), text);
}

class CrossHostReceivesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::ClientOptions options;
    options.platform = "host";
    options.host_device_count = 2;
    options.task_id = 1;
    options.first_device_id = 4;
    auto client = runtime::Client::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    receives_ =
        std::make_unique<CrossHostReceives>(client_.get(), 1, kIncarnation);
  }

  // One f32[n] receive on device 5.
  CrossHostReceives::Made MakeOne(int64_t n,
                                  absl::Duration timeout = absl::Minutes(1)) {
    hlo::Shape shape = hlo::Shape(hlo::PrimitiveType::kF32, {n});
    auto made = receives_->Make({shape}, client_->devices()[1], timeout);
    EXPECT_TRUE(made.ok()) << made.status();
    return *std::move(made);
  }

  static v1::CrossHostDescriptor Parse(const std::string& bytes) {
    auto d = ParseDescriptor(bytes);
    EXPECT_TRUE(d.ok()) << d.status();
    return *d;
  }

  std::unique_ptr<runtime::Client> client_;
  std::unique_ptr<CrossHostReceives> receives_;
};

TEST_F(CrossHostReceivesTest, DescriptorNamesTheTaskDeviceShapeAndExpiry) {
  auto made = MakeOne(16);
  ASSERT_EQ(made.buffers.size(), 1u);
  EXPECT_FALSE(made.buffers[0]->IsReady());
  EXPECT_EQ(made.descriptors[0].substr(0, 4), "PJXD");
  v1::CrossHostDescriptor d = Parse(made.descriptors[0]);
  EXPECT_EQ(d.version(), kDescriptorVersion);
  EXPECT_EQ(d.task_id(), 1);
  EXPECT_EQ(d.incarnation(), kIncarnation);
  EXPECT_EQ(d.device_id(), 5);
  EXPECT_EQ(d.token().size(), 16u);
  EXPECT_EQ(d.shape().dims_size(), 1);
  EXPECT_GT(d.expires_unix_micros(), absl::ToUnixMicros(absl::Now()));
  EXPECT_EQ(receives_->pending(), 1);
}

TEST_F(CrossHostReceivesTest, TokensAndIdsDifferBetweenReceives) {
  auto a = MakeOne(4), b = MakeOne(4);
  v1::CrossHostDescriptor da = Parse(a.descriptors[0]);
  v1::CrossHostDescriptor db = Parse(b.descriptors[0]);
  EXPECT_NE(da.receive_id(), db.receive_id());
  EXPECT_NE(da.token(), db.token());
}

TEST_F(CrossHostReceivesTest, MalformedDescriptorsSayWhy) {
  EXPECT_TRUE(Contains(ParseDescriptor("").status(), "do not start"));
  EXPECT_TRUE(
      Contains(ParseDescriptor("PJXD\xff\xff").status(), "does not parse"));
  EXPECT_TRUE(Contains(ParseDescriptor("PJXD").status(), "no version"));
  v1::CrossHostDescriptor d;
  d.set_version(2);
  EXPECT_TRUE(Contains(ParseDescriptor(SerializeDescriptor(d)).status(),
                       "descriptor version 2"));
  d.set_version(1);
  EXPECT_TRUE(
      Contains(ParseDescriptor(SerializeDescriptor(d)).status(), "is missing"));
}

TEST_F(CrossHostReceivesTest, AClaimedReceiveIsFilledOnceAndBecomesReady) {
  auto made = MakeOne(4);
  v1::CrossHostDescriptor d = Parse(made.descriptors[0]);
  auto claimed = receives_->Claim(d);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(receives_->pending(), 0);
  const float values[4] = {1, 2, 3, 4};
  ASSERT_TRUE(claimed->transfer->Append(values, sizeof(values)).ok());
  receives_->Complete(*std::move(claimed), absl::OkStatus());
  ASSERT_TRUE(made.buffers[0]->BlockHostUntilReady().ok());
  float out[4] = {};
  ASSERT_TRUE(made.buffers[0]->CopyRawToHost(out, 0, sizeof(out)).ok());
  EXPECT_EQ(std::memcmp(out, values, sizeof(out)), 0);

  absl::Status again = receives_->Claim(d).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(again, "already been used")) << again;
}

TEST_F(CrossHostReceivesTest, ForgedOrAlteredDescriptorsAreRefused) {
  auto made = MakeOne(4);
  v1::CrossHostDescriptor d = Parse(made.descriptors[0]);

  v1::CrossHostDescriptor forged = d;
  forged.set_token(std::string(16, 'x'));
  EXPECT_EQ(receives_->Claim(forged).status().code(),
            absl::StatusCode::kPermissionDenied);
  forged = d;
  forged.set_receive_id(d.receive_id() + 1);
  EXPECT_TRUE(Contains(receives_->Claim(forged).status(), "never made"));
  forged = d;
  forged.mutable_shape()->set_dims(0, 8);
  EXPECT_TRUE(Contains(receives_->Claim(forged).status(), "altered"));
  forged = d;
  forged.set_task_id(0);
  EXPECT_TRUE(Contains(receives_->Claim(forged).status(), "names task 0"));
  forged = d;
  forged.set_incarnation(kIncarnation + 1);
  EXPECT_TRUE(Contains(receives_->Claim(forged).status(), "earlier run"));
  // None of them used up the receive.
  EXPECT_EQ(receives_->pending(), 1);
  EXPECT_TRUE(receives_->Claim(d).ok());
}

TEST_F(CrossHostReceivesTest, AnOverdueReceiveExpiresWithTheReason) {
  auto made = MakeOne(4, absl::Seconds(30));
  v1::CrossHostDescriptor d = Parse(made.descriptors[0]);
  EXPECT_EQ(receives_->Reap(absl::Now()), 0);
  EXPECT_EQ(receives_->Reap(absl::Now() + absl::Seconds(31)), 1);
  absl::Status ready = made.buffers[0]->BlockHostUntilReady();
  EXPECT_EQ(ready.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(ready, "before any data arrived")) << ready;
  EXPECT_TRUE(Contains(receives_->Claim(d).status(), "expired at"));
}

TEST_F(CrossHostReceivesTest, CancelBindsCancelledAndRefusesTheDescriptor) {
  auto made = MakeOne(4);
  v1::CrossHostDescriptor d = Parse(made.descriptors[0]);
  EXPECT_EQ(receives_->Cancel(made.buffers), 1);
  EXPECT_EQ(receives_->Cancel(made.buffers), 0);
  EXPECT_EQ(made.buffers[0]->BlockHostUntilReady().code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(Contains(receives_->Claim(d).status(), "was cancelled"));
}

TEST_F(CrossHostReceivesTest, APartialTransferBindsItsErrorNotData) {
  auto made = MakeOne(4);
  auto claimed = receives_->Claim(Parse(made.descriptors[0]));
  ASSERT_TRUE(claimed.ok());
  const float half[2] = {1, 2};
  ASSERT_TRUE(claimed->transfer->Append(half, sizeof(half)).ok());
  receives_->Complete(*std::move(claimed),
                      absl::UnavailableError("sender went away"));
  absl::Status ready = made.buffers[0]->BlockHostUntilReady();
  EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(made.buffers[0]->IsDeleted());
}

TEST_F(CrossHostReceivesTest, DeletingTheBufferCancelsAndFreesTheReceive) {
  device::Allocator* allocator = client_->devices()[1]->allocator();
  const int64_t before = allocator->GetStats().bytes_in_use;
  {
    auto made = MakeOne(1 << 20);
    EXPECT_GE(allocator->GetStats().bytes_in_use, before + (4 << 20));
    made.buffers[0]->Delete();
    EXPECT_EQ(receives_->Reap(absl::Now()), 1);
  }
  EXPECT_EQ(receives_->pending(), 0);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, before);
}

TEST_F(CrossHostReceivesTest, ReceivesThatDoNotFitMakeNothing) {
  hlo::Shape huge(hlo::PrimitiveType::kU8, {int64_t{1} << 50});
  hlo::Shape small(hlo::PrimitiveType::kU8, {16});
  auto made =
      receives_->Make({small, huge}, client_->devices()[0], absl::Minutes(1));
  EXPECT_EQ(made.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(receives_->pending(), 0);
}

TEST(ProtocolRanges, OverlapIsInclusive) {
  EXPECT_TRUE(ProtocolRangesOverlap(1, 4, 4, 6));
  EXPECT_TRUE(ProtocolRangesOverlap(2, 3, 1, 9));
  EXPECT_FALSE(ProtocolRangesOverlap(1, 3, 4, 6));
}

class ClusterHandshakeTest : public ::testing::Test {
 protected:
  ClusterHandshakeTest()
      : cluster_(ClusterConfig{.task_id = 1,
                               .addresses = {"h0:1", "h1:1", "h2:1"},
                               .secret = "0123456789abcdef"},
                 Topology(1, 2, 4)) {}

  static v1::TaskTopology Topology(int task, uint32_t min, uint32_t max) {
    v1::TaskTopology t;
    t.set_task_id(task);
    t.set_protocol_version_min(min);
    t.set_protocol_version_max(max);
    for (const char* a : {"h0:1", "h1:1", "h2:1"}) t.add_cluster(a);
    return t;
  }

  v1::HandshakeRequest Request(int caller, int expected) {
    v1::HandshakeRequest request;
    *request.mutable_caller() = Topology(caller, 2, 4);
    request.set_expected_task_id(expected);
    return request;
  }

  Cluster cluster_;
};

TEST_F(ClusterHandshakeTest, AMatchingPeerIsAccepted) {
  EXPECT_TRUE(cluster_.CheckHandshake(Request(0, 1)).ok());
  EXPECT_TRUE(cluster_.CheckHandshake(Request(2, 1)).ok());
  EXPECT_EQ(cluster_.task_count(), 3);
  EXPECT_FALSE(cluster_.formed());
}

TEST_F(ClusterHandshakeTest, DisagreementsAreNamed) {
  EXPECT_TRUE(Contains(cluster_.CheckHandshake(Request(0, 2)),
                       "disagree on the --cluster order"));
  v1::HandshakeRequest other_list = Request(0, 1);
  other_list.mutable_caller()->mutable_cluster()->RemoveLast();
  EXPECT_TRUE(Contains(cluster_.CheckHandshake(other_list),
                       "start every task with the same list"));
  EXPECT_TRUE(
      Contains(cluster_.CheckHandshake(Request(1, 1)), "calls itself task 1"));
  v1::HandshakeRequest old = Request(0, 1);
  old.mutable_caller()->set_protocol_version_min(1);
  old.mutable_caller()->set_protocol_version_max(1);
  EXPECT_TRUE(Contains(cluster_.CheckHandshake(old),
                       "speaks protocol revisions 1 to 1"));
}

TEST(ClusterOfOne, IsFormedAndNumbersItsDevicesFromZero) {
  v1::TaskTopology self;
  self.add_devices()->set_local_hardware_id(0);
  self.add_devices()->set_local_hardware_id(1);
  Cluster cluster(ClusterConfig{}, self);
  EXPECT_TRUE(cluster.formed());
  EXPECT_FALSE(cluster.multi_task());
  EXPECT_EQ(cluster.first_device_id(0), 0);
  EXPECT_EQ(*cluster.TaskOfDevice(1), 0);
  EXPECT_TRUE(Contains(cluster.TaskOfDevice(2).status(), "0 to 1"));
  std::vector<v1::Device> devices = cluster.AllDevices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].id(), 1);
  EXPECT_TRUE(devices[1].addressable());
}

}  // namespace
}  // namespace pjrt::daemon
