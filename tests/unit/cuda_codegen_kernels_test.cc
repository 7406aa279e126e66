// What the CUDA backend generates for particular programs: fusion, tiles,
// index widths, collectives through temporaries, library launches, and its
// errors. Kernels that run are run on the CPU (cuda_emulator.h).
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/codegen.h"
#include "compiler/cuda/nvrtc.h"
#include "gtest/gtest.h"
#include "tests/unit/cuda_emulator.h"

namespace pjrt::compiler::cuda {
namespace {

using emulation::Emulator;
using emulation::Parse;
using hlo::PrimitiveType;

TEST(CudaCodegen, FusesAChainIntoOneKernel) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[1024] parameter(0)
  b = f32[1024] exponential(a)
  c = f32[1024] tanh(b)
  d = f32[1024] multiply(c, a)
  ROOT e = f32[1024] add(d, a)
})");
  ASSERT_NE(module, nullptr);
  auto generated = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(generated.ok()) << generated.status();
  ASSERT_EQ(generated->generated.launches.size(), 1u);
  const Launch& launch = generated->generated.launches[0];
  // It names the instruction whose value it computes.
  EXPECT_EQ(launch.origin,
            "loop over f32[1024] (exp, tanh, multiply, add) for %e (line 8)");
  // A value with two users that compute with it is materialized, as on the
  // host: two kernels.
  std::unique_ptr<hlo::Module> shared = Parse(R"(
HloModule m
ENTRY e {
  a = f32[1024] parameter(0)
  b = f32[1024] exponential(a)
  c = f32[1024] tanh(b)
  ROOT e = f32[1024] add(c, b)
})");
  ASSERT_NE(shared, nullptr);
  auto two = CompileForCuda(*shared, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->generated.launches.size(), 2u);
  EXPECT_EQ(launch.blocks, 4);
  EXPECT_EQ(launch.threads, 256);
  // Contiguous inputs are read at the loop index, with 32-bit indices.
  EXPECT_NE(generated->generated.source.find("in0[i]"), std::string::npos);
  EXPECT_NE(generated->generated.source.find("for (int i ="),
            std::string::npos);
  // ptxas reported the kernel's registers.
  ASSERT_EQ(generated->cubin.resources.size(), 2u);  // and pj_set_ids
  EXPECT_GT(generated->cubin.resources[0].registers, 0);
}

// An all-gather or reduce-scatter along a minor dimension goes through a
// temporary in NCCL's [group, piece] layout and a copy kernel; the copy puts
// each participant's piece where XLA's semantics say.
TEST(CudaCodegen, MinorDimensionCollectivesMovePiecesThroughATemporary) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,12] parameter(1)
  g = f32[2,12] all-gather(a), dimensions={1}, replica_groups={}
  r = f32[2,3] reduce-scatter(b), dimensions={1}, replica_groups={}, to_apply=add
  ROOT t = (f32[2,12], f32[2,3]) tuple(g, r)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->generated.temporary_offsets.size(), 2u);
  int collectives = 0;
  for (const Launch& l : c->generated.launches)
    collectives += l.kind == Launch::Kind::kCollective;
  EXPECT_EQ(collectives, 2);
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;
  ASSERT_TRUE(emulator.Build("minor_collectives"));
  std::vector<float> a(6), b(24), g(24, -1), r(6, -1);
  for (int i = 0; i < 6; ++i) a[i] = static_cast<float>(10 * i);
  for (int i = 0; i < 24; ++i) b[i] = static_cast<float>(100 * i);
  ASSERT_TRUE(emulator.Run({a.data(), b.data()}, {g.data(), r.data()}));
  for (int i = 0; i < 2; ++i) {
    for (int p = 0; p < 4; ++p) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(g[i * 12 + p * 3 + j], a[i * 3 + j] + p)
            << i << " " << p << " " << j;
      }
    }
    for (int j = 0; j < 3; ++j) {
      // Participant 0 gets piece 0 (columns 0-2) summed over 4 members.
      EXPECT_EQ(r[i * 3 + j], 4 * b[i * 12 + j] + 6) << i << " " << j;
    }
  }
}

