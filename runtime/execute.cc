#include "runtime/execute.h"

#include <exception>
#include <new>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "runtime/fault_injection.h"

namespace pjrt::runtime {

using device::AllocationModel;

namespace {

// Runs `kernel`, turning an exception into a status: a kernel runs on a
// stream's thread, where an escaping exception would end the daemon.
absl::Status RunKernel(Kernel kernel, const KernelArgs& args) {
  PJRT_RETURN_IF_ERROR(MaybeInjectKernelFailure());
  try {
    return std::move(kernel)(args);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "the execution ran out of host memory for its working data");
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("the execution failed with an exception: ", e.what()));
  }
}

absl::Status CheckArguments(Device* device,
                            absl::Span<const ExecuteArgument> arguments,
                            absl::Span<const ExecuteResult> results) {
  absl::flat_hash_map<Buffer*, int> first_use;
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    Buffer* buffer = arguments[i].buffer;
    if (buffer->device() != device) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %d (%s) is on device %s, but the execution runs on %s", i,
          buffer->shape().ToString(), buffer->device()->DebugString(),
          device->DebugString()));
    }
    auto [it, inserted] = first_use.emplace(buffer, i);
    if (!inserted && (arguments[i].donate || arguments[it->second].donate)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "arguments %d and %d are the same buffer (%s); a donated buffer "
          "cannot also be passed as another argument",
          it->second, i, buffer->DebugString()));
    }
  }
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (!results[r].alias_argument.has_value()) continue;
    int a = *results[r].alias_argument;
    if (a < 0 || a >= static_cast<int>(arguments.size()) ||
        !arguments[a].donate) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "result %d aliases argument %d, which is not a donated argument", r,
          a));
    }
    if (arguments[a].buffer->size_bytes() != results[r].shape.ByteSize()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "result %d (%s) cannot reuse argument %d (%s): sizes differ", r,
          results[r].shape.ToString(), a,
          arguments[a].buffer->shape().ToString()));
    }
    for (int other = 0; other < r; ++other) {
      if (results[other].alias_argument == a) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "results %d and %d both alias argument %d", other, r, a));
      }
    }
  }
  return absl::OkStatus();
}

// A wait given up because `wait` was cancelled keeps its status code
// (CANCELLED, DEADLINE_EXCEEDED...); other failures of an argument are
// FAILED_PRECONDITION.
absl::Status ArgumentError(const Cancellation* wait, absl::Status status,
                           const std::string& what) {
  return absl::Status(
      IsCancelled(wait) ? status.code() : absl::StatusCode::kFailedPrecondition,
      absl::StrCat(what, status.message()));
}

// Waits (on the host, holding nothing) until every argument's producer has
// enqueued, and finished if it runs on a stream of its own: a cross-host
// receive may wait for its data, a collective for its peers, for long. A
// call that waits holds no buffer (a delete or a donation of it goes on)
// and no device resource.
absl::Status AwaitProducers(absl::Span<const ExecuteArgument> arguments,
                            const Cancellation* wait) {
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    absl::Status status = arguments[i].buffer->AwaitUsable(wait);
    if (!status.ok() && IsCancelled(wait)) {
      return ArgumentError(wait, status,
                           absl::StrFormat("argument %d (%s): ", i,
                                           arguments[i].buffer->DebugString()));
    }
  }
  return absl::OkStatus();
}

// Appends to `holds` a donation hold for each donated argument, a usage
// hold for the rest, stopping at the first that cannot be taken (which is
// left in `holds`).
absl::Status TakeHolds(absl::Span<const ExecuteArgument> arguments,
                       const Cancellation* wait,
                       std::vector<Buffer::ScopedHold>* holds) {
  holds->reserve(arguments.size());
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    holds->push_back(arguments[i].buffer->GetBufferWithHold(
        arguments[i].donate ? Buffer::HoldType::kDonation
                            : Buffer::HoldType::kUsage,
        wait));
    if (!holds->back().ok()) {
      return ArgumentError(wait, holds->back().status(),
                           absl::StrFormat("argument %d: ", i));
    }
  }
  return absl::OkStatus();
}

