// Fuzz target: cross-host transfer descriptors, which arrive from a client
// (CopyToRemoteDevice) and from peers. Bytes are a descriptor or an
// INVALID_ARGUMENT; a descriptor read back serializes to bytes that read
// back as the same descriptor.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "daemon/cross_host.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto descriptor = pjrt::daemon::ParseDescriptor(bytes);
  if (!descriptor.ok()) {
    pjrt::fuzz::CheckErrorStatus(descriptor.status());
    return 0;
  }
  auto again = pjrt::daemon::ParseDescriptor(
      pjrt::daemon::SerializeDescriptor(*descriptor));
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(
                         *descriptor, *again)) {
    std::abort();
  }
  return 0;
}
