// pjrtctl run: compile a program file, run it with .npy inputs on one
// device or replicated, write its results as .npy files.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "cli/npy.h"
#include "cli/pjrtctl/commands.h"
#include "cli/pjrtctl/program.h"
#include "cli/table.h"

namespace pjrt::cli {
namespace {

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
      case pjrt_client::DType::kPred:
        parts.push_back(p[i] ? "true" : "false");
        break;
      case pjrt_client::DType::kS8:
        parts.push_back(absl::StrCat(load(int8_t{})));
        break;
      case pjrt_client::DType::kS16:
        parts.push_back(absl::StrCat(load(int16_t{})));
        break;
      case pjrt_client::DType::kS32:
        parts.push_back(absl::StrCat(load(int32_t{})));
        break;
      case pjrt_client::DType::kS64:
        parts.push_back(absl::StrCat(load(int64_t{})));
        break;
      case pjrt_client::DType::kU8:
        parts.push_back(absl::StrCat(load(uint8_t{})));
        break;
      case pjrt_client::DType::kU16:
        parts.push_back(absl::StrCat(load(uint16_t{})));
        break;
      case pjrt_client::DType::kU32:
        parts.push_back(absl::StrCat(load(uint32_t{})));
        break;
      case pjrt_client::DType::kU64:
        parts.push_back(absl::StrCat(load(uint64_t{})));
        break;
      case pjrt_client::DType::kF16:
        parts.push_back(absl::StrFormat("%g", HalfToFloat(load(uint16_t{}))));
        break;
      case pjrt_client::DType::kBF16:
        parts.push_back(
            absl::StrFormat("%g", Bfloat16ToFloat(load(uint16_t{}))));
        break;
      case pjrt_client::DType::kF32:
        parts.push_back(absl::StrFormat("%g", load(float{})));
        break;
      case pjrt_client::DType::kF64:
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

// What one invocation runs: on which devices, with which inputs.
struct RunPlan {
  std::vector<int> devices;  // one argument list per device
  bool replicated = false;
  std::vector<HostArray> inputs;  // converted to the parameters' types
  std::vector<int> donated;
};

// Reads the --input files and matches them with the program's parameters;
// every error is the command line's (a usage error).
absl::StatusOr<RunPlan> PlanRun(const RunOptions& o,
                                const pjrt_client::Executable& executable,
                                std::vector<HostArray> inputs) {
  const int parameter_count = executable.parameter_shapes().size();
  if (static_cast<int>(inputs.size()) != parameter_count) {
    std::vector<std::string> shapes;
    for (const auto& shape : executable.parameter_shapes()) {
      shapes.push_back(pjrt_client::ShapeToString(shape));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s takes %d parameter(s) (%s); got %d --input file(s). Give "
        "one .npy file per parameter, in order: --input p0.npy "
        "--input p1.npy ...",
        executable.name(), parameter_count,
        shapes.empty() ? "none" : absl::StrJoin(shapes, ", "), inputs.size()));
  }
  RunPlan plan;
  // Every device gets the same inputs.
  plan.devices = executable.addressable_device_ids();
  plan.replicated = plan.devices.size() > 1;
  if (plan.replicated && o.device_given) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s runs %d replica(s) x %d partition(s) on devices %s; "
        "--device applies to single-device programs only",
        executable.name(), executable.num_replicas(),
        executable.num_partitions(), absl::StrJoin(plan.devices, ", ")));
  }
  if (!plan.replicated) plan.devices = {o.device};
  for (int i = 0; i < parameter_count; ++i) {
    const pjrt_client::ArrayShape& want = executable.parameter_shapes()[i];
    auto converted = ConvertToDType(std::move(inputs[i]), want.dtype);
    if (!converted.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("input %d (%s): %s; parameter %d of %s is %s", i,
                          o.inputs[i], converted.status().message(), i,
                          executable.name(), pjrt_client::ShapeToString(want)));
    }
    if (converted->dims != want.dims) {
      const pjrt_client::ArrayShape got{converted->dtype, converted->dims};
      return absl::InvalidArgumentError(
          absl::StrFormat("input %d (%s) is %s; parameter %d of %s is %s", i,
                          o.inputs[i], pjrt_client::ShapeToString(got), i,
                          executable.name(), pjrt_client::ShapeToString(want)));
    }
    plan.inputs.push_back(*std::move(converted));
  }
  plan.donated = executable.donated_parameters();
  return plan;
}

