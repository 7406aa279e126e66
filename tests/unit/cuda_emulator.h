// Runs the CUDA backend's generated kernels without a GPU: each kernel,
// compiled with a small shim by the host C++ compiler, runs on the CPU one
// thread per grid (the kernels are grid-stride loops, so one thread covers
// every element), and its results are compared with the host backend's.
// Library calls run as plain loops of their definition: cuBLASLt's matmuls,
// cuFFT's transforms, and the convolutions cuDNN takes as cuDNN's forward
// convolution of the problem CudnnConvFor describes (which checks that
// description against the host), unless told to run their direct kernels.
// For the CUDA codegen tests only.
#ifndef PJRT_TESTS_UNIT_CUDA_EMULATOR_H_
#define PJRT_TESTS_UNIT_CUDA_EMULATOR_H_

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/codegen.h"
#include "compiler/cuda/nccl.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/host/compiler.h"
#include "gtest/gtest.h"
#include "hlo/literal.h"
#include "hlo/minifloat.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/verifier.h"
#include "tests/unit/test_programs.h"

namespace pjrt::compiler::cuda::emulation {

using hlo::PrimitiveType;

// What the host compiler needs to compile CUDA C++ kernels as plain C++.
inline constexpr char kShim[] = R"(
#include <math.h>
#include <stdint.h>
#include <string.h>
#define PJ_HOST_EMULATION 1
#define PJ_WARP 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) alignas(n)
struct pj_dim3 { unsigned x = 0, y = 0, z = 0; };
static pj_dim3 blockIdx, threadIdx, blockDim{1, 1, 1}, gridDim{1, 1, 1};
inline float __uint_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned v; memcpy(&v, &f, 4); return v; }
inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
inline void __syncthreads() {}
template <typename T> T __shfl_down_sync(unsigned, T v, int) { return v; }
// One thread at a time: atomics are plain reads and writes.
template <typename T> T atomicCAS(T* p, T expect, T desired) {
  const T old = *p; if (old == expect) *p = desired; return old;
}
template <typename T> T atomicAdd(T* p, T v) { const T old = *p; *p = old + v; return old; }
template <typename T> T atomicMax(T* p, T v) { const T old = *p; *p = old < v ? v : old; return old; }
template <typename T> T atomicMin(T* p, T v) { const T old = *p; *p = v < old ? v : old; return old; }
template <typename T> T atomicAnd(T* p, T v) { const T old = *p; *p = old & v; return old; }
template <typename T> T atomicOr(T* p, T v) { const T old = *p; *p = old | v; return old; }
template <typename T> T atomicXor(T* p, T v) { const T old = *p; *p = old ^ v; return old; }
)";

inline std::string TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string dir = absl::StrFormat("%s/pjrt-cuda-emulation-%d",
                                    base ? base : "/tmp", getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

struct Arrays {
  std::vector<std::vector<uint64_t>> data;  // 8-byte aligned storage
  std::vector<void*> pointers;
};

inline Arrays Allocate(const std::vector<hlo::Shape>& shapes) {
  Arrays a;
  for (const hlo::Shape& s : shapes) {
    a.data.emplace_back((s.ByteSize() + 7) / 8 + 1, 0);
  }
  for (auto& d : a.data) a.pointers.push_back(d.data());
  return a;
}

// Random values that exercise each type's corners.
inline void Fill(const hlo::Shape& shape, void* out, std::mt19937_64& rng) {
  const int64_t n = shape.ElementCount();
  const PrimitiveType t = shape.element_type();
  if (hlo::IsPackedType(t)) {  // packed: any byte
    for (int64_t b = 0; b < shape.ByteSize(); ++b)
      static_cast<uint8_t*>(out)[b] = rng() & 0xFF;
    return;
  }
  std::uniform_real_distribution<double> real(-3, 3);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    switch (t) {
      case PrimitiveType::kF32:
        static_cast<float*>(out)[i] = static_cast<float>(real(rng));
        break;
      case PrimitiveType::kF64:
        static_cast<double*>(out)[i] = real(rng);
        break;
      case PrimitiveType::kF16: {
        const _Float16 h = static_cast<_Float16>(real(rng));
        std::memcpy(static_cast<uint16_t*>(out) + i, &h, 2);
        break;
      }
      case PrimitiveType::kBf16: {
        const float f = static_cast<float>(real(rng));
        uint32_t u;
        std::memcpy(&u, &f, 4);
        static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(u >> 16);
        break;
      }
      case PrimitiveType::kC64:
        static_cast<float*>(out)[2 * i] = static_cast<float>(real(rng));
        static_cast<float*>(out)[2 * i + 1] = static_cast<float>(real(rng));
        break;
      case PrimitiveType::kC128:
        static_cast<double*>(out)[2 * i] = real(rng);
        static_cast<double*>(out)[2 * i + 1] = real(rng);
        break;
      case PrimitiveType::kPred:
        static_cast<uint8_t*>(out)[i] = bits & 1;
        break;
      default: {
        // Small values mostly (shifts, divisions), extremes sometimes.
        const int width = hlo::ByteWidth(t);
        uint64_t v = (bits % 4 == 0) ? bits >> 2 : (bits >> 8) % 9;
        if (bits % 8 == 1 && hlo::IsSignedInteger(t))
          v = ~uint64_t{0} - (bits >> 8) % 5;
        std::memcpy(static_cast<char*>(out) + i * width, &v, width);
      }
    }
  }
}

