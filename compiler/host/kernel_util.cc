#include "compiler/host/kernel_util.h"

#include <limits>

namespace pjrt::compiler::host {

double LoadAsDouble(hlo::PrimitiveType type, const void* base, int64_t index) {
  return DispatchType(type, [&](auto pt) -> double {
    using S = typename TypeTraits<decltype(pt)::value>::Storage;
    return static_cast<double>(static_cast<const S*>(base)[index]);
  });
}

int64_t LoadIndex(hlo::PrimitiveType type, const void* base, int64_t index) {
  switch (type) {
    case hlo::PrimitiveType::kS8:
    case hlo::PrimitiveType::kS4:  // held one per byte, sign-extended
    case hlo::PrimitiveType::kS2:
      return static_cast<const int8_t*>(base)[index];
    case hlo::PrimitiveType::kS16:
      return static_cast<const int16_t*>(base)[index];
    case hlo::PrimitiveType::kS32:
      return static_cast<const int32_t*>(base)[index];
    case hlo::PrimitiveType::kS64:
      return static_cast<const int64_t*>(base)[index];
    case hlo::PrimitiveType::kU8:
    case hlo::PrimitiveType::kU4:
    case hlo::PrimitiveType::kU2:
      return static_cast<const uint8_t*>(base)[index];
    case hlo::PrimitiveType::kU16:
      return static_cast<const uint16_t*>(base)[index];
    case hlo::PrimitiveType::kU32:
      return static_cast<const uint32_t*>(base)[index];
    case hlo::PrimitiveType::kU64: {
      const uint64_t v = static_cast<const uint64_t*>(base)[index];
      return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max()
                 : static_cast<int64_t>(v);
    }
    default:
      return 0;
  }
}

}  // namespace pjrt::compiler::host
