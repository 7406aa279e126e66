// Sub-byte types at a program's edges: buffers hold s4, u4 and f4e2m1fn
// packed two per byte and s2 and u2 four per byte, as XLA packs them (the
// first element in the top bits: element 2i of a 4-bit type in the high
// nibble of byte i, element 2i+1 in the low nibble), while the program
// computes on one value per byte (signed ones sign-extended, the others
// zero-extended). The entry program unpacks each such parameter once and
// packs each such result once.
#include <cstdint>
#include <memory>

#include "absl/strings/str_format.h"
#include "compiler/host/kernel.h"
#include "compiler/host/thread_pool.h"

namespace pjrt::compiler::host {

absl::Status SubByteKernel::Run(absl::Span<void* const> addresses,
                                const RunContext& context) const {
  const int per_byte = 8 / bits_;
  const int64_t bytes = (count_ + per_byte - 1) / per_byte;
  const uint8_t mask = static_cast<uint8_t>((1 << bits_) - 1);
  const uint8_t* src = static_cast<const uint8_t*>(addresses[src_]);
  uint8_t* dst = static_cast<uint8_t*>(addresses[dst_]);
  ThreadPool::Get().ParallelFor(bytes, 4, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t i = per_byte * b;
      if (pack_) {
        uint8_t byte = 0;
        for (int k = 0; k < per_byte && i + k < count_; ++k) {
          byte |= static_cast<uint8_t>((src[i + k] & mask)
                                       << (8 - bits_ * (k + 1)));
        }
        dst[b] = byte;
      } else {
        for (int k = 0; k < per_byte && i + k < count_; ++k) {
          dst[i + k] = Extend((src[b] >> (8 - bits_ * (k + 1))) & mask);
        }
      }
    }
  });
  (void)context;
  return absl::OkStatus();
}

std::shared_ptr<Kernel> SubByteEdgeKernel(bool pack, hlo::PrimitiveType type,
                                          int64_t count, int src, int dst) {
  const int bits = hlo::BitWidth(type);
  auto kernel = std::make_shared<SubByteKernel>(
      pack, hlo::IsSignedInteger(type), bits, count, src, dst);
  kernel->name = absl::StrFormat("%s %s[%d]", pack ? "pack" : "unpack",
                                 hlo::PrimitiveTypeName(type), count);
  const int64_t packed = hlo::PackedByteSize(type, count);
  kernel->reads = {{src, pack ? count : packed}};
  kernel->writes = {{dst, pack ? packed : count}};
  return kernel;
}

}  // namespace pjrt::compiler::host
