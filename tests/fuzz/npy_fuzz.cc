// Fuzz target: .npy parsing (pjrtctl run's inputs). A file is an array whose
// data is exactly as long as its shape says, or an INVALID_ARGUMENT.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "cli/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto array = pjrt::cli::ParseNpy(bytes, "input.npy");
  if (!array.ok()) {
    pjrt::fuzz::CheckErrorStatus(array.status());
    return 0;
  }
  // What was read fits in what was given.
  if (array->data.size() > size) std::abort();
  return 0;
}
