// The repository's test HLO programs (every .hlo under tests/data), for the
// tests that run each of them through a compiler.
#ifndef PJRT_TESTS_UNIT_TEST_PROGRAMS_H_
#define PJRT_TESTS_UNIT_TEST_PROGRAMS_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/stablehlo.h"
#include "hlo/verifier.h"

namespace pjrt::testing {

// Every program under tests/data (.hlo, and StableHLO .mlir), sorted.
inline std::vector<std::string> TestPrograms() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           absl::StrCat(PJRT_SOURCE_DIR, "/tests/data"))) {
    // StableHLO's interpreter tests are test files, not programs
    // (tests/python/test_stablehlo.py makes programs of them).
    if (e.path().parent_path().filename() == "interpret") continue;
    if (e.path().extension() == ".hlo" || e.path().extension() == ".mlir") {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The program in `path`, parsed, verified and simplified as the runtime
// does before any backend sees it; null for a text no backend takes (the
// parser's corpus holds such programs).
inline std::unique_ptr<hlo::Module> LoadTestProgram(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  auto module =
      hlo::ParseAndVerifyProgram(text.str(), hlo::ProgramFormat::kAuto);
  if (!module.ok() || !hlo::SimplifyModule(module->get()).ok()) {
    return nullptr;
  }
  return *std::move(module);
}

}  // namespace pjrt::testing

#endif  // PJRT_TESTS_UNIT_TEST_PROGRAMS_H_
