// BfcAllocator: a caching best-fit-with-coalescing allocator, in the spirit
// of TensorFlow's BFC allocator.
//
// Memory comes from a SubAllocator in regions that grow geometrically (2 MiB,
// 4 MiB, ... or the request if larger) up to the memory limit; regions are
// kept when their chunks are freed, so a steady workload stops calling the
// platform allocator. Each region is split into chunks that are multiples of
// 256 bytes. Free chunks sit in bins of power-of-two size classes, each bin
// ordered by (size, address); an allocation takes the smallest free chunk
// that fits (best fit, lowest address on ties), splits off the remainder,
// and a free merges the chunk with free neighbours in the same region.
//
// When no chunk fits and the limit leaves no room for a new region, regions
// that are entirely free are returned to the platform and the request
// retried; only then is it RESOURCE_EXHAUSTED, with the statistics.
//
// The largest free block is the largest request that would succeed now:
// the largest free chunk, or the room left under the limit once entirely
// free regions are returned. Charged bytes (memory a buffer holds outside
// the allocator) count as in use and against the limit: a charge fits when
// the chunks in use and the charges leave room for it (entirely free
// regions are returned first), and a new region only in what the regions
// and the charges leave. Statistics count requested bytes (`bytes_in_use`), so
// a 1000-byte buffer shows as 1000 bytes, not as its 1024-byte chunk;
// `bytes_reserved` is what the regions hold.
//
// Thread-safe.
#ifndef PJRT_DEVICE_BFC_ALLOCATOR_H_
#define PJRT_DEVICE_BFC_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "device/allocator.h"
#include "device/sub_allocator.h"

namespace pjrt::device {

class BfcAllocator : public Allocator {
 public:
  struct Options {
    // Shown in error messages: "host device 0".
    std::string name;
    // The most the regions may hold together.
    int64_t memory_limit = 0;
    // First region's size; later ones double.
    int64_t initial_region_bytes = int64_t{2} << 20;
  };

  BfcAllocator(std::unique_ptr<SubAllocator> sub_allocator, Options options);
  ~BfcAllocator() override;
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  void Deallocate(void* ptr) override;
  absl::Status Charge(int64_t bytes) override;
  void Discharge(int64_t bytes) override;
  AllocatorStats GetStats() const override;

  static constexpr int64_t kMinChunkBytes = 256;

 private:
  struct Region;
  struct Chunk {
    char* ptr = nullptr;
    int64_t size = 0;       // multiple of kMinChunkBytes
    int64_t requested = 0;  // 0 when free
    bool in_use = false;
    Chunk* prev = nullptr;  // neighbours in address order, same region
    Chunk* next = nullptr;
    Region* region = nullptr;
  };
  struct Region {
    char* base = nullptr;
    int64_t size = 0;
    Chunk* first = nullptr;
  };
  struct BySizeThenAddress {
    bool operator()(const Chunk* a, const Chunk* b) const {
      if (a->size != b->size) return a->size < b->size;
      return a->ptr < b->ptr;
    }
  };
  static constexpr int kNumBins = 21;

  static int BinFor(int64_t size);
  Chunk* FindFreeChunk(int64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFree(Chunk* chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFree(Chunk* chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a region big enough for `size`; false if the limit forbids it.
  bool Extend(int64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns entirely free regions to the sub-allocator; true if any was.
  bool ReleaseFreeRegions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AllocatorStats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<SubAllocator> sub_allocator_;
  const Options options_;

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Region>> regions_ ABSL_GUARDED_BY(mu_);
  std::array<std::set<Chunk*, BySizeThenAddress>, kNumBins> bins_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, Chunk*> in_use_ ABSL_GUARDED_BY(mu_);
  int64_t next_region_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t chunk_bytes_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes of Charge not yet discharged: memory held elsewhere that counts
  // against the limit like a region.
  int64_t charged_ ABSL_GUARDED_BY(mu_) = 0;
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_BFC_ALLOCATOR_H_