// An all-to-all along a dimension with larger ones before it cuts pieces
// that are not contiguous: they go through temporaries by strided copies
// (how many pieces is known only at run time). Along the major dimension,
// or one with only 1s before it, NCCL sends the operand's own blocks.
TEST(CudaCodegen, AllToAllsAlongAnyDimensionSendEachPieceToItsMember) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
ENTRY e {
  a = f32[2,8,3] parameter(0)
  b = f32[3,8] parameter(1)
  c = f32[8,3] parameter(2)
  d = f32[1,8] parameter(3)
  x = f32[2,8,3] all-to-all(a), dimensions={1}, replica_groups={}
  y = f32[3,8] all-to-all(b), dimensions={1}, replica_groups={}
  z = f32[8,3] all-to-all(c), dimensions={0}, replica_groups={}
  w = f32[1,8] all-to-all(d), dimensions={1}, replica_groups={}
  ROOT t = (f32[2,8,3], f32[3,8], f32[8,3], f32[1,8]) tuple(x, y, z, w)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<size_t> slots;
  for (const Launch& l : c->generated.launches) {
    if (l.kind == Launch::Kind::kCollective) slots.push_back(l.slots.size());
  }
  // In, out, and two temporaries where the pieces are strided.
  EXPECT_EQ(slots, (std::vector<size_t>{4, 4, 2, 2}));
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;  // member p holds the operand + p
  ASSERT_TRUE(emulator.Build("all_to_all"));
  const struct {
    std::vector<int64_t> dims;
    int64_t dimension;
  } kCases[] = {{{2, 8, 3}, 1}, {{3, 8}, 1}, {{8, 3}, 0}, {{1, 8}, 1}};
  std::vector<std::vector<float>> in, out;
  for (const auto& k : kCases) {
    int64_t n = 1;
    for (int64_t d : k.dims) n *= d;
    in.emplace_back(n);
    out.emplace_back(n, -1.0f);
    for (int64_t i = 0; i < n; ++i) in.back()[i] = static_cast<float>(10 * i);
  }
  ASSERT_TRUE(emulator.Run(
      {in[0].data(), in[1].data(), in[2].data(), in[3].data()},
      {out[0].data(), out[1].data(), out[2].data(), out[3].data()}));
  for (size_t k = 0; k < 4; ++k) {
    // As participant 0: piece p of the result is piece 0 of member p's
    // operand, which is this operand + p.
    const std::vector<int64_t>& dims = kCases[k].dims;
    const int64_t d = kCases[k].dimension;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
      if (i < d) outer *= dims[i];
      if (i > d) inner *= dims[i];
    }
    const int64_t piece = dims[d] / 4;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < dims[d]; ++j) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t p = j / piece;
          const float want = in[k][(o * dims[d] + j % piece) * inner + i] +
                             static_cast<float>(p);
          EXPECT_EQ(out[k][(o * dims[d] + j) * inner + i], want)
              << "case " << k << " at " << o << "," << j << "," << i;
        }
      }
    }
  }
}

// A reduce-scatter with and or or of integers reduces their bit planes,
// laid out after each element so that every member's piece stays whole.
TEST(CudaCodegen, BitwiseReduceScattersOfIntegersGoThroughBitPlanes) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
andd { a = s16[] parameter(0)
  b = s16[] parameter(1)
  ROOT r = s16[] and(a, b) }
ENTRY e {
  x = s16[8] parameter(0)
  ROOT r = s16[2] reduce-scatter(x), dimensions={0}, replica_groups={}, to_apply=andd
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  int collectives = 0;
  for (const Launch& l : c->generated.launches) {
    if (l.kind != Launch::Kind::kCollective) continue;
    ++collectives;
    EXPECT_EQ(l.collective.types[0], PrimitiveType::kU8);
    EXPECT_EQ(l.collective.input_dims, (std::vector<int64_t>{8, 16}));
    EXPECT_EQ(l.collective.output_dims, (std::vector<int64_t>{2, 16}));
  }
  EXPECT_EQ(collectives, 1);
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;  // member p: the planes rotated by p
  ASSERT_TRUE(emulator.Build("bitwise_reduce_scatter"));
  std::vector<int16_t> x = {-1, 0x7FFF, 0x1234, -2, 0x0F0F, 3, -32768, 0x5555};
  std::vector<int16_t> r(2, 7);
  ASSERT_TRUE(emulator.Run({x.data()}, {r.data()}));
  const auto plane = [&](int64_t q) {
    return (static_cast<uint16_t>(x[q / 16]) >> (q % 16)) & 1;
  };
  for (int i = 0; i < 2; ++i) {
    uint32_t want = 0;
    for (int b = 0; b < 16; ++b) {
      uint32_t all = 1;
      for (int p = 0; p < 4; ++p) all &= plane((i * 16 + b + p) % 128);
      want |= all << b;
    }
    EXPECT_EQ(static_cast<uint16_t>(r[i]), want) << i;
  }
}

// NCCL has no and or or: an all-reduce of integers with them reduces
// every bit as a byte (u8 minimum and maximum) and packs the bits back.
TEST(CudaCodegen, BitwiseAllReducesOfIntegersGoThroughBitPlanes) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
orr { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] or(a, b) }
andd { a = u16[] parameter(0)
  b = u16[] parameter(1)
  ROOT r = u16[] and(a, b) }
