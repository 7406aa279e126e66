#include "compiler/host/host_program.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/cancellation.h"
#include "base/status_macros.h"
#include "compiler/collectives.h"
#include "compiler/host/combine.h"
#include "compiler/host/host_kernels.h"
#include "compiler/host/run_collectives.h"
#include "compiler/host/thread_pool.h"
#include "compiler/host/types.h"

#if defined(PJRT_HAVE_ONEDNN)
#include "dnnl.h"
#include "omp.h"
#endif

namespace pjrt::compiler::host {
namespace {

constexpr int kMaxRank = 64;

// Walks the multi-indices of an iteration space in row-major order, keeping
// an affine offset up to date.
class Walker {
 public:
  Walker(absl::Span<const int64_t> dims, absl::Span<const int64_t> strides,
         int64_t base, int64_t linear)
      : dims_(dims), strides_(strides), rank_(static_cast<int>(dims.size())) {
    offset_ = base;
    for (int d = rank_ - 1; d >= 0; --d) {
      idx_[d] = dims_[d] == 0 ? 0 : linear % dims_[d];
      linear = dims_[d] == 0 ? 0 : linear / dims_[d];
      offset_ += idx_[d] * strides_[d];
    }
  }

  int64_t offset() const { return offset_; }
  // Elements left in the current innermost row.
  int64_t row_left() const {
    return rank_ == 0 ? 1 : dims_[rank_ - 1] - idx_[rank_ - 1];
  }
  int64_t inner_stride() const { return rank_ == 0 ? 0 : strides_[rank_ - 1]; }

  // Advances by `n` elements within the current row, carrying at its end.
  void Advance(int64_t n) {
    if (rank_ == 0) return;
    idx_[rank_ - 1] += n;
    offset_ += n * strides_[rank_ - 1];
    for (int d = rank_ - 1; d > 0 && idx_[d] >= dims_[d]; --d) {
      offset_ -= idx_[d] * strides_[d];
      idx_[d] = 0;
      ++idx_[d - 1];
      offset_ += strides_[d - 1];
    }
  }

 private:
  absl::Span<const int64_t> dims_;
  absl::Span<const int64_t> strides_;
  int rank_;
  int64_t idx_[kMaxRank] = {};
  int64_t offset_ = 0;
};

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <int kBytes>
struct Bits;
template <>
struct Bits<1> {
  using T = uint8_t;
};
template <>
struct Bits<2> {
  using T = uint16_t;
};
template <>
struct Bits<4> {
  using T = uint32_t;
};
template <>
struct Bits<8> {
  using T = uint64_t;
};
struct Bits128 {
  uint64_t words[2];
};
template <>
struct Bits<16> {
  using T = Bits128;
};

// Copies n elements from src (stride src_stride elements) to dst (stride
// dst_stride), elements of kBytes.
template <int kBytes>
void StridedCopy(const void* src, int64_t src_stride, void* dst,
                 int64_t dst_stride, int64_t n) {
  using T = typename Bits<kBytes>::T;
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst);
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(d, s, n * kBytes);
  } else if (src_stride == 0) {
    T v = s[0];
    for (int64_t i = 0; i < n; ++i) d[i * dst_stride] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * dst_stride] = s[i * src_stride];
  }
}

void StridedCopyBytes(int bytes, const void* src, int64_t src_stride, void* dst,
                      int64_t dst_stride, int64_t n) {
  switch (bytes) {
    case 1:
      return StridedCopy<1>(src, src_stride, dst, dst_stride, n);
    case 2:
      return StridedCopy<2>(src, src_stride, dst, dst_stride, n);
    case 4:
      return StridedCopy<4>(src, src_stride, dst, dst_stride, n);
    case 16:
      return StridedCopy<16>(src, src_stride, dst, dst_stride, n);
    default:
      return StridedCopy<8>(src, src_stride, dst, dst_stride, n);
  }
}

// --- loops ------------------------------------------------------------------

struct LoopThreadState {
  BlockScratch scratch;
  std::vector<std::vector<uint64_t>> inputs;
  std::vector<uint64_t> staging;
  std::vector<uint64_t> output;

  void* Input(int i) {
    if (static_cast<int>(inputs.size()) <= i) inputs.resize(i + 1);
    if (inputs[i].empty()) inputs[i].resize(kBlockWords);
    return inputs[i].data();
  }
  void* Staging() {
    if (staging.empty()) staging.resize(kBlockWords);
    return staging.data();
  }
  void* Output() {
    if (output.empty()) output.resize(kBlockWords);
    return output.data();
  }
};

LoopThreadState& ThreadState() {
  thread_local LoopThreadState state;
  return state;
}

// Fills `dst` with the compute representation of iota values over the block.
void GenerateIota(const LoopInput& in, absl::Span<const int64_t> dims,
                  int64_t begin, int64_t n, void* dst) {
  Walker w(dims, in.map.strides, in.map.offset, begin);
  DispatchAnyType(in.type, [&](auto pt) {
    using C = typename TypeTraits<decltype(pt)::value>::Compute;
    C* out = static_cast<C*>(dst);
    int64_t done = 0;
    while (done < n) {
      int64_t run = std::min(n - done, w.row_left());
      int64_t v = w.offset(), s = w.inner_stride();
      for (int64_t i = 0; i < run; ++i) {
        C value = static_cast<C>(v + i * s);
        if constexpr (std::is_integral_v<C>) {  // s4, u4, s2, u2 wrap
          if (IsSubByteInt(in.type)) value = WrapSubByte(in.type, value);
        }
        out[done + i] = value;
      }
      done += run;
      w.Advance(run);
    }
  });
}

