#include "runtime/executable.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "compiler/backend.h"
#include "compiler/collectives.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/stablehlo.h"
#include "hlo/verifier.h"
#include "runtime/execute.h"

namespace pjrt::runtime {
namespace {

// Folds one run's duration into a moving average that follows the last few
// runs (each weighs a quarter). Concurrent runs may lose an update: the
// average is a hint, not an account.
void RecordRunTime(std::atomic<int64_t>& recent,
                   std::chrono::steady_clock::duration took) {
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
  const int64_t old = recent.load(std::memory_order_relaxed);
  recent.store(old < 0 ? ns : old - old / 4 + ns / 4,
               std::memory_order_relaxed);
}

int CountLeaves(const hlo::Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int n = 0;
  for (const hlo::Shape& e : shape.tuple_shapes()) n += CountLeaves(e);
  return n;
}

// The flattened index, within `shape`'s leaves, of the leaf at `path`.
absl::StatusOr<int> LeafIndex(const hlo::Shape& shape,
                              absl::Span<const int64_t> path) {
  if (path.empty()) {
    if (shape.IsTuple()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "input_output_alias names the tuple %s, not an array in it",
          shape.ToString()));
    }
    return 0;
  }
  if (!shape.IsTuple()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "input_output_alias index {%d} names an element of %s, which is not a "
        "tuple (an array is aliased as {})",
        path[0], shape.ToString()));
  }
  if (path[0] < 0 ||
      path[0] >= static_cast<int64_t>(shape.tuple_shapes().size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("input_output_alias index %d is out of range for %s",
                        path[0], shape.ToString()));
  }
  int offset = 0;
  for (int64_t i = 0; i < path[0]; ++i)
    offset += CountLeaves(shape.tuple_shapes()[i]);
  PJRT_ASSIGN_OR_RETURN(
      int inner, LeafIndex(shape.tuple_shapes()[path[0]], path.subspan(1)));
  return offset + inner;
}

void FlattenTuple(Buffer* buffer, std::vector<Buffer*>* out) {
  if (!buffer->is_tuple()) {
    out->push_back(buffer);
    return;
  }
  for (const auto& e : buffer->tuple_elements()) FlattenTuple(e.get(), out);
}

std::string Participant(int replica, int partition) {
  return absl::StrFormat("replica %d partition %d", replica, partition);
}

}  // namespace

namespace {

// Without a way to move data between tasks (no transport, or a platform
// whose collectives cannot reach another task yet), refuses a program
// whose collective groups join devices of different tasks.
absl::Status CheckCollectivesStayInTasks(
    const compiler::Program& program,
    const std::vector<std::vector<int>>& assignment,
    const absl::flat_hash_map<int, int>& task_of, absl::string_view why) {
  const int R = static_cast<int>(assignment.size());
  const int P = static_cast<int>(assignment[0].size());
  for (const compiler::CollectiveOp* collective : program.collectives()) {
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) {
        compiler::RunContext context;
        context.replica_id = r;
        context.partition_id = p;
        context.num_replicas = R;
        context.num_partitions = P;
        std::vector<int64_t> group;
        int index = 0;
        PJRT_RETURN_IF_ERROR(
            compiler::CollectiveGroup(*collective, context, &group, &index));
        const int mine = task_of.at(assignment[r][p]);
        for (int64_t id : group) {
          const int device = assignment[id / P][id % P];
          const int theirs = task_of.at(device);
          if (theirs == mine) continue;
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s joins %s on device %d (task %d) with %s on device %d (task "
              "%d); %s: assign the devices of each replica group to one task",
              collective->name, Participant(r, p), assignment[r][p], mine,
              Participant(static_cast<int>(id / P), static_cast<int>(id % P)),
              device, theirs, why));
        }
      }
    }
  }
  return absl::OkStatus();
}

// A fingerprint of a program's text and placement that every task computes
// alike (FNV-1a, 64 bits): part of a launch's identity across tasks.
uint64_t ProgramFingerprint(absl::string_view text,
                            const std::vector<std::vector<int>>& assignment) {
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(text);
  for (const auto& row : assignment)
    mix(absl::StrCat("|", absl::StrJoin(row, ",")));
  return h;
}

