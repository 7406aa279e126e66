// The StableHLO translator's CHLO special functions, as HLO element-wise
// ops: lgamma and digamma (Lanczos' approximation, g = 7, nine terms, with
// the reflection formula below 1/2), erfc (1 - erf below 2, the continued
// fraction of erfc above), bessel_i1e (its power series up to 20, the
// asymptotic series above), zeta (Hurwitz's, by Euler-Maclaurin summation)
// and polygamma (through zeta); next_after on the bits; is_inf,
// is_pos_inf, is_neg_inf and conj.
//
// The functions of real values compute in f64 whatever the operand's
// float type and round once at the end: f16, bf16 and f32 results are
// then the correctly rounded ones but for rare ties, f64 ones within a few
// units in the last place (1e-15 relative, erfc 5e-15).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {
namespace {

// Lanczos' coefficients for g = 7, nine terms (Godfrey's).
constexpr double kLanczosG = 7;
constexpr double kLanczos[] = {0.99999999999980993227684700473478,
                               676.520368121885098567009190444019,
                               -1259.13921672240287047156078755283,
                               771.3234287776530788486528258894,
                               -176.61502916214059906584551354,
                               12.507343278686904814458936853,
                               -0.13857109526572011689554707,
                               9.984369578019570859563e-6,
                               1.50563273514931155834e-7};

// Bernoulli's numbers B_2, B_4, ..., B_24, for Euler-Maclaurin's tail.
constexpr double kBernoulli[] = {
    1.0 / 6,       -1.0 / 30,       1.0 / 42,       -1.0 / 30,
    5.0 / 66,      -691.0 / 2730,   7.0 / 6,        -3617.0 / 510,
    43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730};

}  // namespace

absl::Status Translator::Special(Builder* b, const Operation& op,
                                 absl::string_view name) {
  const bool binary =
      name == "next_after" || name == "zeta" || name == "polygamma";
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, binary ? 2 : 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  const Shape& operand = in[0].shape;
  const PrimitiveType type = operand.element_type();
  if (binary && in[1].shape != operand) {
    return Invalid(op, absl::StrFormat("takes operands of one shape; got %s "
                                       "and %s",
                                       mlir::MlirTypeString(operand),
                                       mlir::MlirTypeString(in[1].shape)));
  }
  if (name == "conj") {
    if (!IsComplex(type)) return Define(b, op, {in[0]});
    const Shape part = operand.WithElementType(ComplexPartType(type));
    const std::string re = Emit(b, &op, part, "real", {in[0].name});
    const std::string im = Emit(b, &op, part, "imag", {in[0].name});
    return Define(b, op,
                  {Value{Emit(b, &op, operand, "complex",
                              {re, Emit(b, &op, part, "negate", {im})}),
                         operand}});
  }
  if (!IsFloatingPoint(type) || IsComplex(type)) {
    return Unsupported(
        op, absl::StrCat("chlo.", name, " on ", mlir::MlirTypeString(operand),
                         " is not supported (real floating point only)"));
  }
  const ChloEmitter same{this, b, op, operand};
  const std::string& x = in[0].name;
  if (name == "is_inf" || name == "is_pos_inf" || name == "is_neg_inf") {
    const std::string v = name == "is_inf" ? same.Unary("abs", x) : x;
    const std::string inf =
        same.Constant(name == "is_neg_inf" ? -INFINITY : INFINITY);
    return Define(b, op,
                  {Value{same.Compare({v, inf}, "EQ"),
                         operand.WithElementType(PrimitiveType::kPred)}});
  }
  if (name == "next_after") {
    PJRT_ASSIGN_OR_RETURN(std::string result, NextAfter(same, x, in[1].name));
    return Define(b, op, {Value{result, operand}});
  }
  // The rest in f64, rounded once at the end.
  const Shape wide = operand.WithElementType(PrimitiveType::kF64);
  const ChloEmitter e{this, b, op, wide};
  const auto widen = [&](const std::string& v) {
    return type == PrimitiveType::kF64 ? v : e.Unary("convert", v);
  };
  std::string result;
  if (name == "lgamma") {
    result = Lgamma(e, widen(x));
  } else if (name == "digamma") {
    result = Digamma(e, widen(x));
  } else if (name == "erfc") {
    result = Erfc(e, widen(x));
  } else if (name == "bessel_i1e") {
    result = BesselI1e(e, widen(x));
  } else if (name == "zeta") {
    result = Zeta(e, widen(x), widen(in[1].name));
  } else if (name == "polygamma") {
    result = Polygamma(e, widen(x), widen(in[1].name));
  } else {
    return Unsupported(op, "this CHLO operation is not supported");
  }
  if (type != PrimitiveType::kF64) result = same.Unary("convert", result);
  return Define(b, op, {Value{result, operand}});
}

