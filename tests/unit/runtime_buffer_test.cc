// The runtime's transfers and buffers, under each allocation model.
#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/buffer.h"
#include "runtime/buffer_sequencing_event.h"
#include "runtime/client.h"
#include "runtime/host_to_device_transfer.h"
#include "runtime/tracked_device_buffer.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::runtime {
namespace {

using device::AllocationModel;
using testing::Add;
using testing::BytesInUse;
using testing::F32;
using testing::Gate;
using testing::MakeClient;
using testing::Put;
using testing::Read;
using testing::SyncAll;

// Queue-ahead 8 under every model, so that tests may enqueue a few gated
// executions (the synchronous model's default of 1 is tested separately).
class EveryModel : public ::testing::TestWithParam<AllocationModel> {
 protected:
  std::unique_ptr<Client> client_ =
      MakeClient(GetParam(), 2, 64 << 20, /*queue_ahead=*/8);
};

INSTANTIATE_TEST_SUITE_P(
    AllocationModels, EveryModel,
    ::testing::Values(AllocationModel::kSynchronous,
                      AllocationModel::kComputeSynchronized,
                      AllocationModel::kAsynchronous),
    [](const auto& info) {
      switch (info.param) {
        case AllocationModel::kSynchronous:
          return std::string("Synchronous");
        case AllocationModel::kComputeSynchronized:
          return std::string("ComputeSynchronized");
        case AllocationModel::kAsynchronous:
          return std::string("Asynchronous");
      }
      return std::string("Unknown");
    });

// A device event that completes just as a timed wait on it gives up: the
// wait says "not complete", and the event is complete by the time anyone
// asks again. (The daemon saw this under load as a spurious DEADLINE_EXCEEDED
// for a buffer that was ready.)
class CompletesAsTheWaitTimesOut : public device::Event {
 public:
  bool IsComplete() const override { return complete_; }
  void Wait() override { Complete(); }
  bool WaitFor(absl::Duration) override {
    Complete();
    return false;
  }
  void AddCallback(absl::AnyInvocable<void() &&> callback) override {
    if (complete_) {
      std::move(callback)();
    } else {
      callbacks_.push_back(std::move(callback));
    }
  }
  void Reset() override { complete_ = false; }

 private:
  void Complete() {
    complete_ = true;
    for (auto& callback : callbacks_) std::move(callback)();
    callbacks_.clear();
  }
  bool complete_ = false;
  std::vector<absl::AnyInvocable<void() &&>> callbacks_;
};

TEST(BufferSequencingEvent,
     AWaitThatTimesOutAsTheEventCompletesIsNotADeadline) {
  auto event = std::make_shared<BufferSequencingEvent>();
  event->SetSequencingEvent(std::make_shared<CompletesAsTheWaitTimesOut>(),
                            /*stream=*/nullptr);
  EXPECT_TRUE(event->BlockHostUntilComplete(absl::Milliseconds(1)).ok());
  EXPECT_TRUE(event->IsComplete());
}

TEST(BufferSequencingEvent,
     AFailedEventThatCompletesAsTheWaitTimesOutGivesItsError) {
  auto event = std::make_shared<BufferSequencingEvent>();
  event->SetProducerStatus(absl::InternalError("the kernel failed"));
  event->SetSequencingEvent(std::make_shared<CompletesAsTheWaitTimesOut>(),
                            /*stream=*/nullptr);
  absl::Status status = event->BlockHostUntilComplete(absl::Milliseconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_EQ(status.message(), "the kernel failed");
}

TEST(RuntimeClient, CreatesTheRequestedHostDevices) {
  auto client = MakeClient(AllocationModel::kSynchronous, 3);
  ASSERT_EQ(client->devices().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client->devices()[i]->id(), i);
    EXPECT_EQ(client->devices()[i]->local_hardware_id(), i);
    EXPECT_EQ(client->devices()[i]->platform_name(), "host");
    EXPECT_EQ(client->devices()[i]->memory_bytes(), 64 << 20);
  }
}

TEST(RuntimeClient, UnknownDeviceIsInvalidArgumentNamingIt) {
  auto client = MakeClient();
  auto device = client->LookupDevice(5);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(device.status().message().find("device 5"),
            absl::string_view::npos);
}

// The host platform, but device 1 has failed for good once `fail` is set:
// the runtime must refuse new work there, clearly, and keep device 0 going.
class FailingDevicePlatform : public device::Platform {
 public:
  explicit FailingDevicePlatform(std::unique_ptr<device::Platform> host)
      : host_(std::move(host)) {}
  const std::string& name() const override { return host_->name(); }
  int device_count() const override { return host_->device_count(); }
  device::DeviceDescription Describe(int o) const override {
    return host_->Describe(o);
  }
  AllocationModel default_allocation_model() const override {
    return host_->default_allocation_model();
  }
  bool host_can_access_device_memory() const override { return true; }
  absl::StatusOr<std::unique_ptr<device::Stream>> CreateStream(
      int o, const std::string& n) override {
    return host_->CreateStream(o, n);
  }
  std::unique_ptr<device::Event> CreateEvent(int o) override {
    return host_->CreateEvent(o);
  }
  std::unique_ptr<device::SubAllocator> CreateDeviceMemoryAllocator(
      int o) override {
    return host_->CreateDeviceMemoryAllocator(o);
  }
  std::unique_ptr<device::SubAllocator> CreateStagingMemoryAllocator(
      int o) override {
    return host_->CreateStagingMemoryAllocator(o);
  }
  absl::Status DeviceHealth(int ordinal, bool probe) override {
    if (fail && ordinal == 1) {
      return absl::FailedPreconditionError(
          "GPU 1 failed for good (an illegal address); restart pjrtd to use it "
          "again");
    }
    return absl::OkStatus();
  }

