// The CUDA code generator's linear-algebra kernels (see codegen_internal.h):
// triangular-solve and cholesky, in the host kernels' order
// (compiler/host/kernel_linalg.h), so that results match the host's up to
// the rounding of another compiler's arithmetic.
#include "compiler/cuda/codegen_internal.h"

namespace pjrt::compiler::cuda::codegen_internal {

void Generator::EmitLinalgHelpers() {
  if (shared_->linalg_helpers) return;
  shared_->linalg_helpers = true;
  absl::StrAppend(&shared_->source, R"(
// The conjugate, the square root of the real part (a pivot), and |v|^2, of
// reals and complex numbers.
__device__ __forceinline__ float pj_lconj(float v) { return v; }
__device__ __forceinline__ double pj_lconj(double v) { return v; }
template <typename R>
__device__ __forceinline__ pj_complex<R> pj_lconj(pj_complex<R> v) {
  return pj_cmake(v.re, -v.im);
}
__device__ __forceinline__ float pj_lsqrt(float v) { return sqrt(v); }
__device__ __forceinline__ double pj_lsqrt(double v) { return sqrt(v); }
template <typename R>
__device__ __forceinline__ pj_complex<R> pj_lsqrt(pj_complex<R> v) {
  return pj_cmake((R)sqrt(v.re), (R)0);
}
__device__ __forceinline__ float pj_labs2(float v) { return v * v; }
__device__ __forceinline__ double pj_labs2(double v) { return v * v; }
template <typename R>
__device__ __forceinline__ pj_complex<R> pj_labs2(pj_complex<R> v) {
  return pj_cmake(v.re * v.re + v.im * v.im, (R)0);
}
)");
}

absl::Status Generator::EmitTriangularSolve(
    const host::TriangularSolveKernel& ts) {
  const int64_t total = ts.batch * ts.n;
  if (total == 0 || ts.m == 0) return absl::OkStatus();
  EmitLinalgHelpers();
  PJRT_ASSIGN_OR_RETURN(const std::string t, CudaStorageType(ts.type));
  Launch launch;
  launch.kernel = Name("triangular_solve");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(total);
  launch.slots = {ts.output, ts.a, ts.b};
  Open(&launch, {absl::StrCat(t, "* out"), absl::StrCat("const ", t, "* a"),
                 absl::StrCat("const ", t, "* b")});
  const int64_t m = ts.m;
  // M's element (r, j), and (r, r).
  std::string element = ts.transposed ? absl::StrFormat("am[j * %d + r]", m)
                                      : absl::StrFormat("am[r * %d + j]", m);
  std::string diagonal = absl::StrFormat("am[r * %d]", m + 1);
  if (ts.conjugate) {
    element = absl::StrCat("pj_lconj(", element, ")");
    diagonal = absl::StrCat("pj_lconj(", diagonal, ")");
  }
  std::string& k = shared_->source;
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", total,
                        "long long");
  absl::StrAppendFormat(
      &k,
      "    const long long g = i / %d, base = (i %% %d) * %d;\n"
      "    const %s* am = a + g * %d;\n"
      "    const %s* bm = b + g * %d;\n"
      "    %s* xm = out + g * %d;\n"
      "    for (long long step = 0; step < %d; ++step) {\n"
      "      const long long r = %s;\n"
      "      %s s = bm[base + r * %d];\n"
      "      for (long long j = %s; j < %s; ++j) {\n"
      "        s = s - %s * xm[base + j * %d];\n"
      "      }\n"
      "      xm[base + r * %d] = %s;\n"
      "    }\n  }\n}\n",
      ts.n, ts.n, ts.rhs_step, t, m * m, t, m * ts.n, t, m * ts.n, m,
      ts.m_lower ? "step" : absl::StrFormat("%d - step", m - 1), t,
      ts.rhs_stride, ts.m_lower ? "0" : "r + 1",
      ts.m_lower ? "r" : absl::StrCat(m), element, ts.rhs_stride, ts.rhs_stride,
      ts.unit_diagonal ? "s" : absl::StrCat("s / ", diagonal));
  launch.origin = absl::StrFormat(
      "triangular-solve of %d systems of %d unknowns (%s triangular)", total, m,
      ts.m_lower ? "lower" : "upper");
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitCholesky(const host::CholeskyKernel& c) {
  if (c.batch == 0 || c.n == 0) return absl::OkStatus();
  EmitLinalgHelpers();
  PJRT_ASSIGN_OR_RETURN(const std::string t, CudaStorageType(c.type));
  const int64_t n = c.n;
  Launch launch;
  launch.kernel = Name("cholesky");
  launch.threads = static_cast<int>(std::min<int64_t>(kThreads, n));
  launch.blocks = c.batch;
  launch.slots = {c.output, c.a};
  Open(&launch, {absl::StrCat(t, "* out"), absl::StrCat("const ", t, "* a")});
  // a's element (i, j), i >= j, from the triangle the op reads.
  const std::string at = c.lower
                             ? absl::StrFormat("am[i * %d + j]", n)
                             : absl::StrFormat("pj_lconj(am[j * %d + i])", n);
  std::string& k = shared_->source;
  absl::StrAppendFormat(
      &k,
      "  for (long long g = blockIdx.x; g < %d; g += gridDim.x) {\n"
      "    const %s* am = a + g * %d;\n"
      "    %s* l = out + g * %d;\n"
      "    for (long long j = 0; j < %d; ++j) {\n"
      "      if (threadIdx.x == 0) {\n"
      "        const long long i = j;\n"
      "        %s d = %s;\n"
      "        for (long long q = 0; q < j; ++q) d = d - pj_labs2(l[j * %d + "
      "q]);\n"
      "        l[j * %d] = pj_lsqrt(d);\n"
      "      }\n"
      "      __syncthreads();\n"
      "      for (long long i = j + 1 + threadIdx.x; i < %d; i += blockDim.x) "
      "{\n"
      "        %s s = %s;\n"
      "        for (long long q = 0; q < j; ++q) {\n"
      "          s = s - l[i * %d + q] * pj_lconj(l[j * %d + q]);\n"
      "        }\n"
      "        l[i * %d + j] = s / l[j * %d];\n"
      "      }\n"
      "      __syncthreads();\n"
      "    }\n",
      c.batch, t, n * n, t, n * n, n, t, at, n, n + 1, n, t, at, n, n, n,
      n + 1);
  // L is in the lower triangle: zero the upper one, or move L^H there.
  absl::StrAppendFormat(
      &k,
      "    for (long long e = threadIdx.x; e < %d; e += blockDim.x) {\n"
      "      const long long i = e / %d, j = e %% %d;\n"
      "      if (i <= j) continue;\n",
      n * n, n, n);
  const char* part = c.type == hlo::PrimitiveType::kC64 ? "float" : "double";
  const std::string zero =
      hlo::IsComplex(c.type)
          ? absl::StrFormat("pj_cmake((%s)0, (%s)0)", part, part)
          : absl::StrFormat("(%s)0", t);
  if (c.lower) {
    absl::StrAppendFormat(&k, "      l[j * %d + i] = %s;\n", n, zero);
  } else {
    absl::StrAppendFormat(&k,
                          "      l[j * %d + i] = pj_lconj(l[i * %d + j]);\n"
                          "      l[i * %d + j] = %s;\n",
                          n, n, n, zero);
  }
  absl::StrAppend(&k, "    }\n    __syncthreads();\n  }\n}\n");
  launch.origin =
      absl::StrFormat("cholesky of %d matrices of %d x %d", c.batch, n, n);
  Add(std::move(launch));
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::cuda::codegen_internal
