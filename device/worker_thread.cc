#include "device/worker_thread.h"

#include <pthread.h>

#include <utility>

namespace pjrt::device {

WorkerThread::InlineCaller WorkerThread::LetCallerRunWhenIdle() {
  MutexLock lock(&mu_);
  if (inline_caller_ != std::thread::id() ||
      std::this_thread::get_id() == thread_.get_id()) {
    return InlineCaller(nullptr);
  }
  inline_caller_ = std::this_thread::get_id();
  return InlineCaller(this);
}

WorkerThread::InlineCaller::~InlineCaller() {
  if (worker_ == nullptr) return;
  MutexLock lock(&worker_->mu_);
  worker_->inline_caller_ = std::thread::id();
}

WorkerThread::WorkerThread(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Run(); });
  std::string short_name = name_.substr(0, 15);
  pthread_setname_np(thread_.native_handle(), short_name.c_str());
}

WorkerThread::~WorkerThread() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void WorkerThread::Schedule(absl::AnyInvocable<void() &&> fn) {
  {
    MutexLock lock(&mu_);
    if (inline_caller_ != std::this_thread::get_id() || !queue_.empty() ||
        running_ > 0 || stopping_) {
      queue_.push_back(std::move(fn));
      return;
    }
    // Idle: run it here. running_ keeps the worker (and other inline
    // callers) off until it is done, so the order holds.
    running_ = 1;
  }
  std::move(fn)();
  MutexLock lock(&mu_);
  running_ = 0;
}

int64_t WorkerThread::pending() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size()) + running_;
}

void WorkerThread::Run() {
  for (;;) {
    absl::AnyInvocable<void() &&> fn;
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return (stopping_ && running_ == 0) ||
               (!queue_.empty() && running_ == 0);
      });
      if (queue_.empty()) return;  // stopping, and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
      running_ = 1;
    }
    std::move(fn)();
    MutexLock lock(&mu_);
    running_ = 0;
  }
}

}  // namespace pjrt::device