// Collects in `waits` the events the kernel's stream must wait for: the
// arguments' definitions (each also a dependency of `definition`, and in
// `inputs`) and, for donated ones, every earlier reader; each waited for on
// the host as in AwaitProducers (normally at once by now).
absl::Status CollectWaits(
    absl::Span<const ExecuteArgument> arguments,
    const std::vector<Buffer::ScopedHold>& holds, const Cancellation* wait,
    BufferSequencingEvent* definition,
    std::vector<std::shared_ptr<BufferSequencingEvent>>* waits,
    std::vector<std::shared_ptr<BufferSequencingEvent>>* inputs) {
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    const auto& tracked = holds[i].buffer();
    for (const auto& event : tracked->definition_events()) {
      absl::Status status = event->WaitUntilSafeForSharedStream(wait);
      if (!status.ok()) {
        return ArgumentError(
            wait, status,
            absl::StrFormat("argument %d (%s) has no valid contents: ", i,
                            arguments[i].buffer->DebugString()));
      }
      definition->AddDependency(event);
      waits->push_back(event);
      inputs->push_back(event);
    }
    if (arguments[i].donate) {
      for (const auto& usage : tracked->usage_events()) {
        PJRT_RETURN_IF_ERROR(usage.event->WaitUntilSafeForSharedStream(wait));
        waits->push_back(usage.event);
      }
    }
  }
  return absl::OkStatus();
}

// Pacing: blocks until the host may run one more run ahead of the device
// and takes a slot of `semaphore`.
absl::Status AcquireSlot(device::Semaphore* semaphore,
                         const Cancellation* wait) {
  while (!semaphore->AcquireFor(1, Cancellation::kPollInterval)) {
    absl::Status cancelled = CheckCancelled(wait);
    if (!cancelled.ok()) {
      return absl::Status(
          cancelled.code(),
          absl::StrCat("gave up waiting for the device to take more work: ",
                       cancelled.message()));
    }
  }
  return absl::OkStatus();
}

// Orders the kernel's stream `compute` after the arguments' `waits`. Every
// producer has enqueued by now: these do not block.
absl::Status WaitOnStream(
    device::LocalDeviceState* local, device::Stream* compute,
    bool on_own_stream,
    const std::vector<std::shared_ptr<BufferSequencingEvent>>& waits,
    const Cancellation* wait) {
  // Under the compute-synchronized model fresh memory may still be in use
  // by the compute stream (its previous owner's last use).
  if (on_own_stream &&
      local->allocation_model() == AllocationModel::kComputeSynchronized) {
    PJRT_RETURN_IF_ERROR(local->ThenWaitFor(compute, local->compute_stream()));
  }
  for (const auto& event : waits) {
    PJRT_RETURN_IF_ERROR(event->WaitForEventOnStream(compute, wait));
  }
  return absl::OkStatus();
}

// Result memory: fresh (allocated into `fresh`), or the donated argument's.
// Fills `result_pointers`; both are sized to `results`.
absl::Status AllocateResults(device::LocalDeviceState* local,
                             absl::Span<const ExecuteResult> results,
                             const std::vector<Buffer::ScopedHold>& holds,
                             std::vector<DeviceMemory>* fresh,
                             std::vector<void*>* result_pointers) {
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (results[r].alias_argument.has_value()) {
      (*result_pointers)[r] =
          holds[*results[r].alias_argument].buffer()->data();
      continue;
    }
    PJRT_ASSIGN_OR_RETURN((*fresh)[r],
                          DeviceMemory::Allocate(local->allocator(),
                                                 results[r].shape.ByteSize()));
    (*result_pointers)[r] = (*fresh)[r].data();
  }
  return absl::OkStatus();
}

