#include "compiler/host/expression.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "compiler/host/types.h"
#include "hlo/float8.h"
#include "unsupported/Eigen/SpecialFunctions"

namespace pjrt::compiler::host {
namespace {

using hlo::ComparisonDirection;

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Calls f with a value of the compute type of `type` (f16, bf16 and f8:
// float; c64 and c128: std::complex).
template <typename F>
void DispatchCompute(PrimitiveType type, F&& f) {
  DispatchAnyType(type, [&](auto pt) {
    using T = typename TypeTraits<decltype(pt)::value>::Compute;
    f(T{});
  });
}


// f16 and bf16 bits from float: round to nearest even, and NaNs keep their
// payload (Eigen's conversions quieten them to one canonical NaN, which
// would break bit-exact bitcast-converts).
inline uint16_t HalfBits(float f) {
  if (f != f) {
    const uint32_t b = std::bit_cast<uint32_t>(f);
    uint16_t mantissa = static_cast<uint16_t>((b >> 13) & 0x3FF);
    if (mantissa == 0) mantissa = 0x200;
    return static_cast<uint16_t>(((b >> 16) & 0x8000) | 0x7C00 | mantissa);
  }
  return std::bit_cast<uint16_t>(Eigen::half(f));
}
inline uint16_t Bfloat16Bits(float f) {
  if (f != f) {
    const uint32_t b = std::bit_cast<uint32_t>(f);
    uint16_t bits = static_cast<uint16_t>(b >> 16);
    if ((bits & 0x7F) == 0) bits |= 0x40;
    return bits;
  }
  return std::bit_cast<uint16_t>(Eigen::bfloat16(f));
}
// Exact (NaN payloads included).
inline float HalfValue(uint16_t bits) {
  // NaNs by hand: F16C's conversion (clang uses it) quiets signaling ones.
  if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0) {
    return std::bit_cast<float>((static_cast<uint32_t>(bits & 0x8000) << 16) |
                                0x7F800000u |
                                (static_cast<uint32_t>(bits & 0x3FF) << 13));
  }
  return static_cast<float>(std::bit_cast<Eigen::half>(bits));
}
inline float Bfloat16Value(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Rounds float values to the precision of f16/bf16 (the value XLA would
// store after the op). NaNs are left as they are.
void RoundToType(PrimitiveType type, float* v, int64_t n) {
  if (type == PrimitiveType::kF16) {
    for (int64_t i = 0; i < n; ++i) {
      if (v[i] == v[i]) v[i] = static_cast<float>(Eigen::half(v[i]));
    }
  } else if (type == PrimitiveType::kBf16) {
    for (int64_t i = 0; i < n; ++i) {
      if (v[i] == v[i]) v[i] = static_cast<float>(Eigen::bfloat16(v[i]));
    }
  } else if (type == PrimitiveType::kF8E4M3FN) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(Float8E4M3FN(v[i]));
  } else if (type == PrimitiveType::kF8E5M2) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(Float8E5M2(v[i]));
  }
}

// Wraps s4 and u4 values (held one per byte) to their 4 bits, as the
// hardware would after every op.
void WrapInt4(PrimitiveType type, void* values, int64_t n) {
  if (type == PrimitiveType::kS4) {
    int8_t* v = static_cast<int8_t*>(values);
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<int8_t>(static_cast<int8_t>(v[i] << 4) >> 4);
    }
  } else if (type == PrimitiveType::kU4) {
    uint8_t* v = static_cast<uint8_t*>(values);
    for (int64_t i = 0; i < n; ++i) v[i] &= 0xF;
  }
}

// Rounds or wraps a node's values to its type after an op.
void FinishValues(PrimitiveType type, void* values, int64_t n) {
  if (IsNarrowFloat(type)) {
    RoundToType(type, static_cast<float*>(values), n);
  } else if (IsInt4(type)) {
    WrapInt4(type, values, n);
  }
}

// NaN-propagating maximum and minimum, written without branches so that
// loops over them vectorise (a + b is NaN when either is).
template <typename T>
inline T FloatMax(T a, T b) {
  const bool nan = (a != a) | (b != b);
  const T m = a > b ? a : b;
  return nan ? a + b : m;
}
template <typename T>
inline T FloatMin(T a, T b) {
  const bool nan = (a != a) | (b != b);
  const T m = a < b ? a : b;
  return nan ? a + b : m;
}

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// Total order key: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN.
inline int32_t TotalOrderKey(float f) {
  int32_t b = std::bit_cast<int32_t>(f);
  return b ^ ((b >> 31) & 0x7FFFFFFF);
}
inline int64_t TotalOrderKey(double f) {
  int64_t b = std::bit_cast<int64_t>(f);
  return b ^ ((b >> 63) & 0x7FFFFFFFFFFFFFFF);
}

template <typename T>
bool Compare(ComparisonDirection d, T a, T b) {
  switch (d) {
    case ComparisonDirection::kEq: return a == b;
    case ComparisonDirection::kNe: return a != b;
    case ComparisonDirection::kLt: return a < b;
    case ComparisonDirection::kLe: return a <= b;
    case ComparisonDirection::kGt: return a > b;
    case ComparisonDirection::kGe: return a >= b;
  }
  return false;
}

template <typename T>
T IntPow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) return base == 1 ? 1 : 0;
  }
  using U = Unsigned<T>;
  U result = 1, b = static_cast<U>(base);
  U e = static_cast<U>(exponent);
  while (e != 0) {
    if (e & 1) result = WrappingMultiply(result, b);
    b = WrappingMultiply(b, b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

// Emulates a float format with fewer exponent and mantissa bits, as XLA's
// reduce-precision does.
template <typename F, typename Bits, int kMantissa, int kExponent>
F ReducePrecision(F value, int exponent_bits, int mantissa_bits) {
  Bits bits = std::bit_cast<Bits>(value);
  if (mantissa_bits < kMantissa) {
    const Bits last_bit = Bits{1} << (kMantissa - mantissa_bits);
    const Bits base_bias = (last_bit >> 1) - 1;
    const Bits x_last = (bits & last_bit) >> (kMantissa - mantissa_bits);
    bits = (bits + x_last + base_bias) & ~(last_bit - 1);
  }
  if (exponent_bits < kExponent) {
    const Bits sign_mask = Bits{1} << (kMantissa + kExponent);
    const Bits exp_mask = ((Bits{1} << kExponent) - 1) << kMantissa;
    const Bits bias = (Bits{1} << (kExponent - 1)) - 1;
    const Bits reduced_bias = (Bits{1} << (exponent_bits - 1)) - 1;
    const Bits max_exp = (bias + reduced_bias) << kMantissa;
    const Bits min_exp = (bias - reduced_bias) << kMantissa;
    const Bits x_exp = bits & exp_mask;
    if (x_exp > max_exp) {
      bits = (bits & sign_mask) | exp_mask;
    } else if (x_exp <= min_exp) {
      bits = bits & sign_mask;
    }
  }
  F result = std::bit_cast<F>(bits);
  // A NaN stays a NaN while a mantissa bit is left to say so; without one
  // it is an infinity of its sign (rounding its mantissa must not carry
  // into the sign bit).
  if (value != value) {
    return mantissa_bits > 0
               ? value
               : std::copysign(std::numeric_limits<F>::infinity(), value);
  }
  return result;
}

// Converts one value from compute type S to compute type D with XLA's
// semantics (saturating float-to-integer, NaN to 0, x != 0 to pred).
template <typename D, typename S>
D ConvertValue(S s, bool to_pred) {
  // Complex to pred looks at the real part only, like every conversion out
  // of complex (StableHLO's convert; XLA's literal conversion).
  if constexpr (kIsComplex<S>) {
    if (to_pred) return static_cast<D>(s.real() != 0);
  }
  if (to_pred) return static_cast<D>(s != S(0));
  if constexpr (kIsComplex<S> && kIsComplex<D>) {
    using R = typename D::value_type;
    return D(static_cast<R>(s.real()), static_cast<R>(s.imag()));
  } else if constexpr (kIsComplex<S>) {
    // The imaginary part is dropped.
    return ConvertValue<D>(s.real(), false);
  } else if constexpr (kIsComplex<D>) {
    using R = typename D::value_type;
    return D(ConvertValue<R>(s, false), R(0));
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (s != s) return 0;
    if (static_cast<double>(s) <= static_cast<double>(std::numeric_limits<D>::min())) {
      return std::numeric_limits<D>::min();
    }
    if (static_cast<double>(s) >= static_cast<double>(std::numeric_limits<D>::max())) {
      return std::numeric_limits<D>::max();
    }
    return static_cast<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

// Storage bits of a value of `type` held in compute representation.
// (Complex types never reach these: bitcast-convert refuses them.)
template <typename T>
uint64_t StorageBits(PrimitiveType type, T v) {
  uint64_t bits = 0;
  if constexpr (!kIsComplex<T>) {
    if (type == PrimitiveType::kF16) return HalfBits(static_cast<float>(v));
    if (type == PrimitiveType::kBf16) return Bfloat16Bits(static_cast<float>(v));
    if (type == PrimitiveType::kF8E4M3FN) {
      return Float8E4M3FN(static_cast<float>(v)).bits();
    }
    if (type == PrimitiveType::kF8E5M2) {
      return Float8E5M2(static_cast<float>(v)).bits();
    }
    std::memcpy(&bits, &v, sizeof(T));
    if (type == PrimitiveType::kS4 || type == PrimitiveType::kU4) bits &= 0xF;
  }
  return bits;
}

template <typename T>
T FromStorageBits(PrimitiveType type, uint64_t bits) {
  if constexpr (kIsComplex<T>) {
    return T();
  } else {
    if (type == PrimitiveType::kF16) {
      return static_cast<T>(HalfValue(static_cast<uint16_t>(bits)));
    }
    if (type == PrimitiveType::kBf16) {
      return static_cast<T>(Bfloat16Value(static_cast<uint16_t>(bits)));
    }
    if (type == PrimitiveType::kF8E4M3FN) {
      return static_cast<T>(Float8E4M3FN::ToFloat(static_cast<uint8_t>(bits)));
    }
    if (type == PrimitiveType::kF8E5M2) {
      return static_cast<T>(Float8E5M2::ToFloat(static_cast<uint8_t>(bits)));
    }
    if (type == PrimitiveType::kS4) {
      return static_cast<T>(static_cast<int8_t>(static_cast<uint8_t>(bits << 4)) >> 4);
    }
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
  }
}

// Complex ops (c64 and c128), as std::complex computes them.
template <typename T>
void ComplexUnary(const ExprNode& node, const T* a, T* out, int64_t n) {
  using R = typename T::value_type;
  switch (node.op) {
    case ExprOp::kNegate: for (int64_t i = 0; i < n; ++i) out[i] = -a[i]; return;
    case ExprOp::kSign:
      // x / |x|, and 0 for 0 (NaN parts propagate).
      for (int64_t i = 0; i < n; ++i) {
        const R m = std::abs(a[i]);
        out[i] = m == R(0) ? T(0) : a[i] / m;
      }
      return;
    case ExprOp::kExp: for (int64_t i = 0; i < n; ++i) out[i] = std::exp(a[i]); return;
    case ExprOp::kExpm1:
      for (int64_t i = 0; i < n; ++i) {
        // exp(x + iy) - 1 = (expm1(x) cos y - 2 sin^2(y/2)) + i exp(x) sin y,
        // accurate for small |z|.
        const R x = a[i].real(), y = a[i].imag();
        const R h = std::sin(y / 2);
        out[i] = T(std::expm1(x) * std::cos(y) - 2 * h * h, std::exp(x) * std::sin(y));
      }
      return;
    case ExprOp::kLog: for (int64_t i = 0; i < n; ++i) out[i] = std::log(a[i]); return;
    case ExprOp::kLog1p:
      for (int64_t i = 0; i < n; ++i) {
        // log|1 + z| = log1p(x) + log1p(y^2 / (1 + x)^2) / 2 keeps its
        // accuracy for small |z|.
        const R x = a[i].real(), y = a[i].imag();
        const R xp1 = x + 1;
        const R real = std::abs(x) < R(0.5) && std::abs(y) < R(0.5)
                           ? std::log1p(x) + std::log1p((y / xp1) * (y / xp1)) / 2
                           : std::log(std::abs(T(xp1, y)));
        out[i] = T(real, std::atan2(y, xp1));
      }
      return;
    case ExprOp::kSqrt: for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(a[i]); return;
    case ExprOp::kRsqrt:
      for (int64_t i = 0; i < n; ++i) out[i] = T(1) / std::sqrt(a[i]);
      return;
    case ExprOp::kTanh: for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(a[i]); return;
    case ExprOp::kLogistic:
      for (int64_t i = 0; i < n; ++i) out[i] = T(1) / (T(1) + std::exp(-a[i]));
      return;
    case ExprOp::kSin: for (int64_t i = 0; i < n; ++i) out[i] = std::sin(a[i]); return;
    case ExprOp::kCos: for (int64_t i = 0; i < n; ++i) out[i] = std::cos(a[i]); return;
    case ExprOp::kTan: for (int64_t i = 0; i < n; ++i) out[i] = std::tan(a[i]); return;
    default: return;
  }
}

template <typename T>
void ComplexBinary(const ExprNode& node, const T* a, const T* b, T* out, int64_t n) {
  switch (node.op) {
    case ExprOp::kAdd: for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i]; return;
    case ExprOp::kSubtract: for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i]; return;
    case ExprOp::kMultiply: for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i]; return;
    case ExprOp::kDivide: for (int64_t i = 0; i < n; ++i) out[i] = a[i] / b[i]; return;
    case ExprOp::kPower:
      for (int64_t i = 0; i < n; ++i) {
        // 0^0 is 1 and 0^b is 0 for Re(b) > 0 (std::pow gives NaN for both).
        if (a[i] == T(0) && b[i] == T(0)) {
          out[i] = T(1);
        } else if (a[i] == T(0) && b[i].real() > 0) {
          out[i] = T(0);
        } else {
          out[i] = std::pow(a[i], b[i]);
        }
      }
      return;
    default: return;
  }
}

template <typename T>
void Unary(const ExprNode& node, const T* a, T* out, int64_t n) {
  if constexpr (kIsComplex<T>) {
    ComplexUnary(node, a, out, n);
  } else if constexpr (std::is_floating_point_v<T>) {
    ConstArrayMap<T> x(a, n);
    ArrayMap<T> y(out, n);
    switch (node.op) {
      case ExprOp::kAbs: y = x.abs(); return;
      case ExprOp::kNegate: y = -x; return;
      case ExprOp::kSign:
        for (int64_t i = 0; i < n; ++i) {
          T v = a[i];
          out[i] = v != v ? v : std::copysign(v != 0 ? T(1) : T(0), v);
        }
        return;
      case ExprOp::kExp: y = x.exp(); return;
      case ExprOp::kExpm1: y = x.expm1(); return;
      case ExprOp::kLog: y = x.log(); return;
      case ExprOp::kLog1p: y = x.log1p(); return;
      // Correctly rounded (Eigen's fast-math sqrt is not); vectorises to
      // the hardware square root.
      case ExprOp::kSqrt:
        for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(a[i]);
        return;
      case ExprOp::kRsqrt:
        for (int64_t i = 0; i < n; ++i) out[i] = T(1) / std::sqrt(a[i]);
        return;
      case ExprOp::kCbrt:
        for (int64_t i = 0; i < n; ++i) out[i] = std::cbrt(a[i]);
        return;
      case ExprOp::kTanh: y = x.tanh(); return;
      // 1 / (1 + exp(-x)) keeps its relative accuracy for negative x,
      // where Eigen's float approximation does not.
      case ExprOp::kLogistic: y = T(1) / (T(1) + (-x).exp()); return;
      case ExprOp::kSin: y = x.sin(); return;
      case ExprOp::kCos: y = x.cos(); return;
      case ExprOp::kTan:
        for (int64_t i = 0; i < n; ++i) out[i] = std::tan(a[i]);
        return;
      case ExprOp::kErf: y = x.erf(); return;
      case ExprOp::kFloor: y = x.floor(); return;
      case ExprOp::kCeil: y = x.ceil(); return;
      case ExprOp::kRoundAfz: y = x.round(); return;
      case ExprOp::kRoundEven: y = x.rint(); return;
      case ExprOp::kReducePrecision:
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, float>) {
            out[i] = ReducePrecision<float, uint32_t, 23, 8>(
                a[i], node.exponent_bits, node.mantissa_bits);
          } else {
            out[i] = ReducePrecision<double, uint64_t, 52, 11>(
                a[i], node.exponent_bits, node.mantissa_bits);
          }
        }
        return;
      default:
        break;
    }
  } else {
    using U = Unsigned<T>;
    constexpr int kBits = sizeof(T) * 8;
    const bool pred = node.type == PrimitiveType::kPred;
    const int bits = IsInt4(node.type) ? 4 : kBits;
    const U mask = static_cast<U>(static_cast<U>(~U(0)) >> (kBits - bits));
    switch (node.op) {
      case ExprOp::kAbs:
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_signed_v<T>) {
            out[i] = a[i] < 0 ? static_cast<T>(U(0) - U(a[i])) : a[i];
          } else {
            out[i] = a[i];
          }
        }
        return;
      case ExprOp::kNegate:
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(U(0) - U(a[i]));
        return;
      case ExprOp::kSign:
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_signed_v<T>) {
            out[i] = static_cast<T>((a[i] > 0) - (a[i] < 0));
          } else {
            out[i] = a[i] != 0;
          }
        }
        return;
      case ExprOp::kNot:
        for (int64_t i = 0; i < n; ++i) {
          out[i] = pred ? static_cast<T>(a[i] == 0) : static_cast<T>(~U(a[i]));
        }
        return;
      // s4 and u4 count within their 4 bits.
      case ExprOp::kPopcnt:
        for (int64_t i = 0; i < n; ++i) {
          out[i] = static_cast<T>(std::popcount(static_cast<U>(U(a[i]) & mask)));
        }
        return;
      case ExprOp::kClz:
        for (int64_t i = 0; i < n; ++i) {
          out[i] = static_cast<T>(
              std::countl_zero(static_cast<U>(U(a[i]) & mask)) - (kBits - bits));
        }
        return;
      default:
        break;
    }
  }
}