// Uploads fresh arguments for every device (a donated one is consumed by
// each run): all of them, or only the donated ones.
absl::Status UploadArguments(
    pjrt_client::Session& session, const RunOptions& o, const RunPlan& plan,
    bool donated_only,
    std::vector<std::vector<pjrt_client::Buffer>>* arguments) {
  arguments->resize(plan.devices.size());
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    (*arguments)[d].resize(plan.inputs.size());
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const bool is_donated =
          std::find(plan.donated.begin(), plan.donated.end(),
                    static_cast<int>(i)) != plan.donated.end();
      if (donated_only && !is_donated) continue;
      const HostArray& input = plan.inputs[i];
      auto buffer =
          session.Upload(input.dtype, input.dims, input.data, plan.devices[d]);
      if (!buffer.ok()) {
        return absl::Status(
            buffer.status().code(),
            absl::StrFormat("uploading input %d (%s) to device %d: %s", i,
                            o.inputs[i], plan.devices[d],
                            buffer.status().message()));
      }
      (*arguments)[d][i] = *std::move(buffer);
    }
  }
  return absl::OkStatus();
}

// Runs the program o.repeat times, each timed from the Execute call until
// every result is ready; returns the last run's results.
absl::StatusOr<std::vector<std::vector<pjrt_client::Buffer>>> RunRepeatedly(
    pjrt_client::Session& session, const pjrt_client::Executable& executable,
    const RunOptions& o, const RunPlan& plan,
    std::vector<double>* run_seconds) {
  std::vector<std::vector<pjrt_client::Buffer>> arguments;
  PJRT_RETURN_IF_ERROR(UploadArguments(session, o, plan, false, &arguments));
  std::vector<std::vector<pjrt_client::Buffer>> results;
  for (int r = 0; r < o.repeat; ++r) {
    results.clear();  // frees the previous run's results
    if (r > 0 && !plan.donated.empty()) {
      PJRT_RETURN_IF_ERROR(UploadArguments(session, o, plan, true, &arguments));
    }
    std::vector<std::vector<const pjrt_client::Buffer*>> argument_ptrs(
        plan.devices.size());
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      for (const auto& b : arguments[d]) argument_ptrs[d].push_back(&b);
    }
    absl::Time start = absl::Now();
    absl::StatusOr<std::vector<std::vector<pjrt_client::Buffer>>> run;
    if (plan.replicated) {
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
    if (!run.ok()) return run.status();
    for (const auto& device_results : *run) {
      for (const auto& result : device_results) {
        absl::Status ready = result.BlockUntilReady();
        if (!ready.ok()) {
          return absl::Status(
              ready.code(),
              absl::StrFormat("run %d of %s failed: %s", r, executable.name(),
                              ready.message()));
        }
      }
    }
    run_seconds->push_back(absl::ToDoubleSeconds(absl::Now() - start));
    results = *std::move(run);
  }
  return results;
}

