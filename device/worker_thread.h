// WorkerThread: one thread running closures in the order they were
// scheduled. The host platform's streams and every device's callback thread
// are WorkerThreads.
//
// Thread-safe. The destructor runs everything already scheduled, then joins.
#ifndef PJRT_DEVICE_WORKER_THREAD_H_
#define PJRT_DEVICE_WORKER_THREAD_H_

#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "base/mutex.h"

namespace pjrt::device {

class WorkerThread {
 public:
  // `name` is given to the OS thread (truncated to 15 characters).
  explicit WorkerThread(std::string name);
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  void Schedule(absl::AnyInvocable<void() &&> fn);

  // Makes the calling thread this worker's inline caller while the
  // returned object lives: closures it schedules while the worker is idle
  // (nothing queued, nothing running) run at once on the calling thread
  // instead of waking the worker, in order with every other closure, minus
  // two thread switches. Closures of other threads queue as usual, and so
  // do the caller's own while the worker is busy. For callers that would
  // wait for the work anyway. One inline caller at a time: while another
  // thread is one, the object returned is inactive and changes nothing.
  class InlineCaller {
   public:
    InlineCaller(InlineCaller&& other) noexcept
        : worker_(std::exchange(other.worker_, nullptr)) {}
    InlineCaller& operator=(InlineCaller&&) = delete;
    InlineCaller(const InlineCaller&) = delete;
    ~InlineCaller();
    bool active() const { return worker_ != nullptr; }

   private:
    friend class WorkerThread;
    explicit InlineCaller(WorkerThread* worker) : worker_(worker) {}
    WorkerThread* worker_;
  };
  InlineCaller LetCallerRunWhenIdle();

  // Closures scheduled and not yet finished.
  int64_t pending() const;

  const std::string& name() const { return name_; }

 private:
  void Run();

  const std::string name_;
  mutable Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The thread whose closures may run inline (see InlineCaller); none when
  // default-constructed.
  std::thread::id inline_caller_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_WORKER_THREAD_H_
