// The CUDA backend without a GPU: every generated kernel is compiled by
// NVRTC, and also, with a small shim, by the host C++ compiler, then run on
// the CPU one thread per grid (the kernels are grid-stride loops, so one
// thread covers every element) and compared with the host backend's
// results. That checks the index arithmetic, the fusion decisions, the
// element-type handling and the scalar semantics of the generated code;
// the GPU-only parts (warp shuffles, block-level reductions, cuBLASLt) are
// checked by scripts/gpu-check on a machine with a GPU.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
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
#include "compiler/cuda/nvrtc.h"
#include "compiler/host/compiler.h"
#include "gtest/gtest.h"
#include "hlo/float8.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "hlo/verifier.h"
#include "tests/unit/test_programs.h"

namespace pjrt::compiler::cuda {
namespace {

using hlo::PrimitiveType;

// What the host compiler needs to compile CUDA C++ kernels as plain C++.
constexpr char kShim[] = R"(
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
)";

std::string TempDir() {
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

Arrays Allocate(const std::vector<hlo::Shape>& shapes) {
  Arrays a;
  for (const hlo::Shape& s : shapes) {
    a.data.emplace_back((s.ByteSize() + 7) / 8 + 1, 0);
  }
  for (auto& d : a.data) a.pointers.push_back(d.data());
  return a;
}

// Random values that exercise each type's corners.
void Fill(const hlo::Shape& shape, void* out, std::mt19937_64& rng) {
  const int64_t n = shape.ElementCount();
  const PrimitiveType t = shape.element_type();
  if (t == PrimitiveType::kS4 || t == PrimitiveType::kU4) {  // packed: any byte
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

double Value(PrimitiveType t, const void* data, int64_t i) {
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
    case PrimitiveType::kF8E4M3FN:
      return hlo::Float8E4M3FN::ToFloat(static_cast<const uint8_t*>(data)[i]);
    case PrimitiveType::kF8E5M2:
      return hlo::Float8E5M2::ToFloat(static_cast<const uint8_t*>(data)[i]);
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
// orders), NaN where NaN.
::testing::AssertionResult Same(const hlo::Shape& shape, const void* want,
                                const void* got, double rtol) {
  const PrimitiveType t = shape.element_type();
  const bool complex = hlo::IsComplex(t);
  const bool int4 = t == PrimitiveType::kS4 || t == PrimitiveType::kU4;
  // s4 and u4 come packed: their bytes are compared.
  const int64_t n =
      int4 ? shape.ByteSize() : shape.ElementCount() * (complex ? 2 : 1);
  const bool fl = hlo::IsFloatingPoint(t) || complex;
  int mismatches = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    bool same;
    std::string host_value, cuda_value;
    if (fl) {
      const double a = Value(t, want, i), b = Value(t, got, i);
      same = (std::isnan(a) && std::isnan(b)) || a == b ||
             std::abs(a - b) <= rtol * (std::max(std::abs(a), std::abs(b)) + 1);
      host_value = absl::StrFormat("%.9g", a);
      cuda_value = absl::StrFormat("%.9g", b);
    } else {
      const int w = int4 ? 1 : hlo::ByteWidth(t);
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
      call(args.data());
    }
    return ::testing::AssertionSuccess();
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
  static void Gemm(const host::DotStep& s, void* out, void* lhs, void* rhs) {
    if (s.operand_type == PrimitiveType::kBf16) {
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
  // s32 or u32).
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
    FakeSum<float>(src, dst, count, n);
  }

  // Instead of NCCL, as participant 0 of a group of fake_group_size_
  // whose members p hold its operand + p: an all-gather gives the blocks
  // input + p in order (f32), a reduce-scatter block 0 summed over the
  // group, an all-reduce every operand summed over the group (f32, s32,
  // u32; sums only).
  void FakeCollective(const host::CollectiveStep& s,
                      const std::vector<void*>& args) const {
    int64_t in = 1, out = 1;
    for (int64_t d : s.input_dims) in *= d;
    for (int64_t d : s.output_dims) out *= d;
    if (s.kind == host::CollectiveStep::Kind::kAllGather) {
      const float* src = static_cast<const float*>(args[0]);
      float* dst = static_cast<float*>(args[1]);
      for (int64_t i = 0; i < out; ++i)
        dst[i] = src[i % in] + static_cast<float>(i / in);
    } else if (s.kind == host::CollectiveStep::Kind::kReduceScatter) {
      FakeSum(s.types[0], args[0], args[1], out, in / out);
    } else {
      const size_t k = s.inputs.size();
      for (size_t j = 0; j < k; ++j) {
        FakeSum(s.types[j], args[j], args[k + j], s.operand_elements[j],
                fake_group_size_);
      }
    }
  }

 public:
  bool fake_collectives_ = false;
  int64_t fake_group_size_ = 4;

 private:
  const CudaCompilation& c_;
  void* library_ = nullptr;
  uint32_t ids_[2] = {0, 0};
};

std::unique_ptr<hlo::Module> Parse(const std::string& text) {
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
// backend's program for `module`, and compares every result.
void CompareWithHost(const hlo::Module& module, const CudaCompilation& compiled,
                     const std::string& name, double rtol) {
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
  ASSERT_TRUE(emulator.Build(name));
  ASSERT_TRUE(emulator.Run(inputs.pointers, got.pointers));
  for (size_t r = 0; r < shapes.size(); ++r) {
    EXPECT_TRUE(Same(shapes[r], want.pointers[r], got.pointers[r], rtol))
        << "result " << r;
  }
}

// Compiles `hlo` for sm_90 through NVRTC and compares its kernels' results
// with the host backend's.
void CheckAgainstHost(const Case& c) {
  SCOPED_TRACE(c.name);
  std::unique_ptr<hlo::Module> module = Parse(c.hlo);
  ASSERT_NE(module, nullptr);
  auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  CompareWithHost(*module, *compiled, c.name, c.rtol);
}

const Case kCases[] = {
    {"elementwise_f32_broadcast_transpose", R"(
HloModule m
ENTRY e {
  a = f32[33,65] parameter(0)
  b = f32[65] parameter(1)
  bb = f32[33,65] broadcast(b), dimensions={1}
  s = f32[33,65] add(a, bb)
  m = f32[33,65] multiply(s, a)
  x = f32[33,65] exponential(m)
  l = f32[33,65] log-plus-one(x)
  t = f32[33,65] tanh(l)
  q = f32[33,65] sqrt(x)
  r = f32[33,65] rsqrt(x)
  c = f32[33,65] subtract(q, r)
  d = f32[33,65] divide(c, t)
  mx = f32[33,65] maximum(d, a)
  mn = f32[33,65] minimum(mx, s)
  ROOT tr = f32[65,33] transpose(mn), dimensions={1,0}
})",
     1e-4},
    {"transposes_go_through_shared_memory_tiles", R"(
HloModule m
ENTRY e {
  a = f32[70,45] parameter(0)
  b = f32[45,70] parameter(1)
  c = bf16[5,40,37] parameter(2)
  t = f32[45,70] transpose(a), dimensions={1,0}
  s = f32[45,70] add(t, b)
  e = f32[45,70] exponential(s)
  p = bf16[37,5,40] transpose(c), dimensions={2,0,1}
  n = bf16[37,5,40] negate(p)
  ROOT r = (f32[45,70], bf16[37,5,40]) tuple(e, n)
})",
     1e-5},
    {"half_types_round_after_every_op", R"(
HloModule m
ENTRY e {
  a = bf16[300] parameter(0)
  b = f16[300] parameter(1)
  af = f32[300] convert(a)
  bf = f32[300] convert(b)
  s = f32[300] add(af, bf)
  sb = bf16[300] convert(s)
  m = bf16[300] multiply(sb, a)
  e = bf16[300] exponential(m)
  sh = f16[300] convert(e)
  n = f16[300] negate(sh)
  ROOT t = (bf16[300], f16[300]) tuple(e, n)
})",
     1e-2},
    {"integer_semantics", R"(
HloModule m
ENTRY e {
  a = s32[257] parameter(0)
  b = s32[257] parameter(1)
  d = s32[257] divide(a, b)
  r = s32[257] remainder(a, b)
  sl = s32[257] shift-left(a, b)
  sr = s32[257] shift-right-arithmetic(a, b)
  su = s32[257] shift-right-logical(a, b)
  p = s32[257] power(a, b)
  c = s32[257] count-leading-zeros(a)
  n = s32[257] popcnt(a)
  x = s32[257] xor(d, r)
  ab = s32[257] abs(a)
  sg = s32[257] sign(b)
  ROOT t = (s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257], s32[257]) tuple(d, r, sl, sr, su, p, c, n, x, ab, sg)
})"},
    {"narrow_and_unsigned_integers", R"(
HloModule m
ENTRY e {
  a = u8[100] parameter(0)
  b = s16[100] parameter(1)
  c = u64[100] parameter(2)
  ab = s16[100] convert(a)
  s = s16[100] add(ab, b)
  m = s16[100] multiply(s, b)
  cu = u64[100] convert(m)
  d = u64[100] divide(c, cu)
  sr = u64[100] shift-right-logical(c, cu)
  ROOT t = (s16[100], u64[100], u64[100]) tuple(m, d, sr)
})"},
    {"converts_saturate_and_compare", R"(
HloModule m
ENTRY e {
  a = f32[64] parameter(0)
  k = f32[] constant(1e10)
  kb = f32[64] broadcast(k), dimensions={}
  big = f32[64] multiply(a, kb)
  i8 = s8[64] convert(big)
  u = u16[64] convert(big)
  i64 = s64[64] convert(big)
  b = pred[64] compare(a, big), direction=LT
  t = pred[64] compare(a, big), direction=GT, type=TOTALORDER
  nb = pred[64] not(b)
  sel = f32[64] select(nb, a, big)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  cl = f32[64] clamp(lo, sel, hi)
  bits = s32[64] bitcast-convert(cl)
  fin = pred[64] is-finite(big)
  f = f64[64] convert(a)
  ROOT r = (s8[64], u16[64], s64[64], pred[64], pred[64], f32[64], s32[64], pred[64], f64[64]) tuple(i8, u, i64, b, t, cl, bits, fin, f)
})"},
    {"iota_slice_pad_concat_reverse", R"(
HloModule m
ENTRY e {
  a = f32[10,12] parameter(0)
  i = s32[10,12] iota(), iota_dimension=1
  f = f32[10,12] convert(i)
  s = f32[10,12] add(a, f)
  sl = f32[4,5] slice(s), slice={[2:10:2], [1:11:2]}
  z = f32[] constant(0)
  p = f32[7,9] pad(sl, z), padding=1_2x0_4
  r = f32[7,9] reverse(p), dimensions={0,1}
  c = f32[14,9] concatenate(p, r), dimensions={0}
  re = f32[9,14] reshape(c)
  ROOT t = (f32[9,14], f32[4,5]) tuple(re, sl)
})"},
    {"dynamic_slices_clamp_their_starts", R"(
HloModule m
ENTRY e {
  a = f32[8,6] parameter(0)
  u = f32[3,4] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ds = f32[3,4] dynamic-slice(a, i, j), dynamic_slice_sizes={3,4}
  dus = f32[8,6] dynamic-update-slice(a, u, j, i)
  ROOT t = (f32[3,4], f32[8,6]) tuple(ds, dus)
})"},
    {"reductions_rows_columns_whole", R"(
HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y) }
max { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] maximum(x, y) }
mul { x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT r = s32[] multiply(x, y) }
and { x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT r = pred[] and(x, y) }
ENTRY e {
  a = f32[37,300] parameter(0)
  b = s32[20,3,5] parameter(1)
  p = pred[40,70] parameter(2)
  z = f32[] constant(0)
  ninf = f32[] constant(-inf)
  one = s32[] constant(1)
  t = pred[] constant(true)
  rows = f32[37] reduce(a, z), dimensions={1}, to_apply=add
  cols = f32[300] reduce(a, ninf), dimensions={0}, to_apply=max
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  mid = s32[20,5] reduce(b, one), dimensions={1}, to_apply=mul
  pa = pred[70] reduce(p, t), dimensions={0}, to_apply=and
  ROOT r = (f32[37], f32[300], f32[], s32[20,5], pred[70]) tuple(rows, cols, all, mid, pa)
})",
     1e-4},
    // Inits are the reducers' identities: XLA lets a backend apply the init
    // value once per partial reduction (the host backend does, per thread).
    {"long_rows_reduce_in_chunks_then_partials", R"(
HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y) }
max { x = s8[] parameter(0)
  y = s8[] parameter(1)
  ROOT r = s8[] maximum(x, y) }
