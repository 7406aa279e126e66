// pjrtctl: the command line of pjrtd.
//
//   pjrtctl [--address ADDR] [--json] COMMAND [ARGS]
//
// Exit status: 0 on success, 1 when the daemon reports an error (or cannot
// be reached), 2 on a usage error.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "base/token.h"
#include "base/version.h"
#include "cli/npy.h"
#include "cli/proto_json.h"
#include "cli/table.h"
#include "cli/top.h"
#include "client/cpp/pjrt_client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"

namespace pjrt::cli {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitServerError = 1;
constexpr int kExitUsage = 2;

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

// Prints `status` as the command's failure and returns `exit_code`.
int Fail(const GlobalOptions& g, const absl::Status& status,
         int exit_code = kExitServerError) {
  if (g.json) {
    json doc = {{"error",
                 {{"code", absl::StatusCodeToString(status.code())},
                  {"message", std::string(status.message())}}}};
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cerr << "pjrtctl: " << absl::StatusCodeToString(status.code()) << ": "
              << status.message() << "\n";
  }
  return exit_code;
}

// A failure caused by the command line or the files it names (exit 2).
int FailUsage(const GlobalOptions& g, const absl::Status& status) {
  return Fail(g, status, kExitUsage);
}

absl::StatusOr<std::shared_ptr<pjrt_client::Client>> Connect(
    const GlobalOptions& g, bool shared_memory = true) {
  std::string token;
  if (!g.token_file.empty()) {
    std::ifstream file(g.token_file);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cannot read the token file %s", g.token_file));
    }
    token = std::string(absl::StripAsciiWhitespace(text.str()));
  }
  return pjrt_client::Client::Connect(
      {.address = g.address,
       .timeout = absl::Seconds(g.timeout_seconds),
       .shared_memory = shared_memory,
       .token = token,
       .tls_ca = g.tls_ca,
       .tls_cert = g.tls_cert,
       .tls_key = g.tls_key});
}

// `pjrtctl token new`: a fresh random token for a tenant, and the line of
// the tenants file that admits it (only the token's salted hash is kept
// there).
int RunTokenNew(const GlobalOptions& g, const std::string& name) {
  pjrt::NewToken token = pjrt::MakeToken();
  if (g.json) {
    json doc = {{"token", token.token}, {"token_sha256", token.token_sha256}};
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "token: " << token.token << "\n\n"
            << "Give the token to the tenant (e.g. in a mode-600 file for "
               "pjrtctl --token-file, or PJRTD_TOKEN), and add to the "
               "tenants file:\n\n"
            << "[[tenant]]\n"
            << "name = \"" << name << "\"\n"
            << "role = \"user\"\n"
            << "token_sha256 = \"" << token.token_sha256 << "\"\n";
  return kExitOk;
}

std::string Yes(bool b) { return b ? "yes" : "no"; }

int RunInfo(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  const v1::ServerInfo& info = (*client)->server_info();
  if (g.json) {
    json doc = ProtoToJson(info);
    doc["address"] = (*client)->address();
    doc["client_version"] = kBuildVersion;
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  PrintFields(
      std::cout,
      {{"address", (*client)->address()},
       {"build", info.build_version()},
       {"protocol",
        absl::StrFormat("pjrt.v1 revisions %d-%d", info.protocol_version_min(),
                        info.protocol_version_max())},
       {"platform", info.platform()},
       {"backend", info.backend().empty() ? "none" : info.backend()},
       {"devices", absl::StrCat(info.addressable_device_count())},
       {"task", absl::StrFormat("%d of %d", info.task_id(), info.task_count())},
       {"pid", absl::StrCat(info.pid())},
       {"uptime", absl::FormatDuration(absl::Trunc(
                      absl::Seconds(info.uptime_seconds()), absl::Seconds(1)))},
       {"capabilities", absl::StrJoin(info.capabilities(), " ")},
       {"metrics", info.metrics_url().empty() ? "off" : info.metrics_url()},
       {"client", kBuildVersion}});
  return kExitOk;
}

int RunDevices(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto devices = (*client)->Devices();
  if (!devices.ok()) return Fail(g, devices.status());
  if (g.json) {
    json list = json::array();
    for (const auto& d : *devices) list.push_back(ProtoToJson(d));
    std::cout << json{{"devices", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "TASK", "LOCAL", "PLATFORM", "KIND", "MEMORY",
               "ADDRESSABLE", "HEALTH"});
  for (const auto& d : *devices) {
    table.AddRow({absl::StrCat(d.id()), absl::StrCat(d.task_id()),
                  absl::StrCat(d.local_hardware_id()), d.platform(), d.kind(),
                  FormatByteSize(d.memory_bytes()), Yes(d.addressable()),
                  !d.addressable() ? "-"
                  : d.unhealthy_reason().empty()
                      ? "ok"
                      : "UNHEALTHY: " + d.unhealthy_reason()});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunHealth(const GlobalOptions& g, double wait_seconds) {
  const std::string address = pjrt_client::ResolveAddress(g.address);
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline =
      absl::Now() +
      absl::Seconds(wait_seconds > 0 ? wait_seconds : g.timeout_seconds);
  grpc::Status status;
  grpc::health::v1::HealthCheckResponse response;
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    // With --wait, a daemon that is not up yet is waited for.
    context.set_wait_for_ready(wait_seconds > 0);
    response.Clear();
    status = stub->Check(&context, grpc::health::v1::HealthCheckRequest(),
                         &response);
    bool serving =
        status.ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || wait_seconds <= 0 || absl::Now() + backoff >= deadline)
      break;
    // The daemon answered but is not serving (starting or draining), or the
    // socket is not there yet: ask again shortly.
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  std::string state =
      status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                        response.status())
                  : "UNREACHABLE";
  bool healthy = state == "SERVING";
  // A serving daemon also says which of its cluster's peers it reaches,
  // and whether each of its devices still works.
  std::optional<v1::ClusterStatus> cluster;
  std::vector<v1::Device> devices;
  if (healthy) {
    auto client = Connect(g);
    if (client.ok()) {
      auto cluster_status = (*client)->ClusterStatus(absl::Seconds(2));
      if (cluster_status.ok()) cluster = *std::move(cluster_status);
      auto listed = (*client)->Devices();
      if (listed.ok()) {
        for (const v1::Device& d : *listed) {
          if (d.addressable()) devices.push_back(d);
        }
      }
    }
  }
  bool devices_ok = true;
  for (const v1::Device& d : devices)
    devices_ok &= d.unhealthy_reason().empty();
  bool peers_ok = true;
  if (cluster) {
    for (const auto& task : cluster->tasks()) peers_ok &= task.reachable();
  }
  if (g.json) {
    json doc = {{"address", address},
                {"status", state},
                {"healthy", healthy && devices_ok}};
    if (!status.ok()) doc["error"] = status.error_message();
    if (healthy) {
      json list = json::array();
      for (const v1::Device& d : devices) {
        json entry = {{"id", d.id()},
                      {"kind", d.kind()},
                      {"healthy", d.unhealthy_reason().empty()}};
        if (!d.unhealthy_reason().empty())
          entry["reason"] = d.unhealthy_reason();
        list.push_back(entry);
      }
      doc["devices"] = list;
    }
    if (cluster) {
      json tasks = json::array();
      for (const auto& task : cluster->tasks())
        tasks.push_back(ProtoToJson(task));
      doc["task_id"] = cluster->task_id();
      doc["tasks"] = tasks;
      doc["peers_reachable"] = peers_ok;
    }
    std::cout << doc.dump(2) << "\n";
  } else if (status.ok()) {
    std::cout << address << ": " << state << "\n";
    for (const v1::Device& d : devices) {
      if (d.unhealthy_reason().empty()) continue;
      std::cout << "device " << d.id() << " (" << d.kind()
                << "): UNHEALTHY: " << d.unhealthy_reason() << "\n";
    }
    if (cluster && cluster->tasks_size() > 1) {
      Table table({"TASK", "ADDRESS", "DEVICES", "REACHABLE", "RTT", "NOTE"});
      for (const auto& task : cluster->tasks()) {
        table.AddRow(
            {absl::StrCat(task.task_id(), task.self() ? " (self)" : ""),
             task.address(), absl::StrCat(task.device_count()),
             Yes(task.reachable()),
             task.self() ? "-"
                         : absl::StrFormat("%.2f ms", task.round_trip_ms()),
             task.error()});
      }
      table.Print(std::cout);
    }
  } else {
    std::cerr << "pjrtctl: " << address
              << " is not reachable: " << status.error_message() << "\n";
  }
  // A daemon that cannot reach a peer of its cluster, or whose device has
  // failed, is not healthy either.
  return healthy && peers_ok && devices_ok ? kExitOk : kExitServerError;
}

absl::StatusOr<int> DeviceOrFirst(pjrt_client::Client& client, int requested);
json ShapeJson(const v1::ArrayShape& shape);

// --- progress ---------------------------------------------------------------

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

// --- put and get ------------------------------------------------------------

struct PutGetOptions {
  std::string file;     // put: the .npy to upload; get: where to write
  std::string handle;   // get
  std::string session;  // token of a kept session (hex)
  bool keep = false;    // put: keep a new session and print its token
  double lease_seconds = 3600;
  int device = -1;
};

absl::StatusOr<uint64_t> ParseHex(const std::string& text, const char* what) {
  std::string digits = text;
  if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) {
    digits = digits.substr(2);
  }
  uint64_t value = 0;
  bool ok = !digits.empty() && digits.size() <= 16;
  for (char c : digits) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                        : -1;
    if (d < 0) ok = false;
    value = value * 16 + (d < 0 ? 0 : d);
  }
  if (!ok || value == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' is not a hexadecimal token such as 0x1f2e3d4c5b6a7980 (as "
        "`pjrtctl put --keep` prints)",
        what, text));
  }
  return value;
}

