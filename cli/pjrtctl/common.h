// What every pjrtctl command shares: the global options, the exit codes,
// how a command fails, connecting to the daemon, and small formatting
// helpers.
#ifndef PJRT_CLI_PJRTCTL_COMMON_H_
#define PJRT_CLI_PJRTCTL_COMMON_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/byte_size.h"
#include "client/cpp/pjrt_client/client.h"
#include "nlohmann/json.hpp"

namespace pjrt::cli {

using nlohmann::json;

inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;
inline constexpr int kExitUsage = 2;

struct GlobalOptions {
  std::string address;
  bool json = false;
  double timeout_seconds = 10;
  // Credentials: a file holding the tenant's token, and TLS PEM files.
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

// What the command line asks for: set by the subcommand that was given,
// run once the whole line is parsed.
using Command = std::function<int()>;

// Prints `status` as the command's failure and returns `exit_code`.
int Fail(const GlobalOptions& g, const absl::Status& status,
         int exit_code = kExitServerError);

// A failure caused by the command line or the files it names (exit 2).
int FailUsage(const GlobalOptions& g, const absl::Status& status);

// A client of the daemon that `g` names, with its credentials.
absl::StatusOr<std::shared_ptr<pjrt_client::Client>> Connect(
    const GlobalOptions& g, bool shared_memory = true);

// `requested` if it is a device id (>= 0), else the first addressable
// device of the daemon behind `client`.
absl::StatusOr<int> DeviceOrFirst(pjrt_client::Client& client, int requested);

// A session token or buffer handle as pjrtctl prints them (0x%016x), and
// back; INVALID_ARGUMENT naming `what` for text that is not one.
absl::StatusOr<uint64_t> ParseHex(const std::string& text, const char* what);
std::string Hex(uint64_t value);

absl::StatusOr<std::string> ReadTextFile(const std::string& path);
json ShapeJson(const pjrt_client::ArrayShape& shape);
// "1.234ms": a duration to the microsecond.
std::string Seconds(double seconds);
std::string Yes(bool b);

// Bytes and rate of a long transfer, redrawn in place on a terminal. Shown
// only when stdout is a terminal, the output is not JSON, and the transfer
// is larger than 64 MiB.
class ProgressBar {
 public:
  static constexpr int64_t kMinBytes = int64_t{64} << 20;

  ProgressBar(const GlobalOptions& g, std::string label, int64_t total)
      : label_(std::move(label)),
        total_(total),
        enabled_(!g.json && total > kMinBytes && isatty(STDOUT_FILENO) == 1),
        start_(absl::Now()) {}
  ~ProgressBar() { Finish(); }

  pjrt_client::Progress callback() {
    return [this](int64_t done, int64_t) { Update(done); };
  }

  void Update(int64_t done) {
    if (!enabled_ || finished_) return;
    const absl::Time now = absl::Now();
    if (done < total_ && now - last_draw_ < absl::Milliseconds(100)) return;
    last_draw_ = now;
    Draw(done, now);
  }

  // Draws the final state and ends the line.
  void Finish() {
    if (!enabled_ || finished_) return;
    finished_ = true;
    std::cout << "\n" << std::flush;
  }

 private:
  void Draw(int64_t done, absl::Time now) {
    constexpr int kWidth = 30;
    const double fraction =
        total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_)
                   : 1;
    const int filled = static_cast<int>(fraction * kWidth);
    const double seconds = std::max(1e-6, absl::ToDoubleSeconds(now - start_));
    std::cout << absl::StrFormat(
                     "\r%s [%s%s] %3.0f%% %s / %s %s/s", label_,
                     std::string(filled, '#'),
                     std::string(kWidth - filled, '.'), 100 * fraction,
                     FormatByteSize(done), FormatByteSize(total_),
                     FormatByteSize(static_cast<int64_t>(done / seconds)))
              << std::flush;
  }

  const std::string label_;
  const int64_t total_;
  const bool enabled_;
  const absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool finished_ = false;
};

}  // namespace pjrt::cli

#endif  // PJRT_CLI_PJRTCTL_COMMON_H_
