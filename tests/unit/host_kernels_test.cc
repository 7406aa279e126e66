// The host compiler's kernels (control flow, indexing, sort, windows,
// convolution, random numbers) through the runtime, at the edges where a
// kernel could step outside its buffers: out-of-bounds indices, empty
// shapes, inconsistent comparators, padding beyond the operand. Part of the
// sanitized test binary, so ASan and TSan check every access.
#include <cstring>
#include <new>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "compiler/host/compiler.h"
#include "compiler/host/expression.h"
#include "compiler/host/kernel_control_flow.h"
#include "compiler/host/kernel_sort.h"
#include "gtest/gtest.h"
#include "hlo/parser.h"
#include "runtime/executable.h"
#include "tests/unit/hlo_run_test.h"

namespace pjrt::runtime {
namespace {

constexpr hlo::PrimitiveType F32 = hlo::PrimitiveType::kF32;
constexpr hlo::PrimitiveType S32 = hlo::PrimitiveType::kS32;

class HostKernelsTest : public testing::HloRunTest {
 protected:
  HostKernelsTest() : HloRunTest(/*devices=*/2) {}
};

// The trip count of the entry's while in a loop that counts with
// `compare` (a compare instruction's text on i and a limit), starting at
// `start`, stepping by `step`.
int64_t TripCountOf(const std::string& compare, const std::string& start,
                    const std::string& step = "1") {
  const std::string text = absl::StrCat(R"(
HloModule loop
body {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[3] get-tuple-element(p), index=1
  s = s32[] constant()",
                                        step, R"()
  i1 = s32[] add(s, i)
  ROOT t = (s32[], f32[3]) tuple(i1, x)
}
cond {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  square = s32[] multiply(i, i)
  ROOT c = pred[] )",
                                        compare, R"(
}
ENTRY e {
  x = f32[3] parameter(0)
  n = s32[] parameter(1)
  start = s32[] )",
                                        start, R"(
  init = (s32[], f32[3]) tuple(start, x)
  ROOT w = (s32[], f32[3]) while(init), condition=cond, body=body
})");
  auto module = hlo::ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return -2;
  return compiler::host::KnownTripCount(*(*module)->entry()->root());
}

TEST(KnownTripCount, CountsLoopsFromAConstantToAConstantByOne) {
  EXPECT_EQ(
      TripCountOf("compare(i, s32[] constant(8)), direction=LT", "constant(0)"),
      8);
  EXPECT_EQ(
      TripCountOf("compare(s32[] constant(8), i), direction=GT", "constant(3)"),
      5);
  EXPECT_EQ(TripCountOf("compare(i, s32[] constant(10)), direction=LE",
                        "constant(2)"),
            9);
  EXPECT_EQ(TripCountOf("compare(i, s32[] constant(4)), direction=LT",
                        "constant(-3)"),
            7);
  // A condition false from the start: none.
  EXPECT_EQ(
      TripCountOf("compare(i, s32[] constant(4)), direction=LT", "constant(9)"),
      0);
  EXPECT_EQ(
      TripCountOf("compare(i, s32[] constant(4)), direction=LT", "constant(4)"),
      0);
}

TEST(KnownTripCount, LeavesEveryOtherLoopToItsCondition) {
  // Not a constant start, limit or step of one; another comparison; and
  // i <= INT32_MAX, which never ends.
  EXPECT_EQ(
      TripCountOf("compare(i, s32[] constant(8)), direction=LT", "add(n, n)"),
      -1);
  EXPECT_EQ(TripCountOf("compare(i, square), direction=LT", "constant(0)"), -1);
  EXPECT_EQ(TripCountOf("compare(i, s32[] constant(8)), direction=LT",
                        "constant(0)", "2"),
            -1);
  EXPECT_EQ(
      TripCountOf("compare(i, s32[] constant(8)), direction=NE", "constant(0)"),
      -1);
  EXPECT_EQ(TripCountOf("compare(i, s32[] constant(2147483647)), direction=LE",
                        "constant(0)"),
            -1);
}