template <typename T>
void Binary(const ExprNode& node, const T* a, const T* b, T* out, int64_t n) {
  if constexpr (kIsComplex<T>) {
    ComplexBinary(node, a, b, out, n);
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (node.op) {
      case ExprOp::kAdd: for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i]; return;
      case ExprOp::kSubtract: for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i]; return;
      case ExprOp::kMultiply: for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i]; return;
      case ExprOp::kDivide: for (int64_t i = 0; i < n; ++i) out[i] = a[i] / b[i]; return;
      case ExprOp::kRemainder: for (int64_t i = 0; i < n; ++i) out[i] = std::fmod(a[i], b[i]); return;
      case ExprOp::kPower: for (int64_t i = 0; i < n; ++i) out[i] = std::pow(a[i], b[i]); return;
      case ExprOp::kMaximum: for (int64_t i = 0; i < n; ++i) out[i] = FloatMax(a[i], b[i]); return;
      case ExprOp::kMinimum: for (int64_t i = 0; i < n; ++i) out[i] = FloatMin(a[i], b[i]); return;
      case ExprOp::kAtan2: for (int64_t i = 0; i < n; ++i) out[i] = std::atan2(a[i], b[i]); return;
      default: break;
    }
  } else {
    using U = Unsigned<T>;
    using S = std::make_signed_t<T>;
    constexpr U kBits = sizeof(T) * 8;
    switch (node.op) {
      case ExprOp::kAdd: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(U(a[i]) + U(b[i])); return;
      case ExprOp::kSubtract: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(U(a[i]) - U(b[i])); return;
      case ExprOp::kMultiply: for (int64_t i = 0; i < n; ++i) out[i] = WrappingMultiply(a[i], b[i]); return;
      case ExprOp::kDivide:
        for (int64_t i = 0; i < n; ++i) {
          if (b[i] == 0) {
            out[i] = static_cast<T>(-1);
          } else if (std::is_signed_v<T> && a[i] == std::numeric_limits<T>::min() &&
                     b[i] == static_cast<T>(-1)) {
            out[i] = a[i];
          } else {
            out[i] = a[i] / b[i];
          }
        }
        return;
      case ExprOp::kRemainder:
        for (int64_t i = 0; i < n; ++i) {
          if (b[i] == 0) {
            out[i] = a[i];
          } else if (std::is_signed_v<T> && a[i] == std::numeric_limits<T>::min() &&
                     b[i] == static_cast<T>(-1)) {
            out[i] = 0;
          } else {
            out[i] = a[i] % b[i];
          }
        }
        return;
      case ExprOp::kPower: for (int64_t i = 0; i < n; ++i) out[i] = IntPow(a[i], b[i]); return;
      case ExprOp::kMaximum: for (int64_t i = 0; i < n; ++i) out[i] = a[i] > b[i] ? a[i] : b[i]; return;
      case ExprOp::kMinimum: for (int64_t i = 0; i < n; ++i) out[i] = a[i] < b[i] ? a[i] : b[i]; return;
      case ExprOp::kAnd: for (int64_t i = 0; i < n; ++i) out[i] = a[i] & b[i]; return;
      case ExprOp::kOr: for (int64_t i = 0; i < n; ++i) out[i] = a[i] | b[i]; return;
      case ExprOp::kXor: for (int64_t i = 0; i < n; ++i) out[i] = a[i] ^ b[i]; return;
      case ExprOp::kShiftLeft:
        for (int64_t i = 0; i < n; ++i) {
          U s = U(b[i]);
          out[i] = s >= kBits ? T(0) : static_cast<T>(U(a[i]) << s);
        }
        return;
      case ExprOp::kShiftRightLogical: {
        // s4 shifts its 4 bits, not the sign-extended byte.
        const U mask = node.type == PrimitiveType::kS4 ? U(0xF) : static_cast<U>(~U(0));
        for (int64_t i = 0; i < n; ++i) {
          U s = U(b[i]);
          out[i] = s >= kBits ? T(0) : static_cast<T>((U(a[i]) & mask) >> s);
        }
        return;
      }
      case ExprOp::kShiftRightArithmetic:
        for (int64_t i = 0; i < n; ++i) {
          U s = U(b[i]);
          S v = static_cast<S>(a[i]);
          // u4 is held zero-extended: its sign bit for this shift is bit 3.
          if (node.type == PrimitiveType::kU4 && (v & 0x8)) v = static_cast<S>(v | ~S(0xF));
          out[i] = static_cast<T>(s >= kBits ? (v < 0 ? S(-1) : S(0)) : S(v >> s));
        }
        return;
      default:
        break;
    }
  }
}