std::string Hex(uint64_t value) { return absl::StrFormat("%#018x", value); }

// The session of --session, or a new one (kept with --keep).
absl::StatusOr<std::unique_ptr<pjrt_client::Session>> PutGetSession(
    pjrt_client::Client& client, const PutGetOptions& o) {
  if (!o.session.empty()) {
    PJRT_ASSIGN_OR_RETURN(uint64_t id, ParseHex(o.session, "--session"));
    auto session = client.ResumeSession(id);
    if (!session.ok()) {
      return absl::Status(
          session.status().code(),
          absl::StrFormat("session %s: %s (kept sessions end when their "
                          "lease runs out)",
                          o.session, session.status().message()));
    }
    return session;
  }
  return client.OpenSession(
      {.client_name = "pjrtctl",
       .attach = !o.keep,
       .lease = absl::Seconds(o.keep ? o.lease_seconds : 0)});
}

int RunPut(const GlobalOptions& g, const PutGetOptions& o) {
  auto array = ReadNpy(o.file);
  if (!array.ok()) return FailUsage(g, array.status());
  if (!o.session.empty()) {
    auto token = ParseHex(o.session, "--session");
    if (!token.ok()) return FailUsage(g, token.status());
  }
  if (o.keep && !o.session.empty()) {
    return FailUsage(g, absl::InvalidArgumentError(
                            "--keep makes a new session; --session reuses "
                            "one: give one of them"));
  }
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto session = PutGetSession(**client, o);
  if (!session.ok()) return Fail(g, session.status());
  auto resolved = DeviceOrFirst(**client, o.device);
  if (!resolved.ok()) return Fail(g, resolved.status());
  const int device = *resolved;
  absl::StatusOr<pjrt_client::Buffer> buffer;
  {
    ProgressBar bar(g, "upload", static_cast<int64_t>(array->data.size()));
    buffer = (*session)->Upload(array->dtype, array->dims, array->data, device,
                                bar.callback());
  }
  if (!buffer.ok()) return Fail(g, buffer.status());
  const bool kept = o.keep || !o.session.empty();
  if (o.keep) {
    absl::Status status = (*session)->Keep();
    if (!status.ok()) return Fail(g, status);
  }
  const v1::BufferInfo info = buffer->info();
  const uint64_t handle = kept ? buffer->Release() : buffer->handle();
  if (g.json) {
    json doc = {{"file", o.file},
                {"handle", Hex(handle)},
                {"device", device},
                {"bytes", array->data.size()},
                {"kept", kept}};
    doc.update(ShapeJson(info.shape()));
    if (kept) doc["session"] = Hex((*session)->id());
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "uploaded %s as %s on device %d: handle %s\n", o.file,
        pjrt_client::ShapeToString(info.shape()), device, Hex(handle));
    if (kept) {
      std::cout << "session " << Hex((*session)->id())
                << " (reuse it with --session; it lives until its lease runs "
                   "out)\n";
    } else {
      std::cout << "the session closes now and frees the buffer; pass --keep "
                   "to keep both\n";
    }
  }
  return kExitOk;
}

int RunGet(const GlobalOptions& g, const PutGetOptions& o) {
  auto handle = ParseHex(o.handle, "handle");
  if (!handle.ok()) return FailUsage(g, handle.status());
  auto token = ParseHex(o.session, "--session");
  if (!token.ok()) return FailUsage(g, token.status());
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto session = PutGetSession(**client, o);
  if (!session.ok()) return Fail(g, session.status());
  auto buffer = (*session)->Adopt(*handle);
  if (!buffer.ok()) return Fail(g, buffer.status());
  absl::StatusOr<std::vector<uint8_t>> data;
  {
    ProgressBar bar(g, "download", buffer->size_bytes());
    data = buffer->Download(bar.callback());
  }
  // The buffer stays in the session.
  const v1::BufferInfo info = buffer->info();
  buffer->Release();
  if (!data.ok()) return Fail(g, data.status());
  HostArray array;
  array.dtype = info.shape().dtype();
  array.dims.assign(info.shape().dims().begin(), info.shape().dims().end());
  array.data = *std::move(data);
  absl::Status written = WriteNpy(o.file, array);
  if (!written.ok()) return Fail(g, written, kExitUsage);
  if (g.json) {
    json doc = {{"file", o.file},
                {"handle", Hex(*handle)},
                {"device", info.device_id()},
                {"bytes", array.data.size()}};
    doc.update(ShapeJson(info.shape()));
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "wrote %s (%s, %s) from handle %s\n", o.file,
        pjrt_client::ShapeToString(info.shape()),
        FormatByteSize(static_cast<int64_t>(array.data.size())), Hex(*handle));
  }
  return kExitOk;
}

// --- bench
// ----------------------------------------------------------------------

struct BenchOptions {
  int64_t size_bytes = 64 << 20;
  int calls = 200;
  int transfers = 5;
  int steps = 10000;
  int device = -1;
};

constexpr char kBenchProgram[] = R"(HloModule pjrtctl_bench
ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, ones)
}
)";

struct Spread {
  double min = 0, median = 0, max = 0;
};

Spread SpreadOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values.front(), values[values.size() / 2], values.back()};
}