ENTRY e {
  x = s32[5] parameter(0)
  y = u16[3] parameter(1)
  o = s32[5] all-reduce(x), replica_groups={}, to_apply=orr
  a = u16[3] all-reduce(y), replica_groups={}, to_apply=andd
  ROOT r = (s32[5], u16[3]) tuple(o, a)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  int collectives = 0;
  for (const Launch& l : c->generated.launches) {
    if (l.kind != Launch::Kind::kCollective) continue;
    ++collectives;
    EXPECT_EQ(l.collective.types[0], PrimitiveType::kU8);
  }
  EXPECT_EQ(collectives, 2);
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;  // member p: the planes rotated by p
  ASSERT_TRUE(emulator.Build("bitwise_all_reduce"));
  std::vector<int32_t> x = {0x12345678, -1, 0, 0x0F0F0F0F, int32_t(0x80000001)};
  std::vector<uint16_t> y = {0xFFFF, 0xF0F0, 0x1234};
  std::vector<int32_t> o(5, 7);
  std::vector<uint16_t> a(3, 7);
  ASSERT_TRUE(emulator.Run({x.data(), y.data()}, {o.data(), a.data()}));
  // Plane q of member p is plane (q + p) % planes of x.
  const auto plane = [](const auto& v, int bits, int64_t q) {
    return (static_cast<uint64_t>(v[q / bits]) >> (q % bits)) & 1;
  };
  for (int i = 0; i < 5; ++i) {
    uint32_t want = 0;
    for (int b = 0; b < 32; ++b) {
      uint64_t any = 0;
      for (int p = 0; p < 4; ++p) any |= plane(x, 32, (i * 32 + b + p) % 160);
      want |= static_cast<uint32_t>(any) << b;
    }
    EXPECT_EQ(static_cast<uint32_t>(o[i]), want) << i;
  }
  for (int i = 0; i < 3; ++i) {
    uint32_t want = 0;
    for (int b = 0; b < 16; ++b) {
      uint64_t all = 1;
      for (int p = 0; p < 4; ++p) all &= plane(y, 16, (i * 16 + b + p) % 48);
      want |= static_cast<uint32_t>(all) << b;
    }
    EXPECT_EQ(a[i], want) << i;
  }
}

TEST(CudaCodegen, SixteenBitIntegersAreReducedAsThirtyTwoBitOnes) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
adds {
  x = s16[] parameter(0)
  y = s16[] parameter(1)
  ROOT s = s16[] add(x, y)
}
addu {
  x = u16[] parameter(0)
  y = u16[] parameter(1)
  ROOT s = u16[] add(x, y)
}
ENTRY e {
  a = s16[6] parameter(0)
  b = u16[2,8] parameter(1)
  r = s16[6] all-reduce(a), replica_groups={}, to_apply=adds
  s = u16[2,2] reduce-scatter(b), dimensions={1}, replica_groups={}, to_apply=addu
  ROOT t = (s16[6], u16[2,2]) tuple(r, s)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  for (const Launch& l : c->generated.launches) {
    if (l.kind != Launch::Kind::kCollective) continue;
    for (PrimitiveType t : l.collective.types) {
      EXPECT_TRUE(t == PrimitiveType::kS32 || t == PrimitiveType::kU32)
          << l.origin;
    }
  }
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;
  ASSERT_TRUE(emulator.Build("sixteen_bit_collectives"));
  std::vector<int16_t> a = {32767, -32768, -1, 0, 100, -100}, r(6, 7);
  std::vector<uint16_t> b(16), s(4, 7);
  for (int i = 0; i < 16; ++i) b[i] = static_cast<uint16_t>(65535 - 1000 * i);
  ASSERT_TRUE(emulator.Run({a.data(), b.data()}, {r.data(), s.data()}));
  for (int i = 0; i < 6; ++i) {
    // Members hold a + p: the sum is 4a + 6, wrapped to 16 bits.
    EXPECT_EQ(r[i], static_cast<int16_t>(4 * a[i] + 6)) << i;
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(s[i * 2 + j], static_cast<uint16_t>(4 * b[i * 8 + j] + 6))
          << i << " " << j;
    }
  }
}

// NCCL has no f8: a reduction of f8 is widened to f32 and rounded back
// once; what only moves (all-gather, all-to-all, collective-permute) moves
// as bytes of any type, f8 and complex included.
TEST(CudaCodegen, F8ReductionsAreWidenedAndMovesTakeAnyType) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
add { x = f8e4m3fn[] parameter(0)
  y = f8e4m3fn[] parameter(1)
  ROOT s = f8e4m3fn[] add(x, y) }
