// ExecuteOnDevice: enqueues one execution on one device's compute stream,
// with the bookkeeping of XLA's PJRT stream-executor client (the runtime
// pjrtd re-implements; "the seed" in docs/architecture.md): argument checks,
// usage and donation holds, waits on the arguments' events, the compute
// semaphore, result allocation (or reuse of donated memory), one definition
// event for all results, and the conversion of holds into usage events or
// confirmed donations.
//
// What the execution computes is a Kernel; compiled programs provide one
// (compiler/), tests provide small ones.
#ifndef PJRT_RUNTIME_EXECUTE_H_
#define PJRT_RUNTIME_EXECUTE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/cancellation.h"
#include "device/stream.h"
#include "hlo/shape.h"
#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrt::runtime {

// What a kernel is given.
struct KernelArgs {
  // Memory of each argument and each result, in order.
  absl::Span<void* const> arguments;
  absl::Span<void* const> results;
  // The compute stream (for kernels that enqueue device work).
  device::Stream* stream = nullptr;
  // A fresh seed for this execution's random numbers.
  uint64_t prng_seed = 0;
  // Identifies one multi-device launch (0 when not given).
  int64_t launch_id = 0;
  // ExecuteOptions::scratch_bytes of device memory for the kernel's
  // intermediate values, 64-byte aligned (nullptr when none was asked for).
  void* scratch = nullptr;
  // ExecuteOptions::cancellation (may be null): the kernel should stop
  // soon once it is cancelled, and return its reason.
  const Cancellation* cancellation = nullptr;
};

// The device work of one execution. On a platform whose host can access
// device memory it runs on the compute stream's thread, once the arguments
// are defined, and an error it returns (or an exception it throws) is bound
// to every result. On other platforms it runs on the launching thread and
// enqueues its work on `args.stream`; an error then fails the call.
using Kernel = absl::AnyInvocable<absl::Status(const KernelArgs&) &&>;

struct ExecuteArgument {
  Buffer* buffer = nullptr;
  // Give the buffer's memory to the execution; the buffer becomes invalid.
  bool donate = false;
};

struct ExecuteResult {
  hlo::Shape shape;
  // Reuse the memory of this (donated) argument instead of allocating.
  std::optional<int> alias_argument;
};

// Told of each run once it is done (the daemon accounts device time to the
// session that ran it).
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // On whichever thread completed the run: keep it short. `busy` is the
  // time the run held the device (see LocalDeviceState::FinishRun).
  virtual void RunFinished(int device_ordinal, absl::Duration busy,
                           bool ok) = 0;
};

struct ExecuteOptions {
  int64_t launch_id = 0;
  // The run stops once this is cancelled (its results get the reason); may
  // be null. Kept alive by the run.
  std::shared_ptr<const Cancellation> cancellation;
  // Waits of the call itself (for arguments whose producer has not enqueued
  // yet, for a donation to be decided, for the compute semaphore) give up
  // with this one's reason once it is cancelled; may be null. Only used
  // during the call.
  const Cancellation* wait_cancellation = nullptr;
  // Run on a stream of its own, borrowed from the device's pool, instead of
  // the compute stream: for programs that wait for peers at collectives, so
  // that a participant waiting for a peer that has not started does not
  // hold up the device's other work.
  bool own_stream = false;
  // Run the work on the calling thread while the stream is idle (see
  // device::Stream::LetCallerRunWhenIdle), for a caller that waits for the
  // results anyway. Ignored with own_stream.
  bool run_inline_when_idle = false;
  // Device memory the kernel needs besides its results, allocated for the
  // run (counted in the device's statistics, RESOURCE_EXHAUSTED if it does
  // not fit) and freed once the kernel is done.
  int64_t scratch_bytes = 0;
  // Told when the run is done; may be null.
  std::shared_ptr<RunObserver> observer;
  // Called (on the stream's thread, in place of the kernel) when an
  // argument's producer failed after this run was enqueued: the kernel
  // does not run on such contents, its results get the producer's error,
  // and this lets those who wait for the run at a collective know at once.
  // May be empty.
  std::function<void(const absl::Status&)> argument_failed;
};

// Enqueues `kernel` on `device` and returns the result buffers at once.
// Errors detected now: INVALID_ARGUMENT (an argument on another device, a
// buffer donated while also passed again, a bad alias), FAILED_PRECONDITION
// (a deleted or donated argument, or one whose producer failed),
// RESOURCE_EXHAUSTED (result memory), or the wait cancellation's reason. May
// block on the compute semaphore and on arguments not yet enqueued.
absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> ExecuteOnDevice(
    Client* client, Device* device, absl::Span<const ExecuteArgument> arguments,
    absl::Span<const ExecuteResult> results, Kernel kernel,
    const ExecuteOptions& options = {});

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_EXECUTE_H_
