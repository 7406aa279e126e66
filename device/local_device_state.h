// LocalDeviceState: everything pjrtd keeps per addressable device: its
// streams, callback thread, event pool, allocators, allocation model, compute
// semaphore and PRNG seeds.
//
// Implementation notes (the design forces, as in XLA's PJRT stream-executor
// client, the runtime pjrtd re-implements: "the seed" in docs/architecture.md):
//
// Streams. Work is split over several streams so that transfers overlap with
// computation: one compute stream, one host-to-device stream, a few
// device-to-host and device-to-device streams (used round robin), and a pool
// of spare streams that the runtime borrows when it needs to wait for events
// without blocking a busy stream. Streams are ordered against each other only
// by events.
//
// Callback thread. Host-side bookkeeping that must happen after device work
// (dropping the last reference to memory, releasing the compute semaphore,
// telling a client its transfer is done) runs on one thread per device, so
// stream threads never run it themselves.
//
// Allocation models: when may memory be reused after its last use?
//  - synchronous: only once every operation using it has completed. The
//    runtime keeps a reference to the memory until each use finishes (the
//    host platform's default: host threads touch the memory directly).
//  - compute-synchronized: once the compute stream has passed the point of
//    the free. Work on other streams either keeps a reference until it
//    finishes, or makes the compute stream wait for it; and any other stream
//    that starts using freshly allocated memory first waits for the compute
//    stream (CUDA's default, mirroring its stream-ordered allocation).
//  - asynchronous: the allocator itself orders the free after the memory's
//    usage events: the free is deferred until they have completed.
// In every model a free never overtakes a stream that still uses the memory.
//
// Compute semaphore. How many executions the host may enqueue ahead of the
// device: acquired before a launch, released when its work completes. It is
// pacing, not correctness: it bounds queued work (and the memory it pins).
// Default 32; 1 under the synchronous model.
//
// Thread-safe.
#ifndef PJRT_DEVICE_LOCAL_DEVICE_STATE_H_
#define PJRT_DEVICE_LOCAL_DEVICE_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "device/allocator.h"
#include "device/event_pool.h"
#include "device/platform.h"
#include "device/semaphore.h"
#include "device/stream.h"
#include "device/worker_thread.h"

namespace pjrt::device {

struct LocalDeviceOptions {
  // Unset: the platform's default.
  std::optional<AllocationModel> allocation_model;
  // Executions that may be enqueued ahead of the device; 0 means the default
  // (32, or 1 under the synchronous model).
  int queue_ahead = 0;
  // Device memory limit in bytes; 0 means all of the device's memory.
  int64_t memory_limit_bytes = 0;
  int device_to_host_streams = 2;
  int device_to_device_streams = 2;
  // Where the device's generator of execution seeds starts; 0: from
  // std::random_device. (Fixed only by tools that compare runs: see
  // `pjrt-hlo run --compare-with`.)
  uint64_t prng_seed = 0;
};

class LocalDeviceState {
 public:
  static constexpr int kDefaultQueueAhead = 32;

  static absl::StatusOr<std::unique_ptr<LocalDeviceState>> Create(
      Platform* platform, int ordinal, const LocalDeviceOptions& options);

  // Waits for all enqueued work, then stops the streams and the callback
  // thread.
  ~LocalDeviceState();
  LocalDeviceState(const LocalDeviceState&) = delete;
  LocalDeviceState& operator=(const LocalDeviceState&) = delete;

  Platform* platform() const { return platform_; }
  int ordinal() const { return ordinal_; }
  AllocationModel allocation_model() const { return allocation_model_; }

  Stream* compute_stream() const { return compute_stream_.get(); }
  Stream* host_to_device_stream() const { return host_to_device_stream_.get(); }
  // Round robin over the device-to-host streams.
  Stream* GetDeviceToHostStream();
  // Round robin over the device-to-device streams.
  Stream* GetDeviceToDeviceStream();

  // A spare stream for waiting on events; return it when done (the device
  // is not destroyed before every borrowed stream is back).
  absl::StatusOr<std::unique_ptr<Stream>> BorrowStreamFromPool();
  void ReturnStreamToPool(std::unique_ptr<Stream> stream);

