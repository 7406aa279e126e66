// A test fixture that compiles HLO text with the host compiler and runs it
// through the runtime: upload, run on a device, read back.
#ifndef PJRT_TESTS_UNIT_HLO_RUN_TEST_H_
#define PJRT_TESTS_UNIT_HLO_RUN_TEST_H_

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/executable.h"
#include "tests/unit/runtime_test_util.h"

namespace pjrt::runtime::testing {

class HloRunTest : public ::testing::Test {
 protected:
  explicit HloRunTest(int devices = 1)
      : client_(MakeClient(device::AllocationModel::kSynchronous, devices)) {}

  // An array on device 0.
  template <typename T>
  std::shared_ptr<Buffer> Put(hlo::PrimitiveType type,
                              std::vector<int64_t> dims,
                              const std::vector<T>& data) {
    auto b = client_->BufferFromHostBuffer(data.data(), hlo::Shape(type, dims),
                                           client_->devices()[0]);
    EXPECT_TRUE(b.ok()) << b.status();
    return *b;
  }

  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Run(
      const std::string& text, std::vector<std::shared_ptr<Buffer>> args,
      int device = 0) {
    auto exe = Executable::Compile(client_.get(), text);
    if (!exe.ok()) return exe.status();
    std::vector<Buffer*> raw;
    for (auto& a : args) raw.push_back(a.get());
    return (*exe)->Execute(raw, client_->devices()[device]);
  }

  template <typename T>
  std::vector<T> Read(Buffer& b) {
    std::vector<T> out(b.size_bytes() / sizeof(T));
    absl::Status s = b.CopyRawToHost(out.data(), 0, b.size_bytes());
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  std::unique_ptr<Client> client_;
};

}  // namespace pjrt::runtime::testing

#endif  // PJRT_TESTS_UNIT_HLO_RUN_TEST_H_
