// A bare gRPC server for the client benchmarks' baseline: every method of
// every service answers a unary call with the request's own bytes, on
// gRPC's callback API, with no session, lookup or authentication.
//
//   echo_server ADDRESS_FILE
//
// Listens on 127.0.0.1 at a port the kernel picks and writes
// "127.0.0.1:PORT" to ADDRESS_FILE once it serves; runs until killed.

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace {

class Echo : public grpc::ServerGenericBidiReactor {
 public:
  Echo() { StartRead(&message_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&message_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    StartRead(&message_);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer message_;
};

class EchoService : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    return new Echo();
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: echo_server ADDRESS_FILE\n");
    return 2;
  }
  EchoService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "echo_server: cannot listen on 127.0.0.1\n");
    return 1;
  }
  const std::string path = argv[1];
  {
    std::ofstream out(path + ".tmp");
    out << "127.0.0.1:" << port << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
  server->Wait();
  return 0;
}
