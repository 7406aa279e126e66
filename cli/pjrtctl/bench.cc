// pjrtctl bench: the daemon measured from here: empty calls, transfers over
// the stream and through shared memory, tiny executions, dependent loops.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "cli/pjrtctl/commands.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

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

// The input of the bench program, and what each step adds to it.
constexpr float kInput[4] = {1, 2, 3, 4};

absl::Span<const uint8_t> InputBytes() {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(kInput),
                             sizeof(kInput));
}

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

struct Spread {
  double min = 0, median = 0, max = 0;
};

Spread SpreadOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values.front(), values[values.size() / 2], values.back()};
}

// What the stages measured: rates in bytes/s or steps/s, latencies in us.
struct BenchResults {
  std::vector<double> up, down;
  std::vector<double> shm_up, shm_down, memcpy_rate;
  std::string shm_skipped;  // why shared memory was not measured
  std::vector<double> ping, execute, read;
  double sync_rate = 0, pipelined_rate = 0;
};

// Upload and download of the same array over the stream.
absl::Status MeasureStream(pjrt_client::Session& session, int device,
                           const BenchOptions& o,
                           const std::vector<uint8_t>& data, BenchResults* r) {
  std::vector<uint8_t> back(data.size());
  const double bytes = static_cast<double>(o.size_bytes);
  for (int i = 0; i < o.transfers; ++i) {
    absl::Time start = absl::Now();
    PJRT_ASSIGN_OR_RETURN(
        pjrt_client::Buffer buffer,
        session.Upload(pjrt_client::DType::kU8, {o.size_bytes}, data, device));
    r->up.push_back(bytes / SecondsSince(start));
    start = absl::Now();
    PJRT_RETURN_IF_ERROR(buffer.DownloadInto(absl::MakeSpan(back)));
    r->down.push_back(bytes / SecondsSince(start));
    if (back != data) {
      return absl::DataLossError(
          "the downloaded bytes differ from the uploaded ones");
    }
  }
  return absl::OkStatus();
}

// The same bytes through a shared-memory region, when the daemon is on
// this host: the array already lives in the region (as a loader would
// write it), the daemon copies it to and from the device buffer. Against
// memcpy of the same bytes between the same pages.
absl::Status MeasureSharedMemory(pjrt_client::Session& session, int device,
                                 const BenchOptions& o,
                                 const std::vector<uint8_t>& data,
                                 BenchResults* r) {
  auto region = session.CreateRegion(2 * o.size_bytes, "pjrtctl-bench");
  if (!region.ok()) {
    r->shm_skipped = std::string(region.status().message());
    return absl::OkStatus();
  }
  const double bytes = static_cast<double>(o.size_bytes);
  uint8_t* in = region->data();
  uint8_t* out = region->data() + o.size_bytes;
  std::memcpy(in, data.data(), data.size());
  std::memset(out, 0, data.size());
  for (int i = 0; i < o.transfers; ++i) {
    absl::Time start = absl::Now();
    std::memcpy(out, in, data.size());
    r->memcpy_rate.push_back(bytes / SecondsSince(start));
  }
  std::memset(out, 0, data.size());
  for (int i = 0; i < o.transfers; ++i) {
    absl::Time start = absl::Now();
    PJRT_ASSIGN_OR_RETURN(
        pjrt_client::Buffer buffer,
        session.UploadFromRegion(*region, 0, pjrt_client::DType::kU8,
                                 {o.size_bytes}, device));
    r->shm_up.push_back(bytes / SecondsSince(start));
    start = absl::Now();
    PJRT_RETURN_IF_ERROR(buffer.DownloadToRegion(*region, o.size_bytes));
    r->shm_down.push_back(bytes / SecondsSince(start));
    if (std::memcmp(out, data.data(), data.size()) != 0) {
      return absl::DataLossError(
          "the bytes downloaded through shared memory differ from the "
          "uploaded ones");
    }
  }
  return absl::OkStatus();
}

