// Programs whose CUDA paths only a GPU runs, against the host platform bit
// for bit: CUB's sorts (keys alone as they lie or decoded, with positions,
// several rows under their row number, 64-bit keys as segments, JAX's
// float comparator, top-k), the scatter sorted by target, a counted loop
// run as CUDA graphs, and fp8 matmuls through cuBLASLt. Every test skips,
// saying why, when no GPU is visible; scripts/gpu-check runs them on a machine
// with one.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/minifloat.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace pjrt {
namespace {

class CudaProgramsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::ClientOptions options;
    options.platform = "cuda";
    auto cuda = runtime::Client::Create(options);
    if (!cuda.ok()) GTEST_SKIP() << cuda.status().message();
    cuda_ = *std::move(cuda);
    options.platform = "host";
    auto host = runtime::Client::Create(options);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
  }

  // The results of `text` on `client`'s first device, as bytes, for
  // `arguments` (one byte string per parameter).
  std::vector<std::vector<uint8_t>> Run(
      runtime::Client* client, const std::string& text,
      const std::vector<std::vector<uint8_t>>& arguments) {
    std::vector<std::vector<uint8_t>> out;
    auto exe = runtime::Executable::Compile(client, text);
    EXPECT_TRUE(exe.ok()) << exe.status();
    if (!exe.ok()) return out;
    runtime::Device* device = client->devices()[0];
    std::vector<std::shared_ptr<runtime::Buffer>> buffers;
    std::vector<runtime::Buffer*> raw;
    for (size_t i = 0; i < arguments.size(); ++i) {
      auto b = client->BufferFromHostBuffer(
          arguments[i].data(), (*exe)->parameter_shapes()[i], device);
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok()) return out;
      buffers.push_back(*b);
      raw.push_back(buffers.back().get());
    }
    auto results = (*exe)->Execute(raw, device);
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok()) return out;
    for (auto& r : *results) {
      std::vector<uint8_t> bytes(r->size_bytes());
      EXPECT_TRUE(r->CopyRawToHost(bytes.data(), 0, bytes.size()).ok());
      out.push_back(std::move(bytes));
    }
    return out;
  }

  // Runs `text` on the GPU and on the host with the same random arguments
  // (s32 below 64, so that indices meet; f32 small, with ties, both zeros
  // and NaNs of both signs; other types random bytes) and expects the same
  // bytes.
  void ExpectSameAsHost(const std::string& text) {
    auto exe = runtime::Executable::Compile(host_.get(), text);
    ASSERT_TRUE(exe.ok()) << exe.status();
    std::mt19937 rng(11);
    std::vector<std::vector<uint8_t>> arguments;
    for (const hlo::Shape& shape : (*exe)->parameter_shapes()) {
      std::vector<uint8_t> bytes(shape.ByteSize());
      if (shape.element_type() == hlo::PrimitiveType::kS32) {
        for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
          const int32_t v = static_cast<int32_t>(rng() % 64);
          std::memcpy(&bytes[i], &v, 4);
        }
      } else if (shape.element_type() == hlo::PrimitiveType::kF32) {
        for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
          // Small integers and halves, both zeros, and now and then a NaN.
          float v = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 2;
          if (rng() % 50 == 0) v = -v;
          uint32_t b;
          std::memcpy(&b, &v, 4);
          if (rng() % 40 == 0) b = (rng() % 2 ? 0xffc00001u : 0x7fc00000u);
          std::memcpy(&bytes[i], &b, 4);
        }
      } else if (shape.element_type() == hlo::PrimitiveType::kF8E4M3FN ||
                 shape.element_type() == hlo::PrimitiveType::kF8E5M2) {
        // Integers from -4 to 4: their products' sums are exact in any
        // order and at any accumulator width the tensor cores have.
        for (uint8_t& b : bytes) {
          b = hlo::MiniFloatFromFloat(shape.element_type(),
                                      static_cast<float>(rng() % 9) - 4);
        }
      } else {
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      }
      arguments.push_back(std::move(bytes));
    }
    const auto want = Run(host_.get(), text, arguments);
    const auto got = Run(cuda_.get(), text, arguments);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(got[r], want[r]) << "result " << r;
    }
  }

  std::unique_ptr<runtime::Client> cuda_, host_;
};