TEST_F(HostKernelsTest, WhileKeepsPassThroughStateInPlaceAndCountsTrips) {
  const char* text = R"(
HloModule loop
body {
  p = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[3] get-tuple-element(p), index=1
  k = f32[3] get-tuple-element(p), index=2
  i1 = s32[] add(i, s32[] constant(1))
  x1 = f32[3] add(x, k)
  ROOT t = (s32[], f32[3], f32[3]) tuple(i1, x1, k)
}
cond {
  p = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
ENTRY e {
  x = f32[3] parameter(0)
  init = (s32[], f32[3], f32[3]) tuple(s32[] constant(0), x, x)
  ROOT w = (s32[], f32[3], f32[3]) while(init), condition=cond, body=body
})";
  auto out = Run(text, {Put<float>(F32, {3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<int32_t>(*(*out)[0]), std::vector<int32_t>({5}));
  EXPECT_EQ(Read<float>(*(*out)[1]), std::vector<float>({6, 12, 18}));
  EXPECT_EQ(Read<float>(*(*out)[2]), std::vector<float>({1, 2, 3}));
}

// A scan's stacked output, a dynamic-update-slice of its own state leaf,
// is written where the state lies (no spare, no copy per trip); a leaf
// that keeps the old value beside it, and a body that reads the old value
// after the update, still see the old value.
// The first while loop among `program`'s steps; null if none.
const compiler::host::WhileKernel* FirstLoop(
    const compiler::host::HostProgram& program) {
  for (const compiler::host::Step& step : program.steps) {
    const auto* k = std::get_if<compiler::host::KernelStep>(&step);
    if (k == nullptr) continue;
    const auto* loop =
        dynamic_cast<const compiler::host::WhileKernel*>(k->kernel.get());
    if (loop != nullptr) return loop;
  }
  return nullptr;
}

TEST_F(HostKernelsTest, WhileReadsStateItPassesThroughWhereItLies) {
  // The weights ride along in the loop's state unchanged (as JAX's scans
  // carry what their bodies read): the loop reads them where the parameter
  // lies, with no copy into its state and no scratch for one.
  auto module = hlo::ParseHloModule(R"(
HloModule carry
body {
  p = (s32[], f32[256,256], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  w = f32[256,256] get-tuple-element(p), index=1
  acc = f32[256] get-tuple-element(p), index=2
  d = f32[256] dot(w, acc), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i1 = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], f32[256,256], f32[256]) tuple(i1, w, d)
}
cond {
  p = (s32[], f32[256,256], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
ENTRY e {
  w = f32[256,256] parameter(0)
  v = f32[256] parameter(1)
  init = (s32[], f32[256,256], f32[256]) tuple(s32[] constant(0), w, v)
  loop = (s32[], f32[256,256], f32[256]) while(init), condition=cond, body=body
  ROOT r = f32[256] get-tuple-element(loop), index=2
})");
  ASSERT_TRUE(module.ok()) << module.status();
  auto compiled = compiler::host::CompileForHost(**module);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const compiler::host::WhileKernel* loop = FirstLoop(**compiled);
  ASSERT_NE(loop, nullptr);
  const auto& slots = (*compiled)->slots;
  const compiler::host::BufferSlot& state = slots[loop->state[1]];
  ASSERT_EQ(state.kind, compiler::host::BufferSlot::Kind::kView);
  EXPECT_EQ(slots[state.index].kind,
            compiler::host::BufferSlot::Kind::kParameter);
  EXPECT_EQ(loop->init[1], state.index);
  // Scratch for the rest of the state and the dot, not for the weights.
  EXPECT_LT((*compiled)->scratch_bytes(), 256 * 256 * 4);
}

TEST_F(HostKernelsTest, WhileUpdatesStackedStateInPlace) {
  const std::string text = R"(
HloModule scan
body {
  p = (s32[], f32[6,2], f32[6,2], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ys = f32[6,2] get-tuple-element(p), index=1
  old = f32[6,2] get-tuple-element(p), index=2
  z = s32[] constant(0)
  fi = f32[] convert(i)
  row = f32[1,2] broadcast(fi), dimensions={}
  ys1 = f32[6,2] dynamic-update-slice(ys, row, i, z)
  zero = f32[] constant(0)
  total = f32[] reduce(old, zero), dimensions={0,1}, to_apply=add
  AFTER
  i1 = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], f32[6,2], f32[6,2], f32[]) tuple(i1, ys1, KEEP, total)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (s32[], f32[6,2], f32[6,2], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(6)), direction=LT
}
ENTRY e {
  x = f32[6,2] parameter(0)
  init = (s32[], f32[6,2], f32[6,2], f32[]) tuple(s32[] constant(0), x, x, f32[] constant(0))
  ROOT w = (s32[], f32[6,2], f32[6,2], f32[]) while(init), condition=cond, body=body
})";
  const std::vector<float> x(12, 10);
  for (const bool keep_old : {false, true}) {
    for (const bool read_after : {false, true}) {
      SCOPED_TRACE(
          absl::StrCat("keep_old ", keep_old, " read_after ", read_after));
      const std::string program = absl::StrReplaceAll(
          text, {{"AFTER", read_after ? "again = f32[6,2] add(ys, ys1)" : ""},
                 {"KEEP", keep_old ? "ys" : (read_after ? "again" : "old")}});
      auto module = hlo::ParseHloModule(program);
      ASSERT_TRUE(module.ok()) << module.status();
      auto compiled = compiler::host::CompileForHost(**module);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      const compiler::host::WhileKernel* loop = FirstLoop(**compiled);
      ASSERT_NE(loop, nullptr);
      EXPECT_EQ(loop->spare[1], -1) << "the stacked leaf has a spare";
      // Where nothing reads the old value afterwards, the body writes the
      // update straight into its result (the state); otherwise into a copy.
      bool into_result = false;
      for (const compiler::host::Step& step : loop->body->steps) {
        const auto* update =
            std::get_if<compiler::host::DynamicSliceStep>(&step);
        if (update != nullptr && update->update) {
          into_result = loop->body->slots[update->dst].kind ==
                        compiler::host::BufferSlot::Kind::kResult;
        }
      }
      EXPECT_EQ(into_result, !keep_old && !read_after);

      // The loop, trip by trip.
      std::vector<float> ys = x, other = x;
      float total = 0;
      for (int i = 0; i < 6; ++i) {
        std::vector<float> ys1 = ys;
        ys1[2 * i] = ys1[2 * i + 1] = static_cast<float>(i);
        total = std::accumulate(other.begin(), other.end(), 0.0f);
        if (keep_old) {
          other = ys;
        } else if (read_after) {
          for (size_t e = 0; e < other.size(); ++e) other[e] = ys[e] + ys1[e];
        }
        ys = ys1;
      }
      auto out = Run(program, {Put<float>(F32, {6, 2}, x)});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Read<float>(*(*out)[1]), ys);
      EXPECT_EQ(Read<float>(*(*out)[2]), other);
      EXPECT_EQ(Read<float>(*(*out)[3]), std::vector<float>({total}));
    }
  }
}

TEST_F(HostKernelsTest, ALoopThatNeverEndsStopsWhenItsResultsAreDeleted) {
  const char* forever = R"(
HloModule forever
body {
  p = s64[] parameter(0)
  ROOT n = s64[] add(p, s64[] constant(1))
}
cond {
  p = s64[] parameter(0)
  ROOT t = pred[] compare(p, s64[] constant(-1)), direction=NE
}
ENTRY e {
  ROOT w = s64[] while(s64[] constant(0)), condition=cond, body=body
})";
  auto looping = Run(forever, {}, 1);
  ASSERT_TRUE(looping.ok()) << looping.status();
  (*looping)[0]->Delete();
  // The next run on that device can start only once the loop stopped.
  auto after =
      Run("HloModule one\nENTRY e { ROOT c = s32[] constant(7) }", {}, 1);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Read<int32_t>(*(*after)[0]), std::vector<int32_t>({7}));
}