inline double Value(PrimitiveType t, const void* data, int64_t i) {
  if (hlo::IsMiniFloat(t)) {
    return hlo::MiniFloatToFloat(t, static_cast<const uint8_t*>(data)[i]);
  }
  switch (t) {
    case PrimitiveType::kF32:
      return static_cast<const float*>(data)[i];
    case PrimitiveType::kF64:
      return static_cast<const double*>(data)[i];
    case PrimitiveType::kF16: {
      _Float16 h;
      std::memcpy(&h, static_cast<const uint16_t*>(data) + i, 2);
      return static_cast<double>(h);
    }
    case PrimitiveType::kBf16: {
      const uint32_t u = uint32_t{static_cast<const uint16_t*>(data)[i]} << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    // Complex element i/2's real (even i) or imaginary (odd i) part.
    case PrimitiveType::kC64:
      return static_cast<const float*>(data)[i];
    case PrimitiveType::kC128:
      return static_cast<const double*>(data)[i];
    default:
      return 0;
  }
}

// Element-wise comparison: integers exactly, floats (and each part of a
// complex number) within `rtol` of the larger magnitude or of 1 (math
// functions and sums differ in their last bits between libraries and
// orders), or bit for bit when `rtol` is 0; NaN where NaN.
inline ::testing::AssertionResult Same(const hlo::Shape& shape,
                                       const void* want, const void* got,
                                       double rtol) {
  const PrimitiveType t = shape.element_type();
  const bool complex = hlo::IsComplex(t);
  // s4, u4 and f4e2m1fn come packed: their bytes are compared.
  const bool packed = hlo::IsPackedType(t);
  const int64_t n =
      packed ? shape.ByteSize() : shape.ElementCount() * (complex ? 2 : 1);
  const bool fl = (hlo::IsFloatingPoint(t) && !packed) || complex;
  int mismatches = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    bool same;
    std::string host_value, cuda_value;
    if (fl) {
      const double a = Value(t, want, i), b = Value(t, got, i);
      // rtol 0: the same bits (+0 is not -0), any NaN for a NaN.
      same =
          (std::isnan(a) && std::isnan(b)) ||
          (rtol == 0
               ? std::signbit(a) == std::signbit(b) && a == b
               : a == b || std::abs(a - b) <=
                               rtol * (std::max(std::abs(a), std::abs(b)) + 1));
      host_value = absl::StrFormat("%.9g", a);
      cuda_value = absl::StrFormat("%.9g", b);
    } else {
      const int w = packed ? 1 : hlo::ByteWidth(t);
      same = std::memcmp(static_cast<const char*>(want) + i * w,
                         static_cast<const char*>(got) + i * w, w) == 0;
      uint64_t a = 0, b = 0;
      std::memcpy(&a, static_cast<const char*>(want) + i * w, w);
      std::memcpy(&b, static_cast<const char*>(got) + i * w, w);
      host_value = absl::StrFormat("0x%x", a);
      cuda_value = absl::StrFormat("0x%x", b);
    }
    if (!same && mismatches++ == 0)
      first = absl::StrFormat("element %d: host %s, cuda %s", i, host_value,
                              cuda_value);
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << n << " elements of " << shape.ToString()
         << " differ; first " << first;
}

using KernelCall = void (*)(void**);

// Stores `v` as element `i` of an array of `t` (f16, bf16, f32, f64).
inline void StoreFloat(PrimitiveType t, void* data, int64_t i, double v) {
  switch (t) {
    case PrimitiveType::kF64:
      static_cast<double*>(data)[i] = v;
      break;
    case PrimitiveType::kF32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      break;
    case PrimitiveType::kF16:
      static_cast<uint16_t*>(data)[i] = hlo::FloatToHalf(static_cast<float>(v));
      break;
    case PrimitiveType::kBf16:
      static_cast<uint16_t*>(data)[i] =
          hlo::FloatToBfloat16(static_cast<float>(v));
      break;
    default:
      ADD_FAILURE() << "no store of " << hlo::PrimitiveTypeName(t);
  }
}

// cuDNN's convolution of the problem `p` (cudnn_conv.h's formula) over the
// strided tensors x, w and y it describes, summed in double: y from x and
// w forward; for backward data every product of dy and w added into the
// element of dx its forward convolution read, for backward filter every
// product of x and dy into the element of dw that read it.
inline void CudnnConvReference(const CudnnConvProblem& p, void* x, void* w,
                               void* y) {
  using Direction = CudnnConvProblem::Direction;
  const size_t spatial = p.x_dims.size() - 2;
  const int64_t groups = p.x_dims[1] / p.w_dims[1];
  const int64_t per_group = p.y_dims[1] / groups;
  // The tensor written and its sums, by offset.
  const bool forward = p.direction == Direction::kForward;
  const bool data = p.direction == Direction::kBackwardData;
  const std::vector<int64_t>& out_dims = forward ? p.y_dims
                                         : data  ? p.x_dims
                                                 : p.w_dims;
  const std::vector<int64_t>& out_strides = forward ? p.y_strides
                                            : data  ? p.x_strides
                                                    : p.w_strides;
  void* out = forward ? y : data ? x : w;
  int64_t extent = 1;
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (out_dims[d] == 0) return;
    extent += (out_dims[d] - 1) * out_strides[d];
  }
  std::vector<double> sums(extent, 0.0);
  // Odometers over y's coordinates and over (c, r...) of the filter.
  const auto next = [](std::vector<int64_t>& c, const std::vector<int64_t>& d,
                       size_t from) {
    for (size_t i = c.size(); i-- > from;) {
      if (++c[i] < d[i]) return true;
      c[i] = 0;
    }
    return false;
  };
  std::vector<int64_t> at(p.y_dims.size(), 0);
  do {
    const int64_t k = at[1];
    const int64_t g = k / per_group;
    int64_t yi = 0;
    for (size_t d = 0; d < at.size(); ++d) yi += at[d] * p.y_strides[d];
    std::vector<int64_t> tap(p.w_dims.size(), 0);  // [k, c, r...]; k unused
    do {
      int64_t xi =
          at[0] * p.x_strides[0] + (g * p.w_dims[1] + tap[1]) * p.x_strides[1];
      int64_t wi = k * p.w_strides[0] + tap[1] * p.w_strides[1];
      bool inside = true;
      for (size_t s = 0; s < spatial && inside; ++s) {
        const int64_t r = tap[2 + s];
        const int64_t in =
            at[2 + s] * p.strides[s] + r * p.dilations[s] - p.pre_padding[s];
        inside = in >= 0 && in < p.x_dims[2 + s];
        xi += in * p.x_strides[2 + s];
        wi += r * p.w_strides[2 + s];  // w is reversed by its copy
      }
      if (!inside) continue;
      if (forward) {
        sums[yi] += Value(p.type, x, xi) * Value(p.type, w, wi);
      } else if (data) {
        sums[xi] += Value(p.type, y, yi) * Value(p.type, w, wi);
      } else {
        sums[wi] += Value(p.type, x, xi) * Value(p.type, y, yi);
      }
    } while (next(tap, p.w_dims, 1));
  } while (next(at, p.y_dims, 0));
  std::vector<int64_t> c(out_dims.size(), 0);
  do {
    int64_t i = 0;
    for (size_t d = 0; d < c.size(); ++d) i += c[d] * out_strides[d];
    StoreFloat(p.type, out, i, sums[i]);
  } while (next(c, out_dims, 0));
}

