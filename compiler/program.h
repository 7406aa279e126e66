// Program: a compiled HLO module, as the runtime runs it. Platform-neutral;
// a Backend (backend.h) builds them.
//
// Thread-safe: Run may be called concurrently (each call with its own
// memory).
#ifndef PJRT_COMPILER_PROGRAM_H_
#define PJRT_COMPILER_PROGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/cancellation.h"
#include "device/stream.h"
#include "hlo/shape.h"

namespace pjrt::compiler {

class CollectiveHub;
struct CollectiveOp;

// The memory and identity of one run.
struct RunContext {
  // One pointer per entry parameter (array parameters; see Program).
  absl::Span<void* const> arguments;
  // One pointer per result (see Program::result_shapes).
  absl::Span<void* const> results;
  // scratch_bytes() of device memory, 64-byte aligned.
  void* scratch = nullptr;
  uint64_t prng_seed = 0;
  int64_t replica_id = 0;
  int64_t partition_id = 0;
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // The platform's stream the run enqueues its device work on (the compute
  // stream, or one of its own); on the host platform, Run is itself stream
  // work and does its work in the call.
  device::Stream* stream = nullptr;
  // The launch's rendezvous for collectives (shared by every participant);
  // nullptr when the program runs alone.
  CollectiveHub* collectives = nullptr;
  // When cancelled, the run stops within milliseconds (between blocks of
  // work, and in any wait for a peer) and fails with the reason. May be
  // null.
  const Cancellation* cancellation = nullptr;
};

class Program {
 public:
  virtual ~Program() = default;

  // Runs the program to completion on the calling thread (it may use a
  // thread pool internally). Errors are the run's own (e.g. a collective
  // timing out, or the run being cancelled); inputs have been checked
  // before.
  virtual absl::Status Run(const RunContext& context) const = 0;

  // Device memory one run needs for intermediate values.
  virtual int64_t scratch_bytes() const = 0;

  // Host memory the compiled program itself holds (code, constants),
  // roughly: what a cache of programs should count.
  virtual int64_t host_memory_bytes() const = 0;

  // Shapes of the entry parameters and of the results (a tuple root's
  // elements, nested tuples flattened in order).
  virtual const std::vector<hlo::Shape>& parameter_shapes() const = 0;
  virtual const std::vector<hlo::Shape>& result_shapes() const = 0;

  // The program's collectives (compiler/collectives.h), which the runtime
  // checks against a launch before it runs; they stay owned by the program.
  virtual std::vector<const CollectiveOp*> collectives() const = 0;
};

}  // namespace pjrt::compiler

#endif  // PJRT_COMPILER_PROGRAM_H_
