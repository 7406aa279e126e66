#include "device/bfc_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "base/log.h"

namespace pjrt::device {
namespace {

int64_t RoundUp(int64_t bytes, int64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

BfcAllocator::BfcAllocator(std::unique_ptr<SubAllocator> sub_allocator,
                           Options options)
    : sub_allocator_(std::move(sub_allocator)),
      options_(std::move(options)),
      next_region_bytes_(options_.initial_region_bytes) {
  stats_.bytes_limit = options_.memory_limit;
}

BfcAllocator::~BfcAllocator() {
  MutexLock lock(&mu_);
  if (!in_use_.empty()) {
    spdlog::warn("{}: {} allocations ({} bytes) still live at shutdown",
                 options_.name, in_use_.size(), stats_.bytes_in_use);
  }
  for (auto& region : regions_) {
    for (Chunk* c = region->first; c != nullptr;) {
      Chunk* next = c->next;
      delete c;
      c = next;
    }
    sub_allocator_->Free(region->base, region->size);
  }
}

int BfcAllocator::BinFor(int64_t size) {
  uint64_t units = static_cast<uint64_t>(
      std::max<int64_t>(size, kMinChunkBytes) / kMinChunkBytes);
  int bin = std::bit_width(units) - 1;
  return std::min(bin, kNumBins - 1);
}

void BfcAllocator::InsertFree(Chunk* chunk) {
  bins_[BinFor(chunk->size)].insert(chunk);
}

void BfcAllocator::RemoveFree(Chunk* chunk) {
  bins_[BinFor(chunk->size)].erase(chunk);
}

BfcAllocator::Chunk* BfcAllocator::FindFreeChunk(int64_t size) {
  Chunk probe;
  probe.size = size;
  probe.ptr = nullptr;
  for (int bin = BinFor(size); bin < kNumBins; ++bin) {
    auto it = bins_[bin].lower_bound(&probe);
    if (it != bins_[bin].end()) return *it;
  }
  return nullptr;
}

bool BfcAllocator::Extend(int64_t size) {
  int64_t room = options_.memory_limit - reserved_ - charged_;
  if (room < size) return false;
  int64_t region_bytes = std::min(std::max(size, next_region_bytes_), room);
  region_bytes = region_bytes / kMinChunkBytes * kMinChunkBytes;
  auto base = sub_allocator_->Alloc(region_bytes);
  if (!base.ok() && region_bytes > size) {
    // The platform may still have room for exactly the request.
    region_bytes = size;
    base = sub_allocator_->Alloc(region_bytes);
  }
  if (!base.ok()) return false;
  auto region = std::make_unique<Region>();
  region->base = static_cast<char*>(*base);
  region->size = region_bytes;
  Chunk* chunk = new Chunk;
  chunk->ptr = region->base;
  chunk->size = region_bytes;
  chunk->region = region.get();
  region->first = chunk;
  InsertFree(chunk);
  reserved_ += region_bytes;
  regions_.push_back(std::move(region));
  if (next_region_bytes_ < options_.memory_limit / 2) next_region_bytes_ *= 2;
  return true;
}

bool BfcAllocator::ReleaseFreeRegions() {
  bool released = false;
  for (auto it = regions_.begin(); it != regions_.end();) {
    Region* region = it->get();
    Chunk* c = region->first;
    if (c->in_use || c->next != nullptr) {
      ++it;
      continue;
    }
    RemoveFree(c);
    delete c;
    sub_allocator_->Free(region->base, region->size);
    reserved_ -= region->size;
    it = regions_.erase(it);
    released = true;
  }
  return released;
}

absl::StatusOr<void*> BfcAllocator::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot allocate %d bytes", options_.name, bytes));
  }
  if (bytes == 0) return nullptr;
  const int64_t size = RoundUp(bytes, kMinChunkBytes);
  MutexLock lock(&mu_);
  Chunk* chunk = FindFreeChunk(size);
  if (chunk == nullptr && Extend(size)) chunk = FindFreeChunk(size);
  if (chunk == nullptr && ReleaseFreeRegions() && Extend(size)) {
    chunk = FindFreeChunk(size);
  }
  if (chunk == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory on %s: cannot allocate %d bytes (%s); %s", options_.name,
        bytes, FormatByteSize(bytes), StatsLocked().ToString()));
  }
  RemoveFree(chunk);
  if (chunk->size - size >= kMinChunkBytes) {
    Chunk* rest = new Chunk;
    rest->ptr = chunk->ptr + size;
    rest->size = chunk->size - size;
    rest->region = chunk->region;
    rest->prev = chunk;
    rest->next = chunk->next;
    if (chunk->next != nullptr) chunk->next->prev = rest;
    chunk->next = rest;
    chunk->size = size;
    InsertFree(rest);
  }
  chunk->in_use = true;
  chunk->requested = bytes;
  in_use_[chunk->ptr] = chunk;
  chunk_bytes_in_use_ += chunk->size;
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.num_allocs++;
  stats_.total_allocs++;
  return static_cast<void*>(chunk->ptr);
}