// Empty calls, execute round trips of the tiny program (one call that
// returns once the result is ready) and 16-byte reads, alternating, so
// that all see the same conditions on a machine whose speed drifts.
absl::Status MeasureCalls(pjrt_client::Client& client,
                          pjrt_client::Session& session,
                          const pjrt_client::Executable& executable, int device,
                          const BenchOptions& o, BenchResults* r) {
  PJRT_ASSIGN_OR_RETURN(
      pjrt_client::Buffer input,
      session.Upload(pjrt_client::DType::kF32, {4}, InputBytes(), device));
  for (int i = 0; i < o.calls; ++i) {
    absl::Time start = absl::Now();
    PJRT_RETURN_IF_ERROR(client.Ping());
    r->ping.push_back(SecondsSince(start) * 1e6);
    start = absl::Now();
    const pjrt_client::Buffer* args[] = {&input};
    PJRT_ASSIGN_OR_RETURN(
        std::vector<pjrt_client::Buffer> results,
        executable.Execute(args, device, {.wait_until_ready = true}));
    r->execute.push_back(SecondsSince(start) * 1e6);
    std::vector<float> back(4);
    start = absl::Now();
    PJRT_RETURN_IF_ERROR(input.DownloadInto(
        absl::MakeSpan(reinterpret_cast<uint8_t*>(back.data()), 16)));
    r->read.push_back(SecondsSince(start) * 1e6);
    const pjrt_client::BufferInfo& result = results[0].info();
    if (!result.ready || !result.error_message.empty()) {
      return absl::InternalError(absl::StrFormat(
          "the bench program's result came back %s",
          result.error_message.empty() ? "not ready" : result.error_message));
    }
  }
  return absl::OkStatus();
}

// A loop of dependent steps (each run's result is the next one's
// argument): one Execute call per step, or the same steps pipelined.
// Returns steps per second.
absl::StatusOr<double> MeasureLoop(pjrt_client::Session& session,
                                   const pjrt_client::Executable& executable,
                                   int device, const BenchOptions& o,
                                   bool pipelined) {
  PJRT_ASSIGN_OR_RETURN(
      pjrt_client::Buffer value,
      session.Upload(pjrt_client::DType::kF32, {4}, InputBytes(), device));
  absl::Time start = absl::Now();
  for (int i = 0; i < o.steps; ++i) {
    const pjrt_client::Buffer* args[] = {&value};
    PJRT_ASSIGN_OR_RETURN(std::vector<pjrt_client::Buffer> results,
                          pipelined ? executable.ExecutePipelined(args, device)
                                    : executable.Execute(args, device));
    value = std::move(results[0]);
  }
  std::vector<float> last(4);
  PJRT_RETURN_IF_ERROR(value.DownloadInto(
      absl::MakeSpan(reinterpret_cast<uint8_t*>(last.data()), 16)));
  const double seconds = SecondsSince(start);
  for (int k = 0; k < 4; ++k) {
    const float expected = kInput[k] + static_cast<float>(o.steps);
    if (last[k] != expected) {
      return absl::InternalError(absl::StrFormat(
          "after %d %s steps element %d is %g; expected %g", o.steps,
          pipelined ? "pipelined" : "synchronous", k, last[k], expected));
    }
  }
  return o.steps / seconds;
}

struct Row {
  const char* name;
  const char* unit;
  Spread spread;
};

std::vector<Row> RowsOf(const BenchResults& r) {
  std::vector<Row> rows = {
      {"empty_call", "us", SpreadOf(r.ping)},
      {"upload", "bytes/s", SpreadOf(r.up)},
      {"download", "bytes/s", SpreadOf(r.down)},
      {"execute_round_trip", "us", SpreadOf(r.execute)},
      {"read_16_bytes", "us", SpreadOf(r.read)},
      {"loop_synchronous", "steps/s", {r.sync_rate, r.sync_rate, r.sync_rate}},
      {"loop_pipelined",
       "steps/s",
       {r.pipelined_rate, r.pipelined_rate, r.pipelined_rate}},
  };
  if (!r.shm_up.empty()) {
    rows.push_back({"upload_shared_memory", "bytes/s", SpreadOf(r.shm_up)});
    rows.push_back({"download_shared_memory", "bytes/s", SpreadOf(r.shm_down)});
    rows.push_back({"memcpy", "bytes/s", SpreadOf(r.memcpy_rate)});
  }
  return rows;
}

