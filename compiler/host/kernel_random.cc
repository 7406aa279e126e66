// Random numbers: rng-bit-generator (ThreeFry-2x32 with 20 rounds and
// Philox-4x32 with 10 rounds, bit for bit as XLA expands them, state update
// included), rng (uniform and normal, from Philox bits seeded per run) and
// rng-get-and-update-state.
//
// rng-bit-generator's state is u64[2] or u64[3]: word 0 is the key. ThreeFry
// counts from word 1 (a u64); Philox counts in a u128 (words 1 and 2, low
// first; with a u64[2] state, word 1 is the low half and the key the high
// one, and only the low half is written back).
#include "compiler/host/kernel_random.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

template <typename S>
constexpr bool kIsFloatStorage =
    std::is_floating_point_v<S> || std::is_same_v<S, Eigen::half> ||
    std::is_same_v<S, Eigen::bfloat16> || std::is_same_v<S, Float8E4M3FN> ||
    std::is_same_v<S, Float8E5M2> || std::is_same_v<S, Float8E4M3> ||
    std::is_same_v<S, Float8E3M4> || std::is_same_v<S, Float8E4M3FNUZ> ||
    std::is_same_v<S, Float8E5M2FNUZ> || std::is_same_v<S, Float8E4M3B11FNUZ> ||
    std::is_same_v<S, Float8E8M0FNU> || std::is_same_v<S, Float6E2M3FN> ||
    std::is_same_v<S, Float6E3M2FN> || std::is_same_v<S, Float4E2M1FN>;

template <typename S>
concept MiniFloatStorage = requires {
  S::kSignShift;
};

// The largest finite value of S below b, a value of S: every floating type
// here is sign and magnitude, its magnitudes ordered as their bits are
// (f8e8m0fnu has no sign and no zero: nothing is below its smallest).
template <typename S>
S ValueBelow(S b) {
  static_assert(sizeof(S) <= 8 && kIsFloatStorage<S>);
  if constexpr (MiniFloatStorage<S>) {
    const uint8_t code = b.bits();
    if constexpr (S::kExponentOnly) {
      return S::FromBits(static_cast<uint8_t>(code == 0 ? 0 : code - 1));
    } else {
      constexpr uint8_t kSign = uint8_t{1} << S::kSignShift;
      if ((code & ~kSign) == 0) return S::FromBits(kSign | 1);
      return S::FromBits(
          static_cast<uint8_t>(code & kSign ? code + 1 : code - 1));
    }
  }
  using Bits = std::conditional_t<
      sizeof(S) == 1, uint8_t,
      std::conditional_t<
          sizeof(S) == 2, uint16_t,
          std::conditional_t<sizeof(S) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(Bits) == sizeof(S));
  constexpr Bits kSign = Bits{1} << (8 * sizeof(S) - 1);
  Bits bits;
  std::memcpy(&bits, &b, sizeof(S));
  if ((bits & ~kSign) == 0) {
    bits = kSign | 1;  // below zero: the smallest negative denormal
  } else if (bits & kSign) {
    ++bits;  // negative: one step larger in magnitude
  } else {
    --bits;  // positive: one step smaller
  }
  S below = b;
  std::memcpy(static_cast<void*>(&below), &bits, sizeof(S));
  return below;
}

uint32_t RotateLeft(uint32_t v, int d) { return (v << d) | (v >> (32 - d)); }

// ThreeFry-2x32, 20 rounds (Salmon et al., SC 2011).
void ThreeFry2x32(uint32_t key0, uint32_t key1, uint32_t* x0, uint32_t* x1) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {key0, key1, 0x1BD11BDAu ^ key0 ^ key1};
  uint32_t a = *x0 + ks[0], b = *x1 + ks[1];
  for (int group = 0; group < 5; ++group) {
    const int* rot = kRotations + (group % 2) * 4;
    for (int r = 0; r < 4; ++r) {
      a += b;
      b = RotateLeft(b, rot[r]) ^ a;
    }
    a += ks[(group + 1) % 3];
    b += ks[(group + 2) % 3] + static_cast<uint32_t>(group + 1);
  }
  *x0 = a;
  *x1 = b;
}

// Philox-4x32, 10 rounds.
void Philox4x32(uint32_t key0, uint32_t key1, uint32_t x[4]) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{x[0]} * 0xD2511F53u;
    const uint64_t p1 = uint64_t{x[2]} * 0xCD9E8D57u;
    const uint32_t y[4] = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ key0,
                           static_cast<uint32_t>(p1),
                           static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ key1,
                           static_cast<uint32_t>(p0)};
    std::memcpy(x, y, sizeof(y));
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
}

// Philox block `i` after the u128 counter (low, high).
void PhiloxBlock(uint64_t key, uint64_t low, uint64_t high, uint64_t i,
                 uint32_t out[4]) {
  const uint64_t l = low + i;
  const uint64_t h = high + (l < low ? 1 : 0);
  out[0] = static_cast<uint32_t>(l);
  out[1] = static_cast<uint32_t>(l >> 32);
  out[2] = static_cast<uint32_t>(h);
  out[3] = static_cast<uint32_t>(h >> 32);
  Philox4x32(static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32), out);
}

