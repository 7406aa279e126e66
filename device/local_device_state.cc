#include "device/local_device_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "device/bfc_allocator.h"
#include "device/host/host_event.h"

namespace pjrt::device {

LocalDeviceState::LocalDeviceState(Platform* platform, int ordinal,
                                   AllocationModel model, int queue_ahead,
                                   uint64_t prng_seed)
    : platform_(platform),
      ordinal_(ordinal),
      allocation_model_(model),
      callback_thread_(std::make_unique<WorkerThread>(
          absl::StrFormat("%s%d-callback", platform->name(), ordinal))),
      event_pool_(
          [platform, ordinal] { return platform->CreateEvent(ordinal); }),
      compute_semaphore_(queue_ahead),
      collective_semaphore_(queue_ahead),
      prng_(prng_seed != 0 ? prng_seed : std::random_device()()) {}

absl::StatusOr<std::unique_ptr<LocalDeviceState>> LocalDeviceState::Create(
    Platform* platform, int ordinal, const LocalDeviceOptions& options) {
  AllocationModel model =
      options.allocation_model.value_or(platform->default_allocation_model());
  if (options.queue_ahead < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "queue-ahead limit %d is negative; use 0 for the default",
        options.queue_ahead));
  }
  int queue_ahead = options.queue_ahead;
  if (queue_ahead == 0) {
    queue_ahead =
        model == AllocationModel::kSynchronous ? 1 : kDefaultQueueAhead;
  }
  if (options.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memory limit %d is negative; use 0 for the device's memory",
        options.memory_limit_bytes));
  }
  DeviceDescription description = platform->Describe(ordinal);
  int64_t limit = options.memory_limit_bytes > 0 ? options.memory_limit_bytes
                                                 : description.memory_bytes;
  std::unique_ptr<LocalDeviceState> state(new LocalDeviceState(
      platform, ordinal, model, queue_ahead, options.prng_seed));
  const std::string prefix = absl::StrFormat("%s%d", platform->name(), ordinal);
  state->allocator_ = std::make_unique<BfcAllocator>(
      platform->CreateDeviceMemoryAllocator(ordinal),
      BfcAllocator::Options{
          .name = absl::StrFormat("%s device %d", platform->name(), ordinal),
          .memory_limit = limit});
  state->staging_allocator_ = std::make_unique<BfcAllocator>(
      platform->CreateStagingMemoryAllocator(ordinal),
      BfcAllocator::Options{
          .name = absl::StrFormat("%s device %d staging memory",
                                  platform->name(), ordinal),
          .memory_limit = std::min<int64_t>(limit, int64_t{4} << 30)});
  PJRT_ASSIGN_OR_RETURN(state->compute_stream_,
                        platform->CreateStream(ordinal, prefix + "-compute"));
  PJRT_ASSIGN_OR_RETURN(state->host_to_device_stream_,
                        platform->CreateStream(ordinal, prefix + "-h2d"));
  for (int i = 0; i < std::max(1, options.device_to_host_streams); ++i) {
    PJRT_ASSIGN_OR_RETURN(auto stream,
                          platform->CreateStream(
                              ordinal, absl::StrFormat("%s-d2h%d", prefix, i)));
    state->device_to_host_streams_.push_back(std::move(stream));
  }
  for (int i = 0; i < std::max(1, options.device_to_device_streams); ++i) {
    PJRT_ASSIGN_OR_RETURN(auto stream,
                          platform->CreateStream(
                              ordinal, absl::StrFormat("%s-d2d%d", prefix, i)));
    state->device_to_device_streams_.push_back(std::move(stream));
  }
  return state;
}

LocalDeviceState::~LocalDeviceState() {
  SynchronizeAllActivity().IgnoreError();
  // Borrowed streams come back once their work is done (often through the
  // callback thread, which still runs): wait for them, or their work would
  // outlive the device.
  {
    MutexLock lock(&pool_mu_);
    pool_mu_.Await(
        [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return borrowed_ == 0; });
  }
  // Streams go first (their destructors drain them); the callback thread,
  // declared first, goes last and runs what they scheduled.
  {
    MutexLock lock(&pool_mu_);
    stream_pool_.clear();
  }
  device_to_device_streams_.clear();
  device_to_host_streams_.clear();
  host_to_device_stream_.reset();
  compute_stream_.reset();
  callback_thread_.reset();
}