// Floating-point binary ops with one operand a splat: the scalar stays in a
// register instead of being re-read from a block.
template <typename T, bool kScalarA, bool kScalarB>
bool FloatBinaryWithScalar(ExprOp op, const T* a, const T* b, T* out, int64_t n) {
  const auto A = [&](int64_t i) { return kScalarA ? a[0] : a[i]; };
  const auto B = [&](int64_t i) { return kScalarB ? b[0] : b[i]; };
  switch (op) {
    case ExprOp::kAdd: for (int64_t i = 0; i < n; ++i) out[i] = A(i) + B(i); return true;
    case ExprOp::kSubtract: for (int64_t i = 0; i < n; ++i) out[i] = A(i) - B(i); return true;
    case ExprOp::kMultiply: for (int64_t i = 0; i < n; ++i) out[i] = A(i) * B(i); return true;
    case ExprOp::kDivide: for (int64_t i = 0; i < n; ++i) out[i] = A(i) / B(i); return true;
    case ExprOp::kMaximum: for (int64_t i = 0; i < n; ++i) out[i] = FloatMax(A(i), B(i)); return true;
    case ExprOp::kMinimum: for (int64_t i = 0; i < n; ++i) out[i] = FloatMin(A(i), B(i)); return true;
    default: return false;
  }
}

