#include "daemon/compile_cache.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

// Stands in for a compiled program.
struct Program {
  explicit Program(std::string t) : text(std::move(t)) {}
  std::string text;
};

using Cache = CompileCache<Program>;

// A compile function that counts its calls.
struct Compiler {
  std::atomic<int> calls{0};
  absl::StatusOr<std::shared_ptr<Program>> operator()(const std::string& key) {
    ++calls;
    return std::make_shared<Program>(key);
  }
};

absl::StatusOr<Cache::Result> Get(Cache& cache, Compiler& compiler,
                                  const std::string& key) {
  return cache.GetOrCompile(key, [&] { return compiler(key); });
}

TEST(CompileCacheTest, FingerprintIsTheSha256OfTheKeyInHex) {
  EXPECT_EQ(Fingerprint("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Fingerprint(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(CompileCacheTest, KeysOfDifferentTextOrOptionsDiffer) {
  EXPECT_NE(CompileCacheKey("HloModule m", ""),
            CompileCacheKey("HloModule m", "x"));
  // Options are length-prefixed: moving bytes between text and options
  // cannot produce the same key.
  EXPECT_NE(CompileCacheKey("bc", "a"), CompileCacheKey("c", "ab"));
  // The same program and options for another backend or device kind.
  EXPECT_NE(CompileCacheKey("HloModule m", "o", "host;cpu"),
            CompileCacheKey("HloModule m", "o", "cuda;NVIDIA H200;sm_90"));
  EXPECT_NE(CompileCacheKey("HloModule m", "o", "a"),
            CompileCacheKey("HloModule m", "ao", ""));
  EXPECT_EQ(CompileCacheKey("HloModule m", "o"),
            CompileCacheKey("HloModule m", "o"));
}

TEST(CompileCacheTest, AnOwnerKeepsAtMostItsShareAndOthersKeepTheirs) {
  Cache cache(8);
  Compiler compiler;
  const auto get = [&](const std::string& key, const std::string& owner) {
    auto result = cache.GetOrCompile(
        key, [&] { return compiler(key); }, owner, /*owner_capacity=*/2);
    EXPECT_TRUE(result.ok());
    return result->cache_hit;
  };
  EXPECT_FALSE(get("b1", "bob"));
  for (const char* key : {"a1", "a2", "a3", "a4"})
    EXPECT_FALSE(get(key, "amy"));
  EXPECT_EQ(cache.stats().entries, 3);  // amy's last two, and bob's
  EXPECT_TRUE(get("a4", "amy"));
  EXPECT_TRUE(get("a3", "amy"));
  EXPECT_FALSE(get("a1", "amy"));  // amy's oldest went first
  EXPECT_TRUE(get("b1", "bob"));   // bob's stayed
}

TEST(CompileCacheTest, SecondRequestForTheSameProgramIsAHit) {
  Cache cache(4);
  Compiler compiler;
  auto first = Get(cache, compiler, "p");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit);
  auto second = Get(cache, compiler, "p");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->value, first->value);
  EXPECT_EQ(second->fingerprint, first->fingerprint);
  EXPECT_EQ(first->fingerprint, Fingerprint("p"));
  EXPECT_EQ(compiler.calls, 1);
  CompileCacheStats stats = cache.stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.capacity, 4);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.compiles, 1);
}

TEST(CompileCacheTest, ConcurrentRequestsForOneProgramCompileItOnce) {
  Cache cache(4);
  pjrt::Mutex mu;
  bool release = false;
  std::atomic<int> calls{0};
  auto slow_compile = [&]() -> absl::StatusOr<std::shared_ptr<Program>> {
    ++calls;
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return release; });
    return std::make_shared<Program>("p");
  };
  absl::StatusOr<Cache::Result> first, second;
  std::thread a([&] { first = cache.GetOrCompile("p", slow_compile); });
  // Wait until the first request is compiling, then start the second: it
  // must join the compile under way (the cache counts it as a hit as soon
  // as it joins).
  while (calls.load() == 0) std::this_thread::yield();
  std::thread b([&] { second = cache.GetOrCompile("p", slow_compile); });
  while (cache.stats().hits == 0) std::this_thread::yield();
  {
    pjrt::MutexLock lock(&mu);
    release = true;
  }
  a.join();
  b.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(first->value, second->value);
  EXPECT_FALSE(first->cache_hit);
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(cache.stats().compiles, 1);
}