// CUB's sort of the problem `p` (cub_sort.h): each row's keys ascending as
// unsigned integers by their low `p.bits` bits, stably, and with pairs the
// values moved with them.
inline void CubSortReference(const CubSortProblem& p, const void* keys_in,
                             void* keys_out, const void* values_in,
                             void* values_out) {
  const auto sort = [&](auto zero) {
    using K = decltype(zero);
    const K* in = static_cast<const K*>(keys_in);
    K* out = static_cast<K*>(keys_out);
    const K mask = p.bits >= static_cast<int>(8 * sizeof(K))
                       ? static_cast<K>(~K{0})
                       : static_cast<K>((uint64_t{1} << p.bits) - 1);
    std::vector<int64_t> order(p.n);
    for (int64_t r = 0; r < p.rows; ++r) {
      const int64_t base = r * p.n;
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return (in[base + a] & mask) < (in[base + b] & mask);
      });
      for (int64_t i = 0; i < p.n; ++i) {
        out[base + i] = in[base + order[i]];
        if (p.pairs) {
          static_cast<uint32_t*>(values_out)[base + i] =
              static_cast<const uint32_t*>(values_in)[base + order[i]];
        }
      }
    }
  };
  switch (p.key_bytes) {
    case 1:
      return sort(uint8_t{0});
    case 2:
      return sort(uint16_t{0});
    case 4:
      return sort(uint32_t{0});
    default:
      return sort(uint64_t{0});
  }
}

// Runs a compilation's launches on the CPU: its kernels built by the host
// compiler, its matmuls as plain loops.
class Emulator {
 public:
  explicit Emulator(const CudaCompilation& c) : c_(c) {}
  ~Emulator() {
    if (library_ != nullptr) dlclose(library_);
  }

