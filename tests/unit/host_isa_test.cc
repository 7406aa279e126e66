// The host kernels of each x86-64 level (host_kernels.h): the modules of
// the levels this CPU has load from the build tree, and their products and
// element-wise kernels agree with the built-in x86-64-v2 ones and with a
// plain reference. (`make test` also runs the op suites under each level.)
#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/host/expression.h"
#include "compiler/host/host_kernels.h"
#include "gtest/gtest.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

bool NoModules() { return !HostKernelModulesBuilt(); }

// The tables to compare: the built-in one, then every module this CPU can
// run.
std::vector<const HostKernelTable*> Levels() {
  std::vector<const HostKernelTable*> levels = {&BuiltinHostKernels()};
  if (NoModules()) return levels;
  for (HostIsa isa : {HostIsa::kV3, HostIsa::kV4}) {
    if (CpuHostIsa() < isa) continue;
    std::string why;
    const HostKernelTable* table = LoadHostKernelModule(isa, &why);
    EXPECT_NE(table, nullptr) << why;
    if (table != nullptr) levels.push_back(table);
  }
  return levels;
}

TEST(HostIsa, TheCpusLevelRunsUnlessAnotherIsAsked) {
  if (NoModules()) GTEST_SKIP() << "a native or sanitizer build has no modules";
  // make test-host-levels runs this under PJRT_HOST_ISA=x86-64-v2 and -v3.
  const char* asked = std::getenv("PJRT_HOST_ISA");
  HostIsa want = CpuHostIsa();
  for (HostIsa isa : {HostIsa::kV2, HostIsa::kV3, HostIsa::kV4}) {
    if (asked != nullptr && asked == std::string(HostIsaName(isa))) {
      want = std::min(want, isa);
    }
  }
  const std::string description = HostKernelsDescription();
  EXPECT_STREQ(HostKernels().isa, HostIsaName(want)) << description;
  EXPECT_EQ(description.rfind(HostIsaName(want), 0), 0u) << description;
}

TEST(HostIsa, EveryModuleTheCpuCanRunLoadsAndNamesItsLevel) {
  if (NoModules()) GTEST_SKIP() << "a native or sanitizer build has no modules";
  for (HostIsa isa : {HostIsa::kV3, HostIsa::kV4}) {
    if (CpuHostIsa() < isa) continue;
    std::string why;
    const HostKernelTable* table = LoadHostKernelModule(isa, &why);
    ASSERT_NE(table, nullptr) << why;
    EXPECT_STREQ(table->isa, HostIsaName(isa));
    EXPECT_EQ(table->abi, kHostKernelAbi);
  }
}

TEST(HostIsa, AModuleMissingFromItsFolderIsNamedInTheReason) {
  if (NoModules()) GTEST_SKIP() << "a native or sanitizer build has no modules";
  const char* before = std::getenv("PJRT_HOST_MODULE_DIR");
  const std::string saved = before == nullptr ? "" : before;
  setenv("PJRT_HOST_MODULE_DIR", "/nonexistent-pjrtd-modules", 1);
  std::string why;
  EXPECT_EQ(LoadHostKernelModule(HostIsa::kV3, &why), nullptr);
  EXPECT_NE(why.find("libpjrt_host_x86-64-v3.so not in "
                     "/nonexistent-pjrtd-modules"),
            std::string::npos)
      << why;
  if (before == nullptr) {
    unsetenv("PJRT_HOST_MODULE_DIR");
  } else {
    setenv("PJRT_HOST_MODULE_DIR", saved.c_str(), 1);
  }
}

template <typename T>
T RandomValue(std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-8, 8);
  if constexpr (std::is_same_v<T, std::complex<float>> ||
                std::is_same_v<T, std::complex<double>>) {
    using R = typename T::value_type;
    return T(R(d(rng)) / 4, R(d(rng)) / 4);
  } else if constexpr (std::is_floating_point_v<T>) {
    return T(d(rng)) / 4;
  } else {
    return T(d(rng));
  }
}