addi { x = s16[] parameter(0)
  y = s16[] parameter(1)
  ROOT r = s16[] add(x, y) }
ENTRY e {
  a = f32[3,100003] parameter(0)
  b = s8[70000] parameter(1)
  c = s16[2,90000] parameter(2)
  z = f32[] constant(0)
  lo = s8[] constant(-128)
  zi = s16[] constant(0)
  rows = f32[3] reduce(a, z), dimensions={1}, to_apply=add
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  m = s8[] reduce(b, lo), dimensions={0}, to_apply=max
  w = s16[2] reduce(c, zi), dimensions={1}, to_apply=addi
  ROOT r = (f32[3], f32[], s8[], s16[2]) tuple(rows, all, m, w)
})",
     1e-4},
    {"variadic_reduce_argmax", R"(
HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GE
  v = f32[] select(gt, v0, v1)
  i = s32[] select(gt, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[16,50] parameter(0)
  idx = s32[16,50] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[16], s32[16]) reduce(a, idx, ninf, zero), dimensions={1}, to_apply=argmax
})"},
    {"dots_plain_transposed_batched_integer", R"(
HloModule m
ENTRY e {
  a = f32[17,33] parameter(0)
  b = f32[33,9] parameter(1)
  c = f32[5,17,33] parameter(2)
  d = f64[6,4] parameter(3)
  i = s64[3,4] parameter(4)
  j = s64[4,2] parameter(5)
  ab = f32[17,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tb = f32[9,17] dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  bc = f32[5,17,17] dot(c, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  dd = f64[4,4] dot(d, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ij = s64[3,2] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[17,9], f32[9,17], f32[5,17,17], f64[4,4], s64[3,2]) tuple(ab, tb, bc, dd, ij)
})",
     1e-4},
    {"half_dots_multiply_their_operands_as_they_are", R"(
HloModule m
ENTRY e {
  a = bf16[8,40] parameter(0)
  b = bf16[40,6] parameter(1)
  c = f16[3,7] parameter(2)
  ab = bf16[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cc = f16[7,7] dot(c, c), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT r = (bf16[8,6], f16[7,7]) tuple(ab, cc)
})",
     1e-2},
    {"gather_rows_of_a_table_clamped", R"(
HloModule m
ENTRY e {
  table = f32[50,16] parameter(0)
  ids = s32[20] parameter(1)
  ROOT g = f32[20,16] gather(table, ids), offset_dims={1},
      collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1,
      slice_sizes={1,16}
})"},
    {"gather_two_start_indices_s64_bf16", R"(
HloModule m
ENTRY e {
  a = bf16[7,9,5] parameter(0)
  i = s64[4,3,2] parameter(1)
  ROOT g = bf16[4,3,4,3] gather(a, i), offset_dims={2,3},
      collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=2,
      slice_sizes={1,4,3}
})"},
    {"gather_with_batching_dimensions", R"(
HloModule m
ENTRY e {
  a = f32[3,10,4] parameter(0)
  i = s32[3,5,1] parameter(1)
  ROOT g = f32[3,5,4] gather(a, i), offset_dims={2},
      collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0},
      start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}
})"},
    {"gather_u64_index_vectors_first_u8_operand", R"(
HloModule m
ENTRY e {
  a = u8[20,6] parameter(0)
  i = u64[2,7] parameter(1)
  ROOT g = u8[7,3] gather(a, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,3}
})"},
    {"scatter_add_rows_in_position_order", R"(
HloModule m
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
ENTRY e {
  o = f32[10,8] parameter(0)
  i = s32[12,1] parameter(1)
  u = f32[12,8] parameter(2)
  ROOT s = f32[10,8] scatter(o, i, u), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=add
})"},
    {"scatter_replace_duplicates_last_wins_s8", R"(
HloModule m
assign { a = s8[] parameter(0)
  ROOT b = s8[] parameter(1) }
ENTRY e {
  o = s8[6,5] parameter(0)
  i = s32[9,2] parameter(1)
  u = s8[9,2] parameter(2)
  ROOT s = s8[6,5] scatter(o, i, u), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1},
      index_vector_dim=1, to_apply=assign
})"},
    {"scatter_variadic_region_keeps_the_minimum_and_its_id", R"(
HloModule m
keep_min {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  v = f32[] select(lt, a, b)
  vi = s32[] select(lt, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, vi)
}
ENTRY e {
  o = f32[16] parameter(0)
  oi = s32[16] parameter(1)
  i = s32[10,1] parameter(2)
  u = f32[10] parameter(3)
  ui = s32[10] parameter(4)
  ROOT s = (f32[16], s32[16]) scatter(o, oi, i, u, ui), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=keep_min
})"},
    {"scatter_add_bf16_pred_and_batching_dimensions", R"(
HloModule m
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
orp { a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT r = pred[] or(a, b) }
addf { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
ENTRY e {
  o = bf16[7] parameter(0)
  i = u64[5,1] parameter(1)
  u = bf16[5] parameter(2)
  p = pred[7] parameter(3)
  up = pred[5] parameter(4)
  f = f32[3,10,4] parameter(5)
  j = s32[3,5,1] parameter(6)
  uf = f32[3,5,4] parameter(7)
  sb = bf16[7] scatter(o, i, u), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=addb
  sp = pred[7] scatter(p, i, up), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=orp
  sf = f32[3,10,4] scatter(f, j, uf), update_window_dims={2},
      inserted_window_dims={1}, input_batching_dims={0},
      scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1},
      index_vector_dim=2, to_apply=addf
  ROOT r = (bf16[7], pred[7], f32[3,10,4]) tuple(sb, sp, sf)
})"},
    {"rng_bit_generator_philox_and_three_fry_every_width", R"(
HloModule m
ENTRY e {
  s2 = u64[2] parameter(0)
  s3 = u64[3] parameter(1)
  a = (u64[2], u32[5,7]) rng-bit-generator(s2), algorithm=rng_default
  b = (u64[3], u64[9]) rng-bit-generator(s3), algorithm=rng_philox
  c = (u64[2], u32[3,5]) rng-bit-generator(s2), algorithm=rng_three_fry
  d = (u64[2], u64[4]) rng-bit-generator(s2), algorithm=rng_three_fry
  f = (u64[2], u8[6,3]) rng-bit-generator(s2), algorithm=rng_three_fry
  g = (u64[2], u16[]) rng-bit-generator(s2), algorithm=rng_three_fry
  ROOT r = ((u64[2], u32[5,7]), (u64[3], u64[9]), (u64[2], u32[3,5]),
            (u64[2], u64[4]), (u64[2], u8[6,3]), (u64[2], u16[])) tuple(a, b, c, d, f, g)
})"},
    {"reduce_window_pooling_cumsum_and_dilations", R"(
HloModule m
max { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
addi { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b) }
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
ENTRY e {
  x = f32[2,9,9,3] parameter(0)
  c = s32[10] parameter(1)
  d = f32[5,6] parameter(2)
  h = bf16[40] parameter(3)
  ninf = f32[] constant(-inf)
  zf = f32[] constant(0)
  zi = s32[] constant(0)
  zb = bf16[] constant(0)
  pool = f32[2,5,5,3] reduce-window(x, ninf), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max
  cum = s32[10] reduce-window(c, zi), window={size=10 pad=9_0}, to_apply=addi
  dil = f32[10,2] reduce-window(d, zf), window={size=2x3 stride=1x2 pad=1_1x0_1 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add
  sums = bf16[9] reduce-window(h, zb), window={size=8 stride=4}, to_apply=addb
  ROOT r = (f32[2,5,5,3], s32[10], f32[10,2], bf16[9]) tuple(pool, cum, dil, sums)
})",
     1e-5},
    {"reduce_window_variadic_argmax", R"(
HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  ge = pred[] compare(v0, v1), direction=GE
  v = f32[] select(ge, v0, v1)
  i = s32[] select(ge, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[4,7] parameter(0)
  ids = s32[4,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(-1)
  ROOT r = (f32[4,7], s32[4,7]) reduce-window(a, ids, ninf, zero), window={size=1x3 pad=0_0x1_1}, to_apply=argmax
})"},
    {"select_and_scatter_overlapping_padded_windows", R"(
HloModule m
ge { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
geb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT }
addb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
ENTRY e {
  x = f32[2,9,9,3] parameter(0)
  g = f32[2,5,5,3] parameter(1)
  z = f32[] constant(0)
  y = bf16[11] parameter(2)
  h = bf16[5] parameter(3)
  zb = bf16[] constant(0.5)
  a = f32[2,9,9,3] select-and-scatter(x, g, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=ge, scatter=add
  b = bf16[11] select-and-scatter(y, h, zb), window={size=4 stride=2 pad=1_0}, select=geb, scatter=addb
  ROOT r = (f32[2,9,9,3], bf16[11]) tuple(a, b)
})",
     1e-6},
    // Total order, descending: +NaN first, -NaN last, +0 before -0, and
    // ties (ceilings) in their original order (the payload shows it).
    {"sort_total_order_descending_with_nans_zeros_ties_and_a_payload", R"(
HloModule m
gt { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT g = pred[] compare(a, b), direction=GT, type=TOTALORDER }
ENTRY e {
  a = f32[5,37] parameter(0)
  c = f32[5,37] ceil(a)
  nan = f32[] constant(nan)
  minus_nan = f32[] constant(-nan)
  nans = f32[5,37] broadcast(nan), dimensions={}
  minus_nans = f32[5,37] broadcast(minus_nan), dimensions={}
  t0 = f32[] constant(-1.5)
  t1 = f32[] constant(-2)
  t2 = f32[] constant(2)
  b0 = f32[5,37] broadcast(t0), dimensions={}
  b1 = f32[5,37] broadcast(t1), dimensions={}
  b2 = f32[5,37] broadcast(t2), dimensions={}
  z = f32[] constant(0)
  zeros = f32[5,37] broadcast(z), dimensions={}
  p0 = pred[5,37] compare(a, b0), direction=LT
  p1 = pred[5,37] compare(a, b1), direction=LT
  p2 = pred[5,37] compare(a, b2), direction=GT
  k3 = f32[5,37] select(p0, zeros, c)
  k2 = f32[5,37] select(p1, minus_nans, k3)
  k1 = f32[5,37] select(p2, nans, k2)
  i = s32[5,37] iota(), iota_dimension=1
  ROOT s = (f32[5,37], s32[5,37]) sort(k1, i), dimensions={1}, is_stable=true, to_apply=gt
})"},
    // Any comparator (lexicographic, the second key descending) along a
    // middle dimension: rows are strided.
    {"sort_generic_comparator_along_a_middle_dimension", R"(
HloModule m
cmp { a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt2 = pred[] compare(c, d), direction=GT
  both = pred[] and(eq, gt2)
  ROOT r = pred[] or(lt, both) }
ENTRY e {
  a = f32[4,19,3] parameter(0)
  k = f32[4,19,3] floor(a)
  v = s32[4,19,3] parameter(1)
  ROOT s = (f32[4,19,3], s32[4,19,3]) sort(k, v), dimensions={1}, to_apply=cmp
})"},
    {"sort_keys_only_s32_with_many_ties_and_bf16_partial_order", R"(
HloModule m
lt { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT }
ltb { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT }
ENTRY e {
  a = s32[2,1000] parameter(0)
  b = bf16[300] parameter(1)
  s = s32[2,1000] sort(a), dimensions={1}, to_apply=lt
  t = bf16[300] sort(b), dimensions={0}, to_apply=ltb
  ROOT r = (s32[2,1000], bf16[300]) tuple(s, t)
})"},
    {"top_k_largest_and_smallest_with_ties", R"(
HloModule m
ENTRY e {
  a = f32[3,50] parameter(0)
  f = f32[3,50] floor(a)
  big = (f32[3,5], s32[3,5]) topk(f), k=5, largest=true
  small = (f32[3,4], s32[3,4]) topk(f), k=4, largest=false
  b0 = f32[3,5] get-tuple-element(big), index=0
  b1 = s32[3,5] get-tuple-element(big), index=1
  s0 = f32[3,4] get-tuple-element(small), index=0
  s1 = s32[3,4] get-tuple-element(small), index=1
  ROOT r = (f32[3,5], s32[3,5], f32[3,4], s32[3,4]) tuple(b0, b1, s0, s1)
})"},
    // A loop whose state is a counter, an accumulator (swapped with its
    // spare each iteration) and an operand the body passes through.
    {"while_accumulates_with_a_passed_through_operand", R"(
HloModule m
cond { p = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[64] get-tuple-element(p), index=1
  x = f32[64] get-tuple-element(p), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  half = f32[] constant(0.5)
  halves = f32[64] broadcast(half), dimensions={}
  scaled = f32[64] multiply(acc, halves)
  sum = f32[64] add(scaled, x)
  ROOT t = (s32[], f32[64], f32[64]) tuple(j, sum, x) }
ENTRY e {
  x = f32[64] parameter(0)
  a = f32[64] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[64], f32[64]) tuple(zero, a, x)
  w = (s32[], f32[64], f32[64]) while(init), condition=cond, body=body
  count = s32[] get-tuple-element(w), index=0
  acc = f32[64] get-tuple-element(w), index=1
  ROOT r = (s32[], f32[64]) tuple(count, acc)
})",
     1e-5},
    // Branches chosen by a pred and by an index (in range, and out of
    // range: the last), one of them a loop.
    {"conditionals_by_pred_and_by_index_with_a_loop_in_a_branch", R"(
HloModule m
neg { p = f32[32] parameter(0)
  ROOT n = f32[32] negate(p) }
ex { p = f32[32] parameter(0)
  ROOT e = f32[32] exponential(p) }
cond { p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[32] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  d = f32[32] add(v, v)
  ROOT t = (s32[], f32[32]) tuple(j, d) }
looped { p = f32[32] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[32]) tuple(zero, p)
  w = (s32[], f32[32]) while(init), condition=cond, body=body
  ROOT v = f32[32] get-tuple-element(w), index=1 }
