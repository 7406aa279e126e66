#include "cli/top.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "cli/proto_json.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

constexpr int kMaxSessionRows = 10;
constexpr int kMaxRpcRows = 8;

std::string Bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width + 0.5);
  return absl::StrCat("[", std::string(filled, '#'),
                      std::string(width - filled, '.'), "]");
}

std::string Percent(double fraction) {
  return absl::StrFormat("%.0f%%", 100 * std::clamp(fraction, 0.0, 1.0));
}

std::string Rate(double per_second) {
  return per_second < 10 ? absl::StrFormat("%.1f", per_second)
                         : absl::StrFormat("%.0f", per_second);
}

// The terminal in a mode where keys arrive one at a time, unechoed, and
// Ctrl-C is a key (so that the terminal is always restored); restored when
// destroyed.
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

  // Waits up to `timeout` for a key; true when it says to quit (q, Ctrl-C,
  // Ctrl-D, or the end of input).
  bool WaitForQuit(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      pollfd fd{.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
      const int ready =
          poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready <= 0) continue;
      char key = 0;
      const ssize_t n = read(STDIN_FILENO, &key, 1);
      if (n == 0 && !active_) return true;  // input closed
      if (n == 1 && (key == 'q' || key == 'Q' || key == 3 || key == 4)) {
        return true;
      }
      if (n <= 0) return false;
    }
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// What grew per second from `before` to `now`, `seconds` apart.
struct TopRates {
  struct Device {
    // Busy seconds per second (overlapping runs can take it past 1).
    double utilization = 0;
    double executions_per_second = 0;
  };
  // Devices in both samples, by id.
  absl::flat_hash_map<int, Device> devices;
  // Device seconds per second of every session of `now`, by public id (a
  // session new since `before` counts from 0).
  absl::flat_hash_map<uint64_t, double> session_share;
  struct Rpc {
    double calls = 0;
    double errors = 0;
  };
  // Every method of `now`, by name.
  absl::flat_hash_map<std::string, Rpc> rpcs;
};

TopRates RatesBetween(const TopSample& now, const TopSample& before,
                      double seconds) {
  TopRates rates;
  for (const auto& d : now.stats.devices()) {
    for (const auto& b : before.stats.devices()) {
      if (b.device_id() != d.device_id()) continue;
      rates.devices[d.device_id()] = {
          .utilization = (d.busy_seconds() - b.busy_seconds()) / seconds,
          .executions_per_second = (d.executions() - b.executions()) / seconds};
    }
  }
  absl::flat_hash_map<uint64_t, double> previous_time;
  for (const auto& s : before.sessions) {
    previous_time[s.public_id()] = s.device_seconds();
  }
  for (const auto& s : now.sessions) {
    auto it = previous_time.find(s.public_id());
    rates.session_share[s.public_id()] =
        (s.device_seconds() - (it != previous_time.end() ? it->second : 0)) /
        seconds;
  }
  absl::flat_hash_map<std::string, const v1::RpcStats*> previous_rpcs;
  for (const auto& r : before.stats.rpcs()) previous_rpcs[r.method()] = &r;
  for (const auto& r : now.stats.rpcs()) {
    auto it = previous_rpcs.find(r.method());
    const int64_t calls =
        r.calls() - (it != previous_rpcs.end() ? it->second->calls() : 0);
    const int64_t errors =
        r.errors() - (it != previous_rpcs.end() ? it->second->errors() : 0);
    rates.rpcs[r.method()] = {.calls = calls / seconds,
                              .errors = errors / seconds};
  }
  return rates;
}

int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 100;
}

}  // namespace

absl::StatusOr<TopSample> TakeTopSample(pjrt_client::Client& client) {
  TopSample sample;
  sample.when = absl::Now();
  auto stats = GetStats(client);
  if (!stats.ok()) return stats.status();
  sample.stats = *std::move(stats);
  auto sessions = ListSessions(client);
  if (!sessions.ok()) return sessions.status();
  sample.sessions = *std::move(sessions);
  return sample;
}