int RunBench(const GlobalOptions& g, const BenchOptions& o) {
  // The stream rows need a client that never uses shared memory; the
  // shared-memory rows use regions directly.
  auto client = Connect(g, /*shared_memory=*/false);
  if (!client.ok()) return Fail(g, client.status());
  auto resolved = DeviceOrFirst(**client, o.device);
  if (!resolved.ok()) return Fail(g, resolved.status());
  const int device = *resolved;
  auto session = (*client)->OpenSession({.client_name = "pjrtctl bench"});
  if (!session.ok()) return Fail(g, session.status());
  const auto elapsed = [](absl::Time start) {
    return absl::ToDoubleSeconds(absl::Now() - start);
  };

  // Upload and download of the same array.
  std::vector<uint8_t> data(static_cast<size_t>(o.size_bytes));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 131);
  std::vector<double> up, down;
  std::vector<uint8_t> back(data.size());
  for (int i = 0; i < o.transfers; ++i) {
    absl::Time start = absl::Now();
    auto buffer =
        (*session)->Upload(v1::DTYPE_U8, {o.size_bytes}, data, device);
    if (!buffer.ok()) return Fail(g, buffer.status());
    up.push_back(static_cast<double>(o.size_bytes) / elapsed(start));
    start = absl::Now();
    absl::Status status = buffer->DownloadInto(absl::MakeSpan(back));
    if (!status.ok()) return Fail(g, status);
    down.push_back(static_cast<double>(o.size_bytes) / elapsed(start));
    if (back != data) {
      return Fail(g, absl::DataLossError(
                         "the downloaded bytes differ from the uploaded ones"));
    }
  }

  // The same bytes through a shared-memory region, when the daemon is on
  // this host: the array already lives in the region (as a loader would
  // write it), the daemon copies it to and from the device buffer.
  std::vector<double> shm_up, shm_down, memcpy_rate;
  std::string shm_skipped;
  {
    auto region = (*session)->CreateRegion(2 * o.size_bytes, "pjrtctl-bench");
    if (!region.ok()) {
      shm_skipped = std::string(region.status().message());
    } else {
      uint8_t* in = region->data();
      uint8_t* out = region->data() + o.size_bytes;
      std::memcpy(in, data.data(), data.size());
      std::memset(out, 0, data.size());
      // The baseline: memcpy of the same bytes between the same pages.
      for (int i = 0; i < o.transfers; ++i) {
        absl::Time start = absl::Now();
        std::memcpy(out, in, data.size());
        memcpy_rate.push_back(static_cast<double>(o.size_bytes) /
                              elapsed(start));
      }
      std::memset(out, 0, data.size());
      for (int i = 0; i < o.transfers; ++i) {
        absl::Time start = absl::Now();
        auto buffer = (*session)->UploadFromRegion(*region, 0, v1::DTYPE_U8,
                                                   {o.size_bytes}, device);
        if (!buffer.ok()) return Fail(g, buffer.status());
        shm_up.push_back(static_cast<double>(o.size_bytes) / elapsed(start));
        start = absl::Now();
        absl::Status status = buffer->DownloadToRegion(*region, o.size_bytes);
        if (!status.ok()) return Fail(g, status);
        shm_down.push_back(static_cast<double>(o.size_bytes) / elapsed(start));
        if (std::memcmp(out, data.data(), data.size()) != 0) {
          return Fail(g, absl::DataLossError(
                             "the bytes downloaded through shared memory "
                             "differ from the uploaded ones"));
        }
      }
    }
  }

  // Execute round trip of a tiny program: one call that returns once the
  // result is ready.
  auto executable = (*session)->Compile(kBenchProgram);
  if (!executable.ok()) return Fail(g, executable.status());
  const std::vector<float> x = {1, 2, 3, 4};
  auto input = (*session)->Upload(
      v1::DTYPE_F32, {4},
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(x.data()), 16),
      device);
  if (!input.ok()) return Fail(g, input.status());
  // Empty calls and executions alternate, so that both see the same
  // conditions on a machine whose speed drifts.
  std::vector<double> ping, execute, read;
  for (int i = 0; i < o.calls; ++i) {
    absl::Time start = absl::Now();
    absl::Status pinged = (*client)->Ping();
    if (!pinged.ok()) return Fail(g, pinged);
    ping.push_back(elapsed(start) * 1e6);
    start = absl::Now();
    const pjrt_client::Buffer* args[] = {&*input};
    auto results =
        executable->Execute(args, device, {.wait_until_ready = true});
    if (!results.ok()) return Fail(g, results.status());
    execute.push_back(elapsed(start) * 1e6);
    std::vector<float> back(4);
    start = absl::Now();
    absl::Status got = input->DownloadInto(
        absl::MakeSpan(reinterpret_cast<uint8_t*>(back.data()), 16));
    if (!got.ok()) return Fail(g, got);
    read.push_back(elapsed(start) * 1e6);
    if (!(*results)[0].info().ready() ||
        !(*results)[0].info().error_message().empty()) {
      return Fail(g, absl::InternalError(absl::StrFormat(
                         "the bench program's result came back %s",
                         (*results)[0].info().error_message().empty()
                             ? "not ready"
                             : (*results)[0].info().error_message())));
    }
  }

  // A loop of dependent steps (each run's result is the next one's
  // argument): one Execute call per step, then the same steps pipelined.
  const auto run_loop = [&](bool pipelined) -> absl::StatusOr<double> {
    PJRT_ASSIGN_OR_RETURN(
        pjrt_client::Buffer value,
        (*session)->Upload(
            v1::DTYPE_F32, {4},
            absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(x.data()), 16),
            device));
    absl::Time start = absl::Now();
    for (int i = 0; i < o.steps; ++i) {
      const pjrt_client::Buffer* args[] = {&value};
      PJRT_ASSIGN_OR_RETURN(std::vector<pjrt_client::Buffer> results,
                            pipelined
                                ? executable->ExecutePipelined(args, device)
                                : executable->Execute(args, device));
      value = std::move(results[0]);
    }
    std::vector<float> last(4);
    PJRT_RETURN_IF_ERROR(value.DownloadInto(
        absl::MakeSpan(reinterpret_cast<uint8_t*>(last.data()), 16)));
    double seconds = elapsed(start);
    for (int k = 0; k < 4; ++k) {
      if (last[k] != x[k] + static_cast<float>(o.steps)) {
        return absl::InternalError(
            absl::StrFormat("after %d %s steps element %d is %g; expected %g",
                            o.steps, pipelined ? "pipelined" : "synchronous", k,
                            last[k], x[k] + static_cast<float>(o.steps)));
      }
    }
    return o.steps / seconds;
  };
  auto sync_rate = run_loop(false);
  if (!sync_rate.ok()) return Fail(g, sync_rate.status());
  auto pipelined_rate = run_loop(true);
  if (!pipelined_rate.ok()) return Fail(g, pipelined_rate.status());

  struct Row {
    const char* name;
    const char* unit;
    Spread spread;
  };
  std::vector<Row> rows = {
      {"empty_call", "us", SpreadOf(ping)},
      {"upload", "bytes/s", SpreadOf(up)},
      {"download", "bytes/s", SpreadOf(down)},
      {"execute_round_trip", "us", SpreadOf(execute)},
      {"read_16_bytes", "us", SpreadOf(read)},
      {"loop_synchronous", "steps/s", {*sync_rate, *sync_rate, *sync_rate}},
      {"loop_pipelined",
       "steps/s",
       {*pipelined_rate, *pipelined_rate, *pipelined_rate}},
  };
  if (!shm_up.empty()) {
    rows.push_back({"upload_shared_memory", "bytes/s", SpreadOf(shm_up)});
    rows.push_back({"download_shared_memory", "bytes/s", SpreadOf(shm_down)});
    rows.push_back({"memcpy", "bytes/s", SpreadOf(memcpy_rate)});
  }
  if (g.json) {
    json doc = {
        {"address", (*client)->address()},
        {"device", device},
        {"transfer_bytes", o.size_bytes},
        {"calls", o.calls},
        {"transfers", o.transfers},
        {"steps", o.steps},
        {"transfers_over",
         (*session)->uses_data_channels() ? "data channels" : "gRPC stream"},
        {"executes_over",
         (*session)->uses_execute_lanes() ? "execute lanes" : "gRPC"}};
    if (!shm_skipped.empty()) doc["shared_memory_skipped"] = shm_skipped;
    for (const Row& row : rows) {
      doc[row.name] = {{"unit", row.unit},
                       {"min", row.spread.min},
                       {"median", row.spread.median},
                       {"max", row.spread.max}};
    }
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  const auto format = [](const Row& row, double value) {
    if (std::string(row.unit) == "us") return absl::StrFormat("%.1f us", value);
    if (std::string(row.unit) == "steps/s") {
      return absl::StrFormat("%.0f steps/s", value);
    }
    return FormatByteSize(static_cast<int64_t>(value)) + "/s";
  };
  std::cout << absl::StrFormat(
      "%s, device %d: %d empty calls and executions, %d transfers of %s, "
      "loops of %d steps\n",
      (*client)->address(), device, o.calls, o.transfers,
      FormatByteSize(o.size_bytes), o.steps);
  if (!shm_skipped.empty()) {
    std::cout << "shared memory not measured: " << shm_skipped << "\n";
  }
  Table table({"METRIC", "MIN", "MEDIAN", "MAX"});
  for (const Row& row : rows) {
    table.AddRow({row.name, format(row, row.spread.min),
                  format(row, row.spread.median), format(row, row.spread.max)});
  }
  table.Print(std::cout);
  return kExitOk;
}