// The number of replicas or partitions: `requested` by the options, else
// the module header's (`header`, named `header_name` in `config`).
absl::StatusOr<int> PickCount(const hlo::ModuleConfig& config, int requested,
                              int64_t header, const char* what,
                              const char* header_name) {
  if (requested < 0 || requested > hlo::kMaxProgramDevices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is %d; it must lie in [1, %d] (or 0 for the module's %s)", what,
        requested, hlo::kMaxProgramDevices, header_name));
  }
  bool header_given = false;
  for (const auto& [key, value] : config.raw)
    header_given |= key == header_name;
  if (requested > 0 && header_given && requested != header) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d disagrees with the module's %s=%d", what,
                        requested, header_name, header));
  }
  return requested > 0 ? requested : static_cast<int>(header);
}

// The device assignment that `options` gives (or, for a whole-cluster
// program, devices 0, 1, ... of every task), checked: R rows of P known
// devices (of this task or of `options.remote_devices`), none twice, all of
// the client's platform.
absl::StatusOr<std::vector<std::vector<int>>> CheckedAssignment(
    Client* client, const CompileOptions& options, int R, int P) {
  // The cluster-wide default: devices 0, 1, ... of every task.
  std::vector<std::vector<int>> cluster_default;
  if (options.device_assignment.empty()) {
    cluster_default.assign(R, std::vector<int>(P));
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) cluster_default[r][p] = r * P + p;
    }
  }
  const auto& a = options.device_assignment.empty() ? cluster_default
                                                    : options.device_assignment;
  if (static_cast<int>(a.size()) != R) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the device assignment has %d row(s) but the program has %d "
        "replica(s); give one row per replica",
        a.size(), R));
  }
  absl::flat_hash_map<int, std::pair<int, int>> seen;
  for (int r = 0; r < R; ++r) {
    if (static_cast<int>(a[r].size()) != P) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "row %d of the device assignment has %d device(s) but the program "
          "has %d partition(s)",
          r, a[r].size(), P));
    }
    for (int p = 0; p < P; ++p) {
      std::string platform;
      auto device = client->LookupDevice(a[r][p]);
      if (device.ok()) {
        platform = std::string((*device)->platform_name());
      } else {
        const CompileOptions::RemoteDevice* remote = nullptr;
        for (const auto& d : options.remote_devices) {
          if (d.id == a[r][p]) remote = &d;
        }
        if (remote == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrFormat("the device assignment puts %s on device %d: %s",
                              Participant(r, p), a[r][p],
                              options.remote_devices.empty()
                                  ? std::string(device.status().message())
                                  : "no task of the cluster has that device"));
        }
        platform = remote->platform;
      }
      auto [it, inserted] = seen.emplace(a[r][p], std::make_pair(r, p));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "device %d appears twice in the device assignment (%s and %s)",
            a[r][p], Participant(it->second.first, it->second.second),
            Participant(r, p)));
      }
      if (platform != client->platform_name()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "the device assignment mixes platforms: device %d is %s, not %s",
            a[r][p], platform, client->platform_name()));
      }
    }
  }
  return a;
}

// The device assignment of an R x P program: none for a portable one, the
// checked one of `options` (see CheckedAssignment), else the client's first
// R * P devices.
absl::StatusOr<std::vector<std::vector<int>>> DeviceAssignment(
    Client* client, const CompileOptions& options, int R, int P) {
  if (options.portable) {
    if (R != 1 || P != 1 || !options.device_assignment.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a portable executable has one replica, one partition and no device "
          "assignment; this one has %d replica(s), %d partition(s)%s",
          R, P, options.device_assignment.empty() ? "" : " and an assignment"));
    }
    return std::vector<std::vector<int>>();
  }
  if (!options.device_assignment.empty() ||
      (options.whole_cluster && R * P > 1)) {
    return CheckedAssignment(client, options, R, P);
  }
  const int needed = R * P;
  if (needed > static_cast<int>(client->devices().size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the program runs on %d devices (%d replica(s) x %d partition(s)) "
        "but this daemon has %d; ask for fewer replicas or start pjrtd with "
        "more devices (--host-devices)",
        needed, R, P, client->devices().size()));
  }
  std::vector<std::vector<int>> assignment(R, std::vector<int>(P));
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) {
      assignment[r][p] = client->devices()[r * P + p]->id();
    }
  }
  return assignment;
}

