// Streams, events, the event pool, the semaphore and LocalDeviceState of the
// host platform.
#include <atomic>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "device/event_pool.h"
#include "device/host/host_event.h"
#include "device/host/host_platform.h"
#include "device/local_device_state.h"
#include "device/semaphore.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::device {
namespace {

// Host functions block on a gate until the test opens it.
using runtime::testing::Gate;

std::unique_ptr<LocalDeviceState> MakeDevice(Platform* platform,
                                             LocalDeviceOptions options = {}) {
  options.memory_limit_bytes = 64 << 20;
  return *LocalDeviceState::Create(platform, 0, options);
}

TEST(HostStream, RunsWorkInOrder) {
  auto platform = *CreateHostPlatform(1);
  auto stream = *platform->CreateStream(0, "test");
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(
        stream->EnqueueHostFunction([&order, i] { order.push_back(i); }).ok());
  }
  ASSERT_TRUE(stream->BlockHostUntilDone().ok());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(HostStream, RecordedEventCompletesWhenTheStreamReachesIt) {
  auto platform = *CreateHostPlatform(1);
  auto stream = *platform->CreateStream(0, "test");
  Gate gate;
  std::shared_ptr<Event> event = platform->CreateEvent(0);
  ASSERT_TRUE(stream->EnqueueHostFunction([&] { gate.Pass(); }).ok());
  ASSERT_TRUE(stream->RecordEvent(event).ok());
  EXPECT_FALSE(event->IsComplete());
  gate.Open();
  event->Wait();
  EXPECT_TRUE(event->IsComplete());
}

TEST(HostStream, WaitForOrdersWorkAcrossStreams) {
  auto platform = *CreateHostPlatform(1);
  auto first = *platform->CreateStream(0, "first");
  auto second = *platform->CreateStream(0, "second");
  Gate gate;
  std::atomic<int> step{0};
  int seen_by_second = -1;
  std::shared_ptr<Event> event = platform->CreateEvent(0);
  ASSERT_TRUE(first
                  ->EnqueueHostFunction([&] {
                    gate.Pass();
                    step = 1;
                  })
                  .ok());
  ASSERT_TRUE(first->RecordEvent(event).ok());
  ASSERT_TRUE(second->WaitFor(event).ok());
  ASSERT_TRUE(second->EnqueueHostFunction([&] { seen_by_second = step; }).ok());
  gate.Open();
  ASSERT_TRUE(second->BlockHostUntilDone().ok());
  EXPECT_EQ(seen_by_second, 1);
}

TEST(EventPool, RecyclesEvents) {
  auto platform = *CreateHostPlatform(1);
  EventPool pool([&] { return platform->CreateEvent(0); });
  Event* first_address;
  {
    std::shared_ptr<Event> e = pool.Allocate();
    first_address = e.get();
    static_cast<HostEvent*>(e.get())->Complete();
  }
  std::shared_ptr<Event> again = pool.Allocate();
  EXPECT_EQ(again.get(), first_address);
  EXPECT_FALSE(again->IsComplete());  // reset on return
  EXPECT_EQ(pool.created(), 1);
  EXPECT_EQ(pool.allocated(), 2);
  std::shared_ptr<Event> second = pool.Allocate();
  EXPECT_EQ(pool.created(), 2);
}

TEST(Semaphore, BlocksBeyondItsCapacity) {
  Semaphore semaphore(2);
  semaphore.Acquire(1);
  semaphore.Acquire(1);
  EXPECT_EQ(semaphore.in_use(), 2);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    semaphore.Acquire(1);
    acquired = true;
  });
  // The waiter cannot get a unit until one is released; it records that it
  // got one only after Acquire returns.
  EXPECT_FALSE(acquired);
  semaphore.Release(1);
  waiter.join();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(semaphore.peak_in_use(), 2);
}

TEST(Semaphore, ScopedReservationReleasesOnDestruction) {
  Semaphore semaphore(1);
  {
    auto reservation = semaphore.ScopedAcquire(1);
    EXPECT_EQ(semaphore.in_use(), 1);
    auto moved = std::move(reservation);
    EXPECT_EQ(semaphore.in_use(), 1);
  }
  EXPECT_EQ(semaphore.in_use(), 0);
}

