#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrt::runtime {
namespace {

std::unique_ptr<Client> MakeClient(int devices = 2, int64_t limit = 1 << 20) {
  ClientOptions options;
  options.platform = "host";
  options.host_device_count = devices;
  options.memory_limit_bytes = limit;
  return *Client::Create(options);
}

const hlo::Shape kF32x4(hlo::PrimitiveType::kF32, {4});

TEST(RuntimeClient, CreatesTheRequestedHostDevices) {
  auto client = MakeClient(3);
  ASSERT_EQ(client->devices().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client->devices()[i]->id(), i);
    EXPECT_EQ(client->devices()[i]->platform_name(), "host");
  }
}

TEST(RuntimeClient, UnknownDeviceIsInvalidArgumentNamingIt) {
  auto client = MakeClient(2);
  auto device = client->LookupDevice(5);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(device.status().message().find("device 5"),
            absl::string_view::npos);
}

TEST(RuntimeClient, RejectsBadOptions) {
  ClientOptions options;
  options.platform = "tpu";
  EXPECT_EQ(Client::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.platform = "host";
  options.host_device_count = 0;
  EXPECT_EQ(Client::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Buffer, RoundTripsHostData) {
  auto client = MakeClient();
  std::vector<float> in = {1, 2, 3, 4};
  auto buffer = *client->BufferFromHostBuffer(in.data(), kF32x4,
                                              client->devices()[0]);
  EXPECT_TRUE(buffer->IsReady());
  std::vector<float> out(4);
  ASSERT_TRUE(buffer->CopyRawToHost(out.data(), 0, 16).ok());
  EXPECT_EQ(out, in);
  float middle[2];
  ASSERT_TRUE(buffer->CopyRawToHost(middle, 4, 8).ok());
  EXPECT_EQ(middle[0], 2);
  EXPECT_EQ(middle[1], 3);
}

TEST(Buffer, OutOfRangeReadIsInvalidArgument) {
  auto client = MakeClient();
  std::vector<float> in(4);
  auto buffer = *client->BufferFromHostBuffer(in.data(), kF32x4,
                                              client->devices()[0]);
  char out[32];
  EXPECT_EQ(buffer->CopyRawToHost(out, 8, 16).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Buffer, DeleteFreesMemoryAndLaterUseIsFailedPrecondition) {
  auto client = MakeClient();
  device::Allocator* allocator = client->devices()[0]->allocator();
  std::vector<float> in(4);
  auto buffer = *client->BufferFromHostBuffer(in.data(), kF32x4,
                                              client->devices()[0]);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 16);
  buffer->Delete();
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0);
  char out[16];
  absl::Status status = buffer->CopyRawToHost(out, 0, 16);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("f32[4] on host:0"), absl::string_view::npos)
      << status;
}

TEST(Buffer, CopyToDeviceCopiesTheBytes) {
  auto client = MakeClient();
  std::vector<float> in = {5, 6, 7, 8};
  auto src = *client->BufferFromHostBuffer(in.data(), kF32x4,
                                           client->devices()[0]);
  auto dst = *src->CopyToDevice(client->devices()[1]);
  EXPECT_EQ(dst->device()->id(), 1);
  std::vector<float> out(4);
  ASSERT_TRUE(dst->CopyRawToHost(out.data(), 0, 16).ok());
  EXPECT_EQ(out, in);
}

TEST(HostToDeviceTransfer, BufferIsReadyOnlyAfterFinish) {
  auto client = MakeClient();
  auto transfer = *client->CreateHostToDeviceTransfer(kF32x4,
                                                      client->devices()[0]);
  auto buffer = transfer->buffer();
  float first[2] = {1, 2}, second[2] = {3, 4};
  ASSERT_TRUE(transfer->Append(first, 8).ok());
  EXPECT_FALSE(buffer->IsReady());
  ASSERT_TRUE(transfer->Append(second, 8).ok());
  EXPECT_FALSE(buffer->IsReady());
  ASSERT_TRUE(transfer->Finish().ok());
  EXPECT_TRUE(buffer->IsReady());
  EXPECT_TRUE(buffer->BlockHostUntilReady().ok());
}

TEST(HostToDeviceTransfer, TooManyBytesAbortsAndFrees) {
  auto client = MakeClient();
  device::Allocator* allocator = client->devices()[0]->allocator();
  auto transfer = *client->CreateHostToDeviceTransfer(kF32x4,
                                                      client->devices()[0]);
  char data[20] = {};
  absl::Status status = transfer->Append(data, 20);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("expected 16"), absl::string_view::npos);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0);
  EXPECT_EQ(transfer->buffer()->BlockHostUntilReady().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(HostToDeviceTransfer, TooFewBytesFailsFinish) {
  auto client = MakeClient();
  auto transfer = *client->CreateHostToDeviceTransfer(kF32x4,
                                                      client->devices()[0]);
  char data[8] = {};
  ASSERT_TRUE(transfer->Append(data, 8).ok());
  absl::Status status = transfer->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("received 8"), absl::string_view::npos);
}

TEST(HostToDeviceTransfer, AbandonedTransferBindsErrorAndFreesMemory) {
  auto client = MakeClient();
  device::Allocator* allocator = client->devices()[0]->allocator();
  std::shared_ptr<Buffer> buffer;
  {
    auto transfer = *client->CreateHostToDeviceTransfer(kF32x4,
                                                        client->devices()[0]);
    buffer = transfer->buffer();
    char data[4] = {};
    ASSERT_TRUE(transfer->Append(data, 4).ok());
    EXPECT_EQ(allocator->GetStats().bytes_in_use, 16);
  }
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0);
  EXPECT_TRUE(buffer->IsReady());
  EXPECT_EQ(buffer->ReadyStatus().code(), absl::StatusCode::kCancelled);
}

TEST(HostToDeviceTransfer, AllocationBeyondLimitIsResourceExhausted) {
  auto client = MakeClient(1, /*limit=*/64);
  auto transfer = client->CreateHostToDeviceTransfer(
      hlo::Shape(hlo::PrimitiveType::kF32, {100}), client->devices()[0]);
  ASSERT_FALSE(transfer.ok());
  EXPECT_EQ(transfer.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(Buffer, DeleteDuringReadKeepsMemoryAliveUntilTheReadEnds) {
  auto client = MakeClient();
  device::Allocator* allocator = client->devices()[0]->allocator();
  auto transfer = *client->CreateHostToDeviceTransfer(kF32x4,
                                                      client->devices()[0]);
  auto buffer = transfer->buffer();
  // A reader waits for the definition while the buffer is deleted.
  std::vector<float> out(4, -1);
  absl::Status read_status;
  std::thread reader([&] { read_status = buffer->CopyRawToHost(out.data(), 0, 16); });
  // The reader may or may not have taken its reference yet; either way the
  // outcome must be well defined: a full read or FAILED_PRECONDITION.
  buffer->Delete();
  float data[4] = {1, 2, 3, 4};
  transfer->Append(data, 16).IgnoreError();
  transfer->Finish().IgnoreError();
  reader.join();
  if (read_status.ok()) {
    EXPECT_EQ(out, std::vector<float>({1, 2, 3, 4}));
  } else {
    EXPECT_EQ(read_status.code(), absl::StatusCode::kFailedPrecondition);
  }
  transfer.reset();
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0);
}

}  // namespace
}  // namespace pjrt::runtime