  ::testing::AssertionResult Build(const std::string& name) {
    std::string source = absl::StrCat(kShim, c_.generated.source);
    std::set<std::string> done;
    ForEachLaunch(c_.generated.launches, [&](const Launch& launch) {
      if (launch.kind != Launch::Kind::kKernel ||
          !done.insert(launch.kernel).second)
        return;
      std::vector<std::string> args;
      for (size_t a = 0; a < launch.params.size(); ++a) {
        // Pointers come as they are, values (an rng's key and draw) by
        // pointer.
        const std::string& type = launch.params[a];
        args.push_back(type.back() == '*'
                           ? absl::StrFormat("(%s)a[%d]", type, a)
                           : absl::StrFormat("*(%s*)a[%d]", type, a));
      }
      absl::StrAppendFormat(
          &source, "extern \"C\" void %s_call(void** a) { %s(%s); }\n",
          launch.kernel, launch.kernel, absl::StrJoin(args, ", "));
    });
    absl::StrAppend(&source,
                    "extern \"C\" void pj_set_thread(unsigned block, unsigned "
                    "thread, unsigned blocks, unsigned threads) {\n"
                    "  blockIdx.x = block; threadIdx.x = thread;\n"
                    "  gridDim.x = blocks; blockDim.x = threads;\n}\n");
    const std::string dir = TempDir();
    const std::string cc = absl::StrCat(dir, "/", name, ".cc");
    const std::string so = absl::StrCat(dir, "/", name, ".so");
    std::ofstream(cc) << source;
    const std::string command =
        absl::StrFormat("%s -std=c++17 -O1 -w -shared -fPIC -o %s %s 2>%s.log",
                        PJRT_HOST_CXX, so, cc, cc);
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(cc + ".log");
      std::stringstream text;
      text << log.rdbuf();
      return ::testing::AssertionFailure()
             << "the host compiler refused the kernels:\n"
             << text.str().substr(0, 4000);
    }
    library_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return ::testing::AssertionFailure() << dlerror();
    std::filesystem::remove(cc);
    std::filesystem::remove(so);
    std::filesystem::remove(cc + ".log");
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Run(const std::vector<void*>& arguments,
                                 const std::vector<void*>& results) {
    const host::HostProgram& p = *c_.lowered;
    std::vector<uint64_t> scratch(p.scratch_bytes() / 8 + 8, 0);
    std::vector<uint64_t> temporaries(c_.generated.temporary_bytes / 8 + 8, 0);
    return RunProgram(p, c_.generated.launches, c_.generated.temporary_offsets,
                      reinterpret_cast<char*>(temporaries.data()), arguments,
                      results, reinterpret_cast<char*>(scratch.data()));
  }

  // Iterations of a while loop before the emulator calls it endless.
  static constexpr int kMaxIterations = 100000;

