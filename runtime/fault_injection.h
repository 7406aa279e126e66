// Test-only fault injection: makes device allocations and kernel runs fail
// at random points, so that tests can check that every failure path frees
// what it took and reports an error instead of a wrong result.
//
// Off unless the environment of the process sets
//
//   PJRT_FAULT_INJECTION="allocation=P,kernel=Q[,seed=N]"
//
// with P and Q probabilities in [0, 1]. The daemon logs a warning at start
// when it is on. Never set it in production.
#ifndef PJRT_RUNTIME_FAULT_INJECTION_H_
#define PJRT_RUNTIME_FAULT_INJECTION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pjrt::runtime {

inline constexpr char kFaultInjectionEnv[] = "PJRT_FAULT_INJECTION";

struct FaultInjectionConfig {
  double allocation = 0;
  double kernel = 0;
  uint64_t seed = 1;
};

// Parses the variable's value; INVALID_ARGUMENT naming the bad part.
absl::StatusOr<FaultInjectionConfig> ParseFaultInjection(
    absl::string_view spec);

// What the environment asks for, read once: all probabilities 0 when the
// variable is unset. A value that does not parse injects nothing, and
// FaultInjectionStatus() says why.
const FaultInjectionConfig& FaultInjection();
absl::Status FaultInjectionStatus();

// The injection points: RESOURCE_EXHAUSTED for an allocation of `bytes`,
// INTERNAL for a kernel run, each with the given probability; OK otherwise.
absl::Status MaybeInjectAllocationFailure(int64_t bytes);
absl::Status MaybeInjectKernelFailure();

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_FAULT_INJECTION_H_