struct TransferOptions {
  std::string file;
  std::string from, to;
  int from_device = -1, to_device = -1;
  double timeout_seconds = 0;
};

// `requested` if it is a device id (>= 0), else the first addressable
// device of the daemon behind `client`.
absl::StatusOr<int> DeviceOrFirst(pjrt_client::Client& client, int requested) {
  if (requested >= 0) return requested;
  PJRT_ASSIGN_OR_RETURN(auto devices, client.Devices());
  for (const auto& device : devices) {
    if (device.addressable()) return device.id();
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("%s has no addressable device", client.address()));
}

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

  v1::ArrayShape shape;
  shape.set_dtype(array->dtype);
  for (int64_t d : array->dims) shape.add_dims(d);
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
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::CopyToRemoteDeviceResponse> sent;
  {
    // Task to task: the receiving daemon counts the bytes as they arrive.
    ProgressBar bar(g, "transfer", total);
    auto before = (*to)->Stats();
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      if (!before.ok()) return;
      while (!done.load()) {
        auto now = (*to)->Stats();
        if (now.ok()) {
          bar.Update(std::min(total, now->cross_host_bytes_received() -
                                         before->cross_host_bytes_received()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    sent = source->CopyToRemoteDevice(receive->descriptors[0]);
    done.store(true);
    watcher.join();
    if (sent.ok()) bar.Update(total);
  }
  if (!sent.ok()) return Fail(g, sent.status());
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::StatusOr<std::vector<uint8_t>> received;
  {
    ProgressBar bar(g, "verify  ", total);
    received = receive->buffers[0].Download(bar.callback());
  }
  if (!received.ok()) return Fail(g, received.status());
  const bool verified = *received == array->data;
  const double rate =
      seconds > 0 ? static_cast<double>(array->data.size()) / seconds : 0;
  const int from_task = (*from)->server_info().task_id();
  const int to_task = (*to)->server_info().task_id();
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

int RunStats(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto stats = (*client)->Stats();
  if (!stats.ok()) return Fail(g, stats.status());
  if (g.json) {
    std::cout << ProtoToJson(*stats).dump(2) << "\n";
    return kExitOk;
  }
  Table table({"DEVICE", "IN USE", "PEAK", "RESERVED", "LIMIT", "ALLOCS",
               "LARGEST FREE", "FRAG", "QUEUE"});
  for (const auto& d : stats->devices()) {
    table.AddRow({absl::StrCat(d.device_id()), FormatByteSize(d.bytes_in_use()),
                  FormatByteSize(d.peak_bytes_in_use()),
                  FormatByteSize(d.bytes_reserved()),
                  FormatByteSize(d.bytes_limit()), absl::StrCat(d.num_allocs()),
                  FormatByteSize(d.largest_free_block()),
                  absl::StrFormat("%.2f", d.fragmentation()),
                  absl::StrCat(d.queue_depth())});
  }
  table.Print(std::cout);
  std::cout << "\nsessions: " << stats->session_count()
            << "  buffers: " << stats->buffer_count()
            << "  executables: " << stats->executable_count()
            << "  data channels: " << stats->data_channel_count()
            << "  execute lanes: " << stats->execute_lane_count() << "\n";
  const v1::CompileCacheStats& cache = stats->compile_cache();
  std::cout << absl::StrFormat(
      "compile cache: %d of %d programs, %d hits, %d compiles (%d failed), "
      "%d evictions\n",
      cache.entries(), cache.capacity(), cache.hits(), cache.compiles(),
      cache.failures(), cache.evictions());
  return kExitOk;
}

constexpr char kDefaultAdminTokenFile[] = "/run/pjrtd/admin.token";

int RunCloseSession(const GlobalOptions& g, int64_t public_id,
                    const std::string& token_file) {
  std::ifstream in(token_file);
  std::string token;
  std::getline(in, token);
  if (!in && token.empty()) {
    return Fail(g, absl::PermissionDeniedError(absl::StrFormat(
                       "cannot read the admin token file %s: %s (closing "
                       "another client's session needs the token the daemon "
                       "wrote there: run as root or as the daemon's user, or "
                       "pass --admin-token-file)",
                       token_file, std::strerror(errno))));
  }
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  v1::CloseSessionAsAdminRequest request;
  request.set_public_id(static_cast<uint64_t>(public_id));
  request.set_admin_token(token);
  v1::CloseSessionResponse response;
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(g.timeout_seconds)));
  grpc::Status status = (*client)->sessions_stub().CloseSessionAsAdmin(
      &context, request, &response);
  if (!status.ok()) return Fail(g, pjrt_client::ToAbslStatus(status));
  if (g.json) {
    json doc = ProtoToJson(response);
    doc["closed"] = public_id;
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "closed session %d: freed %d buffers (%s) and %d executables\n",
        public_id, response.buffers_freed(),
        FormatByteSize(response.bytes_freed()), response.executables_freed());
  }
  return kExitOk;
}

int RunSessions(const GlobalOptions& g) {
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto sessions = (*client)->Sessions();
  if (!sessions.ok()) return Fail(g, sessions.status());
  if (g.json) {
    json list = json::array();
    for (const auto& s : *sessions) list.push_back(ProtoToJson(s));
    std::cout << json{{"sessions", list}}.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"ID", "TENANT", "CLIENT", "PEER", "ATTACHED", "BUFFERS", "BYTES",
               "PEAK", "EXECUTABLES", "RUNS", "DEVICE TIME", "IN", "OUT", "AGE",
               "LEASE LEFT"});
  for (const auto& s : *sessions) {
    std::string runs = absl::StrCat(s.executions());
    if (s.failed_executions() > 0) {
      absl::StrAppend(&runs, " (", s.failed_executions(), " failed)");
    }
    table.AddRow({absl::StrCat(s.public_id()), s.tenant(), s.client_name(),
                  s.peer(), Yes(s.attached()), absl::StrCat(s.buffer_count()),
                  FormatByteSize(s.bytes()), FormatByteSize(s.peak_bytes()),
                  absl::StrCat(s.executable_count()), runs,
                  absl::StrFormat("%.3fs", s.device_seconds()),
                  FormatByteSize(s.bytes_to_device()),
                  FormatByteSize(s.bytes_from_device()),
                  absl::StrFormat("%.0fs", s.age_seconds()),
                  s.attached()
                      ? "-"
                      : absl::StrFormat("%.0fs", s.lease_remaining_seconds())});
  }
  table.Print(std::cout);
  return kExitOk;
}