 private:
  // Runs `launches` of the program `p` (the top level or a sub-program)
  // on its arguments and results, its scratch at `scratch` and its
  // temporaries at `temporaries`.
  ::testing::AssertionResult RunProgram(
      const host::HostProgram& p, const std::vector<Launch>& launches,
      const std::vector<int64_t>& temporary_offsets, char* temporaries,
      const std::vector<void*>& arguments, const std::vector<void*>& results,
      char* scratch) {
    std::vector<void*> at(p.slots.size() + temporary_offsets.size());
    for (size_t k = 0; k < temporary_offsets.size(); ++k) {
      at[p.slots.size() + k] = temporaries + temporary_offsets[k];
    }
    for (size_t i = 0; i < p.slots.size(); ++i) {
      const host::BufferSlot& s = p.slots[i];
      switch (s.kind) {
        case host::BufferSlot::Kind::kParameter:
          at[i] = arguments[s.index];
          break;
        case host::BufferSlot::Kind::kResult:
          at[i] = results[s.index];
          break;
        case host::BufferSlot::Kind::kScratch:
          at[i] = scratch + s.offset;
          break;
        case host::BufferSlot::Kind::kConstant:
          at[i] = const_cast<uint64_t*>(p.constants[s.index].data());
          break;
        case host::BufferSlot::Kind::kView:
          at[i] = at[s.index];
          break;
        case host::BufferSlot::Kind::kReplicaId:
          at[i] = &ids_[0];
          break;
        case host::BufferSlot::Kind::kPartitionId:
          at[i] = &ids_[1];
          break;
      }
    }
    for (const Launch& launch : launches) {
      if (launch.kind == Launch::Kind::kSort) {
        const auto slot = [&](int a) {
          return launch.slots[a] < 0 ? nullptr : at[launch.slots[a]];
        };
        CubSortReference(launch.sort, slot(0), slot(1), slot(2), slot(3));
        ++cub_sorts_;
        continue;
      }
      std::vector<void*> args;
      for (int slot : launch.slots) args.push_back(at[slot]);
      if (launch.kind == Launch::Kind::kGemm) {
        Gemm(launch.gemm, args[0], args[1], args[2]);
        continue;
      }
      if (launch.kind == Launch::Kind::kFft) {
        Fft(launch.fft, args[0], args[1]);
        continue;
      }
      if (launch.kind == Launch::Kind::kCollective) {
        if (!fake_collectives_) {
          return ::testing::AssertionFailure()
                 << "collectives need NCCL and GPUs";
        }
        FakeCollective(launch.collective, args);
        continue;
      }
      if (launch.kind == Launch::Kind::kWhile ||
          launch.kind == Launch::Kind::kConditional) {
        auto ran = RunControlFlow(launch.control,
                                  launch.kind == Launch::Kind::kWhile, at);
        if (!ran) return ran;
        continue;
      }
      if (launch.cudnn != nullptr && cudnn_) {
        CudnnConvReference(*launch.cudnn, at[launch.cudnn_slots[0]],
                           at[launch.cudnn_slots[1]],
                           at[launch.cudnn_slots[2]]);
        ++cudnn_convolutions_;
        if (launch.cudnn_then != nullptr) {
          const Launch& then = *launch.cudnn_then;
          std::vector<void*> then_args;
          for (int slot : then.slots) then_args.push_back(at[slot]);
          auto call = reinterpret_cast<KernelCall>(
              dlsym(library_, (then.kernel + "_call").c_str()));
          if (call == nullptr)
            return ::testing::AssertionFailure() << "no kernel " << then.kernel;
          call(then_args.data());
        }
        continue;
      }
      if (launch.skip_when_same_memory && args[0] == args[1]) continue;
      // An rng's key and draw, as a run with seed 0 (the reference's) has
      // them.
      uint64_t key = 0, draw = 0;
      if (launch.rng != nullptr) {
        key = launch.rng->Key(0);
        draw = launch.rng->NextDraw();
        args.push_back(&key);
        args.push_back(&draw);
      }
      auto call = reinterpret_cast<KernelCall>(
          dlsym(library_, (launch.kernel + "_call").c_str()));
      if (call == nullptr)
        return ::testing::AssertionFailure() << "no kernel " << launch.kernel;
      if (!reversed_kernels_.empty() &&
          launch.kernel.find(reversed_kernels_) != std::string::npos) {
        RunReversed(launch, call, args.data());
      } else {
        call(args.data());
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Runs `launch` as its grid of threads, one at a time, the last thread of
  // the last block first: a grid-stride kernel then meets its elements in
  // another order than the host's.
  void RunReversed(const Launch& launch, KernelCall call, void** args) {
    using SetThread = void (*)(unsigned, unsigned, unsigned, unsigned);
    auto set = reinterpret_cast<SetThread>(dlsym(library_, "pj_set_thread"));
    const auto blocks = static_cast<unsigned>(launch.blocks);
    const auto threads = static_cast<unsigned>(launch.threads);
    for (unsigned b = blocks; b-- > 0;) {
      for (unsigned t = threads; t-- > 0;) {
        set(b, t, blocks, threads);
        call(args);
      }
    }
    set(0, 0, 1, 1);
  }

  // A while or conditional, as the CUDA backend runs it: sub-programs,
  // the predicate or selector read between them.
  ::testing::AssertionResult RunControlFlow(const ControlFlow& c, bool loop,
                                            const std::vector<void*>& at) {
    char* scratch = static_cast<char*>(at[c.scratch]);
    char* temporaries = static_cast<char*>(at[c.temporaries]);
    const auto run = [&](const SubProgram& sub,
                         const std::vector<void*>& arguments,
                         const std::vector<void*>& results) {
      return RunProgram(*sub.lowered, sub.launches, sub.temporary_offsets,
                        temporaries, arguments, results, scratch);
    };
    if (!loop) {
      int64_t branch = 0;
      const int64_t last = static_cast<int64_t>(c.programs.size()) - 1;
      if (c.selector_is_pred) {
        branch = *static_cast<const uint8_t*>(at[c.selector]) != 0 ? 0 : 1;
      } else {
        int32_t index;
        std::memcpy(&index, at[c.selector], 4);
        branch = index < 0 || index > last ? last : index;
      }
      std::vector<void*> arguments, results;
      for (int slot : c.inputs[branch]) arguments.push_back(at[slot]);
      for (int slot : c.outputs) results.push_back(at[slot]);
      return run(*c.programs[branch], arguments, results);
    }
    const size_t n = c.state.size();
    std::vector<void*> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = at[c.state[i]];
      b[i] = c.spare[i] >= 0 ? at[c.spare[i]] : a[i];
      if (at[c.init[i]] != a[i]) std::memmove(a[i], at[c.init[i]], c.bytes[i]);
    }
    for (int iteration = 0;; ++iteration) {
      if (iteration == kMaxIterations) {
        return ::testing::AssertionFailure() << "the loop did not end";
      }
      if (c.trip_count >= 0) {
        if (iteration == c.trip_count) break;
      } else {
        auto ran = run(*c.programs[0], a, {at[c.predicate]});
        if (!ran) return ran;
        if (*static_cast<const uint8_t*>(at[c.predicate]) == 0) break;
      }
      auto ran = run(*c.programs[1], a, b);
      if (!ran) return ran;
      std::swap(a, b);
    }
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != at[c.state[i]]) std::memcpy(at[c.state[i]], a[i], c.bytes[i]);
    }
    return ::testing::AssertionSuccess();
  }

