#include "runtime/fault_injection.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pjrt::runtime {
namespace {

struct Parsed {
  FaultInjectionConfig config;
  absl::Status status;
};

const Parsed& FromEnvironment() {
  static const Parsed* parsed = [] {
    auto* p = new Parsed;
    const char* value = std::getenv(kFaultInjectionEnv);
    if (value == nullptr || *value == '\0') return p;
    auto config = ParseFaultInjection(value);
    if (config.ok()) {
      p->config = *config;
    } else {
      p->status = config.status();
    }
    return p;
  }();
  return *parsed;
}

// One draw in [0, 1): a counter through SplitMix64, so draws are independent
// of which thread asks.
double Draw() {
  static std::atomic<uint64_t> counter{0};
  uint64_t z =
      FromEnvironment().config.seed * 0x9e3779b97f4a7c15ULL +
      counter.fetch_add(1, std::memory_order_relaxed) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace

absl::StatusOr<FaultInjectionConfig> ParseFaultInjection(
    absl::string_view spec) {
  FaultInjectionConfig config;
  for (absl::string_view part :
       absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, '=');
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (key == "seed") {
      if (!absl::SimpleAtoi(value, &config.seed)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: seed '%s' is not an unsigned integer",
                            kFaultInjectionEnv, value));
      }
      continue;
    }
    double p;
    if (!absl::SimpleAtod(value, &p) || !(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: '%s' needs a probability in [0, 1], not '%s'",
                          kFaultInjectionEnv, key, value));
    }
    if (key == "allocation") {
      config.allocation = p;
    } else if (key == "kernel") {
      config.kernel = p;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown key '%s' (allocation, kernel and seed are known)",
          kFaultInjectionEnv, key));
    }
  }
  return config;
}

const FaultInjectionConfig& FaultInjection() {
  return FromEnvironment().config;
}

absl::Status FaultInjectionStatus() { return FromEnvironment().status; }

absl::Status MaybeInjectAllocationFailure(int64_t bytes) {
  const double p = FaultInjection().allocation;
  if (p > 0 && Draw() < p) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "injected failure of an allocation of %d bytes (%s is set)", bytes,
        kFaultInjectionEnv));
  }
  return absl::OkStatus();
}

absl::Status MaybeInjectKernelFailure() {
  const double p = FaultInjection().kernel;
  if (p > 0 && Draw() < p) {
    return absl::InternalError(absl::StrFormat(
        "injected failure of a kernel run (%s is set)", kFaultInjectionEnv));
  }
  return absl::OkStatus();
}

}  // namespace pjrt::runtime