ENTRY e {
  a = f8e4m3fn[6] parameter(0)
  r = f8e4m3fn[6] all-reduce(a), replica_groups={}, to_apply=add
  ROOT t = f8e4m3fn[6] copy(r)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  for (const Launch& l : c->generated.launches) {
    if (l.kind == Launch::Kind::kCollective) {
      EXPECT_EQ(l.collective.types[0], PrimitiveType::kF32);
    }
  }
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;  // member p holds the operand + p
  ASSERT_TRUE(emulator.Build("f8_all_reduce"));
  const float values[] = {1, 0.5f, -2, 3, 104, -0.0f};
  std::vector<uint8_t> a, r(6, 0);
  for (float v : values) a.push_back(hlo::Float8E4M3FN(v).bits());
  ASSERT_TRUE(emulator.Run({a.data()}, {r.data()}));
  for (int i = 0; i < 6; ++i) {
    // 4x + 6, rounded to f8 once: 104 gives 422, which rounds to 416.
    EXPECT_EQ(r[i], hlo::Float8E4M3FN(4 * values[i] + 6).bits()) << values[i];
  }
  EXPECT_EQ(static_cast<float>(hlo::Float8E4M3FN::FromBits(r[4])), 416.0f);

  std::unique_ptr<hlo::Module> moves = Parse(R"(
HloModule m, replica_count=4
ENTRY e {
  a = c64[2,4] parameter(0)
  b = f8e5m2[3] parameter(1)
  c = c128[4] parameter(2)
  g = c64[2,16] all-gather(a), dimensions={1}, replica_groups={}
  x = f8e5m2[12] all-gather(b), dimensions={0}, replica_groups={}
  y = c64[2,4] all-to-all(a), dimensions={1}, replica_groups={}
  z = c128[4] collective-permute(c), source_target_pairs={{0,1},{1,0}}
  ROOT t = (c64[2,16], f8e5m2[12], c64[2,4], c128[4]) tuple(g, x, y, z)
})");
  ASSERT_NE(moves, nullptr);
  auto m = CompileForCuda(*moves, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(m.ok()) << m.status();
  int collectives = 0;
  for (const Launch& l : m->generated.launches)
    collectives += l.kind == Launch::Kind::kCollective;
  EXPECT_EQ(collectives, 4);
}

// NCCL has no complex numbers: a sum of them is reduced as the sums of
// their parts, in place (a reduce-scatter's pieces gain a trailing
// dimension of 2, and stay whole).
TEST(CudaCodegen, ComplexSumsAcrossMembersReduceTheirParts) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=4
add { x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT s = c64[] add(x, y) }
add2 { x = c128[] parameter(0)
  y = c128[] parameter(1)
  ROOT s = c128[] add(x, y) }
ENTRY e {
  a = c64[3] parameter(0)
  b = c128[2] parameter(1)
  c = c64[2,8] parameter(2)
  r = c64[3] all-reduce(a), replica_groups={}, to_apply=add
  q = c128[2] all-reduce(b), replica_groups={}, to_apply=add2
  s = c64[2,2] reduce-scatter(c), dimensions={1}, replica_groups={},
      to_apply=add
  ROOT t = (c64[3], c128[2], c64[2,2]) tuple(r, q, s)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<PrimitiveType> types;
  for (const Launch& l : c->generated.launches) {
    if (l.kind != Launch::Kind::kCollective) continue;
    types.push_back(l.collective.types[0]);
    if (l.collective.kind == host::CollectiveStep::Kind::kReduceScatter) {
      // The pieces, gathered into [member, piece...] blocks, as reals.
      EXPECT_EQ(l.collective.input_dims, (std::vector<int64_t>{4, 2, 2, 2}));
      EXPECT_EQ(l.collective.output_dims, (std::vector<int64_t>{2, 2, 2}));
    } else {
      EXPECT_EQ(l.collective.operand_elements[0],
                l.collective.types[0] == PrimitiveType::kF32 ? 6 : 4);
    }
  }
  EXPECT_EQ(types, (std::vector<PrimitiveType>{PrimitiveType::kF32,
                                               PrimitiveType::kF64,
                                               PrimitiveType::kF32}));
  Emulator emulator(*c);
  emulator.fake_collectives_ = true;  // member p holds the operand + p
  ASSERT_TRUE(emulator.Build("complex_sums"));
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  std::vector<C64> a = {{1, -2}, {0.5f, 3}, {-4, 0}};
  std::vector<C128> b = {{1e-3, 7}, {-2.25, -0.5}};
  std::vector<C64> x(16);
  for (int i = 0; i < 16; ++i) x[i] = {static_cast<float>(i), -0.5f * i};
  std::vector<C64> r(3), s(4);
  std::vector<C128> q(2);
  ASSERT_TRUE(emulator.Run({a.data(), b.data(), x.data()},
                           {r.data(), q.data(), s.data()}));
  // Each part: 4 members' values, member p's plus p: 4v + 6.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r[i], C64(4 * a[i].real() + 6, 4 * a[i].imag() + 6)) << i;
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(q[i], C128(4 * b[i].real() + 6, 4 * b[i].imag() + 6)) << i;
  }
  // Member 0's piece: columns 0 and 1 of each row.
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 2; ++col) {
      const C64 v = x[row * 8 + col];
      EXPECT_EQ(s[row * 2 + col], C64(4 * v.real() + 6, 4 * v.imag() + 6))
          << row << "," << col;
    }
  }
}

