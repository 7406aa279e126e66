// The programs of verifier_test.cc: for every error the verifier can give,
// the smallest program that provokes it, with its status code and the words
// that say what is wrong.
#ifndef PJRT_TESTS_UNIT_VERIFIER_CASES_H_
#define PJRT_TESTS_UNIT_VERIFIER_CASES_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pjrt::hlo::verifier_cases {

// A program that parses and that the verifier refuses with `code`, and text
// its message must contain.
struct Case {
  const char* name;
  std::string hlo;
  absl::StatusCode code;
  const char* message;
};

// Test names print as the case's name.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Every case, in the order of the verifier's checks.
const std::vector<Case>& Cases();

}  // namespace pjrt::hlo::verifier_cases

#endif  // PJRT_TESTS_UNIT_VERIFIER_CASES_H_