template <typename T>
void CompareLoop(const ExprNode& node, const T* a, const T* b, uint8_t* out,
                 int64_t n) {
  if constexpr (kIsComplex<T>) {
    // The verifier allows EQ and NE only.
    const bool eq = node.direction == ComparisonDirection::kEq;
    for (int64_t i = 0; i < n; ++i) out[i] = (a[i] == b[i]) == eq;
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (node.total_order) {
        for (int64_t i = 0; i < n; ++i) {
          out[i] = Compare(node.direction, TotalOrderKey(a[i]), TotalOrderKey(b[i]));
        }
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) out[i] = Compare(node.direction, a[i], b[i]);
  }
}

template <typename T>
void Clamp(const T* lo, const T* x, const T* hi, T* out, int64_t n) {
  if constexpr (!kIsComplex<T>) {  // complex clamp is refused by the verifier
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        out[i] = FloatMin(hi[i], FloatMax(lo[i], x[i]));
      } else {
        T v = x[i] < lo[i] ? lo[i] : x[i];
        out[i] = hi[i] < v ? hi[i] : v;
      }
    }
  }
}

void Convert(PrimitiveType from, PrimitiveType to, const void* a, void* out,
             int64_t n) {
  const bool to_pred = to == PrimitiveType::kPred;
  DispatchCompute(from, [&](auto s) {
    using S = decltype(s);
    DispatchCompute(to, [&](auto d) {
      using D = decltype(d);
      const S* src = static_cast<const S*>(a);
      D* dst = static_cast<D*>(out);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertValue<D>(src[i], to_pred);
    });
  });
  if (IsInt4(to) && (hlo::IsFloatingPoint(from) || hlo::IsComplex(from))) {
    // Saturates to the 4-bit range (the 8-bit convert already saturated to
    // its own); integer sources wrap instead.
    if (to == PrimitiveType::kS4) {
      int8_t* v = static_cast<int8_t*>(out);
      for (int64_t i = 0; i < n; ++i) v[i] = std::clamp<int8_t>(v[i], -8, 7);
    } else {
      uint8_t* v = static_cast<uint8_t*>(out);
      for (int64_t i = 0; i < n; ++i) v[i] = std::min<uint8_t>(v[i], 15);
    }
    return;
  }
  FinishValues(to, out, n);
}