double Magnitude(double v) { return std::abs(v); }
template <typename R>
double Magnitude(std::complex<R> v) {
  return std::abs(std::complex<double>(v));
}

// op(A) (m x k) times op(B) (k x n), column-major with padded leading
// dimensions, each transpose combination, through every level, against a
// plain triple loop. Quarter-integer inputs make every sum exact in f32.
template <typename T>
void CheckProducts(PrimitiveType type) {
  std::mt19937 rng(7);
  const int64_t m = 37, n = 19, k = 53;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 5, ldc = m + 2;
      std::vector<T> a(lda * (ta ? m : k)), b(ldb * (tb ? k : n));
      for (T& v : a) v = RandomValue<T>(rng);
      for (T& v : b) v = RandomValue<T>(rng);
      std::vector<T> expected(ldc * n, T(0));
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          T sum(0);
          for (int64_t p = 0; p < k; ++p) {
            sum += (ta ? a[p + i * lda] : a[i + p * lda]) *
                   (tb ? b[j + p * ldb] : b[p + j * ldb]);
          }
          expected[i + j * ldc] = sum;
        }
      }
      for (const HostKernelTable* level : Levels()) {
        std::vector<T> c(ldc * n, T(0));
        GemmArgs g;
        g.type = type;
        g.m = m, g.n = n, g.k = k;
        g.a = a.data(), g.lda = lda, g.a_transposed = ta;
        g.b = b.data(), g.ldb = ldb, g.b_transposed = tb;
        g.c = c.data(), g.ldc = ldc;
        level->gemm(g);
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t i = 0; i < m; ++i) {
            ASSERT_EQ(Magnitude(c[i + j * ldc] - expected[i + j * ldc]), 0)
                << level->isa << " " << hlo::PrimitiveTypeName(type)
                << " ta=" << ta << " tb=" << tb << " at (" << i << ", " << j
                << ")";
          }
        }
      }
    }
  }
}

TEST(HostIsa, EveryLevelsProductsMatchAPlainLoop) {
  CheckProducts<float>(PrimitiveType::kF32);
  CheckProducts<double>(PrimitiveType::kF64);
  CheckProducts<std::complex<float>>(PrimitiveType::kC64);
  CheckProducts<std::complex<double>>(PrimitiveType::kC128);
  CheckProducts<int64_t>(PrimitiveType::kS64);
}

TEST(HostIsa, AnEmptyInnerDimensionZeroesTheResultAtEveryLevel) {
  for (const HostKernelTable* level : Levels()) {
    std::vector<float> c(6, 5.0f);
    GemmArgs g;
    g.m = 2, g.n = 3, g.k = 0;
    g.lda = 2, g.ldb = 1, g.c = c.data(), g.ldc = 2;
    level->gemm(g);
    EXPECT_EQ(c, std::vector<float>(6, 0.0f)) << level->isa;
  }
}

// One node over one or two inputs.
Expression OneOp(ExprOp op, PrimitiveType in, PrimitiveType out, int inputs) {
  Expression expr;
  ExprNode node;
  node.op = op;
  node.type = out;
  for (int i = 0; i < inputs; ++i) node.operands[i] = expr.AddInput(i, in);
  expr.AddOutput(expr.Add(node));
  expr.Finalize();
  return expr;
}

template <typename Out, typename In>
std::vector<Out> Evaluate(const HostKernelTable& level, const Expression& expr,
                          const std::vector<In>& x, const std::vector<In>& y) {
  BlockScratch scratch;
  const void* in[] = {x.data(), y.data()};
  const void* out = nullptr;
  level.evaluate_block(expr, absl::MakeConstSpan(in),
                       static_cast<int64_t>(x.size()), {&out, 1}, scratch);
  const Out* values = static_cast<const Out*>(out);
  return std::vector<Out>(values, values + x.size());
}