// --- programs ------------------------------------------------------------

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read %s: %s", path, std::strerror(errno)));
  }
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

json ShapeJson(const v1::ArrayShape& shape) {
  return {
      {"dtype", pjrt_client::DTypeName(shape.dtype())},
      {"dims", std::vector<int64_t>(shape.dims().begin(), shape.dims().end())},
      {"shape", pjrt_client::ShapeToString(shape)}};
}

std::string Seconds(double seconds) {
  return absl::FormatDuration(
      absl::Trunc(absl::Seconds(seconds), absl::Microseconds(1)));
}

// A session of pjrtctl's own, and the program compiled in it.
struct CompiledProgram {
  std::shared_ptr<pjrt_client::Client> client;
  std::unique_ptr<pjrt_client::Session> session;
  pjrt_client::Executable executable;
};

// Reads and compiles `path`. On failure prints the error (a compile error
// keeps the daemon's message: line, column, caret) and sets `exit_code`.
std::optional<CompiledProgram> CompileFile(
    const GlobalOptions& g, const std::string& path, int* exit_code,
    const v1::CompileOptions& options = {}) {
  auto text = ReadTextFile(path);
  if (!text.ok()) {
    *exit_code = FailUsage(g, text.status());
    return std::nullopt;
  }
  CompiledProgram program;
  auto client = Connect(g);
  if (!client.ok()) {
    *exit_code = Fail(g, client.status());
    return std::nullopt;
  }
  program.client = *client;
  auto session = program.client->OpenSession({.client_name = "pjrtctl"});
  if (!session.ok()) {
    *exit_code = Fail(g, session.status());
    return std::nullopt;
  }
  program.session = *std::move(session);
  // The file's name says its format (.mlir: StableHLO, .hlo: HLO text);
  // otherwise the daemon tells from the text.
  v1::CompileOptions with_format = options;
  if (absl::EndsWith(path, ".mlir")) {
    with_format.set_program_format(v1::PROGRAM_FORMAT_STABLEHLO);
  } else if (absl::EndsWith(path, ".hlo")) {
    with_format.set_program_format(v1::PROGRAM_FORMAT_HLO);
  }
  auto executable = program.session->Compile(*text, with_format);
  if (!executable.ok()) {
    *exit_code =
        Fail(g, absl::Status(executable.status().code(),
                             absl::StrFormat("cannot compile %s:\n%s", path,
                                             executable.status().message())));
    return std::nullopt;
  }
  program.executable = *std::move(executable);
  return program;
}

json SignatureJson(const std::string& path,
                   const pjrt_client::Executable& executable) {
  json parameters = json::array();
  for (const auto& shape : executable.parameter_shapes()) {
    parameters.push_back(ShapeJson(shape));
  }
  json results = json::array();
  for (const auto& shape : executable.result_shapes()) {
    results.push_back(ShapeJson(shape));
  }
  return {{"file", path},
          {"name", executable.name()},
          {"parameters", parameters},
          {"results", results},
          {"result_is_tuple", executable.result_is_tuple()},
          {"num_replicas", executable.num_replicas()},
          {"num_partitions", executable.num_partitions()},
          {"donated_parameters", executable.donated_parameters()},
          {"compile_seconds", executable.info().compile_seconds()},
          {"cache_hit", executable.cache_hit()},
          {"fingerprint", executable.fingerprint()}};
}

void PrintSignature(const std::string& path,
                    const pjrt_client::Executable& executable) {
  PrintFields(
      std::cout,
      {{"program", path},
       {"name", executable.name()},
       {"compile time",
        absl::StrFormat("%s (%s)", Seconds(executable.info().compile_seconds()),
                        executable.cache_hit() ? "cache hit" : "compiled")},
       {"cache hit", Yes(executable.cache_hit())},
       {"fingerprint", executable.fingerprint()}});
  std::cout << "\n";
  Table table({"", "INDEX", "SHAPE"});
  for (int i = 0; i < executable.parameter_shapes().size(); ++i) {
    table.AddRow(
        {"parameter", absl::StrCat(i),
         pjrt_client::ShapeToString(executable.parameter_shapes()[i])});
  }
  for (int i = 0; i < executable.result_shapes().size(); ++i) {
    table.AddRow({executable.result_is_tuple() ? "result (tuple)" : "result",
                  absl::StrCat(i),
                  pjrt_client::ShapeToString(executable.result_shapes()[i])});
  }
  table.Print(std::cout);
}

int RunCompile(const GlobalOptions& g, const std::string& path) {
  int exit_code = kExitOk;
  auto program = CompileFile(g, path, &exit_code);
  if (!program) return exit_code;
  if (g.json) {
    std::cout << SignatureJson(path, program->executable).dump(2) << "\n";
  } else {
    PrintSignature(path, program->executable);
  }
  return kExitOk;
}

struct RunOptions {
  std::string file;
  std::vector<std::string> inputs;
  std::string output_dir;
  int device = 0;
  bool device_given = false;
  int repeat = 1;
  // 0: the module header's.
  int replicas = 0;
  int partitions = 0;
};

// Up to `max` elements of `array`, as "[1, 2, 3, ...]".
std::string Preview(const HostArray& array, int max = 6) {
  const int64_t n = array.element_count();
  std::vector<std::string> parts;
  const uint8_t* p = array.data.data();
  for (int64_t i = 0; i < std::min<int64_t>(n, max); ++i) {
    auto load = [&](auto type_tag) {
      decltype(type_tag) v;
      std::memcpy(&v, p + i * sizeof(v), sizeof(v));
      return v;
    };
    switch (array.dtype) {
      case v1::DTYPE_PRED:
        parts.push_back(p[i] ? "true" : "false");
        break;
      case v1::DTYPE_S8:
        parts.push_back(absl::StrCat(load(int8_t{})));
        break;
      case v1::DTYPE_S16:
        parts.push_back(absl::StrCat(load(int16_t{})));
        break;
      case v1::DTYPE_S32:
        parts.push_back(absl::StrCat(load(int32_t{})));
        break;
      case v1::DTYPE_S64:
        parts.push_back(absl::StrCat(load(int64_t{})));
        break;
      case v1::DTYPE_U8:
        parts.push_back(absl::StrCat(load(uint8_t{})));
        break;
      case v1::DTYPE_U16:
        parts.push_back(absl::StrCat(load(uint16_t{})));
        break;
      case v1::DTYPE_U32:
        parts.push_back(absl::StrCat(load(uint32_t{})));
        break;
      case v1::DTYPE_U64:
        parts.push_back(absl::StrCat(load(uint64_t{})));
        break;
      case v1::DTYPE_F16:
        parts.push_back(absl::StrFormat("%g", HalfToFloat(load(uint16_t{}))));
        break;
      case v1::DTYPE_BF16:
        parts.push_back(
            absl::StrFormat("%g", Bfloat16ToFloat(load(uint16_t{}))));
        break;
      case v1::DTYPE_F32:
        parts.push_back(absl::StrFormat("%g", load(float{})));
        break;
      case v1::DTYPE_F64:
        parts.push_back(absl::StrFormat("%g", load(double{})));
        break;
      default:
        parts.push_back("?");
        break;
    }
  }
  if (n > max) parts.push_back("...");
  std::string body = absl::StrJoin(parts, ", ");
  return array.dims.empty() ? body : absl::StrCat("[", body, "]");
}

