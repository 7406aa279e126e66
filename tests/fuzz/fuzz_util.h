// What every fuzz target checks of an error: that it is one a bad input may
// cause, and that it says something. A crash, a sanitizer report, an INTERNAL
// or UNKNOWN status, or an empty message is a finding: the target aborts.
#ifndef PJRT_TESTS_FUZZ_FUZZ_UTIL_H_
#define PJRT_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pjrt::fuzz {

// Larger inputs are rejected (-1: not added to the corpus); every program
// the tests and the reference corpus hold is smaller.
inline constexpr size_t kMaxProgramBytes = 256 << 10;

[[noreturn]] inline void Fail(absl::string_view what,
                              absl::string_view detail) {
  std::fprintf(stderr, "fuzz finding: %.*s: %.*s\n",
               static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void CheckOk(const absl::Status& status, absl::string_view what) {
  if (!status.ok()) Fail(what, status.ToString());
}

// An error status caused by the input: not OK, not a bug's code, and with a
// message.
inline void CheckErrorStatus(const absl::Status& status) {
  if (status.ok()) Fail("expected an error", "the status is OK");
  if (status.code() == absl::StatusCode::kInternal ||
      status.code() == absl::StatusCode::kUnknown ||
      status.code() == absl::StatusCode::kDataLoss) {
    Fail("an internal error for bad input", status.ToString());
  }
  if (status.message().empty())
    Fail("an error without a message", status.ToString());
}

}  // namespace pjrt::fuzz

#endif  // PJRT_TESTS_FUZZ_FUZZ_UTIL_H_
