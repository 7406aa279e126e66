// Sorts and top-k through CUB's radix sorts (cub_sort.h): which sorts go
// to CUB and with what problem, and, run by the emulator (CUB's sort as
// CubSortReference, the key and gather kernels as generated), that they
// compute the host backend's results bit for bit: XLA's total order (NaNs
// of both signs, -0 before +0), descending orders, stability among equal
// keys, rows along any dimension.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/cub_sort.h"
#include "gtest/gtest.h"
#include "tests/unit/cuda_emulator.h"

namespace pjrt::compiler::cuda {
namespace {

using emulation::CompareWithHost;

struct SortCase {
  std::string name;
  std::string hlo;
  // The CUB sorts expected, in program order.
  std::vector<CubSortProblem> sorts;
};

// A sort of a parameter of `key`[`dims`] along `dimension` (with a
// parameter of `payload`[`dims`] when not empty) by compare(a, b) in
// `direction` (LT or GT), by XLA's total order for floats. Float keys get
// ties (floor of 4x), NaNs of both signs and negative zeros.
std::string SortProgram(const std::string& key, const std::string& payload,
                        const std::string& dims, int dimension,
                        const std::string& direction, bool jax = false) {
  const bool is_float = key[0] == 'f' || key[0] == 'b';
  const std::string shape = absl::StrCat(key, "[", dims, "]");
  std::string text = absl::StrFormat(
      "HloModule m\ncmp {\n  a = %s[] parameter(0)\n  b = %s[] "
      "parameter(1)\n",
      key, key);
  if (!payload.empty()) {
    absl::StrAppendFormat(&text,
                          "  c = %s[] parameter(2)\n  d = %s[] parameter(3)\n",
                          payload, payload);
  }
  if (jax) {  // JAX's: -0 as +0 and every NaN as NaN, then the total order
    absl::StrAppendFormat(
        &text,
        "  zero = %s[] constant(0)\n  nan = %s[] constant(nan)\n"
        "  az = pred[] compare(a, zero), direction=EQ\n"
        "  a0 = %s[] select(az, zero, a)\n"
        "  an = pred[] compare(a, a), direction=NE\n"
        "  a1 = %s[] select(an, nan, a0)\n"
        "  bz = pred[] compare(b, zero), direction=EQ\n"
        "  b0 = %s[] select(bz, zero, b)\n"
        "  bn = pred[] compare(b, b), direction=NE\n"
        "  b1 = %s[] select(bn, nan, b0)\n"
        "  ROOT r = pred[] compare(a1, b1), direction=%s, type=TOTALORDER\n"
        "}\nENTRY e {\n  p = %s parameter(0)\n",
        key, key, key, key, key, key, direction, shape);
  } else {
    absl::StrAppendFormat(&text,
                          "  ROOT r = pred[] compare(a, b), direction=%s%s\n}\n"
                          "ENTRY e {\n  p = %s parameter(0)\n",
                          direction, is_float ? ", type=TOTALORDER" : "",
                          shape);
  }
  std::string keys = "p";
  if (is_float) {
    absl::StrAppendFormat(
        &text,
        "  four = %s[] constant(4)\n  fours = %s broadcast(four), "
        "dimensions={}\n"
        "  m = %s multiply(p, fours)\n  f = %s floor(m)\n"
        "  nan = %s[] constant(nan)\n  nans = %s broadcast(nan), "
        "dimensions={}\n"
        "  mnan = %s[] constant(-nan)\n  mnans = %s broadcast(mnan), "
        "dimensions={}\n"
        "  mz = %s[] constant(-0)\n  mzs = %s broadcast(mz), dimensions={}\n"
        "  lo = %s[] constant(-10)\n  los = %s broadcast(lo), dimensions={}\n"
        "  hi = %s[] constant(10)\n  his = %s broadcast(hi), dimensions={}\n"
        "  z = %s[] constant(0)\n  zs = %s broadcast(z), dimensions={}\n"
        "  below = pred[%s] compare(f, los), direction=LT\n"
        "  above = pred[%s] compare(f, his), direction=GT\n"
        "  zero = pred[%s] compare(f, zs), direction=EQ\n"
        "  k0 = %s select(below, mnans, f)\n  k1 = %s select(above, nans, "
        "k0)\n"
        "  k2 = %s select(zero, mzs, k1)\n",
        key, shape, shape, shape, key, shape, key, shape, key, shape, key,
        shape, key, shape, key, shape, dims, dims, dims, shape, shape, shape);
    keys = "k2";
  }
  if (payload.empty()) {
    absl::StrAppendFormat(&text,
                          "  ROOT s = %s sort(%s), dimensions={%d}, "
                          "to_apply=cmp\n}\n",
                          shape, keys, dimension);
  } else {
    const std::string pshape = absl::StrCat(payload, "[", dims, "]");
    absl::StrAppendFormat(&text,
                          "  q = %s parameter(1)\n"
                          "  ROOT s = (%s, %s) sort(%s, q), dimensions={%d}, "
                          "to_apply=cmp\n}\n",
                          pshape, shape, pshape, keys, dimension);
  }
  return text;
}

CubSortProblem Problem(int key_bytes, int bits, int64_t rows, int64_t n,
                       bool pairs) {
  CubSortProblem p;
  p.key_bytes = key_bytes;
  p.bits = bits;
  p.rows = rows;
  p.n = n;
  p.pairs = pairs;
  return p;
}

std::vector<SortCase> Cases() {
  return {
      // An unsigned key ascending along its last dimension, one row (or
      // 64-bit keys as segments): CUB reads it as it lies and writes the
      // result, keys alone.
      {"u32_keys_alone_ascending",
       SortProgram("u32", "", "4097", 0, "LT"),
       {Problem(4, 32, 1, 4097, false)}},
      {"u64_segments_keys_alone",
       SortProgram("u64", "", "3,129", 1, "LT"),
       {Problem(8, 64, 3, 129, false)}},
      // Several rows: one sort of 10-bit keys, the row above the key's 8
      // bits; positions go along (ties show stability).
      {"u8_rows_with_a_payload",
       SortProgram("u8", "s32", "3,500", 1, "LT"),
       {Problem(2, 10, 1, 1500, true)}},
      // Descending, signed and float keys, and rows along another
      // dimension: keys written by a kernel, positions along with other
      // operands, else the sorted keys decoded into the output; 64-bit
      // keys of several rows as segments.
      {"u16_descending",
       SortProgram("u16", "", "2,300", 1, "GT"),
       {Problem(4, 17, 1, 600, false)}},
      {"s8_along_the_first_dimension",
       SortProgram("s8", "f32", "50,3", 0, "LT"),
       {Problem(2, 10, 1, 150, true)}},
      {"s4_keys",
       SortProgram("s4", "", "64", 0, "LT"),
       {Problem(1, 8, 1, 64, false)}},
      {"s32_ascending",
       SortProgram("s32", "u8", "2,1000", 1, "LT"),
       {Problem(8, 33, 1, 2000, true)}},
      {"s64_descending",
       SortProgram("s64", "u8", "2,100", 1, "GT"),
       {Problem(8, 64, 2, 100, true)}},
      {"u32_along_a_middle_dimension",
       SortProgram("u32", "", "2,77,3", 1, "LT"),
       {Problem(8, 35, 1, 462, false)}},
      {"pred_with_a_payload",
       SortProgram("pred", "s32", "200", 0, "LT"),
       {Problem(1, 8, 1, 200, true)}},
      {"f32_total_order",
       SortProgram("f32", "s32", "5,37", 1, "LT"),
       {Problem(8, 35, 1, 185, true)}},
      {"f32_total_order_descending",
       SortProgram("f32", "", "301", 0, "GT"),
       {Problem(4, 32, 1, 301, false)}},
      {"f64_total_order",
       SortProgram("f64", "s32", "257", 0, "LT"),
       {Problem(8, 64, 1, 257, true)}},
      {"f16_total_order",
       SortProgram("f16", "", "130", 0, "LT"),
       {Problem(2, 16, 1, 130, false)}},
      {"bf16_total_order_descending",
       SortProgram("bf16", "", "3,70", 1, "GT"),
       {Problem(4, 18, 1, 210, false)}},
      {"f8e4m3fn_keys",
       SortProgram("f8e4m3fn", "", "100", 0, "LT"),
       {Problem(1, 8, 1, 100, false)}},
      // JAX's comparator of floats: canonical keys (both zeros and every
      // NaN alike, in their original order).
      {"jax_f32_with_a_payload",
       SortProgram("f32", "s32", "3,200", 1, "LT", true),
       {Problem(8, 34, 1, 600, true)}},
      {"jax_f16_keys_alone",
       SortProgram("f16", "", "300", 0, "LT", true),
       {Problem(2, 16, 1, 300, true)}},
      {"jax_f64_descending_segments",
       SortProgram("f64", "s32", "2,100", 1, "GT", true),
       {Problem(8, 64, 2, 100, true)}},
      {"jax_f8e4m3fn_rows",
       SortProgram("f8e4m3fn", "", "2,64", 1, "LT", true),
       {Problem(2, 9, 1, 128, true)}},
      // compare(b, a), GT: ascending.
      {"u32_swapped_operands",
       R"(
HloModule m
cmp { a = u32[] parameter(0)
  b = u32[] parameter(1)
  ROOT r = pred[] compare(b, a), direction=GT }
ENTRY e {
  p = u32[1000] parameter(0)
  ROOT s = u32[1000] sort(p), dimensions={0}, to_apply=cmp
})",
       {Problem(4, 32, 1, 1000, false)}},
      // Top-k, largest and smallest: equal values by index.
      {"top_k_largest_and_smallest",
       R"(
HloModule m
ENTRY e {
  a = f32[4,60] parameter(0)
  f = f32[4,60] floor(a)
  big = (f32[4,7], s32[4,7]) topk(f), k=7, largest=true
  b = bf16[4,60] convert(f)
  small = (bf16[4,5], s32[4,5]) topk(b), k=5, largest=false
  b0 = f32[4,7] get-tuple-element(big), index=0
  b1 = s32[4,7] get-tuple-element(big), index=1
  s0 = bf16[4,5] get-tuple-element(small), index=0
  s1 = s32[4,5] get-tuple-element(small), index=1
  ROOT r = (f32[4,7], s32[4,7], bf16[4,5], s32[4,5]) tuple(b0, b1, s0, s1)
})",
       {Problem(8, 34, 1, 240, true), Problem(4, 18, 1, 240, true)}},
  };
}