  EventPool& event_pool() { return event_pool_; }
  Allocator* allocator() const { return allocator_.get(); }
  // Host memory for staging transfers (pinned on CUDA).
  Allocator* staging_allocator() const { return staging_allocator_.get(); }
  Semaphore& compute_semaphore() { return compute_semaphore_; }
  // The same pacing for runs on streams of their own (programs that wait
  // for peers at collectives): separate, so that runs waiting for peers
  // that never come cannot take every slot of the compute semaphore.
  Semaphore& collective_semaphore() { return collective_semaphore_; }

  // Allocates an event from the pool and records it on `stream`, numbering
  // it (Event::sequence_number) in the order records reach the device's
  // streams: a later record on a stream always has a larger number, even
  // when threads race to record.
  absl::StatusOr<std::shared_ptr<Event>> AllocateAndRecordEvent(Stream* stream);

  // Runs `fn` on the callback thread once `stream` has finished the work
  // enqueued so far.
  absl::Status ThenExecuteOnCallbackThread(Stream* stream,
                                           absl::AnyInvocable<void() &&> fn);

  // Keeps `object` alive until `stream` has finished the work enqueued so far.
  template <typename T>
  absl::Status ThenRelease(Stream* stream, T object) {
    return ThenExecuteOnCallbackThread(stream,
                                       [object = std::move(object)]() mutable {
                                         T released = std::move(object);
                                       });
  }

  // Makes `waiter` wait for the work enqueued so far on `waitee`.
  absl::Status ThenWaitFor(Stream* waiter, Stream* waitee);

  // Blocks until every stream of the device has finished its work, and the
  // callbacks that work triggered have run.
  absl::Status SynchronizeAllActivity();

  // A fresh seed for each execution's random number generation.
  uint64_t GetNewPrngSeed();

  // Executions enqueued and not finished (the compute semaphore's use).
  int64_t queue_depth() const {
    return compute_semaphore_.in_use() + collective_semaphore_.in_use();
  }

  // What the device's executions did (see runtime::ExecuteOnDevice).
  struct RunStats {
    // Runs enqueued, and runs that failed (to enqueue, or on the device).
    Counter started;
    Counter failed;
    // Time the device spent on runs (see FinishRun).
    Counter busy_seconds;
    Histogram seconds{DurationBuckets()};
  };
  RunStats& run_stats() { return run_stats_; }
  const RunStats& run_stats() const { return run_stats_; }

  // Records that a run enqueued at `enqueued` is done, and returns how long
  // it held the device: from when it was enqueued, or from when the run
  // before it finished if that was later (runs on a stream execute in
  // order). Runs on streams of their own overlap others; they are counted
  // the same way, so busy time can be overstated while they run.
  absl::Duration FinishRun(absl::Time enqueued, bool ok);

 private:
  LocalDeviceState(Platform* platform, int ordinal, AllocationModel model,
                   int queue_ahead, uint64_t prng_seed);

  Platform* const platform_;
  const int ordinal_;
  const AllocationModel allocation_model_;

  // Destroyed last: streams' final callbacks land here.
  std::unique_ptr<WorkerThread> callback_thread_;
  EventPool event_pool_;
  Semaphore compute_semaphore_;
  Semaphore collective_semaphore_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Allocator> staging_allocator_;

  std::unique_ptr<Stream> compute_stream_;
  std::unique_ptr<Stream> host_to_device_stream_;
  std::vector<std::unique_ptr<Stream>> device_to_host_streams_;
  std::vector<std::unique_ptr<Stream>> device_to_device_streams_;
  std::atomic<uint64_t> next_device_to_host_{0};
  std::atomic<uint64_t> next_device_to_device_{0};

  Mutex pool_mu_;
  std::vector<std::unique_ptr<Stream>> stream_pool_ ABSL_GUARDED_BY(pool_mu_);
  int pool_streams_created_ ABSL_GUARDED_BY(pool_mu_) = 0;
  // Streams borrowed and not yet returned.
  int borrowed_ ABSL_GUARDED_BY(pool_mu_) = 0;

  RunStats run_stats_;
  Mutex run_mu_;
  absl::Time last_run_finished_ ABSL_GUARDED_BY(run_mu_) = absl::InfinitePast();

  Mutex prng_mu_;
  std::mt19937_64 prng_ ABSL_GUARDED_BY(prng_mu_);

  // Numbers the records of AllocateAndRecordEvent; held across each record.
  Mutex record_mu_;
  uint64_t next_sequence_number_ ABSL_GUARDED_BY(record_mu_) = 1;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_LOCAL_DEVICE_STATE_H_
