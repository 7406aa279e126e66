// CompileCache: the daemon-wide cache of compiled programs, shared by every
// session.
//
// Keyed by the full program text and the serialized compile options (never
// by a hash alone, so two programs can never be confused); the SHA-256
// fingerprint of that key is what clients and logs see. Bounded by count
// and by bytes (the key, which holds the program text, plus the compiled
// value's own estimate): beyond either, the least recently used programs
// are dropped (sessions that hold their executables keep them alive; only
// the cache forgets them), and a program larger than the whole byte budget
// is compiled but not kept. Two concurrent requests for the same program
// compile it once: the second waits for the first and shares its result. A
// failed compile is not cached: every waiter gets its error, and the next
// request tries again.
//
// A class template so that it can be tested without a compiler; the daemon
// uses CompileCache<runtime::Executable>.
//
// Thread-safe. `compile` runs without the cache's lock held, so different
// programs compile in parallel.
#ifndef PJRT_DAEMON_COMPILE_CACHE_H_
#define PJRT_DAEMON_COMPILE_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/check.h"
#include "base/mutex.h"

namespace pjrt::daemon {

// Programs a daemon's cache holds by default.
inline constexpr int kDefaultCompileCacheCapacity = 64;

// The cache key for `program_text` compiled with options serialized as
// `options_bytes` by the backend whose fingerprint (the platform, device
// kind and compiler target: compiler::Backend::fingerprint) is given:
// unambiguous (the fingerprint and the options are length-prefixed).
std::string CompileCacheKey(absl::string_view program_text,
                            absl::string_view options_bytes,
                            absl::string_view backend_fingerprint = "");

// Lower-case hex SHA-256 of `key` (64 characters).
std::string Fingerprint(absl::string_view key);

// Bytes a daemon's cache holds by default.
inline constexpr int64_t kDefaultCompileCacheBytes = int64_t{1} << 30;

struct CompileCacheStats {
  int entries = 0;
  int capacity = 0;
  int64_t bytes = 0;
  int64_t capacity_bytes = 0;
  // Requests answered by a cached program or by joining a compile under way.
  int64_t hits = 0;
  // Compiles run, and how many of them failed.
  int64_t compiles = 0;
  int64_t failures = 0;
  int64_t evictions = 0;
};

template <typename Value>
class CompileCache {
 public:
  struct Result {
    std::shared_ptr<Value> value;
    // False only for the request that ran the compile.
    bool cache_hit = false;
    std::string fingerprint;
    // Time this request spent compiling or waiting for a compile.
    absl::Duration elapsed;
  };

  // `size_of` estimates the memory a compiled value holds (besides the key).
  // REQUIRES: capacity >= 0, capacity_bytes >= 0.
  explicit CompileCache(int capacity = kDefaultCompileCacheCapacity,
                        int64_t capacity_bytes = kDefaultCompileCacheBytes,
                        std::function<int64_t(const Value&)> size_of = nullptr)
      : capacity_(capacity),
        capacity_bytes_(capacity_bytes),
        size_of_(std::move(size_of)) {
    PJRT_DCHECK(capacity >= 0 && capacity_bytes >= 0)
        << "capacity " << capacity << ", capacity_bytes " << capacity_bytes;
  }
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // The cached value for `key`, or the result of `compile()` (run by this
  // request, or by a concurrent one for the same key). Errors of `compile`
  // are returned unchanged. A program compiled here belongs to `owner`
  // (a tenant; keys of different owners must differ): with
  // `owner_capacity` > 0, the owner keeps at most that many programs, its
  // least recently used going first, so that no owner fills the cache.
  absl::StatusOr<Result> GetOrCompile(
      absl::string_view key,
      absl::FunctionRef<absl::StatusOr<std::shared_ptr<Value>>()> compile,
      absl::string_view owner = "", int owner_capacity = 0);

  CompileCacheStats stats() const;

 private:
  struct Entry {
    Entry(std::string k, std::string o)
        : key(std::move(k)), owner(std::move(o)) {}
    const std::string key;
    const std::string owner;
    // Guarded by the cache's mutex.
    bool done = false;
    absl::Status status;
    std::shared_ptr<Value> value;
    int64_t bytes = 0;
  };
  using EntryList = std::list<std::shared_ptr<Entry>>;