ENTRY e {
  x = f32[32] parameter(0)
  y = f32[] parameter(1)
  z = f32[] constant(0)
  positive = pred[] compare(y, z), direction=GT
  by_pred = f32[32] conditional(positive, x, x), true_computation=neg, false_computation=ex
  one = s32[] constant(1)
  by_index = f32[32] conditional(one, x, x, x), branch_computations={neg, looped, ex}
  seven = s32[] constant(7)
  out_of_range = f32[32] conditional(seven, x, x, x), branch_computations={neg, looped, ex}
  ROOT r = (f32[32], f32[32], f32[32]) tuple(by_pred, by_index, out_of_range)
})",
     1e-5},
    // NHWC, 3x3, stride 2, padding (one side negative), into bf16.
    {"convolution_nhwc_strided_padded_into_bf16", R"(
HloModule m
ENTRY e {
  a = f32[2,9,8,3] parameter(0)
  w = f32[3,3,3,5] parameter(1)
  c = f32[2,5,3,5] convolution(a, w), window={size=3x3 stride=2x2 pad=1_1x1_-1}, dim_labels=b01f_01io->b01f
  h = bf16[2,5,3,5] convolution(a, w), window={size=3x3 stride=2x2 pad=1_1x1_-1}, dim_labels=b01f_01io->b01f
  ROOT r = (f32[2,5,3,5], bf16[2,5,3,5]) tuple(c, h)
})",
     1e-2},
    // Feature groups, both dilations and a reversed window, in permuted
    // layouts.
    {"convolution_feature_groups_dilations_reversal_permuted_layouts", R"(
HloModule m
ENTRY e {
  a = f32[2,4,7,6] parameter(0)
  w = f32[6,2,3,2] parameter(1)
  ROOT c = f32[2,6,9,7] convolution(a, w), window={size=2x3 pad=1_1x0_0 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x0}, dim_labels=bf01_o01i->bf10, feature_group_count=2
})",
     1e-5},
    // Batch groups (a weight gradient's shape), and integers summed exactly.
    {"convolution_batch_groups_and_integers", R"(
HloModule m
ENTRY e {
  a = f32[4,6,6,2] parameter(0)
  w = f32[2,5,5,2] parameter(1)
  g = f32[2,2,2,2] convolution(a, w), window={size=5x5}, dim_labels=b01f_i01o->b01f, batch_group_count=2
  x = s8[1,5,5,2] parameter(2)
  y = s8[3,3,2,4] parameter(3)
  i = s32[1,3,3,4] convolution(x, y), window={size=3x3}, dim_labels=b01f_01io->b01f
  ROOT r = (f32[2,2,2,2], s32[1,3,3,4]) tuple(g, i)
})",
     1e-5},
    // rng in every distribution and kind of type, and the state op: the
    // host's draws under the same key.
    {"rng_uniform_normal_integer_and_state", R"(
HloModule m
ENTRY e {
  a = f32[] parameter(0)
  one = f32[] constant(1)
  b = f32[] add(a, one)
  u = f32[37] rng(a, b), distribution=rng_uniform
  h0 = f16[] constant(-2)
  h1 = f16[] constant(2)
  uh = f16[9] rng(h0, h1), distribution=rng_uniform
  m = f64[] constant(0.5)
  sd = f64[] constant(2)
  n = f64[11] rng(m, sd), distribution=rng_normal
  i0 = s32[] constant(-5)
  i1 = s32[] constant(1000)
  i = s32[21] rng(i0, i1), distribution=rng_uniform
  s = u64[2] rng-get-and-update-state(), delta=7
  q0 = f8e4m3fn[] constant(-1)
  q1 = f8e4m3fn[] constant(0)
  uq = f8e4m3fn[3000] rng(q0, q1), distribution=rng_uniform
  b0 = bf16[] constant(2)
  b1 = bf16[] constant(5)
  ub = bf16[2000] rng(b0, b1), distribution=rng_uniform
  ud = f64[13] rng(m, sd), distribution=rng_uniform
  ROOT r = (f32[37], f16[9], f64[11], s32[21], u64[2], f8e4m3fn[3000],
            bf16[2000], f64[13]) tuple(u, uh, n, i, s, uq, ub, ud)
})"},
    {"map_of_a_two_operand_region", R"(
HloModule m
f { a = f32[] parameter(0)
  b = bf16[] parameter(1)
  bf = f32[] convert(b)
  p = f32[] multiply(a, bf)
  ROOT r = f32[] tanh(p) }
ENTRY e {
  x = f32[6,7] parameter(0)
  y = bf16[6,7] parameter(1)
  ROOT m = f32[6,7] map(x, y), dimensions={0,1}, to_apply=f
})",
     1e-5},
    {"f8_element_wise_converts_and_sums", R"(
HloModule m
add8 { a = f8e5m2[] parameter(0)
  b = f8e5m2[] parameter(1)
  ROOT r = f8e5m2[] add(a, b) }
ENTRY e {
  a = f8e4m3fn[6,9] parameter(0)
  b = f8e4m3fn[6,9] parameter(1)
  c = f8e5m2[6,9] parameter(2)
  x = f32[6,9] parameter(3)
  m = f8e4m3fn[6,9] multiply(a, b)
  s = f8e4m3fn[6,9] add(m, a)
  t = f8e4m3fn[9,6] transpose(s), dimensions={1,0}
  xa = f8e4m3fn[6,9] convert(x)
  xc = f8e5m2[6,9] convert(x)
  big = f32[6,9] multiply(x, x)
  ov = f8e4m3fn[6,9] convert(big)
  cf = f32[6,9] convert(c)
  ac = f8e5m2[6,9] convert(a)
  mx = f8e5m2[6,9] maximum(c, ac)
  z = f8e5m2[] constant(0)
  r = f8e5m2[6] reduce(c, z), dimensions={1}, to_apply=add8
  lt = pred[6,9] compare(a, b), direction=LT
  ROOT o = (f8e4m3fn[9,6], f8e4m3fn[6,9], f8e5m2[6,9], f8e4m3fn[6,9], f32[6,9],
            f8e5m2[6,9], f8e5m2[6], pred[6,9]) tuple(t, xa, xc, ov, cf, mx, r, lt)
})",
     0},
    {"complex_moves_and_component_wise_ops", R"(
HloModule m
ENTRY e {
  a = c64[5,3] parameter(0)
  b = c64[5,3] parameter(1)
  w = c128[3,5] parameter(2)
  k = c64[5,3] constant({{(1, 2), (-inf, nan), (0, -0)}, {(3, 4), (1, 2), (nan, 1)},
                         {(0, 0), (5, -5), (1e30, 1e-30)}, {(2, 2), (2, 2), (2, 2)},
                         {(-1, -1), (1, 1), (inf, -inf)}})
  s = c64[5,3] add(a, k)
  d = c64[5,3] subtract(s, b)
  n = c64[5,3] negate(d)
  eq = pred[5,3] compare(a, k), direction=EQ
  ne = pred[5,3] compare(k, k), direction=NE
  sel = c64[5,3] select(eq, a, n)
  re = f32[5,3] real(sel)
  im = f32[5,3] imag(k)
  c = c64[5,3] complex(im, re)
  t = c128[5,3] transpose(w), dimensions={1,0}
  tr = f64[5,3] real(t)
  ROOT o = (c64[5,3], pred[5,3], pred[5,3], f32[5,3], c64[5,3], c128[5,3], f64[5,3])
           tuple(n, eq, ne, re, c, t, tr)
})",
     0},
    {"complex_arithmetic_and_functions", R"(
HloModule m
ENTRY e {
  a = c64[6,5] parameter(0)
  b = c64[6,5] parameter(1)
  k = c64[6,5] constant({{(1, 2), (0, 0), (-2, 0.5), (3, -1), (0, 1)},
                         {(0, 0), (1, 0), (-1, -0), (2, 2), (0.25, -4)},
                         {(1e-3, 2e-3), (-3, 3), (0.5, 0.5), (1, 1), (-1, 0)},
                         {(4, 0), (0, -4), (2, -3), (-0.5, 1.5), (7, 7)},
                         {(1, 1), (1, -1), (-1, 1), (-1, -1), (0.1, 0)},
                         {(3, 4), (-3, 4), (3, -4), (-3, -4), (0, 5)}})
  m = c64[6,5] multiply(a, b)
  d = c64[6,5] divide(a, b)
  dk = c64[6,5] divide(k, a)
  e = c64[6,5] exponential(a)
  em = c64[6,5] exponential-minus-one(a)
  l = c64[6,5] log(a)
  lp = c64[6,5] log-plus-one(a)
  q = c64[6,5] sqrt(a)
  qk = c64[6,5] sqrt(k)
  r = c64[6,5] rsqrt(a)
  th = c64[6,5] tanh(a)
  lg = c64[6,5] logistic(a)
  sn = c64[6,5] sine(a)
  cs = c64[6,5] cosine(a)
  tn = c64[6,5] tan(a)
  sg = c64[6,5] sign(k)
  p = c64[6,5] power(a, b)
  pk = c64[6,5] power(k, k)
  ab = f32[6,5] abs(a)
  ng = c64[6,5] negate(m)
  ROOT o = (c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5],
            c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5], c64[6,5],
            c64[6,5], c64[6,5], c64[6,5], c64[6,5], f32[6,5], c64[6,5])
           tuple(m, d, dk, e, em, l, lp, q, qk, r, th, lg, sn, cs, tn, sg, p, pk, ab, ng)
})",
     1e-5},
    {"int4_arithmetic_packing_and_converts", R"(
HloModule m
add4 {
  x = s4[] parameter(0)
  y = s4[] parameter(1)
  ROOT s = s4[] add(x, y)
}
ENTRY e {
  a = s4[7,5] parameter(0)
  b = s4[7,5] parameter(1)
  u = u4[7,5] parameter(2)
  v = u4[7,5] parameter(3)
  f = f32[7,5] parameter(4)
  s = s4[7,5] add(a, b)
  m = s4[7,5] multiply(a, b)
  d = s4[7,5] divide(a, b)
  r = s4[7,5] remainder(a, b)
  n = s4[7,5] negate(a)
  ab = s4[7,5] abs(a)
  sl = s4[7,5] shift-left(a, b)
  sr = s4[7,5] shift-right-logical(a, b)
  sa = u4[7,5] shift-right-arithmetic(u, v)
  pc = s4[7,5] popcnt(a)
  cz = u4[7,5] count-leading-zeros(u)
  us = u4[7,5] subtract(u, v)
  big = f32[7,5] multiply(f, f)
  fs = s4[7,5] convert(big)
  fu = u4[7,5] convert(big)
  wide = s32[7,5] convert(a)
  w100 = s32[7,5] multiply(wide, wide)
  back = s4[7,5] convert(w100)
  uf = f32[7,5] convert(u)
  lt = pred[7,5] compare(a, b), direction=LT
  z = s4[] constant(0)
  sum = s4[7] reduce(a, z), dimensions={1}, to_apply=add4
  t = s4[5,7] transpose(a), dimensions={1,0}
  ROOT o = (s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5], s4[7,5],
            u4[7,5], s4[7,5], u4[7,5], u4[7,5], s4[7,5], u4[7,5], s4[7,5], f32[7,5],
            pred[7,5], s4[7], s4[5,7])
           tuple(s, m, d, r, n, ab, sl, sr, sa, pc, cz, us, fs, fu, back, uf, lt, sum, t)
})"},
    {"complex_infinities_and_nans_as_annex_g", R"(
HloModule m
ENTRY e {
  p = pred[] parameter(0)
  pb = pred[10] broadcast(p), dimensions={}
  k1 = c64[10] constant({(inf, 0), (inf, inf), (nan, inf), (1, 2), (0, 0), (inf, 1),
                         (-inf, nan), (3, 4), (1e30, 1e30), (nan, nan)})
  k2 = c64[10] constant({(1, 0), (0, 1), (2, 3), (0, 0), (0, 0), (inf, inf),
                         (1, 1), (inf, 0), (1e30, -1e30), (1, 0)})
  x = c64[10] select(pb, k1, k2)
  y = c64[10] select(pb, k2, k1)
  m = c64[10] multiply(x, y)
  d = c64[10] divide(x, y)
  e = c64[10] exponential(x)
  ROOT o = (c64[10], c64[10], c64[10]) tuple(m, d, e)
})",
     1e-6},
    {"complex128_functions_converts_reduce_and_dot", R"(
HloModule m
addc {
  x = c128[] parameter(0)
  y = c128[] parameter(1)
  ROOT s = c128[] add(x, y)
}
mulc {
  x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT s = c64[] multiply(x, y)
}
ENTRY e {
  a = c128[4,7] parameter(0)
  b = c128[7,3] parameter(1)
  f = f32[4,7] parameter(2)
  h = f16[4,7] parameter(3)
  i = s32[4,7] parameter(4)
  x = c64[4,7] parameter(5)
  e = c128[4,7] exponential(a)
  l = c128[4,7] log(a)
  q = c128[4,7] sqrt(a)
  t = c128[4,7] tan(a)
  d = c128[4,7] divide(e, a)
  dot = c128[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = c128[] constant((0, 0))
  sum = c128[4] reduce(a, z), dimensions={1}, to_apply=addc
  one = c64[] constant((1, 0))
  prod = c64[7] reduce(x, one), dimensions={0}, to_apply=mulc
  fc = c64[4,7] convert(f)
  hc = c128[4,7] convert(h)
  ic = c64[4,7] convert(i)
  narrow = c64[4,7] convert(a)
  wide = c128[4,7] convert(x)
  cf = f32[4,7] convert(x)
  ch = f16[4,7] convert(a)
  ci = s32[4,7] convert(x)
  cp = pred[4,7] convert(x)
  ROOT o = (c128[4,7], c128[4,7], c128[4,7], c128[4,7], c128[4,7], c128[4,3], c128[4],
            c64[7], c64[4,7], c128[4,7], c64[4,7], c64[4,7], c128[4,7], f32[4,7],
            f16[4,7], s32[4,7], pred[4,7])
           tuple(e, l, q, t, d, dot, sum, prod, fc, hc, ic, narrow, wide, cf, ch, ci, cp)
})",
     1e-9},
    {"fft_every_type_in_one_to_three_dimensions", R"(
HloModule m
ENTRY e {
  a = c64[3,4,6] parameter(0)
  r = f32[2,6,5] parameter(1)
  h = c64[2,6,3] parameter(2)
  w = c128[2,3,4,5] parameter(3)
  x = f64[4,9] parameter(4)
  f1 = c64[3,4,6] fft(a), fft_type=FFT, fft_length={6}
  f2 = c64[3,4,6] fft(a), fft_type=IFFT, fft_length={4,6}
  f3 = c64[2,6,3] fft(r), fft_type=RFFT, fft_length={6,5}
  f4 = f32[2,6,4] fft(h), fft_type=IRFFT, fft_length={6,4}
  f5 = c128[2,3,4,5] fft(w), fft_type=FFT, fft_length={3,4,5}
  f6 = c128[4,5] fft(x), fft_type=RFFT, fft_length={9}
  f7 = f64[4,9] fft(f6), fft_type=IRFFT, fft_length={9}
  ROOT o = (c64[3,4,6], c64[3,4,6], c64[2,6,3], f32[2,6,4], c128[2,3,4,5], c128[4,5], f64[4,9])
           tuple(f1, f2, f3, f4, f5, f6, f7)
})",
     1e-4},
    {"complex_data_movement", R"(
HloModule m
ENTRY e {
  a = c128[4,3] parameter(0)
  i = s32[] constant(1)
  s = c128[2,3] slice(a), slice={[1:3], [0:3]}
  c = c128[6,3] concatenate(a, s), dimensions={0}
  z = c128[] constant((1, -1))
  p = c128[8,5] pad(c, z), padding=1_1x1_1
  b = c128[2,4,3] broadcast(a), dimensions={1,2}
  r = c128[4,3] reverse(a), dimensions={0}
  rs = c128[12] reshape(r)
  zero = s32[] constant(0)
  ds = c128[2,3] dynamic-slice(a, i, zero), dynamic_slice_sizes={2,3}
  dus = c128[4,3] dynamic-update-slice(a, ds, zero, zero)
  idx = s32[2,1] constant({{3}, {0}})
  g = c128[2,3] gather(a, idx), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  ROOT o = (c128[8,5], c128[2,4,3], c128[12], c128[2,3], c128[4,3], c128[2,3])
           tuple(p, b, rs, ds, dus, g)
})",
     0},
    {"replica_id_and_constants", R"(
HloModule m
ENTRY e {
  a = u32[4] parameter(0)
  r = u32[] replica-id()
  rb = u32[4] broadcast(r), dimensions={}
  k = u32[4] constant({1, 2, 3, 4})
  s = u32[4] add(a, rb)
  ROOT m = u32[4] multiply(s, k)
})"},
};

