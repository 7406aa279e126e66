// Large memory copies on several threads: one core's copy is bounded by
// the misses it can keep in flight, well below what the memory system
// moves for several cores together.
#ifndef PJRT_BASE_PARALLEL_COPY_H_
#define PJRT_BASE_PARALLEL_COPY_H_

#include <cstdint>

namespace pjrt {

// Copies below this many bytes stay on the calling thread: starting a
// thread costs tens of microseconds.
inline constexpr int64_t kParallelCopyMinBytes = int64_t{8} << 20;

// std::memcpy(dst, src, size) for non-overlapping ranges; a copy of at
// least kParallelCopyMinBytes is split into pieces of at least 4 MiB, one
// per CPU (at most 8), the calling thread copying one of them.
void ParallelMemcpy(void* dst, const void* src, int64_t size);

}  // namespace pjrt

#endif  // PJRT_BASE_PARALLEL_COPY_H_