std::string RenderTopFrame(const v1::ServerInfo& info, const TopSample& now,
                           const TopSample* before, int width) {
  const double seconds =
      before != nullptr ? absl::ToDoubleSeconds(now.when - before->when) : 0;
  std::optional<TopRates> rates;
  if (seconds > 0) rates = RatesBetween(now, *before, seconds);
  std::ostringstream out;
  const v1::Stats& stats = now.stats;
  out << absl::StrFormat(
      "pjrtd %s  %s  task %d of %d  pid %d  sessions %d  buffers %d  "
      "executables %d\n",
      info.build_version(), info.platform(), info.task_id(), info.task_count(),
      info.pid(), stats.session_count(), stats.buffer_count(),
      stats.executable_count());
  out << absl::StrFormat(
      "moved: %s to devices, %s from devices   compile cache: %d of %d, %d "
      "hits, %d compiles\n\n",
      FormatByteSize(stats.bytes_to_device()),
      FormatByteSize(stats.bytes_from_device()),
      stats.compile_cache().entries(), stats.compile_cache().capacity(),
      stats.compile_cache().hits(), stats.compile_cache().compiles());

  // Devices.
  const int bar = std::clamp(width - 75, 10, 40);
  Table devices({"DEVICE", "MEMORY", "USED", "LIMIT", "UTIL", "RUNS/S", "QUEUE",
                 "FAILED"});
  for (const auto& d : stats.devices()) {
    const double used =
        d.bytes_limit() > 0
            ? static_cast<double>(d.bytes_in_use()) / d.bytes_limit()
            : 0;
    std::string util = "-", runs = "-";
    if (rates && rates->devices.contains(d.device_id())) {
      const TopRates::Device& rate = rates->devices.at(d.device_id());
      util = Percent(rate.utilization);
      runs = Rate(rate.executions_per_second);
    }
    devices.AddRow({absl::StrCat(d.device_id()), Bar(used, bar),
                    FormatByteSize(d.bytes_in_use()),
                    FormatByteSize(d.bytes_limit()), util, runs,
                    absl::StrCat(d.queue_depth()),
                    absl::StrCat(d.execution_failures())});
  }
  devices.Print(out);

  // Sessions, by device time.
  std::vector<const v1::SessionInfo*> sessions;
  for (const auto& s : now.sessions) sessions.push_back(&s);
  std::sort(sessions.begin(), sessions.end(),
            [](const v1::SessionInfo* a, const v1::SessionInfo* b) {
              return a->device_seconds() > b->device_seconds() ||
                     (a->device_seconds() == b->device_seconds() &&
                      a->public_id() < b->public_id());
            });
  out << "\n";
  Table table({"SESSION", "CLIENT", "TENANT", "DEVICE TIME", "NOW", "RUNS",
               "MEMORY", "PEAK", "IN", "OUT"});
  for (size_t i = 0; i < sessions.size() && i < kMaxSessionRows; ++i) {
    const v1::SessionInfo& s = *sessions[i];
    const std::string busy =
        rates ? Percent(rates->session_share.at(s.public_id())) : "-";
    table.AddRow({absl::StrCat(s.public_id()), s.client_name().substr(0, 24),
                  s.tenant(), absl::StrFormat("%.2fs", s.device_seconds()),
                  busy, absl::StrCat(s.executions()), FormatByteSize(s.bytes()),
                  FormatByteSize(s.peak_bytes()),
                  FormatByteSize(s.bytes_to_device()),
                  FormatByteSize(s.bytes_from_device())});
  }
  table.Print(out);
  if (sessions.size() > kMaxSessionRows) {
    out << absl::StrFormat("... and %d more sessions\n",
                           sessions.size() - kMaxSessionRows);
  }

  // RPCs, by calls in the interval (or in all, without one).
  struct Row {
    std::string method;
    double calls;
    double errors;
  };
  std::vector<Row> rows;
  for (const auto& r : stats.rpcs()) {
    Row row{r.method(), static_cast<double>(r.calls()),
            static_cast<double>(r.errors())};
    if (rates) {
      const TopRates::Rpc& rate = rates->rpcs.at(r.method());
      row.calls = rate.calls;
      row.errors = rate.errors;
    }
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.calls > b.calls || (a.calls == b.calls && a.method < b.method);
  });
  out << "\n";
  Table rpcs(
      {"RPC", rates ? "CALLS/S" : "CALLS", rates ? "ERRORS/S" : "ERRORS"});
  for (size_t i = 0; i < rows.size() && i < kMaxRpcRows; ++i) {
    rpcs.AddRow({rows[i].method,
                 rates ? Rate(rows[i].calls) : absl::StrCat(rows[i].calls),
                 rates ? Rate(rows[i].errors) : absl::StrCat(rows[i].errors)});
  }
  rpcs.Print(out);
  return out.str();
}