class CudaCodegen : public ::testing::TestWithParam<Case> {};

TEST_P(CudaCodegen, GeneratedKernelsMatchTheHostBackend) {
  CheckAgainstHost(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaCodegen, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(CudaCodegen, MlpTrainStepMatchesTheHostBackend) {
  std::ifstream file(
      absl::StrCat(PJRT_SOURCE_DIR, "/tests/data/mlp_train_step.hlo"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string hlo = text.str();
  ASSERT_FALSE(hlo.empty());
  CheckAgainstHost({"mlp_train_step", hlo.c_str(), 1e-4});
}

// Every test program the CUDA backend compiles (and that runs alone, on
// arrays of reasonable size) computes what the host backend computes.
TEST(CudaCodegen, EveryTestProgramMatchesTheHostBackend) {
  int compared = 0;
  for (const std::string& path : pjrt::testing::TestPrograms()) {
    std::unique_ptr<hlo::Module> module = pjrt::testing::LoadTestProgram(path);
    if (module == nullptr) continue;
    auto compiled = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
    if (!compiled.ok()) continue;  // refused by name (the compile check)
    int64_t bytes = 0;
    bool collective = false;
    ForEachLaunch(compiled->generated.launches, [&](const Launch& l) {
      collective |= l.kind == Launch::Kind::kCollective;
    });
    for (const host::BufferSlot& slot : compiled->lowered->slots) {
      bytes += slot.shape.IsArray() ? slot.shape.ByteSize() : 0;
    }
    if (collective || bytes > (int64_t{64} << 20)) continue;
    SCOPED_TRACE(path);
    CompareWithHost(*module, *compiled, absl::StrCat("corpus_", compared),
                    1e-4);
    ++compared;
  }
  std::cout << compared << " test programs compared with the host backend\n";
  EXPECT_GE(compared, 108);
}

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

TEST(CudaCodegen, RefusesWhatItDoesNotRunByName) {
  // NCCL has no bitwise reductions.
  std::unique_ptr<hlo::Module> module = Parse(R"(
HloModule m, replica_count=2
and {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] and(x, y)
}
ENTRY e {
  a = s32[8] parameter(0)
  ROOT r = s32[8] all-reduce(a), replica_groups={{0,1}}, to_apply=and
})");
  ASSERT_NE(module, nullptr);
  auto generated = CompileForCuda(*module, {}, "sm_90", DiskCache(""));
  ASSERT_FALSE(generated.ok());
  EXPECT_EQ(generated.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(generated.status().message().find("%r"), absl::string_view::npos)
      << generated.status();
  EXPECT_NE(generated.status().message().find("--platform host"),
            absl::string_view::npos)
      << generated.status();
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

}  // namespace
}  // namespace pjrt::compiler::cuda
