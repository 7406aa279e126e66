#include "daemon/options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

TEST(ApplyConfigText, ReadsEveryKey) {
  DaemonOptions options;
  absl::Status status = ApplyConfigText(R"(
listen = ["unix:///tmp/a.sock", "127.0.0.1:7070"]
platform = "host"
host_devices = 4
memory_limit = "2GiB"
allocation_model = "asynchronous"
queue_ahead = 7
log_level = "debug"
compile_cache_dir = "/tmp/pjrtd-kernels"
default_lease_seconds = 30
max_lease_seconds = 600
shutdown_timeout_seconds = 5
)",
                                        "test.toml", &options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(options.listen,
            std::vector<std::string>({"unix:///tmp/a.sock", "127.0.0.1:7070"}));
  EXPECT_EQ(options.platform, "host");
  EXPECT_EQ(options.host_devices, 4);
  EXPECT_EQ(options.memory_limit_bytes, int64_t{2} << 30);
  EXPECT_EQ(options.allocation_model, "asynchronous");
  EXPECT_EQ(options.queue_ahead, 7);
  EXPECT_EQ(options.log_level, "debug");
  EXPECT_EQ(options.compile_cache_dir, "/tmp/pjrtd-kernels");
  EXPECT_EQ(options.default_lease, absl::Seconds(30));
  EXPECT_EQ(options.max_lease, absl::Seconds(600));
  EXPECT_EQ(options.shutdown_timeout, absl::Seconds(5));
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ApplyConfigText, CompileCacheDirDefaultsToTheCacheDirectoryAndMayBeOff) {
  DaemonOptions options;
  EXPECT_EQ(options.compile_cache_dir, "/var/cache/pjrtd");
  ASSERT_TRUE(
      ApplyConfigText("compile_cache_dir = \"\"\n", "t.toml", &options).ok());
  EXPECT_EQ(options.compile_cache_dir, "");
  absl::Status bad =
      ApplyConfigText("compile_cache_dir = 3\n", "t.toml", &options);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("compile_cache_dir"), absl::string_view::npos)
      << bad;
}

