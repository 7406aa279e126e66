// The CUDA C++ every generated translation unit starts with: fixed-width
// types, f16/bf16 conversions, and the scalar operations whose XLA semantics
// differ from C++'s (integer division by zero, shifts past the width,
// saturating converts, NaN-propagating max/min, total-order compares).
// NVRTC compiles it without any header.
#ifndef PJRT_COMPILER_CUDA_PRELUDE_H_
#define PJRT_COMPILER_CUDA_PRELUDE_H_

namespace pjrt::compiler::cuda {

inline constexpr char kPrelude[] = R"cuda(
// Threads per warp; a host emulation of the kernels (one thread per block)
// defines it as 1.
#ifndef PJ_WARP
#define PJ_WARP 32
#endif
typedef signed char pj_s8;
typedef short pj_s16;
typedef int pj_s32;
typedef long long pj_s64;
typedef unsigned char pj_u8;
typedef unsigned short pj_u16;
typedef unsigned int pj_u32;
typedef unsigned long long pj_u64;

struct __align__(16) pj_u128 { pj_u64 lo, hi; };
// c64 and c128 as stored and computed (real part first).
template <typename R> struct __align__(2 * sizeof(R)) pj_complex { R re, im; };
typedef pj_complex<float> pj_c64;
typedef pj_complex<double> pj_c128;

template <typename T> struct pj_limits;
template <> struct pj_limits<pj_s8> { static __device__ pj_s8 lo() { return -128; } static __device__ pj_s8 hi() { return 127; } };
template <> struct pj_limits<pj_s16> { static __device__ pj_s16 lo() { return -32768; } static __device__ pj_s16 hi() { return 32767; } };
template <> struct pj_limits<pj_s32> { static __device__ pj_s32 lo() { return -2147483647 - 1; } static __device__ pj_s32 hi() { return 2147483647; } };
template <> struct pj_limits<pj_s64> { static __device__ pj_s64 lo() { return -9223372036854775807LL - 1; } static __device__ pj_s64 hi() { return 9223372036854775807LL; } };
template <> struct pj_limits<pj_u8> { static __device__ pj_u8 lo() { return 0; } static __device__ pj_u8 hi() { return 255; } };
template <> struct pj_limits<pj_u16> { static __device__ pj_u16 lo() { return 0; } static __device__ pj_u16 hi() { return 65535; } };
template <> struct pj_limits<pj_u32> { static __device__ pj_u32 lo() { return 0; } static __device__ pj_u32 hi() { return 4294967295u; } };
template <> struct pj_limits<pj_u64> { static __device__ pj_u64 lo() { return 0; } static __device__ pj_u64 hi() { return 18446744073709551615ull; } };

template <bool C, typename A, typename B> struct pj_if { typedef A type; };
template <typename A, typename B> struct pj_if<false, A, B> { typedef B type; };
template <typename T> struct pj_unsigned { typedef T type; };
template <> struct pj_unsigned<pj_s8> { typedef pj_u8 type; };
template <> struct pj_unsigned<pj_s16> { typedef pj_u16 type; };
template <> struct pj_unsigned<pj_s32> { typedef pj_u32 type; };
template <> struct pj_unsigned<pj_s64> { typedef pj_u64 type; };
template <typename T> struct pj_signed { typedef T type; };
template <> struct pj_signed<pj_u8> { typedef pj_s8 type; };
template <> struct pj_signed<pj_u16> { typedef pj_s16 type; };
template <> struct pj_signed<pj_u32> { typedef pj_s32 type; };
template <> struct pj_signed<pj_u64> { typedef pj_s64 type; };
template <typename T> struct pj_is_signed { static const bool value = T(-1) < T(0); };

template <typename D, typename S> __device__ __forceinline__ D pj_bitcast(S s) {
  union { S s; D d; } u;
  u.s = s;
  return u.d;
}

// f16 and bf16: stored as their bits, computed in float, rounded to nearest
// even after every op.
#ifdef PJ_HOST_EMULATION
__device__ __forceinline__ float pj_f16_to_f32(pj_u16 h) {
  _Float16 f;
  memcpy(&f, &h, 2);
  return (float)f;
}
__device__ __forceinline__ pj_u16 pj_f32_to_f16(float f) {
  const _Float16 h = (_Float16)f;
  pj_u16 bits;
  memcpy(&bits, &h, 2);
  return bits;
}
#else
__device__ __forceinline__ float pj_f16_to_f32(pj_u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ pj_u16 pj_f32_to_f16(float f) {
  pj_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif
__device__ __forceinline__ float pj_bf16_to_f32(pj_u16 b) {
  return __uint_as_float(((pj_u32)b) << 16);
}
__device__ __forceinline__ pj_u16 pj_f32_to_bf16(float f) {
  pj_u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (pj_u16)((u >> 16) | 0x40u);
  return (pj_u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float pj_round_f16(float f) { return pj_f16_to_f32(pj_f32_to_f16(f)); }
__device__ __forceinline__ float pj_round_bf16(float f) { return pj_bf16_to_f32(pj_f32_to_bf16(f)); }

// The floats narrower than 16 bits (hlo/minifloat.h): E exponent bits, M
// mantissa bits, an encoding K (0: IEEE-style infinities and NaNs, f8e5m2,
// f8e4m3, f8e3m4; 1: finite, one NaN per sign, f8e4m3fn; 2: finite with an
// unsigned zero and one NaN 0x80, the fnuz types; 3: finite only, no NaN,
// f4e2m1fn, f6e2m3fn, f6e3m2fn) and a bias B; the sign is bit E + M. From
// float: nearest, ties to even, subnormals kept; past the largest finite
// value, infinity (or NaN without one; K 3 saturates, and takes NaN to
// +0); fnuz has no -0. f8e8m0fnu, exponent only, has its own pair below.
template <int E, int M, int K, int B>
__device__ __forceinline__ float pj_f8_to_f32(pj_u8 bits) {
  if (K == 2 && bits == 0x80) return __int_as_float(0x7fc00000);
  const int exponent = (bits >> M) & ((1 << E) - 1);
  const int mantissa = bits & ((1 << M) - 1);
  float value;
  if (K == 0 && exponent == (1 << E) - 1) {
    value = mantissa == 0 ? __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);
  } else if (K == 1 && exponent == (1 << E) - 1 && mantissa == (1 << M) - 1) {
    value = __int_as_float(0x7fc00000);
  } else if (exponent == 0) {
    value = ldexpf((float)mantissa, 1 - B - M);
  } else {
    value = ldexpf(1.0f + (float)mantissa / (float)(1 << M), exponent - B);
  }
  return ((bits >> (E + M)) & 1) ? -value : value;
}
template <int E, int M, int K, int B>
__device__ __forceinline__ pj_u8 pj_f32_to_f8(float f) {
  const pj_u32 b = __float_as_uint(f);
  const pj_u8 sign = (pj_u8)((b >> 31) << (E + M));
  const pj_u32 abs = b & 0x7fffffffu;
  const pj_u8 finite_max = (pj_u8)((1 << (E + M)) - 1);
  const pj_u8 nan = K == 0 ? (pj_u8)((((1 << E) - 1) << M) | (1 << (M - 1)))
                  : K == 2 ? (pj_u8)0x80 : K == 3 ? finite_max : (pj_u8)0x7f;
  const pj_u8 inf = K == 0 ? (pj_u8)(((1 << E) - 1) << M) : nan;
  const pj_u32 max_finite = K == 0 ? (pj_u32)(inf - 1) : K == 2 ? 0x7fu
                          : K == 3 ? (pj_u32)finite_max : 0x7eu;
  const pj_u8 nan_sign = K == 2 ? (pj_u8)0 : sign;
  if (abs > 0x7f800000u) return K == 3 ? (pj_u8)0 : (pj_u8)(nan_sign | nan);
  if (abs == 0x7f800000u) return (K == 0 ? sign : nan_sign) | inf;
  pj_u32 code;
  if (abs >= ((pj_u32)(127 + 1 - B) << 23)) {
    const int shift = 23 - M;
    const pj_u32 rounded = (abs + ((1u << (shift - 1)) - 1) + ((abs >> shift) & 1)) >> shift;
    code = rounded - ((pj_u32)(127 - B) << M);
    if (code > max_finite) return (K == 0 ? sign : nan_sign) | inf;
  } else {
    code = (pj_u32)rintf(ldexpf(__uint_as_float(abs), B - 1 + M));
  }
  if (K == 2 && code == 0) return 0;
  return (pj_u8)(sign | code);
}
#define PJ_F8(NAME, E, M, K, B)                                                 \
  __device__ __forceinline__ float pj_##NAME##_to_f32(pj_u8 b) {              \
    return pj_f8_to_f32<E, M, K, B>(b);                                       \
  }                                                                           \
  __device__ __forceinline__ pj_u8 pj_f32_to_##NAME(float f) {                \
    return pj_f32_to_f8<E, M, K, B>(f);                                       \
  }                                                                           \
  __device__ __forceinline__ float pj_round_##NAME(float f) {                 \
    return pj_##NAME##_to_f32(pj_f32_to_##NAME(f));                           \
  }
PJ_F8(f8e4m3fn, 4, 3, 1, 7)
PJ_F8(f8e5m2, 5, 2, 0, 15)
PJ_F8(f8e4m3, 4, 3, 0, 7)
PJ_F8(f8e3m4, 3, 4, 0, 3)
PJ_F8(f8e4m3fnuz, 4, 3, 2, 8)
PJ_F8(f8e5m2fnuz, 5, 2, 2, 16)
PJ_F8(f8e4m3b11fnuz, 4, 3, 2, 11)
PJ_F8(f4e2m1fn, 2, 1, 3, 1)
PJ_F8(f6e2m3fn, 2, 3, 3, 1)
PJ_F8(f6e3m2fn, 3, 2, 3, 3)
#undef PJ_F8
// f8e8m0fnu: 2^(code - 127), NaN 0xFF; from float the nearest power of two
// (ties to the even code), zero and tiny values to code 0, negative values,
// infinities and NaN to NaN.
__device__ __forceinline__ float pj_f8e8m0fnu_to_f32(pj_u8 b) {
  return b == 0xff ? __int_as_float(0x7fc00000) : ldexpf(1.0f, (int)b - 127);
}
__device__ __forceinline__ pj_u8 pj_f32_to_f8e8m0fnu(float f) {
  const pj_u32 b = __float_as_uint(f);
  const pj_u32 abs = b & 0x7fffffffu;
  if (abs >= 0x7f800000u) return 0xff;
  if (abs == 0) return 0;
  if (b >> 31) return 0xff;
  if (abs < 0x00800000u) return abs > 0x00600000u ? 1 : 0;
  const pj_u32 rounded = (abs + 0x3fffffu + ((abs >> 23) & 1)) >> 23;
  return rounded >= 0xffu ? (pj_u8)0xff : (pj_u8)rounded;
}
__device__ __forceinline__ float pj_round_f8e8m0fnu(float f) {
  return pj_f8e8m0fnu_to_f32(pj_f32_to_f8e8m0fnu(f));
}

// Floats.
// NaN if either is; -0 below +0 (IEEE 754's maximum and minimum).
template <typename T> __device__ __forceinline__ T pj_fmax(T a, T b) {
  return (a != a || b != b)
             ? a + b
             : (a > b || (a == b && !signbit(a)) ? a : b);
}
template <typename T> __device__ __forceinline__ T pj_fmin(T a, T b) {
  return (a != a || b != b)
             ? a + b
             : (a < b || (a == b && signbit(a)) ? a : b);
}
template <typename T> __device__ __forceinline__ T pj_fsign(T v) {
  return v != v ? v : copysign(v != T(0) ? T(1) : T(0), v);
}
template <typename T> __device__ __forceinline__ T pj_logistic(T v) {
  return T(1) / (T(1) + exp(-v));
}
template <typename T> __device__ __forceinline__ T pj_round_afz(T v) { return round(v); }
template <typename T> __device__ __forceinline__ T pj_round_even(T v) { return rint(v); }
template <typename T> __device__ __forceinline__ pj_u8 pj_isfinite(T v) { return isfinite(v) ? 1 : 0; }

__device__ __forceinline__ pj_s32 pj_total_order(float f) {
  pj_s32 b = __float_as_int(f);
  return b ^ ((b >> 31) & 0x7fffffff);
}
__device__ __forceinline__ pj_s64 pj_total_order(double f) {
  pj_s64 b = __double_as_longlong(f);
  return b ^ ((b >> 63) & 0x7fffffffffffffffLL);
}

// XLA's reduce-precision: round the mantissa to nearest even, then
// flush or saturate what the smaller exponent cannot hold.
template <typename F, typename B, int kMantissa, int kExponent>
__device__ __forceinline__ F pj_reduce_precision_bits(F value, int exponent_bits,
                                                      int mantissa_bits) {
  B bits = pj_bitcast<B>(value);
  if (mantissa_bits < kMantissa) {
    const B last_bit = B(1) << (kMantissa - mantissa_bits);
    const B base_bias = (last_bit >> 1) - 1;
    const B x_last = (bits & last_bit) >> (kMantissa - mantissa_bits);
    bits = (bits + x_last + base_bias) & ~(last_bit - 1);
  }
  if (exponent_bits < kExponent) {
    const B sign_mask = B(1) << (kMantissa + kExponent);
    const B exp_mask = ((B(1) << kExponent) - 1) << kMantissa;
    const B bias = (B(1) << (kExponent - 1)) - 1;
    const B reduced_bias = (B(1) << (exponent_bits - 1)) - 1;
    const B max_exp = (bias + reduced_bias) << kMantissa;
    const B min_exp = (bias - reduced_bias) << kMantissa;
    const B x_exp = bits & exp_mask;
    if (x_exp > max_exp) bits = (bits & sign_mask) | exp_mask;
    else if (x_exp <= min_exp) bits = bits & sign_mask;
  }
  const F result = pj_bitcast<F>(bits);
  // A NaN without a mantissa bit left is an infinity of its sign.
  if (value != value) {
    if (mantissa_bits > 0) return value;
    const B sign = pj_bitcast<B>(value) & (B(1) << (kMantissa + kExponent));
    return pj_bitcast<F>(sign | (((B(1) << kExponent) - 1) << kMantissa));
  }
  return result;
}
__device__ __forceinline__ float pj_reduce_precision(float value, int exponent_bits, int mantissa_bits) {
  return pj_reduce_precision_bits<float, pj_u32, 23, 8>(value, exponent_bits, mantissa_bits);
}
__device__ __forceinline__ double pj_reduce_precision(double value, int exponent_bits, int mantissa_bits) {
  return pj_reduce_precision_bits<double, pj_u64, 52, 11>(value, exponent_bits, mantissa_bits);
}

// Complex arithmetic and functions, with the results std::complex gives on
// the host (C99 Annex G where infinities and NaNs meet). c64 quotients are
// computed in double, then rounded.
template <typename R> __device__ __forceinline__ pj_complex<R> pj_cmake(R re, R im) {
  pj_complex<R> z;
  z.re = re;
  z.im = im;
  return z;
}
template <typename R>
__device__ __forceinline__ pj_complex<R> operator+(pj_complex<R> a, pj_complex<R> b) {
  return pj_cmake(a.re + b.re, a.im + b.im);
}
template <typename R>
__device__ __forceinline__ pj_complex<R> operator-(pj_complex<R> a, pj_complex<R> b) {
  return pj_cmake(a.re - b.re, a.im - b.im);
}
template <typename R> __device__ __forceinline__ pj_complex<R> operator-(pj_complex<R> a) {
  return pj_cmake(-a.re, -a.im);
}
template <typename R>
__device__ __forceinline__ bool operator==(pj_complex<R> a, pj_complex<R> b) {
  return a.re == b.re && a.im == b.im;
}
template <typename R>
__device__ __forceinline__ bool operator!=(pj_complex<R> a, pj_complex<R> b) {
  return !(a == b);
}
template <typename R> __device__ __forceinline__ bool pj_isinf_(R v) {
  return v - v != v - v && v == v;
}
template <typename R> __device__ __forceinline__ R pj_box(bool inf, R v) {
  return copysign(inf ? R(1) : R(0), v);
}
template <typename R>
__device__ pj_complex<R> operator*(pj_complex<R> x, pj_complex<R> y) {
  R a = x.re, b = x.im, c = y.re, d = y.im;
  const R ac = a * c, bd = b * d, ad = a * d, bc = b * c;
  R re = ac - bd, im = ad + bc;
  if (re != re && im != im) {
    // Annex G: an infinite factor makes an infinite product.
    bool recalc = false;
    if (pj_isinf_(a) || pj_isinf_(b)) {
      a = pj_box(pj_isinf_(a), a);
      b = pj_box(pj_isinf_(b), b);
      if (c != c) c = copysign(R(0), c);
      if (d != d) d = copysign(R(0), d);
      recalc = true;
    }
    if (pj_isinf_(c) || pj_isinf_(d)) {
      c = pj_box(pj_isinf_(c), c);
      d = pj_box(pj_isinf_(d), d);
      if (a != a) a = copysign(R(0), a);
      if (b != b) b = copysign(R(0), b);
      recalc = true;
    }
    if (!recalc && (pj_isinf_(ac) || pj_isinf_(bd) || pj_isinf_(ad) || pj_isinf_(bc))) {
      if (a != a) a = copysign(R(0), a);
      if (b != b) b = copysign(R(0), b);
      if (c != c) c = copysign(R(0), c);
      if (d != d) d = copysign(R(0), d);
      recalc = true;
    }
    if (recalc) {
      const R inf = R(1) / R(0);
      re = inf * (a * c - b * d);
      im = inf * (a * d + b * c);
    }
  }
  return pj_cmake(re, im);
}
// (a + bi) / (c + di) by Smith's method, scaled against overflow, with
// Annex G's infinities and zeros.
template <typename W>
__device__ pj_complex<W> pj_cdiv_wide(W a, W b, W c, W d) {
  W re, im;
  if (fabs(c) < fabs(d)) {
    const W r = c / d, den = c * r + d;
    re = (a * r + b) / den;
    im = (b * r - a) / den;
  } else {
    const W r = d / c, den = c + d * r;
    re = (b * r + a) / den;
    im = (b - a * r) / den;
  }
  if (re != re && im != im) {
    const W inf = W(1) / W(0);
    if (c == W(0) && d == W(0) && (a == a || b == b)) {
      re = copysign(inf, c) * a;
      im = copysign(inf, c) * b;
    } else if ((pj_isinf_(a) || pj_isinf_(b)) && c - c == c - c && d - d == d - d) {
      a = pj_box(pj_isinf_(a), a);
      b = pj_box(pj_isinf_(b), b);
      re = inf * (a * c + b * d);
      im = inf * (b * c - a * d);
    } else if ((pj_isinf_(c) || pj_isinf_(d)) && a - a == a - a && b - b == b - b) {
      c = pj_box(pj_isinf_(c), c);
      d = pj_box(pj_isinf_(d), d);
      re = W(0) * (a * c + b * d);
      im = W(0) * (b * c - a * d);
    }
  }
  return pj_cmake(re, im);
}
__device__ __forceinline__ pj_c64 operator/(pj_c64 x, pj_c64 y) {
  const pj_c128 q = pj_cdiv_wide<double>(x.re, x.im, y.re, y.im);
  return pj_cmake((float)q.re, (float)q.im);
}
__device__ __forceinline__ pj_c128 operator/(pj_c128 x, pj_c128 y) {
  return pj_cdiv_wide<double>(x.re, x.im, y.re, y.im);
}
template <typename R> __device__ __forceinline__ R pj_cabs(pj_complex<R> z) {
  return hypot(z.re, z.im);
}
template <typename R> __device__ pj_complex<R> pj_cexp(pj_complex<R> z) {
  const R x = z.re, y = z.im;
  if (y == R(0)) return pj_cmake(exp(x), y);
  if (pj_isinf_(x)) {  // C99 Annex G's infinite real parts
    const R e = x > R(0) ? x : R(0);
    if (y - y != y - y) return x > R(0) ? pj_cmake(x, y - y) : pj_cmake(R(0), copysign(R(0), y));
    return pj_cmake(copysign(e, cos(y)), copysign(e, sin(y)));
  }
  const R e = exp(x);
  return pj_cmake(e * cos(y), e * sin(y));
}
template <typename R> __device__ pj_complex<R> pj_cexpm1(pj_complex<R> z) {
  const R h = sin(z.im / 2);
  return pj_cmake(expm1(z.re) * cos(z.im) - 2 * h * h, exp(z.re) * sin(z.im));
}
template <typename R> __device__ pj_complex<R> pj_clog(pj_complex<R> z) {
  return pj_cmake(log(hypot(z.re, z.im)), atan2(z.im, z.re));
}
template <typename R> __device__ pj_complex<R> pj_clog1p(pj_complex<R> z) {
  const R x = z.re, y = z.im, xp1 = x + 1;
  const R re = fabs(x) < R(0.5) && fabs(y) < R(0.5)
                   ? log1p(x) + log1p((y / xp1) * (y / xp1)) / 2
                   : log(hypot(xp1, y));
  return pj_cmake(re, atan2(y, xp1));
}
template <typename R> __device__ pj_complex<R> pj_csqrt(pj_complex<R> z) {
  const R x = z.re, y = z.im;
  if (x == R(0) && y == R(0)) return pj_cmake(R(0), y);
  if (pj_isinf_(y)) return pj_cmake(R(1) / R(0), y);
  const R t = sqrt((fabs(x) + hypot(x, y)) / 2);
  if (x >= R(0)) return pj_cmake(t, y / (2 * t));
  return pj_cmake(fabs(y) / (2 * t), copysign(t, y));
}
template <typename R> __device__ pj_complex<R> pj_ctanh(pj_complex<R> z) {
  const R x = z.re, y = z.im;
  // Past this |x| tanh's real part is 1 to the type's precision.
  const R big = sizeof(R) == 4 ? R(10) : R(22);
  if (fabs(x) > big) {
    return pj_cmake(copysign(R(1), x), 4 * sin(y) * cos(y) * exp(-2 * fabs(x)));
  }
  // Kahan's formula.
  const R t = tan(y), beta = 1 + t * t, s = sinh(x), rho = sqrt(1 + s * s);
  const R den = 1 + beta * s * s;
  return pj_cmake(beta * rho * s / den, t / den);
}
template <typename R> __device__ pj_complex<R> pj_csin(pj_complex<R> z) {
  return pj_cmake(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im));
}
template <typename R> __device__ pj_complex<R> pj_ccos(pj_complex<R> z) {
  return pj_cmake(cos(z.re) * cosh(z.im), -(sin(z.re) * sinh(z.im)));
}
template <typename R> __device__ pj_complex<R> pj_ctan(pj_complex<R> z) {
  // tan z = -i tanh(iz).
  const pj_complex<R> t = pj_ctanh(pj_cmake(-z.im, z.re));
  return pj_cmake(t.im, -t.re);
}
template <typename R> __device__ pj_complex<R> pj_csign(pj_complex<R> z) {
  const R m = pj_cabs(z);
  return m == R(0) ? pj_cmake(R(0), R(0)) : pj_cmake(z.re / m, z.im / m);
}
template <typename R> __device__ pj_complex<R> pj_crsqrt(pj_complex<R> z) {
  return pj_cmake(R(1), R(0)) / pj_csqrt(z);
}
template <typename R> __device__ pj_complex<R> pj_clogistic(pj_complex<R> z) {
  const pj_complex<R> one = pj_cmake(R(1), R(0));
  return one / (one + pj_cexp(-z));
}
template <typename R> __device__ pj_complex<R> pj_cpow(pj_complex<R> a, pj_complex<R> b) {
  const pj_complex<R> zero = pj_cmake(R(0), R(0));
  if (a == zero && b == zero) return pj_cmake(R(1), R(0));
  if (a == zero && b.re > R(0)) return zero;
  return pj_cexp(b * pj_clog(a));
}
// XLA's principal cube root and complex atan2 (as the host computes them).
template <typename R> __device__ pj_complex<R> pj_ccbrt(pj_complex<R> z) {
  const R r = cbrt(pj_cabs(z)), t = atan2(z.im, z.re) / 3;
  return pj_cmake(r * cos(t), r * sin(t));
}
template <typename R> __device__ pj_complex<R> pj_catan2(pj_complex<R> y, pj_complex<R> x) {
  const pj_complex<R> l =
      pj_clog((x + pj_cmake(R(0), R(1)) * y) / pj_csqrt(x * x + y * y));
  return pj_cmake(l.im, -l.re);
}
template <typename R> __device__ __forceinline__ pj_u8 pj_to_pred(pj_complex<R> z) {
  return z.re != R(0) ? 1 : 0;  // the real part only, as every conversion out of complex
}