// Where the participants of a program whose collective groups span tasks
// run, for exchanges through the client's transport; null (after checking
// that no group joins devices of different tasks) where there is no such
// exchange. `task_of` maps each device id of `assignment` to its task.
absl::StatusOr<std::shared_ptr<const compiler::TaskPlacement>> PlaceAcrossTasks(
    Client* client, const compiler::Program& program,
    absl::string_view hlo_text, const std::vector<std::vector<int>>& assignment,
    const absl::flat_hash_map<int, int>& task_of) {
  // Host programs exchange across tasks through the client's transport.
  if (client->task_transport() == nullptr ||
      client->platform_name() != "host") {
    PJRT_RETURN_IF_ERROR(CheckCollectivesStayInTasks(
        program, assignment, task_of,
        client->task_transport() == nullptr
            ? "this daemon has no transport between tasks"
            : "collectives across tasks run on the host platform only "
              "(NCCL between tasks is not built yet)"));
    return nullptr;
  }
  auto placement = std::make_shared<compiler::TaskPlacement>();
  placement->transport = client->task_transport();
  placement->self = client->task_id();
  for (const auto& row : assignment) {
    for (int device : row) placement->task_of.push_back(task_of.at(device));
  }
  placement->launch =
      absl::StrFormat("%016x", ProgramFingerprint(hlo_text, assignment));
  return placement;
}

}  // namespace

absl::Status Executable::SetSignature(
    const hlo::Module& module, const CompileOptions& options,
    std::vector<std::pair<int, int>>* aliases) {
  const hlo::Computation& entry = *module.entry();
  int leaves = 0;
  for (const hlo::Instruction* p : entry.parameters()) {
    parameter_shapes_.push_back(p->shape());
    leaf_begin_.push_back(leaves);
    leaves += CountLeaves(p->shape());
  }
  result_shape_ = entry.root()->shape();
  result_is_tuple_ = result_shape_.IsTuple();
  for (int param : options.non_donatable_parameters) {
    if (param < 0 || param >= static_cast<int>(parameter_shapes_.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "non_donatable_parameters names parameter %d, but the program has "
          "%d parameters (numbered from 0)",
          param, parameter_shapes_.size()));
    }
  }
  absl::flat_hash_set<int> donated_leaves;
  for (const hlo::InputOutputAlias& alias :
       module.config().input_output_aliases) {
    const int param = static_cast<int>(alias.parameter_number);
    if (param < 0 || param >= static_cast<int>(parameter_shapes_.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "input_output_alias names parameter %d, but the program has %d",
          param, parameter_shapes_.size()));
    }
    if (std::find(options.non_donatable_parameters.begin(),
                  options.non_donatable_parameters.end(),
                  param) != options.non_donatable_parameters.end()) {
      continue;
    }
    PJRT_ASSIGN_OR_RETURN(
        int leaf, LeafIndex(parameter_shapes_[param], alias.parameter_index));
    leaf += leaf_begin_[param];
    PJRT_ASSIGN_OR_RETURN(int result,
                          LeafIndex(result_shape_, alias.output_index));
    if (!donated_leaves.insert(leaf).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "input_output_alias gives parameter %d to two outputs", param));
    }
    donations_.emplace_back(leaf, result);
    aliases->emplace_back(result, leaf);
    if (std::find(donated_parameters_.begin(), donated_parameters_.end(),
                  param) == donated_parameters_.end()) {
      donated_parameters_.push_back(param);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Executable>> Executable::Compile(
    Client* client, absl::string_view hlo_text, const CompileOptions& options) {
  const absl::Time start = absl::Now();
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                        hlo::ParseAndVerifyProgram(hlo_text, options.format));
  PJRT_ASSIGN_OR_RETURN(const compiler::Backend* backend, client->backend());
  std::shared_ptr<Executable> e(new Executable());
  e->client_ = client;
  e->name_ = module->name();
  e->collective_timeout_ = options.collective_timeout;

  // Replicas and partitions: the options, else the module header.
  const hlo::ModuleConfig& config = module->config();
  PJRT_ASSIGN_OR_RETURN(
      e->num_replicas_,
      PickCount(config, options.num_replicas, config.replica_count,
                "the number of replicas", "replica_count"));
  PJRT_ASSIGN_OR_RETURN(
      e->num_partitions_,
      PickCount(config, options.num_partitions, config.num_partitions,
                "the number of partitions", "num_partitions"));
  const int R = e->num_replicas_, P = e->num_partitions_;
  // Each is at most kMaxProgramDevices; so must their product be, before
  // anything is sized by it.
  if (int64_t{R} * P > hlo::kMaxProgramDevices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d replica(s) x %d partition(s) = %d devices; a program may span at "
        "most %d",
        R, P, int64_t{R} * P, hlo::kMaxProgramDevices));
  }
  e->portable_ = options.portable;
  PJRT_ASSIGN_OR_RETURN(e->device_assignment_,
                        DeviceAssignment(client, options, R, P));
  // This task runs the replicas and partitions on its own devices.
  absl::flat_hash_map<int, int> task_of;  // device id -> task, for messages
  for (const auto& d : options.remote_devices) task_of[d.id] = d.task_id;
  for (int r = 0; r < R && !e->portable_; ++r) {
    for (int p = 0; p < P; ++p) {
      auto device = client->LookupDevice(e->device_assignment_[r][p]);
      if (!device.ok()) continue;
      e->addressable_devices_.push_back(*device);
      e->addressable_participants_.emplace_back(r, p);
      task_of[(*device)->id()] = client->task_id();
    }
  }
  if (!e->portable_ && e->addressable_devices_.empty() &&
      !options.whole_cluster) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no device of the assignment belongs to this task (%d); compile the "
        "program on the tasks whose devices it names",
        client->task_id()));
  }
  const bool spans_tasks =
      !e->portable_ &&
      static_cast<int>(e->addressable_devices_.size()) != R * P;

  // Parameters and their leaves; donations from input_output_alias.
  compiler::BackendOptions compile_options;
  PJRT_RETURN_IF_ERROR(
      e->SetSignature(*module, options, &compile_options.aliases));
  // Backend-neutral rewrites (hlo/passes.h), then the backend.
  PJRT_RETURN_IF_ERROR(
      hlo::SimplifyModule(module.get(), backend->simplify_options()).status());
  PJRT_ASSIGN_OR_RETURN(std::unique_ptr<compiler::Program> program,
                        backend->Compile(*module, compile_options));
  const std::vector<const compiler::CollectiveOp*> collectives =
      program->collectives();
  PJRT_RETURN_IF_ERROR(compiler::CheckCollectives(collectives, R, P));
  if (spans_tasks && !collectives.empty()) {
    PJRT_ASSIGN_OR_RETURN(e->placement_,
                          PlaceAcrossTasks(client, *program, hlo_text,
                                           e->device_assignment_, task_of));
  }
  e->has_collectives_ = !collectives.empty();
  e->result_shapes_ = program->result_shapes();
  e->program_ = std::move(program);
  e->compile_time_ = absl::Now() - start;
  return e;
}