void BitcastConvert(PrimitiveType from, PrimitiveType to, const void* a,
                    void* out, int64_t n) {
  DispatchCompute(from, [&](auto s) {
    using S = decltype(s);
    DispatchCompute(to, [&](auto d) {
      using D = decltype(d);
      const S* src = static_cast<const S*>(a);
      D* dst = static_cast<D*>(out);
      for (int64_t i = 0; i < n; ++i) {
        dst[i] = FromStorageBits<D>(to, StorageBits(from, src[i]));
      }
    });
  });
}

}  // namespace

uint64_t ExpressionId::Next() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int Expression::Add(const ExprNode& node) {
  id_.Renew();
  nodes_.push_back(node);
  if (node.op == ExprOp::kInput) num_inputs_ = std::max(num_inputs_, node.input + 1);
  return static_cast<int>(nodes_.size()) - 1;
}

int Expression::AddInput(int input, PrimitiveType type) {
  ExprNode node;
  node.op = ExprOp::kInput;
  node.input = input;
  node.type = type;
  return Add(node);
}

int Expression::AddSplatFromDouble(PrimitiveType type, double value) {
  ExprNode node;
  node.op = ExprOp::kSplat;
  node.type = type;
  DispatchCompute(type, [&](auto t) {
    using T = decltype(t);
    T v = ConvertValue<T>(value, type == PrimitiveType::kPred);
    std::memcpy(node.splat_bits, &v, sizeof(T));
  });
  return Add(node);
}