  // Drops least recently used finished entries beyond the capacities, and
  // `owner`'s beyond `owner_capacity` (when > 0).
  void EvictLocked(const std::string& owner, int owner_capacity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the finished entry at `it`; returns the next.
  typename std::list<std::shared_ptr<Entry>>::iterator DropLocked(
      typename std::list<std::shared_ptr<Entry>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int capacity_;
  const int64_t capacity_bytes_;
  const std::function<int64_t(const Value&)> size_of_;
  mutable pjrt::Mutex mu_;
  // Most recently used first. Compiles under way are in the list too, but
  // are neither counted against the capacity nor evicted.
  EntryList lru_ ABSL_GUARDED_BY(mu_);
  // Keys point into the entries' own `key`, which outlive their index slot.
  absl::flat_hash_map<absl::string_view, typename EntryList::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Finished entries by owner.
  absl::flat_hash_map<std::string, int> owned_ ABSL_GUARDED_BY(mu_);
  CompileCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

// --- implementation --------------------------------------------------------

template <typename Value>
absl::StatusOr<typename CompileCache<Value>::Result>
CompileCache<Value>::GetOrCompile(
    absl::string_view key,
    absl::FunctionRef<absl::StatusOr<std::shared_ptr<Value>>()> compile,
    absl::string_view owner, int owner_capacity) {
  const absl::Time start = absl::Now();
  Result result;
  result.fingerprint = Fingerprint(key);
  std::shared_ptr<Entry> entry;
  {
    pjrt::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      entry = *it->second;
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      Entry* e = entry.get();
      mu_.Await([e]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->done; });
      if (!entry->status.ok()) return entry->status;
      result.value = entry->value;
      result.cache_hit = true;
      result.elapsed = absl::Now() - start;
      return result;
    }
    entry = std::make_shared<Entry>(std::string(key), std::string(owner));
    lru_.push_front(entry);
    index_.emplace(absl::string_view(entry->key), lru_.begin());
    ++stats_.compiles;
  }

  absl::StatusOr<std::shared_ptr<Value>> compiled = compile();
  if (compiled.ok() && *compiled == nullptr) {
    compiled = absl::InternalError("the compiler returned no program");
  }

  pjrt::MutexLock lock(&mu_);
  // The entry is still indexed: only finished entries are ever removed.
  auto it = index_.find(absl::string_view(entry->key));
  entry->done = true;
  if (!compiled.ok()) {
    entry->status = compiled.status();
    ++stats_.failures;
    lru_.erase(it->second);
    index_.erase(it);
    return compiled.status();
  }
  entry->value = *compiled;
  entry->bytes = static_cast<int64_t>(entry->key.size()) +
                 (size_of_ != nullptr ? size_of_(**compiled) : 0);
  if (entry->bytes > capacity_bytes_ || capacity_ == 0) {
    // Too large to keep: this request (and those that joined it) get the
    // program, the cache forgets it.
    lru_.erase(it->second);
    index_.erase(it);
    ++stats_.evictions;
  } else {
    ++finished_;
    bytes_ += entry->bytes;
    ++owned_[entry->owner];
    EvictLocked(entry->owner, owner_capacity);
  }
  result.value = std::move(*compiled);
  result.elapsed = absl::Now() - start;
  return result;
}

template <typename Value>
typename std::list<
    std::shared_ptr<typename CompileCache<Value>::Entry>>::iterator
CompileCache<Value>::DropLocked(
    typename std::list<std::shared_ptr<Entry>>::iterator it) {
  bytes_ -= (*it)->bytes;
  if (--owned_[(*it)->owner] == 0) owned_.erase((*it)->owner);
  index_.erase(absl::string_view((*it)->key));
  --finished_;
  ++stats_.evictions;
  return lru_.erase(it);
}

template <typename Value>
void CompileCache<Value>::EvictLocked(const std::string& owner,
                                      int owner_capacity) {
  if (owner_capacity > 0) {
    auto it = lru_.end();
    while (owned_[owner] > owner_capacity && it != lru_.begin()) {
      --it;
      if ((*it)->done && (*it)->owner == owner) it = DropLocked(it);
    }
    if (owned_[owner] == 0) owned_.erase(owner);
  }
  auto it = lru_.end();
  while ((finished_ > capacity_ || bytes_ > capacity_bytes_) &&
         it != lru_.begin()) {
    --it;
    if (!(*it)->done) continue;
    it = DropLocked(it);
  }
}

template <typename Value>
CompileCacheStats CompileCache<Value>::stats() const {
  pjrt::MutexLock lock(&mu_);
  CompileCacheStats stats = stats_;
  stats.entries = finished_;
  stats.capacity = capacity_;
  stats.bytes = bytes_;
  stats.capacity_bytes = capacity_bytes_;
  return stats;
}

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_COMPILE_CACHE_H_
