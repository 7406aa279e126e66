// How the host's reductions and collectives combine two values: the ops of
// their fast paths (add, multiply, maximum, minimum, and, or) with XLA's
// semantics (integers wrap, maximum and minimum propagate NaN; complex
// numbers add and multiply), and loads that widen f16, bf16 and f8 to
// float.
#ifndef PJRT_COMPILER_HOST_COMBINE_H_
#define PJRT_COMPILER_HOST_COMBINE_H_

#include <cmath>
#include <cstdint>
#include <limits>
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

// XLA's maximum and minimum: NaN if either is NaN; for floats -0 is below
// +0 (IEEE 754's maximum and minimum), in either order.
template <typename C>
C MaxOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a > b ? a : b;
}
template <typename C>
C MinOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return std::signbit(a) ? a : b;
  }
  return a < b ? a : b;
}

// The identity of a fast-path op: x op identity == x for every x.
template <typename C>
C CombineIdentity(ExprOp op) {
  if constexpr (kIsComplex<C>) {
    return op == ExprOp::kMultiply ? C(1) : C(0);
  } else {
    switch (op) {
      case ExprOp::kMultiply:
        return C(1);
      case ExprOp::kMaximum:
        if constexpr (std::is_floating_point_v<C>) {
          return -std::numeric_limits<C>::infinity();
        }
        return std::numeric_limits<C>::lowest();
      case ExprOp::kMinimum:
        if constexpr (std::is_floating_point_v<C>) {
          return std::numeric_limits<C>::infinity();
        }
        return std::numeric_limits<C>::max();
      case ExprOp::kAnd:
        if constexpr (std::is_integral_v<C>) return static_cast<C>(~C(0));
        return C(0);
      default:  // add, or
        return C(0);
    }
  }
}

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
      return MaxOf(a, b);
    case ExprOp::kMinimum:
      return MinOf(a, b);
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