// The results as rows of `table` and entries of `docs`, written to
// o.output_dir when given. Returns the exit code.
int WriteResults(const GlobalOptions& g, const RunOptions& o,
                 const RunPlan& plan, const pjrt_client::Executable& executable,
                 const std::vector<std::vector<pjrt_client::Buffer>>& results,
                 Table* table, json* docs, bool* any_bf16) {
  const int partitions = std::max(1, executable.num_partitions());
  for (size_t d = 0; d < results.size(); ++d) {
    const int replica = static_cast<int>(d) / partitions;
    const int partition = static_cast<int>(d) % partitions;
    std::filesystem::path dir = o.output_dir;
    if (plan.replicated && !dir.empty()) {
      dir /= absl::StrFormat("replica%d_partition%d", replica, partition);
    }
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return FailUsage(
            g, absl::Status(absl::ErrnoToStatusCode(ec.value()),
                            absl::StrFormat("cannot create %s: %s",
                                            dir.string(), ec.message())));
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
      const pjrt_client::ArrayShape shape{array.dtype, array.dims};
      std::string file;
      if (!dir.empty()) {
        file = (dir / absl::StrFormat("out%d.npy", i)).string();
        absl::Status written = WriteNpy(file, array);
        if (!written.ok()) return FailUsage(g, written);
      }
      const bool bf16 = array.dtype == pjrt_client::DType::kBF16;
      *any_bf16 |= bf16;
      json doc = ShapeJson(shape);
      doc["index"] = i;
      if (plan.replicated) {
        doc["replica"] = replica;
        doc["partition"] = partition;
      }
      doc["device"] = plan.devices[d];
      doc["file"] = file.empty() ? json(nullptr) : json(file);
      doc["npy_dtype"] = NpyDescr(array.dtype);
      if (bf16) doc["note"] = "bf16 written as uint16 bit patterns ('<u2')";
      docs->push_back(doc);
      std::vector<std::string> row = {
          absl::StrCat(i), pjrt_client::ShapeToString(shape),
          file.empty() ? "-" : file + (bf16 ? " (bf16 bits as <u2)" : ""),
          Preview(array)};
      if (plan.replicated) {
        row.insert(row.begin(), {absl::StrCat(replica), absl::StrCat(partition),
                                 absl::StrCat(plan.devices[d])});
      }
      table->AddRow(row);
    }
  }
  return kExitOk;
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
  const pjrt_client::CompileOptions compile_options{
      .num_replicas = o.replicas, .num_partitions = o.partitions};
  auto program = CompileFile(g, o.file, &exit_code, compile_options);
  if (!program) return exit_code;
  const pjrt_client::Executable& executable = program->executable;
  auto plan = PlanRun(o, executable, std::move(inputs));
  if (!plan.ok()) return FailUsage(g, plan.status());

  std::vector<double> run_seconds;
  auto results =
      RunRepeatedly(*program->session, executable, o, *plan, &run_seconds);
  if (!results.ok()) return Fail(g, results.status());
  std::vector<double> sorted = run_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      sorted.size() % 2 == 1
          ? sorted[sorted.size() / 2]
          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;

  json result_docs = json::array();
  std::vector<std::string> headers = {"RESULT", "SHAPE", "FILE", "VALUES"};
  if (plan->replicated) {
    headers.insert(headers.begin(), {"REPLICA", "PARTITION", "DEVICE"});
  }
  Table table(headers);
  bool any_bf16 = false;
  exit_code = WriteResults(g, o, *plan, executable, *results, &table,
                           &result_docs, &any_bf16);
  if (exit_code != kExitOk) return exit_code;

  if (g.json) {
    json doc = SignatureJson(o.file, executable);
    doc["devices"] = plan->devices;
    if (!plan->replicated) doc["device"] = o.device;
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
        absl::StrFormat(
            "%s (%s)",
            Seconds(absl::ToDoubleSeconds(executable.compile_time())),
            executable.cache_hit() ? "cache hit" : "compiled")},
       {plan->replicated ? "devices" : "device",
        plan->replicated
            ? absl::StrFormat("%s (%d replica(s) x %d partition(s))",
                              absl::StrJoin(plan->devices, ", "),
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

}  // namespace

void AddRunCommand(CLI::App& app, const GlobalOptions& g, Command* command) {
  auto o = std::make_shared<RunOptions>();
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
  run->add_option("FILE", o->file, "StableHLO (.mlir) or HLO text file")
      ->required()
      ->check(CLI::ExistingFile);
  run->add_option("--input", o->inputs,
                  "A .npy file for the next parameter (repeat the flag)")
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  run->add_option("--output-dir", o->output_dir,
                  "Write the results here as out0.npy, out1.npy, ... "
                  "(created if missing)");
  auto* device_option =
      run->add_option("--device", o->device,
                      "Global id of the device to run a single-device "
                      "program on (default 0)")
          ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  run->add_option("--replicas", o->replicas,
                  "Number of replicas (default: the module header's "
                  "replica_count, else 1)")
      ->check(WholeNumber(1, std::numeric_limits<int>::max()));
  run->add_option("--partitions", o->partitions,
                  "Number of partitions per replica (default: the module "
                  "header's num_partitions, else 1)")
      ->check(WholeNumber(1, std::numeric_limits<int>::max()));
  run->add_option("--repeat", o->repeat,
                  "Run N times and report min/median/max (default 1)")
      ->check(WholeNumber(1, std::numeric_limits<int>::max()));
  run->callback([&g, o, device_option, command] {
    o->device_given = device_option->count() > 0;
    *command = [&g, o] { return RunRun(g, *o); };
  });
}

}  // namespace pjrt::cli
