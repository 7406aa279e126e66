#include "tests/integration/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace pjrt::testing {
namespace {

std::vector<char*> Argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// Waits for `pid` up to `timeout`; -1 and pid untouched on timeout.
absl::StatusOr<int> WaitPid(pid_t pid, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::Duration step = absl::Milliseconds(1);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return -WTERMSIG(status);
      return -1;
    }
    if (r < 0) return absl::InternalError(std::strerror(errno));
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("process %d still running after %s", pid,
                          absl::FormatDuration(timeout)));
    }
    // Polling a child's exit: there is no fd to wait on without a pidfd.
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(step));
    step = std::min(step * 2, absl::Milliseconds(20));
  }
}

}  // namespace

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrFormat("%s/pjrt.XXXXXX", base != nullptr ? base : "/tmp");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) std::abort();
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout) {
  TempDir dir;
  std::string out_path = dir.path() + "/out", err_path = dir.path() + "/err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  CommandResult result;
  auto args = Argv(argv);
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err =
        absl::StrFormat("cannot run %s: %s", argv[0], std::strerror(rc));
    return result;
  }
  auto code = WaitPid(pid, timeout);
  if (!code.ok()) {
    kill(pid, SIGKILL);
    WaitPid(pid, absl::Seconds(10)).IgnoreError();
    result.err = std::string(code.status().message());
  } else {
    result.exit_code = *code;
  }
  result.out = ReadFile(out_path);
  result.err += ReadFile(err_path);
  return result;
}

absl::StatusOr<ChildProcess> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& stderr_path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  pid_t pid;
  auto args = Argv(argv);
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(
        absl::StrFormat("cannot run %s: %s", argv[0], std::strerror(rc)));
  }
  return ChildProcess(pid, fds[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      stdout_fd_(other.stdout_fd_),
      pending_(std::move(other.pending_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitPid(pid_, absl::Seconds(10)).IgnoreError();
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::ReadLine(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("no line from child in time");
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return absl::UnavailableError("child closed its stdout");
    pending_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::Kill(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  auto code = WaitPid(pid_, timeout);
  if (code.ok()) pid_ = -1;
  return code;
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::string& pjrtd_path, std::vector<std::string> args,
    const std::string& work_dir) {
  // Daemons may be started from several threads at once.
  static std::atomic<int> counter{0};
  const int n = ++counter;
  std::string address_file = absl::StrFormat("%s/addresses.%d", work_dir, n);
  std::string log_path = absl::StrFormat("%s/pjrtd.%d.log", work_dir, n);
  std::vector<std::string> argv = {pjrtd_path};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--address-file");
  argv.push_back(address_file);
  auto child = ChildProcess::Start(argv, log_path);
  if (!child.ok()) return child.status();
  // The daemon writes the file (atomically) once it accepts calls.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Duration step = absl::Milliseconds(2);
  while (!std::filesystem::exists(address_file)) {
    int status = 0;
    if (waitpid(child->pid(), &status, WNOHANG) == child->pid()) {
      return absl::InternalError("pjrtd exited during start-up:\n" +
                                 ReadFile(log_path));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("pjrtd did not start in 30s:\n" +
                                         ReadFile(log_path));
    }
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(step));
    step = std::min(step * 2, absl::Milliseconds(50));
  }
  std::vector<std::string> addresses =
      absl::StrSplit(ReadFile(address_file), '\n', absl::SkipEmpty());
  return std::unique_ptr<DaemonProcess>(
      new DaemonProcess(*std::move(child), log_path, std::move(addresses)));
}

absl::StatusOr<int> DaemonProcess::Stop(absl::Duration timeout) {
  child_.Kill(SIGTERM);
  return child_.Wait(timeout);
}

std::string DaemonProcess::Log() const { return ReadFile(log_path_); }

DaemonProcess::~DaemonProcess() = default;

}  // namespace pjrt::testing
