// `pjrtctl top`: a live view of one daemon, like nvidia-smi or htop: each
// device with a memory bar, utilisation and run rate; the sessions by device
// time; the RPCs called most in the last interval. It redraws every
// interval until q (or Ctrl-C) is pressed; when stdout is not a terminal it
// prints one frame, with rates over one interval, and returns.
#ifndef PJRT_CLI_TOP_H_
#define PJRT_CLI_TOP_H_

#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/daemon_calls.h"
#include "client/cpp/pjrt_client/client.h"
#include "nlohmann/json.hpp"
#include "pjrt/v1/server.pb.h"
#include "pjrt/v1/session.pb.h"

namespace pjrt::cli {

// What the daemon said at one moment.
struct TopSample {
  absl::Time when;
  v1::Stats stats;
  std::vector<v1::SessionInfo> sessions;
};

absl::StatusOr<TopSample> TakeTopSample(pjrt_client::Client& client);

// One frame, `width` columns wide; rates (utilisation, runs and calls per
// second) are over `before` to `now` and shown as "-" without `before`.
std::string RenderTopFrame(const v1::ServerInfo& info, const TopSample& now,
                           const TopSample* before, int width);

// The same as data: the daemon's stats and sessions at `now`, and each
// device's utilisation and runs per second, each session's share of device
// time and each RPC's calls per second over `before` to `now`.
nlohmann::json TopFrameJson(const TopSample& now, const TopSample& before);

struct TopOptions {
  absl::Duration interval = absl::Seconds(1);
  // Frames to draw before returning (0: until q).
  int frames = 0;
};

// Runs the view on the terminal (or prints one frame to a pipe). Returns
// the first error of a sample.
absl::Status RunTopView(pjrt_client::Client& client, const TopOptions& options,
                        std::ostream& out);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_TOP_H_