TEST_F(HostKernelsTest, GatherClampsEveryStartIndexIntoRange) {
  const char* text = R"(
HloModule g
ENTRY e {
  o = f32[4,3] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,2,3] gather(o, i), offset_dims={1,2}, collapsed_slice_dims={},
    start_index_map={0}, index_vector_dim=1, slice_sizes={2,3}
})";
  std::vector<float> table(12);
  std::iota(table.begin(), table.end(), 0.0f);
  auto out =
      Run(text, {Put<float>(F32, {4, 3}, table),
                 Put<int32_t>(S32, {5, 1}, {-100, 0, 2, 3, 2147483647})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Starts clamp to [0, 2]: rows (0,1), (0,1), (2,3), (2,3), (2,3).
  const std::vector<float> got = Read<float>(*(*out)[0]);
  const int starts[5] = {0, 0, 2, 2, 2};
  for (int p = 0; p < 5; ++p) {
    for (int k = 0; k < 6; ++k) EXPECT_EQ(got[p * 6 + k], starts[p] * 3 + k);
  }
}

TEST_F(HostKernelsTest, ScatterSkipsWindowsThatLeaveTheOperand) {
  const char* text = R"(
HloModule s
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT r = f32[] add(m, f32[] constant(1))
}
ENTRY e {
  o = f32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,2] parameter(2)
  ROOT s = f32[5] scatter(o, i, u), update_window_dims={1},
    inserted_window_dims={}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=f
})";
  auto out = Run(text, {Put<float>(F32, {5}, {1, 1, 1, 1, 1}),
                        Put<int32_t>(S32, {4, 1}, {-1, 4, 3, 0}),
                        Put<float>(F32, {4, 2}, {9, 9, 9, 9, 2, 3, 4, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Starts -1 and 4 put part of the 2-wide window outside: skipped.
  EXPECT_EQ(Read<float>(*(*out)[0]), std::vector<float>({5, 6, 1, 3, 4}));
}

TEST_F(HostKernelsTest, EmptyShapesRunEveryKernel) {
  const char* text = R"(
HloModule empty
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY e {
  o = f32[4,3] parameter(0)
  i = s32[0,1] parameter(1)
  z = f32[0] parameter(2)
  g = f32[0,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  s = f32[4,3] scatter(o, i, g), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=add
  t = f32[0] sort(z), dimensions={0}, to_apply=lt
  r = f32[0] reduce-window(z, f32[] constant(0)), window={size=2}, to_apply=add
  c = f32[0,3,3,2] convolution(f32[0,3,3,2] broadcast(f32[] constant(1)),
    f32[1,1,2,2] broadcast(f32[] constant(1))), window={size=1x1},
    dim_labels=b01f_01io->b01f
  ROOT out = (f32[0,3], f32[4,3], f32[0], f32[0], f32[0,3,3,2]) tuple(g, s, t, r, c)
})";
  std::vector<float> table(12, 2.0f);
  auto out =
      Run(text, {Put<float>(F32, {4, 3}, table), Put<int32_t>(S32, {0, 1}, {}),
                 Put<float>(F32, {0}, {})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<float>(*(*out)[1]), table);
}

TEST_F(HostKernelsTest, AnInconsistentComparatorStaysInBounds) {
  const char* text = R"(
HloModule s
odd {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=NE
}
ENTRY e {
  x = f32[1000] parameter(0)
  ROOT s = f32[1000] sort(x), dimensions={0}, to_apply=odd
})";
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>((i * 7919) % 1000);
  auto out = Run(text, {Put<float>(F32, {1000}, x)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> got = Read<float>(*(*out)[0]);
  std::sort(got.begin(), got.end());
  std::sort(x.begin(), x.end());
  EXPECT_EQ(got, x);  // a permutation, whatever the order
}

// JAX's comparator of float sort keys: each operand canonicalized (-0 to
// +0, any NaN to NaN), then compared by the total order.
constexpr char kJaxSort[] = R"(
HloModule s
jax {
  a = TYPE[] parameter(0)
  b = TYPE[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  zero = TYPE[] constant(0)
  az = pred[] compare(a, zero), direction=EQ
  a0 = TYPE[] select(az, zero, a)
  an = pred[] compare(a, a), direction=NE
  nan = TYPE[] constant(nan)
  a1 = TYPE[] select(an, nan, a0)
  bz = pred[] compare(b, zero), direction=EQ
  b0 = TYPE[] select(bz, zero, b)
  bn = pred[] compare(b, b), direction=NE
  b1 = TYPE[] select(bn, nan, b0)
  ROOT lt = pred[] compare(a1, b1), direction=DIR, type=TOTALORDER
}
ENTRY e {
  x = TYPE[2,500] parameter(0)
  i = s32[2,500] iota(), iota_dimension=1
  ROOT s = (TYPE[2,500], s32[2,500]) sort(x, i), dimensions={1}, to_apply=jax
})";

// The sort of `text`'s entry, as the host compiler builds it.
const compiler::host::SortKernel* SortOf(
    const hlo::Module& module,
    std::unique_ptr<compiler::host::HostProgram>* keep) {
  auto program = compiler::host::CompileForHost(module);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return nullptr;
  for (const compiler::host::Step& step : (*program)->steps) {
    const auto* k = std::get_if<compiler::host::KernelStep>(&step);
    if (k == nullptr) continue;
    if (const auto* sort =
            dynamic_cast<const compiler::host::SortKernel*>(k->kernel.get())) {
      *keep = *std::move(program);
      return sort;
    }
  }
  return nullptr;
}

// Sorted by canonical keys (radix or keyed), JAX's comparator gives what
// running the comparator itself gives (the generic merge sort, here
// forced by a comparator that ors in a constant false): ties of -0 and +0
// and of NaNs of any sign or payload in their original order, the
// operands' own values out.
TEST_F(HostKernelsTest, JaxFloatComparatorsSortByCanonicalKeys) {
  for (const char* type : {"f32", "bf16", "f64"}) {
    for (const char* dir : {"LT", "GT"}) {
      SCOPED_TRACE(absl::StrCat(type, " ", dir));
      const std::string text =
          absl::StrReplaceAll(kJaxSort, {{"TYPE", type}, {"DIR", dir}});
      const std::string generic = absl::StrReplaceAll(
          text, {{"ROOT lt = pred[] compare", "lt = pred[] compare"},
                 {"\n}\nENTRY",
                  "\n  f = pred[] constant(false)\n"
                  "  ROOT r = pred[] or(lt, f)\n}\nENTRY"}});
      auto module = hlo::ParseHloModule(text);
      ASSERT_TRUE(module.ok()) << module.status();
      auto generic_module = hlo::ParseHloModule(generic);
      ASSERT_TRUE(generic_module.ok()) << generic_module.status();
      std::unique_ptr<compiler::host::HostProgram> keep, keep_generic;
      const compiler::host::SortKernel* fast = SortOf(**module, &keep);
      ASSERT_NE(fast, nullptr);
      EXPECT_TRUE(fast->canonical);
      EXPECT_EQ(fast->order, std::string(dir) == "LT"
                                 ? compiler::host::KeyOrder::kTotalAscending
                                 : compiler::host::KeyOrder::kTotalDescending);
      const compiler::host::SortKernel* slow =
          SortOf(**generic_module, &keep_generic);
      ASSERT_NE(slow, nullptr);
      EXPECT_EQ(slow->order, compiler::host::KeyOrder::kGeneric);

      // Both zeros, NaNs of both signs and three payloads, infinities,
      // and many equal values.
      const hlo::PrimitiveType t =
          (*module)->entry()->parameters()[0]->shape().element_type();
      const int width = hlo::ByteWidth(t);
      std::vector<uint8_t> x(1000 * width);
      const auto put = [&](int at, double v, uint64_t bits, bool raw) {
        if (!raw) {
          if (width == 8) std::memcpy(&bits, &v, 8);
          if (width == 4) {
            const float f = static_cast<float>(v);
            uint32_t b;
            std::memcpy(&b, &f, 4);
            bits = b;
          }
          if (width == 2) bits = hlo::FloatToBfloat16(static_cast<float>(v));
        }
        std::memcpy(&x[at * width], &bits, width);
      };
      const int shift = 8 * width - 16;  // the top 16 bits of each pattern
      const uint64_t specials[] = {0x0000, 0x8000, 0x7fc0, 0xffc0, 0x7f81,
                                   0xff90, 0x7f80, 0xff80, 0x7fff};
      for (int i = 0; i < 1000; ++i) {
        if (i % 5 == 0) {
          uint64_t bits = specials[(i / 5) % 9];
          if (width == 8) {  // f64: the same classes in its own format
            const uint64_t f64[] = {0,
                                    0x8000000000000000,
                                    0x7ff8000000000000,
                                    0xfff8000000000000,
                                    0x7ff0000000000001,
                                    0xfff4000000000000,
                                    0x7ff0000000000000,
                                    0xfff0000000000000,
                                    0x7fffffffffffffff};
            bits = f64[(i / 5) % 9];
          } else {
            bits <<= shift;
          }
          put(i, 0, bits, true);
        } else {
          put(i, static_cast<double>((i * 7919) % 23) - 11, 0, false);
        }
      }
      std::vector<std::vector<uint8_t>> results;
      for (const std::string* program : {&text, &generic}) {
        auto out = Run(*program, {Put<uint8_t>(t, {2, 500}, x)});
        ASSERT_TRUE(out.ok()) << out.status();
        std::vector<uint8_t> values = Read<uint8_t>(*(*out)[0]);
        std::vector<uint8_t> order = Read<uint8_t>(*(*out)[1]);
        values.insert(values.end(), order.begin(), order.end());
        results.push_back(values);
      }
      EXPECT_EQ(results[0], results[1]);
      // Keys alone: still the operand's own values (-0 stays -0, each NaN
      // keeps its sign and payload), not the canonical keys'.
      const std::string alone = absl::StrReplaceAll(
          text,
          {{"  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n", ""},
           {absl::StrCat("  i = s32[2,500] iota(), iota_dimension=1\n  ROOT "
                         "s = (",
                         type, "[2,500], s32[2,500]) sort(x, i)"),
            absl::StrCat("  ROOT s = ", type, "[2,500] sort(x)")}});
      auto out = Run(alone, {Put<uint8_t>(t, {2, 500}, x)});
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<uint8_t> values = Read<uint8_t>(*(*out)[0]);
      ASSERT_EQ(values.size(), x.size());
      EXPECT_EQ(values, std::vector<uint8_t>(results[1].begin(),
                                             results[1].begin() + x.size()));
    }
  }
}

TEST_F(HostKernelsTest, WindowsWhollyInThePaddingKeepTheInitialValue) {
  const char* text = R"(
HloModule w
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  r = f32[9] reduce-window(x, f32[] constant(-1)), window={size=2 pad=4_3},
    to_apply=mx
  s = f32[3] select-and-scatter(x, f32[3] broadcast(f32[] constant(1)),
    f32[] constant(0)), window={size=2 pad=3_3 stride=3}, select=ge, scatter=add
  ROOT t = (f32[9], f32[3]) tuple(r, s)
})";
  auto out = Run(text, {Put<float>(F32, {3}, {5, 9, 7})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read<float>(*(*out)[0]),
            std::vector<float>({-1, -1, -1, 5, 9, 9, 7, -1, -1}));
  // Windows [-3,-2], [0,1] and [3,4]: only the middle one holds elements.
  EXPECT_EQ(Read<float>(*(*out)[1]), std::vector<float>({0, 1, 0}));
}

TEST_F(HostKernelsTest, ConvolutionWithDilationsGroupsAndNegativePadding) {
  const char* text = R"(
HloModule c
ENTRY e {
  x = f32[1,5,2] parameter(0)
  w = f32[2,1,4] parameter(1)
  ROOT c = f32[1,3,4] convolution(x, w), window={size=2 pad=-1_1 lhs_dilate=1 rhs_dilate=2},
    dim_labels=b0f_0io->b0f, feature_group_count=2
})";
  // Features 0 and 1 are separate groups, each with two output features.
  auto out = Run(
      text, {Put<float>(F32, {1, 5, 2}, {1, 10, 2, 20, 3, 30, 4, 40, 5, 50}),
             Put<float>(F32, {2, 1, 4}, {1, 0, 0, 1, 0, 1, 1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Output o reads input positions o + 2t + 1 (taps t = 0, 1) of its
  // group's feature.
  std::vector<float> got = Read<float>(*(*out)[0]);
  ASSERT_EQ(got.size(), 12u);
  const float xs[2][5] = {{1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}};
  const float w[2][4] = {{1, 0, 0, 1}, {0, 1, 1, 0}};
  for (int o = 0; o < 3; ++o) {
    for (int f = 0; f < 4; ++f) {
      const int g = f / 2;
      float want = 0;
      for (int t = 0; t < 2; ++t) {
        const int p = o + 2 * t + 1;  // pad_low -1 crops one element
        if (p >= 0 && p < 5) want += xs[g][p] * w[t][f];
      }
      EXPECT_EQ(got[o * 4 + f], want) << o << "," << f;
    }
  }
}

TEST_F(HostKernelsTest, ThreeFryMatchesItsKnownAnswer) {
  const char* text = R"(
HloModule r
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[2]) rng-bit-generator(s), algorithm=rng_three_fry
})";
  const uint64_t key = 0x0370734413198a2eull, counter = 0x85a308d3243f6a88ull;
  auto out =
      Run(text, {Put<uint64_t>(hlo::PrimitiveType::kU64, {2}, {key, counter})});
  ASSERT_TRUE(out.ok()) << out.status();
  // u32[2]: one block split in two.
  EXPECT_EQ(Read<uint32_t>(*(*out)[1]),
            std::vector<uint32_t>({0xc4923a9cu, 0x483df7a0u}));
  EXPECT_EQ(Read<uint64_t>(*(*out)[0]),
            std::vector<uint64_t>({key, counter + 1}));
}

// --- the block scratch's splats ----------------------------------------------
//
// A thread's BlockScratch outlives the programs it evaluates, and keeps an
// expression's splats (its constants, broadcast over a block) from one block
// to the next. A daemon frees and compiles programs all the time: the next
// expression may be built where a freed one was.

using compiler::host::BlockScratch;
using compiler::host::Expression;

// x + c, as a fused loop's expression.
void BuildAddConstant(Expression& expr, double c) {
  compiler::host::ExprNode add;
  add.op = compiler::host::ExprOp::kAdd;
  add.type = F32;
  add.operands[0] = expr.AddInput(0, F32);
  add.operands[1] = expr.AddSplatFromDouble(F32, c);
  expr.AddOutput(expr.Add(add));
  expr.Finalize();
}

std::vector<float> EvaluateOneBlock(const Expression& expr,
                                    BlockScratch& scratch,
                                    std::vector<float> x) {
  const void* in[] = {x.data()};
  const void* out = nullptr;
  compiler::host::EvaluateBlock(expr, in, static_cast<int64_t>(x.size()),
                                {&out, 1}, scratch);
  const float* values = static_cast<const float*>(out);
  return std::vector<float>(values, values + x.size());
}

TEST(BlockScratch, AnExpressionBuiltWhereAFreedOneWasGetsItsOwnConstants) {
  BlockScratch scratch;
  // The same storage for both expressions.
  alignas(Expression) unsigned char storage[sizeof(Expression)];
  Expression* expr = new (storage) Expression;
  BuildAddConstant(*expr, 2);
  EXPECT_EQ(EvaluateOneBlock(*expr, scratch, {1, 2, 3, 4}),
            (std::vector<float>{3, 4, 5, 6}));
  expr->~Expression();
  expr = new (storage) Expression;
  BuildAddConstant(*expr, 1);
  EXPECT_EQ(EvaluateOneBlock(*expr, scratch, {1, 2, 3, 4}),
            (std::vector<float>{2, 3, 4, 5}));
  expr->~Expression();
}

TEST(BlockScratch, EveryChangeAndEveryCopyIsANewExpression) {
  Expression a;
  uint64_t before = a.id();
  a.AddInput(0, F32);
  EXPECT_NE(a.id(), before);
  before = a.id();
  a.AddOutput(0);
  EXPECT_NE(a.id(), before);
  before = a.id();
  a.Finalize();
  EXPECT_NE(a.id(), before);
  Expression b = a;
  EXPECT_NE(b.id(), a.id());
  Expression c = std::move(b);
  EXPECT_NE(c.id(), a.id());
}

// The daemon's case end to end: programs that differ only in a constant,
// each compiled, run once and freed in turn on the same device thread.
TEST_F(HostKernelsTest, ProgramsFreedAndRebuiltKeepTheirOwnConstants) {
  auto x = Put(F32, {4}, std::vector<float>{1, 2, 3, 4});
  for (int i = 0; i < 20; ++i) {
    const int c = 1 + i % 2;
    auto out = Run(absl::StrCat(R"(
HloModule add_constant
ENTRY main {
  x = f32[4] parameter(0)
  c = f32[] constant()",
                                c, R"()
  cs = f32[4] broadcast(c), dimensions={}
  ROOT y = f32[4] add(x, cs)
}
)"),
                   {x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Read<float>(*(*out)[0]),
              (std::vector<float>{1.0f + c, 2.0f + c, 3.0f + c, 4.0f + c}))
        << "run " << i << " adds " << c;
  }
}

}  // namespace
}  // namespace pjrt::runtime