Executable::~Executable() = default;

int64_t Executable::scratch_bytes() const { return program_->scratch_bytes(); }

absl::Duration Executable::recent_run_time() const {
  const int64_t ns = recent_run_ns_->load(std::memory_order_relaxed);
  return ns < 0 ? absl::InfiniteDuration() : absl::Nanoseconds(ns);
}

int64_t Executable::host_memory_bytes() const {
  return static_cast<int64_t>(sizeof(*this)) + program_->host_memory_bytes();
}

absl::StatusOr<std::vector<Buffer*>> Executable::FlattenArguments(
    absl::Span<Buffer* const> arguments, Device* device,
    const ExecuteRunOptions& options, const std::string& where) const {
  const auto invalid = [&](const std::string& message) {
    return absl::InvalidArgumentError(where + message);
  };
  // Each argument and the shape it must have.
  std::vector<std::pair<Buffer*, hlo::Shape>> expected;
  const bool one_tuple =
      parameter_shapes_.size() == 1 && parameter_shapes_[0].IsTuple();
  if (one_tuple && !options.arguments_are_tupled) {
    // The runtime tuples the argument list.
    const auto& elements = parameter_shapes_[0].tuple_shapes();
    if (arguments.size() != elements.size()) {
      return invalid(absl::StrFormat(
          "executable %s takes one tuple %s: pass its %d elements as "
          "arguments (or one tuple buffer with arguments_are_tupled), got %d "
          "argument(s)",
          name_, parameter_shapes_[0].ToString(), elements.size(),
          arguments.size()));
    }
    for (size_t i = 0; i < arguments.size(); ++i) {
      expected.emplace_back(arguments[i], elements[i]);
    }
  } else {
    if (options.arguments_are_tupled && !one_tuple) {
      return invalid(absl::StrFormat(
          "arguments_are_tupled is set but executable %s does not take a "
          "single tuple parameter",
          name_));
    }
    if (arguments.size() != parameter_shapes_.size()) {
      return invalid(
          absl::StrFormat("executable %s takes %d argument(s), got %d", name_,
                          parameter_shapes_.size(), arguments.size()));
    }
    for (size_t i = 0; i < arguments.size(); ++i) {
      expected.emplace_back(arguments[i], parameter_shapes_[i]);
    }
  }
  std::vector<Buffer*> leaves;
  for (size_t i = 0; i < expected.size(); ++i) {
    Buffer* arg = expected[i].first;
    const hlo::Shape& want = expected[i].second;
    if (arg == nullptr)
      return invalid(absl::StrFormat("argument %d is missing", i));
    const hlo::Shape& got = arg->shape();
    if (want.IsArray() && got.IsArray() &&
        got.element_type() != want.element_type()) {
      return invalid(absl::StrFormat(
          "argument %d has dtype %s, but parameter %d of %s is %s", i,
          hlo::PrimitiveTypeName(got.element_type()), i, name_,
          want.ToString()));
    }
    if (got != want) {
      return invalid(absl::StrFormat(
          "argument %d has shape %s, but parameter %d of %s is %s", i,
          got.ToString(), i, name_, want.ToString()));
    }
    if (arg->device() != device) {
      return invalid(absl::StrFormat(
          "argument %d is on device %s, but this run is on device %s", i,
          arg->device()->DebugString(), device->DebugString()));
    }
    FlattenTuple(arg, &leaves);
  }
  return leaves;
}

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Executable::RunParticipant(
    absl::Span<Buffer* const> leaves, Device* device, int replica,
    int partition, std::shared_ptr<compiler::CollectiveHub> hub,
    const ExecuteRunOptions& options, const std::string& where) {
  std::vector<ExecuteArgument> args;
  for (Buffer* leaf : leaves) args.push_back(ExecuteArgument{.buffer = leaf});
  std::vector<ExecuteResult> results;
  for (const hlo::Shape& shape : result_shapes_) {
    results.push_back(ExecuteResult{.shape = shape});
  }
  for (const auto& [leaf, result] : donations_) {
    args[leaf].donate = true;
    results[result].alias_argument = leaf;
  }
  std::shared_ptr<const compiler::Program> program = program_;
  const int64_t R = num_replicas_, P = num_partitions_;
  if (hub != nullptr) {
    // Refuses a second start of one part of the launch.
    absl::Status joined = hub->Join(replica * P + partition);
    if (!joined.ok()) {
      return absl::Status(joined.code(), where + std::string(joined.message()));
    }
  }
  Kernel kernel = [program, replica, partition, R, P, hub,
                   recent =
                       recent_run_ns_](const KernelArgs& k) -> absl::Status {
    compiler::RunContext context;
    context.arguments = k.arguments;
    context.results = k.results;
    context.scratch = k.scratch;
    context.stream = k.stream;
    context.prng_seed = k.prng_seed;
    context.replica_id = replica;
    context.partition_id = partition;
    context.num_replicas = R;
    context.num_partitions = P;
    context.collectives = hub.get();
    context.cancellation = k.cancellation;
    try {
      const auto start = std::chrono::steady_clock::now();
      absl::Status status = program->Run(context);
      // A run cut short (cancelled, failed) says nothing of the next.
      if (status.ok()) {
        RecordRunTime(*recent, std::chrono::steady_clock::now() - start);
      }
      return status;
    } catch (...) {
      // Peers waiting for this part must not wait out their timeout.
      if (hub != nullptr) {
        hub->Fail(replica * P + partition,
                  absl::InternalError("the run failed with an exception"));
      }
      throw;
    }
  };
  ExecuteOptions execute_options;
  execute_options.launch_id = options.launch_id;
  execute_options.scratch_bytes = program_->scratch_bytes();
  execute_options.cancellation = options.cancellation;
  execute_options.wait_cancellation = options.wait_cancellation;
  execute_options.own_stream = has_collectives_ && R * P > 1;
  execute_options.observer = options.observer;
  execute_options.run_inline_when_idle = options.run_inline_when_idle;
  if (hub != nullptr) {
    // Peers waiting for this part at a collective learn at once that it
    // will not come (its input failed), instead of waiting out the timeout.
    execute_options.argument_failed = [hub, replica, partition,
                                       P](const absl::Status& status) {
      hub->Fail(replica * P + partition,
                absl::Status(status.code(),
                             absl::StrCat("an argument of its run failed: ",
                                          status.message())));
    };
  }
  auto outputs = ExecuteOnDevice(client_, device, args, results,
                                 std::move(kernel), execute_options);
  if (!outputs.ok()) {
    absl::Status s = outputs.status();
    if (hub != nullptr) hub->Fail(replica * P + partition, s);
    return absl::Status(s.code(), where + std::string(s.message()));
  }
  return ShapeResults(*std::move(outputs), device, options);
}