Translator::LanczosTerms Translator::Lanczos(const ChloEmitter& e,
                                             const std::string& x) {
  LanczosTerms l;
  // Below 1/2 by reflection, through 1 - x: z = x - 1, or -x.
  l.reflect = e.Compare({x, e.Constant(0.5)}, "LT");
  l.z = e.Select({l.reflect, e.Unary("negate", x),
                  e.Binary("subtract", x, e.Constant(1))});
  // A(z) = c0 + sum c_i / (z + i); slope = sum c_i / (z + i)^2 = -A'(z).
  l.sum = e.Constant(kLanczos[0]);
  l.slope = e.Constant(0);
  for (int i = 1; i < 9; ++i) {
    const std::string at = e.Binary("add", l.z, e.Constant(i));
    const std::string term = e.Binary("divide", e.Constant(kLanczos[i]), at);
    l.sum = e.Binary("add", l.sum, term);
    l.slope = e.Binary("add", l.slope, e.Binary("divide", term, at));
  }
  // t = z + g + 1/2, and log(t) as log(g + 1/2) + log1p(z / (g + 1/2)).
  const double g_half = kLanczosG + 0.5;
  l.t = e.Binary("add", l.z, e.Constant(g_half));
  l.log_t = e.Binary(
      "add", e.Constant(std::log(g_half)),
      e.Unary("log-plus-one", e.Binary("divide", l.z, e.Constant(g_half))));
  return l;
}

std::string Translator::Lgamma(const ChloEmitter& e, const std::string& x) {
  // Below 1/2 by reflection: lgamma(x) = log(pi / |sin(pi x)|) -
  // lgamma(1 - x). lgamma(z + 1) = log(2 pi) / 2 + (z + 1/2) log(t) - t +
  // log(A(z)).
  const LanczosTerms l = Lanczos(e, x);
  const std::string &reflect = l.reflect, &z = l.z, &sum = l.sum, &t = l.t,
                    &log_t = l.log_t;
  const std::string lg = e.Binary(
      "add",
      e.Binary("subtract",
               e.Binary("add", e.Constant(0.5 * std::log(2 * M_PI)),
                        e.Binary("multiply",
                                 e.Binary("add", z, e.Constant(0.5)), log_t)),
               t),
      e.Unary("log", sum));
  // |sin(pi x)| from x's distance to the nearest integer (exact), so that
  // it is 0 at the integers: lgamma is +inf there.
  const std::string frac = e.Binary("subtract", x, e.Unary("floor", x));
  const std::string near =
      e.Select({e.Compare({frac, e.Constant(0.5)}, "GT"),
                e.Binary("subtract", e.Constant(1), frac), frac});
  const std::string sine =
      e.Unary("sine", e.Binary("multiply", e.Constant(M_PI), near));
  const std::string reflected = e.Binary(
      "subtract",
      e.Binary("subtract", e.Constant(std::log(M_PI)), e.Unary("log", sine)),
      lg);
  std::string value = e.Select({reflect, reflected, lg});
  // Exactly 0 at 1 and 2 (the sums leave an ulp or so).
  const Shape pred = e.shape.WithElementType(PrimitiveType::kPred);
  const ChloEmitter p{this, e.b, e.op, pred};
  value = e.Select({p.Binary("or", e.Compare({x, e.Constant(1)}, "EQ"),
                             e.Compare({x, e.Constant(2)}, "EQ")),
                    e.Constant(0), value});
  // lgamma(+-inf) = +inf (the reflection would give NaN).
  const std::string infinite =
      e.Compare({e.Unary("abs", x), e.Constant(INFINITY)}, "EQ");
  return e.Select({infinite, e.Constant(INFINITY), value});
}

