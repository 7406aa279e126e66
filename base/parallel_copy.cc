#include "base/parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

namespace pjrt {

void ParallelMemcpy(void* dst, const void* src, int64_t size) {
  if (size <= 0) return;
  const int64_t cpus = std::max(1u, std::thread::hardware_concurrency());
  const int64_t pieces = std::min<int64_t>(
      {cpus, 8, std::max<int64_t>(1, size / (int64_t{4} << 20))});
  if (size < kParallelCopyMinBytes || pieces == 1) {
    std::memcpy(dst, src, static_cast<size_t>(size));
    return;
  }
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  // Piece boundaries on 4 KiB, so that no two threads write one page.
  const auto bound = [&](int64_t i) {
    return i == pieces ? size : (size * i / pieces) & ~int64_t{4095};
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(pieces - 1));
  for (int64_t i = 1; i < pieces; ++i) {
    const int64_t begin = bound(i), end = bound(i + 1);
    auto copy = [out, in, begin, end] {
      std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin));
    };
    try {
      helpers.emplace_back(copy);
    } catch (const std::system_error&) {
      copy();  // no thread to be had: copy it here
    }
  }
  std::memcpy(out, in, static_cast<size_t>(bound(1)));
  for (std::thread& helper : helpers) helper.join();
}

}  // namespace pjrt