void PrintTo(const SortCase& c, std::ostream* os) { *os << c.name; }

class CubSorts : public ::testing::TestWithParam<SortCase> {};

TEST_P(CubSorts, GoThroughCubAndMatchTheHostBitForBit) {
  const SortCase& c = GetParam();
  std::unique_ptr<hlo::Module> module = emulation::Parse(c.hlo);
  ASSERT_NE(module, nullptr) << c.hlo;
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::vector<CubSortProblem> sorts;
  ForEachLaunch(compiled->generated.launches, [&](const Launch& l) {
    if (l.kind == Launch::Kind::kSort) sorts.push_back(l.sort);
  });
  ASSERT_EQ(sorts.size(), c.sorts.size());
  for (size_t i = 0; i < sorts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sorts[i].key_bytes, c.sorts[i].key_bytes);
    EXPECT_EQ(sorts[i].bits, c.sorts[i].bits);
    EXPECT_EQ(sorts[i].rows, c.sorts[i].rows);
    EXPECT_EQ(sorts[i].n, c.sorts[i].n);
    EXPECT_EQ(sorts[i].pairs, c.sorts[i].pairs);
  }
  int ran = 0;
  CompareWithHost(*module, *compiled, absl::StrCat("cub_", c.name),
                  /*rtol=*/0, "", true, nullptr, &ran);
  EXPECT_EQ(ran, static_cast<int>(c.sorts.size()));
}