// Scatters whose combine is associative and commutative run a thread per
// update element and meet at one element through atomics; their results do
// not depend on the order in which the threads come (integers bit for bit,
// float sums within rounding). Other combines (here an f64 maximum, whose
// choice between +0 and -0 depends on the order) do not use them.
TEST(CudaCodegen, AtomicScattersGiveTheHostsResultsInAnyOrder) {
  std::string regions, params, scatters, types, names;
  const struct {
    const char* type;
    const char* op;
  } kCombines[] = {{"s8", "add"},   {"u16", "maximum"},  {"s32", "minimum"},
                   {"u32", "xor"},  {"s64", "multiply"}, {"u64", "or"},
                   {"pred", "and"}, {"pred", "or"},      {"s4", "add"},
                   {"f16", "add"},  {"f32", "add"},      {"f64", "add"},
                   {"c64", "add"},  {"c128", "add"},     {"f64", "maximum"}};
  int n = 0;
  for (const auto& c : kCombines) {
    absl::StrAppendFormat(&regions,
                          "r%d { a = %s[] parameter(0)\n"
                          "  b = %s[] parameter(1)\n"
                          "  ROOT r = %s[] %s(b, a) }\n",
                          n, c.type, c.type, c.type, c.op);
    absl::StrAppendFormat(&params,
                          "  o%d = %s[4,3] parameter(%d)\n"
                          "  u%d = %s[48,3] parameter(%d)\n",
                          n, c.type, 2 * n, n, c.type, 2 * n + 1);
    // Rows 0-3 of the operand, each 9 or 10 times, and row 4, which does
    // not fit (its windows are skipped).
    absl::StrAppendFormat(&scatters,
                          "  s%d = %s[4,3] scatter(o%d, ix, u%d), "
                          "update_window_dims={1}, inserted_window_dims={0}, "
                          "scatter_dims_to_operand_dims={0}, "
                          "index_vector_dim=1, to_apply=r%d\n",
                          n, c.type, n, n, n);
    absl::StrAppend(&types, n ? ", " : "", c.type, "[4,3]");
    absl::StrAppend(&names, n ? ", " : "", "s", n);
    ++n;
  }
  const std::string hlo = absl::StrCat(
      "HloModule m\n", regions, "ENTRY e {\n", params,
      "  io = s32[48] iota(), iota_dimension=0\n"
      "  five = s32[] constant(5)\n"
      "  fives = s32[48] broadcast(five), dimensions={}\n"
      "  rem = s32[48] remainder(io, fives)\n"
      "  ix = s32[48,1] reshape(rem)\n",
      scatters, "  ROOT t = (", types, ") tuple(", names, ")\n}\n");
  std::unique_ptr<hlo::Module> module = Parse(hlo);
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  int atomic = 0, ordered = 0;
  for (const Launch& l : c->generated.launches) {
    if (l.kernel.find("pj_scatter_atomic") == 0) {
      ++atomic;
      EXPECT_EQ(l.threads, 256);  // a thread per update element
    } else if (l.kernel.find("pj_scatter_sorted") == 0) {
      ++ordered;  // sorted by target, then in order
    }
  }
  EXPECT_EQ(atomic, n - 1);
  EXPECT_EQ(ordered, 1);
  // Native atomics where the hardware has the operation, compare-and-swap
  // loops for the rest.
  for (const char* native :
       {"atomicMin((int*)", "atomicXor((unsigned*)",
        "atomicOr((unsigned long long*)", "atomicAdd(&out0[t], upd0[s])",
        "atomicAdd(&out0[t].im, upd0[s].im)"}) {
    EXPECT_NE(c->generated.source.find(native), std::string::npos) << native;
  }
  EXPECT_NE(c->generated.source.find("pj_atomic_apply(&out0[t]"),
            std::string::npos);
  // In the host's order, and with every atomic kernel's threads reversed.
  emulation::CompareWithHost(*module, *c, "atomic_scatter", 1e-2);
  emulation::CompareWithHost(*module, *c, "atomic_scatter_reversed", 1e-2,
                             "pj_scatter_atomic");
}

// Scatters that pick one of the values meeting at an element (a replace,
// a float maximum or minimum) claim it with a 64-bit atomic maximum of
// their rank and order: the host's bits whatever the order the threads come
// in, ties between +0 and -0 and NaNs included.
TEST(CudaCodegen, ClaimScattersGiveTheHostsBitsInAnyOrder) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
replace { a = s8[] parameter(0)
  ROOT b = s8[] parameter(1) }