void BfcAllocator::Deallocate(void* ptr) {
  if (ptr == nullptr) return;
  MutexLock lock(&mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) {
    spdlog::critical("{}: free of unknown pointer {}", options_.name, ptr);
    std::abort();
  }
  Chunk* chunk = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= chunk->requested;
  stats_.num_allocs--;
  chunk_bytes_in_use_ -= chunk->size;
  chunk->in_use = false;
  chunk->requested = 0;
  // Coalesce with free neighbours.
  if (Chunk* next = chunk->next; next != nullptr && !next->in_use) {
    RemoveFree(next);
    chunk->size += next->size;
    chunk->next = next->next;
    if (next->next != nullptr) next->next->prev = chunk;
    delete next;
  }
  if (Chunk* prev = chunk->prev; prev != nullptr && !prev->in_use) {
    RemoveFree(prev);
    prev->size += chunk->size;
    prev->next = chunk->next;
    if (chunk->next != nullptr) chunk->next->prev = prev;
    delete chunk;
    chunk = prev;
  }
  InsertFree(chunk);
}

absl::Status BfcAllocator::Charge(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot charge %d bytes", options_.name, bytes));
  }
  MutexLock lock(&mu_);
  // Free regions go back first, so that what the limit bounds stays held
  // where possible; free chunks of regions in use stay cached.
  if (options_.memory_limit - reserved_ - charged_ < bytes)
    ReleaseFreeRegions();
  if (options_.memory_limit - chunk_bytes_in_use_ - charged_ < bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory on %s: cannot hold %d bytes (%s); %s", options_.name,
        bytes, FormatByteSize(bytes), StatsLocked().ToString()));
  }
  charged_ += bytes;
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.num_allocs++;
  stats_.total_allocs++;
  return absl::OkStatus();
}

void BfcAllocator::Discharge(int64_t bytes) {
  MutexLock lock(&mu_);
  charged_ -= bytes;
  stats_.bytes_in_use -= bytes;
  stats_.num_allocs--;
}

AllocatorStats BfcAllocator::StatsLocked() const {
  AllocatorStats stats = stats_;
  stats.bytes_reserved = reserved_;
  int64_t largest_chunk = 0;
  for (int bin = kNumBins - 1; bin >= 0; --bin) {
    if (!bins_[bin].empty()) {
      largest_chunk = (*bins_[bin].rbegin())->size;
      break;
    }
  }
  // Entirely free regions count as room: a large request releases them.
  int64_t releasable = 0;
  for (const auto& region : regions_) {
    if (!region->first->in_use && region->first->next == nullptr) {
      releasable += region->size;
    }
  }
  stats.largest_free_block =
      std::max({int64_t{0}, largest_chunk,
                options_.memory_limit - reserved_ - charged_ + releasable});
  int64_t free_bytes = options_.memory_limit - chunk_bytes_in_use_ - charged_;
  stats.fragmentation =
      free_bytes > 0
          ? 1.0 - static_cast<double>(stats.largest_free_block) / free_bytes
          : 0.0;
  return stats;
}

AllocatorStats BfcAllocator::GetStats() const {
  MutexLock lock(&mu_);
  return StatsLocked();
}

}  // namespace pjrt::device