  std::atomic<bool> fail{false};

 private:
  std::unique_ptr<device::Platform> host_;
};

TEST(RuntimeClient, AnUnhealthyDeviceTakesNoNewWorkAndTheOthersGoOn) {
  ClientOptions options;
  options.platform = "host";
  options.host_device_count = 2;
  auto platform =
      std::make_unique<FailingDevicePlatform>(*device::CreateHostPlatform(2));
  FailingDevicePlatform* failing = platform.get();
  auto client = Client::Create(options, std::move(platform));
  ASSERT_TRUE(client.ok()) << client.status();
  auto on_one = Put(**client, {1, 2, 3}, 1);
  failing->fail = true;
  const hlo::Shape shape = F32(3);
  std::vector<float> data = {4, 5, 6};
  for (const absl::Status& s :
       {(*client)
            ->BufferFromHostBuffer(data.data(), shape, (*client)->devices()[1])
            .status(),
        (*client)
            ->CreateUninitializedBuffer(shape, (*client)->devices()[1])
            .status(),
        Add(**client, *on_one, 1).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("GPU 1 failed for good"),
              absl::string_view::npos)
        << s;
  }
  auto on_zero = Put(**client, {1, 2, 3}, 0);
  auto sum = Add(**client, *on_zero, 1);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Read(**sum), std::vector<float>({2, 3, 4}));
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
  options.host_device_count = 1;
  options.queue_ahead = -1;
  EXPECT_EQ(Client::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RuntimeClient, CudaPlatformWithoutAGpuIsFailedPrecondition) {
  ClientOptions options;
  options.platform = "cuda";
  auto client = Client::Create(options);
  if (client.ok()) GTEST_SKIP() << "a GPU is visible on this machine";
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(client.status().message().find("--platform host"),
            absl::string_view::npos);
}

TEST(RuntimeClient, AutoFallsBackToHostWithoutAGpu) {
  ClientOptions options;
  options.platform = "auto";
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  if (device::CreateCudaPlatform().ok()) {
    EXPECT_EQ((*client)->platform_name(), "cuda");
  } else {
    EXPECT_EQ((*client)->platform_name(), "host");
  }
}

// --- transfers ------------------------------------------------------------

TEST_P(EveryModel, HostRoundTrip) {
  auto buffer = Put(*client_, {1, 2, 3, 4});
  EXPECT_TRUE(buffer->BlockHostUntilReady().ok());
  EXPECT_EQ(Read(*buffer), std::vector<float>({1, 2, 3, 4}));
  float middle[2];
  ASSERT_TRUE(buffer->CopyRawToHost(middle, 4, 8).ok());
  EXPECT_EQ(middle[0], 2);
  EXPECT_EQ(middle[1], 3);
}

TEST_P(EveryModel, ImmutableOnlyDuringCallCopiesBeforeReturning) {
  std::vector<float> data = {5, 6, 7};
  bool done = false;
  auto buffer = *client_->BufferFromHostBuffer(
      data.data(), F32(3), HostBufferSemantics::kImmutableOnlyDuringCall,
      [&done] { done = true; }, client_->devices()[0]);
  EXPECT_TRUE(done);
  data.assign({0, 0, 0});  // the caller may reuse its array at once
  EXPECT_EQ(Read(*buffer), std::vector<float>({5, 6, 7}));
}

TEST_P(EveryModel, ImmutableUntilTransferCompletesCallsOnDoneAfterTheCopy) {
  std::vector<float> data = {8, 9};
  std::atomic<bool> done{false};
  auto buffer = *client_->BufferFromHostBuffer(
      data.data(), F32(2),
      HostBufferSemantics::kImmutableUntilTransferCompletes,
      [&done] { done = true; }, client_->devices()[0]);
  ASSERT_TRUE(buffer->BlockHostUntilReady().ok());
  SyncAll(*client_);
  EXPECT_TRUE(done);
  EXPECT_EQ(Read(*buffer), std::vector<float>({8, 9}));
}

TEST_P(EveryModel, ZeroCopyAliasesAlignedHostMemory) {
  alignas(64) float data[16] = {1, 2, 3};
  bool released = false;
  int64_t before = BytesInUse(*client_);
  auto buffer = *client_->BufferFromHostBuffer(
      data, F32(16), HostBufferSemantics::kZeroCopy, [&] { released = true; },
      client_->devices()[0]);
  // Nothing allocated, but the buffer counts as memory in use.
  EXPECT_EQ(BytesInUse(*client_), before + 64);
  {
    auto ref = *buffer->AcquireExternalReference();
    EXPECT_EQ(ref->data(), static_cast<void*>(data));
  }
  data[0] = 42;  // the buffer *is* the array
  EXPECT_EQ(Read(*buffer)[0], 42);
  buffer->Delete();
  SyncAll(*client_);
  EXPECT_TRUE(released);
  EXPECT_EQ(BytesInUse(*client_), before);
}

TEST(ZeroCopy, BuffersOverTheMemoryLimitAreRefusedAndLeaveNothing) {
  auto client = MakeClient(AllocationModel::kAsynchronous, 1, 1 << 20);
  alignas(64) static float whole[1 << 18];  // 1 MiB, the whole limit
  alignas(64) static float quarter[1 << 16];
  auto held =
      *client->CreateUninitializedBuffer(F32(1 << 16), client->devices()[0]);
  auto refused = client->BufferFromHostBuffer(whole, F32(1 << 18),
                                              HostBufferSemantics::kZeroCopy,
                                              nullptr, client->devices()[0]);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_EQ(BytesInUse(*client), 256 << 10);
  // What fits is taken, and counted until the buffer lets go.
  auto fits = client->BufferFromHostBuffer(quarter, F32(1 << 16),
                                           HostBufferSemantics::kZeroCopy,
                                           nullptr, client->devices()[0]);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(BytesInUse(*client), 512 << 10);
  (*fits)->Delete();
  held->Delete();
  SyncAll(*client);
  EXPECT_EQ(BytesInUse(*client), 0);
}

TEST_P(EveryModel, ZeroCopyOfMisalignedMemoryCopies) {
  alignas(64) char storage[64 + 8];
  float* data = reinterpret_cast<float*>(storage + 4);
  data[0] = 3;
  auto buffer = *client_->BufferFromHostBuffer(data, F32(1),
                                               HostBufferSemantics::kZeroCopy,
                                               nullptr, client_->devices()[0]);
  auto ref = *buffer->AcquireExternalReference();
  EXPECT_NE(ref->data(), static_cast<void*>(data));
  EXPECT_EQ(Read(*buffer)[0], 3);
}

TEST_P(EveryModel, UninitializedBufferIsAllocatedAndReady) {
  int64_t before = BytesInUse(*client_);
  auto buffer =
      *client_->CreateUninitializedBuffer(F32(256), client_->devices()[1]);
  EXPECT_EQ(BytesInUse(*client_, 1), 1024);
  EXPECT_TRUE(buffer->BlockHostUntilReady().ok());
  EXPECT_EQ(BytesInUse(*client_), before);
}

TEST_P(EveryModel, CopyToDeviceBetweenTwoDevicesReturnsIdenticalBytes) {
  std::vector<float> values(1000);
  for (int i = 0; i < 1000; ++i) values[i] = i * 0.5f;
  auto src = Put(*client_, values, 0);
  auto dst = *src->CopyToDevice(client_->devices()[1]);
  EXPECT_EQ(dst->device()->id(), 1);
  EXPECT_EQ(Read(*dst), values);
  EXPECT_EQ(BytesInUse(*client_, 1), 4000);
  dst->Delete();
  src->Delete();
  SyncAll(*client_);
  EXPECT_EQ(BytesInUse(*client_, 0), 0);
  EXPECT_EQ(BytesInUse(*client_, 1), 0);
}

TEST_P(EveryModel, OutOfRangeReadIsInvalidArgument) {
  auto buffer = Put(*client_, {1, 2, 3, 4});
  char out[32];
  EXPECT_EQ(buffer->CopyRawToHost(out, 8, 16).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EveryModel, ChunkedTransferIsReadyOnlyAfterFinish) {
  auto transfer =
      *client_->CreateHostToDeviceTransfer(F32(4), client_->devices()[0]);
  auto buffer = transfer->buffer();
  float first[2] = {1, 2}, second[2] = {3, 4};
  ASSERT_TRUE(transfer->Append(first, 8).ok());
  EXPECT_FALSE(buffer->IsReady());
  ASSERT_TRUE(transfer->Append(second, 8).ok());
  EXPECT_FALSE(buffer->IsReady());
  ASSERT_TRUE(transfer->Finish().ok());
  EXPECT_TRUE(buffer->BlockHostUntilReady().ok());
  EXPECT_EQ(Read(*buffer), std::vector<float>({1, 2, 3, 4}));
}

TEST_P(EveryModel, ChunkedTransferRejectsTooManyBytesAndFrees) {
  auto transfer =
      *client_->CreateHostToDeviceTransfer(F32(4), client_->devices()[0]);
  char data[20] = {};
  absl::Status status = transfer->Append(data, 20);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("expected 16"), absl::string_view::npos);
  SyncAll(*client_);
  EXPECT_EQ(BytesInUse(*client_), 0);
  EXPECT_EQ(transfer->buffer()->BlockHostUntilReady().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(EveryModel, ChunkedTransferRejectsTooFewBytes) {
  auto transfer =
      *client_->CreateHostToDeviceTransfer(F32(4), client_->devices()[0]);
  char data[8] = {};
  ASSERT_TRUE(transfer->Append(data, 8).ok());
  absl::Status status = transfer->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("received 8"), absl::string_view::npos);
}

TEST_P(EveryModel, AbandonedTransferFreesMemoryAndFailsWaitingReaders) {
  auto transfer =
      *client_->CreateHostToDeviceTransfer(F32(4), client_->devices()[0]);
  auto buffer = transfer->buffer();
  char data[4] = {};
  ASSERT_TRUE(transfer->Append(data, 4).ok());
  EXPECT_EQ(BytesInUse(*client_), 16);
  // A reader arrives before the data has.
  std::atomic<bool> read_done{false};
  absl::Status read_status;
  std::vector<float> out(4);
  std::thread reader([&] {
    buffer->CopyRawToHostAsync(out.data(), 0, 16, [&](absl::Status s) {
      read_status = s;
      read_done = true;
    });
  });
  transfer.reset();  // the stream was cut off
  reader.join();
  SyncAll(*client_);
  EXPECT_TRUE(read_done);
  EXPECT_FALSE(read_status.ok());
  EXPECT_EQ(BytesInUse(*client_), 0);
}

TEST_P(EveryModel, AllocationBeyondTheLimitIsResourceExhausted) {
  auto transfer = client_->CreateHostToDeviceTransfer(
      F32(int64_t{32} << 20), client_->devices()[0]);  // 128 MiB > 64 MiB
  ASSERT_FALSE(transfer.ok());
  EXPECT_EQ(transfer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(transfer.status().message().find("134217728 bytes"),
            absl::string_view::npos)
      << transfer.status();
}

// --- per-launch identity ----------------------------------------------------

TEST_P(EveryModel, EachExecutionGetsAFreshSeedAndItsLaunchId) {
  std::vector<uint64_t> seeds;
  std::vector<int64_t> launch_ids;
  for (int i = 0; i < 8; ++i) {
    ExecuteResult result{.shape = F32(1)};
    ExecuteOptions options;
    options.launch_id = 100 + i;
    auto outputs = ExecuteOnDevice(
        client_.get(), client_->devices()[i % 2], {}, {&result, 1},
        [&seeds, &launch_ids](const KernelArgs& k) {
          seeds.push_back(k.prng_seed);
          launch_ids.push_back(k.launch_id);
          return absl::OkStatus();
        },
        options);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_TRUE((*outputs)[0]->BlockHostUntilReady().ok());
  }
  ASSERT_EQ(seeds.size(), 8u);
  EXPECT_EQ(std::set<uint64_t>(seeds.begin(), seeds.end()).size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(launch_ids[i], 100 + i);
}

// --- errors travel with data ------------------------------------------------

TEST_P(EveryModel, FailingProducerBindsItsErrorToItsResults) {
  auto input = Put(*client_, {1});
  ExecuteArgument arg{.buffer = input.get()};
  ExecuteResult result{.shape = F32(1)};
  auto outputs = ExecuteOnDevice(
      client_.get(), client_->devices()[0], {&arg, 1}, {&result, 1},
      [](const KernelArgs&) { return absl::InternalError("kernel exploded"); });
  ASSERT_TRUE(outputs.ok()) << outputs.status();  // enqueued fine
  absl::Status status = (*outputs)[0]->BlockHostUntilReady();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "kernel exploded");
}

TEST_P(EveryModel, ConsumerOfAFailedBufferFailsWithThatError) {
  auto input = Put(*client_, {1});
  Gate gate;
  ExecuteArgument arg{.buffer = input.get()};
  ExecuteResult result{.shape = F32(1)};
  // The producer fails only after its consumers are enqueued.
  auto failed =
      *ExecuteOnDevice(client_.get(), client_->devices()[0], {&arg, 1},
                       {&result, 1}, [&gate](const KernelArgs&) {
                         gate.Pass();
                         return absl::DataLossError("bad sector");
                       });
  auto downstream = *Add(*client_, *failed[0], 1);
  auto copied = *failed[0]->CopyToDevice(client_->devices()[1]);
  gate.Open();
  EXPECT_EQ(downstream->BlockHostUntilReady().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(copied->BlockHostUntilReady().message(), "bad sector");
  float out;
  EXPECT_EQ(downstream->CopyRawToHost(&out, 0, 4).code(),
            absl::StatusCode::kDataLoss);
}

TEST_P(EveryModel, LongChainsDoNotKeepOldEventsAlive) {
  auto x = Put(*client_, {0});
  std::weak_ptr<Buffer> first;
  for (int i = 0; i < 200; ++i) {
    auto next = *Add(*client_, *x, 1);
    if (i == 0) first = next;
    x = next;
  }
  EXPECT_EQ(Read(*x)[0], 200);
  SyncAll(*client_);
  EXPECT_TRUE(first.expired());
}

// --- holds and donation ---------------------------------------------------

TEST_P(EveryModel, UseOfADeletedBufferIsFailedPreconditionNamingIt) {
  auto buffer = Put(*client_, {1, 2});
  buffer->Delete();
  EXPECT_TRUE(buffer->IsDeleted());
  float out[2];
  absl::Status status = buffer->CopyRawToHost(out, 0, 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "buffer f32[2] on host:0 was deleted");
  EXPECT_EQ(buffer->CopyToDevice(client_->devices()[1]).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Add(*client_, *buffer, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(EveryModel, UseOfADonatedBufferIsFailedPreconditionNamingIt) {
  auto buffer = Put(*client_, {1, 2});
  auto result = *Add(*client_, *buffer, 10, nullptr, /*donate=*/true);
  EXPECT_EQ(Read(*result), std::vector<float>({11, 12}));
  float out[2];
  absl::Status status = buffer->CopyRawToHost(out, 0, 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("f32[2] on host:0 was donated"),
            absl::string_view::npos)
      << status;
  auto again = Add(*client_, *buffer, 1, nullptr, true);
  EXPECT_NE(again.status().message().find("donated"), absl::string_view::npos);
}

TEST_P(EveryModel, DonatedMemoryIsReusedByTheAliasedResult) {
  auto buffer = Put(*client_, {1, 2, 3, 4});
  void* before;
  {
    auto ref = *buffer->AcquireExternalReference();
    before = ref->data();
  }
  int64_t bytes = BytesInUse(*client_);
  auto result = *Add(*client_, *buffer, 1, nullptr, /*donate=*/true);
  auto ref = *result->AcquireExternalReference();
  EXPECT_EQ(ref->data(), before);
  EXPECT_EQ(BytesInUse(*client_), bytes);
  EXPECT_EQ(Read(*result), std::vector<float>({2, 3, 4, 5}));
}

TEST_P(EveryModel, DonationWaitsForOutstandingUsageHolds) {
  auto buffer = Put(*client_, {1});
  Mutex mu;
  std::vector<std::string> order;
  auto usage = buffer->GetBufferWithHold(Buffer::HoldType::kUsage);
  ASSERT_TRUE(usage.ok());
  std::thread donor([&] {
    auto donation = buffer->GetBufferWithHold(Buffer::HoldType::kDonation);
    MutexLock lock(&mu);
    order.push_back(donation.ok() ? "donation acquired" : "donation failed");
  });
  // Wait until the donor has registered its hold and is waiting.
  while (buffer->holds(Buffer::HoldType::kDonation) == 0)
    std::this_thread::yield();
  {
    MutexLock lock(&mu);
    order.push_back("usage released");
  }
  { auto released = std::move(usage); }
  donor.join();
  EXPECT_EQ(order,
            std::vector<std::string>({"usage released", "donation acquired"}));
  EXPECT_EQ(buffer->holds(Buffer::HoldType::kDonation), 0);
  EXPECT_EQ(buffer->holds(Buffer::HoldType::kUsage), 0);
}

TEST_P(EveryModel, UsageHoldsWaitWhileADonationIsPending) {
  auto buffer = Put(*client_, {1});
  auto donation = buffer->GetBufferWithHold(Buffer::HoldType::kDonation);
  ASSERT_TRUE(donation.ok());
  absl::Status usage_status;
  std::thread reader([&] {
    usage_status = buffer->GetBufferWithHold(Buffer::HoldType::kUsage).status();
  });
  donation.ConfirmDonation();
  reader.join();
  EXPECT_EQ(usage_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(usage_status.message().find("donated"), absl::string_view::npos);
}

TEST_P(EveryModel, DonationIsRefusedUnderAnExternalReference) {
  auto buffer = Put(*client_, {1});
  auto ref = *buffer->AcquireExternalReference();
  auto result = Add(*client_, *buffer, 1, nullptr, /*donate=*/true);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("external reference"),
            absl::string_view::npos)
      << result.status();
  ref.reset();
  EXPECT_TRUE(Add(*client_, *buffer, 1, nullptr, true).ok());
}

TEST_P(EveryModel, OnlyOneDonationSucceeds) {
  for (int round = 0; round < 20; ++round) {
    auto buffer = Put(*client_, {1});
    std::atomic<int> succeeded{0}, refused{0};
    std::vector<std::thread> donors;
    for (int t = 0; t < 4; ++t) {
      donors.emplace_back([&] {
        auto r = Add(*client_, *buffer, 1, nullptr, true);
        if (r.ok()) {
          ++succeeded;
        } else if (absl::IsFailedPrecondition(r.status())) {
          ++refused;
        }
      });
    }
    for (auto& t : donors) t.join();
    EXPECT_EQ(succeeded, 1);
    EXPECT_EQ(refused, 3);
  }
}

TEST_P(EveryModel, DonatingABufferPassedTwiceIsInvalidArgument) {
  auto buffer = Put(*client_, {1});
  ExecuteArgument args[2] = {{buffer.get(), true}, {buffer.get(), false}};
  ExecuteResult result{.shape = F32(1)};
  auto outputs = ExecuteOnDevice(client_.get(), client_->devices()[0], args,
                                 {&result, 1}, testing::AddKernel(1, 0));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(buffer->IsDeleted());
}

TEST_P(EveryModel, ArgumentOnAnotherDeviceIsInvalidArgument) {
  auto buffer = Put(*client_, {1}, /*device=*/1);
  ExecuteArgument arg{.buffer = buffer.get()};
  ExecuteResult result{.shape = F32(1)};
  auto outputs =
      ExecuteOnDevice(client_.get(), client_->devices()[0], {&arg, 1},
                      {&result, 1}, testing::AddKernel(1, 0));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outputs.status().message().find("argument 0"),
            absl::string_view::npos);
}

TEST_P(EveryModel, DonationWaitsForOutstandingReads) {
  for (int round = 0; round < 20; ++round) {
    auto source = Put(*client_, {1, 1, 1, 1});
    Gate gate;
    // x's contents come from a gated kernel, so the read below and the
    // donating execution are both enqueued before x is defined.
    auto x = *Add(*client_, *source, 1, &gate);
    std::vector<float> read(4);
    absl::Status read_status;
    x->CopyRawToHostAsync(read.data(), 0, 16,
                          [&](absl::Status s) { read_status = s; });
    auto y = *Add(*client_, *x, 100, nullptr, /*donate=*/true);
    gate.Open();
    EXPECT_EQ(Read(*y), std::vector<float>({102, 102, 102, 102}));
    SyncAll(*client_);
    ASSERT_TRUE(read_status.ok());
    // The read saw x before the donated execution overwrote it.
    EXPECT_EQ(read, std::vector<float>({2, 2, 2, 2}));
  }
}

// --- allocation models
// ----------------------------------------------------------

TEST(AllocationModels, FreeIsDeferredUntilLastUseUnderSynchronousModel) {
  auto client = MakeClient(AllocationModel::kSynchronous);
  auto x = Put(*client, std::vector<float>(256, 1));
  Gate gate;
  auto y = *Add(*client, *x, 1, &gate);
  x->Delete();
  // The gated kernel still reads x: its memory stays.
  EXPECT_EQ(BytesInUse(*client), 2048);
  gate.Open();
  EXPECT_EQ(Read(*y)[0], 2);
  SyncAll(*client);
  EXPECT_EQ(BytesInUse(*client), 1024);
}

TEST(AllocationModels, FreeIsOrderedAfterLastUseUnderComputeSynchronizedModel) {
  auto client = MakeClient(AllocationModel::kComputeSynchronized);
  auto x = Put(*client, std::vector<float>(256, 1));
  SyncAll(*client);  // x's upload is complete and has let go of x
  void* x_memory = (*x->AcquireExternalReference())->data();
  Gate gate;
  auto y = *Add(*client, *x, 1, &gate);  // reads x once the gate opens
  x->Delete();
  // The free is immediate: the compute stream orders every later use.
  EXPECT_EQ(BytesInUse(*client), 1024);
  // The memory is handed out again at once, to a transfer on another stream.
  auto z = Put(*client, std::vector<float>(256, 7));
  EXPECT_EQ((*z->AcquireExternalReference())->data(), x_memory);
  gate.Open();
  // The kernel read x's contents, not z's: the transfer waited for compute.
  EXPECT_EQ(Read(*y), std::vector<float>(256, 2));
  EXPECT_EQ(Read(*z), std::vector<float>(256, 7));
}

TEST(AllocationModels, FreeWaitsForUsageEventsUnderAsynchronousModel) {
  auto client = MakeClient(AllocationModel::kAsynchronous);
  auto x = Put(*client, std::vector<float>(256, 1));
  Gate gate;
  auto y = *Add(*client, *x, 1, &gate);
  x->Delete();
  EXPECT_EQ(BytesInUse(*client), 2048);  // the allocator waits for the use
  gate.Open();
  EXPECT_EQ(Read(*y)[0], 2);
  SyncAll(*client);
  EXPECT_EQ(BytesInUse(*client), 1024);
}

// --- usage events ------------------------------------------------------------

TEST(UsageEvents, SequenceNumbersFollowTheOrderOfRecordsOnAStream) {
  auto client = MakeClient(AllocationModel::kComputeSynchronized);
  device::LocalDeviceState* local = client->devices()[0]->local_device_state();
  device::Stream* stream = local->GetDeviceToHostStream();
  // Threads race to record while the stream is held, so that every
  // callback is in place before any event completes; the stream then
  // completes them in the order they were recorded, which must be the
  // order of their numbers.
  Gate gate;
  ASSERT_TRUE(stream->EnqueueHostFunction([&gate] { gate.Pass(); }).ok());
  Mutex mu;
  std::vector<uint64_t> completed;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::shared_ptr<device::Event> event =
            *local->AllocateAndRecordEvent(stream);
        uint64_t number = event->sequence_number();
        event->AddCallback([&mu, &completed, number] {
          MutexLock lock(&mu);
          completed.push_back(number);
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  gate.Open();
  SyncAll(*client);
  MutexLock lock(&mu);
  ASSERT_EQ(completed.size(), 800u);
  EXPECT_TRUE(std::is_sorted(completed.begin(), completed.end()));
}

TEST(UsageEvents, AUseReportedLateDoesNotHideALaterUseOnItsStream) {
  auto client = MakeClient(AllocationModel::kAsynchronous);
  device::LocalDeviceState* local = client->devices()[0]->local_device_state();
  device::Stream* stream = local->GetDeviceToHostStream();
  const auto use = [&] {
    auto event = std::make_shared<BufferSequencingEvent>();
    event->SetSequencingEvent(*local->AllocateAndRecordEvent(stream), stream);
    return event;
  };
  auto earlier = use();
  auto later = use();
  ASSERT_LT(earlier->sequence_number(), later->sequence_number());
  TrackedDeviceBuffer tracked(local, DeviceMemory(), {});
  // Two readers recorded in this order finish their holds in the other:
  // the entry for the stream must stay the later use, which covers both.
  tracked.AddUsageEvent(stream, later, /*reference_held=*/false);
  tracked.AddUsageEvent(stream, earlier, /*reference_held=*/true);
  ASSERT_EQ(tracked.usage_events().size(), 1u);
  EXPECT_EQ(tracked.usage_events()[0].event, later);
  EXPECT_FALSE(tracked.usage_events()[0].reference_held);
  // A newer use replaces it.
  auto newest = use();
  tracked.AddUsageEvent(stream, newest, /*reference_held=*/true);
  EXPECT_EQ(tracked.usage_events()[0].event, newest);
  EXPECT_TRUE(tracked.usage_events()[0].reference_held);
  SyncAll(*client);
}

TEST_P(EveryModel, DeleteWhileTransferInFlightIsSafe) {
  auto source = Put(*client_, std::vector<float>(1024, 3));
  Gate gate;
  auto x = *Add(*client_, *source, 1, &gate);
  std::vector<float> out(1024);
  absl::Status status = absl::UnknownError("not called");
  x->CopyRawToHostAsync(out.data(), 0, 4096,
                        [&](absl::Status s) { status = s; });
  auto copy = *x->CopyToDevice(client_->devices()[1]);
  x->Delete();
  source->Delete();
  gate.Open();
  EXPECT_EQ(Read(*copy), std::vector<float>(1024, 4));
  SyncAll(*client_);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(out, std::vector<float>(1024, 4));
  EXPECT_EQ(BytesInUse(*client_, 0), 0);
}

// ExecuteOptions::run_inline_when_idle: on an idle device the kernel runs
// on the calling thread and the results are ready when the call returns;
// without it, or with a stream of its own, the stream's thread runs it.
TEST(InlineRuns, AnIdleDeviceRunsTheKernelOnTheCaller) {
  auto client = MakeClient();
  auto x = Put(*client, {1, 2});
  SyncAll(*client);
  for (const bool inline_when_idle : {true, false}) {
    for (const bool own_stream : {false, true}) {
      SCOPED_TRACE(absl::StrCat("inline ", inline_when_idle, ", own stream ",
                                own_stream));
      std::thread::id ran_on;
      ExecuteArgument arg{.buffer = x.get()};
      ExecuteResult result{.shape = F32(2)};
      Kernel kernel = [&ran_on, add = testing::AddKernel(2, 1)](
                          const KernelArgs& args) mutable -> absl::Status {
        ran_on = std::this_thread::get_id();
        return std::move(add)(args);
      };
      auto outputs = ExecuteOnDevice(
          client.get(), x->device(), {&arg, 1}, {&result, 1}, std::move(kernel),
          {.own_stream = own_stream, .run_inline_when_idle = inline_when_idle});
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      const bool inline_run = inline_when_idle && !own_stream;
      // Ready before anything waited for it.
      if (inline_run) {
        EXPECT_TRUE((*outputs)[0]->IsReady());
      }
      EXPECT_EQ(Read(*(*outputs)[0]), (std::vector<float>{2, 3}));
      EXPECT_EQ(ran_on == std::this_thread::get_id(), inline_run);
      SyncAll(*client);
    }
  }
}

TEST(ComputeSemaphore, QueueAheadIsBoundedBySemaphore) {
  auto client = MakeClient(AllocationModel::kAsynchronous, 1, 64 << 20,
                           /*queue_ahead=*/2);
  auto& semaphore =
      client->devices()[0]->local_device_state()->compute_semaphore();
  auto x = Put(*client, {1});
  constexpr int kLaunches = 8;
  std::vector<Gate> gates(kLaunches);
  std::atomic<int> launched{0};
  std::vector<std::shared_ptr<Buffer>> results(kLaunches);
  std::thread launcher([&] {
    for (int i = 0; i < kLaunches; ++i) {
      results[i] = *Add(*client, *x, 1, &gates[i]);
      ++launched;
    }
  });
  for (int i = 0; i < kLaunches; ++i) {
    // With every gate from i on closed, at most two launches are in flight.
    while (semaphore.in_use() < std::min(2, kLaunches - i))
      std::this_thread::yield();
    EXPECT_LE(launched.load(), i + 2);
    gates[i].Open();
  }
  launcher.join();
  for (auto& r : results) EXPECT_EQ(Read(*r)[0], 2);
  EXPECT_EQ(semaphore.peak_in_use(), 2);
  SyncAll(*client);
  EXPECT_EQ(semaphore.in_use(), 0);
}

TEST(ComputeSemaphore, SynchronousModelRunsOneExecutionAtATime) {
  auto client = MakeClient(AllocationModel::kSynchronous);
  EXPECT_EQ(client->devices()[0]
                ->local_device_state()
                ->compute_semaphore()
                .capacity(),
            1);
}

}  // namespace
}  // namespace pjrt::runtime