nlohmann::json TopFrameJson(const TopSample& now, const TopSample& before) {
  const double seconds =
      std::max(absl::ToDoubleSeconds(now.when - before.when), 1e-9);
  nlohmann::json doc;
  doc["interval_seconds"] = seconds;
  doc["stats"] = ProtoToJson(now.stats);
  const TopRates rates = RatesBetween(now, before, seconds);
  nlohmann::json sessions = nlohmann::json::array();
  for (const auto& s : now.sessions) {
    nlohmann::json session = ProtoToJson(s);
    session["device_share"] = rates.session_share.at(s.public_id());
    sessions.push_back(std::move(session));
  }
  doc["sessions"] = std::move(sessions);
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : now.stats.devices()) {
    auto it = rates.devices.find(d.device_id());
    if (it == rates.devices.end()) continue;
    devices.push_back(
        {{"device_id", d.device_id()},
         {"utilization", std::clamp(it->second.utilization, 0.0, 1.0)},
         {"executions_per_second", it->second.executions_per_second}});
  }
  doc["devices"] = std::move(devices);
  nlohmann::json rpcs = nlohmann::json::array();
  for (const auto& r : now.stats.rpcs()) {
    const TopRates::Rpc& rate = rates.rpcs.at(r.method());
    rpcs.push_back({{"method", r.method()},
                    {"calls_per_second", rate.calls},
                    {"errors_per_second", rate.errors}});
  }
  doc["rpcs"] = std::move(rpcs);
  return doc;
}

absl::Status RunTopView(pjrt_client::Client& client, const TopOptions& options,
                        std::ostream& out) {
  auto described = GetServerInfo(client);
  if (!described.ok()) return described.status();
  const v1::ServerInfo& info = *described;
  auto first = TakeTopSample(client);
  if (!first.ok()) return first.status();
  if (!isatty(STDOUT_FILENO)) {
    // One frame, with rates over one interval.
    absl::SleepFor(options.interval);
    auto second = TakeTopSample(client);
    if (!second.ok()) return second.status();
    out << RenderTopFrame(info, *second, &*first, 100);
    return absl::OkStatus();
  }
  RawTerminal terminal;
  TopSample previous = *std::move(first);
  std::optional<TopSample> before;
  for (int frame = 1;; ++frame) {
    // Home, clear, frame, and how to leave.
    out << "\x1b[H\x1b[2J"
        << RenderTopFrame(info, previous, before ? &*before : nullptr,
                          TerminalWidth())
        << "\n(q quits)" << std::flush;
    if (options.frames > 0 && frame >= options.frames) break;
    if (terminal.WaitForQuit(options.interval)) break;
    auto next = TakeTopSample(client);
    if (!next.ok()) {
      out << "\n";
      // A daemon that shuts down ends the call with CANCELLED: "CANCELLED".
      const absl::Status& error = next.status();
      if (!absl::IsCancelled(error) && !absl::IsUnavailable(error)) {
        return error;
      }
      return absl::Status(
          error.code(),
          absl::StrCat("the daemon stopped answering (did it shut down?): ",
                       error.message()));
    }
    before = std::move(previous);
    previous = *std::move(next);
  }
  out << "\n";
  return absl::OkStatus();
}

}  // namespace pjrt::cli
