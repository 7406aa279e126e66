// pjrtd: the device daemon. See docs/architecture.md and `pjrtd --help`.
#include <malloc.h>
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "base/version.h"
#include "daemon/daemon.h"
#include "daemon/options.h"
#include "grpc/grpc.h"
#include "runtime/fault_injection.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("pjrtd");
  // journald adds its own timestamps.
  if (std::getenv("JOURNAL_STREAM") != nullptr) {
    logger->set_pattern("[%l] %v");
  } else {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [pjrtd] [%l] %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

// Writes `lines` to `path` atomically (via a temporary file and rename), so
// that a reader never sees a partial file.
bool WriteAddressFile(const std::string& path,
                      const std::vector<std::string>& lines) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << absl::StrJoin(lines, "\n") << "\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC locks absl::Mutexes on every call; Debian's abseil checks each
  // lock for deadlock cycles unless told not to, which costs microseconds
  // per call. Our own locks are checked by the thread-safety annotations
  // and the sanitizer builds instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Blocks of 4 MiB and more come straight from the kernel and go back to
  // it when freed. Left to itself, glibc raises this threshold each time
  // such a block is freed, after which a large temporary (the parse of a
  // big program) lands in a heap and fragments it, and the daemon's memory
  // stays high after the client that caused it is gone.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  // That also fixes the threshold above which free memory at the top of a
  // heap goes back to the kernel at 128 KiB (glibc's), which large gRPC
  // streams raise while they run (see StreamingScope).
  pjrt::daemon::ParsedCommandLine parsed =
      pjrt::daemon::ParseCommandLine(argc, argv);
  if (parsed.exit_code.has_value()) return *parsed.exit_code;
  const pjrt::daemon::DaemonOptions& options = parsed.options;
  SetUpLogging(options.log_level);
  if (absl::Status status = pjrt::runtime::FaultInjectionStatus();
      !status.ok()) {
    std::cerr << "pjrtd: " << status.message() << "\n";
    return 2;
  }
  if (const auto& faults = pjrt::runtime::FaultInjection();
      faults.allocation > 0 || faults.kernel > 0) {
    spdlog::warn(
        "{} is set: allocations fail with probability {} and kernel runs with "
        "probability {} (a test switch; never for production)",
        pjrt::runtime::kFaultInjectionEnv, faults.allocation, faults.kernel);
  }

  // Signals are taken synchronously by this thread; every thread started
  // from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  spdlog::info("pjrtd {} starting (pid {})", pjrt::kBuildVersion, getpid());
  // A signal while the cluster forms ends the wait (it stays pending, and
  // is taken below when start-up succeeded after all).
  auto stop_requested = [] {
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 ||
           sigismember(&pending, SIGINT) == 1;
  };
  // A reference to gRPC that is never given back: the last grpc_shutdown()
  // (which ~Server would make) joins gRPC's executor threads, and one of
  // them can sit in a poll of up to 10 s (gRPC 1.51), holding the exit that
  // long after a shutdown that is complete. The process's end frees it all.
  grpc_init();
  auto daemon = pjrt::daemon::Daemon::Start(options, stop_requested);
  if (!daemon.ok()) {
    spdlog::error("cannot start: {}", daemon.status().message());
    sd_notifyf(0, "STATUS=failed: %s",
               std::string(daemon.status().message()).c_str());
    return 1;
  }
  if (!options.address_file.empty() &&
      !WriteAddressFile(options.address_file, (*daemon)->addresses())) {
    spdlog::error("cannot write address file {}", options.address_file);
    return 1;
  }
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s",
             absl::StrJoin((*daemon)->addresses(), ", ").c_str());

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      // Tenants are re-read; other options need a restart.
      (*daemon)->Reload().IgnoreError();
      continue;
    }
    spdlog::info("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  sd_notify(0, "STOPPING=1");
  (*daemon)->Shutdown();
  daemon->reset();
  spdlog::shutdown();
  return 0;
}