std::string Translator::Digamma(const ChloEmitter& e, const std::string& x) {
  const Shape pred = e.shape.WithElementType(PrimitiveType::kPred);
  const ChloEmitter p{this, e.b, e.op, pred};
  // Below 1/2 by reflection: digamma(x) = digamma(1 - x) - pi / tan(pi x).
  // The derivative of lgamma(z + 1) (Lgamma): log(t) - g / t - slope / A(z).
  const LanczosTerms l = Lanczos(e, x);
  const std::string &reflect = l.reflect, &sum = l.sum, &slope = l.slope,
                    &t = l.t, &log_t = l.log_t;
  const std::string dg = e.Binary(
      "subtract",
      e.Binary("subtract", log_t, e.Binary("divide", e.Constant(kLanczosG), t)),
      e.Binary("divide", slope, sum));
  // tan(pi x) from x less its nearest integer (tan has period pi).
  const std::string r = e.Binary(
      "subtract", x, e.Unary("floor", e.Binary("add", x, e.Constant(0.5))));
  const std::string reflected = e.Binary(
      "subtract", dg,
      e.Binary("divide", e.Constant(M_PI),
               e.Unary("tan", e.Binary("multiply", e.Constant(M_PI), r))));
  const std::string value = e.Select({reflect, reflected, dg});
  // NaN at 0 and the negative integers (XLA's), -inf gives NaN too; +inf
  // gives +inf.
  const std::string pole = p.Binary("and", e.Compare({x, e.Constant(0)}, "LE"),
                                    e.Compare({x, e.Unary("floor", x)}, "EQ"));
  return e.Select({pole, e.Constant(NAN), value});
}

std::string Translator::Erfc(const ChloEmitter& e, const std::string& x) {
  // For |x| < 2, 1 - erf(|x|); above, exp(-x^2) / sqrt(pi) over the
  // continued fraction x + (1/2) / (x + (2/2) / (x + (3/2) / ...)), sixty
  // terms from the last (both within 5e-15 of erfc); erfc(-x) = 2 -
  // erfc(x).
  const std::string ax = e.Unary("abs", x);
  const std::string near =
      e.Binary("subtract", e.Constant(1), e.Unary("erf", ax));
  // The fraction at 2 where it is not used (NaN stays NaN).
  const std::string xf =
      e.Select({e.Compare({ax, e.Constant(2)}, "LT"), e.Constant(2), ax});
  std::string f = xf;
  for (int k = 60; k >= 1; --k) {
    f = e.Binary("add", xf, e.Binary("divide", e.Constant(k / 2.0), f));
  }
  const std::string far = e.Binary(
      "divide",
      e.Unary("exponential", e.Unary("negate", e.Binary("multiply", xf, xf))),
      e.Binary("multiply", e.Constant(std::sqrt(M_PI)), f));
  const std::string positive =
      e.Select({e.Compare({ax, e.Constant(2)}, "LT"), near, far});
  return e.Select({e.Compare({x, e.Constant(0)}, "LT"),
                   e.Binary("subtract", e.Constant(2), positive), positive});
}

