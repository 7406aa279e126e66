#include "compiler/host/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/check.h"

namespace pjrt::compiler::host {
namespace {

#if defined(__SANITIZE_THREAD__)
// A FIFO pool that synchronizes only through a mutex and a condition
// variable, which ThreadSanitizer understands. Slower than Eigen's pool;
// used in TSan builds only.
class LockedThreadPool final : public Eigen::ThreadPoolInterface {
 public:
  explicit LockedThreadPool(int threads) {
    threads_.reserve(threads);
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] { WorkerLoop(i); });
    }
  }

  ~LockedThreadPool() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  void Schedule(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

  int NumThreads() const override { return static_cast<int>(threads_.size()); }

  int CurrentThreadId() const override { return current_id_; }

 private:
  void WorkerLoop(int id) {
    current_id_ = id;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and every task has run
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  static thread_local int current_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

thread_local int LockedThreadPool::current_id_ = -1;

std::unique_ptr<Eigen::ThreadPoolInterface> MakePool(int threads) {
  return std::make_unique<LockedThreadPool>(threads);
}
#else
std::unique_ptr<Eigen::ThreadPoolInterface> MakePool(int threads) {
  return std::make_unique<Eigen::ThreadPool>(threads);
}
#endif

}  // namespace

ThreadPool& ThreadPool::Get() {
  static ThreadPool* pool = [] {
    int threads =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
    : pool_(MakePool(threads)), device_(pool_.get(), threads) {}

void ThreadPool::ParallelFor(int64_t n, double cycles_per_item,
                             const std::function<void(int64_t, int64_t)>& fn) {
  PJRT_DCHECK(pool_->CurrentThreadId() == -1)
      << "ParallelFor from a pool thread";
  if (n <= 0) return;
  // Below ~2M cycles of work by the callers' estimates, waking another
  // thread costs more than it saves: a wake took 5-60 us on a 2-core
  // virtual machine here, where an element-wise loop of 400k floats (1.8M
  // cycles estimated, 0.2 ms) ran 1.3x as long on two threads as on one,
  // and one of 1.6M floats 1.5x faster.
  if (pool_->NumThreads() <= 1 || n * cycles_per_item < 2e6) {
    fn(0, n);
    return;
  }
  // A few contiguous chunks per thread: enough to balance uneven work,
  // few enough that scheduling costs nothing next to the work.
  const int threads = pool_->NumThreads();
  int64_t chunks = std::min<int64_t>(n, 4 * threads);
  chunks = std::max<int64_t>(
      1, std::min<int64_t>(chunks,
                           static_cast<int64_t>(n * cycles_per_item / 2e4)));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  // An exception (std::bad_alloc, say) must not escape a pool thread, which
  // would end the process: the first one is rethrown here, once every chunk
  // is done with `fn` and the barrier on this frame.
  std::mutex error_mu;
  std::exception_ptr error;
  const auto run = [&](int64_t begin, int64_t end) {
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (error == nullptr) error = std::current_exception();
    }
  };
  Eigen::Barrier barrier(static_cast<unsigned>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) {
    pool_->Schedule([&run, &barrier, c, chunks, n] {
      run(n * c / chunks, n * (c + 1) / chunks);
      barrier.Notify();
    });
  }
  run(0, n / chunks);
  barrier.Wait();
  if (error != nullptr) std::rethrow_exception(error);
}

}  // namespace pjrt::compiler::host
