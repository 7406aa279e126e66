// The CUDA platform and the runtime on it. Every test skips, saying why, when
// no GPU is visible; scripts/gpu-check runs them on a machine with one.
#include <cstring>
#include <numeric>
#include <vector>

#include "device/local_device_state.h"
#include "device/platform.h"
#include "gtest/gtest.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/execute.h"
#include "runtime/host_to_device_transfer.h"

namespace pjrt {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto platform = device::CreateCudaPlatform();
    if (!platform.ok()) GTEST_SKIP() << platform.status().message();
    platform_ = *std::move(platform);
  }
  std::unique_ptr<device::Platform> platform_;
};

TEST_F(CudaTest, DescribesTheGpus) {
  ASSERT_GE(platform_->device_count(), 1);
  device::DeviceDescription d = platform_->Describe(0);
  EXPECT_FALSE(d.kind.empty());
  EXPECT_GT(d.memory_bytes, 0);
  EXPECT_EQ(platform_->default_allocation_model(),
            device::AllocationModel::kComputeSynchronized);
}

TEST_F(CudaTest, StreamCopiesThroughDeviceMemory) {
  auto memory = platform_->CreateDeviceMemoryAllocator(0);
  auto pinned = platform_->CreateStagingMemoryAllocator(0);
  auto stream = *platform_->CreateStream(0, "test");
  const int64_t n = 1 << 20;
  void* device_ptr = *memory->Alloc(n);
  char* in = static_cast<char*>(*pinned->Alloc(n));
  char* out = static_cast<char*>(*pinned->Alloc(n));
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<char>(i * 7);
  std::memset(out, 0, n);
  ASSERT_TRUE(stream->Memcpy(device_ptr, in, n).ok());
  ASSERT_TRUE(stream->Memcpy(out, device_ptr, n).ok());
  ASSERT_TRUE(stream->BlockHostUntilDone().ok());
  EXPECT_EQ(std::memcmp(in, out, n), 0);
  memory->Free(device_ptr, n);
  pinned->Free(in, n);
  pinned->Free(out, n);
}

TEST_F(CudaTest, EventsOrderStreamsAndRunCallbacks) {
  auto state = *device::LocalDeviceState::Create(platform_.get(), 0, {});
  bool callback_ran = false;
  ASSERT_TRUE(
      state
          ->ThenWaitFor(state->host_to_device_stream(), state->compute_stream())
          .ok());
  auto event = *state->AllocateAndRecordEvent(state->host_to_device_stream());
  event->AddCallback([&] { callback_ran = true; });
  event->Wait();
  ASSERT_TRUE(state->SynchronizeAllActivity().ok());
  EXPECT_TRUE(event->IsComplete());
  EXPECT_TRUE(callback_ran);
}

class CudaRuntimeTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    runtime::ClientOptions options;
    options.platform = "cuda";
    options.memory_limit_bytes = int64_t{1} << 30;
    auto client = runtime::Client::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  runtime::Device* device(int i = 0) {
    return client_->devices()[i % client_->devices().size()];
  }
  std::unique_ptr<runtime::Client> client_;
};

TEST_F(CudaRuntimeTest, HostRoundTripUnderEverySemantics) {
  std::vector<float> data(1 << 18);
  std::iota(data.begin(), data.end(), 0.0f);
  hlo::Shape shape(hlo::PrimitiveType::kF32, {1 << 18});
  for (auto semantics :
       {runtime::HostBufferSemantics::kImmutableOnlyDuringCall,
        runtime::HostBufferSemantics::kImmutableUntilTransferCompletes,
        runtime::HostBufferSemantics::kZeroCopy}) {
    bool done = false;
    auto buffer = *client_->BufferFromHostBuffer(
        data.data(), shape, semantics, [&] { done = true; }, device());
    ASSERT_TRUE(buffer->BlockHostUntilReady().ok());
    std::vector<float> out(data.size());
    ASSERT_TRUE(
        buffer->CopyRawToHost(out.data(), 0, buffer->size_bytes()).ok());
    EXPECT_EQ(out, data);
    ASSERT_TRUE(device()->local_device_state()->SynchronizeAllActivity().ok());
    EXPECT_TRUE(done);
  }
}

TEST_F(CudaRuntimeTest, ChunkedTransferAndDeviceCopy) {
  hlo::Shape shape(hlo::PrimitiveType::kU8, {3 << 20});
  std::vector<uint8_t> data(3 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  auto transfer = *client_->CreateHostToDeviceTransfer(shape, device());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(transfer->Append(data.data() + (i << 20), 1 << 20).ok());
  }
  ASSERT_TRUE(transfer->Finish().ok());
  auto copy = *transfer->buffer()->CopyToDevice(device(1));
  transfer->buffer()->Delete();
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(copy->CopyRawToHost(out.data(), 0, copy->size_bytes()).ok());
  EXPECT_EQ(out, data);
}

TEST_F(CudaRuntimeTest, ExecutionDonationAndFreeOrdering) {
  hlo::Shape shape(hlo::PrimitiveType::kF32, {1024});
  std::vector<float> ones(1024, 1.0f);
  auto x = *client_->BufferFromHostBuffer(ones.data(), shape, device());
  // A "kernel" that copies its argument into its result on the stream.
  const auto copy_kernel = [](const runtime::KernelArgs& args) {
    return args.stream->Memcpy(args.results[0], args.arguments[0], 4096);
  };
  runtime::ExecuteArgument arg{.buffer = x.get()};
  runtime::ExecuteResult result{.shape = shape};
  auto y = *runtime::ExecuteOnDevice(client_.get(), device(), {&arg, 1},
                                     {&result, 1}, copy_kernel);
  x->Delete();  // compute-synchronized: freed at once, ordered by the stream
  std::vector<float> sevens(1024, 7.0f);
  auto z = *client_->BufferFromHostBuffer(sevens.data(), shape, device());
  std::vector<float> out(1024);
  ASSERT_TRUE(y[0]->CopyRawToHost(out.data(), 0, 4096).ok());
  EXPECT_EQ(out, ones);
  runtime::ExecuteArgument donated{.buffer = z.get(), .donate = true};
  runtime::ExecuteResult aliased{.shape = shape, .alias_argument = 0};
  auto w = *runtime::ExecuteOnDevice(
      client_.get(), device(), {&donated, 1}, {&aliased, 1},
      [](const runtime::KernelArgs&) { return absl::OkStatus(); });
  EXPECT_TRUE(z->IsDeleted());
  ASSERT_TRUE(w[0]->CopyRawToHost(out.data(), 0, 4096).ok());
  EXPECT_EQ(out, sevens);
}

}  // namespace
}  // namespace pjrt
