// Executable: a compiled HLO program, ready to run on the client's devices.
//
// Compile parses the HLO text, verifies it and compiles it for the client's
// platform, for a number of replicas and partitions placed on devices by a
// device assignment (or portable: one replica, one partition, any device).
//
// Execution forms (as in PJRT):
//  - ExecuteReplicated runs every replica × partition of the assignment at
//    once, one argument list per device (replica-major), each device's run
//    launched from its own thread; they meet at collectives.
//  - ExecuteSharded runs only the replica/partition that maps to one device
//    (several calls with the same launch_id form one launch).
//  - ExecutePortable runs a portable executable on any device.
//  - Execute(args, device) is ExecutePortable for single-device programs.
// Each returns as soon as the work is enqueued: errors that can be seen now
// (arity, shapes, dtypes, devices, deleted or donated inputs) are returned
// and nothing runs; errors that happen while the program runs are bound to
// the results. A participant that fails makes every peer waiting for it at
// a collective fail too, within the collective timeout at the latest.
//
// Donation: parameters that input_output_alias aliases to outputs are
// donated: the output reuses the argument's memory and the argument buffer
// becomes invalid (FAILED_PRECONDITION if used again), unless listed in
// CompileOptions::non_donatable_parameters (then they are copied).
//
// Tuples: a program with one tuple parameter takes the tuple's elements as
// its argument list, or one tuple buffer with arguments_are_tupled. Results
// are one buffer per element of a tuple root (nested tuples flattened) when
// untuple_result is set, else one tuple buffer.
//
// Thread-safe; one Executable may run on several devices at once.
#ifndef PJRT_RUNTIME_EXECUTABLE_H_
#define PJRT_RUNTIME_EXECUTABLE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/cancellation.h"
#include "base/mutex.h"
#include "compiler/program.h"
#include "hlo/ir.h"
#include "hlo/shape.h"
#include "hlo/stablehlo.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrt::compiler {
class CollectiveHub;
struct TaskPlacement;
}  // namespace pjrt::compiler

namespace pjrt::runtime {

class RunObserver;  // runtime/execute.h

struct CompileOptions {
  // 0 means the module header's replica_count / num_partitions (default 1).
  int num_replicas = 0;
  int num_partitions = 0;
  // device_assignment[replica][partition] = global device id. Empty means
  // the default: replica r, partition p on device r * num_partitions + p.
  std::vector<std::vector<int>> device_assignment;
  // No assignment: one replica, one partition, run on any device.
  bool portable = false;
  // Entry parameters that input_output_alias would donate but that must be
  // copied instead (the caller keeps using the argument).
  std::vector<int> non_donatable_parameters;
  // Bound on any wait for a peer at a collective.
  absl::Duration collective_timeout = absl::Seconds(30);
  // How to read the program text; kAuto detects HLO or StableHLO.
  hlo::ProgramFormat format = hlo::ProgramFormat::kAuto;
  // Devices of the other tasks of a cluster, which an assignment may name:
  // this task runs only the replicas and partitions on its own devices.
  struct RemoteDevice {
    int id = 0;
    int task_id = 0;
    std::string platform;
  };
  std::vector<RemoteDevice> remote_devices;
  // For a session that drives the whole cluster: a program on more than one
  // device without an assignment gets the cluster's devices 0, 1, ... (as
  // the protocol's default says), not this task's, and an assignment that
  // names no device of this task compiles (this task then runs no part).
  bool whole_cluster = false;
};

struct ExecuteRunOptions {
  // Identifies one multi-device launch; 0 lets ExecuteReplicated choose.
  int64_t launch_id = 0;
  // Sharded calls join one launch only when they agree on (launch_scope,
  // launch_id): the daemon gives each session its own scope, so that a
  // session can never join (read or write the buffers of) another session's
  // launch, even when both share the executable through the compile cache.
  uint64_t launch_scope = 0;
  // The runs stop once this is cancelled, and their results get the
  // reason; may be null (the daemon passes the session's).
  std::shared_ptr<const Cancellation> cancellation;
  // The call's own waits give up once this is cancelled (see
  // ExecuteOptions::wait_cancellation); may be null.
  const Cancellation* wait_cancellation = nullptr;
  // The single tuple argument is given as one tuple buffer.
  bool arguments_are_tupled = false;
  // A tuple root comes back as one buffer per element (else one tuple
  // buffer).
  bool untuple_result = true;
  // Told of each device's run once it is done; may be null.
  std::shared_ptr<RunObserver> observer;
  // Run each device's part on the calling thread while that device is idle
  // instead of handing it to the device's stream: two thread switches fewer
  // per run, and the results are ready when the call returns. For a caller
  // that waits for the results anyway. Programs with collectives always run
  // on their own streams.
  bool run_inline_when_idle = false;
};

class Executable {
 public:
  // Parse errors and verification errors are INVALID_ARGUMENT with line,
  // column and a caret; unsupported ops are UNIMPLEMENTED naming the op and
  // its line; a bad assignment is INVALID_ARGUMENT saying what is wrong.
  static absl::StatusOr<std::shared_ptr<Executable>> Compile(
      Client* client, absl::string_view hlo_text,
      const CompileOptions& options = {});

  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // The HloModule's name.
  const std::string& name() const { return name_; }
  // Shapes of the entry computation's parameters (tuples as they are).
  const std::vector<hlo::Shape>& parameter_shapes() const {
    return parameter_shapes_;
  }
  // One shape per result: the root's, or each element of a tuple root (in
  // order, nested tuples flattened).
  const std::vector<hlo::Shape>& result_shapes() const {
    return result_shapes_;
  }
  // The root's shape.
  const hlo::Shape& result_shape() const { return result_shape_; }
  // True when the root is a tuple (its elements are the results).
  bool result_is_tuple() const { return result_is_tuple_; }
  absl::Duration compile_time() const { return compile_time_; }
  // Scratch memory one run needs on the device.
  int64_t scratch_bytes() const;
  // Host memory the compiled program holds, roughly (for caches).
  int64_t host_memory_bytes() const;