int Expression::AddSplatFromStorage(PrimitiveType type, const void* storage) {
  ExprNode node;
  node.op = ExprOp::kSplat;
  node.type = type;
  StorageToCompute(type, storage, node.splat_bits, 1);
  return Add(node);
}

double Expression::CyclesPerElement() const {
  double cycles = 1;
  for (const ExprNode& n : nodes_) {
    switch (n.op) {
      case ExprOp::kInput:
      case ExprOp::kSplat:
        cycles += 0.5;
        break;
      case ExprOp::kExp: case ExprOp::kExpm1: case ExprOp::kLog:
      case ExprOp::kLog1p: case ExprOp::kTanh: case ExprOp::kLogistic:
      case ExprOp::kSin: case ExprOp::kCos: case ExprOp::kTan: case ExprOp::kErf:
      case ExprOp::kCbrt: case ExprOp::kPower: case ExprOp::kAtan2:
      case ExprOp::kRemainder:
        cycles += 20;
        break;
      default:
        cycles += 1;
    }
  }
  return cycles;
}

void Expression::Finalize() {
  id_.Renew();  // the slots change
  const int n = size();
  std::vector<int> last_use(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      if (nodes_[i].operands[k] >= 0) last_use[nodes_[i].operands[k]] = i;
    }
  }
  for (int o : outputs_) last_use[o] = n;  // outputs live to the end
  slots_.assign(n, -1);
  std::vector<int> free_slots;
  int next = 0;
  for (int i = 0; i < n; ++i) {
    if (nodes_[i].op == ExprOp::kInput) continue;
    if (nodes_[i].op == ExprOp::kSplat) {
      slots_[i] = next++;  // never shared
    } else if (!free_slots.empty()) {
      slots_[i] = free_slots.back();
      free_slots.pop_back();
    } else {
      slots_[i] = next++;
    }
    // Operands whose last use is this node free their slots for later
    // nodes (not this one: conversions change widths in place).
    for (int k = 0; k < 3; ++k) {
      const int o = nodes_[i].operands[k];
      if (o < 0 || last_use[o] != i || slots_[o] < 0 ||
          nodes_[o].op == ExprOp::kSplat) {
        continue;
      }
      if (std::find(free_slots.begin(), free_slots.end(), slots_[o]) ==
          free_slots.end()) {
        free_slots.push_back(slots_[o]);
      }
    }
  }
}

