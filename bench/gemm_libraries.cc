// Which library multiplies f32 matrices fastest on this machine, for the
// shapes pjrtd's users run: square 512-4096, the MLP training step's skinny
// products, and batched small ones. Measures Eigen (as the host compiler
// uses it, column-major views of the row-major data) against every other
// library found: OpenBLAS (the 32-bit and 64-bit integer builds), BLIS and
// oneDNN, each loaded with dlopen(RTLD_LOCAL) so that their identically
// named symbols do not meet. The answer decides the host compiler's
// dispatch (compiler/host/host_program.cc, docs/performance.md).
//
//   gemm_libraries [THREADS]    (default: every CPU)
//
// Prints one line per shape with each library's GFLOP/s, then the fastest.
// `make bench-gemm` installs the libraries' runtime packages and runs it.
#include <dlfcn.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"

namespace {

using pjrt::bench::MedianSeconds;

struct Shape {
  const char* name;
  int64_t batch, m, n, k;
  bool lhs_transposed, rhs_transposed;
};

// C[m,n] = op(A) op(B), row-major, A stored m x k (k x m transposed), B
// stored k x n (n x k transposed).
using Gemm =
    std::function<void(const Shape&, const float*, const float*, float*)>;

struct Library {
  std::string name;
  Gemm gemm;
};

// cblas_sgemm with 32-bit or 64-bit integers.
template <typename Int>
using CblasSgemm = void (*)(int, int, int, Int, Int, Int, float, const float*,
                            Int, const float*, Int, float, float*, Int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

template <typename Int>
Gemm CblasGemm(void* symbol) {
  auto sgemm = reinterpret_cast<CblasSgemm<Int>>(symbol);
  return [sgemm](const Shape& s, const float* a, const float* b, float* c) {
    sgemm(kRowMajor, s.lhs_transposed ? kTrans : kNoTrans,
          s.rhs_transposed ? kTrans : kNoTrans, static_cast<Int>(s.m),
          static_cast<Int>(s.n), static_cast<Int>(s.k), 1.0f, a,
          static_cast<Int>(s.lhs_transposed ? s.m : s.k), b,
          static_cast<Int>(s.rhs_transposed ? s.k : s.n), 0.0f, c,
          static_cast<Int>(s.n));
  };
}

void* Open(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

std::vector<Library> FindLibraries(int threads) {
  std::vector<Library> found;
  const char* kDir = "/usr/lib/x86_64-linux-gnu/";
  struct Blas {
    const char* name;
    std::string path;
    bool int64;
    const char* set_threads;
  };
  const Blas blases[] = {
      {"openblas", std::string(kDir) + "openblas-pthread/libopenblas.so.0",
       false, "openblas_set_num_threads"},
      {"openblas64",
       std::string(kDir) + "openblas64-pthread/libopenblas64.so.0", true,
       "openblas_set_num_threads"},
      {"blis64", std::string(kDir) + "blis64-openmp/libblis64.so.4", true,
       "bli_thread_set_num_threads"},
  };
  for (const Blas& blas : blases) {
    void* library = Open(blas.path.c_str());
    if (library == nullptr) continue;
    void* sgemm = dlsym(library, "cblas_sgemm");
    if (sgemm == nullptr) continue;
    if (void* set = dlsym(library, blas.set_threads)) {
      if (blas.int64) {
        reinterpret_cast<void (*)(int64_t)>(set)(threads);
      } else {
        reinterpret_cast<void (*)(int)>(set)(threads);
      }
    }
    found.push_back({blas.name, blas.int64 ? CblasGemm<int64_t>(sgemm)
                                           : CblasGemm<int32_t>(sgemm)});
  }
  if (void* library = Open("libdnnl.so.2")) {
    using DnnlSgemm =
        int (*)(char, char, int64_t, int64_t, int64_t, float, const float*,
                int64_t, const float*, int64_t, float, float*, int64_t);
    if (auto sgemm =
            reinterpret_cast<DnnlSgemm>(dlsym(library, "dnnl_sgemm"))) {
      found.push_back({"onednn", [sgemm](const Shape& s, const float* a,
                                         const float* b, float* c) {
                         sgemm(s.lhs_transposed ? 'T' : 'N',
                               s.rhs_transposed ? 'T' : 'N', s.m, s.n, s.k,
                               1.0f, a, s.lhs_transposed ? s.m : s.k, b,
                               s.rhs_transposed ? s.k : s.n, 0.0f, c, s.n);
                       }});
    }
  }
  return found;
}

// Eigen's GEMM as the host compiler calls it: C^T = B^T A^T over
// column-major views of the row-major data, on `threads` threads.
void EigenGemm(const Shape& s, const float* lhs, const float* rhs, float* out) {
  using Matrix =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  Eigen::Map<const Matrix> a(lhs, s.lhs_transposed ? s.m : s.k,
                             s.lhs_transposed ? s.k : s.m);
  Eigen::Map<const Matrix> b(rhs, s.rhs_transposed ? s.k : s.n,
                             s.rhs_transposed ? s.n : s.k);
  Eigen::Map<Matrix> o(out, s.n, s.m);
  if (!s.lhs_transposed && !s.rhs_transposed) {
    o.noalias() = b * a;
  } else if (s.lhs_transposed && !s.rhs_transposed) {
    o.noalias() = b * a.transpose();
  } else if (!s.lhs_transposed && s.rhs_transposed) {
    o.noalias() = b.transpose() * a;
  } else {
    o.noalias() = b.transpose() * a.transpose();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads =
      argc > 1 ? std::atoi(argv[1])
               : static_cast<int>(std::thread::hardware_concurrency());
  Eigen::setNbThreads(threads);
  std::vector<Library> libraries = {{"eigen", EigenGemm}};
  for (Library& l : FindLibraries(threads)) libraries.push_back(std::move(l));
  const Shape shapes[] = {
      {"square 512", 1, 512, 512, 512, false, false},
      {"square 1024", 1, 1024, 1024, 1024, false, false},
      {"square 2048", 1, 2048, 2048, 2048, false, false},
      {"square 4096", 1, 4096, 4096, 4096, false, false},
      {"mlp x@w1 64x784x128", 1, 64, 128, 784, false, false},
      {"mlp h@w2 64x128x10", 1, 64, 10, 128, false, false},
      {"mlp dl@w2^T 64x10x128", 1, 64, 128, 10, false, true},
      {"mlp h^T@dl 128x64x10", 1, 128, 10, 64, true, false},
      {"mlp x^T@dz 784x64x128", 1, 784, 128, 64, true, false},
      {"batched 64 x 64^3", 64, 64, 64, 64, false, false},
      {"batched 16 x 128x128x64", 16, 128, 128, 64, false, false},
  };
  std::printf("%d threads; GFLOP/s per library, higher is better\n", threads);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.batch * s.m * s.k));
    std::vector<float> b(static_cast<size_t>(s.batch * s.k * s.n));
    std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) / 7;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) / 5;
    const double flops = 2.0 * s.batch * s.m * s.n * s.k;
    const int runs = flops > 1e10 ? 3 : flops > 1e9 ? 10 : 200;
    std::printf("%-26s", s.name);
    std::string best;
    double best_rate = 0;
    for (const Library& library : libraries) {
      double seconds = MedianSeconds(runs, [&] {
        for (int64_t i = 0; i < s.batch; ++i) {
          library.gemm(s, a.data() + i * s.m * s.k, b.data() + i * s.k * s.n,
                       c.data() + i * s.m * s.n);
        }
      });
      const double rate = flops / seconds / 1e9;
      std::printf(" %s %7.1f", library.name.c_str(), rate);
      if (rate > best_rate) {
        best_rate = rate;
        best = library.name;
      }
    }
    std::printf("  -> %s\n", best.c_str());
  }
  return 0;
}
