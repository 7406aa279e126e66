// Uploads a vector, runs a program that doubles it, and prints the result:
// the C++ client as another project links it (find_package(pjrt_client)).
#include <cstdio>
#include <cstring>
#include <vector>

#include "pjrt_client/client.h"

namespace {

constexpr char kDouble[] = R"(HloModule double
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] add(x, x)
}
)";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "scale: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  pjrt_client::ConnectOptions options;
  if (argc > 1) options.address = argv[1];
  auto client = pjrt_client::Client::Connect(options);
  if (!client.ok()) return Fail(client.status());
  auto session = (*client)->OpenSession({.client_name = "scale"});
  if (!session.ok()) return Fail(session.status());
  const std::vector<float> x = {1, 2, 3, 4};
  auto buffer = (*session)->Upload(pjrt_client::DType::kF32, {4},
                                   pjrt_client::AsBytes(x), /*device_id=*/0);
  if (!buffer.ok()) return Fail(buffer.status());
  auto executable = (*session)->Compile(kDouble);
  if (!executable.ok()) return Fail(executable.status());
  auto results = executable->Execute({&*buffer}, /*device_id=*/0);
  if (!results.ok()) return Fail(results.status());
  auto bytes = (*results)[0].Download();
  if (!bytes.ok()) return Fail(bytes.status());
  std::vector<float> y(4);
  std::memcpy(y.data(), bytes->data(), bytes->size());
  std::printf("%g %g %g %g\n", y[0], y[1], y[2], y[3]);
  return 0;
}
