// Integration test of a cluster of two pjrtd tasks driven from one C++
// client: a whole-cluster session uploads to either task's devices, runs a
// program whose collective spans both tasks with one ExecuteReplicated,
// and reads every result back through its own daemon.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/pjrt_client/client.h"
#include "gtest/gtest.h"
#include "tests/integration/process.h"

namespace pjrt::testing {
namespace {

constexpr char kSum[] = R"(
HloModule cluster_sum, replica_count=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  ROOT y = f32[3] all-reduce(x), replica_groups={}, to_apply=add
})";

// Ports the kernel just handed out (and took back) on 127.0.0.1, for the
// peers' addresses.
std::vector<int> FreePorts(int n) {
  std::vector<int> sockets, ports;
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    bind(fd, reinterpret_cast<sockaddr*>(&address), size);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    ports.push_back(ntohs(address.sin_port));
    sockets.push_back(fd);
  }
  for (int fd : sockets) close(fd);
  return ports;
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string secret = dir_->path() + "/secret";
    std::ofstream(secret) << "cluster-test-secret-0123456789\n";
    std::filesystem::permissions(secret,
                                 std::filesystem::perms::owner_read |
                                     std::filesystem::perms::owner_write);
    const std::vector<int> ports = FreePorts(2);
    const std::string cluster =
        absl::StrCat("127.0.0.1:", ports[0], ",127.0.0.1:", ports[1]);
    // Each task's start waits for the other (the cluster forms first).
    std::unique_ptr<DaemonProcess> started[2];
    absl::Status statuses[2];
    std::vector<std::thread> starts;
    for (int task = 0; task < 2; ++task) {
      // A folder each: every task writes its own address file.
      const std::string work_dir = absl::StrCat(dir_->path(), "/task", task);
      std::filesystem::create_directory(work_dir);
      starts.emplace_back([&, task, work_dir] {
        auto daemon = DaemonProcess::Start(
            PJRTD_PATH,
            {"--platform", "host", "--host-devices", "2", "--listen",
             absl::StrCat("unix://", dir_->path(), "/task", task, ".sock"),
             "--task-id", absl::StrCat(task), "--cluster", cluster,
             "--cluster-secret-file", secret},
            work_dir);
        if (daemon.ok()) {
          started[task] = *std::move(daemon);
        } else {
          statuses[task] = daemon.status();
        }
      });
    }
    for (auto& t : starts) t.join();
    for (int task = 0; task < 2; ++task) {
      ASSERT_TRUE(statuses[task].ok())
          << "task " << task << ": " << statuses[task];
      daemons_[task] = started[task].release();
    }
  }

  static void TearDownTestSuite() {
    for (DaemonProcess*& daemon : daemons_) {
      if (daemon == nullptr) continue;
      auto code = daemon->Stop();
      EXPECT_TRUE(code.ok() && *code == 0) << daemon->Log();
      delete daemon;
      daemon = nullptr;
    }
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(daemons_[1], nullptr);
    auto client =
        pjrt_client::Client::Connect({.address = daemons_[0]->addresses()[0]});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
    auto session = client_->OpenSession(
        {.client_name = "cluster-test", .whole_cluster = true});
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }

  absl::StatusOr<pjrt_client::Buffer> Put(std::vector<float> values,
                                          int device) {
    return session_->Upload(pjrt_client::DType::kF32,
                            {static_cast<int64_t>(values.size())},
                            pjrt_client::AsBytes(values), device);
  }

  static TempDir* dir_;
  static DaemonProcess* daemons_[2];
  std::shared_ptr<pjrt_client::Client> client_;
  std::unique_ptr<pjrt_client::Session> session_;
};

TempDir* ClusterTest::dir_ = nullptr;
DaemonProcess* ClusterTest::daemons_[2] = {nullptr, nullptr};

TEST_F(ClusterTest, OneSessionPutsAndReadsOnEveryTasksDevices) {
  for (int device = 0; device < 4; ++device) {
    // Large enough that a session of one task would use shared memory.
    std::vector<float> values(1 << 20);
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = static_cast<float>(i % 977) * (device + 1);
    }
    auto buffer = Put(values, device);
    ASSERT_TRUE(buffer.ok()) << "device " << device << ": " << buffer.status();
    EXPECT_EQ(buffer->device_id(), device);
    auto bytes = buffer->Download();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(Floats(*bytes), values) << "device " << device;
  }
}

TEST_F(ClusterTest, OneExecuteReplicatedRunsOnBothTasks) {
  const pjrt_client::CompileOptions options{.num_replicas = 4,
                                            .num_partitions = 1,
                                            .device_assignment = {3, 0, 2, 1}};
  auto executable = session_->Compile(kSum, options);
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ(executable->addressable_device_ids(),
            std::vector<int>({3, 0, 2, 1}));
  std::vector<pjrt_client::Buffer> inputs;
  for (int d : {3, 0, 2, 1}) {
    auto buffer = Put({1.0f * d, 10.0f * d, 100.0f * d}, d);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    inputs.push_back(*std::move(buffer));
  }
  std::vector<std::vector<const pjrt_client::Buffer*>> arguments;
  for (const auto& b : inputs) arguments.push_back({&b});
  auto results = executable->ExecuteReplicated(arguments);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ((*results)[r][0].device_id(),
              executable->addressable_device_ids()[r]);
    auto bytes = (*results)[r][0].Download();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(Floats(*bytes), std::vector<float>({6, 60, 600}));
  }
}

}  // namespace
}  // namespace pjrt::testing
