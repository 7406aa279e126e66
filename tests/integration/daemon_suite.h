// The fixture of an integration suite with a pjrtd of its own: started once
// for the suite in a temporary directory (listening on a unix socket there
// and on a TCP port), checked healthy after every test, stopped after the
// suite and checked to exit cleanly. The test parameter picks the
// transport: 0 the unix socket, 1 TCP.
#ifndef PJRT_TESTS_INTEGRATION_DAEMON_SUITE_H_
#define PJRT_TESTS_INTEGRATION_DAEMON_SUITE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/integration/process.h"

namespace pjrt::testing {

// `Suite` is the deriving fixture: each suite has its own daemon.
template <typename Suite>
class DaemonSuite : public ::testing::TestWithParam<int> {
 protected:
  // The suite's temporary directory (made on first use).
  static const std::string& SuiteDir() {
    if (dir_ == nullptr) dir_ = new TempDir;
    return dir_->path();
  }

  // Starts the daemon with `args` and the two listeners.
  static void StartDaemon(std::vector<std::string> args) {
    args.insert(args.end(), {"--listen", "unix://" + SuiteDir() + "/pjrtd.sock",
                             "--listen", "127.0.0.1:0"});
    auto daemon = DaemonProcess::Start(PJRTD_PATH, args, SuiteDir());
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }

  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      auto code = daemon_->Stop();
      EXPECT_TRUE(code.ok() && *code == 0)
          << "pjrtd did not exit cleanly: " << code.status() << "\n"
          << daemon_->Log();
      delete daemon_;
      daemon_ = nullptr;
    }
    delete dir_;
    dir_ = nullptr;
  }

  // The daemon's address for this test's transport.
  const std::string& address() const {
    return daemon_->addresses()[GetParam()];
  }

  // The daemon still answers its health check with SERVING.
  void ExpectHealthy() {
    auto channel =
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = stub->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }

  static inline TempDir* dir_ = nullptr;
  static inline DaemonProcess* daemon_ = nullptr;
};

// "Unix" and "Tcp" as the parameter's name in test names.
inline std::string TransportName(const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? "Unix" : "Tcp";
}

}  // namespace pjrt::testing

#endif  // PJRT_TESTS_INTEGRATION_DAEMON_SUITE_H_