// Stores the low `bytes` bytes of `bits` as element i.
void StoreBits(void* out, int bytes, int64_t i, uint64_t bits) {
  std::memcpy(static_cast<char*>(out) + i * bytes, &bits,
              bytes);  // little endian
}

// The dimension XLA halves for 32-bit ThreeFry output: the first even one,
// else the largest.
int SplitDimension(absl::Span<const int64_t> dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] % 2 == 0) return static_cast<int>(i);
  }
  int best = 0;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] > dims[best]) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

// rng (uniform in [a, b), or normal with mean a and deviation b), from
// Philox bits under a key drawn from the run's seed.
absl::Status RngKernel::Run(absl::Span<void* const> addresses,
                            const RunContext& context) const {
  const uint64_t key = Key(context.prng_seed);
  const uint64_t draw = NextDraw();
  if (get_and_update) {
    uint64_t state[2] = {key, draw * static_cast<uint64_t>(delta)};
    std::memcpy(addresses[output], state, sizeof(state));
    return absl::OkStatus();
  }
  const double a = LoadAsDouble(type, addresses[low], 0);
  const double b = LoadAsDouble(type, addresses[high], 0);
  const int64_t n = count;
  const int64_t blocks = (n + 1) / 2;
  ThreadPool::Get().ParallelFor(blocks, 200, [&](int64_t first, int64_t last) {
    uint32_t w[4];
    for (int64_t blk = first; blk < last; ++blk) {
      PhiloxBlock(key, draw, 0, blk, w);
      const double u0 = (static_cast<double>(w[0]) + 0.5) / 4294967296.0;
      const double u1 = (static_cast<double>(w[1]) + 0.5) / 4294967296.0;
      double v[2];
      if (normal) {
        const double r = std::sqrt(-2.0 * std::log(u0));
        v[0] = a + b * r * std::cos(2 * M_PI * u1);
        v[1] = a + b * r * std::sin(2 * M_PI * u1);
      } else if (hlo::IsFloatingPoint(type)) {
        v[0] = a + (b - a) * (static_cast<double>(w[2] >> 8) / 16777216.0);
        v[1] = a + (b - a) * (static_cast<double>(w[3] >> 8) / 16777216.0);
      } else {
        // Integers: uniform in [a, b) (empty range: a).
        const double range = std::max(b - a, 1.0);
        const uint64_t r0 = (uint64_t{w[2]} << 32) | w[0];
        const uint64_t r1 = (uint64_t{w[3]} << 32) | w[1];
        v[0] = a + std::floor(
                       static_cast<double>(r0 % static_cast<uint64_t>(range)));
        v[1] = a + std::floor(
                       static_cast<double>(r1 % static_cast<uint64_t>(range)));
      }
      for (int k = 0; k < 2; ++k) {
        const int64_t i = 2 * blk + k;
        if (i >= n) break;
        DispatchType(type, [&](auto pt) {
          using S = typename TypeTraits<decltype(pt)::value>::Storage;
          S stored = static_cast<S>(v[k]);
          if constexpr (kIsFloatStorage<S>) {
            // [a, b) after rounding to the element type, where a value
            // just below b rounds up to it.
            if (!normal && a < b && static_cast<double>(stored) >= b) {
              stored = ValueBelow(static_cast<S>(b));
            }
          }
          static_cast<S*>(addresses[output])[i] = stored;
        });
      }
    }
  });
  return CheckCancelled(context.cancellation);
}

