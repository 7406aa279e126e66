// Fuzz target: the daemon's TOML configuration (--config) and tenants file
// (--tenants). Any text is accepted or refused with an INVALID_ARGUMENT that
// names what is wrong; the first byte picks which of the two reads it.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "daemon/options.h"
#include "daemon/tenants.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > pjrt::fuzz::kMaxProgramBytes) return -1;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto tenants = pjrt::daemon::ParseTenants(text, "tenants.toml");
    if (!tenants.ok()) pjrt::fuzz::CheckErrorStatus(tenants.status());
    return 0;
  }
  pjrt::daemon::DaemonOptions options;
  absl::Status status =
      pjrt::daemon::ApplyConfigText(text, "pjrtd.toml", &options);
  if (status.ok()) status = pjrt::daemon::ValidateOptions(options);
  if (!status.ok()) pjrt::fuzz::CheckErrorStatus(status);
  return 0;
}
