#include "runtime/fault_injection.h"

#include "gtest/gtest.h"

namespace pjrt::runtime {
namespace {

TEST(ParseFaultInjection, ReadsProbabilitiesAndSeed) {
  auto config = ParseFaultInjection("allocation=0.25, kernel=1,seed=9");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->allocation, 0.25);
  EXPECT_EQ(config->kernel, 1.0);
  EXPECT_EQ(config->seed, 9u);
  auto empty = ParseFaultInjection("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->allocation, 0);
  EXPECT_EQ(empty->kernel, 0);
}

TEST(ParseFaultInjection, ErrorsNameTheBadPart) {
  for (const char* spec : {"allocation=2", "kernel=-0.1", "kernel=nan",
                           "allocation", "disk=0.5", "seed=x"}) {
    auto config = ParseFaultInjection(spec);
    ASSERT_FALSE(config.ok()) << spec;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(kFaultInjectionEnv),
              absl::string_view::npos);
  }
}

TEST(FaultInjection, IsOffWithoutTheVariable) {
  // The test binary runs without PJRT_FAULT_INJECTION.
  EXPECT_TRUE(FaultInjectionStatus().ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(MaybeInjectAllocationFailure(1 << 20).ok());
    ASSERT_TRUE(MaybeInjectKernelFailure().ok());
  }
}

}  // namespace
}  // namespace pjrt::runtime