absl::Status RngBitGeneratorKernel::Run(absl::Span<void* const> addresses,
                                        const RunContext& context) const {
  uint64_t state[3] = {0, 0, 0};
  std::memcpy(state, addresses[state_in], state_words * 8);
  void* out = addresses[output];
  const int64_t n = Product(dims);
  uint64_t new_state[3] = {state[0], state[1], state[2]};
  if (philox) {
    // A u64[2] state counts in (low = word 1, high = the key).
    const uint64_t low = state[1];
    const uint64_t high = state_words == 3 ? state[2] : state[0];
    const bool wide = bytes == 8;
    const int64_t blocks = ((wide ? 2 * n : n) + 3) / 4;
    ThreadPool::Get().ParallelFor(
        blocks, 400, [&](int64_t first, int64_t last) {
          uint32_t w[4];
          for (int64_t b = first; b < last; ++b) {
            PhiloxBlock(state[0], low, high, b, w);
            if (wide) {
              for (int k = 0; k < 2; ++k) {
                const int64_t i = 2 * b + k;
                if (i < n) {
                  StoreBits(out, 8, i,
                            uint64_t{w[2 * k]} | uint64_t{w[2 * k + 1]} << 32);
                }
              }
            } else {
              for (int k = 0; k < 4; ++k) {
                if (4 * b + k < n) StoreBits(out, bytes, 4 * b + k, w[k]);
              }
            }
          }
        });
    const uint64_t l = low + static_cast<uint64_t>(blocks);
    new_state[1] = l;
    if (state_words == 3) new_state[2] = high + (l < low ? 1 : 0);
  } else if (bytes == 8) {
    // One block per element: counter word 1 + its index.
    ThreadPool::Get().ParallelFor(n, 100, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        const uint64_t c = state[1] + static_cast<uint64_t>(i);
        uint32_t x0 = static_cast<uint32_t>(c),
                 x1 = static_cast<uint32_t>(c >> 32);
        ThreeFry2x32(static_cast<uint32_t>(state[0]),
                     static_cast<uint32_t>(state[0] >> 32), &x0, &x1);
        StoreBits(out, 8, i, uint64_t{x0} | uint64_t{x1} << 32);
      }
    });
    new_state[1] = state[1] + static_cast<uint64_t>(n);
  } else {
    // Two 32-bit outputs per block: the shape is halved along split
    // (rounded up); an element with index k there takes output k % 2 of
    // the block at k / 2.
    const int rank = static_cast<int>(dims.size());
    std::vector<int64_t> half = dims;
    if (rank > 0) half[split] = (dims[split] + 1) / 2;
    const int64_t half_count = rank == 0 ? 1 : Product(half);
    const std::vector<int64_t> half_strides = RowMajorStrides(half);
    ThreadPool::Get().ParallelFor(n, 100, [&](int64_t first, int64_t last) {
      std::vector<int64_t> idx(rank);
      int64_t rest = first;
      for (int d = rank - 1; d >= 0; --d) {
        idx[d] = rest % dims[d];
        rest /= dims[d];
      }
      for (int64_t i = first; i < last; ++i, NextIndex(dims, &idx)) {
        int64_t block = 0;
        int which = 0;
        for (int d = 0; d < rank; ++d) {
          int64_t v = idx[d];
          if (d == split) {
            which = static_cast<int>(v % 2);
            v /= 2;
          }
          block += v * half_strides[d];
        }
        const uint64_t c = state[1] + static_cast<uint64_t>(block);
        uint32_t x0 = static_cast<uint32_t>(c),
                 x1 = static_cast<uint32_t>(c >> 32);
        ThreeFry2x32(static_cast<uint32_t>(state[0]),
                     static_cast<uint32_t>(state[0] >> 32), &x0, &x1);
        StoreBits(out, bytes, i, which == 0 ? x0 : x1);
      }
    });
    new_state[1] = state[1] + static_cast<uint64_t>(half_count);
  }
  std::memcpy(addresses[state_out], new_state, state_words * 8);
  return CheckCancelled(context.cancellation);
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildRngBitGenerator(
    const KernelArgs& args, KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<RngBitGeneratorKernel>();
  const std::string algorithm =
      hlo::WordAttribute(inst, "algorithm", "rng_default");
  // XLA's default on the CPU and GPU is Philox.
  k->philox = algorithm != "rng_three_fry";
  k->state_in = args.inputs[0];
  k->state_out = args.outputs[0];
  k->output = args.outputs[1];
  k->state_words = static_cast<int>(args.input_shapes[0].dimensions(0));
  const hlo::Shape& out = args.output_shapes[1];
  k->bytes = hlo::ByteWidth(out.element_type());
  k->dims.assign(out.dimensions().begin(), out.dimensions().end());
  k->split = SplitDimension(k->dims);
  k->reads = {{args.inputs[0], args.input_shapes[0].UnpackedByteSize()}};
  k->writes = {{args.outputs[0], args.output_shapes[0].UnpackedByteSize()},
               {args.outputs[1], out.UnpackedByteSize()}};
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildRng(const KernelArgs& args,
                                                 KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<RngKernel>();
  k->output = args.outputs[0];
  k->salt = static_cast<uint64_t>(inst.line()) * 1000003u + inst.column();
  if (inst.opcode() == hlo::Opcode::kRngGetAndUpdateState) {
    k->get_and_update = true;
    PJRT_ASSIGN_OR_RETURN(k->delta, hlo::ParseIntAttribute(inst, "delta", 1));
    k->writes = {{args.outputs[0], args.output_shapes[0].UnpackedByteSize()}};
    return k;
  }
  k->low = args.inputs[0];
  k->high = args.inputs[1];
  k->type = args.output_shapes[0].element_type();
  k->count = args.output_shapes[0].ElementCount();
  k->normal = hlo::WordAttribute(inst, "distribution", "") == "rng_normal";
  k->reads = {{args.inputs[0], args.input_shapes[0].UnpackedByteSize()},
              {args.inputs[1], args.input_shapes[1].UnpackedByteSize()}};
  k->writes = {{args.outputs[0], args.output_shapes[0].UnpackedByteSize()}};
  return k;
}

}  // namespace pjrt::compiler::host
