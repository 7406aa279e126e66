// HLO text programs that more than one test builds.
#ifndef PJRT_TESTS_UNIT_HLO_TEST_PROGRAMS_H_
#define PJRT_TESTS_UNIT_HLO_TEST_PROGRAMS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pjrt::testing {

// `computations` computations below the entry, c0 to c{computations - 1},
// each calling the next: a call graph `computations` deep.
inline std::string CallChain(int computations) {
  std::string text = absl::StrFormat(
      "HloModule chain\nc%d {\n  ROOT p = f32[] parameter(0)\n}\n",
      computations - 1);
  for (int i = computations - 2; i >= 0; --i) {
    absl::StrAppendFormat(&text,
                          "c%d {\n  p = f32[] parameter(0)\n"
                          "  ROOT r = f32[] call(p), to_apply=c%d\n}\n",
                          i, i + 1);
  }
  absl::StrAppend(&text,
                  "ENTRY e {\n  p = f32[] parameter(0)\n"
                  "  ROOT r = f32[] call(p), to_apply=c0\n}\n");
  return text;
}

// `levels` computations below the entry, each calling the next twice: about
// 3 * 2^levels instructions once inlined.
inline std::string CallTree(int levels) {
  std::string text = absl::StrFormat(
      "HloModule tree\nc%d {\n  ROOT p = f32[] parameter(0)\n}\n", levels);
  for (int i = levels - 1; i >= 0; --i) {
    absl::StrAppendFormat(&text,
                          "c%d {\n  p = f32[] parameter(0)\n"
                          "  a = f32[] call(p), to_apply=c%d\n"
                          "  ROOT b = f32[] call(a), to_apply=c%d\n}\n",
                          i, i + 1, i + 1);
  }
  absl::StrAppend(&text,
                  "ENTRY e {\n  p = f32[] parameter(0)\n"
                  "  ROOT r = f32[] call(p), to_apply=c0\n}\n");
  return text;
}

}  // namespace pjrt::testing

#endif  // PJRT_TESTS_UNIT_HLO_TEST_PROGRAMS_H_