 private:
  template <typename T, typename O = T>
  static void GemmTyped(const host::DotStep& s, T* out, const O* lhs,
                        const O* rhs) {
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          T acc = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            const T l = Widen(s.lhs_transposed ? lhs[(b * s.k + k) * s.m + i]
                                               : lhs[(b * s.m + i) * s.k + k]);
            const T r = Widen(s.rhs_transposed ? rhs[(b * s.n + j) * s.k + k]
                                               : rhs[(b * s.k + k) * s.n + j]);
            acc += l * r;
          }
          out[(b * s.m + i) * s.n + j] = acc;
        }
      }
    }
  }
  static float Widen(float v) { return v; }
  static double Widen(double v) { return v; }
  static float Widen(_Float16 v) { return static_cast<float>(v); }
  struct Bf16 {
    uint16_t bits;
  };
  static float Widen(Bf16 v) {
    const uint32_t u = uint32_t{v.bits} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // An fp8 operand's `count` elements as floats (exact).
  static std::vector<float> Fp8Values(PrimitiveType type, const void* data,
                                      int64_t count) {
    std::vector<float> values(count);
    const auto* codes = static_cast<const uint8_t*>(data);
    for (int64_t i = 0; i < count; ++i) {
      values[i] = hlo::MiniFloatToFloat(type, codes[i]);
    }
    return values;
  }
  static void Gemm(const host::DotStep& s, void* out, void* lhs, void* rhs) {
    if (hlo::IsMiniFloat(s.operand_type)) {
      // As cuBLASLt's fp8 matmuls: f32 products of the exact values.
      std::vector<float> l = Fp8Values(s.operand_type, lhs,
                                       s.batch * s.m * s.k),
                         r = Fp8Values(s.rhs_type(), rhs, s.batch * s.k * s.n);
      GemmTyped(s, static_cast<float*>(out), l.data(), r.data());
    } else if (s.operand_type == PrimitiveType::kBf16) {
      GemmTyped(s, static_cast<float*>(out), static_cast<Bf16*>(lhs),
                static_cast<Bf16*>(rhs));
    } else if (s.operand_type == PrimitiveType::kF16) {
      GemmTyped(s, static_cast<float*>(out), static_cast<_Float16*>(lhs),
                static_cast<_Float16*>(rhs));
    } else if (s.type == PrimitiveType::kF64) {
      GemmTyped(s, static_cast<double*>(out), static_cast<double*>(lhs),
                static_cast<double*>(rhs));
    } else {
      GemmTyped(s, static_cast<float*>(out), static_cast<float*>(lhs),
                static_cast<float*>(rhs));
    }
  }

  // Instead of cuFFT: unnormalized DFTs, summed directly in double, one
  // dimension at a time (an IRFFT's last one from its Hermitian half, as
  // the host rebuilds it).
  static void Fft(const Launch::Fft& f, void* out, const void* in) {
    using C = std::complex<double>;
    const bool irfft = f.type == host::FftType::kIrfft;
    const bool real_in = f.type == host::FftType::kRfft;
    const double sign = f.type == host::FftType::kIfft || irfft ? 1 : -1;
    std::vector<int64_t> in_dims = f.lengths, out_dims = f.lengths;
    const int64_t n_last = f.lengths.back(), half = n_last / 2 + 1;
    if (f.type == host::FftType::kRfft) out_dims.back() = half;
    if (irfft) in_dims.back() = half;
    const std::vector<int64_t>& work_dims = irfft ? in_dims : f.lengths;
    int64_t in_block = 1, out_block = 1, work_block = 1;
    for (int64_t d : in_dims) in_block *= d;
    for (int64_t d : out_dims) out_block *= d;
    for (int64_t d : work_dims) work_block *= d;
    const auto load =
        [&](int64_t i) -> C {  // element i of the input, as complex
      if (f.wide) {
        const double* v = static_cast<const double*>(in);
        return real_in ? C(v[i], 0) : C(v[2 * i], v[2 * i + 1]);
      }
      const float* v = static_cast<const float*>(in);
      return real_in ? C(v[i], 0) : C(v[2 * i], v[2 * i + 1]);
    };
    const auto store = [&](int64_t i, C value, bool real) {
      if (f.wide) {
        double* v = static_cast<double*>(out);
        if (real) {
          v[i] = value.real();
        } else {
          v[2 * i] = value.real();
          v[2 * i + 1] = value.imag();
        }
      } else {
        float* v = static_cast<float*>(out);
        if (real) {
          v[i] = static_cast<float>(value.real());
        } else {
          v[2 * i] = static_cast<float>(value.real());
          v[2 * i + 1] = static_cast<float>(value.imag());
        }
      }
    };
    const auto dft = [&](const std::vector<C>& x) {
      const int64_t n = static_cast<int64_t>(x.size());
      std::vector<C> y(n);
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < n; ++j) {
          y[k] +=
              x[j] * std::polar(1.0, sign * 2 * M_PI *
                                         static_cast<double>(j * k % n) / n);
        }
      }
      return y;
    };
    std::vector<C> work(work_block);
    for (int64_t b = 0; b < f.batch; ++b) {
      for (int64_t i = 0; i < in_block; ++i) work[i] = load(b * in_block + i);
      const int dims = static_cast<int>(work_dims.size()) - (irfft ? 1 : 0);
      for (int d = 0; d < dims; ++d) {
        const int64_t n = work_dims[d];
        int64_t inner = 1;
        for (size_t k = d + 1; k < work_dims.size(); ++k) inner *= work_dims[k];
        for (int64_t o = 0; o < work_block / (n * inner); ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            std::vector<C> line(n);
            for (int64_t k = 0; k < n; ++k)
              line[k] = work[(o * n + k) * inner + i];
            line = dft(line);
            for (int64_t k = 0; k < n; ++k)
              work[(o * n + k) * inner + i] = line[k];
          }
        }
      }
      if (irfft) {
        for (int64_t r = 0; r < work_block / half; ++r) {
          std::vector<C> line(n_last);
          for (int64_t k = 0; k < n_last; ++k) {
            line[k] = k < half ? work[r * half + k]
                               : std::conj(work[r * half + n_last - k]);
          }
          line = dft(line);
          for (int64_t k = 0; k < n_last; ++k)
            store(b * out_block + r * n_last + k, line[k], true);
        }
      } else {
        const int64_t n = work_dims.back(), keep = out_dims.back();
        for (int64_t r = 0; r < work_block / n; ++r) {
          for (int64_t k = 0; k < keep; ++k) {
            store(b * out_block + r * keep + k, work[r * n + k], false);
          }
        }
      }
    }
  }

  // dst[i] = the sum over members p < n of src[i] + p, in `type` (f32,
  // f64, s32 or u32).
  template <typename T>
  static void FakeSum(const void* src, void* dst, int64_t count, int64_t n) {
    for (int64_t i = 0; i < count; ++i) {
      T sum = 0;
      for (int64_t p = 0; p < n; ++p)
        sum += static_cast<const T*>(src)[i] + static_cast<T>(p);
      static_cast<T*>(dst)[i] = sum;
    }
  }
  static void FakeSum(PrimitiveType type, const void* src, void* dst,
                      int64_t count, int64_t n) {
    if (type == PrimitiveType::kS32)
      return FakeSum<int32_t>(src, dst, count, n);
    if (type == PrimitiveType::kU32)
      return FakeSum<uint32_t>(src, dst, count, n);
    if (type == PrimitiveType::kF64) return FakeSum<double>(src, dst, count, n);
    FakeSum<float>(src, dst, count, n);
  }

  // dst[i] for i < count = the maximum (or minimum) over members p < n of
  // src[(i + p) % src_count], in u8: member p holds the operand (of
  // src_count bytes) rotated by p bytes.
  static void FakeBytes(bool maximum, const void* src, void* dst, int64_t count,
                        int64_t n, int64_t src_count) {
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < count; ++i) {
      uint8_t v = in[i];
      for (int64_t p = 1; p < n; ++p) {
        const uint8_t x = in[(i + p) % src_count];
        v = maximum ? std::max(v, x) : std::min(v, x);
      }
      out[i] = v;
    }
  }

  static void FakeStridedCopies(const std::vector<StridedCopy>& copies,
                                void* dst, const void* src) {
    for (const StridedCopy& c : copies) {
      for (int64_t r = 0; r < c.rows; ++r) {
        std::memcpy(
            static_cast<char*>(dst) + c.dst_offset + r * c.dst_pitch,
            static_cast<const char*>(src) + c.src_offset + r * c.src_pitch,
            c.row_bytes);
      }
    }
  }

  // Instead of NCCL, as participant 0 of a group of fake_group_size_
  // whose members p hold its operand + p: an all-gather gives the blocks
  // input + p in order (f32), an all-to-all block p of member p's input
  // (block 0 of input + p, f32; strided pieces through its temporaries as
  // RunNcclCollective moves them), a reduce-scatter block 0 summed over
  // the group, an all-reduce every operand summed over the group (f32,
  // f64, s32, u32; sums); for u8 maxima and minima (bit planes), member p holds
  // the operand rotated by p bytes (FakeBytes).
  void FakeCollective(const host::CollectiveStep& s,
                      const std::vector<void*>& args) const {
    int64_t in = 1, out = 1;
    for (int64_t d : s.input_dims) in *= d;
    for (int64_t d : s.output_dims) out *= d;
    const bool bytes =
        s.types[0] == PrimitiveType::kU8 &&
        (s.op == host::ExprOp::kMaximum || s.op == host::ExprOp::kMinimum);
    if (s.kind == host::CollectiveStep::Kind::kAllGather) {
      const float* src = static_cast<const float*>(args[0]);
      float* dst = static_cast<float*>(args[1]);
      for (int64_t i = 0; i < out; ++i)
        dst[i] = src[i % in] + static_cast<float>(i / in);
    } else if (s.kind == host::CollectiveStep::Kind::kAllToAll) {
      const int64_t n = fake_group_size_;
      const bool strided = AllToAllNeedsTemporaries(s);
      void* send = args[0];
      void* receive = args[1];
      if (strided) {
        FakeStridedCopies(AllToAllPieceCopies(s, n, true), args[2], args[0]);
        send = args[2];
        receive = args[3];
      }
      const int64_t chunk = in / n;
      for (int64_t i = 0; i < in; ++i) {
        static_cast<float*>(receive)[i] =
            static_cast<const float*>(send)[i % chunk] +
            static_cast<float>(i / chunk);
      }
      if (strided) {
        FakeStridedCopies(AllToAllPieceCopies(s, n, false), args[1], args[3]);
      }
    } else if (s.kind == host::CollectiveStep::Kind::kReduceScatter) {
      if (bytes) {
        FakeBytes(s.op == host::ExprOp::kMaximum, args[0], args[1], out,
                  fake_group_size_, in);
        return;
      }
      FakeSum(s.types[0], args[0], args[1], out, in / out);
    } else {
      const size_t k = s.inputs.size();
      for (size_t j = 0; j < k; ++j) {
        if (s.types[j] == PrimitiveType::kU8 &&
            (s.op == host::ExprOp::kMaximum ||
             s.op == host::ExprOp::kMinimum)) {
          FakeBytes(s.op == host::ExprOp::kMaximum, args[j], args[k + j],
                    s.operand_elements[j], fake_group_size_,
                    s.operand_elements[j]);
          continue;
        }
        FakeSum(s.types[j], args[j], args[k + j], s.operand_elements[j],
                fake_group_size_);
      }
    }
  }

 public:
  bool fake_collectives_ = false;
  // Kernels whose name holds this run thread by thread in reverse
  // (RunReversed); none when empty.
  std::string reversed_kernels_;
  int64_t fake_group_size_ = 4;
  // Convolutions cuDNN takes run as cuDNN would (CudnnConvReference), not
  // as their direct kernels; how many did.
  bool cudnn_ = true;
  int cudnn_convolutions_ = 0;
  // Sorts CUB ran (as CubSortReference).
  int cub_sorts_ = 0;

 private:
  const CudaCompilation& c_;
  void* library_ = nullptr;
  uint32_t ids_[2] = {0, 0};
};