TEST_F(CudaProgramsTest, CubSortsMatchTheHost) {
  const char* const kComparators = R"(
ltu { a = u32[] parameter(0)
  b = u32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT }
ltu64 { a = u64[] parameter(0)
  b = u64[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT }
gts { a = s16[] parameter(0)
  b = s16[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT }
gtf { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER }
jax { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  zero = f32[] constant(0)
  nan = f32[] constant(nan)
  az = pred[] compare(a, zero), direction=EQ
  a0 = f32[] select(az, zero, a)
  an = pred[] compare(a, a), direction=NE
  a1 = f32[] select(an, nan, a0)
  bz = pred[] compare(b, zero), direction=EQ
  b0 = f32[] select(bz, zero, b)
  bn = pred[] compare(b, b), direction=NE
  b1 = f32[] select(bn, nan, b0)
  ROOT r = pred[] compare(a1, b1), direction=LT, type=TOTALORDER }
)";
  ExpectSameAsHost(absl::StrCat("HloModule s\n", kComparators, R"(
ENTRY e {
  k = u32[1000003] parameter(0)
  l = u64[3,5000] parameter(1)
  i = s32[3,5000] iota(), iota_dimension=1
  m = s16[7,3000] parameter(2)
  v = f32[7,3000] parameter(3)
  x = f32[5,4000] parameter(4)
  j = s32[5,4000] iota(), iota_dimension=1
  s0 = u32[1000003] sort(k), dimensions={0}, to_apply=ltu
  s1 = (u64[3,5000], s32[3,5000]) sort(l, i), dimensions={1}, to_apply=ltu64
  s2 = (s16[7,3000], f32[7,3000]) sort(m, v), dimensions={1}, to_apply=gts
  s3 = (f32[5,4000], s32[5,4000]) sort(x, j), dimensions={1}, to_apply=jax
  s4 = f32[5,4000] sort(x), dimensions={1}, to_apply=gtf
  t = (f32[5,100], s32[5,100]) topk(x), k=100, largest=true
  l0 = u64[3,5000] get-tuple-element(s1), index=0
  l1 = s32[3,5000] get-tuple-element(s1), index=1
  m0 = s16[7,3000] get-tuple-element(s2), index=0
  m1 = f32[7,3000] get-tuple-element(s2), index=1
  x0 = f32[5,4000] get-tuple-element(s3), index=0
  x1 = s32[5,4000] get-tuple-element(s3), index=1
  t0 = f32[5,100] get-tuple-element(t), index=0
  t1 = s32[5,100] get-tuple-element(t), index=1
  ROOT r = (u32[1000003], u64[3,5000], s32[3,5000], s16[7,3000],
            f32[7,3000], f32[5,4000], s32[5,4000], f32[5,100],
            s32[5,100], f32[5,4000]) tuple(s0, l0, l1, m0, m1, x0, x1, t0,
            t1, s4)
})"));
}

TEST_F(CudaProgramsTest, ScattersSortedByTargetMatchTheHost) {
  ExpectSameAsHost(R"(
HloModule s
mul { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] multiply(a, b) }
sub { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] subtract(a, b) }
ENTRY e {
  o = f32[64] parameter(0)
  i = s32[100000,1] parameter(1)
  u = f32[100000] parameter(2)
  w = f32[100000,4] parameter(3)
  a = f32[64] scatter(o, i, u), update_window_dims={},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=mul
  b = f32[64] scatter(o, i, w), update_window_dims={1},
    inserted_window_dims={}, scatter_dims_to_operand_dims={0},
    index_vector_dim=1, to_apply=sub
  ROOT r = (f32[64], f32[64]) tuple(a, b)
})");
}

// 1000 iterations: two as they come, 62 graphs of 16, then six more.
TEST_F(CudaProgramsTest, ACountedLoopRunAsGraphsMatchesTheHost) {
  ExpectSameAsHost(R"(
HloModule loop
cond { p = (s32[], s32[256], s32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(1000)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], s32[256], s32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = s32[256] get-tuple-element(p), index=1
  z = s32[256] get-tuple-element(p), index=2
  ib = s32[256] broadcast(i), dimensions={}
  y = s32[256] add(x, ib)
  three = s32[] constant(3)
  t = s32[256] broadcast(three), dimensions={}
  zt = s32[256] multiply(z, t)
  z2 = s32[256] subtract(zt, x)
  ROOT r = (s32[], s32[256], s32[256]) tuple(j, y, z2) }
ENTRY e {
  x = s32[256] parameter(0)
  z = s32[256] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], s32[256], s32[256]) tuple(zero, x, z)
  w = (s32[], s32[256], s32[256]) while(init), condition=cond, body=body
  a = s32[256] get-tuple-element(w), index=1
  b = s32[256] get-tuple-element(w), index=2
  c = s32[] get-tuple-element(w), index=0
  ROOT r = (s32[], s32[256], s32[256]) tuple(c, a, b)
})");
}

// fp8 by fp8 (e4m3fn by e4m3fn, e4m3fn by e5m2, e5m2 by e4m3fn) as
// cuBLASLt's fp8 matmuls take them on a GPU of compute capability 8.9 and
// up (the others run them as f32 matmuls): operands copied to k innermost
// or read as they lie, a batch, a bf16 result.
TEST_F(CudaProgramsTest, Fp8MatmulsMatchTheHost) {
  ExpectSameAsHost(R"(
HloModule fp8
ENTRY e {
  a = f8e4m3fn[32,64] parameter(0)
  b = f8e4m3fn[64,48] parameter(1)
  ab = f32[32,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f8e4m3fn[16,32] parameter(2)
  d = f8e5m2[48,16] parameter(3)
  cd = bf16[32,48] dot(c, d), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  x = f8e5m2[2,16,32] parameter(4)
  y = f8e4m3fn[2,48,32] parameter(5)
  xy = f32[2,16,48] dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  ROOT r = (f32[32,48], bf16[32,48], f32[2,16,48]) tuple(ab, cd, xy)
})");
}

}  // namespace
}  // namespace pjrt