void* BlockScratch::Slot(int i) {
  if (static_cast<int>(slots_.size()) <= i) slots_.resize(i + 1);
  if (slots_[i].empty()) slots_[i].resize(kBlockWords);
  return slots_[i].data();
}

void StorageToCompute(PrimitiveType type, const void* src, void* dst, int64_t n) {
  if (type == PrimitiveType::kF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = HalfValue(s[i]);
  } else if (type == PrimitiveType::kBf16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = Bfloat16Value(s[i]);
  } else if (type == PrimitiveType::kF8E4M3FN || type == PrimitiveType::kF8E5M2) {
    // Through a table of the 256 values.
    static const auto tables = [] {
      std::array<std::array<float, 256>, 2> t;
      for (int c = 0; c < 256; ++c) {
        t[0][c] = Float8E4M3FN::ToFloat(static_cast<uint8_t>(c));
        t[1][c] = Float8E5M2::ToFloat(static_cast<uint8_t>(c));
      }
      return t;
    }();
    const std::array<float, 256>& table =
        tables[type == PrimitiveType::kF8E4M3FN ? 0 : 1];
    const uint8_t* s = static_cast<const uint8_t*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = table[s[i]];
  } else {
    std::memcpy(dst, src, n * hlo::ByteWidth(type));
  }
}

void ComputeToStorage(PrimitiveType type, const void* src, void* dst, int64_t n) {
  if (type == PrimitiveType::kF16) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = HalfBits(s[i]);
  } else if (type == PrimitiveType::kBf16) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = Bfloat16Bits(s[i]);
  } else if (type == PrimitiveType::kF8E4M3FN) {
    const float* s = static_cast<const float*>(src);
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = Float8E4M3FN::FromFloat(s[i]);
  } else if (type == PrimitiveType::kF8E5M2) {
    const float* s = static_cast<const float*>(src);
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = Float8E5M2::FromFloat(s[i]);
  } else {
    std::memcpy(dst, src, n * hlo::ByteWidth(type));
  }
}