void PrintBench(const GlobalOptions& g, const pjrt_client::Client& client,
                const pjrt_client::Session& session, int device,
                const BenchOptions& o, const BenchResults& r) {
  const std::vector<Row> rows = RowsOf(r);
  if (g.json) {
    json doc = {
        {"address", client.address()},
        {"device", device},
        {"transfer_bytes", o.size_bytes},
        {"calls", o.calls},
        {"transfers", o.transfers},
        {"steps", o.steps},
        {"transfers_over",
         session.uses_data_channels() ? "data channels" : "gRPC stream"},
        {"executes_over",
         session.uses_execute_lanes() ? "execute lanes" : "gRPC"}};
    if (!r.shm_skipped.empty()) doc["shared_memory_skipped"] = r.shm_skipped;
    for (const Row& row : rows) {
      doc[row.name] = {{"unit", row.unit},
                       {"min", row.spread.min},
                       {"median", row.spread.median},
                       {"max", row.spread.max}};
    }
    std::cout << doc.dump(2) << "\n";
    return;
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
      client.address(), device, o.calls, o.transfers,
      FormatByteSize(o.size_bytes), o.steps);
  if (!r.shm_skipped.empty()) {
    std::cout << "shared memory not measured: " << r.shm_skipped << "\n";
  }
  Table table({"METRIC", "MIN", "MEDIAN", "MAX"});
  for (const Row& row : rows) {
    table.AddRow({row.name, format(row, row.spread.min),
                  format(row, row.spread.median), format(row, row.spread.max)});
  }
  table.Print(std::cout);
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

  std::vector<uint8_t> data;
  try {
    data.resize(static_cast<size_t>(o.size_bytes));
  } catch (const std::bad_alloc&) {
    return Fail(g, absl::ResourceExhaustedError(absl::StrFormat(
                       "cannot allocate %s of host memory for --size",
                       FormatByteSize(o.size_bytes))));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint8_t>(i * 131);
  }
  BenchResults results;
  absl::Status status = MeasureStream(**session, device, o, data, &results);
  if (status.ok()) {
    status = MeasureSharedMemory(**session, device, o, data, &results);
  }
  if (!status.ok()) return Fail(g, status);
  auto executable = (*session)->Compile(kBenchProgram);
  if (!executable.ok()) return Fail(g, executable.status());
  status = MeasureCalls(**client, **session, *executable, device, o, &results);
  if (!status.ok()) return Fail(g, status);
  auto sync_rate = MeasureLoop(**session, *executable, device, o, false);
  if (!sync_rate.ok()) return Fail(g, sync_rate.status());
  auto pipelined_rate = MeasureLoop(**session, *executable, device, o, true);
  if (!pipelined_rate.ok()) return Fail(g, pipelined_rate.status());
  results.sync_rate = *sync_rate;
  results.pipelined_rate = *pipelined_rate;
  PrintBench(g, **client, **session, device, o, results);
  return kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  auto o = std::make_shared<BenchOptions>();
  auto size = std::make_shared<std::string>();
  auto* bench = app.add_subcommand(
      "bench",
      "Measure the daemon from here: empty-call latency, upload and download\n"
      "bandwidth over the stream and (daemon on this host) through shared\n"
      "memory (and memcpy of the same bytes), the round trip of a tiny\n"
      "execution, each as min, median and max; and the rate of a loop of\n"
      "dependent steps, one call per step against pipelined.\n"
      "Example: pjrtctl bench --size 256MiB --json");
  bench->add_option("--size", *size,
                    "Bytes per upload and download, e.g. 64MiB (the default)");
  bench
      ->add_option("--calls", o->calls,
                   "Empty calls and executions to time (default 200)")
      ->check(WholeNumber(1, 1000000));
  bench
      ->add_option("--transfers", o->transfers,
                   "Uploads and downloads to time (default 5)")
      ->check(WholeNumber(1, 10000));
  bench
      ->add_option("--steps", o->steps,
                   "Steps of each dependent loop (default 10000)")
      ->check(WholeNumber(1, 10000000));
  bench
      ->add_option("--device", o->device,
                   "Global id of the device (default: the daemon's first)")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  bench->callback([&g, o, size, command] {
    *command = [&g, o, size] {
      if (!size->empty()) {
        auto bytes = ParseByteSize(*size);
        if (!bytes.ok() || *bytes <= 0) {
          return FailUsage(g, absl::InvalidArgumentError(absl::StrFormat(
                                  "--size '%s' is not a positive byte count "
                                  "such as 64MiB",
                                  *size)));
        }
        o->size_bytes = *bytes;
      }
      // The data, its copy back and a region of twice its size are held at
      // once: refused where the host has not the memory for them.
      const int64_t pages = sysconf(_SC_PHYS_PAGES);
      const int64_t page_size = sysconf(_SC_PAGESIZE);
      if (pages > 0 && page_size > 0 && o->size_bytes > pages / 4 * page_size) {
        return FailUsage(
            g,
            absl::InvalidArgumentError(absl::StrFormat(
                "--size %s needs about four times that in host memory (the "
                "data, its copy back and a shared-memory region of twice its "
                "size); this host has %s: give at most %s",
                FormatByteSize(o->size_bytes),
                FormatByteSize(pages * page_size),
                FormatByteSize(pages / 4 * page_size))));
      }
      return RunBench(g, *o);
    };
  });
}

}  // namespace pjrt::cli
