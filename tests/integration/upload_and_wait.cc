// Test helper: connects to pjrtd, opens a session, uploads BYTES bytes, prints
// "uploaded", and then waits until killed. Used to check that the daemon
// frees the memory of a client that vanishes.
//
//   upload_and_wait ADDRESS BYTES [attach|lease]
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/cpp/pjrt_client/client.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: upload_and_wait ADDRESS BYTES [attach|lease]\n";
    return 2;
  }
  const bool attach = argc < 4 || std::string(argv[3]) == "attach";
  auto client = pjrt_client::Client::Connect({.address = argv[1]});
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  auto session = (*client)->OpenSession({.client_name = "upload_and_wait",
                                         .attach = attach,
                                         .lease = absl::Seconds(1)});
  if (!session.ok()) {
    std::cerr << session.status() << "\n";
    return 1;
  }
  int64_t bytes = std::atoll(argv[2]);
  std::vector<uint8_t> data(static_cast<size_t>(bytes), 7);
  auto buffer = (*session)->Upload(pjrt_client::DType::kU8, {bytes}, data, 0);
  if (!buffer.ok()) {
    std::cerr << buffer.status() << "\n";
    return 1;
  }
  std::cout << "uploaded" << std::endl;
  pause();
  return 0;
}