std::vector<std::shared_ptr<Buffer>> Executable::ShapeResults(
    std::vector<std::shared_ptr<Buffer>> leaves, Device* device,
    const ExecuteRunOptions& options) const {
  if (options.untuple_result || !result_is_tuple_) return leaves;
  size_t next = 0;
  std::function<std::shared_ptr<Buffer>(const hlo::Shape&)> build =
      [&](const hlo::Shape& shape) -> std::shared_ptr<Buffer> {
    if (!shape.IsTuple()) return leaves[next++];
    std::vector<std::shared_ptr<Buffer>> elements;
    for (const hlo::Shape& e : shape.tuple_shapes())
      elements.push_back(build(e));
    return Buffer::MakeTuple(client_, device, std::move(elements));
  };
  return {build(result_shape_)};
}

std::shared_ptr<compiler::CollectiveHub> Executable::NewHub(
    int64_t launch_id) const {
  std::shared_ptr<const compiler::TaskPlacement> placement;
  if (placement_ != nullptr) {
    auto p = std::make_shared<compiler::TaskPlacement>(*placement_);
    p->launch = absl::StrCat(launch_id, ":", placement_->launch);
    placement = std::move(p);
  }
  return std::make_shared<compiler::CollectiveHub>(
      num_replicas_, num_partitions_, collective_timeout_,
      std::move(placement));
}