TEST(LocalDeviceState, QueueAheadDefaultsFollowTheAllocationModel) {
  auto platform = *CreateHostPlatform(1);
  auto sync = MakeDevice(platform.get());
  EXPECT_EQ(sync->allocation_model(), AllocationModel::kSynchronous);
  EXPECT_EQ(sync->compute_semaphore().capacity(), 1);
  auto async = MakeDevice(platform.get(),
                          {.allocation_model = AllocationModel::kAsynchronous});
  EXPECT_EQ(async->compute_semaphore().capacity(), 32);
  auto custom = MakeDevice(platform.get(), {.queue_ahead = 5});
  EXPECT_EQ(custom->compute_semaphore().capacity(), 5);
}

TEST(LocalDeviceState, CallbacksRunAfterTheStreamWork) {
  auto platform = *CreateHostPlatform(1);
  auto device = MakeDevice(platform.get());
  Gate gate;
  std::atomic<bool> work_done{false};
  std::atomic<bool> callback_saw_work{false};
  ASSERT_TRUE(device->compute_stream()
                  ->EnqueueHostFunction([&] {
                    gate.Pass();
                    work_done = true;
                  })
                  .ok());
  ASSERT_TRUE(device
                  ->ThenExecuteOnCallbackThread(
                      device->compute_stream(),
                      [&] { callback_saw_work = work_done.load(); })
                  .ok());
  gate.Open();
  ASSERT_TRUE(device->SynchronizeAllActivity().ok());
  EXPECT_TRUE(callback_saw_work);
}

TEST(LocalDeviceState, ThenWaitForOrdersOneStreamAfterAnother) {
  auto platform = *CreateHostPlatform(1);
  auto device = MakeDevice(platform.get());
  Gate gate;
  std::vector<std::string> order;
  Mutex mu;
  const auto note = [&](const char* what) {
    MutexLock lock(&mu);
    order.push_back(what);
  };
  ASSERT_TRUE(device->compute_stream()
                  ->EnqueueHostFunction([&] {
                    gate.Pass();
                    note("compute");
                  })
                  .ok());
  ASSERT_TRUE(device
                  ->ThenWaitFor(device->host_to_device_stream(),
                                device->compute_stream())
                  .ok());
  ASSERT_TRUE(device->host_to_device_stream()
                  ->EnqueueHostFunction([&] { note("h2d"); })
                  .ok());
  gate.Open();
  ASSERT_TRUE(device->SynchronizeAllActivity().ok());
  EXPECT_EQ(order, std::vector<std::string>({"compute", "h2d"}));
}

TEST(LocalDeviceState, PrngSeedsDiffer) {
  auto platform = *CreateHostPlatform(1);
  auto device = MakeDevice(platform.get());
  EXPECT_NE(device->GetNewPrngSeed(), device->GetNewPrngSeed());
}

TEST(LocalDeviceState, AFixedPrngSeedGivesTheSameExecutionSeeds) {
  auto platform = *CreateHostPlatform(1);
  LocalDeviceOptions options;
  options.prng_seed = 42;
  auto a = MakeDevice(platform.get(), options);
  auto b = MakeDevice(platform.get(), options);
  const uint64_t first = a->GetNewPrngSeed();
  EXPECT_EQ(first, b->GetNewPrngSeed());
  EXPECT_NE(first, a->GetNewPrngSeed());
  options.prng_seed = 43;
  auto c = MakeDevice(platform.get(), options);
  EXPECT_NE(first, c->GetNewPrngSeed());
}

TEST(LocalDeviceState, BorrowedStreamsAreReused) {
  auto platform = *CreateHostPlatform(1);
  auto device = MakeDevice(platform.get());
  auto stream = *device->BorrowStreamFromPool();
  Stream* raw = stream.get();
  device->ReturnStreamToPool(std::move(stream));
  auto again = *device->BorrowStreamFromPool();
  EXPECT_EQ(again.get(), raw);
  device->ReturnStreamToPool(std::move(again));
}

TEST(AllocationModel, NamesRoundTrip) {
  for (auto model :
       {AllocationModel::kSynchronous, AllocationModel::kComputeSynchronized,
        AllocationModel::kAsynchronous}) {
    EXPECT_EQ(*ParseAllocationModel(AllocationModelName(model)), model);
  }
  EXPECT_FALSE(ParseAllocationModel("eventually").ok());
}

}  // namespace
}  // namespace pjrt::device
