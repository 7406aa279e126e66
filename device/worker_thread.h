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

  // While one lives, closures that its thread schedules on an idle
  // WorkerThread (nothing queued, nothing running) run at once on the
  // scheduling thread instead of waking the worker: in order with every
  // other closure, minus two thread switches. For callers that would wait
  // for the work anyway (a call that replies once its results are ready).
  class InlineScope {
   public:
    InlineScope();
    ~InlineScope();
    InlineScope(const InlineScope&) = delete;
    InlineScope& operator=(const InlineScope&) = delete;
  };

  // Turns inline running off on this thread while it lives (for work that
  // may wait for other threads' calls, such as a collective's peers).
  class NoInlineScope {
   public:
    NoInlineScope();
    ~NoInlineScope();
    NoInlineScope(const NoInlineScope&) = delete;
    NoInlineScope& operator=(const NoInlineScope&) = delete;

   private:
    int saved_;
  };

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
  std::thread thread_;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_WORKER_THREAD_H_
