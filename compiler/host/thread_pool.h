// The host platform's compute thread pool: one per process, shared by all
// host devices (they share the same cores), used by fused loops,
// reductions, copies and Eigen's tensor contractions.
//
// Thread-safe.
#ifndef PJRT_COMPILER_HOST_THREAD_POOL_H_
#define PJRT_COMPILER_HOST_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>

#define EIGEN_USE_THREADS
#include "unsupported/Eigen/CXX11/Tensor"

namespace pjrt::compiler::host {

class ThreadPool {
 public:
  // The process's pool, with one thread per hardware thread.
  static ThreadPool& Get();

  Eigen::ThreadPoolDevice& device() { return device_; }
  int num_threads() const { return pool_->NumThreads(); }

  // Runs fn(begin, end) over [0, n) in parallel chunks sized by the cost of
  // one item (in CPU cycles, roughly); the calling thread takes a chunk too.
  // Small loops run inline. An exception thrown by `fn` on any thread is
  // rethrown here once every chunk has finished. REQUIRES: not called from
  // a pool thread (the caller blocks until every chunk is done).
  void ParallelFor(int64_t n, double cycles_per_item,
                   const std::function<void(int64_t, int64_t)>& fn);

 private:
  explicit ThreadPool(int threads);
  // Eigen's non-blocking pool, except under ThreadSanitizer: that pool
  // synchronizes through standalone fences, which TSan does not model, so
  // TSan builds use a plain mutex-and-queue pool (thread_pool.cc) and
  // report only races of our own.
  std::unique_ptr<Eigen::ThreadPoolInterface> pool_;
  Eigen::ThreadPoolDevice device_;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_THREAD_POOL_H_