INSTANTIATE_TEST_SUITE_P(Programs, CubSorts, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<SortCase>& info) {
                           return info.param.name;
                         });

// A comparator that is not a plain comparison of the first operand keeps
// the merge sort: CUB is not given it.
TEST(CubSorts, OtherComparatorsKeepTheMergeSort) {
  std::unique_ptr<hlo::Module> module = emulation::Parse(R"(
HloModule m
cmp { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(c, d), direction=LT }
ENTRY e {
  k = f32[300] parameter(0)
  v = s32[300] parameter(1)
  ROOT s = (f32[300], s32[300]) sort(k, v), dimensions={0}, to_apply=cmp
})");
  ASSERT_NE(module, nullptr);
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  int sorts = 0, merges = 0;
  ForEachLaunch(compiled->generated.launches, [&](const Launch& l) {
    sorts += l.kind == Launch::Kind::kSort;
    merges += l.kernel.find("sort_merge") != std::string::npos;
  });
  EXPECT_EQ(sorts, 0);
  EXPECT_EQ(merges, 9);  // runs of 1, 2, ..., 256
  int ran = -1;
  CompareWithHost(*module, *compiled, "cub_none", 0, "", true, nullptr, &ran);
  EXPECT_EQ(ran, 0);
}

// Scatters whose combine neither atomics nor claims can do go through a
// stable sort of their targets, then a thread per target applies its
// updates in the host's order: bit for bit the host's results, whatever
// order the threads come in.
TEST(CubSorts, ScattersOfAnyRegionSortTheirTargets) {
  const struct {
    const char* name;
    const char* hlo;
  } kCases[] = {
      {"f32_multiply", R"(
HloModule m
mul { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] multiply(a, b) }
ENTRY e {
  o = f32[50] parameter(0)
  i = s32[1000,1] parameter(1)
  u = f32[1000] parameter(2)
  ROOT s = f32[50] scatter(o, i, u), update_window_dims={},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=mul
})"},
      // Windows of 4 that overlap in part; some do not fit (skipped).
      {"overlapping_windows_subtract", R"(
HloModule m
sub { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] subtract(a, b) }
ENTRY e {
  o = f32[64] parameter(0)
  i = s32[100,1] parameter(1)
  u = f32[100,4] parameter(2)
  ROOT s = f32[64] scatter(o, i, u), update_window_dims={1},
    inserted_window_dims={}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=sub
})"},
      {"variadic", R"(
HloModule m
both { a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  s0 = f32[] add(a0, b0)
  s1 = s32[] subtract(a1, b1)
  ROOT r = (f32[], s32[]) tuple(s0, s1) }
ENTRY e {
  o0 = f32[30] parameter(0)
  o1 = s32[30] parameter(1)
  i = s32[200,1] parameter(2)
  u0 = f32[200] parameter(3)
  u1 = s32[200] parameter(4)
  ROOT s = (f32[30], s32[30]) scatter(o0, o1, i, u0, u1),
    update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=both
})"},
      {"bf16_rows_multiply", R"(
HloModule m
mul { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] multiply(a, b) }
ENTRY e {
  o = bf16[20,8] parameter(0)
  i = s32[300,1] parameter(1)
  u = bf16[300,8] parameter(2)
  ROOT s = bf16[20,8] scatter(o, i, u), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=mul
})"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<hlo::Module> module = emulation::Parse(c.hlo);
    ASSERT_NE(module, nullptr);
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    int sorts = 0, sorted = 0;
    ForEachLaunch(compiled->generated.launches, [&](const Launch& l) {
      sorts += l.kind == Launch::Kind::kSort;
      sorted += l.kernel.find("pj_scatter_sorted") == 0;
    });
    EXPECT_EQ(sorts, 1);
    EXPECT_EQ(sorted, 1);
    int ran = 0;
    CompareWithHost(*module, *compiled, absl::StrCat("scatter_", c.name), 0, "",
                    true, nullptr, &ran);
    EXPECT_EQ(ran, 1);
    CompareWithHost(*module, *compiled,
                    absl::StrCat("scatter_", c.name, "_reversed"), 0,
                    "pj_scatter_sorted");
  }
}

}  // namespace
}  // namespace pjrt::compiler::cuda