// The first error among the arguments' definitions `inputs` that have
// completed (OK if none failed): a kernel must not compute on them.
absl::Status FailedInput(
    const std::vector<std::shared_ptr<BufferSequencingEvent>>& inputs) {
  for (const auto& event : inputs) {
    if (!event->IsComplete()) continue;
    absl::Status status = event->status();
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// Runs `kernel` with the given pointers, or enqueues it on `compute` where
// the host can access device memory (its error is then bound to the results
// through `definition`). On failure it waits for the work already on
// `compute` and counts the run as failed. When one of `inputs` (the
// arguments' definitions) has failed by the time the kernel would run, the
// kernel does not run: `argument_failed` is told, and the results get that
// error (their definition depends on it).
absl::Status LaunchKernel(
    Client* client, device::LocalDeviceState* local, device::Stream* compute,
    Kernel kernel, const std::vector<void*>& argument_pointers,
    const std::vector<void*>& result_pointers, void* scratch_pointer,
    uint64_t seed, int64_t launch_id,
    const std::shared_ptr<BufferSequencingEvent>& definition,
    const std::shared_ptr<Cancellation>& run_cancellation,
    std::vector<std::shared_ptr<BufferSequencingEvent>> inputs,
    const std::function<void(const absl::Status&)>& argument_failed) {
  const auto make_args = [compute, seed, launch_id, scratch_pointer](
                             absl::Span<void* const> arguments,
                             absl::Span<void* const> results,
                             const Cancellation* cancellation) {
    return KernelArgs{.arguments = arguments,
                      .results = results,
                      .stream = compute,
                      .prng_seed = seed,
                      .launch_id = launch_id,
                      .scratch = scratch_pointer,
                      .cancellation = cancellation};
  };
  if (local->platform()->host_can_access_device_memory()) {
    // The kernel runs as stream work, on its own copies of the pointer
    // lists; its error is bound to the results.
    absl::Status status = compute->EnqueueHostFunction(
        [kernel = std::move(kernel), make_args, argument_pointers,
         result_pointers, definition, cancellation = run_cancellation,
         inputs = std::move(inputs), argument_failed]() mutable {
          // The stream has waited for every input: their status is final.
          absl::Status failed = FailedInput(inputs);
          if (!failed.ok()) {
            if (argument_failed) argument_failed(failed);
            definition->SetProducerStatus(std::move(failed));
            return;
          }
          absl::Status s = RunKernel(
              std::move(kernel), make_args(argument_pointers, result_pointers,
                                           cancellation.get()));
          if (!s.ok()) definition->SetProducerStatus(std::move(s));
        });
    if (!status.ok()) {
      compute->BlockHostUntilDone().IgnoreError();
      local->run_stats().failed.Add();
      return status;
    }
    return absl::OkStatus();
  }
  // Device work: an input known to have failed by now is refused here
  // (later failures show in the results through their dependencies).
  absl::Status failed = FailedInput(inputs);
  if (!failed.ok()) {
    if (argument_failed) argument_failed(failed);
    definition->SetProducerStatus(failed);
    return absl::OkStatus();
  }
  absl::Status status = RunKernel(
      std::move(kernel),
      make_args(argument_pointers, result_pointers, run_cancellation.get()));
  if (!status.ok()) {
    // Part of the work may be enqueued; let it finish before the memory it
    // uses can go.
    compute->BlockHostUntilDone().IgnoreError();
    // A launch that failed may have ended the device: ask it, so that the
    // next call is refused clearly instead of failing somewhere later.
    client->platform()
        ->DeviceHealth(local->ordinal(), /*probe=*/true)
        .IgnoreError();
    local->run_stats().failed.Add();
    return status;
  }
  return absl::OkStatus();
}

// Records on `compute`, after the kernel, the event that completes
// `definition`, and counts the run as started; the run's end is accounted
// (and told to `observer`) once `definition` completes.
absl::Status RecordDefinition(device::LocalDeviceState* local,
                              device::Stream* compute, bool on_own_stream,
                              BufferSequencingEvent* definition,
                              absl::Time enqueued,
                              const std::shared_ptr<RunObserver>& observer) {
  auto event = local->AllocateAndRecordEvent(compute);
  if (!event.ok()) {
    compute->BlockHostUntilDone().IgnoreError();
    return event.status();
  }
  if (on_own_stream) definition->MarkOnPrivateStream();
  definition->SetSequencingEvent(*std::move(event), compute);
  local->run_stats().started.Add();
  definition->AddCallback([local, enqueued, observer](absl::Status status) {
    // A run stopped on purpose (its session closed, its results dropped
    // unread) did not fail.
    const bool ok = status.ok() || absl::IsCancelled(status);
    absl::Duration busy = local->FinishRun(enqueued, ok);
    if (observer != nullptr) observer->RunFinished(local->ordinal(), busy, ok);
  });
  return absl::OkStatus();
}

// The result buffers, all defined by `definition`, each on fresh memory or
// on that of the donated argument it aliases (taken from its hold). Every
// result's tracked buffer is also appended to `output_tracked`.
std::vector<std::shared_ptr<Buffer>> BuildOutputs(
    Client* client, Device* device, device::LocalDeviceState* local,
    absl::Span<const ExecuteResult> results,
    const std::vector<Buffer::ScopedHold>& holds,
    std::vector<DeviceMemory>* fresh,
    const std::shared_ptr<BufferSequencingEvent>& definition,
    const std::shared_ptr<Cancellation>& run_cancellation,
    std::vector<std::shared_ptr<TrackedDeviceBuffer>>* output_tracked) {
  std::vector<std::shared_ptr<Buffer>> outputs;
  outputs.reserve(results.size());
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    DeviceMemory memory =
        results[r].alias_argument.has_value()
            ? holds[*results[r].alias_argument].buffer()->TakeMemory()
            : std::move((*fresh)[r]);
    auto tracked = std::make_shared<TrackedDeviceBuffer>(
        local, std::move(memory),
        std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
    output_tracked->push_back(tracked);
    outputs.push_back(std::make_shared<Buffer>(client, device, results[r].shape,
                                               std::move(tracked)));
  }
  // The run stops early once every result is deleted unread.
  auto watch = std::make_shared<Buffer::ResultWatch>();
  watch->run = run_cancellation;
  watch->live = static_cast<int>(outputs.size());
  for (const auto& output : outputs) output->SetResultWatch(watch);
  return outputs;
}

// Settles the holds once the kernel is enqueued: a donated argument's
// memory (unless a result reused it) is freed once the kernel is done, and
// the donation confirmed; any other hold becomes a usage of `definition`.
void SettleHolds(absl::Span<const ExecuteArgument> arguments,
                 std::vector<Buffer::ScopedHold>* holds,
                 device::LocalDeviceState* local, device::Stream* compute,
                 bool on_own_stream,
                 const std::shared_ptr<BufferSequencingEvent>& definition) {
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    if (arguments[i].donate) {
      local->ThenRelease(compute, (*holds)[i].buffer()).IgnoreError();
      (*holds)[i].ConfirmDonation();
    } else {
      RecordUsage(std::move((*holds)[i]), local, compute, definition,
                  /*prefer_to_retain_reference=*/on_own_stream);
    }
  }
}

// Gives `stream`, borrowed from `local`'s pool, back once its work is done.
void ReturnStreamWhenDone(device::LocalDeviceState* local,
                          std::unique_ptr<device::Stream> stream) {
  device::Stream* raw = stream.release();
  absl::Status status = local->ThenExecuteOnCallbackThread(raw, [raw, local] {
    local->ReturnStreamToPool(std::unique_ptr<device::Stream>(raw));
  });
  if (!status.ok()) {
    raw->BlockHostUntilDone().IgnoreError();
    local->ReturnStreamToPool(std::unique_ptr<device::Stream>(raw));
  }
}

}  // namespace