std::string Translator::BesselI1e(const ChloEmitter& e, const std::string& x) {
  // exp(-|x|) I1(|x|), odd in x. Up to 20: the power series
  // sum (|x|/2)^(2k+1) / (k! (k+1)!), sixty terms; above: the asymptotic
  // series 1 / sqrt(2 pi |x|) sum_k (-1)^k a_k / |x|^k, a_k = prod_(j<=k)
  // (4 - (2j-1)^2) / (8 j), thirty terms (both within 1e-15).
  const std::string ax = e.Unary("abs", x);
  const std::string small = e.Compare({ax, e.Constant(20)}, "LE");
  const std::string xs = e.Select({small, ax, e.Constant(1)});
  const std::string half = e.Binary("multiply", xs, e.Constant(0.5));
  const std::string quarter_square = e.Binary("multiply", half, half);
  std::string term = half, sum = half;
  for (int k = 1; k <= 60; ++k) {
    term = e.Binary("multiply", term,
                    e.Binary("divide", quarter_square,
                             e.Constant(static_cast<double>(k) * (k + 1))));
    sum = e.Binary("add", sum, term);
  }
  const std::string series =
      e.Binary("multiply", sum, e.Unary("exponential", e.Unary("negate", xs)));
  const std::string xl = e.Select({small, e.Constant(21), ax});
  std::string a = e.Constant(1), total = e.Constant(1);
  for (int k = 1; k <= 30; ++k) {
    const double factor = -(4.0 - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k);
    a = e.Binary("divide", e.Binary("multiply", a, e.Constant(factor)), xl);
    total = e.Binary("add", total, a);
  }
  const std::string asymptotic = e.Binary(
      "multiply", total,
      e.Unary("rsqrt", e.Binary("multiply", e.Constant(2 * M_PI), xl)));
  const std::string value = e.Select({small, series, asymptotic});
  return e.Select(
      {e.Compare({x, e.Constant(0)}, "LT"), e.Unary("negate", value), value});
}

std::string Translator::Zeta(const ChloEmitter& e, const std::string& s,
                             const std::string& q) {
  // Hurwitz's zeta(s, q) = sum_k (q + k)^-s: twelve terms, then at
  // w = q + 12 Euler-Maclaurin's w^(1-s) / (s - 1) + w^-s / 2 +
  // sum_j B_2j / (2j)! s (s+1) ... (s+2j-2) w^(-s-2j+1), twelve terms.
  const std::string minus_s = e.Unary("negate", s);
  std::string sum = e.Constant(0);
  for (int k = 0; k < 12; ++k) {
    sum =
        e.Binary("add", sum,
                 e.Binary("power", e.Binary("add", q, e.Constant(k)), minus_s));
  }
  const std::string w = e.Binary("add", q, e.Constant(12));
  const std::string w_minus_s = e.Binary("power", w, minus_s);
  const std::string one = e.Constant(1);
  sum = e.Binary("add", sum,
                 e.Binary("divide", e.Binary("multiply", w_minus_s, w),
                          e.Binary("subtract", s, one)));
  sum = e.Binary("add", sum, e.Binary("multiply", w_minus_s, e.Constant(0.5)));
  const std::string w_square = e.Binary("multiply", w, w);
  // s (s+1) ... (s+2j-2) w^(-s-2j+1), from j = 1.
  std::string factor =
      e.Binary("divide", e.Binary("multiply", s, w_minus_s), w);
  double factorial = 2;  // (2j)!
  for (int j = 1; j <= 12; ++j) {
    sum = e.Binary("add", sum,
                   e.Binary("multiply", factor,
                            e.Constant(kBernoulli[j - 1] / factorial)));
    factor = e.Binary(
        "divide",
        e.Binary("multiply", factor,
                 e.Binary("multiply", e.Binary("add", s, e.Constant(2 * j - 1)),
                          e.Binary("add", s, e.Constant(2 * j)))),
        w_square);
    factorial *= (2.0 * j + 1) * (2.0 * j + 2);
  }
  // As XLA (Cephes): +inf at s = 1 and at q a non-positive integer; NaN
  // for s < 1, and for q < 0 with s not an integer.
  const Shape pred = e.shape.WithElementType(PrimitiveType::kPred);
  const ChloEmitter p{this, e.b, e.op, pred};
  const std::string q_integer = e.Compare({q, e.Unary("floor", q)}, "EQ");
  const std::string q_pole =
      p.Binary("and", e.Compare({q, e.Constant(0)}, "LE"), q_integer);
  const std::string domain = p.Binary(
      "or", e.Compare({s, one}, "LT"),
      p.Binary("and", e.Compare({q, e.Constant(0)}, "LT"),
               p.Unary("not", e.Compare({s, e.Unary("floor", s)}, "EQ"))));
  std::string value = e.Select({domain, e.Constant(NAN), sum});
  value = e.Select({q_pole, e.Constant(INFINITY), value});
  return e.Select({e.Compare({s, one}, "EQ"), e.Constant(INFINITY), value});
}

