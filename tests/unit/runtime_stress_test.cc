// Many threads putting, copying, reading, deleting and donating buffers at
// once, under each allocation model. Run under ThreadSanitizer and
// AddressSanitizer by `make test-sanitize`.
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::runtime {
namespace {

using device::AllocationModel;
using testing::Add;
using testing::BytesInUse;
using testing::MakeClient;
using testing::SyncAll;

constexpr int kElements = 256;

struct Slot {
  Mutex mu;
  std::shared_ptr<Buffer> buffer ABSL_GUARDED_BY(mu);
  // Every element of `buffer` equals `value`.
  float value ABSL_GUARDED_BY(mu) = 0;
};

class Stress : public ::testing::TestWithParam<AllocationModel> {};

INSTANTIATE_TEST_SUITE_P(
    AllocationModels, Stress,
    ::testing::Values(AllocationModel::kSynchronous,
                      AllocationModel::kComputeSynchronized,
                      AllocationModel::kAsynchronous));

bool AllEqual(const std::vector<float>& v, float value) {
  for (float x : v) {
    if (x != value) return false;
  }
  return true;
}

TEST_P(Stress, ConcurrentPutCopyReadDeleteAndDonate) {
  auto client = MakeClient(GetParam(), /*devices=*/2, /*limit=*/64 << 20,
                           /*queue_ahead=*/4);
  constexpr int kSlots = 12, kThreads = 6, kIterations = 250;
  std::vector<Slot> slots(kSlots);
  std::atomic<int> failures{0};
  std::atomic<int> operations{0};

  const auto snapshot = [](Slot& slot) {
    MutexLock lock(&slot.mu);
    return std::make_pair(slot.buffer, slot.value);
  };
  const auto store = [](Slot& slot, std::shared_ptr<Buffer> buffer,
                        float value) {
    MutexLock lock(&slot.mu);
    slot.buffer = std::move(buffer);
    slot.value = value;
  };
  const auto unexpected = [&](const absl::Status& status) {
    // Racing with a delete or donation is fine; anything else is not.
    if (!status.ok() && !absl::IsFailedPrecondition(status)) {
      ADD_FAILURE() << status;
      ++failures;
    }
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 gen(1234 + t);
      for (int i = 0; i < kIterations; ++i) {
        Slot& slot = slots[gen() % kSlots];
        Device* device = client->devices()[gen() % 2];
        ++operations;
        switch (gen() % 5) {
          case 0: {  // put
            float value = static_cast<float>(gen() % 1000);
            std::vector<float> data(kElements, value);
            auto buffer = client->BufferFromHostBuffer(
                data.data(), testing::F32(kElements), device);
            if (!buffer.ok()) {
              unexpected(buffer.status());
              break;
            }
            store(slot, *buffer, value);
            break;
          }
          case 1: {  // copy to another device, check, keep
            auto [buffer, value] = snapshot(slot);
            if (buffer == nullptr) break;
            auto copy = buffer->CopyToDevice(device);
            if (!copy.ok()) {
              unexpected(copy.status());
              break;
            }
            std::vector<float> out(kElements);
            absl::Status status =
                (*copy)->CopyRawToHost(out.data(), 0, kElements * 4);
            if (!status.ok()) {
              // A copy of a buffer deleted meanwhile may be incomplete
              // only if the copy itself failed; a finished copy must read.
              unexpected(status);
              break;
            }
            if (!AllEqual(out, value)) {
              ADD_FAILURE() << "copy read " << out[0] << ", expected " << value;
              ++failures;
            }
            store(slot, *copy, value);
            break;
          }
          case 2: {  // read
            auto [buffer, value] = snapshot(slot);
            if (buffer == nullptr) break;
            std::vector<float> out(kElements);
            absl::Status status =
                buffer->CopyRawToHost(out.data(), 0, kElements * 4);
            if (!status.ok()) {
              unexpected(status);
            } else if (!AllEqual(out, value)) {
              ADD_FAILURE() << "read " << out[0] << ", expected " << value;
              ++failures;
            }
            break;
          }
          case 3: {  // delete
            auto [buffer, value] = snapshot(slot);
            if (buffer != nullptr) buffer->Delete();
            break;
          }
          case 4: {  // donate to an execution that adds one in place
            auto [buffer, value] = snapshot(slot);
            if (buffer == nullptr) break;
            auto result = Add(*client, *buffer, 1, nullptr, /*donate=*/true);
            if (!result.ok()) {
              unexpected(result.status());
              break;
            }
            store(slot, *result, value + 1);
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(operations, kThreads * kIterations);
  for (Slot& slot : slots) store(slot, nullptr, 0);
  SyncAll(*client);
  EXPECT_EQ(BytesInUse(*client, 0), 0);
  EXPECT_EQ(BytesInUse(*client, 1), 0);
}

}  // namespace
}  // namespace pjrt::runtime
