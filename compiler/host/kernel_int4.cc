// s4 and u4 at a program's edges: buffers hold them packed two per byte as
// XLA packs them (element 2i in the high nibble of byte i, element 2i+1 in
// the low nibble), while the program computes on one value per byte (s4
// sign-extended, u4 zero-extended). The entry program unpacks each such
// parameter once and packs each such result once.
#include <cstdint>
#include <memory>

#include "absl/strings/str_format.h"
#include "compiler/host/kernel.h"
#include "compiler/host/thread_pool.h"

namespace pjrt::compiler::host {

absl::Status Int4Kernel::Run(absl::Span<void* const> addresses,
                             const RunContext& context) const {
  const int64_t bytes = (count_ + 1) / 2;
  const uint8_t* src = static_cast<const uint8_t*>(addresses[src_]);
  uint8_t* dst = static_cast<uint8_t*>(addresses[dst_]);
  ThreadPool::Get().ParallelFor(bytes, 4, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t i = 2 * b;
      if (pack_) {
        const uint8_t low = i + 1 < count_ ? (src[i + 1] & 0xF) : 0;
        dst[b] = static_cast<uint8_t>((src[i] & 0xF) << 4 | low);
      } else {
        dst[i] = Extend(src[b] >> 4);
        if (i + 1 < count_) dst[i + 1] = Extend(src[b] & 0xF);
      }
    }
  });
  (void)context;
  return absl::OkStatus();
}

std::shared_ptr<Kernel> Int4EdgeKernel(bool pack, hlo::PrimitiveType type,
                                       int64_t count, int src, int dst) {
  auto kernel = std::make_shared<Int4Kernel>(
      pack, type == hlo::PrimitiveType::kS4, count, src, dst);
  kernel->name = absl::StrFormat("%s %s[%d]", pack ? "pack" : "unpack",
                                 hlo::PrimitiveTypeName(type), count);
  const int64_t packed = (count + 1) / 2;
  kernel->reads = {{src, pack ? count : packed}};
  kernel->writes = {{dst, pack ? packed : count}};
  return kernel;
}

}  // namespace pjrt::compiler::host
