// Integration tests: a real pjrtd process, the C++ client library, raw gRPC
// stubs and pjrtctl, over a unix socket and over TCP.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/cpp/pjrt_client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "tests/integration/daemon_suite.h"
#include "tests/integration/process.h"

namespace pjrt::testing {
namespace {

namespace v1 = ::pjrt::v1;
using ::nlohmann::json;

constexpr int64_t kMemoryLimit = int64_t{1} << 30;

struct DTypeCase {
  pjrt_client::DType dtype;
  int width;
};
const DTypeCase kAllDTypes[] = {
    {pjrt_client::DType::kPred, 1}, {pjrt_client::DType::kS8, 1},
    {pjrt_client::DType::kS16, 2},  {pjrt_client::DType::kS32, 4},
    {pjrt_client::DType::kS64, 8},  {pjrt_client::DType::kU8, 1},
    {pjrt_client::DType::kU16, 2},  {pjrt_client::DType::kU32, 4},
    {pjrt_client::DType::kU64, 8},  {pjrt_client::DType::kF16, 2},
    {pjrt_client::DType::kBF16, 2}, {pjrt_client::DType::kF32, 4},
    {pjrt_client::DType::kF64, 8},
};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(gen());
  return out;
}

class DaemonTest : public DaemonSuite<DaemonTest> {
 protected:
  static void SetUpTestSuite() {
    StartDaemon({"--platform", "host", "--host-devices", "3", "--memory-limit",
                 absl::StrCat(kMemoryLimit)});
  }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    auto client = pjrt_client::Client::Connect({.address = address()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
    buffers_ = v1::Buffers::NewStub(client_->channel());
    auto session = client_->OpenSession({.client_name = "daemon_test"});
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }

  void TearDown() override {
    session_.reset();
    ExpectHealthy();
  }

  int64_t BytesInUse(int device = 0) {
    auto stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats->devices[device].bytes_in_use;
  }

  // Polls the daemon's stats until device 0's bytes in use equal `bytes`
  // (the daemon frees a vanished client's memory asynchronously).
  bool AwaitBytesInUse(int64_t bytes, absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (BytesInUse() == bytes) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return BytesInUse() == bytes;
  }

  // An Upload call with hand-made messages, for inputs the client library
  // would never send.
  grpc::Status RawUpload(const std::vector<v1::UploadRequest>& messages,
                         v1::BufferInfo* info = nullptr) {
    grpc::ClientContext context;
    v1::BufferInfo ignored;
    auto writer = buffers_->Upload(&context, info ? info : &ignored);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  v1::UploadRequest Header(pjrt_client::DType dtype, std::vector<int64_t> dims,
                           int device = 0) {
    v1::UploadRequest r;
    r.mutable_header()->set_session_id(session_->id());
    r.mutable_header()->mutable_shape()->set_dtype(
        static_cast<v1::DType>(dtype));
    for (int64_t d : dims) r.mutable_header()->mutable_shape()->add_dims(d);
    r.mutable_header()->set_device_id(device);
    return r;
  }

  static v1::UploadRequest Chunk(size_t bytes) {
    v1::UploadRequest r;
    r.set_chunk(std::string(bytes, '\1'));
    return r;
  }

  CommandResult Pjrtctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {PJRTCTL_PATH, "--address", address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::shared_ptr<pjrt_client::Client> client_;
  // The Buffers service itself, for calls the client library would never
  // make.
  std::unique_ptr<v1::Buffers::Stub> buffers_;
  std::unique_ptr<pjrt_client::Session> session_;
};

INSTANTIATE_TEST_SUITE_P(Transports, DaemonTest, ::testing::Values(0, 1),
                         TransportName);

// --- round trips ---------------------------------------------------------

TEST_P(DaemonTest, RoundTripsEveryDtype) {
  for (const DTypeCase& c : kAllDTypes) {
    SCOPED_TRACE(pjrt_client::DTypeName(c.dtype));
    std::vector<uint8_t> data =
        RandomBytes(5 * 3 * c.width, static_cast<uint32_t>(c.dtype));
    if (c.dtype == pjrt_client::DType::kPred) {
      for (auto& b : data) b &= 1;
    }
    auto buffer = session_->Upload(c.dtype, {5, 3}, data, 1);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(buffer->dtype(), c.dtype);
    EXPECT_EQ(buffer->dims(), std::vector<int64_t>({5, 3}));
    EXPECT_EQ(buffer->device_id(), 1);
    EXPECT_EQ(buffer->size_bytes(), static_cast<int64_t>(data.size()));
    auto back = buffer->Download();
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data);
  }
}

TEST_P(DaemonTest, RoundTripsScalarsAndZeroSizeArrays) {
  for (const DTypeCase& c : kAllDTypes) {
    SCOPED_TRACE(pjrt_client::DTypeName(c.dtype));
    std::vector<uint8_t> scalar = RandomBytes(c.width, 7);
    if (c.dtype == pjrt_client::DType::kPred) scalar[0] = 1;
    auto s = session_->Upload(c.dtype, {}, scalar, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->dims().empty());
    EXPECT_EQ(*s->Download(), scalar);

    auto empty = session_->Upload(c.dtype, {0, 4}, {}, 2);
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_EQ(empty->size_bytes(), 0);
    EXPECT_TRUE(empty->Download()->empty());
  }
}

TEST_P(DaemonTest, RoundTrips256MiB) {
  const size_t bytes = size_t{256} << 20;
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; i += 4096)
    data[i] = static_cast<uint8_t>(i >> 12);
  data.back() = 0xAB;
  int64_t before = BytesInUse();
  auto buffer =
      session_->Upload(pjrt_client::DType::kF32, {64, 1024, 1024}, data, 0);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(BytesInUse(), before + static_cast<int64_t>(bytes));
  auto back = buffer->Download();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  ASSERT_TRUE(buffer->Delete().ok());
  EXPECT_EQ(BytesInUse(), before);
}

// Over TCP without shared memory, arrays of 1 MiB or more travel over data
// channels, bit for bit as through the gRPC stream.
TEST_P(DaemonTest, TcpClientsMoveArraysOverDataChannelsBitForBit) {
  if (GetParam() != 1) GTEST_SKIP() << "data channels are for TCP clients";
  std::unique_ptr<pjrt_client::Session> sessions[2];
  for (bool channels : {true, false}) {
    auto client = pjrt_client::Client::Connect({.address = address(),
                                                .shared_memory = false,
                                                .data_channels = channels});
    ASSERT_TRUE(client.ok()) << client.status();
    auto session = (*client)->OpenSession({.client_name = "channels"});
    ASSERT_TRUE(session.ok()) << session.status();
    sessions[channels ? 0 : 1] = *std::move(session);
  }
  for (size_t bytes : {size_t{1} << 20, (size_t{9} << 20) + 3}) {
    std::vector<uint8_t> data =
        RandomBytes(bytes, static_cast<uint32_t>(bytes));
    auto fast = sessions[0]->Upload(pjrt_client::DType::kU8,
                                    {static_cast<int64_t>(bytes)}, data, 0);
    ASSERT_TRUE(fast.ok()) << fast.status();
    auto slow = sessions[1]->Upload(pjrt_client::DType::kU8,
                                    {static_cast<int64_t>(bytes)}, data, 0);
    ASSERT_TRUE(slow.ok()) << slow.status();
    auto fast_back = fast->Download();
    auto slow_back = slow->Download();
    ASSERT_TRUE(fast_back.ok()) << fast_back.status();
    ASSERT_TRUE(slow_back.ok()) << slow_back.status();
    EXPECT_TRUE(*fast_back == data);
    EXPECT_TRUE(*slow_back == data);
  }
  EXPECT_TRUE(sessions[0]->uses_data_channels());
  EXPECT_FALSE(sessions[1]->uses_data_channels());
}

// A transfer the daemon refuses after its channel was named ends the
// channel on both sides, without hanging the client mid-send, and the next
// transfer opens another.
TEST_P(DaemonTest, AnUploadRefusedOverADataChannelFailsAndTheNextSucceeds) {
  if (GetParam() != 1) GTEST_SKIP() << "data channels are for TCP clients";
  auto client = pjrt_client::Client::Connect(
      {.address = address(), .shared_memory = false});
  ASSERT_TRUE(client.ok()) << client.status();
  auto session = (*client)->OpenSession({.client_name = "channels"});
  ASSERT_TRUE(session.ok()) << session.status();
  // More than the sockets buffer: the send must be woken by the refusal.
  std::vector<uint8_t> data(size_t{64} << 20, 7);
  auto refused =
      (*session)->Upload(pjrt_client::DType::kU8, {64 << 20}, data, 7);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
      << refused.status();
  EXPECT_NE(refused.status().message().find("device 7"), std::string::npos);
  // Bytes that do not match the shape never go over a channel (they would
  // leave it out of step): the daemon names the mismatch.
  auto mismatched =
      (*session)->Upload(pjrt_client::DType::kF32, {1 << 20}, data, 0);
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument)
      << mismatched.status();
  auto accepted =
      (*session)->Upload(pjrt_client::DType::kU8, {64 << 20}, data, 0);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  auto back = accepted->Download();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  EXPECT_TRUE((*session)->uses_data_channels());
}

TEST_P(DaemonTest, CopyToDeviceReturnsIdenticalBytes) {
  std::vector<uint8_t> data = RandomBytes(4096, 3);
  auto src = session_->Upload(pjrt_client::DType::kU32, {1024}, data, 0);
  ASSERT_TRUE(src.ok()) << src.status();
  auto dst = src->CopyToDevice(2);
  ASSERT_TRUE(dst.ok()) << dst.status();
  EXPECT_EQ(dst->device_id(), 2);
  EXPECT_NE(dst->handle(), src->handle());
  EXPECT_EQ(*dst->Download(), data);
}

TEST_P(DaemonTest, HundredMiBPutShowsInStatsAndDeleteReturnsToBaseline) {
  const auto bytes_in_use = [&] {
    CommandResult r = Pjrtctl({"stats", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["devices"][1]["bytes_in_use"].get<int64_t>();
  };
  int64_t baseline = bytes_in_use();
  std::vector<uint8_t> data(100 << 20, 0x5A);
  auto buffer = session_->Upload(pjrt_client::DType::kU8, {100 << 20}, data, 1);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(bytes_in_use(), baseline + (100 << 20));
  ASSERT_TRUE(buffer->Delete().ok());
  EXPECT_EQ(bytes_in_use(), baseline);
}

TEST_P(DaemonTest, GetReadyStateAnswersWithoutWaiting) {
  std::vector<uint8_t> data(16);
  auto a = session_->Upload(pjrt_client::DType::kF32, {4}, data, 0);
  auto b = session_->Upload(pjrt_client::DType::kS32, {4}, data, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->BlockUntilReady().ok() && b->BlockUntilReady().ok());
  v1::GetReadyStateRequest request;
  request.set_session_id(session_->id());
  request.add_handles(a->handle());
  request.add_handles(b->handle());
  v1::GetReadyStateResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(buffers_->GetReadyState(&context, request, &response).ok());
  }
  ASSERT_EQ(response.states_size(), 2);
  EXPECT_EQ(response.states(0).handle(), a->handle());
  EXPECT_TRUE(response.states(0).ready());
  EXPECT_TRUE(response.states(1).ready());
  EXPECT_EQ(response.states(1).error_code(), 0);
  request.add_handles(0x1234);
  grpc::ClientContext context;
  EXPECT_EQ(buffers_->GetReadyState(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_P(DaemonTest, DescribeAndBlockUntilReadyReportTheBuffer) {
  std::vector<uint8_t> data(24);
  auto buffer = session_->Upload(pjrt_client::DType::kF64, {3}, data, 1);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(buffer->BlockUntilReady().ok());
  auto info = buffer->Describe();
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->ready);
  EXPECT_EQ(info->device_id, 1);
  EXPECT_EQ(info->size_bytes, 24);
  EXPECT_EQ(info->shape.dtype, pjrt_client::DType::kF64);
  EXPECT_EQ(info->error_code, 0);
}

TEST_P(DaemonTest, ClosingTheSessionFreesItsBuffers) {
  int64_t before = BytesInUse();
  auto session = client_->OpenSession({.client_name = "short-lived"});
  ASSERT_TRUE(session.ok());
  std::vector<uint8_t> data(1 << 20);
  auto a = (*session)->Upload(pjrt_client::DType::kU8, {1 << 20}, data, 0);
  auto b = (*session)->Upload(pjrt_client::DType::kU8, {1 << 20}, data, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  uint64_t handle = a->Release();  // no client-side delete
  EXPECT_EQ(BytesInUse(), before + (2 << 20));
  session->reset();
  EXPECT_EQ(BytesInUse(), before);
  // The handle is gone with the session.
  v1::DescribeBufferRequest request;
  request.set_session_id(session_->id());
  request.set_handle(handle);
  grpc::ClientContext context;
  v1::BufferInfo info;
  EXPECT_EQ(buffers_->DescribeBuffer(&context, request, &info).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// --- bad input -------------------------------------------------------------

TEST_P(DaemonTest, TooManyBytesIsInvalidArgumentAndLeavesNothing) {
  int64_t before = BytesInUse();
  grpc::Status status = RawUpload(
      {Header(pjrt_client::DType::kF32, {2, 3}), Chunk(20), Chunk(8)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("expected 24"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("28"), std::string::npos);
  EXPECT_EQ(BytesInUse(), before);
}

TEST_P(DaemonTest, TooFewBytesIsInvalidArgumentAndLeavesNothing) {
  int64_t before = BytesInUse();
  grpc::Status status =
      RawUpload({Header(pjrt_client::DType::kF32, {2, 3}), Chunk(20)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("received 20"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(BytesInUse(), before);
  auto stats = client_->Stats();
  EXPECT_EQ(stats->buffer_count, 0);
}

TEST_P(DaemonTest, UnknownDtypeIsInvalidArgumentNamingIt) {
  grpc::Status status =
      RawUpload({Header(static_cast<pjrt_client::DType>(99), {2}), Chunk(2)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("99"), std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, NegativeDimensionIsInvalidArgumentNamingIt) {
  grpc::Status status = RawUpload({Header(pjrt_client::DType::kF32, {4, -2})});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("-2"), std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, AbsurdDimensionsAreInvalidArgument) {
  grpc::Status status = RawUpload(
      {Header(pjrt_client::DType::kF64, {int64_t{1} << 40, int64_t{1} << 40})});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("too large"), std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, ArrayBeyondTheMemoryLimitIsResourceExhausted) {
  grpc::Status status = RawUpload(
      {Header(pjrt_client::DType::kF32, {kMemoryLimit})});  // 4 GiB > 1 GiB
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find(absl::StrCat(4 * kMemoryLimit)),
            std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, DeviceOutOfRangeIsInvalidArgumentNamingIt) {
  grpc::Status status =
      RawUpload({Header(pjrt_client::DType::kF32, {1}, 7), Chunk(4)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("device 7"), std::string::npos)
      << status.error_message();
  std::vector<uint8_t> data(4);
  auto negative = session_->Upload(pjrt_client::DType::kF32, {1}, data, -1);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(DaemonTest, ChunkBeforeHeaderIsInvalidArgument) {
  grpc::Status status =
      RawUpload({Chunk(4), Header(pjrt_client::DType::kF32, {1})});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("header"), std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, OversizedChunkIsInvalidArgument) {
  grpc::Status status = RawUpload(
      {Header(pjrt_client::DType::kU8, {(1 << 20) + 1}), Chunk((1 << 20) + 1)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("1 MiB"), std::string::npos)
      << status.error_message();
}

TEST_P(DaemonTest, UploadToUnknownSessionIsNotFound) {
  v1::UploadRequest header = Header(pjrt_client::DType::kU8, {1});
  header.mutable_header()->set_session_id(session_->id() ^ 0x5555);
  grpc::Status status = RawUpload({header, Chunk(1)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("session"), std::string::npos);
}

TEST_P(DaemonTest, UnknownAndForeignHandlesAreIndistinguishable) {
  std::vector<uint8_t> data(4);
  auto other = client_->OpenSession({.client_name = "other"});
  ASSERT_TRUE(other.ok());
  auto theirs = (*other)->Upload(pjrt_client::DType::kF32, {1}, data, 0);
  ASSERT_TRUE(theirs.ok());

  const auto describe = [&](uint64_t handle) {
    v1::DescribeBufferRequest request;
    request.set_session_id(session_->id());
    request.set_handle(handle);
    grpc::ClientContext context;
    v1::BufferInfo info;
    return buffers_->DescribeBuffer(&context, request, &info);
  };
  grpc::Status foreign = describe(theirs->handle());
  grpc::Status unknown = describe(0x1234);
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  // Same words either way, apart from the handle itself.
  std::string f = foreign.error_message(), u = unknown.error_message();
  EXPECT_EQ(f.substr(f.find(" is ")), u.substr(u.find(" is ")));
  // Download, delete and copy say the same.
  auto adopted = session_->Adopt(theirs->handle());
  EXPECT_EQ(adopted.status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DaemonTest, DeletedBufferIsNotFound) {
  std::vector<uint8_t> data(8);
  auto buffer = session_->Upload(pjrt_client::DType::kS32, {2}, data, 0);
  ASSERT_TRUE(buffer.ok());
  uint64_t handle = buffer->handle();
  ASSERT_TRUE(buffer->Delete().ok());
  EXPECT_EQ(session_->Adopt(handle).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(DaemonTest, StreamCutOffMidwayIsDiscarded) {
  int64_t before = BytesInUse();
  {
    grpc::ClientContext context;
    v1::BufferInfo info;
    auto writer = buffers_->Upload(&context, &info);
    ASSERT_TRUE(writer->Write(Header(pjrt_client::DType::kU8, {8 << 20})));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(writer->Write(Chunk(1 << 20)));
    // The memory for the whole array is held while the upload is open.
    ASSERT_TRUE(AwaitBytesInUse(before + (8 << 20), absl::Seconds(10)));
    context.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(AwaitBytesInUse(before, absl::Seconds(10)));
  EXPECT_EQ(client_->Stats()->buffer_count, 0);
}

// --- clients that vanish -----------------------------------------------------

TEST_P(DaemonTest, VanishedClientHasItsMemoryReturned) {
  int64_t before = BytesInUse();
  auto child = ChildProcess::Start(
      {UPLOAD_AND_WAIT_PATH, address(), absl::StrCat(32 << 20), "attach"});
  ASSERT_TRUE(child.ok()) << child.status();
  auto line = child->ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status();
  ASSERT_EQ(*line, "uploaded");
  // Seen through pjrtctl, as an operator would.
  CommandResult during = Pjrtctl({"stats", "--json"});
  ASSERT_EQ(during.exit_code, 0) << during.err;
  EXPECT_EQ(
      json::parse(during.out)["devices"][0]["bytes_in_use"].get<int64_t>(),
      before + (32 << 20));
  child->Kill(SIGKILL);
  ASSERT_TRUE(child->Wait(absl::Seconds(10)).ok());
  // The daemon notices the broken connection and closes the session.
  EXPECT_TRUE(AwaitBytesInUse(before, absl::Seconds(20)));
  CommandResult after = Pjrtctl({"stats", "--json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(json::parse(after.out)["devices"][0]["bytes_in_use"].get<int64_t>(),
            before);
}

TEST_P(DaemonTest, UnattachedSessionExpiresAfterItsLease) {
  int64_t before = BytesInUse();
  auto child = ChildProcess::Start(
      {UPLOAD_AND_WAIT_PATH, address(), absl::StrCat(1 << 20), "lease"});
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_EQ(*child->ReadLine(absl::Seconds(30)), "uploaded");
  // The child stays alive but never renews its 1 s lease.
  EXPECT_TRUE(AwaitBytesInUse(before, absl::Seconds(20)));
  child->Kill(SIGKILL);
  child->Wait(absl::Seconds(10)).IgnoreError();
}

// --- pjrtctl -----------------------------------------------------------------

TEST_P(DaemonTest, PjrtctlDevicesJsonListsThreeDevices) {
  CommandResult r = Pjrtctl({"devices", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["devices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(doc["devices"][i]["id"], i);
    EXPECT_EQ(doc["devices"][i]["platform"], "host");
    EXPECT_EQ(doc["devices"][i]["addressable"], true);
    EXPECT_EQ(doc["devices"][i]["memory_bytes"], kMemoryLimit);
  }
}

TEST_P(DaemonTest, PjrtctlInfoStatsAndHealthAgreeWithTheDaemon) {
  CommandResult info = Pjrtctl({"--json", "info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  json i = json::parse(info.out);
  EXPECT_EQ(i["platform"], "host");
  EXPECT_EQ(i["addressable_device_count"], 3);
  EXPECT_EQ(i["protocol_version_min"], 1);
  EXPECT_EQ(i["pid"], daemon_->pid());

  std::vector<uint8_t> data(1000);
  auto buffer = session_->Upload(pjrt_client::DType::kU8, {1000}, data, 2);
  ASSERT_TRUE(buffer.ok());
  CommandResult stats = Pjrtctl({"stats", "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  json s = json::parse(stats.out);
  EXPECT_EQ(s["devices"][2]["bytes_in_use"], 1000);
  EXPECT_EQ(s["devices"][2]["bytes_limit"], kMemoryLimit);
  EXPECT_EQ(s["buffer_count"], 1);
  EXPECT_GE(s["session_count"].get<int>(), 1);

  CommandResult health = Pjrtctl({"health", "--json"});
  ASSERT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(json::parse(health.out)["status"], "SERVING");

  CommandResult table = Pjrtctl({"stats"});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("IN USE"), std::string::npos);
  EXPECT_NE(table.out.find("1000 B"), std::string::npos) << table.out;
}

TEST_P(DaemonTest, PjrtctlExitCodes) {
  CommandResult usage = Pjrtctl({"no-such-command"});
  EXPECT_EQ(usage.exit_code, 2) << usage.out << usage.err;
  CommandResult bad_flag = Pjrtctl({"devices", "--frobnicate"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  CommandResult unreachable = RunCommand(
      {PJRTCTL_PATH, "--address", "unix://" + dir_->path() + "/nobody.sock",
       "--timeout", "1", "--json", "info"});
  EXPECT_EQ(unreachable.exit_code, 1);
  json err = json::parse(unreachable.out);
  EXPECT_EQ(err["error"]["code"], "UNAVAILABLE");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("nobody.sock"),
            std::string::npos);
}

// --- lifecycle
// ------------------------------------------------------------------

TEST(DaemonLifecycle, SigtermWithOpenSessionsExitsCleanlyAndRemovesSocket) {
  TempDir dir;
  std::string socket = dir.path() + "/pjrtd.sock";
  auto daemon = DaemonProcess::Start(
      PJRTD_PATH, {"--platform", "host", "--listen", "unix://" + socket},
      dir.path());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  {
    auto client = pjrt_client::Client::Connect({.address = "unix://" + socket});
    ASSERT_TRUE(client.ok());
    auto session = (*client)->OpenSession({.client_name = "lifecycle"});
    ASSERT_TRUE(session.ok());
    std::vector<uint8_t> data(1 << 20);
    auto buffer =
        (*session)->Upload(pjrt_client::DType::kU8, {1 << 20}, data, 0);
    ASSERT_TRUE(buffer.ok());
    buffer->Release();
    auto code = (*daemon)->Stop();
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << (*daemon)->Log();
  }
  EXPECT_FALSE(std::filesystem::exists(socket));
  std::string log = (*daemon)->Log();
  EXPECT_NE(log.find("freed 1 buffers"), std::string::npos) << log;
  EXPECT_NE(log.find("shutdown complete"), std::string::npos) << log;
}

// True if a process accepts connections of `type` on unix socket `path`.
bool Accepts(const std::string& path, int type) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(DaemonLifecycle, RefusesASocketAnotherDaemonServes) {
  TempDir dir;
  const std::string socket = dir.path() + "/pjrtd.sock";
  const std::string listen = "unix://" + socket;
  const std::string token_file = dir.path() + "/admin.token";
  auto first = DaemonProcess::Start(PJRTD_PATH,
                                    {"--platform", "host", "--listen", listen,
                                     "--admin-token-file", token_file},
                                    dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  const auto read = [](const std::string& path) {
    std::ifstream file(path);
    return std::string(std::istreambuf_iterator<char>(file), {});
  };
  const std::string token = read(token_file);
  ASSERT_EQ(token.size(), 33u);
  CommandResult second =
      RunCommand({PJRTD_PATH, "--platform", "host", "--listen", listen,
                  "--admin-token-file", token_file});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("already listening"), std::string::npos)
      << second.err;
  // The first daemon is unharmed: its sockets, the region and lane sockets
  // beside its own (the second used to remove them as stale on its way),
  // and its admin token file.
  auto client = pjrt_client::Client::Connect({.address = listen});
  EXPECT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(Accepts(socket + ".regions", SOCK_SEQPACKET));
  EXPECT_TRUE(Accepts(socket + ".lanes", SOCK_STREAM));
  EXPECT_EQ(read(token_file), token);
  // A second daemon whose own socket is free but whose region socket
  // another serves stops too, and removes nothing.
  ASSERT_EQ(std::rename(socket.c_str(), (dir.path() + "/moved.sock").c_str()),
            0);
  CommandResult third =
      RunCommand({PJRTD_PATH, "--platform", "host", "--listen", listen});
  EXPECT_EQ(third.exit_code, 1);
  EXPECT_NE(third.err.find("already listening on " + socket + ".regions"),
            std::string::npos)
      << third.err;
  EXPECT_TRUE(Accepts(socket + ".regions", SOCK_SEQPACKET));
}

TEST(DaemonLifecycle, TellsSystemdWhenReadyAndWhenStopping) {
  TempDir dir;
  // A stand-in for systemd's notification socket.
  std::string notify_path = dir.path() + "/notify";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify_path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
  auto daemon = DaemonProcess::Start(
      PJRTD_PATH,
      {"--platform", "host", "--listen", "unix://" + dir.path() + "/p.sock"},
      dir.path());
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const auto receive = [&] {
    char buf[1024];
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return std::string();
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  std::string ready = receive();
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  EXPECT_NE(ready.find("p.sock"), std::string::npos) << ready;
  ASSERT_EQ(*(*daemon)->Stop(), 0);
  EXPECT_NE(receive().find("STOPPING=1"), std::string::npos);
  close(fd);
}

TEST(DaemonLifecycle, EveryAllocationModelServesRoundTripsAndCopies) {
  for (const char* model :
       {"synchronous", "compute-synchronized", "asynchronous"}) {
    SCOPED_TRACE(model);
    TempDir dir;
    std::string listen = "unix://" + dir.path() + "/p.sock";
    auto daemon = DaemonProcess::Start(
        PJRTD_PATH,
        {"--platform", "host", "--host-devices", "2", "--allocation-model",
         model, "--queue-ahead", "4", "--listen", listen},
        dir.path());
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    EXPECT_NE((*daemon)->Log().find(absl::StrCat(model, " allocation")),
              std::string::npos)
        << (*daemon)->Log();
    auto client = pjrt_client::Client::Connect({.address = listen});
    ASSERT_TRUE(client.ok());
    auto session = (*client)->OpenSession({.client_name = model});
    ASSERT_TRUE(session.ok());
    std::vector<uint8_t> data = RandomBytes(3 << 20, 11);
    auto buffer =
        (*session)->Upload(pjrt_client::DType::kU8, {3 << 20}, data, 0);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    auto copy = buffer->CopyToDevice(1);
    ASSERT_TRUE(copy.ok()) << copy.status();
    ASSERT_TRUE(buffer->Delete().ok());
    EXPECT_EQ(*copy->Download(), data);
    session->reset();
    auto stats = (*client)->Stats();
    EXPECT_EQ(stats->devices[0].bytes_in_use, 0);
    EXPECT_EQ(stats->devices[1].bytes_in_use, 0);
    EXPECT_EQ(*(*daemon)->Stop(), 0);
  }
}

// A buffer the client dropped is freed on the daemon a little later (with
// the next run, or a background flush); an upload that needs its memory
// meanwhile must not fail: the client frees what it dropped and tries again.
TEST(DaemonLifecycle, AnUploadRefusedForMemoryADroppedBufferHoldsSucceeds) {
  TempDir dir;
  std::string unix_address = "unix://" + dir.path() + "/p.sock";
  auto daemon = DaemonProcess::Start(
      PJRTD_PATH,
      {"--platform", "host", "--host-devices", "1", "--memory-limit",
       absl::StrCat(64 << 20), "--listen", unix_address, "--listen",
       "127.0.0.1:0"},
      dir.path());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // Shared memory (unix) and a gRPC stream (TCP).
  for (const std::string& address : (*daemon)->addresses()) {
    SCOPED_TRACE(address);
    auto client = pjrt_client::Client::Connect({.address = address});
    ASSERT_TRUE(client.ok()) << client.status();
    auto session = (*client)->OpenSession({.client_name = "retry"});
    ASSERT_TRUE(session.ok()) << session.status();
    const int64_t size = 30 << 20;  // two fit in 64 MiB, three do not
    std::vector<uint8_t> data = RandomBytes(size, 5);
    auto kept = (*session)->Upload(pjrt_client::DType::kU8, {size}, data, 0);
    ASSERT_TRUE(kept.ok()) << kept.status();
    {
      auto dropped =
          (*session)->Upload(pjrt_client::DType::kU8, {size}, data, 0);
      ASSERT_TRUE(dropped.ok()) << dropped.status();
    }
    auto again = (*session)->Upload(pjrt_client::DType::kU8, {size}, data, 0);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again->Download(), data);
    // Without anything dropped, the refusal is the answer.
    auto third = (*session)->Upload(pjrt_client::DType::kU8, {size}, data, 0);
    EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted)
        << third.status();
  }
  EXPECT_EQ(*(*daemon)->Stop(), 0);
}

TEST(DaemonLifecycle, BadFlagsAreUsageErrors) {
  CommandResult r = RunCommand({PJRTD_PATH, "--host-devices", "0"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunCommand({PJRTD_PATH, "--memory-limit", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'lots'"), std::string::npos) << r.err;
  r = RunCommand({PJRTD_PATH, "--allocation-model", "lazy"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("lazy"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pjrt::testing