std::shared_ptr<compiler::CollectiveHub> Executable::HubFor(uint64_t scope,
                                                            int64_t launch_id) {
  MutexLock lock(&hubs_mu_);
  for (auto it = hubs_.begin(); it != hubs_.end();) {
    it = it->second.expired() ? hubs_.erase(it) : std::next(it);
  }
  const std::pair<uint64_t, int64_t> key{scope, launch_id};
  if (auto it = hubs_.find(key); it != hubs_.end()) {
    if (auto hub = it->second.lock()) return hub;
  }
  auto hub = NewHub(launch_id);
  hubs_[key] = hub;
  return hub;
}

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Executable::Execute(
    absl::Span<Buffer* const> arguments, Device* device,
    const ExecuteRunOptions& options) {
  if (num_replicas_ * num_partitions_ != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s runs on %d devices (%d replica(s) x %d partition(s)); "
        "execute it replicated or sharded",
        name_, num_replicas_ * num_partitions_, num_replicas_,
        num_partitions_));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<Buffer*> leaves,
                        FlattenArguments(arguments, device, options, ""));
  return RunParticipant(leaves, device, 0, 0, nullptr, options, "");
}

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>>
Executable::ExecutePortable(absl::Span<Buffer* const> arguments, Device* device,
                            const ExecuteRunOptions& options) {
  if (!portable_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s was not compiled as portable; compile it with "
        "portable=true, or execute it replicated or sharded",
        name_));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<Buffer*> leaves,
                        FlattenArguments(arguments, device, options, ""));
  return RunParticipant(leaves, device, 0, 0, nullptr, options, "");
}

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Executable::ExecuteSharded(
    absl::Span<Buffer* const> arguments, Device* device,
    const ExecuteRunOptions& options) {
  if (portable_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s is portable; execute it with ExecutePortable", name_));
  }
  if (num_replicas_ * num_partitions_ > 1 && options.launch_id == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s runs on %d devices; a sharded run needs a nonzero "
        "launch_id, the same in the calls for every device of the launch",
        name_, num_replicas_ * num_partitions_));
  }
  for (int r = 0; r < num_replicas_; ++r) {
    for (int p = 0; p < num_partitions_; ++p) {
      if (device_assignment_[r][p] != device->id()) continue;
      const std::string where = Participant(r, p) + ": ";
      PJRT_ASSIGN_OR_RETURN(
          std::vector<Buffer*> leaves,
          FlattenArguments(arguments, device, options, where));
      std::shared_ptr<compiler::CollectiveHub> hub;
      if (num_replicas_ * num_partitions_ > 1) {
        hub = HubFor(options.launch_scope, options.launch_id);
      }
      return RunParticipant(leaves, device, r, p, std::move(hub), options,
                            where);
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "device %d is not in the device assignment of executable %s",
      device->id(), name_));
}