std::string Translator::Polygamma(const ChloEmitter& e, const std::string& n,
                                  const std::string& x) {
  // polygamma(0, x) = digamma(x); for n = 1, 2, ...: (-1)^(n+1) n!
  // zeta(n + 1, x); NaN for any other n.
  const std::string one = e.Constant(1);
  const std::string n1 = e.Binary("add", n, one);
  const std::string factorial = e.Unary("exponential", Lgamma(e, n1));
  // (-1)^(n+1): +1 for odd n.
  const std::string odd =
      e.Compare({e.Binary("remainder", n, e.Constant(2)), one}, "EQ");
  const std::string sign = e.Select({odd, one, e.Constant(-1)});
  const std::string higher = e.Binary(
      "multiply", e.Binary("multiply", sign, factorial), Zeta(e, n1, x));
  const std::string value =
      e.Select({e.Compare({n, e.Constant(0)}, "EQ"), Digamma(e, x), higher});
  const Shape pred = e.shape.WithElementType(PrimitiveType::kPred);
  const ChloEmitter p{this, e.b, e.op, pred};
  const std::string bad =
      p.Binary("or", e.Compare({n, e.Constant(0)}, "LT"),
               p.Unary("not", e.Compare({n, e.Unary("floor", n)}, "EQ")));
  return e.Select({bad, e.Constant(NAN), value});
}

absl::StatusOr<std::string> Translator::NextAfter(const ChloEmitter& e,
                                                  const std::string& x,
                                                  const std::string& y) {
  const PrimitiveType type = e.shape.element_type();
  const int bits = BitWidth(type);
  if (bits < 16) {
    return Unsupported(
        e.op, absl::StrCat("chlo.next_after on ", mlir::MlirTypeString(e.shape),
                           " is not supported (16, 32 and "
                           "64-bit floats only)"));
  }
  const PrimitiveType int_type = bits == 16   ? PrimitiveType::kS16
                                 : bits == 32 ? PrimitiveType::kS32
                                              : PrimitiveType::kS64;
  const Shape int_shape = e.shape.WithElementType(int_type);
  const ChloEmitter i{this, e.b, e.op, int_shape};
  const Shape pred = e.shape.WithElementType(PrimitiveType::kPred);
  const ChloEmitter p{this, e.b, e.op, pred};
  const auto as_int = [&](const std::string& v) {
    return Emit(e.b, &e.op, int_shape, "bitcast-convert", {v});
  };
  const auto int_constant = [&](int64_t v) {
    const std::string c =
        EmitLine(e.b, &e.op, Shape(int_type, {}), "constant", absl::StrCat(v));
    return Emit(e.b, &e.op, int_shape, "broadcast", {c}, "dimensions={}");
  };
  const std::string xb = as_int(x);
  // Away from zero (the bits up by one) when y lies beyond x on x's side
  // of zero, else toward it (down by one).
  const std::string away = p.Compare(
      {e.Compare({x, y}, "LT"), e.Compare({x, e.Constant(0)}, "GT")}, "EQ");
  const std::string one = int_constant(1);
  const std::string stepped =
      i.Select({away, i.Binary("add", xb, one), i.Binary("subtract", xb, one)});
  // From zero: the smallest subnormal with y's sign (bits 1, or the sign
  // bit and 1).
  const int64_t negative_one_ulp = -((int64_t{1} << (bits - 1)) - 1);
  const std::string from_zero =
      i.Select({i.Compare({as_int(y), int_constant(0)}, "LT"),
                int_constant(negative_one_ulp), one});
  std::string result_bits =
      i.Select({e.Compare({x, e.Constant(0)}, "EQ"), from_zero, stepped});
  std::string result =
      Emit(e.b, &e.op, e.shape, "bitcast-convert", {result_bits});
  // x == y gives y; a NaN, NaN.
  result = e.Select({e.Compare({x, y}, "EQ"), y, result});
  const std::string nan =
      p.Binary("or", e.Compare({x, x}, "NE"), e.Compare({y, y}, "NE"));
  return e.Select({nan, e.Binary("add", x, y), result});
}

}  // namespace pjrt::hlo::stablehlo_internal