inline std::unique_ptr<hlo::Module> Parse(const std::string& text) {
  auto module = hlo::ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  absl::Status verified = hlo::VerifyModule(**module, text);
  EXPECT_TRUE(verified.ok()) << verified;
  if (!verified.ok()) return nullptr;
  EXPECT_TRUE(hlo::SimplifyModule(module->get()).ok());
  return *std::move(module);
}

struct Case {
  const char* name;
  const char* hlo;
  double rtol = 1e-6;
};

// Runs the generated kernels of `compiled` on the CPU and the host
// backend's program for `module`, and compares every result. Kernels whose
// name holds `reversed_kernels` (when not empty) run thread by thread in
// reverse (Emulator::RunReversed). Convolutions cuDNN takes run as cuDNN
// computes them, or as their direct kernels when `cudnn` is false; how
// many ran so goes to `cudnn_convolutions` (when not null), and how many
// sorts CUB ran to `cub_sorts`.
inline void CompareWithHost(const hlo::Module& module,
                            const CudaCompilation& compiled,
                            const std::string& name, double rtol,
                            const std::string& reversed_kernels = "",
                            bool cudnn = true,
                            int* cudnn_convolutions = nullptr,
                            int* cub_sorts = nullptr) {
  auto reference = host::CompileForHost(module);
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::mt19937_64 rng(7);
  const std::vector<hlo::Shape>& params = (*reference)->parameter_shapes();
  Arrays inputs = Allocate(params);
  for (size_t i = 0; i < params.size(); ++i)
    Fill(params[i], inputs.pointers[i], rng);
  const std::vector<hlo::Shape>& shapes = (*reference)->result_shapes();
  Arrays want = Allocate(shapes), got = Allocate(shapes);

  std::vector<uint64_t> scratch((*reference)->scratch_bytes() / 8 + 16);
  RunContext context;
  context.arguments = inputs.pointers;
  context.results = want.pointers;
  context.scratch = reinterpret_cast<void*>(
      (reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  ASSERT_TRUE((*reference)->Run(context).ok());

  Emulator emulator(compiled);
  emulator.reversed_kernels_ = reversed_kernels;
  emulator.cudnn_ = cudnn;
  ASSERT_TRUE(emulator.Build(name));
  ASSERT_TRUE(emulator.Run(inputs.pointers, got.pointers));
  for (size_t r = 0; r < shapes.size(); ++r) {
    EXPECT_TRUE(Same(shapes[r], want.pointers[r], got.pointers[r], rtol))
        << "result " << r;
  }
  if (cudnn_convolutions != nullptr) {
    *cudnn_convolutions = emulator.cudnn_convolutions_;
  }
  if (cub_sorts != nullptr) *cub_sorts = emulator.cub_sorts_;
}

// Compiles `hlo` for sm_90 through NVRTC and compares its kernels' results
// with the host backend's.
inline void CheckAgainstHost(const Case& c, int* cudnn_convolutions = nullptr) {
  SCOPED_TRACE(c.name);
  std::unique_ptr<hlo::Module> module = Parse(c.hlo);
  ASSERT_NE(module, nullptr);
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  CompareWithHost(*module, *compiled, c.name, c.rtol, "", true,
                  cudnn_convolutions);
}

}  // namespace pjrt::compiler::cuda::emulation

#endif  // PJRT_TESTS_UNIT_CUDA_EMULATOR_H_