absl::StatusOr<std::vector<std::vector<std::shared_ptr<Buffer>>>>
Executable::ExecuteReplicated(absl::Span<const std::vector<Buffer*>> arguments,
                              const ExecuteRunOptions& options) {
  if (portable_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s is portable; execute it with ExecutePortable", name_));
  }
  const int n = static_cast<int>(addressable_devices_.size());
  if (static_cast<int>(arguments.size()) != n) {
    std::vector<int> ids;
    for (Device* d : addressable_devices_) ids.push_back(d->id());
    return absl::InvalidArgumentError(absl::StrFormat(
        "executable %s takes one argument list per device: %d (devices %s), "
        "got %d",
        name_, n, absl::StrJoin(ids, ", "), arguments.size()));
  }
  // Check every participant before any runs.
  std::vector<std::vector<Buffer*>> leaves(n);
  for (int i = 0; i < n; ++i) {
    const auto [r, p] = addressable_participants_[i];
    PJRT_ASSIGN_OR_RETURN(
        leaves[i], FlattenArguments(arguments[i], addressable_devices_[i],
                                    options, Participant(r, p) + ": "));
  }
  ExecuteRunOptions run = options;
  if (run.launch_id == 0)
    run.launch_id = static_cast<int64_t>(SecureRandomId() >> 1);
  std::shared_ptr<compiler::CollectiveHub> hub;
  if (n > 1 || placement_ != nullptr) hub = NewHub(run.launch_id);
  std::vector<absl::StatusOr<std::vector<std::shared_ptr<Buffer>>>> results(
      n, absl::InternalError("not run"));
  // Each device's launch from its own thread: one blocking on its compute
  // semaphore does not hold back the others.
  std::vector<std::thread> threads;
  // An exception must not escape a thread (it would end the process), and
  // every thread started is joined whatever happens.
  const auto launch = [&](int i) {
    const auto [r, p] = addressable_participants_[i];
    try {
      results[i] = RunParticipant(leaves[i], addressable_devices_[i], r, p, hub,
                                  run, Participant(r, p) + ": ");
    } catch (const std::exception& e) {
      results[i] = absl::ResourceExhaustedError(
          absl::StrCat(Participant(r, p), ": the launch failed: ", e.what()));
      if (hub != nullptr)
        hub->Fail(int64_t{r} * num_partitions_ + p, results[i].status());
    }
  };
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (auto& t : threads) t.join();
    }
  } join_all{threads};
  for (int i = 1; i < n; ++i) {
    try {
      threads.emplace_back(launch, i);
    } catch (const std::system_error& e) {
      results[i] = absl::ResourceExhaustedError(absl::StrCat(
          "cannot start a thread for a device's part of the launch: ",
          e.what()));
      if (hub != nullptr) {
        const auto [r, p] = addressable_participants_[i];
        hub->Fail(int64_t{r} * num_partitions_ + p, results[i].status());
      }
    }
  }
  launch(0);
  for (auto& t : threads) t.join();
  threads.clear();
  std::vector<std::vector<std::shared_ptr<Buffer>>> out;
  for (int i = 0; i < n; ++i) {
    if (!results[i].ok()) return results[i].status();
    out.push_back(*std::move(results[i]));
  }
  return out;
}

}  // namespace pjrt::runtime