Stream* LocalDeviceState::GetDeviceToHostStream() {
  uint64_t i = next_device_to_host_.fetch_add(1, std::memory_order_relaxed);
  return device_to_host_streams_[i % device_to_host_streams_.size()].get();
}

Stream* LocalDeviceState::GetDeviceToDeviceStream() {
  uint64_t i = next_device_to_device_.fetch_add(1, std::memory_order_relaxed);
  return device_to_device_streams_[i % device_to_device_streams_.size()].get();
}

absl::StatusOr<std::unique_ptr<Stream>>
LocalDeviceState::BorrowStreamFromPool() {
  int index;
  {
    MutexLock lock(&pool_mu_);
    if (!stream_pool_.empty()) {
      std::unique_ptr<Stream> stream = std::move(stream_pool_.back());
      stream_pool_.pop_back();
      ++borrowed_;
      return stream;
    }
    index = pool_streams_created_++;
  }
  auto stream = platform_->CreateStream(
      ordinal_,
      absl::StrFormat("%s%d-pool%d", platform_->name(), ordinal_, index));
  if (stream.ok()) {
    MutexLock lock(&pool_mu_);
    ++borrowed_;
  }
  return stream;
}

void LocalDeviceState::ReturnStreamToPool(std::unique_ptr<Stream> stream) {
  if (stream == nullptr) return;
  MutexLock lock(&pool_mu_);
  stream_pool_.push_back(std::move(stream));
  --borrowed_;
}

absl::StatusOr<std::shared_ptr<Event>> LocalDeviceState::AllocateAndRecordEvent(
    Stream* stream) {
  std::shared_ptr<Event> event = event_pool_.Allocate();
  MutexLock lock(&record_mu_);
  event->set_sequence_number(next_sequence_number_++);
  PJRT_RETURN_IF_ERROR(stream->RecordEvent(event));
  return event;
}

absl::Status LocalDeviceState::ThenExecuteOnCallbackThread(
    Stream* stream, absl::AnyInvocable<void() &&> fn) {
  WorkerThread* callback_thread = callback_thread_.get();
  return stream->EnqueueHostFunction(
      [callback_thread, fn = std::move(fn)]() mutable {
        callback_thread->Schedule(std::move(fn));
      });
}

absl::Status LocalDeviceState::ThenWaitFor(Stream* waiter, Stream* waitee) {
  if (waiter == waitee) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(auto event, AllocateAndRecordEvent(waitee));
  return waiter->WaitFor(std::move(event));
}

absl::Status LocalDeviceState::SynchronizeAllActivity() {
  absl::Status status;
  const auto sync = [&status](Stream* stream) {
    if (stream != nullptr) status.Update(stream->BlockHostUntilDone());
  };
  sync(compute_stream_.get());
  sync(host_to_device_stream_.get());
  for (auto& s : device_to_host_streams_) sync(s.get());
  for (auto& s : device_to_device_streams_) sync(s.get());
  {
    MutexLock lock(&pool_mu_);
    for (auto& s : stream_pool_) sync(s.get());
  }
  // Callbacks scheduled by that work.
  HostEvent drained;
  callback_thread_->Schedule([&drained] { drained.Complete(); });
  drained.Wait();
  return status;
}

absl::Duration LocalDeviceState::FinishRun(absl::Time enqueued, bool ok) {
  absl::Duration busy;
  {
    MutexLock lock(&run_mu_);
    const absl::Time now = absl::Now();
    busy = std::max(now - std::max(enqueued, last_run_finished_),
                    absl::ZeroDuration());
    last_run_finished_ = std::max(last_run_finished_, now);
  }
  const double seconds = absl::ToDoubleSeconds(busy);
  run_stats_.busy_seconds.Add(seconds);
  run_stats_.seconds.Observe(seconds);
  if (!ok) run_stats_.failed.Add();
  return busy;
}

uint64_t LocalDeviceState::GetNewPrngSeed() {
  MutexLock lock(&prng_mu_);
  uint64_t seed;
  do {
    seed = prng_();
  } while (seed == 0);
  return seed;
}

}  // namespace pjrt::device
