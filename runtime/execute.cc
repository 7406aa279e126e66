#include "runtime/execute.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"

namespace pjrt::runtime {

using device::AllocationModel;

namespace {

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

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<Buffer>>> ExecuteOnDevice(
    Client* client, Device* device, absl::Span<const ExecuteArgument> arguments,
    absl::Span<const ExecuteResult> results, Kernel kernel,
    const ExecuteOptions& options) {
  PJRT_RETURN_IF_ERROR(CheckArguments(device, arguments, results));
  device::LocalDeviceState* local = device->local_device_state();
  device::Stream* compute = local->compute_stream();

  // Holds: donation for donated arguments, usage for the rest.
  std::vector<Buffer::ScopedHold> holds;
  holds.reserve(arguments.size());
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    holds.push_back(arguments[i].buffer->GetBufferWithHold(
        arguments[i].donate ? Buffer::HoldType::kDonation
                            : Buffer::HoldType::kUsage));
    if (!holds.back().ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "argument %d: %s", i, holds.back().status().message()));
    }
  }

  // The compute stream waits for the arguments to be defined and, for
  // donated ones, for every earlier reader to finish.
  auto definition = std::make_shared<BufferSequencingEvent>();
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    const auto& tracked = holds[i].buffer();
    for (const auto& event : tracked->definition_events()) {
      absl::Status status = event->WaitForEventOnStream(compute);
      if (!status.ok()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "argument %d (%s) has no valid contents: %s", i,
            arguments[i].buffer->DebugString(), status.message()));
      }
      definition->AddDependency(event);
    }
    if (arguments[i].donate) {
      for (const auto& usage : tracked->usage_events()) {
        PJRT_RETURN_IF_ERROR(usage.event->WaitForEventOnStream(compute));
      }
    }
  }

  // Pacing: how far the host may run ahead of the device.
  auto reservation = std::make_shared<device::Semaphore::ScopedReservation>(
      local->compute_semaphore().ScopedAcquire(1));

  // Result memory: fresh, or the donated argument's.
  std::vector<DeviceMemory> fresh(results.size());
  std::vector<void*> result_pointers(results.size());
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (results[r].alias_argument.has_value()) {
      result_pointers[r] = holds[*results[r].alias_argument].buffer()->data();
      continue;
    }
    PJRT_ASSIGN_OR_RETURN(fresh[r], DeviceMemory::Allocate(
                                        local->allocator(),
                                        results[r].shape.ByteSize()));
    result_pointers[r] = fresh[r].data();
  }
  DeviceMemory scratch;
  if (options.scratch_bytes > 0) {
    PJRT_ASSIGN_OR_RETURN(scratch, DeviceMemory::Allocate(local->allocator(),
                                                          options.scratch_bytes));
  }
  void* scratch_pointer = scratch.data();
  std::vector<void*> argument_pointers(arguments.size());
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    argument_pointers[i] = holds[i].buffer()->data();
  }

  const uint64_t seed = local->GetNewPrngSeed();
  if (local->platform()->host_can_access_device_memory()) {
    // The kernel runs as stream work; its error is bound to the results.
    absl::Status status = compute->EnqueueHostFunction(
        [kernel = std::move(kernel), argument_pointers, result_pointers,
         compute, seed, launch_id = options.launch_id, scratch_pointer,
         definition]() mutable {
          KernelArgs args{.arguments = argument_pointers,
                          .results = result_pointers,
                          .stream = compute,
                          .prng_seed = seed,
                          .launch_id = launch_id,
                          .scratch = scratch_pointer};
          absl::Status s = std::move(kernel)(args);
          if (!s.ok()) definition->SetProducerStatus(std::move(s));
        });
    if (!status.ok()) {
      compute->BlockHostUntilDone().IgnoreError();
      return status;
    }
  } else {
    KernelArgs args{.arguments = argument_pointers,
                    .results = result_pointers,
                    .stream = compute,
                    .prng_seed = seed,
                    .launch_id = options.launch_id,
                    .scratch = scratch_pointer};
    absl::Status status = std::move(kernel)(args);
    if (!status.ok()) {
      // Part of the work may be enqueued; let it finish before the memory
      // it uses can go.
      compute->BlockHostUntilDone().IgnoreError();
      return status;
    }
  }
  auto event = local->AllocateAndRecordEvent(compute);
  if (!event.ok()) {
    compute->BlockHostUntilDone().IgnoreError();
    return event.status();
  }
  definition->SetSequencingEvent(*std::move(event), compute);

  // From here on nothing fails: build the results and settle the holds.
  std::vector<std::shared_ptr<Buffer>> outputs;
  outputs.reserve(results.size());
  std::vector<std::shared_ptr<TrackedDeviceBuffer>> output_tracked;
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    DeviceMemory memory =
        results[r].alias_argument.has_value()
            ? holds[*results[r].alias_argument].buffer()->TakeMemory()
            : std::move(fresh[r]);
    auto tracked = std::make_shared<TrackedDeviceBuffer>(
        local, std::move(memory),
        std::vector<std::shared_ptr<BufferSequencingEvent>>{definition});
    output_tracked.push_back(tracked);
    outputs.push_back(std::make_shared<Buffer>(client, device,
                                               results[r].shape,
                                               std::move(tracked)));
  }
  if (local->allocation_model() == AllocationModel::kSynchronous) {
    // Under the synchronous model memory is freed only after its last use,
    // and the kernel writing the results is one.
    local->ThenRelease(compute, std::move(output_tracked)).IgnoreError();
  }
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    if (arguments[i].donate) {
      // Memory not reused by a result is freed once the kernel is done.
      local->ThenRelease(compute, holds[i].buffer()).IgnoreError();
      holds[i].ConfirmDonation();
    } else {
      RecordUsage(std::move(holds[i]), local, compute, definition,
                  /*prefer_to_retain_reference=*/false);
    }
  }
  local->ThenRelease(compute, std::move(reservation)).IgnoreError();
  if (scratch.owns_memory()) {
    local->ThenRelease(compute, std::move(scratch)).IgnoreError();
  }
  return outputs;
}

}  // namespace pjrt::runtime