replace2 { a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  ROOT r = (f32[], s32[]) tuple(b, bi) }
later_max { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b) }
earlier_max { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(b, a) }
later_min { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] minimum(a, b) }
max64 { a = f64[] parameter(0)
  b = f64[] parameter(1)
  ROOT r = f64[] maximum(a, b) }
ENTRY e {
  o8 = s8[4,3] parameter(0)
  u8 = s8[48,3] parameter(1)
  of = f32[4,3] parameter(2)
  uf = f32[48,3] parameter(3)
  oi = s32[4,3] parameter(4)
  ui = s32[48,3] parameter(5)
  ob = bf16[4,3] parameter(6)
  ub = bf16[48,3] parameter(7)
  od = f64[4,3] parameter(8)
  ud = f64[48,3] parameter(9)
  io = s32[48] iota(), iota_dimension=0
  five = s32[] constant(5)
  fives = s32[48] broadcast(five), dimensions={}
  rem = s32[48] remainder(io, fives)
  ix = s32[48,1] reshape(rem)
  r8 = s8[4,3] scatter(o8, ix, u8), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=replace
  r2 = (f32[4,3], s32[4,3]) scatter(of, oi, ix, uf, ui),
      update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=replace2
  rf = f32[4,3] get-tuple-element(r2), index=0
  ri = s32[4,3] get-tuple-element(r2), index=1
  zf = f32[] constant(0)
  zfs = f32[4,3] broadcast(zf), dimensions={}
  zfu = f32[48,3] broadcast(zf), dimensions={}
  u2 = s32[48,3] iota(), iota_dimension=0
  twenty = s32[] constant(20)
  twentys = s32[48,3] broadcast(twenty), dimensions={}
  few = pred[48,3] compare(u2, twentys), direction=LT
  thirteen = s32[] constant(13)
  thirteens = s32[48,3] broadcast(thirteen), dimensions={}
  at13 = pred[48,3] compare(u2, thirteens), direction=EQ
  ofa = f32[4,3] abs(of)
  ofz = f32[4,3] multiply(of, zfs)
  ufa = f32[48,3] abs(uf)
  ufn = f32[48,3] negate(ufa)
  ufz = f32[48,3] multiply(uf, zfu)
  neg = f32[48,3] select(few, ufn, ufz)
  sq = f32[48,3] sqrt(ufn)
  nan = f32[48,3] select(at13, sq, neg)
  nego = f32[4,3] negate(ofa)
  lm = f32[4,3] scatter(ofz, ix, neg), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=later_max
  em = f32[4,3] scatter(ofz, ix, neg), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=earlier_max
  nm = f32[4,3] scatter(nego, ix, nan), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=later_max
  pos = f32[48,3] negate(neg)
  pb = bf16[48,3] convert(pos)
  obz = bf16[4,3] convert(ofz)
  lb = bf16[4,3] scatter(obz, ix, pb), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=later_min
  md = f64[4,3] scatter(od, ix, ud), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=max64
  ROOT t = (s8[4,3], f32[4,3], s32[4,3], f32[4,3], f32[4,3], f32[4,3],
            bf16[4,3], f64[4,3]) tuple(r8, rf, ri, lm, em, nm, lb, md)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  int claims = 0, ordered = 0;
  for (const Launch& l : c->generated.launches) {
    if (l.kernel.find("pj_scatter_claim_apply") == 0) {
      ++claims;
    } else if (l.kernel.find("pj_scatter_sorted") == 0) {
      ++ordered;
    }
  }
  EXPECT_EQ(claims, 6);   // s8 and variadic replace, the f32 and bf16 ones
  EXPECT_EQ(ordered, 1);  // the f64 maximum keeps the host's order
  emulation::CompareWithHost(*module, *c, "claim_scatter", 0);
  emulation::CompareWithHost(*module, *c, "claim_scatter_reversed", 0,
                             "pj_scatter_claim");
}

// A gather whose slice rows are whole words moves a word per thread (an
// embedding lookup of bf16 rows: 16 bytes, 8 elements), the host's bytes;
// one whose start can move a row by a part of a word moves elements.
TEST(CudaCodegen, GathersOfWholeRowsMoveWords) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
ENTRY e {
  table = bf16[50,64] parameter(0)
  ids = s32[7,1] parameter(1)
  floats = f32[9,6] parameter(2)
  cols = s32[4,2] parameter(3)
  rows = bf16[7,64] gather(table, ids), offset_dims={1},
      collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1,
      slice_sizes={1,64}
  pairs = f32[4,2] gather(floats, cols), offset_dims={1},
      collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1,
      slice_sizes={1,2}
  ROOT r = (bf16[7,64], f32[4,2]) tuple(rows, pairs)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> origins;
  for (const Launch& l : c->generated.launches) {
    if (l.kernel.find("pj_gather") == 0) origins.push_back(l.origin);
  }
  ASSERT_EQ(origins.size(), 2u);
  EXPECT_NE(origins[0].find("7 slices of 8 16-byte words (8 elements each)"),
            std::string::npos)
      << origins[0];
  // The second's column start moves a row by one element.
  EXPECT_NE(origins[1].find("4 slices of 2 4-byte elements"), std::string::npos)
      << origins[1];
  // Random ids: most are clamped into range, as on the host.
  emulation::CompareWithHost(*module, *c, "gather_words", 0);
}

