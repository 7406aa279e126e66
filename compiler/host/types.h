// Element types on the host: the C++ type each HLO type is stored as, and
// the type it is computed in (f16 and bf16 compute in float, rounding after
// every op as XLA does), with a dispatch macro over all thirteen.
#ifndef PJRT_COMPILER_HOST_TYPES_H_
#define PJRT_COMPILER_HOST_TYPES_H_

#include <cstdint>

#include "Eigen/Core"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

using hlo::PrimitiveType;

template <PrimitiveType T>
struct TypeTraits;

#define PJRT_HOST_TYPE(PT, STORAGE, COMPUTE)          \
  template <>                                         \
  struct TypeTraits<PrimitiveType::PT> {              \
    using Storage = STORAGE;                          \
    using Compute = COMPUTE;                          \
  };
PJRT_HOST_TYPE(kPred, uint8_t, uint8_t)
PJRT_HOST_TYPE(kS8, int8_t, int8_t)
PJRT_HOST_TYPE(kS16, int16_t, int16_t)
PJRT_HOST_TYPE(kS32, int32_t, int32_t)
PJRT_HOST_TYPE(kS64, int64_t, int64_t)
PJRT_HOST_TYPE(kU8, uint8_t, uint8_t)
PJRT_HOST_TYPE(kU16, uint16_t, uint16_t)
PJRT_HOST_TYPE(kU32, uint32_t, uint32_t)
PJRT_HOST_TYPE(kU64, uint64_t, uint64_t)
PJRT_HOST_TYPE(kF16, Eigen::half, float)
PJRT_HOST_TYPE(kBf16, Eigen::bfloat16, float)
PJRT_HOST_TYPE(kF32, float, float)
PJRT_HOST_TYPE(kF64, double, double)
#undef PJRT_HOST_TYPE

// Calls body with `PT` bound to the PrimitiveType constant (as a
// std::integral_constant) for `type`; returns `fallback` for others.
template <typename F>
auto DispatchType(PrimitiveType type, F&& f) {
  switch (type) {
#define PJRT_CASE(PT) \
  case PrimitiveType::PT: \
    return f(std::integral_constant<PrimitiveType, PrimitiveType::PT>());
    PJRT_CASE(kPred)
    PJRT_CASE(kS8)
    PJRT_CASE(kS16)
    PJRT_CASE(kS32)
    PJRT_CASE(kS64)
    PJRT_CASE(kU8)
    PJRT_CASE(kU16)
    PJRT_CASE(kU32)
    PJRT_CASE(kU64)
    PJRT_CASE(kF16)
    PJRT_CASE(kBf16)
    PJRT_CASE(kF32)
    PJRT_CASE(kF64)
#undef PJRT_CASE
    default:
      break;
  }
  return f(std::integral_constant<PrimitiveType, PrimitiveType::kF32>());
}

// Bytes of the compute representation (f16/bf16: 4).
inline int ComputeWidth(PrimitiveType type) {
  if (type == PrimitiveType::kF16 || type == PrimitiveType::kBf16) return 4;
  return hlo::ByteWidth(type);
}

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_TYPES_H_