void EvaluateBlock(const Expression& expr, absl::Span<const void* const> inputs,
                   int64_t n, absl::Span<const void*> outputs,
                   BlockScratch& scratch) {
  // Splat slots still hold this expression's values from the last block.
  const bool splats_ready =
      scratch.splats_of_ == expr.id() && scratch.splats_filled_ >= n;
  const int size = expr.size();
  // Values are read through this table: inputs point at the caller's blocks.
  const void* values[256];
  std::vector<const void*> overflow;
  const void** value = values;
  if (size > 256) {
    overflow.resize(size);
    value = overflow.data();
  }
  for (int i = 0; i < size; ++i) {
    const ExprNode& node = expr.node(i);
    if (node.op == ExprOp::kInput) {
      value[i] = inputs[node.input];
      continue;
    }
    void* out = scratch.Slot(expr.slot(i));
    value[i] = out;
    const auto operand = [&](int k) { return value[node.operands[k]]; };
    const PrimitiveType operand_type =
        node.operands[0] >= 0 ? expr.node(node.operands[0]).type : node.type;
    switch (node.op) {
      case ExprOp::kSplat:
        if (splats_ready) break;
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          T v;
          std::memcpy(&v, node.splat_bits, sizeof(T));
          T* o = static_cast<T*>(out);
          for (int64_t k = 0; k < n; ++k) o[k] = v;
        });
        break;
      case ExprOp::kConvert:
        Convert(operand_type, node.type, operand(0), out, n);
        break;
      case ExprOp::kBitcastConvert:
        BitcastConvert(operand_type, node.type, operand(0), out, n);
        break;
      case ExprOp::kIsFinite:
        DispatchCompute(operand_type, [&](auto t) {
          using T = decltype(t);
          const T* a = static_cast<const T*>(operand(0));
          uint8_t* o = static_cast<uint8_t*>(out);
          for (int64_t k = 0; k < n; ++k) {
            if constexpr (std::is_floating_point_v<T>) {
              o[k] = std::isfinite(a[k]);
            } else {
              o[k] = 1;
            }
          }
        });
        break;
      case ExprOp::kReal:
      case ExprOp::kImag:
      case ExprOp::kAbs:
        if (!hlo::IsComplex(operand_type)) {
          if (node.op == ExprOp::kReal) {  // of a real value: itself
            std::memcpy(out, operand(0), n * ComputeWidth(node.type));
          } else if (node.op == ExprOp::kImag) {
            std::memset(out, 0, n * ComputeWidth(node.type));
          } else {
            DispatchCompute(node.type, [&](auto t) {
              using T = decltype(t);
              Unary(node, static_cast<const T*>(operand(0)), static_cast<T*>(out), n);
            });
            FinishValues(node.type, out, n);
          }
          break;
        }
        DispatchCompute(operand_type, [&](auto t) {
          using T = decltype(t);
          if constexpr (kIsComplex<T>) {
            using R = typename T::value_type;
            const T* a = static_cast<const T*>(operand(0));
            R* o = static_cast<R*>(out);
            for (int64_t k = 0; k < n; ++k) {
              o[k] = node.op == ExprOp::kReal   ? a[k].real()
                     : node.op == ExprOp::kImag ? a[k].imag()
                                                : std::abs(a[k]);
            }
          }
        });
        break;
      case ExprOp::kComplex:
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          if constexpr (kIsComplex<T>) {
            using R = typename T::value_type;
            const R* re = static_cast<const R*>(operand(0));
            const R* im = static_cast<const R*>(operand(1));
            T* o = static_cast<T*>(out);
            for (int64_t k = 0; k < n; ++k) o[k] = T(re[k], im[k]);
          }
        });
        break;
      case ExprOp::kCompare:
        DispatchCompute(operand_type, [&](auto t) {
          using T = decltype(t);
          CompareLoop(node, static_cast<const T*>(operand(0)),
                      static_cast<const T*>(operand(1)),
                      static_cast<uint8_t*>(out), n);
        });
        break;
      case ExprOp::kSelect:
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          const uint8_t* p = static_cast<const uint8_t*>(operand(0));
          const T* a = static_cast<const T*>(operand(1));
          const T* b = static_cast<const T*>(operand(2));
          T* o = static_cast<T*>(out);
          for (int64_t k = 0; k < n; ++k) o[k] = p[k] ? a[k] : b[k];
        });
        break;
      case ExprOp::kClamp:
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          Clamp(static_cast<const T*>(operand(0)), static_cast<const T*>(operand(1)),
                static_cast<const T*>(operand(2)), static_cast<T*>(out), n);
        });
        break;
      case ExprOp::kAdd: case ExprOp::kSubtract: case ExprOp::kMultiply:
      case ExprOp::kDivide: case ExprOp::kRemainder: case ExprOp::kPower:
      case ExprOp::kMaximum: case ExprOp::kMinimum: case ExprOp::kAtan2:
      case ExprOp::kAnd: case ExprOp::kOr: case ExprOp::kXor:
      case ExprOp::kShiftLeft: case ExprOp::kShiftRightLogical:
      case ExprOp::kShiftRightArithmetic:
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          const T* a = static_cast<const T*>(operand(0));
          const T* b = static_cast<const T*>(operand(1));
          if constexpr (std::is_floating_point_v<T>) {
            const bool sa = expr.node(node.operands[0]).op == ExprOp::kSplat;
            const bool sb = expr.node(node.operands[1]).op == ExprOp::kSplat;
            if (sb && !sa &&
                FloatBinaryWithScalar<T, false, true>(node.op, a, b, static_cast<T*>(out), n)) {
              return;
            }
            if (sa && !sb &&
                FloatBinaryWithScalar<T, true, false>(node.op, a, b, static_cast<T*>(out), n)) {
              return;
            }
          }
          Binary(node, a, b, static_cast<T*>(out), n);
        });
        FinishValues(node.type, out, n);
        break;
      default:
        DispatchCompute(node.type, [&](auto t) {
          using T = decltype(t);
          Unary(node, static_cast<const T*>(operand(0)), static_cast<T*>(out), n);
        });
        FinishValues(node.type, out, n);
        break;
    }
  }
  if (!splats_ready) {
    scratch.splats_of_ = expr.id();
    scratch.splats_filled_ = n;
  }
  for (size_t j = 0; j < expr.outputs().size(); ++j) {
    outputs[j] = value[expr.outputs()[j]];
  }
}

}  // namespace pjrt::compiler::host