TEST(CudaCodegen, ATransposedReadUsesTiles) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[512,256] parameter(0)
  ROOT t = f32[256,512] transpose(a), dimensions={1,0}
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->generated.launches.size(), 1u);
  const Launch& l = c->generated.launches[0];
  EXPECT_NE(l.kernel.find("loop_tiled"), std::string::npos) << l.kernel;
  EXPECT_EQ(l.threads, 32);
  EXPECT_EQ(l.threads_y, 8);
  EXPECT_EQ(l.blocks, 8 * 16);  // 32x32 tiles of 256x512
  EXPECT_NE(c->generated.source.find("__shared__ float tile[32][33]"),
            std::string::npos);
}

TEST(CudaCodegen, AWholeArraySumUsesEverySm) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y) }
ENTRY e {
  a = f32[16777216] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[] reduce(a, z), dimensions={0}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->generated.launches.size(), 2u);
  EXPECT_EQ(c->generated.launches[0].blocks, 1024);  // chunks of 16384
  EXPECT_NE(c->generated.launches[0].kernel.find("reduce_chunks"),
            std::string::npos);
  EXPECT_EQ(c->generated.launches[1].blocks, 1);
}

TEST(CudaCodegen, HugeArraysUse64BitIndices) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[3000000000] parameter(0)
  ROOT b = f32[3000000000] negate(a)
})");
  ASSERT_NE(module, nullptr);
  auto generated = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_NE(generated->generated.source.find("for (long long i ="),
            std::string::npos);
  EXPECT_EQ(generated->generated.launches[0].blocks, 65536);
}

TEST(CudaCodegen, AnFftIsACufftLaunchAndAnInverseIsScaled) {
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[2,8] parameter(0)
  c = c64[2,5] parameter(1)
  r = c64[2,5] fft(a), fft_type=RFFT, fft_length={8}
  i = f32[2,8] fft(c), fft_type=IRFFT, fft_length={8}
  ROOT o = (c64[2,5], f32[2,8]) tuple(r, i)
})");
  ASSERT_NE(module, nullptr);
  auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> kinds;
  for (const Launch& l : c->generated.launches) {
    kinds.push_back(l.kind == Launch::Kind::kFft
                        ? "fft"
                        : l.kernel.substr(0, l.kernel.rfind('_')));
  }
  // RFFT: one transform. IRFFT: a copy of its input (cuFFT overwrites
  // it), the transform, then the 1/n scaling.
  EXPECT_EQ(absl::StrJoin(kinds, " "), "fft pj_copy fft pj_fft_scale");
  EXPECT_EQ(c->generated.launches[0].fft.type, host::FftType::kRfft);
  EXPECT_EQ(c->generated.launches[0].fft.batch, 2);
  EXPECT_EQ(c->generated.launches[2].fft.lengths, std::vector<int64_t>{8});
  // The IRFFT transforms the copy, not its operand.
  EXPECT_EQ(c->generated.launches[2].slots[1],
            c->generated.launches[1].slots[0]);
  EXPECT_NE(c->generated.launches[2].slots[1],
            c->generated.launches[1].slots[1]);
}

TEST(CudaCodegen, UnknownArchitecturesAreRefusedByName) {
  auto cubin = CompileWithNvrtc("extern \"C\" __global__ void k() {}", "sm_12");
  ASSERT_FALSE(cubin.ok());
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cubin.status().message().find("sm_12"), absl::string_view::npos);
  EXPECT_NE(cubin.status().message().find("sm_90"), absl::string_view::npos);
}