// Integer arithmetic, compares and converts are exact, and the
// transcendental functions within a few ulps, at every level, on a block
// with the edge cases in it.
TEST(HostIsa, EveryLevelsElementwiseKernelsAgree) {
  std::vector<float> x, y;
  const float specials[] = {0.0f,      -0.0f, 1.0f,   -1.5f,
                            1e-40f,    3e38f, -3e38f, INFINITY,
                            -INFINITY, NAN,   88.0f,  -100.0f};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-50, 50);
  for (int i = 0; i < 1000; ++i) {
    x.push_back(i < 12 ? specials[i] : d(rng));
    y.push_back(i < 12 ? specials[11 - i] : d(rng));
  }
  std::vector<int32_t> ix, iy;
  for (int i = 0; i < 1000; ++i) {
    ix.push_back(static_cast<int32_t>(rng()));
    iy.push_back(i % 7 == 0    ? 0
                 : i % 11 == 0 ? -1
                               : static_cast<int32_t>(rng() % 40));
  }
  ix[0] = INT32_MIN;
  iy[0] = -1;
  const PrimitiveType F32 = PrimitiveType::kF32, S32 = PrimitiveType::kS32;
  const std::vector<const HostKernelTable*> levels = Levels();
  const HostKernelTable& base = *levels.front();
  for (ExprOp op :
       {ExprOp::kDivide, ExprOp::kRemainder, ExprOp::kShiftLeft,
        ExprOp::kShiftRightArithmetic, ExprOp::kMultiply, ExprOp::kMaximum}) {
    const Expression expr = OneOp(op, S32, S32, 2);
    const auto expected = Evaluate<int32_t>(base, expr, ix, iy);
    for (const HostKernelTable* level : levels) {
      EXPECT_EQ(Evaluate<int32_t>(*level, expr, ix, iy), expected)
          << level->isa << " op " << static_cast<int>(op);
    }
  }
  {
    const Expression expr = OneOp(ExprOp::kConvert, F32, S32, 1);
    const auto expected = Evaluate<int32_t>(base, expr, x, y);
    EXPECT_EQ(expected[7], INT32_MAX);  // inf saturates
    EXPECT_EQ(expected[9], 0);          // NaN is 0
    for (const HostKernelTable* level : levels) {
      EXPECT_EQ(Evaluate<int32_t>(*level, expr, x, y), expected) << level->isa;
    }
  }
  for (ExprOp op : {ExprOp::kAdd, ExprOp::kMaximum, ExprOp::kMinimum,
                    ExprOp::kExp, ExprOp::kLog, ExprOp::kTanh,
                    ExprOp::kLogistic, ExprOp::kSqrt, ExprOp::kRoundEven}) {
    const bool binary =
        op == ExprOp::kAdd || op == ExprOp::kMaximum || op == ExprOp::kMinimum;
    const Expression expr = OneOp(op, F32, F32, binary ? 2 : 1);
    std::vector<float> reference(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double a = x[i], b = y[i];
      switch (op) {
        case ExprOp::kAdd:
          reference[i] = float(a + b);
          break;
        case ExprOp::kMaximum:
          reference[i] = a != a || b != b ? NAN : float(std::max(a, b));
          break;
        case ExprOp::kMinimum:
          reference[i] = a != a || b != b ? NAN : float(std::min(a, b));
          break;
        case ExprOp::kExp:
          reference[i] = float(std::exp(a));
          break;
        case ExprOp::kLog:
          reference[i] = float(std::log(a));
          break;
        case ExprOp::kTanh:
          reference[i] = float(std::tanh(a));
          break;
        case ExprOp::kLogistic:
          reference[i] = float(1 / (1 + std::exp(-a)));
          break;
        case ExprOp::kSqrt:
          reference[i] = float(std::sqrt(a));
          break;
        default:
          reference[i] = float(std::nearbyint(a));
          break;
      }
    }
    for (const HostKernelTable* level : levels) {
      const auto got = Evaluate<float>(*level, expr, x, y);
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = reference[i];
        const float tolerance =
            4 * std::abs(std::nextafter(want, INFINITY) - want);
        const bool same =
            (std::isnan(want) && std::isnan(got[i])) || want == got[i] ||
            std::abs(got[i] - want) <= tolerance ||
            (std::abs(want) < 1.2e-38f && std::abs(got[i]) < 1.2e-38f);
        EXPECT_TRUE(same) << level->isa << " op " << static_cast<int>(op)
                          << " on " << x[i] << ", " << y[i] << ": got "
                          << got[i] << ", want " << want;
      }
    }
  }
}