// Gathers the block's elements of a buffer input into `dst` (storage type).
void Gather(const LoopInput& in, const void* base,
            absl::Span<const int64_t> dims, int64_t begin, int64_t n,
            void* dst) {
  const int bytes = hlo::ByteWidth(in.type);
  Walker w(dims, in.map.strides, in.map.offset, begin);
  int64_t done = 0;
  while (done < n) {
    int64_t run = std::min(n - done, w.row_left());
    StridedCopyBytes(bytes, static_cast<const char*>(base) + w.offset() * bytes,
                     w.inner_stride(), static_cast<char*>(dst) + done * bytes,
                     1, run);
    done += run;
    w.Advance(run);
  }
}

// Copies a computed block to its destination; with `streaming`, through
// non-temporal stores where the CPU has them (a large output is not read
// back soon, and this saves the read-for-ownership of each cache line).
void StoreBlock(void* dst, const void* src, int64_t bytes, bool streaming) {
#if defined(__SSE2__)
  // 16 bytes a store (SSE2, which every x86-64 has): the write-combining
  // buffers fill whole cache lines from these as from wider stores.
  if (streaming && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    int64_t i = 0;
    for (; i + 16 <= bytes; i += 16) {
      __m128i v = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(static_cast<const char*>(src) + i));
      _mm_stream_si128(reinterpret_cast<__m128i*>(static_cast<char*>(dst) + i),
                       v);
    }
    if (i < bytes) {
      std::memcpy(static_cast<char*>(dst) + i,
                  static_cast<const char*>(src) + i, bytes - i);
    }
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void RunLoop(const LoopStep& step, absl::Span<void* const> addresses,
             const Cancellation* cancellation) {
  const int64_t total = Product(step.dims);
  if (total == 0) return;
  const int64_t blocks = (total + kBlockElements - 1) / kBlockElements;
  char* out_base = static_cast<char*>(addresses[step.output_slot]);
  const int out_bytes = hlo::ByteWidth(step.output_type);
  const bool half_out = IsNarrowFloat(step.output_type);
  // Outputs larger than the caches bypass them on the way to memory.
  const bool streaming = total * out_bytes >= (int64_t{8} << 20);
  ThreadPool::Get().ParallelFor(
      blocks, step.expr.CyclesPerElement() * kBlockElements,
      [&](int64_t first, int64_t last) {
        LoopThreadState& state = ThreadState();
        const void* inputs[64];
        std::vector<const void*> many;
        const void** in = inputs;
        if (step.inputs.size() > 64) {
          many.resize(step.inputs.size());
          in = many.data();
        }
        for (int64_t b = first; b < last; ++b) {
          if (IsCancelled(cancellation)) break;
          const int64_t begin = b * kBlockElements;
          const int64_t n = std::min(kBlockElements, total - begin);
          for (size_t i = 0; i < step.inputs.size(); ++i) {
            const LoopInput& input = step.inputs[i];
            if (input.kind == LoopInput::Kind::kIota) {
              void* dst = state.Input(static_cast<int>(i));
              GenerateIota(input, step.dims, begin, n, dst);
              in[i] = dst;
              continue;
            }
            const char* base = static_cast<const char*>(addresses[input.slot]);
            const int bytes = hlo::ByteWidth(input.type);
            if (input.contiguous && !IsNarrowFloat(input.type)) {
              in[i] = base + (input.map.offset + begin) * bytes;
              continue;
            }
            void* dst = state.Input(static_cast<int>(i));
            if (input.contiguous) {
              StorageToCompute(input.type,
                               base + (input.map.offset + begin) * bytes, dst,
                               n);
            } else if (IsNarrowFloat(input.type)) {
              void* staging = state.Staging();
              Gather(input, base, step.dims, begin, n, staging);
              StorageToCompute(input.type, staging, dst, n);
            } else {
              Gather(input, base, step.dims, begin, n, dst);
            }
            in[i] = dst;
          }
          void* out = out_base + begin * out_bytes;
          const void* value = nullptr;
          EvaluateBlock(step.expr, absl::MakeConstSpan(in, step.inputs.size()),
                        n, {&value, 1}, state.scratch);
          if (half_out) {
            ComputeToStorage(step.output_type, value, out, n);
          } else {
            StoreBlock(out, value, n * out_bytes, streaming);
          }
        }
#if defined(__SSE2__)
        // Order the streaming stores before the step is reported done.
        if (streaming) _mm_sfence();
#endif
      });
}

// --- dot ---------------------------------------------------------------------

// Runs fn(lo, hi) over [0, extent) of a product's rows (or columns) of
// `flops` in all, in pieces across the pool: one per thread, none for
// small products, and at most about 2 GFLOP each (tens of milliseconds),
// so that a cancelled run stops soon. Pieces start at multiples of 48: a
// multiple of every register block of Eigen's kernels, whose last, partial
// block sums in another order. So every element is computed alike however
// many pieces the pool's size makes (a 4096-row product cut in three gave
// other last bits than in two).
template <typename F>
void ForEachPiece(int64_t extent, double flops,
                  const Cancellation* cancellation, const F& fn) {
  ThreadPool& pool = ThreadPool::Get();
  int64_t pieces =
      flops < 3e7 ? 1
                  : std::max<int64_t>(
                        1, std::min<int64_t>(pool.num_threads(), extent / 16));
  pieces = std::max<int64_t>(
      pieces, std::min<int64_t>(extent, static_cast<int64_t>(flops / 2e9)));
  constexpr int64_t kUnit = 48;
  const int64_t units = (extent + kUnit - 1) / kUnit;
  pool.ParallelFor(
      pieces, flops / pieces / 4, [&](int64_t first, int64_t last) {
        for (int64_t piece = first; piece < last; ++piece) {
          if (IsCancelled(cancellation)) return;
          const int64_t lo = std::min(extent, kUnit * (units * piece / pieces)),
                        hi = std::min(extent,
                                      kUnit * (units * (piece + 1) / pieces));
          if (lo < hi) fn(lo, hi);
        }
      });
}

// Matrix products through Eigen's GEMM (Gemm, host_kernels.h: fast at
// every size, single threaded), parallelised here by blocks of result rows
// (or columns, when there are few rows) across the pool; batches go to
// threads whole.
//
// The row-major product C = A B is computed as its column-major transpose
// C^T = B^T A^T over the same memory: Eigen 3.4's AVX-512 kernels are ten
// times slower with row-major right-hand sides than with column-major ones.
template <typename T>
void RunDotTyped(const DotStep& s, const T* lhs, const T* rhs, T* out,
                 const Cancellation* cancellation) {
  // Computes rows [r0, r1) and columns [c0, c1) of C in batch b:
  // C^T[c0:c1, r0:r1] = B^T[c0:c1, :] A^T[:, r0:r1].
  const auto block = [&](int64_t b, int64_t r0, int64_t r1, int64_t c0,
                         int64_t c1) {
    GemmArgs g;
    g.type = s.type;
    g.m = c1 - c0;
    g.n = r1 - r0;
    g.k = s.k;
    // Stored rhs is k x n row-major (B^T column-major, leading dimension
    // n), or n x k row-major when transposed (B column-major).
    const T* bm = rhs + b * s.k * s.n;
    g.a = s.rhs_transposed ? bm + c0 * s.k : bm + c0;
    g.lda = s.rhs_transposed ? s.k : s.n;
    g.a_transposed = s.rhs_transposed;
    // Stored lhs is m x k row-major (A^T column-major), or k x m row-major
    // when transposed (A column-major).
    const T* am = lhs + b * s.m * s.k;
    g.b = s.lhs_transposed ? am + r0 : am + r0 * s.k;
    g.ldb = s.lhs_transposed ? s.m : s.k;
    g.b_transposed = s.lhs_transposed;
    g.c = out + b * s.m * s.n + r0 * s.n + c0;
    g.ldc = s.n;
    Gemm(g);
  };
  ThreadPool& pool = ThreadPool::Get();
  const double flops = 2.0 * s.m * s.n * std::max<int64_t>(s.k, 1);
  if (s.batch > 1) {
    pool.ParallelFor(s.batch, flops / 4, [&](int64_t first, int64_t last) {
      for (int64_t b = first; b < last; ++b) {
        if (IsCancelled(cancellation)) return;
        block(b, 0, s.m, 0, s.n);
      }
    });
    return;
  }
  // One block of the larger result dimension per piece (each block packs
  // the other operand once).
  const bool by_rows = s.m >= s.n;
  ForEachPiece(by_rows ? s.m : s.n, flops, cancellation,
               [&](int64_t lo, int64_t hi) {
                 if (by_rows) {
                   block(0, lo, hi, 0, s.n);
                 } else {
                   block(0, 0, s.m, lo, hi);
                 }
               });
}

// f32 products through oneDNN's sgemm where it measured faster than
// Eigen's GEMM here (bench/gemm_libraries, docs/performance.md): products
// of 2048^2 and more, the MLP's products with a long inner dimension and
// batched small ones, by 1.2-2.4x. Products with a narrow result (fewer than
// 32 rows or columns, such as an MLP's 10 logits) stay with Eigen, which
// was 1.5x faster there. oneDNN threads each call itself (OpenMP), except
// small products (under 3e7 flops in all, `total_flops`: a batch's or a
// ragged-dot's groups together), which run on the calling thread alone:
// waking an OpenMP team cost more than it saved there (the MLP's
// 64x784x128 products took 1.45x as long with two threads), and an idle
// team's threads spin. A huge product goes in pieces of rows of about 20
// GFLOP (a few tens of milliseconds), so that a cancelled run stops soon;
// not smaller, as each piece packs the whole right-hand side again into
// fresh scratch memory (a 2048^3 product in pieces of 2 GFLOP took 1.5x as
// long as in one). Returns false when oneDNN is not there, not chosen, or
// refuses, for Eigen to do it.
bool RunSgemm(const MatrixProduct& p, double total_flops,
              const Cancellation* cancellation) {
#if defined(PJRT_HAVE_ONEDNN)
  constexpr int64_t kNarrow = 32;
  if (p.k == 0 || p.m < kNarrow || p.n < kNarrow) return false;
  // OpenMP's thread count for a thread that never set one (OMP_NUM_THREADS,
  // or one per core); read before this thread sets its own.
  static const int team =
      std::min(omp_get_max_threads(), ThreadPool::Get().num_threads());
  omp_set_num_threads(total_flops < 3e7 ? 1 : team);
  const double row_flops = 2.0 * static_cast<double>(p.n) * p.k;
  const int64_t rows_per_piece =
      std::clamp<int64_t>(static_cast<int64_t>(2e10 / row_flops), 1, p.m);
  const float* a = static_cast<const float*>(p.a);
  for (int64_t r0 = 0; r0 < p.m; r0 += rows_per_piece) {
    if (IsCancelled(cancellation)) return true;
    const int64_t rows = std::min(rows_per_piece, p.m - r0);
    dnnl_status_t status =
        dnnl_sgemm(p.a_transposed ? 'T' : 'N', p.b_transposed ? 'T' : 'N', rows,
                   p.n, p.k, 1.0f, p.a_transposed ? a + r0 : a + r0 * p.lda,
                   p.lda, static_cast<const float*>(p.b), p.ldb, 0.0f,
                   static_cast<float*>(p.c) + r0 * p.ldc, p.ldc);
    if (status != dnnl_success) {
      // Nothing has been written that Eigen will not overwrite.
      return false;
    }
  }
  return true;
#else
  (void)p, (void)total_flops, (void)cancellation;
  return false;
#endif
}

bool RunSgemm(const DotStep& s, const float* lhs, const float* rhs, float* out,
              const Cancellation* cancellation) {
  const double flops = 2.0 * static_cast<double>(s.m) * s.n * s.k * s.batch;
  for (int64_t b = 0; b < s.batch; ++b) {
    MatrixProduct p;
    p.type = hlo::PrimitiveType::kF32;
    p.m = s.m, p.n = s.n, p.k = s.k;
    // Row-major A is m x k (lda k), or stored k x m when transposed (lda m).
    p.a = lhs + b * s.m * s.k;
    p.lda = s.lhs_transposed ? s.m : s.k;
    p.a_transposed = s.lhs_transposed;
    p.b = rhs + b * s.k * s.n;
    p.ldb = s.rhs_transposed ? s.k : s.n;
    p.b_transposed = s.rhs_transposed;
    p.c = out + b * s.m * s.n;
    p.ldc = s.n;
    if (!RunSgemm(p, flops, cancellation)) return false;
  }
  return true;
}

void RunDot(const DotStep& s, absl::Span<void* const> a,
            const Cancellation* cancellation) {
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;
  switch (s.type) {
    case hlo::PrimitiveType::kF32:
      if (RunSgemm(s, static_cast<const float*>(a[s.lhs]),
                   static_cast<const float*>(a[s.rhs]),
                   static_cast<float*>(a[s.out]), cancellation)) {
        return;
      }
      return RunDotTyped(s, static_cast<const float*>(a[s.lhs]),
                         static_cast<const float*>(a[s.rhs]),
                         static_cast<float*>(a[s.out]), cancellation);
    case hlo::PrimitiveType::kF64:
      return RunDotTyped(s, static_cast<const double*>(a[s.lhs]),
                         static_cast<const double*>(a[s.rhs]),
                         static_cast<double*>(a[s.out]), cancellation);
    case hlo::PrimitiveType::kC64: {
      using C = std::complex<float>;
      return RunDotTyped(s, static_cast<const C*>(a[s.lhs]),
                         static_cast<const C*>(a[s.rhs]),
                         static_cast<C*>(a[s.out]), cancellation);
    }
    case hlo::PrimitiveType::kC128: {
      using C = std::complex<double>;
      return RunDotTyped(s, static_cast<const C*>(a[s.lhs]),
                         static_cast<const C*>(a[s.rhs]),
                         static_cast<C*>(a[s.out]), cancellation);
    }
    default:
      return RunDotTyped(s, static_cast<const int64_t*>(a[s.lhs]),
                         static_cast<const int64_t*>(a[s.rhs]),
                         static_cast<int64_t*>(a[s.out]), cancellation);
  }
}

// --- reduce -----------------------------------------------------------------

template <hlo::PrimitiveType PT>
void RunReduceTyped(const ReduceStep& s, absl::Span<void* const> a,
                    const Cancellation* cancellation) {
  using S = typename TypeTraits<PT>::Storage;
  using C = typename TypeTraits<PT>::Compute;
  const S* in = static_cast<const S*>(a[s.input]);
  S* out = static_cast<S*>(a[s.out]);
  const C init = Load(static_cast<const S*>(a[s.init]), 0);
  // Partial results start from the op's identity, and the initial value
  // joins each result once, as XLA applies it (an initial value that is
  // not the identity counts once, not once per partial result).
  const C identity = CombineIdentity<C>(s.op);
  const int64_t R = s.reduced, I = s.inner;
  const auto store = [&](int64_t i, C v) { out[i] = static_cast<S>(v); };
  // `first` combined with row[b, e): eight accumulators, as independent
  // chains vectorise and sum floats more accurately than one.
  const auto combine_range = [&](const S* row, int64_t b, int64_t e, C first) {
    C acc[8];
    acc[0] = first;
    for (int j = 1; j < 8; ++j) acc[j] = identity;
    int64_t r = b;
    for (; r + 8 <= e; r += 8) {
      for (int j = 0; j < 8; ++j)
        acc[j] = Combine(s.op, acc[j], C(Load(row, r + j)));
    }
    for (; r < e; ++r) acc[0] = Combine(s.op, acc[0], C(Load(row, r)));
    C total = acc[0];
    for (int j = 1; j < 8; ++j) total = Combine(s.op, total, acc[j]);
    return total;
  };
  ThreadPool& pool = ThreadPool::Get();
  // Few long rows: each split into chunks the threads share, then combined.
  // How many rows and chunks are fixed numbers, not the pool's size: the
  // sums' order, and so their last bits, are the same on every machine.
  constexpr int64_t kFewRows = 16, kChunks = 64;
  if (I == 1 && s.outer < kFewRows && R >= 65536) {
    for (int64_t o = 0; o < s.outer; ++o) {
      if (IsCancelled(cancellation)) return;
      const int64_t chunks = kChunks;
      std::vector<C> partial(chunks, identity);
      pool.ParallelFor(chunks, 2.0 * R / chunks, [&](int64_t f, int64_t l) {
        for (int64_t c = f; c < l; ++c) {
          partial[c] = combine_range(in + o * R, R * c / chunks,
                                     R * (c + 1) / chunks, identity);
        }
      });
      C acc = init;
      for (C p : partial) acc = Combine(s.op, acc, p);
      store(o, acc);
    }
    return;
  }
  if (I == 1) {
    pool.ParallelFor(s.outer, 2.0 * R, [&](int64_t f, int64_t l) {
      for (int64_t o = f; o < l; ++o) {
        if (IsCancelled(cancellation)) return;
        store(o, combine_range(in + o * R, 0, R, init));
      }
    });
    return;
  }
  const int64_t chunk = 256;
  const int64_t chunks_per_row = (I + chunk - 1) / chunk;
  pool.ParallelFor(s.outer * chunks_per_row, 2.0 * R * chunk,
                   [&](int64_t f, int64_t l) {
                     std::vector<C> acc(chunk);
                     for (int64_t w = f; w < l; ++w) {
                       if (IsCancelled(cancellation)) return;
                       int64_t o = w / chunks_per_row;
                       int64_t i0 = (w % chunks_per_row) * chunk;
                       int64_t len = std::min(chunk, I - i0);
                       std::fill(acc.begin(), acc.begin() + len, init);
                       for (int64_t r = 0; r < R; ++r) {
                         const S* row = in + (o * R + r) * I + i0;
                         for (int64_t i = 0; i < len; ++i) {
                           acc[i] = Combine(s.op, acc[i], C(Load(row, i)));
                         }
                       }
                       for (int64_t i = 0; i < len; ++i)
                         store(o * I + i0 + i, acc[i]);
                     }
                   });
}

void RunReduce(const ReduceStep& s, absl::Span<void* const> a,
               const Cancellation* cancellation) {
  if (s.outer * s.inner == 0) return;
  DispatchType(s.type, [&](auto pt) {
    RunReduceTyped<decltype(pt)::value>(s, a, cancellation);
  });
}

void RunGenericReduce(const GenericReduceStep& s, absl::Span<void* const> a,
                      const Cancellation* cancellation) {
  const int n = static_cast<int>(s.inputs.size());
  const int64_t positions = s.outer * s.inner;
  if (positions == 0) return;
  const int64_t blocks = (positions + kBlockElements - 1) / kBlockElements;
  ThreadPool::Get().ParallelFor(
      blocks, s.region.CyclesPerElement() * s.reduced * kBlockElements,
      [&](int64_t first, int64_t last) {
        BlockScratch scratch;
        // acc[j] and next[j]: the accumulators; x[j]: the inputs at step r.
        std::vector<std::vector<uint64_t>> acc(n), next(n), x(n), staging(n);
        for (int j = 0; j < n; ++j) {
          acc[j].resize(kBlockWords);
          next[j].resize(kBlockWords);
          x[j].resize(kBlockWords);
          staging[j].resize(kBlockWords);
        }
        std::vector<const void*> inputs(2 * n);
        std::vector<const void*> outputs(n);
        for (int64_t b = first; b < last; ++b) {
          if (IsCancelled(cancellation)) return;
          const int64_t begin = b * kBlockElements;
          const int64_t len = std::min(kBlockElements, positions - begin);
          for (int j = 0; j < n; ++j) {
            const int bytes = hlo::ByteWidth(s.types[j]);
            // Broadcast the initial value over the block.
            for (int64_t i = 0; i < len; ++i) {
              std::memcpy(
                  reinterpret_cast<char*>(staging[j].data()) + i * bytes,
                  a[s.inits[j]], bytes);
            }
            StorageToCompute(s.types[j], staging[j].data(), acc[j].data(), len);
          }
          for (int64_t r = 0; r < s.reduced; ++r) {
            for (int j = 0; j < n; ++j) {
              const int bytes = hlo::ByteWidth(s.types[j]);
              const char* in = static_cast<const char*>(a[s.inputs[j]]);
              // Positions begin..begin+len map to (o, i); element (o, r, i).
              char* dst = reinterpret_cast<char*>(staging[j].data());
              int64_t p = begin;
              int64_t done = 0;
              while (done < len) {
                int64_t o = p / s.inner, i = p % s.inner;
                int64_t run = std::min(len - done, s.inner - i);
                std::memcpy(dst + done * bytes,
                            in + ((o * s.reduced + r) * s.inner + i) * bytes,
                            run * bytes);
                done += run;
                p += run;
              }
              StorageToCompute(s.types[j], staging[j].data(), x[j].data(), len);
              inputs[j] = acc[j].data();
              inputs[n + j] = x[j].data();
            }
            EvaluateBlock(s.region, inputs, len, absl::MakeSpan(outputs),
                          scratch);
            for (int j = 0; j < n; ++j) {
              std::memcpy(next[j].data(), outputs[j],
                          len * ComputeWidth(s.types[j]));
            }
            std::swap(acc, next);
          }
          for (int j = 0; j < n; ++j) {
            const int bytes = hlo::ByteWidth(s.types[j]);
            ComputeToStorage(s.types[j], acc[j].data(),
                             static_cast<char*>(a[s.outs[j]]) + begin * bytes,
                             len);
          }
        }
      });
}

// --- data movement -----------------------------------------------------------

void RunCopy(const CopyStep& s, absl::Span<void* const> a,
             const Cancellation* cancellation) {
  const int64_t total = Product(s.dims);
  if (total == 0) return;
  const int rank = static_cast<int>(s.dims.size());
  const int64_t row = rank == 0 ? 1 : s.dims[rank - 1];
  const int64_t rows = total / row;
  const char* src = static_cast<const char*>(a[s.src]);
  char* dst = static_cast<char*>(a[s.dst]);
  if (src == dst && s.src_map.offset == s.dst_map.offset &&
      s.src_map.strides == s.dst_map.strides) {
    return;
  }
  const int bytes = s.element_bytes;
  ThreadPool::Get().ParallelFor(
      rows, 1.0 * row, [&](int64_t first, int64_t last) {
        Walker ws(s.dims, s.src_map.strides, s.src_map.offset, first * row);
        Walker wd(s.dims, s.dst_map.strides, s.dst_map.offset, first * row);
        for (int64_t r = first; r < last; ++r) {
          if ((r - first) % 256 == 0 && IsCancelled(cancellation)) return;
          StridedCopyBytes(bytes, src + ws.offset() * bytes, ws.inner_stride(),
                           dst + wd.offset() * bytes, wd.inner_stride(), row);
          ws.Advance(row);
          wd.Advance(row);
        }
      });
}

void RunFill(const FillStep& s, absl::Span<void* const> a) {
  StridedCopyBytes(s.element_bytes, a[s.value], 0, a[s.dst], 1, s.count);
}

int64_t ReadIndex(hlo::PrimitiveType type, const void* p) {
  int64_t v = 0;
  DispatchType(type, [&](auto pt) {
    using S = typename TypeTraits<decltype(pt)::value>::Storage;
    if constexpr (std::is_integral_v<S>)
      v = static_cast<int64_t>(*static_cast<const S*>(p));
  });
  if ((type == hlo::PrimitiveType::kU64) && v < 0) v = INT64_MAX;
  return v;
}

void RunDynamicSlice(const DynamicSliceStep& s, absl::Span<void* const> a,
                     const Cancellation* cancellation) {
  const int rank = static_cast<int>(s.array_dims.size());
  std::vector<int64_t> strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * s.array_dims[d + 1];
  int64_t offset = 0;
  for (int d = 0; d < rank; ++d) {
    int64_t start = ReadIndex(s.start_types[d], a[s.start_slots[d]]);
    start = std::clamp<int64_t>(start, 0, s.array_dims[d] - s.sizes[d]);
    offset += start * strides[d];
  }
  std::vector<int64_t> contiguous(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    contiguous[d] = contiguous[d + 1] * s.sizes[d + 1];
  CopyStep copy;
  copy.element_bytes = s.element_bytes;
  copy.dims = s.sizes;
  copy.src = s.src;
  copy.dst = s.dst;
  if (s.update) {
    copy.src_map = {0, contiguous};
    copy.dst_map = {offset, strides};
  } else {
    copy.src_map = {offset, strides};
    copy.dst_map = {0, contiguous};
  }
  RunCopy(copy, a, cancellation);
}

std::string StepName(const LoopStep& s) {
  return absl::StrFormat("loop [%s] %d nodes %d inputs\n",
                         absl::StrJoin(s.dims, ","), s.expr.size(),
                         s.inputs.size());
}
std::string StepName(const DotStep& s) {
  return absl::StrFormat("dot b=%d m=%d n=%d k=%d%s%s\n", s.batch, s.m, s.n,
                         s.k, s.lhs_transposed ? " lhsT" : "",
                         s.rhs_transposed ? " rhsT" : "");
}
std::string StepName(const ReduceStep& s) {
  return absl::StrFormat("reduce [%d,%d,%d]\n", s.outer, s.reduced, s.inner);
}
std::string StepName(const GenericReduceStep& s) {
  return absl::StrFormat("generic reduce [%d,%d,%d]\n", s.outer, s.reduced,
                         s.inner);
}
std::string StepName(const CopyStep& s) {
  return absl::StrFormat("copy [%s]\n", absl::StrJoin(s.dims, ","));
}
std::string StepName(const FillStep& s) {
  return absl::StrFormat("fill %d\n", s.count);
}
std::string StepName(const DynamicSliceStep& s) {
  return s.update ? "dynamic-update-slice\n" : "dynamic-slice\n";
}
std::string StepName(const CollectiveStep& s) { return s.name + "\n"; }
std::string StepName(const KernelStep& s) { return s.kernel->name + "\n"; }

}  // namespace

absl::Status HostProgram::Run(const RunContext& context) const {
  std::vector<void*> addresses(slots.size());
  uint32_t replica = static_cast<uint32_t>(context.replica_id);
  uint32_t partition = static_cast<uint32_t>(context.partition_id);
  for (size_t i = 0; i < slots.size(); ++i) {
    const BufferSlot& slot = slots[i];
    switch (slot.kind) {
      case BufferSlot::Kind::kParameter:
        addresses[i] = context.arguments[slot.index];
        break;
      case BufferSlot::Kind::kResult:
        addresses[i] = context.results[slot.index];
        break;
      case BufferSlot::Kind::kScratch:
        addresses[i] = static_cast<char*>(context.scratch) + slot.offset;
        break;
      case BufferSlot::Kind::kConstant:
        addresses[i] = const_cast<uint64_t*>(constants[slot.index].data());
        break;
      case BufferSlot::Kind::kView:
        addresses[i] = addresses[slot.index];
        break;
      case BufferSlot::Kind::kReplicaId:
        addresses[i] = &replica;
        break;
      case BufferSlot::Kind::kPartitionId:
        addresses[i] = &partition;
        break;
    }
  }
  // PJRT_HOST_PROFILE=1 prints each step's time to stderr (for developers).
  static const bool profile = std::getenv("PJRT_HOST_PROFILE") != nullptr;
  const Cancellation* cancellation = context.cancellation;
  for (const Step& step : steps) {
    const auto start = profile ? std::chrono::steady_clock::now()
                               : std::chrono::steady_clock::time_point();
    absl::Status status = CheckCancelled(cancellation);
    std::visit(
        [&](const auto& s) {
          using S = std::decay_t<decltype(s)>;
          if (!status.ok()) return;
          if constexpr (std::is_same_v<S, CollectiveStep>) {
            status = RunCollective(s, context, addresses);
          }
          if constexpr (std::is_same_v<S, LoopStep>)
            RunLoop(s, addresses, cancellation);
          if constexpr (std::is_same_v<S, DotStep>)
            RunDot(s, addresses, cancellation);
          if constexpr (std::is_same_v<S, ReduceStep>) {
            RunReduce(s, addresses, cancellation);
          }
          if constexpr (std::is_same_v<S, GenericReduceStep>) {
            RunGenericReduce(s, addresses, cancellation);
          }
          if constexpr (std::is_same_v<S, CopyStep>)
            RunCopy(s, addresses, cancellation);
          if constexpr (std::is_same_v<S, FillStep>) RunFill(s, addresses);
          if constexpr (std::is_same_v<S, DynamicSliceStep>) {
            RunDynamicSlice(s, addresses, cancellation);
          }
          if constexpr (std::is_same_v<S, KernelStep>) {
            status = s.kernel->Run(addresses, context);
          }
        },
        step);
    // A step cut short by cancellation leaves its output unfinished: the
    // run fails with the reason.
    if (status.ok()) status = CheckCancelled(cancellation);
    if (profile) {
      std::fprintf(
          stderr, "%9.1f us  step %zu: %s",
          std::chrono::duration<double, std::micro>(
              std::chrono::steady_clock::now() - start)
              .count(),
          static_cast<size_t>(&step - steps.data()),
          std::visit([](const auto& s) { return StepName(s); }, step).c_str());
    }
    if (!status.ok()) {
      if (context.collectives != nullptr) {
        context.collectives->Fail(
            context.replica_id * context.num_partitions + context.partition_id,
            status);
      }
      return status;
    }
  }
  return absl::OkStatus();
}

std::vector<const CollectiveOp*> HostProgram::collectives() const {
  std::vector<const CollectiveOp*> ops;
  for (const Step& step : steps) {
    if (const auto* c = std::get_if<CollectiveStep>(&step)) ops.push_back(c);
    // Those of loop bodies and branches (nested no deeper than the
    // verifier's kMaxCallDepth).
    if (const auto* k = std::get_if<KernelStep>(&step)) {
      for (const HostProgram* sub : k->kernel->sub_programs()) {
        const std::vector<const CollectiveOp*> inner = sub->collectives();
        ops.insert(ops.end(), inner.begin(), inner.end());
      }
    }
  }
  return ops;
}

int64_t HostProgram::host_memory_bytes() const {
  int64_t bytes =
      static_cast<int64_t>(sizeof(*this) + slots.size() * sizeof(BufferSlot) +
                           steps.size() * sizeof(Step));
  for (const auto& c : constants) bytes += static_cast<int64_t>(c.size() * 8);
  for (const Step& step : steps) {
    if (const auto* loop = std::get_if<LoopStep>(&step)) {
      bytes += static_cast<int64_t>(loop->expr.size() * sizeof(ExprNode) +
                                    loop->inputs.size() * sizeof(LoopInput));
    } else if (const auto* reduce = std::get_if<GenericReduceStep>(&step)) {
      bytes += static_cast<int64_t>(reduce->region.size() * sizeof(ExprNode));
    } else if (const auto* kernel = std::get_if<KernelStep>(&step)) {
      bytes += kernel->kernel->host_memory_bytes();
    }
  }
  return bytes;
}

std::string HostProgram::ToString() const {
  std::string out;
  static const char* kKinds[] = {"param", "result",     "scratch",     "const",
                                 "view",  "replica-id", "partition-id"};
  for (size_t i = 0; i < slots.size(); ++i) {
    const BufferSlot& s = slots[i];
    absl::StrAppendFormat(&out, "slot %d: %s %s index=%d offset=%d bytes=%d\n",
                          i, kKinds[static_cast<int>(s.kind)],
                          s.shape.ToString(), s.index, s.offset, s.bytes);
  }
  for (const Step& step : steps) {
    std::visit(
        [&](const auto& s) {
          using S = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<S, LoopStep>) {
            absl::StrAppendFormat(
                &out, "loop [%s] -> slot %d (%d nodes, %d inputs)\n",
                absl::StrJoin(s.dims, ","), s.output_slot, s.expr.size(),
                s.inputs.size());
          } else if constexpr (std::is_same_v<S, DotStep>) {
            absl::StrAppendFormat(
                &out, "dot b=%d m=%d n=%d k=%d slots %d x %d -> %d\n", s.batch,
                s.m, s.n, s.k, s.lhs, s.rhs, s.out);
          } else if constexpr (std::is_same_v<S, ReduceStep>) {
            absl::StrAppendFormat(&out, "reduce [%d,%d,%d] slot %d -> %d\n",
                                  s.outer, s.reduced, s.inner, s.input, s.out);
          } else if constexpr (std::is_same_v<S, GenericReduceStep>) {
            absl::StrAppendFormat(&out, "generic-reduce [%d,%d,%d] x%d\n",
                                  s.outer, s.reduced, s.inner, s.inputs.size());
          } else if constexpr (std::is_same_v<S, CopyStep>) {
            absl::StrAppendFormat(&out, "copy [%s] slot %d -> %d\n",
                                  absl::StrJoin(s.dims, ","), s.src, s.dst);
          } else if constexpr (std::is_same_v<S, FillStep>) {
            absl::StrAppendFormat(&out, "fill %d -> slot %d\n", s.count, s.dst);
          } else if constexpr (std::is_same_v<S, CollectiveStep>) {
            absl::StrAppendFormat(&out, "collective %s\n", s.name);
          } else if constexpr (std::is_same_v<S, KernelStep>) {
            absl::StrAppendFormat(&out, "kernel %s\n", s.kernel->name);
          } else {
            absl::StrAppendFormat(
                &out, "%s slot %d -> %d\n",
                s.update ? "dynamic-update-slice" : "dynamic-slice", s.src,
                s.dst);
          }
        },
        step);
  }
  return out;
}