TEST(CudaCodegen, AnNvrtcErrorNamesTheKernelAndItsInstruction) {
  GeneratedProgram g;
  g.source =
      "prelude\n\nextern \"C\" __global__ void pj_loop_0(float* out) {\n  "
      "x;\n}\n"
      "\nextern \"C\" __global__ void pj_copy_1(float* out) {\n  y;\n}\n";
  Launch loop, copy, gemm;
  loop.kernel = "pj_loop_0";
  loop.origin = "loop over f32[8] (exp) for %e (line 4)";
  copy.kernel = "pj_copy_1";
  copy.origin = "copy [8] of 4-byte elements for %c (line 5)";
  gemm.kind = Launch::Kind::kGemm;
  g.launches = {loop, gemm, copy};
  EXPECT_EQ(KernelAtErrorLine(
                g, "pjrt_kernels.cu(4): error: identifier \"x\" is undefined"),
            "kernel pj_loop_0 (loop over f32[8] (exp) for %e (line 4))");
  EXPECT_EQ(KernelAtErrorLine(g, "pjrt_kernels.cu(8): error: y"),
            "kernel pj_copy_1 (copy [8] of 4-byte elements for %c (line 5))");
  EXPECT_EQ(KernelAtErrorLine(g, "pjrt_kernels.cu(1): error in the prelude"),
            "");
  EXPECT_EQ(KernelAtErrorLine(g, "no line"), "");
}

TEST(CudaCodegen, PtxasReportsAreParsed) {
  const auto kernels = ParsePtxasReport(
      "ptxas info    : Compiling entry function 'pj_loop_0' for 'sm_90'\n"
      "ptxas info    : Function properties for pj_loop_0\n"
      "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 14 registers, used 0 barriers, 384 bytes smem, 360 "
      "bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90'\n"
      "ptxas info    : Used 6 registers\n");
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].name, "pj_loop_0");
  EXPECT_EQ(kernels[0].registers, 14);
  EXPECT_EQ(kernels[0].shared_bytes, 384);
  EXPECT_EQ(kernels[0].spill_bytes, 8);
  EXPECT_EQ(kernels[1].name, "k2");
  EXPECT_EQ(kernels[1].registers, 6);
}

// Which loops run their body as CUDA graphs: counted, long enough to
// repay a capture per run, and a body of kernels, matmuls and sorts only.
TEST(CudaCodegen, LongCountedLoopsOfPlainBodiesRunAsGraphs) {
  const auto graphs = [](int trips, const std::string& body_op, bool counted) {
    const std::string condition =
        counted ? "ROOT r = pred[] compare(i, n), direction=LT"
                : "x = f32[64] get-tuple-element(p), index=1\n"
                  "  s = f32[1] slice(x), slice={[0:1]}\n"
                  "  first = f32[] reshape(s)\n"
                  "  z = f32[] constant(0)\n"
                  "  small = pred[] compare(first, z), direction=GE\n"
                  "  more = pred[] compare(i, n), direction=LT\n"
                  "  ROOT r = pred[] and(small, more)";
    const std::string hlo = absl::StrFormat(
        R"(
HloModule m
lt { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER }
cond { p = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%d)
  %s }
body { p = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[64] get-tuple-element(p), index=1
  %s
  ROOT t = (s32[], f32[64]) tuple(j, y) }
ENTRY e {
  x = f32[64] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[64]) tuple(zero, x)
  w = (s32[], f32[64]) while(init), condition=cond, body=body
  ROOT r = f32[64] get-tuple-element(w), index=1
})",
        trips, condition, body_op);
    std::unique_ptr<hlo::Module> module = Parse(hlo);
    EXPECT_NE(module, nullptr) << hlo;
    if (module == nullptr) return -1;
    auto c = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return -1;
    int loops = 0, with_graphs = 0;
    ForEachLaunch(c->generated.launches, [&](const Launch& l) {
      if (l.kind != Launch::Kind::kWhile) return;
      ++loops;
      with_graphs += l.control.graphs;
      EXPECT_EQ(l.control.graphs,
                l.origin.find("CUDA graphs") != std::string::npos);
    });
    EXPECT_EQ(loops, 1);
    return with_graphs;
  };
  const std::string scale =
      "h = f32[] constant(0.5)\n  hb = f32[64] broadcast(h), dimensions={}\n"
      "  y = f32[64] multiply(x, hb)";
  const std::string sorted = "y = f32[64] sort(x), dimensions={0}, to_apply=lt";
  const std::string drawn =
      "lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
      "  y = f32[64] rng(lo, hi), distribution=rng_uniform";
  const std::string fft =
      "c = c64[64] convert(x)\n"
      "  f = c64[64] fft(c), fft_type=FFT, fft_length={64}\n"
      "  y = f32[64] real(f)";
  EXPECT_EQ(graphs(kGraphMinimumTrips, scale, true), 1);
  EXPECT_EQ(graphs(10000, sorted, true), 1);  // CUB's sort is captured too
  EXPECT_EQ(graphs(kGraphMinimumTrips - 1, scale, true), 0);  // too short
  EXPECT_EQ(graphs(10000, scale, false), 0);  // the predicate is read back
  EXPECT_EQ(graphs(10000, drawn, true), 0);   // draws advance per launch
  EXPECT_EQ(graphs(10000, fft, true), 0);     // cuFFT plans are per stream
}

}  // namespace
}  // namespace pjrt::compiler::cuda
