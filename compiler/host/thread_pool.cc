#include "compiler/host/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace pjrt::compiler::host {

ThreadPool& ThreadPool::Get() {
  static ThreadPool* pool = [] {
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // PJRT_HOST_THREADS overrides the size (for experiments and for
    // machines shared with other work).
    if (const char* env = std::getenv("PJRT_HOST_THREADS")) {
      int n = std::atoi(env);
      if (n >= 1 && n <= 1024) threads = n;
    }
    return new ThreadPool(threads);
  }();
  return *pool;
}

ThreadPool::ThreadPool(int threads)
    : pool_(threads), device_(&pool_, threads) {}

void ThreadPool::ParallelFor(int64_t n, double cycles_per_item,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // Below ~200k cycles of work (tens of microseconds), waking another
  // thread costs more than it saves.
  if (pool_.NumThreads() <= 1 || n * cycles_per_item < 2e5) {
    fn(0, n);
    return;
  }
  // A few contiguous chunks per thread: enough to balance uneven work,
  // few enough that scheduling costs nothing next to the work.
  const int threads = pool_.NumThreads();
  int64_t chunks = std::min<int64_t>(n, 4 * threads);
  chunks = std::max<int64_t>(
      1, std::min<int64_t>(chunks, static_cast<int64_t>(n * cycles_per_item / 2e4)));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  Eigen::Barrier barrier(static_cast<unsigned>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) {
    pool_.Schedule([&fn, &barrier, c, chunks, n] {
      fn(n * c / chunks, n * (c + 1) / chunks);
      barrier.Notify();
    });
  }
  fn(0, n / chunks);
  barrier.Wait();
}

}  // namespace pjrt::compiler::host