void RunMatrixProduct(const MatrixProduct& p, double total_flops,
                      const Cancellation* cancellation) {
  if (p.m == 0 || p.n == 0) return;
  const int64_t width = hlo::ByteWidth(p.type);
  if (p.k == 0) {
    for (int64_t r = 0; r < p.m; ++r) {
      std::memset(static_cast<char*>(p.c) + r * p.ldc * width, 0, p.n * width);
    }
    return;
  }
  if (p.type == hlo::PrimitiveType::kF32 &&
      RunSgemm(p, total_flops, cancellation)) {
    return;
  }
  // The column-major C^T = B^T A^T over the same memory, as RunDotTyped,
  // in pieces of rows as it cuts them.
  const double flops = 2.0 * static_cast<double>(p.m) * p.n * p.k;
  ForEachPiece(p.m, flops, cancellation, [&](int64_t lo, int64_t hi) {
    GemmArgs g;
    g.type = p.type;
    g.m = p.n;
    g.n = hi - lo;
    g.k = p.k;
    g.a = p.b;
    g.lda = p.ldb;
    g.a_transposed = p.b_transposed;
    // Rows lo.. of A: lo rows down, or lo columns across when stored
    // transposed.
    g.b = static_cast<const char*>(p.a) +
          (p.a_transposed ? lo : lo * p.lda) * width;
    g.ldb = p.lda;
    g.b_transposed = p.a_transposed;
    g.c = static_cast<char*>(p.c) + lo * p.ldc * width;
    g.ldc = p.ldc;
    Gemm(g);
  });
}

}  // namespace pjrt::compiler::host
