// pjrtctl transfer: an array from a device of one task of a cluster to a
// device of another, daemon to daemon, read back and verified.
#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cli/npy.h"
#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

struct TransferOptions {
  std::string file;
  std::string from, to;
  int from_device = -1, to_device = -1;
  double timeout_seconds = 0;
};

int RunTransfer(const GlobalOptions& g, const TransferOptions& o) {
  auto array = ReadNpy(o.file);
  if (!array.ok()) return FailUsage(g, array.status());
  GlobalOptions from_g = g, to_g = g;
  from_g.address = o.from;
  to_g.address = o.to;
  auto from = Connect(from_g);
  if (!from.ok()) return Fail(g, from.status());
  auto to = Connect(to_g);
  if (!to.ok()) return Fail(g, to.status());
  auto resolved_from = DeviceOrFirst(**from, o.from_device);
  if (!resolved_from.ok()) return Fail(g, resolved_from.status());
  auto resolved_to = DeviceOrFirst(**to, o.to_device);
  if (!resolved_to.ok()) return Fail(g, resolved_to.status());
  const int from_device = *resolved_from, to_device = *resolved_to;
  auto from_session = (*from)->OpenSession({.client_name = "pjrtctl transfer"});
  if (!from_session.ok()) return Fail(g, from_session.status());
  auto to_session = (*to)->OpenSession({.client_name = "pjrtctl transfer"});
  if (!to_session.ok()) return Fail(g, to_session.status());

  const pjrt_client::ArrayShape shape{array->dtype, array->dims};
  auto receive = (*to_session)
                     ->MakeCrossHostReceiveBuffers(
                         {shape}, to_device, absl::Seconds(o.timeout_seconds));
  if (!receive.ok()) return Fail(g, receive.status());
  const int64_t total = static_cast<int64_t>(array->data.size());
  absl::StatusOr<pjrt_client::Buffer> source;
  {
    ProgressBar bar(g, "upload  ", total);
    source = (*from_session)
                 ->Upload(array->dtype, array->dims, array->data, from_device,
                          bar.callback());
  }
  if (!source.ok()) return Fail(g, source.status());
  absl::StatusOr<pjrt_client::RemoteCopy> sent;
  double seconds = 0;
  {
    // Task to task: the receiving daemon counts the bytes as they arrive.
    // The watcher wakes at once when the copy ends (a sleep of its made
    // every transfer take at least 0.1 s).
    ProgressBar bar(g, "transfer", total);
    auto before = (*to)->Stats();
    absl::Notification done;
    std::thread watcher([&] {
      if (!before.ok()) return;
      while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
        auto now = (*to)->Stats();
        if (now.ok()) {
          bar.Update(std::min(total, now->cross_host_bytes_received -
                                         before->cross_host_bytes_received));
        }
      }
    });
    const absl::Time start = absl::Now();
    sent = source->CopyToRemoteDevice(receive->descriptors[0]);
    seconds = absl::ToDoubleSeconds(absl::Now() - start);
    done.Notify();
    watcher.join();
    if (sent.ok()) bar.Update(total);
  }
  if (!sent.ok()) return Fail(g, sent.status());
  absl::StatusOr<std::vector<uint8_t>> received;
  {
    ProgressBar bar(g, "verify  ", total);
    received = receive->buffers[0].Download(bar.callback());
  }
  if (!received.ok()) return Fail(g, received.status());
  const bool verified = *received == array->data;
  const double rate =
      seconds > 0 ? static_cast<double>(array->data.size()) / seconds : 0;
  const int from_task = (*from)->server_info().task_id;
  const int to_task = (*to)->server_info().task_id;
  if (g.json) {
    std::cout << json{{"file", o.file},         {"bytes", array->data.size()},
                      {"from_task", from_task}, {"from_device", from_device},
                      {"to_task", to_task},     {"to_device", to_device},
                      {"seconds", seconds},     {"bytes_per_second", rate},
                      {"verified", verified}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << absl::StrFormat(
        "moved %s (%s) from task %d device %d to task %d device %d in %.3f s "
        "(%s/s); %s\n",
        o.file, FormatByteSize(static_cast<int64_t>(array->data.size())),
        from_task, from_device, to_task, to_device, seconds,
        FormatByteSize(static_cast<int64_t>(rate)),
        verified ? "read back and verified" : "READ BACK DIFFERS");
  }
  if (!verified) {
    std::cerr << "pjrtctl: the bytes read back from task " << to_task
              << " differ from " << o.file << "\n";
    return kExitServerError;
  }
  return kExitOk;
}

}  // namespace

void AddTransferCommand(CLI::App& app, const GlobalOptions& g,
                        Command* command) {
  auto o = std::make_shared<TransferOptions>();
  auto* transfer = app.add_subcommand(
      "transfer",
      "Move a .npy array from a device of one task of a cluster to a device\n"
      "of another, daemon to daemon, then read it back and verify it.\n"
      "Example: pjrtctl transfer x.npy --from 10.0.0.1:7070 --to "
      "10.0.0.2:7070 --to-device 5");
  transfer->add_option("FILE", o->file, ".npy file to move")
      ->required()
      ->check(CLI::ExistingFile);
  transfer->add_option("--from", o->from,
                       "Address of the sending task's daemon (default: "
                       "--address)");
  transfer->add_option("--to", o->to, "Address of the receiving task's daemon")
      ->required();
  transfer
      ->add_option("--from-device", o->from_device,
                   "Global id of the sending device (default: the "
                   "sender's first)")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  transfer
      ->add_option("--to-device", o->to_device,
                   "Global id of the receiving device (default: the "
                   "receiver's first)")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  transfer
      ->add_option("--receive-timeout", o->timeout_seconds,
                   "Seconds the receive waits for the data (default: "
                   "the receiver's --receive-timeout)")
      ->check(NonNegativeNumber());
  transfer->callback([&g, o, command] {
    *command = [&g, o] {
      if (o->from.empty()) o->from = g.address;
      return RunTransfer(g, *o);
    };
  });
}

}  // namespace pjrt::cli