// The call's state (holds, the semaphore's slot, the borrowed stream, the
// caller-runs mode, memory) lives in this frame rather than in the steps,
// so that every return releases it in the same order.
absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> ExecuteOnDevice(
    Client* client, Device* device, absl::Span<const ExecuteArgument> arguments,
    absl::Span<const ExecuteResult> results, Kernel kernel,
    const ExecuteOptions& options) {
  PJRT_RETURN_IF_ERROR(CheckArguments(device, arguments, results));
  device::LocalDeviceState* local = device->local_device_state();
  // A device that failed for good takes no more work.
  PJRT_RETURN_IF_ERROR(
      client->platform()->DeviceHealth(local->ordinal(), /*probe=*/false));
  const Cancellation* wait = options.wait_cancellation;
  PJRT_RETURN_IF_ERROR(AwaitProducers(arguments, wait));
  std::vector<Buffer::ScopedHold> holds;
  PJRT_RETURN_IF_ERROR(TakeHolds(arguments, wait, &holds));
  auto definition = std::make_shared<BufferSequencingEvent>();
  std::vector<std::shared_ptr<BufferSequencingEvent>> waits, inputs;
  PJRT_RETURN_IF_ERROR(
      CollectWaits(arguments, holds, wait, definition.get(), &waits, &inputs));

  device::Semaphore& semaphore = options.own_stream
                                     ? local->collective_semaphore()
                                     : local->compute_semaphore();
  PJRT_RETURN_IF_ERROR(AcquireSlot(&semaphore, wait));
  auto reservation =
      std::make_shared<device::Semaphore::ScopedReservation>(&semaphore, 1);

  // The stream the kernel runs on: the compute stream, or one of its own,
  // borrowed now that the run holds a slot of the semaphore (so at most
  // queue-ahead are borrowed at once) and returned once the kernel is done.
  std::unique_ptr<device::Stream> own_stream;
  if (options.own_stream) {
    PJRT_ASSIGN_OR_RETURN(own_stream, local->BorrowStreamFromPool());
  }
  struct ReturnStream {
    device::LocalDeviceState* local;
    std::unique_ptr<device::Stream>* stream;
    ~ReturnStream() {
      if (*stream != nullptr) local->ReturnStreamToPool(std::move(*stream));
    }
  } return_stream{local, &own_stream};
  const bool on_own_stream = own_stream != nullptr;
  device::Stream* compute =
      on_own_stream ? own_stream.get() : local->compute_stream();
  // Not on a stream of its own: its kernel may wait for peers that this
  // very thread launches next.
  std::unique_ptr<device::Stream::CallerRuns> caller_runs;
  if (options.run_inline_when_idle && !on_own_stream) {
    caller_runs = compute->LetCallerRunWhenIdle();
  }
  PJRT_RETURN_IF_ERROR(
      WaitOnStream(local, compute, on_own_stream, waits, wait));

  std::vector<DeviceMemory> fresh(results.size());
  std::vector<void*> result_pointers(results.size());
  PJRT_RETURN_IF_ERROR(
      AllocateResults(local, results, holds, &fresh, &result_pointers));
  DeviceMemory scratch;
  if (options.scratch_bytes > 0) {
    PJRT_ASSIGN_OR_RETURN(
        scratch,
        DeviceMemory::Allocate(local->allocator(), options.scratch_bytes));
  }
  std::vector<void*> argument_pointers(arguments.size());
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    argument_pointers[i] = holds[i].buffer()->data();
  }

  const uint64_t seed = local->GetNewPrngSeed();
  const absl::Time enqueued = absl::Now();
  // The run stops early when its caller's cancellation is raised, or once
  // every result is deleted unread (see Buffer::ResultWatch).
  auto run_cancellation = std::make_shared<Cancellation>(options.cancellation);
  PJRT_RETURN_IF_ERROR(LaunchKernel(
      client, local, compute, std::move(kernel), argument_pointers,
      result_pointers, scratch.data(), seed, options.launch_id, definition,
      run_cancellation, std::move(inputs), options.argument_failed));
  PJRT_RETURN_IF_ERROR(RecordDefinition(local, compute, on_own_stream,
                                        definition.get(), enqueued,
                                        options.observer));

  // From here on nothing fails: build the results and settle the holds.
  std::vector<std::shared_ptr<TrackedDeviceBuffer>> output_tracked;
  std::vector<std::shared_ptr<Buffer>> outputs =
      BuildOutputs(client, device, local, results, holds, &fresh, definition,
                   run_cancellation, &output_tracked);
  if (local->allocation_model() == AllocationModel::kSynchronous ||
      on_own_stream) {
    // Under the synchronous model memory is freed only after its last use,
    // and the kernel writing the results is one. A stream of its own is
    // not the one the other models order frees by: keep the results, as
    // the arguments below, until the kernel is done.
    local->ThenRelease(compute, std::move(output_tracked)).IgnoreError();
  }
  SettleHolds(arguments, &holds, local, compute, on_own_stream, definition);
  local->ThenRelease(compute, std::move(reservation)).IgnoreError();
  if (scratch.owns_memory()) {
    local->ThenRelease(compute, std::move(scratch)).IgnoreError();
  }
  if (on_own_stream) ReturnStreamWhenDone(local, std::move(own_stream));
  return outputs;
}

}  // namespace pjrt::runtime