TEST(CompileCacheTest, FailedCompileIsSharedWithWaitersButNotCached) {
  Cache cache(4);
  pjrt::Mutex mu;
  bool release = false;
  std::atomic<int> calls{0};
  auto failing_compile = [&]() -> absl::StatusOr<std::shared_ptr<Program>> {
    ++calls;
    pjrt::MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return release; });
    return absl::InvalidArgumentError("line 3, column 7: expected '='");
  };
  absl::StatusOr<Cache::Result> first, second;
  std::thread a([&] { first = cache.GetOrCompile("bad", failing_compile); });
  while (calls.load() == 0) std::this_thread::yield();
  std::thread b([&] { second = cache.GetOrCompile("bad", failing_compile); });
  while (cache.stats().hits == 0) std::this_thread::yield();
  {
    pjrt::MutexLock lock(&mu);
    release = true;
  }
  a.join();
  b.join();
  EXPECT_EQ(calls, 1);
  for (const auto* result : {&first, &second}) {
    ASSERT_FALSE(result->ok());
    EXPECT_EQ(result->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result->status().message(), "line 3, column 7: expected '='");
  }
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(cache.stats().failures, 1);

  // The next request compiles again (and may succeed this time).
  Compiler compiler;
  auto third = Get(cache, compiler, "bad");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->cache_hit);
  EXPECT_EQ(compiler.calls, 1);
}

TEST(CompileCacheTest, EvictsTheLeastRecentlyUsedProgramBeyondCapacity) {
  Cache cache(2);
  Compiler compiler;
  ASSERT_TRUE(Get(cache, compiler, "a").ok());
  auto b = Get(cache, compiler, "b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(Get(cache, compiler, "a").ok());  // a is now the most recent
  ASSERT_TRUE(Get(cache, compiler, "c").ok());  // evicts b
  EXPECT_EQ(compiler.calls, 3);
  CompileCacheStats stats = cache.stats();
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(stats.evictions, 1);

  auto a_again = Get(cache, compiler, "a");
  ASSERT_TRUE(a_again.ok());
  EXPECT_TRUE(a_again->cache_hit);
  auto b_again = Get(cache, compiler, "b");
  ASSERT_TRUE(b_again.ok());
  EXPECT_FALSE(b_again->cache_hit);
  EXPECT_EQ(compiler.calls, 4);
  // Whoever held the evicted program still has it.
  EXPECT_EQ(b->value->text, "b");
  EXPECT_NE(b->value, b_again->value);
}

TEST(CompileCacheTest, IsBoundedByBytesAsWellAsByCount) {
  // Each program counts its key plus 1000 bytes of "compiled code".
  Cache cache(100, 3500, [](const Program&) { return int64_t{1000}; });
  Compiler compiler;
  const std::string big(99, 'x');  // keys of 100 bytes
  for (char c : std::string("abcd")) {
    ASSERT_TRUE(Get(cache, compiler, big + c).ok());
  }
  CompileCacheStats stats = cache.stats();
  EXPECT_EQ(stats.entries, 3);  // 3 x 1100 bytes fit in 3500, 4 do not
  EXPECT_EQ(stats.bytes, 3300);
  EXPECT_EQ(stats.capacity_bytes, 3500);
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_FALSE(Get(cache, compiler, big + "a")->cache_hit);  // the oldest went
}

TEST(CompileCacheTest, AProgramLargerThanTheBudgetIsCompiledButNotKept) {
  Cache cache(100, 500, [](const Program&) { return int64_t{1000}; });
  Compiler compiler;
  auto first = Get(cache, compiler, "huge");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->value->text, "huge");
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(cache.stats().bytes, 0);
  EXPECT_FALSE(Get(cache, compiler, "huge")->cache_hit);
  EXPECT_EQ(compiler.calls, 2);
}

TEST(CompileCacheTest, ManyThreadsManyProgramsStayConsistent) {
  Cache cache(8);
  Compiler compiler;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string key = "p" + std::to_string((i * 7 + t) % 16);
        auto result = Get(cache, compiler, key);
        if (!result.ok() || result->value->text != key) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  CompileCacheStats stats = cache.stats();
  EXPECT_LE(stats.entries, 8);
  EXPECT_EQ(stats.hits + stats.compiles, 8 * 200);
  EXPECT_EQ(stats.compiles, compiler.calls);
}

}  // namespace
}  // namespace pjrt::daemon