  int num_replicas() const { return num_replicas_; }
  int num_partitions() const { return num_partitions_; }
  bool portable() const { return portable_; }
  // [replica][partition] -> device id; empty when portable.
  const std::vector<std::vector<int>>& device_assignment() const {
    return device_assignment_;
  }
  // The devices of the assignment that this task owns, replica-major (what
  // ExecuteReplicated takes one argument list for). All of them unless the
  // assignment spans the tasks of a cluster.
  const std::vector<Device*>& addressable_devices() const {
    return addressable_devices_;
  }
  // Entry parameters whose arguments are donated.
  const std::vector<int>& donated_parameters() const {
    return donated_parameters_;
  }
  // How long the program's runs have taken lately (a moving average over
  // the last few that finished, of the kernel's time on the stream: the
  // run itself on the host platform, its launches on CUDA);
  // InfiniteDuration until the first run ends.
  absl::Duration recent_run_time() const;

  // Single-device programs only: runs on `device` (any device).
  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> Execute(
      absl::Span<Buffer* const> arguments, Device* device,
      const ExecuteRunOptions& options = {});

  // One argument list per addressable device, in addressable_devices()
  // order; returns one result list per device in the same order. An error
  // names the replica and partition it concerns.
  absl::StatusOr<std::vector<std::vector<std::shared_ptr<Buffer>>>>
  ExecuteReplicated(absl::Span<const std::vector<Buffer*>> arguments,
                    const ExecuteRunOptions& options = {});

  // Runs only the replica/partition assigned to `device`.
  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> ExecuteSharded(
      absl::Span<Buffer* const> arguments, Device* device,
      const ExecuteRunOptions& options = {});

  // Runs a portable executable on `device`; INVALID_ARGUMENT for one that
  // was not compiled portable.
  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> ExecutePortable(
      absl::Span<Buffer* const> arguments, Device* device,
      const ExecuteRunOptions& options = {});

 private:
  Executable() = default;

  struct Launch;
  // Sets the entry's parameter and result shapes, the parameters' leaves and
  // the donations that the module's input_output_alias asks for (unless
  // `options` makes the parameter non-donatable); appends each donation to
  // `aliases` as (result leaf, parameter leaf) for the backend.
  absl::Status SetSignature(const hlo::Module& module,
                            const CompileOptions& options,
                            std::vector<std::pair<int, int>>* aliases);
  // Checks and flattens one participant's arguments into the program's
  // leaves; `where` prefixes messages ("replica 1 partition 0: ").
  absl::StatusOr<std::vector<Buffer*>> FlattenArguments(
      absl::Span<Buffer* const> arguments, Device* device,
      const ExecuteRunOptions& options, const std::string& where) const;
  // Enqueues one participant.
  absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> RunParticipant(
      absl::Span<Buffer* const> leaves, Device* device, int replica,
      int partition, std::shared_ptr<compiler::CollectiveHub> hub,
      const ExecuteRunOptions& options, const std::string& where);
  // A new hub for launch `launch_id`.
  std::shared_ptr<compiler::CollectiveHub> NewHub(int64_t launch_id) const;
  // The hub shared by every participant of launch `launch_id` of `scope`.
  std::shared_ptr<compiler::CollectiveHub> HubFor(uint64_t scope,
                                                  int64_t launch_id);
  std::vector<std::shared_ptr<Buffer>> ShapeResults(
      std::vector<std::shared_ptr<Buffer>> leaves, Device* device,
      const ExecuteRunOptions& options) const;

  Client* client_ = nullptr;
  std::string name_;
  std::vector<hlo::Shape> parameter_shapes_;
  std::vector<hlo::Shape> result_shapes_;
  hlo::Shape result_shape_;
  bool result_is_tuple_ = false;
  absl::Duration compile_time_;
  std::shared_ptr<const compiler::Program> program_;

  int num_replicas_ = 1;
  int num_partitions_ = 1;
  bool portable_ = false;
  absl::Duration collective_timeout_;
  std::vector<std::vector<int>> device_assignment_;
  std::vector<Device*> addressable_devices_;
  // (replica, partition) of each addressable device.
  std::vector<std::pair<int, int>> addressable_participants_;
  std::vector<int> donated_parameters_;
  // (leaf parameter index, flattened result index) of each donation.
  std::vector<std::pair<int, int>> donations_;
  // Program leaves per entry parameter.
  std::vector<int> leaf_begin_;

  // Whether the program meets peers at collectives (then each participant
  // runs on a stream of its own; see ExecuteOptions::own_stream).
  bool has_collectives_ = false;
  // Set when collective groups span the tasks of a cluster: where each
  // participant runs; each launch's hub gets a copy naming the launch.
  std::shared_ptr<const compiler::TaskPlacement> placement_;

  // recent_run_time() in nanoseconds, -1 before the first run ends; shared
  // with the kernels, which may end after the Executable is gone.
  std::shared_ptr<std::atomic<int64_t>> recent_run_ns_ =
      std::make_shared<std::atomic<int64_t>>(-1);

  Mutex hubs_mu_;
  // By (launch_scope, launch_id).
  std::map<std::pair<uint64_t, int64_t>, std::weak_ptr<compiler::CollectiveHub>>
      hubs_ ABSL_GUARDED_BY(hubs_mu_);
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_EXECUTABLE_H_