TEST(ApplyConfigText, ReadsEveryLimit) {
  DaemonOptions options;
  absl::Status status = ApplyConfigText(R"(
max_sessions = 5
max_handles_per_session = 1000
max_waiting_calls_per_session = 3
max_regions_per_session = 4
max_regions = 40
max_region_bytes_per_session = "1GiB"
max_region_bytes = "4GiB"
max_region_connections_per_peer = 2
max_region_connections_per_user = 3
max_region_connections = 20
max_program_bytes = "1MiB"
compile_cache_entries = 8
compile_cache_bytes = "64MiB"
max_collective_timeout_seconds = 60
max_receive_timeout_seconds = 600
)",
                                        "test.toml", &options);
  ASSERT_TRUE(status.ok()) << status;
  const DaemonLimits& l = options.limits;
  EXPECT_EQ(l.max_sessions, 5);
  EXPECT_EQ(l.max_handles_per_session, 1000);
  EXPECT_EQ(l.max_waiting_calls_per_session, 3);
  EXPECT_EQ(l.max_regions_per_session, 4);
  EXPECT_EQ(l.max_regions, 40);
  EXPECT_EQ(l.max_region_bytes_per_session, int64_t{1} << 30);
  EXPECT_EQ(l.max_region_bytes, int64_t{4} << 30);
  EXPECT_EQ(l.max_region_connections_per_peer, 2);
  EXPECT_EQ(l.max_region_connections_per_user, 3);
  EXPECT_EQ(l.max_region_connections, 20);
  EXPECT_EQ(l.max_program_bytes, 1 << 20);
  EXPECT_EQ(l.compile_cache_entries, 8);
  EXPECT_EQ(l.compile_cache_bytes, 64 << 20);
  EXPECT_EQ(l.max_collective_timeout, absl::Seconds(60));
  EXPECT_EQ(l.max_receive_timeout, absl::Seconds(600));
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ApplyConfigText, OutOfRangeNumbersAreRefusedNotTruncated) {
  for (const char* text :
       {"host_devices = 4294967297", "host_devices = 0", "queue_ahead = -1",
        "max_sessions = 0", "task_id = 4294967296",
        "shutdown_timeout_seconds = nan", "receive_timeout_seconds = inf",
        "max_collective_timeout_seconds = -1"}) {
    DaemonOptions options;
    absl::Status status = ApplyConfigText(text, "t.toml", &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
  }
  DaemonOptions options;
  ASSERT_TRUE(
      ApplyConfigText("max_receive_timeout_seconds = 10", "t", &options).ok());
  // The default receive timeout (300 s) may not exceed the maximum.
  EXPECT_EQ(ValidateOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ApplyConfigText, AFloatIsNoIntegerNorAByteCount) {
  // A float where an integer belongs was once truncated, and one beyond
  // int64 converted with undefined behaviour (found by config_fuzz).
  for (const char* text : {"host_devices = 2.5", "host_devices = 4.2e73",
                           "memory_limit = 1e300"}) {
    DaemonOptions options;
    absl::Status status = ApplyConfigText(text, "pjrtd.toml", &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ApplyConfigText, MemoryLimitMayBeAnInteger) {
  DaemonOptions options;
  ASSERT_TRUE(ApplyConfigText("memory_limit = 1000", "t", &options).ok());
  EXPECT_EQ(options.memory_limit_bytes, 1000);
}

TEST(ApplyConfigText, UnknownKeyIsNamed) {
  DaemonOptions options;
  absl::Status status =
      ApplyConfigText("hosts_devices = 3", "t.toml", &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("hosts_devices"), absl::string_view::npos);
}

TEST(ApplyConfigText, WrongTypeIsNamed) {
  DaemonOptions options;
  absl::Status status =
      ApplyConfigText("host_devices = \"four\"", "t", &options);
  EXPECT_NE(status.message().find("host_devices"), absl::string_view::npos);
}

TEST(ApplyConfigText, SyntaxErrorHasLineAndColumn) {
  DaemonOptions options;
  absl::Status status = ApplyConfigText("platform = \n", "cfg.toml", &options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cfg.toml:1:"), absl::string_view::npos)
      << status;
}

TEST(ValidateOptions, RejectsUnknownAllocationModel) {
  DaemonOptions options;
  options.allocation_model = "whenever";
  absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("whenever"), absl::string_view::npos);
}

TEST(ValidateOptions, RejectsUnknownPlatformAndLogLevel) {
  DaemonOptions options;
  options.platform = "tpu";
  EXPECT_NE(ValidateOptions(options).message().find("tpu"),
            absl::string_view::npos);
  options = DaemonOptions();
  options.log_level = "loud";
  EXPECT_NE(ValidateOptions(options).message().find("loud"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace pjrt::daemon

namespace pjrt::daemon {
namespace {

TEST(ApplyConfigText, TheExampleConfigInDeployIsValid) {
  std::ifstream file(std::string(PJRT_SOURCE_DIR) + "/deploy/pjrtd.toml");
  std::stringstream text;
  text << file.rdbuf();
  ASSERT_FALSE(text.str().empty());
  DaemonOptions options;
  absl::Status status = ApplyConfigText(text.str(), "pjrtd.toml", &options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(ValidateOptions(options).ok());
  EXPECT_EQ(options.listen,
            std::vector<std::string>({"unix:///run/pjrtd/pjrtd.sock"}));
}

}  // namespace
}  // namespace pjrt::daemon

namespace pjrt::daemon {
namespace {

TEST(ClusterOptions, ConfigKeysAreRead) {
  DaemonOptions options;
  absl::Status status = ApplyConfigText(R"(
task_id = 1
cluster = ["10.0.0.1:7100", "10.0.0.2:7100"]
cluster_secret_file = "/etc/pjrtd/cluster.secret"
cluster_timeout_seconds = 12
receive_timeout_seconds = 3.5
)",
                                        "t.toml", &options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(options.task_id, 1);
  EXPECT_EQ(options.cluster,
            std::vector<std::string>({"10.0.0.1:7100", "10.0.0.2:7100"}));
  EXPECT_EQ(options.cluster_secret_file, "/etc/pjrtd/cluster.secret");
  EXPECT_EQ(options.cluster_timeout, absl::Seconds(12));
  EXPECT_EQ(options.receive_timeout, absl::Seconds(3.5));
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ClusterOptions, BadMembershipIsNamed) {
  const auto message = [](DaemonOptions options) {
    return std::string(ValidateOptions(options).message());
  };
  DaemonOptions options;
  options.cluster = {"a:1", "b:2"};
  options.cluster_secret_file = "s";
  options.task_id = 2;
  EXPECT_NE(message(options).find("task id 2 is outside the cluster of 2"),
            std::string::npos);
  options.task_id = 0;
  options.cluster_secret_file.clear();
  EXPECT_NE(message(options).find("needs --cluster-secret-file"),
            std::string::npos);
  options.cluster_secret_file = "s";
  options.cluster = {"a:1", "a:1"};
  EXPECT_NE(message(options).find("given for both task 0 and task 1"),
            std::string::npos);
  options.cluster = {"a:1", "b"};
  EXPECT_NE(message(options).find("cluster address 1 'b' is not host:port"),
            std::string::npos);
  options.cluster = {"a:1", "b:2"};
  options.listen = {"a:1"};
  EXPECT_NE(message(options).find("peers and clients need different ports"),
            std::string::npos);
  // A cluster of one needs no secret.
  options = DaemonOptions();
  options.cluster = {"a:1"};
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ClusterSecret, MustBePrivateAndLongEnough) {
  char dir[] = "/tmp/pjrt-secret-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/secret";
  { std::ofstream(path) << "0123456789abcdef-secret\n"; }
  chmod(path.c_str(), 0600);
  auto secret = ReadClusterSecret(path);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, "0123456789abcdef-secret");  // trailing newline dropped
  chmod(path.c_str(), 0644);
  EXPECT_NE(
      ReadClusterSecret(path).status().message().find("readable by others"),
      absl::string_view::npos);
  { std::ofstream(path) << "short\n"; }
  chmod(path.c_str(), 0600);
  EXPECT_NE(ReadClusterSecret(path).status().message().find("at least 16"),
            absl::string_view::npos);
  EXPECT_EQ(ReadClusterSecret(path + ".missing").status().code(),
            absl::StatusCode::kInvalidArgument);
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace pjrt::daemon

namespace pjrt::daemon {
namespace {

TEST(SharedMemoryOption, OnByDefaultAndTurnedOffByConfigOrFlag) {
  EXPECT_TRUE(DaemonOptions().shared_memory);
  DaemonOptions options;
  ASSERT_TRUE(
      ApplyConfigText("shared_memory = false", "t.toml", &options).ok());
  EXPECT_FALSE(options.shared_memory);
  absl::Status wrong = ApplyConfigText("shared_memory = 1", "t.toml", &options);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("shared_memory"), absl::string_view::npos);
  EXPECT_NE(wrong.message().find("true or false"), absl::string_view::npos);

  std::vector<std::string> args = {"pjrtd", "--no-shared-memory"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ParsedCommandLine parsed =
      ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_FALSE(parsed.exit_code.has_value());
  EXPECT_FALSE(parsed.options.shared_memory);
}

TEST(DataChannelsOption, OnByDefaultAndTurnedOffByConfigOrFlag) {
  EXPECT_TRUE(DaemonOptions().data_channels);
  DaemonOptions options;
  ASSERT_TRUE(ApplyConfigText("data_channels = false\n"
                              "max_data_channels_per_session = 3\n"
                              "max_data_channels = 100",
                              "t.toml", &options)
                  .ok());
  EXPECT_FALSE(options.data_channels);
  EXPECT_EQ(options.limits.max_data_channels_per_session, 3);
  EXPECT_EQ(options.limits.max_data_channels, 100);
  absl::Status wrong = ApplyConfigText("data_channels = 1", "t.toml", &options);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("data_channels"), absl::string_view::npos);
  absl::Status too_many = ApplyConfigText(
      "max_data_channels_per_session = 5000", "t.toml", &options);
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.message().find("max_data_channels_per_session"),
            absl::string_view::npos);

  std::vector<std::string> args = {"pjrtd", "--no-data-channels"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ParsedCommandLine parsed =
      ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_FALSE(parsed.exit_code.has_value());
  EXPECT_FALSE(parsed.options.data_channels);
}

TEST(CompileCacheDirOption, TheFlagSetsOrClearsIt) {
  for (const auto& [flag, want] :
       std::vector<std::pair<std::string, std::string>>{{"/tmp/k", "/tmp/k"},
                                                        {"", ""}}) {
    std::vector<std::string> args = {"pjrtd", "--compile-cache-dir", flag};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    ParsedCommandLine parsed =
        ParseCommandLine(static_cast<int>(argv.size()), argv.data());
    ASSERT_FALSE(parsed.exit_code.has_value()) << flag;
    EXPECT_EQ(parsed.options.compile_cache_dir, want) << flag;
  }
}

TEST(TaskIdFromHostname, ReadsAStatefulSetsOrdinal) {
  EXPECT_EQ(*TaskIdFromHostname("pjrtd-0"), 0);
  EXPECT_EQ(*TaskIdFromHostname("pjrtd-12"), 12);
  EXPECT_EQ(*TaskIdFromHostname("gpu-pool-pjrtd-3"), 3);
  EXPECT_EQ(*TaskIdFromHostname("pjrtd-2.pjrtd.ml.svc.cluster.local"), 2);
}

TEST(TaskIdFromHostname, NamesAHostNameWithoutOne) {
  for (const char* name : {"pjrtd", "pjrtd-", "pjrtd-x1", "pjrtd-+1",
                           "pjrtd-99999999999", "pjrtd-65536", "host.a-1"}) {
    auto id = TaskIdFromHostname(name);
    ASSERT_FALSE(id.ok()) << name;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()),
                ::testing::HasSubstr(absl::StrCat("\"", name, "\"")));
  }
}

}  // namespace
}  // namespace pjrt::daemon

namespace pjrt::daemon {
namespace {

absl::Status ValidListen(std::vector<std::string> listen) {
  DaemonOptions options;
  options.listen = std::move(listen);
  return ValidateOptions(options);
}

TEST(ValidateOptions, ListenAddressesAreCheckedNotWrappedOrShared) {
  EXPECT_TRUE(ValidListen({"127.0.0.1:0", "[::1]:7070"}).ok());
  EXPECT_TRUE(ValidListen({"unix:///tmp/pjrtd.sock"}).ok());
  // A port past 65535 was served mod 65536.
  absl::Status port = ValidListen({"127.0.0.1:99999"});
  EXPECT_EQ(port.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(port.message().find("port 99999"), absl::string_view::npos);
  // gRPC reads unix://x.sock as /x.sock.
  absl::Status relative = ValidListen({"unix://x.sock"});
  EXPECT_NE(relative.message().find("needs an absolute path"),
            absl::string_view::npos);
  absl::Status twice =
      ValidListen({"unix:///tmp/pjrtd.sock", "unix:///tmp/pjrtd.sock"});
  EXPECT_NE(twice.message().find("given twice"), absl::string_view::npos);
  // "unix:" is an abstract socket to gRPC, a relative path puts the side
  // sockets in the working folder.
  for (const char* bad : {"unix:", "unix:x.sock", "unix:///"}) {
    EXPECT_NE(ValidListen({bad}).message().find("needs an absolute path"),
              absl::string_view::npos)
        << bad;
  }
  EXPECT_TRUE(ValidListen({"unix:/tmp/pjrtd.sock"}).ok());
  // gRPC took a missing port for 443, a host alone for a name.
  for (const char* bad :
       {"garbage", "127.0.0.1", "127.0.0.1:", ":7070", "127.0.0.1:70x",
        "::1:7070", "[::1]7070", "127.0.0.1:+7"}) {
    absl::Status s = ValidListen({bad});
    EXPECT_NE(s.message().find("is neither unix:///path/name.sock nor "
                               "host:port"),
              absl::string_view::npos)
        << bad << ": " << s;
  }
  EXPECT_TRUE(ValidListen({"localhost:7070", "[::1]:0"}).ok());
}

TEST(ParseCommandLine, TimeoutsMustBePositiveAndFinite) {
  for (const char* value : {"nan", "inf", "0", "-1"}) {
    std::vector<std::string> args = {"pjrtd", "--listen",
                                     "unix:///tmp/pjrtd.sock",
                                     "--receive-timeout", value};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    ParsedCommandLine parsed =
        ParseCommandLine(static_cast<int>(argv.size()), argv.data());
    EXPECT_TRUE(parsed.exit_code.has_value()) << value;
  }
}

}  // namespace
}  // namespace pjrt::daemon
