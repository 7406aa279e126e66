// How the host's reductions and collectives combine two values: the ops of
// their fast paths (add, multiply, maximum, minimum, and, or) with XLA's
// semantics (integers wrap, maximum and minimum propagate NaN; complex
// numbers add and multiply), and loads that widen f16, bf16 and f8 to
// float.
#ifndef PJRT_COMPILER_HOST_COMBINE_H_
#define PJRT_COMPILER_HOST_COMBINE_H_

#include <cstdint>
#include <type_traits>

#include "compiler/host/expression.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host {

template <typename C, bool = std::is_integral_v<C>>
struct UnsignedOf {
  using T = C;
};
template <typename C>
struct UnsignedOf<C, true> {
  using T = std::make_unsigned_t<C>;
};

template <typename C>
C CombineReal(ExprOp op, C a, C b) {
  using U = typename UnsignedOf<C>::T;
  switch (op) {
    case ExprOp::kAdd:
      if constexpr (std::is_integral_v<C>) return static_cast<C>(U(a) + U(b));
      return a + b;
    case ExprOp::kMultiply:
      if constexpr (std::is_integral_v<C>) return WrappingMultiply(a, b);
      return a * b;
    case ExprOp::kMaximum:
      if constexpr (std::is_floating_point_v<C>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a > b ? a : b;
    case ExprOp::kMinimum:
      if constexpr (std::is_floating_point_v<C>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a < b ? a : b;
    case ExprOp::kAnd:
      if constexpr (std::is_integral_v<C>) return a & b;
      return a;
    case ExprOp::kOr:
      if constexpr (std::is_integral_v<C>) return a | b;
      return a;
    default:
      return a;
  }
}

template <typename C>
C Combine(ExprOp op, C a, C b) {
  if constexpr (kIsComplex<C>) {
    // Complex numbers have no order, and no bitwise ops: the verifier
    // leaves add and multiply.
    return op == ExprOp::kMultiply ? a * b : a + b;
  } else {
    return CombineReal(op, a, b);
  }
}

template <typename S>
auto Load(const S* p, int64_t i) {
  if constexpr (!std::is_arithmetic_v<S> && !kIsComplex<S>) {  // f16, bf16, f8
    return static_cast<float>(p[i]);
  } else {
    return p[i];
  }
}

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_COMBINE_H_
