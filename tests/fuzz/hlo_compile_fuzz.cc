// Fuzz target: parse, verify, rewrite and compile a program for the host
// backend, as the daemon's Compile RPC does. Whatever the text, the result is
// an executable or an error status.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/client.h"
#include "runtime/executable.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

pjrt::runtime::Client& TheClient() {
  static pjrt::runtime::Client* client = [] {
    pjrt::runtime::ClientOptions options;
    options.platform = "host";
    options.host_device_count = 2;
    options.memory_limit_bytes = 64 << 20;
    auto made = pjrt::runtime::Client::Create(options);
    pjrt::fuzz::CheckOk(made.status(), "creating the host client");
    return made->release();
  }();
  return *client;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > pjrt::fuzz::kMaxProgramBytes) return -1;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto executable = pjrt::runtime::Executable::Compile(&TheClient(), text, {});
  if (!executable.ok()) pjrt::fuzz::CheckErrorStatus(executable.status());
  return 0;
}