// negate flips the sign bit and abs clears it, +0 and -0 included, at
// every level (Eigen's AVX negate computes 0 - x, which keeps +0).
TEST(HostIsa, EveryLevelNegatesAndTakesAbsOfTheSignBitOnly) {
  std::vector<float> x;
  for (int i = 0; i < 1000; ++i) {
    const float specials[] = {0.0f, -0.0f, 1.5f, -2.0f, INFINITY, -INFINITY};
    x.push_back(specials[i % 6]);
  }
  const PrimitiveType F32 = PrimitiveType::kF32;
  for (const HostKernelTable* level : Levels()) {
    for (ExprOp op : {ExprOp::kNegate, ExprOp::kAbs}) {
      const auto got = Evaluate<float>(*level, OneOp(op, F32, F32, 1), x, x);
      for (size_t i = 0; i < x.size(); ++i) {
        const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
        const uint32_t want =
            op == ExprOp::kNegate ? bits ^ 0x80000000u : bits & 0x7FFFFFFFu;
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), want)
            << level->isa
            << (op == ExprOp::kNegate ? " negate of " : " abs of ") << x[i]
            << " (element " << i << ")";
      }
    }
  }
}

// Functions that are odd, or round toward zero, keep the sign of a zero
// (IEEE and XLA: f(-0) = -0), at every level and in f32 and f64, where
// vectorised versions computing 0 - x or copying magnitudes could lose it.
template <typename T>
void CheckSignedZeros(PrimitiveType type) {
  std::vector<T> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? T(-0.0) : T(0.0);
  for (const HostKernelTable* level : Levels()) {
    for (ExprOp op :
         {ExprOp::kNegate, ExprOp::kSign, ExprOp::kExpm1, ExprOp::kLog1p,
          ExprOp::kSqrt, ExprOp::kCbrt, ExprOp::kTanh, ExprOp::kSin,
          ExprOp::kTan, ExprOp::kErf, ExprOp::kFloor, ExprOp::kCeil,
          ExprOp::kRoundAfz, ExprOp::kRoundEven}) {
      const auto got = Evaluate<T>(*level, OneOp(op, type, type, 1), x, x);
      for (size_t i = 0; i < x.size(); ++i) {
        const bool negative = std::signbit(x[i]) != (op == ExprOp::kNegate);
        ASSERT_TRUE(got[i] == 0 && std::signbit(got[i]) == negative)
            << level->isa << " op " << static_cast<int>(op) << " of "
            << (std::signbit(x[i]) ? "-0" : "+0") << " gave " << got[i]
            << " (element " << i << ", " << hlo::PrimitiveTypeName(type) << ")";
      }
    }
  }
}

TEST(HostIsa, EveryLevelKeepsTheSignOfZeroThroughOddFunctions) {
  CheckSignedZeros<float>(PrimitiveType::kF32);
  CheckSignedZeros<double>(PrimitiveType::kF64);
}

// f16 and bf16 conversions are bit-exact at every level (NaN payloads too).
TEST(HostIsa, EveryLevelConvertsHalfTypesBitExactly) {
  std::vector<uint16_t> bits(65536);
  for (int i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
  for (PrimitiveType type : {PrimitiveType::kF16, PrimitiveType::kBf16}) {
    for (const HostKernelTable* level : Levels()) {
      std::vector<float> wide(bits.size());
      std::vector<uint16_t> back(bits.size());
      level->storage_to_compute(type, bits.data(), wide.data(), 65536);
      level->compute_to_storage(type, wide.data(), back.data(), 65536);
      EXPECT_EQ(back, bits)
          << level->isa << " " << hlo::PrimitiveTypeName(type);
    }
  }
}

}  // namespace
}  // namespace pjrt::compiler::host