int RunRun(const GlobalOptions& g, const RunOptions& o) {
  // Inputs first: a bad file is a usage error, found before any daemon work.
  std::vector<HostArray> inputs;
  for (const std::string& path : o.inputs) {
    auto array = ReadNpy(path);
    if (!array.ok()) return FailUsage(g, array.status());
    inputs.push_back(*std::move(array));
  }
  int exit_code = kExitOk;
  v1::CompileOptions compile_options;
  compile_options.set_num_replicas(o.replicas);
  compile_options.set_num_partitions(o.partitions);
  auto program = CompileFile(g, o.file, &exit_code, compile_options);
  if (!program) return exit_code;
  const pjrt_client::Executable& executable = program->executable;

  const int parameter_count = executable.parameter_shapes().size();
  if (static_cast<int>(inputs.size()) != parameter_count) {
    std::vector<std::string> shapes;
    for (const auto& shape : executable.parameter_shapes()) {
      shapes.push_back(pjrt_client::ShapeToString(shape));
    }
    return FailUsage(
        g, absl::InvalidArgumentError(absl::StrFormat(
               "%s takes %d parameter(s) (%s); got %d --input file(s). Give "
               "one .npy file per parameter, in order: --input p0.npy "
               "--input p1.npy ...",
               executable.name(), parameter_count,
               shapes.empty() ? "none" : absl::StrJoin(shapes, ", "),
               inputs.size())));
  }
  // One argument list per device: every device gets the same inputs.
  std::vector<int> devices = executable.addressable_device_ids();
  const bool replicated = devices.size() > 1;
  if (replicated && o.device_given) {
    return FailUsage(
        g, absl::InvalidArgumentError(absl::StrFormat(
               "%s runs %d replica(s) x %d partition(s) on devices %s; "
               "--device applies to single-device programs only",
               executable.name(), executable.num_replicas(),
               executable.num_partitions(), absl::StrJoin(devices, ", "))));
  }
  if (!replicated) devices = {o.device};
  std::vector<HostArray> converted_inputs;
  for (int i = 0; i < parameter_count; ++i) {
    const v1::ArrayShape& want = executable.parameter_shapes()[i];
    auto converted = ConvertToDType(std::move(inputs[i]), want.dtype());
    if (!converted.ok()) {
      return FailUsage(
          g, absl::InvalidArgumentError(absl::StrFormat(
                 "input %d (%s): %s; parameter %d of %s is %s", i, o.inputs[i],
                 converted.status().message(), i, executable.name(),
                 pjrt_client::ShapeToString(want))));
    }
    if (!std::equal(converted->dims.begin(), converted->dims.end(),
                    want.dims().begin(), want.dims().end())) {
      v1::ArrayShape got;
      got.set_dtype(converted->dtype);
      for (int64_t d : converted->dims) got.add_dims(d);
      return FailUsage(
          g, absl::InvalidArgumentError(absl::StrFormat(
                 "input %d (%s) is %s; parameter %d of %s is %s", i,
                 o.inputs[i], pjrt_client::ShapeToString(got), i,
                 executable.name(), pjrt_client::ShapeToString(want))));
    }
    converted_inputs.push_back(*std::move(converted));
  }
  const std::vector<int> donated = executable.donated_parameters();
  std::vector<std::vector<pjrt_client::Buffer>> arguments(devices.size());
  // Uploads fresh arguments for every device (a donated one is consumed by
  // each run).
  auto upload = [&](bool donated_only) -> absl::Status {
    for (size_t d = 0; d < devices.size(); ++d) {
      arguments[d].resize(parameter_count);
      for (int i = 0; i < parameter_count; ++i) {
        const bool is_donated =
            std::find(donated.begin(), donated.end(), i) != donated.end();
        if (donated_only && !is_donated) continue;
        const HostArray& input = converted_inputs[i];
        auto buffer = program->session->Upload(input.dtype, input.dims,
                                               input.data, devices[d]);
        if (!buffer.ok()) {
          return absl::Status(
              buffer.status().code(),
              absl::StrFormat("uploading input %d (%s) to device %d: %s", i,
                              o.inputs[i], devices[d],
                              buffer.status().message()));
        }
        arguments[d][i] = *std::move(buffer);
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status uploaded = upload(false); !uploaded.ok()) {
    return Fail(g, uploaded);
  }

  // Each run is timed from the Execute call until every result is ready.
  std::vector<double> run_seconds;
  std::vector<std::vector<pjrt_client::Buffer>> results;
  for (int r = 0; r < o.repeat; ++r) {
    results.clear();  // frees the previous run's results
    if (r > 0 && !donated.empty()) {
      if (absl::Status uploaded = upload(true); !uploaded.ok()) {
        return Fail(g, uploaded);
      }
    }
    std::vector<std::vector<const pjrt_client::Buffer*>> argument_ptrs(
        devices.size());
    for (size_t d = 0; d < devices.size(); ++d) {
      for (const auto& b : arguments[d]) argument_ptrs[d].push_back(&b);
    }
    absl::Time start = absl::Now();
    absl::StatusOr<std::vector<std::vector<pjrt_client::Buffer>>> run;
    if (replicated) {
      run = executable.ExecuteReplicated(argument_ptrs);
    } else {
      auto single = executable.Execute(argument_ptrs[0], o.device);
      if (single.ok()) {
        run.emplace();
        run->push_back(*std::move(single));
      } else {
        run = single.status();
      }
    }
    if (!run.ok()) return Fail(g, run.status());
    for (const auto& device_results : *run) {
      for (const auto& result : device_results) {
        absl::Status ready = result.BlockUntilReady();
        if (!ready.ok()) {
          return Fail(g, absl::Status(ready.code(),
                                      absl::StrFormat("run %d of %s failed: %s",
                                                      r, executable.name(),
                                                      ready.message())));
        }
      }
    }
    run_seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    results = *std::move(run);
  }
  std::vector<double> sorted = run_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      sorted.size() % 2 == 1
          ? sorted[sorted.size() / 2]
          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;

  json result_docs = json::array();
  std::vector<std::string> headers = {"RESULT", "SHAPE", "FILE", "VALUES"};
  if (replicated) {
    headers.insert(headers.begin(), {"REPLICA", "PARTITION", "DEVICE"});
  }
  Table table(headers);
  bool any_bf16 = false;
  const int partitions = std::max(1, executable.num_partitions());
  for (size_t d = 0; d < results.size(); ++d) {
    const int replica = static_cast<int>(d) / partitions;
    const int partition = static_cast<int>(d) % partitions;
    std::filesystem::path dir = o.output_dir;
    if (replicated && !dir.empty()) {
      dir /= absl::StrFormat("replica%d_partition%d", replica, partition);
    }
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return FailUsage(
            g, absl::PermissionDeniedError(absl::StrFormat(
                   "cannot create %s: %s", dir.string(), ec.message())));
      }
    }
    for (size_t i = 0; i < results[d].size(); ++i) {
      const pjrt_client::Buffer& result = results[d][i];
      auto bytes = result.Download();
      if (!bytes.ok()) return Fail(g, bytes.status());
      HostArray array;
      array.dtype = result.dtype();
      array.dims = result.dims();
      array.data = *std::move(bytes);
      v1::ArrayShape shape;
      shape.set_dtype(array.dtype);
      for (int64_t dim : array.dims) shape.add_dims(dim);
      std::string file;
      if (!dir.empty()) {
        file = (dir / absl::StrFormat("out%d.npy", i)).string();
        absl::Status written = WriteNpy(file, array);
        if (!written.ok()) return FailUsage(g, written);
      }
      const bool bf16 = array.dtype == v1::DTYPE_BF16;
      any_bf16 |= bf16;
      json doc = ShapeJson(shape);
      doc["index"] = i;
      if (replicated) {
        doc["replica"] = replica;
        doc["partition"] = partition;
      }
      doc["device"] = devices[d];
      doc["file"] = file.empty() ? json(nullptr) : json(file);
      doc["npy_dtype"] = NpyDescr(array.dtype);
      if (bf16) doc["note"] = "bf16 written as uint16 bit patterns ('<u2')";
      result_docs.push_back(doc);
      std::vector<std::string> row = {
          absl::StrCat(i), pjrt_client::ShapeToString(shape),
          file.empty() ? "-" : file + (bf16 ? " (bf16 bits as <u2)" : ""),
          Preview(array)};
      if (replicated) {
        row.insert(row.begin(), {absl::StrCat(replica), absl::StrCat(partition),
                                 absl::StrCat(devices[d])});
      }
      table.AddRow(row);
    }
  }

  if (g.json) {
    json doc = SignatureJson(o.file, executable);
    doc["devices"] = devices;
    if (!replicated) doc["device"] = o.device;
    doc["repeat"] = o.repeat;
    doc["run_seconds"] = {{"min", sorted.front()},
                          {"median", median},
                          {"max", sorted.back()},
                          {"all", run_seconds}};
    doc["outputs"] = result_docs;
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  PrintFields(
      std::cout,
      {{"program", absl::StrFormat("%s (%s)", o.file, executable.name())},
       {"compile time",
        absl::StrFormat("%s (%s)", Seconds(executable.info().compile_seconds()),
                        executable.cache_hit() ? "cache hit" : "compiled")},
       {replicated ? "devices" : "device",
        replicated ? absl::StrFormat("%s (%d replica(s) x %d partition(s))",
                                     absl::StrJoin(devices, ", "),
                                     executable.num_replicas(),
                                     executable.num_partitions())
                   : absl::StrCat(o.device)},
       {"runs", absl::StrFormat("%d: min %s, median %s, max %s", o.repeat,
                                Seconds(sorted.front()), Seconds(median),
                                Seconds(sorted.back()))}});
  std::cout << "\n";
  table.Print(std::cout);
  if (any_bf16 && !o.output_dir.empty()) {
    std::cout << "\nbf16 results are written as uint16 bit patterns ('<u2'); "
                 "in NumPy: (np.load(f).astype(np.uint32) << 16)"
                 ".view(np.float32)\n";
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "pjrtctl: talk to a pjrtd daemon.\n\nExamples:\n"
      "  pjrtctl devices\n"
      "  pjrtctl --address unix:///tmp/pjrtd.sock stats --json\n"
      "  pjrtctl health --wait 10\n"
      "  pjrtctl run model.mlir --input x.npy --output-dir out\n"
      "  pjrtctl put x.npy --keep\n"
      "  pjrtctl bench --json\n"
      "  pjrtctl transfer x.npy --from HOST0:PORT --to HOST1:PORT\n",
      "pjrtctl"};
  app.set_version_flag("--version", std::string("pjrtctl ") + kBuildVersion);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  app.add_option("--address", g.address,
                 absl::StrFormat("Daemon address: unix:///path or host:port "
                                 "(default: $%s, then %s)",
                                 pjrt_client::kAddressEnvVar,
                                 pjrt_client::kDefaultAddress));
  app.add_flag("--json", g.json, "Print one JSON document instead of a table");
  app.add_option("--timeout", g.timeout_seconds,
                 "Seconds to wait for the daemon to answer (default 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--token-file", g.token_file,
                 "File holding the tenant's token, for a daemon with "
                 "tenants (default: $PJRTD_TOKEN)");
  app.add_option("--tls-ca", g.tls_ca,
                 "Connect over TLS, trusting this PEM CA (default: "
                 "$PJRTD_TLS_CA)");
  app.add_option("--tls-cert", g.tls_cert,
                 "Present this PEM client certificate (mutual TLS; default: "
                 "$PJRTD_TLS_CERT)");
  app.add_option("--tls-key", g.tls_key,
                 "The client certificate's PEM key (default: $PJRTD_TLS_KEY)");

  auto* token =
      app.add_subcommand("token",
                         "Make credentials for the daemon's tenants file.\n"
                         "Example: pjrtctl token new --name alice");
  auto* token_new = token->add_subcommand(
      "new",
      "Print a fresh random token and the tenants-file lines that "
      "admit it.\nExample: pjrtctl token new --name alice");
  std::string token_name = "NAME";
  token_new->add_option("--name", token_name, "The tenant's name");
  token->require_subcommand(1);

  auto* info = app.add_subcommand(
      "info",
      "Show the daemon's build, protocol, platform and capabilities.\n"
      "Example: pjrtctl info");
  auto* devices = app.add_subcommand(
      "devices",
      "List the devices of the daemon (and of its cluster).\n"
      "Example: pjrtctl devices --json");
  double wait_seconds = 0;
  auto* health = app.add_subcommand(
      "health",
      "Check that the daemon is serving and reaches every peer of its\n"
      "cluster (exit 0) or not (exit 1); lists the peers of a cluster.\n"
      "Example: pjrtctl health --wait 30");
  health
      ->add_option("--wait", wait_seconds,
                   "Wait up to SECONDS for the daemon to come up")
      ->check(CLI::NonNegativeNumber);
  auto* stats =
      app.add_subcommand("stats",
                         "Show memory use per device, sessions and buffers.\n"
                         "Example: pjrtctl stats");
  double top_interval = 1;
  int top_frames = 0;
  auto* top = app.add_subcommand(
      "top",
      "A live view of the daemon: devices with memory bars and\n"
      "utilisation, sessions by device time, RPC rates; q quits. Prints\n"
      "one frame when stdout is not a terminal.\n"
      "Example: pjrtctl top");
  top->add_option("--interval", top_interval,
                  "Seconds between frames (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  top->add_option("--frames", top_frames,
                  "Draw this many frames, then stop (default: until q)")
      ->check(CLI::NonNegativeNumber);
  auto* sessions = app.add_subcommand(
      "sessions",
      "List the daemon's sessions; with --close, close one (an admin's\n"
      "call: it needs the token of the daemon's --admin-token-file).\n"
      "Example: pjrtctl sessions\n"
      "Example: sudo pjrtctl sessions --close 7");
  int64_t close_session = 0;
  std::string admin_token_file = kDefaultAdminTokenFile;
  sessions
      ->add_option("--close", close_session,
                   "Close the session with this ID (as listed), freeing "
                   "what it owns")
      ->check(CLI::PositiveNumber);
  sessions->add_option("--admin-token-file", admin_token_file,
                       absl::StrFormat("The daemon's admin token file "
                                       "(default %s)",
                                       kDefaultAdminTokenFile));

  std::string compile_file;
  auto* compile = app.add_subcommand(
      "compile",
      "Compile a program (StableHLO .mlir, as jax.jit(f).lower(x).as_text()\n"
      "prints it, or HLO text); print its name, parameter and result shapes,\n"
      "compile time and whether the daemon's cache had it. A bad program\n"
      "prints the error with its line, column and a caret (exit 1).\n"
      "Example: pjrtctl compile model.mlir --json");
  compile
      ->add_option("FILE", compile_file, "StableHLO (.mlir) or HLO text file")
      ->required()
      ->check(CLI::ExistingFile);
  RunOptions run_options;
  auto* run = app.add_subcommand(
      "run",
      "Compile a program (StableHLO .mlir or HLO text), run it with .npy\n"
      "inputs (one per parameter, in order) and write one .npy file per\n"
      "result (a tuple's elements\n"
      "flattened in order) as DIR/out0.npy, out1.npy, ... bf16 parameters\n"
      "take uint16 bit patterns or float32 values; bf16 results are written\n"
      "as uint16 bit patterns. A program over several devices (--replicas,\n"
      "--partitions, or replica_count= / num_partitions= in its header) runs\n"
      "on all of them with the same inputs and writes\n"
      "DIR/replica{r}_partition{p}/out{i}.npy.\n"
      "Example: pjrtctl run add.hlo --input a.npy --input b.npy "
      "--output-dir out --repeat 10\n"
      "Example: pjrtctl run allreduce.hlo --replicas 4 --input x.npy "
      "--output-dir out");
  run->add_option("FILE", run_options.file,
                  "StableHLO (.mlir) or HLO text file")
      ->required()
      ->check(CLI::ExistingFile);
  run->add_option("--input", run_options.inputs,
                  "A .npy file for the next parameter (repeat the flag)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  run->add_option("--output-dir", run_options.output_dir,
                  "Write the results here as out0.npy, out1.npy, ... "
                  "(created if missing)");
  auto* device_option =
      run->add_option("--device", run_options.device,
                      "Global id of the device to run a single-device "
                      "program on (default 0)")
          ->check(CLI::NonNegativeNumber);
  run->add_option("--replicas", run_options.replicas,
                  "Number of replicas (default: the module header's "
                  "replica_count, else 1)")
      ->check(CLI::PositiveNumber);
  run->add_option("--partitions", run_options.partitions,
                  "Number of partitions per replica (default: the module "
                  "header's num_partitions, else 1)")
      ->check(CLI::PositiveNumber);
  run->add_option("--repeat", run_options.repeat,
                  "Run N times and report min/median/max (default 1)")
      ->check(CLI::PositiveNumber);

  BenchOptions bench_options;
  std::string bench_size;
  auto* bench = app.add_subcommand(
      "bench",
      "Measure the daemon from here: empty-call latency, upload and download\n"
      "bandwidth over the stream and (daemon on this host) through shared\n"
      "memory (and memcpy of the same bytes), the round trip of a tiny\n"
      "execution, each as min, median and max; and the rate of a loop of\n"
      "dependent steps, one call per step against pipelined.\n"
      "Example: pjrtctl bench --size 256MiB --json");
  bench->add_option("--size", bench_size,
                    "Bytes per upload and download, e.g. 64MiB (the default)");
  bench
      ->add_option("--calls", bench_options.calls,
                   "Empty calls and executions to time (default 200)")
      ->check(CLI::Range(1, 1000000));
  bench
      ->add_option("--transfers", bench_options.transfers,
                   "Uploads and downloads to time (default 5)")
      ->check(CLI::Range(1, 10000));
  bench
      ->add_option("--steps", bench_options.steps,
                   "Steps of each dependent loop (default 10000)")
      ->check(CLI::Range(1, 10000000));
  bench
      ->add_option("--device", bench_options.device,
                   "Global id of the device (default: the daemon's first)")
      ->check(CLI::NonNegativeNumber);

  PutGetOptions put_options, get_options;
  auto* put = app.add_subcommand(
      "put",
      "Upload a .npy file to a device. With --keep the buffer stays, in a\n"
      "session that outlives this command (its token is printed); --session\n"
      "adds to such a session.\n"
      "Example: pjrtctl put x.npy --keep\n"
      "Example: pjrtctl put y.npy --session 0x1f2e3d4c5b6a7980 --device 1");
  put->add_option("FILE", put_options.file, ".npy file to upload")
      ->required()
      ->check(CLI::ExistingFile);
  put->add_option("--device", put_options.device,
                  "Global id of the device (default: the daemon's first)")
      ->check(CLI::NonNegativeNumber);
  put->add_flag("--keep", put_options.keep,
                "Keep the buffer in a new session and print its token");
  put->add_option("--session", put_options.session,
                  "Token of a kept session to add the buffer to");
  put->add_option("--lease", put_options.lease_seconds,
                  "Seconds a kept session lives without use (default 3600; "
                  "the daemon caps it)")
      ->check(CLI::PositiveNumber);
  auto* get = app.add_subcommand(
      "get",
      "Download a buffer of a kept session to a .npy file.\n"
      "Example: pjrtctl get 0x5a5a... --session 0x1f2e... -o x.npy");
  get->add_option("HANDLE", get_options.handle, "The buffer's handle (hex)")
      ->required();
  get->add_option("-o,--output", get_options.file, ".npy file to write")
      ->required();
  get->add_option("--session", get_options.session,
                  "Token of the session that holds the buffer")
      ->required();

  TransferOptions transfer_options;
  auto* transfer = app.add_subcommand(
      "transfer",
      "Move a .npy array from a device of one task of a cluster to a device\n"
      "of another, daemon to daemon, then read it back and verify it.\n"
      "Example: pjrtctl transfer x.npy --from 10.0.0.1:7070 --to "
      "10.0.0.2:7070 --to-device 5");
  transfer->add_option("FILE", transfer_options.file, ".npy file to move")
      ->required()
      ->check(CLI::ExistingFile);
  transfer->add_option("--from", transfer_options.from,
                       "Address of the sending task's daemon (default: "
                       "--address)");
  transfer
      ->add_option("--to", transfer_options.to,
                   "Address of the receiving task's daemon")
      ->required();
  transfer
      ->add_option("--from-device", transfer_options.from_device,
                   "Global id of the sending device (default: the "
                   "sender's first)")
      ->check(CLI::NonNegativeNumber);
  transfer
      ->add_option("--to-device", transfer_options.to_device,
                   "Global id of the receiving device (default: the "
                   "receiver's first)")
      ->check(CLI::NonNegativeNumber);
  transfer
      ->add_option("--receive-timeout", transfer_options.timeout_seconds,
                   "Seconds the receive waits for the data (default: "
                   "the receiver's --receive-timeout)")
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (token_new->parsed()) return RunTokenNew(g, token_name);
  if (info->parsed()) return RunInfo(g);
  if (devices->parsed()) return RunDevices(g);
  if (health->parsed()) return RunHealth(g, wait_seconds);
  if (stats->parsed()) return RunStats(g);
  if (top->parsed()) {
    auto client = Connect(g);
    if (!client.ok()) return Fail(g, client.status());
    if (g.json) {
      // One frame as data, with rates over one interval.
      auto before = TakeTopSample(**client);
      if (!before.ok()) return Fail(g, before.status());
      absl::SleepFor(absl::Seconds(top_interval));
      auto now = TakeTopSample(**client);
      if (!now.ok()) return Fail(g, now.status());
      std::cout << TopFrameJson(*now, *before).dump(2) << "\n";
      return kExitOk;
    }
    absl::Status status =
        RunTopView(**client,
                   TopOptions{.interval = absl::Seconds(top_interval),
                              .frames = top_frames},
                   std::cout);
    return status.ok() ? kExitOk : Fail(g, status);
  }
  if (sessions->parsed()) {
    if (close_session > 0) {
      return RunCloseSession(g, close_session, admin_token_file);
    }
    return RunSessions(g);
  }
  if (compile->parsed()) return RunCompile(g, compile_file);
  if (bench->parsed()) {
    if (!bench_size.empty()) {
      auto bytes = ParseByteSize(bench_size);
      if (!bytes.ok() || *bytes <= 0) {
        return FailUsage(g, absl::InvalidArgumentError(absl::StrFormat(
                                "--size '%s' is not a positive byte count "
                                "such as 64MiB",
                                bench_size)));
      }
      bench_options.size_bytes = *bytes;
    }
    return RunBench(g, bench_options);
  }
  if (put->parsed()) return RunPut(g, put_options);
  if (get->parsed()) return RunGet(g, get_options);
  if (transfer->parsed()) {
    if (transfer_options.from.empty()) transfer_options.from = g.address;
    return RunTransfer(g, transfer_options);
  }
  if (run->parsed()) {
    run_options.device_given = device_option->count() > 0;
    return RunRun(g, run_options);
  }
  return kExitUsage;
}

}  // namespace
}  // namespace pjrt::cli

int main(int argc, char** argv) {
  // See daemon/main.cc: Debian's abseil checks every gRPC lock for
  // deadlock cycles unless told not to.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return pjrt::cli::Main(argc, argv);
}
