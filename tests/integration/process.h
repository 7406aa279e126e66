// Test support: child processes (pjrtd, pjrtctl, helper programs) and
// temporary folders, for the integration tests.
#ifndef PJRT_TESTS_INTEGRATION_PROCESS_H_
#define PJRT_TESTS_INTEGRATION_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pjrt::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with its contents on
// destruction. Short, so unix socket paths fit in sun_path.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -signal if killed by a signal
  std::string out;
  std::string err;
};

// Runs `argv` to completion, capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(60));

// A running child process whose stdout can be read line by line.
class ChildProcess {
 public:
  // Starts `argv`; stderr goes to `stderr_path` (empty: inherited).
  static absl::StatusOr<ChildProcess> Start(
      const std::vector<std::string>& argv,
      const std::string& stderr_path = "");
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reads one line of the child's stdout (without the newline), waiting up
  // to `timeout`. Fails if the child closes stdout first.
  absl::StatusOr<std::string> ReadLine(absl::Duration timeout);
  void Kill(int signal);
  // Waits for exit; returns the exit code, or -signal.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool running() const { return pid_ > 0; }

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
};

// A pjrtd started for a test suite, listening where the arguments say, with
// --address-file added. Start() returns once it accepts calls.
class DaemonProcess {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      const std::string& pjrtd_path, std::vector<std::string> args,
      const std::string& work_dir);
  ~DaemonProcess();

  // Resolved listen addresses, in --listen order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  pid_t pid() const { return child_.pid(); }
  // Sends SIGTERM and returns the exit code.
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(30));
  std::string Log() const;

 private:
  DaemonProcess(ChildProcess child, std::string log_path,
                std::vector<std::string> addresses)
      : child_(std::move(child)),
        log_path_(std::move(log_path)),
        addresses_(std::move(addresses)) {}
  ChildProcess child_;
  std::string log_path_;
  std::vector<std::string> addresses_;
};

// Reads a whole file ("" if it does not exist).
std::string ReadFile(const std::string& path);

}  // namespace pjrt::testing

#endif  // PJRT_TESTS_INTEGRATION_PROCESS_H_