// Index arithmetic: division rounding down and up, for b > 0.
__device__ __forceinline__ long long pj_floordiv(long long a, long long b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__device__ __forceinline__ long long pj_ceildiv(long long a, long long b) {
  return -pj_floordiv(-a, b);
}

// The operand elements a window dimension covers for output index c, as
// the host's WindowGeometry::Span computes them: indices first, first +
// step, ... (count of them); only the positions that land on an element
// (divisor, modulus and inverse: WindowStep's).
struct pj_span { long long first, step, count; };
__device__ __forceinline__ pj_span pj_window_span(
    long long c, long long stride, long long padding_low, long long size,
    long long dilation, long long bd, long long n, long long divisor,
    long long modulus, long long inverse) {
  pj_span none = {0, 0, 0};
  if (size == 0 || n == 0) return none;
  const long long base = c * stride - padding_low;
  const long long top = (n - 1) * bd - base;
  if (top < 0) return none;
  const long long lo = base >= 0 ? 0 : (-base + dilation - 1) / dilation;
  const long long hi = size - 1 < top / dilation ? size - 1 : top / dilation;
  long long first = lo, step = 1;
  if (bd > 1) {
    long long r = (-base) % bd;
    if (r < 0) r += bd;
    if (r % divisor != 0) return none;
    const long long w0 = (r / divisor) * inverse % modulus;
    long long shift = (w0 - lo) % modulus;
    if (shift < 0) shift += modulus;
    first = lo + shift;
    step = modulus;
  }
  if (first > hi) return none;
  pj_span s = {(base + first * dilation) / bd, step * dilation / bd,
               (hi - first) / step + 1};
  return s;
}

// Integers: two's-complement wrap-around, and XLA's answers where C++ has
// none.
template <typename T> __device__ __forceinline__ T pj_iadd(T a, T b) {
  typedef typename pj_unsigned<T>::type U; return (T)(U)((U)a + (U)b);
}
template <typename T> __device__ __forceinline__ T pj_isub(T a, T b) {
  typedef typename pj_unsigned<T>::type U; return (T)(U)((U)a - (U)b);
}
template <typename T> __device__ __forceinline__ T pj_imul(T a, T b) {
  typedef typename pj_unsigned<T>::type U; return (T)(U)((U)a * (U)b);
}
template <typename T> __device__ __forceinline__ T pj_ineg(T a) {
  typedef typename pj_unsigned<T>::type U; return (T)(U)((U)0 - (U)a);
}
template <typename T> __device__ __forceinline__ T pj_iabs(T a) {
  return pj_is_signed<T>::value && a < T(0) ? pj_ineg(a) : a;
}
template <typename T> __device__ __forceinline__ T pj_isign(T a) {
  return pj_is_signed<T>::value ? (T)((a > T(0)) - (a < T(0))) : (T)(a != T(0));
}
template <typename T> __device__ __forceinline__ T pj_idiv(T a, T b) {
  if (b == T(0)) return (T)-1;
  if (pj_is_signed<T>::value && a == pj_limits<T>::lo() && b == (T)-1) return a;
  return a / b;
}
template <typename T> __device__ __forceinline__ T pj_irem(T a, T b) {
  if (b == T(0)) return a;
  if (pj_is_signed<T>::value && a == pj_limits<T>::lo() && b == (T)-1) return T(0);
  return a % b;
}
template <typename T> __device__ __forceinline__ T pj_ipow(T base, T exponent) {
  typedef typename pj_unsigned<T>::type U;
  if (pj_is_signed<T>::value && exponent < T(0)) return base == T(1) ? T(1) : T(0);
  U result = 1, b = (U)base, e = (U)exponent;
  while (e != 0) {
    if (e & 1) result = (U)(result * b);
    b = (U)(b * b);
    e >>= 1;
  }
  return (T)result;
}
template <typename T> __device__ __forceinline__ T pj_shl(T a, T b) {
  typedef typename pj_unsigned<T>::type U;
  const U s = (U)b;
  return s >= sizeof(T) * 8 ? T(0) : (T)(U)((U)a << s);
}
template <typename T> __device__ __forceinline__ T pj_shr_logical(T a, T b) {
  typedef typename pj_unsigned<T>::type U;
  const U s = (U)b;
  return s >= sizeof(T) * 8 ? T(0) : (T)(U)((U)a >> s);
}
template <typename T> __device__ __forceinline__ T pj_shr_arith(T a, T b) {
  typedef typename pj_unsigned<T>::type U;
  typedef typename pj_signed<T>::type S;
  const U s = (U)b;
  const S v = (S)a;
  return (T)(s >= sizeof(T) * 8 ? (v < S(0) ? S(-1) : S(0)) : (S)(v >> s));
}
template <typename T> __device__ __forceinline__ T pj_not(T a) {
  typedef typename pj_unsigned<T>::type U; return (T)(U)~(U)a;
}
template <typename T> __device__ __forceinline__ T pj_popcnt(T a) {
  typedef typename pj_unsigned<T>::type U;
  return sizeof(T) == 8 ? (T)__popcll((pj_u64)(U)a) : (T)__popc((pj_u32)(U)a);
}
template <typename T> __device__ __forceinline__ T pj_clz(T a) {
  typedef typename pj_unsigned<T>::type U;
  if (sizeof(T) == 8) return (T)__clzll((long long)(U)a);
  return (T)(__clz((int)(pj_u32)(U)a) - (32 - (int)sizeof(T) * 8));
}
// s4, u4, s2 and u2, held one per byte: a value wrapped to its low 4 or 2
// bits (s4 and s2 sign-extended).
template <typename T> __device__ __forceinline__ pj_s8 pj_wrap_s4(T v) {
  return (pj_s8)((pj_s8)(pj_u8)((pj_u8)v << 4) >> 4);
}
template <typename T> __device__ __forceinline__ pj_u8 pj_wrap_u4(T v) { return (pj_u8)((pj_u8)v & 0xF); }
template <typename T> __device__ __forceinline__ pj_s8 pj_wrap_s2(T v) {
  return (pj_s8)((pj_s8)(pj_u8)((pj_u8)v << 6) >> 6);
}
template <typename T> __device__ __forceinline__ pj_u8 pj_wrap_u2(T v) { return (pj_u8)((pj_u8)v & 0x3); }
template <typename T> __device__ __forceinline__ T pj_imax(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T pj_imin(T a, T b) { return a < b ? a : b; }

// Converts: float to integer saturates (NaN to 0); anything to pred is
// x != 0.
template <typename D, typename S> struct pj_convert_impl {
  static __device__ __forceinline__ D run(S s) { return (D)s; }
};
template <typename D> __device__ __forceinline__ D pj_float_to_int(double s) {
  if (s != s) return D(0);
  if (s <= (double)pj_limits<D>::lo()) return pj_limits<D>::lo();
  if (s >= (double)pj_limits<D>::hi()) return pj_limits<D>::hi();
  return (D)s;
}
#define PJ_FLOAT_TO_INT(D)                                                    \
  template <> struct pj_convert_impl<D, float> {                             \
    static __device__ __forceinline__ D run(float s) { return pj_float_to_int<D>(s); } \
  };                                                                          \
  template <> struct pj_convert_impl<D, double> {                            \
    static __device__ __forceinline__ D run(double s) { return pj_float_to_int<D>(s); } \
  };
PJ_FLOAT_TO_INT(pj_s8) PJ_FLOAT_TO_INT(pj_s16) PJ_FLOAT_TO_INT(pj_s32) PJ_FLOAT_TO_INT(pj_s64)
PJ_FLOAT_TO_INT(pj_u8) PJ_FLOAT_TO_INT(pj_u16) PJ_FLOAT_TO_INT(pj_u32) PJ_FLOAT_TO_INT(pj_u64)
#undef PJ_FLOAT_TO_INT
template <typename D, typename S> __device__ __forceinline__ D pj_convert(S s) {
  return pj_convert_impl<D, S>::run(s);
}
template <typename S> __device__ __forceinline__ pj_u8 pj_to_pred(S s) { return s != S(0) ? 1 : 0; }

// The float nearest a double or a wide integer, rounded to odd (truncated,
// the last bit set when anything was cut off): rounded again to nearest
// even into f16, bf16 or narrower, it gives the once-rounded value, as the
// host's converts (RoundToOddFloat) do.
__device__ __forceinline__ float pj_odd_f32(double d) {
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
  return __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ float pj_odd_f32(unsigned long long m) {
  if (m < (1ull << 24)) return (float)m;
  const int shift = 64 - __clzll((long long)m) - 24;
  unsigned long long kept = m >> shift;
  if ((m & ((1ull << shift) - 1)) != 0) kept |= 1ull;
  return ldexpf((float)kept, shift);
}
__device__ __forceinline__ float pj_odd_f32(long long v) {
  const float f = pj_odd_f32(v < 0 ? 0ull - (unsigned long long)v
                                   : (unsigned long long)v);
  return v < 0 ? -f : f;
}

// A float's rank for a scatter's maximum (minimum): a larger value (a
// smaller one) ranks higher, NaN highest, -0 below +0 (as pj_fmax orders
// them).
__device__ __forceinline__ unsigned pj_rank_max(float v) {
  if (v != v) return 0xFFFFFFFFu;
  const unsigned b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ unsigned pj_rank_min(float v) {
  return v != v ? 0xFFFFFFFFu : ~pj_rank_max(v);
}

// Atomics: *p = f(*p) as one indivisible step, by compare-and-swap on the
// aligned word that holds *p (1-, 2-, 4- or 8-byte storage; 1- and 2-byte
// storage is an integer type). Elements of a buffer never straddle words.
template <typename S, typename F> __device__ __forceinline__ void pj_atomic_apply(S* p, F f) {
  if constexpr (sizeof(S) == 8 || sizeof(S) == 4) {
    typedef typename pj_if<sizeof(S) == 8, unsigned long long, unsigned>::type W;
    W* word = reinterpret_cast<W*>(p);
    W seen, old = *word;
    do {
      seen = old;
      S value;
      memcpy(&value, &seen, sizeof(S));
      const S next = f(value);
      W bits;
      memcpy(&bits, &next, sizeof(S));
      old = atomicCAS(word, seen, bits);
    } while (old != seen);
  } else {
    const unsigned long long at = reinterpret_cast<unsigned long long>(p);
    unsigned* word = reinterpret_cast<unsigned*>(at & ~3ull);
    const unsigned shift = (unsigned)(at & 3) * 8;
    const unsigned mask = (sizeof(S) == 1 ? 0xFFu : 0xFFFFu) << shift;
    unsigned seen, old = *word;
    do {
      seen = old;
      const S next = f((S)((seen & mask) >> shift));
      old = atomicCAS(word, seen, (seen & ~mask) | (((unsigned)next << shift) & mask));
    } while (old != seen);
  }
}

)cuda";

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_PRELUDE_H_
