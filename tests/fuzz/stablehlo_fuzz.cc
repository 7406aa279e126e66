// Fuzz target: the StableHLO frontend (MLIR reader, translation to HLO, the
// HLO parser and the verifier behind it). Any text is either a verified
// module or an INVALID_ARGUMENT / UNIMPLEMENTED that points into the text;
// never a crash, a hang or an allocation sized by a number in the text.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "hlo/stablehlo.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > pjrt::fuzz::kMaxProgramBytes) return -1;
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto module = pjrt::hlo::ParseAndVerifyProgram(
      text, pjrt::hlo::ProgramFormat::kStableHlo);
  if (!module.ok()) pjrt::fuzz::CheckErrorStatus(module.status());
  return 0;
}
