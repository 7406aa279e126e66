// What the in-process C++ benchmarks share: a median timer, fail-fast status
// checks, one JSON metric row, and the programs more than one of them runs.
// Header-only: each benchmark is one executable.
#ifndef PJRT_BENCH_BENCH_UTIL_H_
#define PJRT_BENCH_BENCH_UTIL_H_

#include <errno.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"

namespace pjrt::bench {

// Median of `runs` timings of `fn`, in seconds, after one warm-up call.
inline double MedianSeconds(int runs, const std::function<void()>& fn) {
  using Clock = std::chrono::steady_clock;
  fn();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Ends the benchmark with `s` on stderr unless it is OK: a benchmark that
// cannot set up has nothing to report.
inline void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::cerr << program_invocation_short_name << ": " << s << "\n";
    std::exit(1);
  }
}
template <typename T>
T Check(absl::StatusOr<T> v) {
  Check(v.status());
  return *std::move(v);
}

// Eight element-wise ops over f32[n] that the compilers fuse into one pass:
// the fused chain's bandwidth against a plain copy of the same bytes.
inline std::string ChainProgram(int64_t n) {
  return absl::StrReplaceAll(R"(
HloModule chain
ENTRY e {
  x = f32[$n] parameter(0)
  two = f32[] constant(2)
  one = f32[] constant(1)
  hundred = f32[] constant(100)
  zero = f32[] constant(0)
  b2 = f32[$n] broadcast(two), dimensions={}
  b1 = f32[$n] broadcast(one), dimensions={}
  b100 = f32[$n] broadcast(hundred), dimensions={}
  b0 = f32[$n] broadcast(zero), dimensions={}
  m = f32[$n] multiply(x, b2)
  a = f32[$n] add(m, b1)
  r = f32[$n] maximum(a, b0)
  s = f32[$n] subtract(r, x)
  q = f32[$n] multiply(s, s)
  c = f32[$n] minimum(q, b100)
  g = f32[$n] negate(c)
  ROOT h = f32[$n] abs(g)
})",
                             {{"$n", std::to_string(n)}});
}

}  // namespace pjrt::bench

#endif  // PJRT_BENCH_BENCH_UTIL_H_
