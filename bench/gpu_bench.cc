// Benchmarks of the CUDA backend, in process (runtime + compiler, no
// daemon). Prints one JSON object: each metric with its baseline measured in
// the same run and the ratio (higher is better). Without a GPU only the
// NVRTC compile times are measured (NVRTC needs none); the rest are listed
// as skipped. scripts/gpu-check runs it on a machine with a GPU.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/cub_sort.h"
#include "hlo/parser.h"
#include "hlo/passes.h"
#include "nlohmann/json.hpp"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace {

using Clock = std::chrono::steady_clock;
using pjrt::hlo::PrimitiveType;
using pjrt::hlo::Shape;

double Seconds(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

using pjrt::bench::Check;
using pjrt::bench::MedianSeconds;
void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::cerr << "gpu_bench: " << what << ": " << cudaGetErrorString(e) << "\n";
    std::exit(1);
  }
}
void CheckDnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) {
    std::cerr << "gpu_bench: " << what << ": " << cudnnGetErrorString(s)
              << "\n";
    std::exit(1);
  }
}
void CheckBlas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::cerr << "gpu_bench: " << what << ": " << cublasLtGetStatusString(s)
              << "\n";
    std::exit(1);
  }
}

nlohmann::json Metric(const std::string& name, const char* unit, double value,
                      const char* baseline_name, double baseline, double goal) {
  nlohmann::json m = {{"metric", name},
                      {"unit", unit},
                      {"value", value},
                      {"baseline", baseline_name},
                      {"baseline_value", baseline},
                      {"ratio", value / baseline}};
  if (goal > 0) m["goal"] = goal;
  return m;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void RunOnce(pjrt::runtime::Executable& exe,
             const std::vector<pjrt::runtime::Buffer*>& args,
             pjrt::runtime::Device* device) {
  auto results = Check(exe.Execute(args, device));
  for (auto& r : results) Check(r->BlockHostUntilReady());
}

// Random arguments for every parameter of `exe`.
std::vector<std::shared_ptr<pjrt::runtime::Buffer>> RandomArguments(
    pjrt::runtime::Client& client, pjrt::runtime::Executable& exe,
    pjrt::runtime::Device* device) {
  std::vector<std::shared_ptr<pjrt::runtime::Buffer>> out;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 0.1f);
  for (const Shape& shape : exe.parameter_shapes()) {
    std::vector<uint8_t> bytes(shape.ByteSize());
    if (shape.element_type() == PrimitiveType::kF32) {
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        const float v = normal(rng);
        std::memcpy(&bytes[i], &v, 4);
      }
    } else {
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() % 4);
    }
    out.push_back(
        Check(client.BufferFromHostBuffer(bytes.data(), shape, device)));
  }
  return out;
}

std::vector<pjrt::runtime::Buffer*> Pointers(
    const std::vector<std::shared_ptr<pjrt::runtime::Buffer>>& buffers) {
  std::vector<pjrt::runtime::Buffer*> p;
  for (const auto& b : buffers) p.push_back(b.get());
  return p;
}

// cuBLASLt called directly: n x n x n of `type` operands into `out_type`,
// the baseline of the dot; fp8 operands as its fp8 matmuls take them (A
// transposed, "TN").
double DirectGemmSeconds(int n, cudaDataType_t type, cudaDataType_t out_type) {
  cublasLtHandle_t handle;
  CheckBlas(cublasLtCreate(&handle), "cublasLtCreate");
  const auto width = [](cudaDataType_t t) -> size_t {
    return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 1;
  };
  void *a, *b, *c, *workspace;
  const size_t workspace_bytes = size_t{32} << 20;
  CheckCuda(cudaMalloc(&a, size_t(n) * n * width(type)), "cudaMalloc");
  CheckCuda(cudaMalloc(&b, size_t(n) * n * width(type)), "cudaMalloc");
  CheckCuda(cudaMalloc(&c, size_t(n) * n * width(out_type)), "cudaMalloc");
  CheckCuda(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc");
  cudaMemset(a, 0, size_t(n) * n * width(type));
  cudaMemset(b, 0, size_t(n) * n * width(type));
  cublasLtMatmulDesc_t desc;
  CheckBlas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            "desc");
  if (type == CUDA_R_8F_E4M3) {
    const cublasOperation_t t = CUBLAS_OP_T;
    CheckBlas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &t, sizeof(t)),
              "TRANSA");
  }
  cublasLtMatrixLayout_t la, lb, lc;
  CheckBlas(cublasLtMatrixLayoutCreate(&la, type, n, n, n), "layout");
  CheckBlas(cublasLtMatrixLayoutCreate(&lb, type, n, n, n), "layout");
  CheckBlas(cublasLtMatrixLayoutCreate(&lc, out_type, n, n, n), "layout");
  cublasLtMatmulPreference_t pref;
  CheckBlas(cublasLtMatmulPreferenceCreate(&pref), "pref");
  const uint64_t ws = workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  CheckBlas(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref,
                                           1, &heuristic, &found),
            "heuristic");
  if (found == 0) {
    std::cerr << "cuBLASLt has no algorithm for the direct matmul\n";
    std::exit(1);
  }
  const float one = 1, zero = 0;
  const double seconds = MedianSeconds(5, [&] {
    CheckBlas(
        cublasLtMatmul(handle, desc, &one, a, la, b, lb, &zero, c, lc, c, lc,
                       &heuristic.algo, workspace, workspace_bytes, nullptr),
        "cublasLtMatmul");
    CheckCuda(cudaDeviceSynchronize(), "sync");
  });
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(workspace);
  return seconds;
}

// Seconds per run of `exe` on `args`, `batch` runs enqueued back to back
// and waited for together (what a GPU-bound program sees, without a host
// round trip per run).
double SecondsPerRun(pjrt::runtime::Executable& exe,
                     const std::vector<pjrt::runtime::Buffer*>& args,
                     pjrt::runtime::Device* device, int batch) {
  return MedianSeconds(
             5,
             [&] {
               std::vector<std::shared_ptr<pjrt::runtime::Buffer>> last;
               for (int i = 0; i < batch; ++i)
                 last = Check(exe.Execute(args, device));
               for (auto& r : last) Check(r->BlockHostUntilReady());
             }) /
         batch;
}

// CUB called directly: cub::DeviceRadixSort::SortKeys of `n` u32 keys
// (what pjrtd's CubSort runs for a sort of an unsigned key, keys alone),
// its temporary storage allocated once; the baseline of the sort. Seconds
// per sort, `batch` enqueued back to back.
double DirectCubSortSeconds(int64_t n, int batch) {
  void *in, *out, *temporary = nullptr;
  CheckCuda(cudaMalloc(&in, n * 4), "cudaMalloc");
  CheckCuda(cudaMalloc(&out, n * 4), "cudaMalloc");
  std::vector<uint32_t> keys(n);
  std::mt19937 rng(5);
  for (uint32_t& k : keys) k = rng();
  CheckCuda(cudaMemcpy(in, keys.data(), n * 4, cudaMemcpyHostToDevice),
            "cudaMemcpy");
  pjrt::compiler::cuda::CubSortProblem p;
  p.key_bytes = 4;
  p.n = n;
  size_t bytes = 0;
  CheckCuda(pjrt::compiler::cuda::CubSort(p, nullptr, &bytes, in, out, nullptr,
                                          nullptr, nullptr),
            "sizing CUB's sort");
  CheckCuda(cudaMalloc(&temporary, bytes), "cudaMalloc");
  const double seconds = MedianSeconds(5, [&] {
    for (int i = 0; i < batch; ++i) {
      CheckCuda(pjrt::compiler::cuda::CubSort(p, temporary, &bytes, in, out,
                                              nullptr, nullptr, nullptr),
                "CUB's sort");
    }
    CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  });
  cudaFree(in);
  cudaFree(out);
  cudaFree(temporary);
  return seconds / batch;
}

// cuDNN called directly through its legacy API: a 3x3 bf16 convolution,
// NHWC with an NHWC (KRSC) filter, by the fastest algorithm
// cudnnFindConvolutionForwardAlgorithm measures (deterministic or not:
// pjrtd takes only deterministic engines, and copies JAX's HWIO filter to
// KRSC first, both counted against it); the baseline of the convolution.
// Seconds per convolution, `batch` enqueued back to back.
double DirectConvSeconds(int n, int hw, int c, int k, int batch) {
  cudnnHandle_t h;
  CheckDnn(cudnnCreate(&h), "cudnnCreate");
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  CheckDnn(cudnnCreateTensorDescriptor(&x), "tensor");
  CheckDnn(cudnnCreateTensorDescriptor(&y), "tensor");
  CheckDnn(cudnnCreateFilterDescriptor(&w), "filter");
  CheckDnn(cudnnCreateConvolutionDescriptor(&conv), "convolution");
  CheckDnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16,
                                      n, c, hw, hw),
           "x");
  CheckDnn(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16,
                                      n, k, hw, hw),
           "y");
  CheckDnn(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC,
                                      k, c, 3, 3),
           "w");
  CheckDnn(
      cudnnSetConvolution2dDescriptor(
          conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "convolution");
  CheckDnn(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH), "math");
  void *xp, *wp, *yp, *workspace = nullptr;
  CheckCuda(cudaMalloc(&xp, size_t(n) * hw * hw * c * 2), "cudaMalloc");
  CheckCuda(cudaMalloc(&wp, size_t(k) * 9 * c * 2), "cudaMalloc");
  CheckCuda(cudaMalloc(&yp, size_t(n) * hw * hw * k * 2), "cudaMalloc");
  cudaMemset(xp, 0, size_t(n) * hw * hw * c * 2);
  cudaMemset(wp, 0, size_t(k) * 9 * c * 2);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  CheckDnn(
      cudnnFindConvolutionForwardAlgorithm(
          h, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
      "cudnnFindConvolutionForwardAlgorithm");
  if (returned == 0 || perf[0].status != CUDNN_STATUS_SUCCESS) {
    std::cerr << "gpu_bench: cuDNN found no convolution algorithm\n";
    std::exit(1);
  }
  // Timed in the math mode it was measured in.
  CheckDnn(cudnnSetConvolutionMathType(conv, perf[0].mathType), "math");
  if (perf[0].memory > 0) {
    CheckCuda(cudaMalloc(&workspace, perf[0].memory), "cudaMalloc");
  }
  const float one = 1, zero = 0;
  const double seconds =
      MedianSeconds(5,
                    [&] {
                      for (int i = 0; i < batch; ++i) {
                        CheckDnn(cudnnConvolutionForward(
                                     h, &one, x, xp, w, wp, conv, perf[0].algo,
                                     workspace, perf[0].memory, &zero, y, yp),
                                 "cudnnConvolutionForward");
                      }
                      CheckCuda(cudaDeviceSynchronize(), "sync");
                    }) /
      batch;
  cudaFree(workspace);
  cudaFree(xp);
  cudaFree(wp);
  cudaFree(yp);
  cudnnDestroyConvolutionDescriptor(conv);
  cudnnDestroyFilterDescriptor(w);
  cudnnDestroyTensorDescriptor(x);
  cudnnDestroyTensorDescriptor(y);
  cudnnDestroy(h);
  return seconds;
}

}  // namespace

int main() {
  nlohmann::json metrics = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();
  const std::string mlp =
      ReadFile(absl::StrCat(PJRT_SOURCE_DIR, "/tests/data/mlp_train_step.hlo"));

  {  // NVRTC compile time of the MLP step, cold and from the persistent cache.
    auto module = Check(pjrt::hlo::ParseHloModule(mlp));
    Check(pjrt::hlo::SimplifyModule(module.get()).status());
    const std::string dir =
        absl::StrCat(std::filesystem::temp_directory_path().string(),
                     "/pjrt-gpu-bench-cache-", getpid());
    std::filesystem::remove_all(dir);
    const pjrt::compiler::DiskCache cache(dir);
    double cold = 0, warm = 1e9;
    for (int i = 0; i < 3; ++i) {
      std::filesystem::remove_all(dir);
      cold += Seconds([&] {
                Check(pjrt::compiler::cuda::CompileForCuda(*module, {}, "sm_90",
                                                           cache));
              }) /
              3;
      warm = std::min(warm, Seconds([&] {
                        auto c = Check(pjrt::compiler::cuda::CompileForCuda(
                            *module, {}, "sm_90", cache));
                        if (!c.from_cache) std::exit(1);
                      }));
    }
    std::filesystem::remove_all(dir);
    metrics.push_back(Metric("mlp_step_compile_cached_speedup", "x",
                             cold / warm, "nvrtc_cold_compile", 1, 20));
    metrics.back()["cold_seconds"] = cold;
    metrics.back()["cached_seconds"] = warm;
  }

  pjrt::runtime::ClientOptions options;
  options.platform = "cuda";
  auto cuda = pjrt::runtime::Client::Create(options);
  if (!cuda.ok()) {
    for (const char* m :
         {"dot_f32_4096_tflops", "dot_bf16_4096_tflops",
          "dot_f8e4m3fn_4096_tflops", "conv3x3_bf16_nhwc_tflops",
          "sort_u32_64M_gkeys_per_second", "gather_1M_rows_1024_bf16_GBps",
          "while_counted_10000_us_per_iteration",
          "while_predicated_10000_us_per_iteration", "fused_chain8_1GiB_GBps",
          "region_upload_1GiB_GBps", "mlp_step_cuda_vs_host"}) {
      skipped.push_back(
          {{"metric", m}, {"reason", std::string(cuda.status().message())}});
    }
    std::cout
        << nlohmann::json{{"benchmarks", metrics}, {"skipped", skipped}}.dump(2)
        << "\n";
    return 0;
  }
  pjrt::runtime::Client& client = **cuda;
  pjrt::runtime::Device* device = client.devices()[0];
  int major = 0, minor = 0;
  CheckCuda(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
      "cudaDeviceGetAttribute");
  CheckCuda(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0),
      "cudaDeviceGetAttribute");
  const int device_capability = 10 * major + minor;

  for (bool bf16 : {false, true}) {  // dot 4096^3 against cuBLASLt directly.
    const int n = 4096;
    const char* t = bf16 ? "bf16" : "f32";
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client,
        absl::StrCat("HloModule dot\nENTRY e {\n  a = ", t,
                     "[4096,4096] parameter(0)\n"
                     "  b = ",
                     t, "[4096,4096] parameter(1)\n  ROOT d = ", t,
                     "[4096,4096] dot(a, b), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n}\n")));
    auto args = RandomArguments(client, *exe, device);
    const double ours =
        MedianSeconds(5, [&] { RunOnce(*exe, Pointers(args), device); });
    const double direct = DirectGemmSeconds(n, bf16 ? CUDA_R_16BF : CUDA_R_32F,
                                            bf16 ? CUDA_R_16BF : CUDA_R_32F);
    const double flops = 2.0 * n * n * n;
    metrics.push_back(Metric(absl::StrCat("dot_", t, "_4096_tflops"), "TFLOP/s",
                             flops / ours / 1e12, "cublaslt_direct",
                             flops / direct / 1e12, 0.9));
  }

  if (device_capability >= 89) {  // fp8 4096^3 into f32, k innermost in both
    const int n = 4096;
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client,
        "HloModule dot\nENTRY e {\n  a = f8e4m3fn[4096,4096] parameter(0)\n"
        "  b = f8e4m3fn[4096,4096] parameter(1)\n  ROOT d = f32[4096,4096] "
        "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n"));
    auto args = RandomArguments(client, *exe, device);
    const double ours =
        MedianSeconds(5, [&] { RunOnce(*exe, Pointers(args), device); });
    const double direct = DirectGemmSeconds(n, CUDA_R_8F_E4M3, CUDA_R_32F);
    const double flops = 2.0 * n * n * n;
    metrics.push_back(Metric("dot_f8e4m3fn_4096_tflops", "TFLOP/s",
                             flops / ours / 1e12, "cublaslt_direct",
                             flops / direct / 1e12, 0.9));
  } else {
    skipped.push_back({{"metric", "dot_f8e4m3fn_4096_tflops"},
                       {"reason",
                        "the GPU has no fp8 tensor cores (compute "
                        "capability below 8.9)"}});
  }

  {  // A 3x3 bf16 convolution, batch 32, 56x56, 64 -> 64 features, NHWC
     // activations and JAX's HWIO filter, against cuDNN called directly.
    const int n = 32, hw = 56, c = 64, k = 64, batch = 20;
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client,
        "HloModule conv\nENTRY e {\n"
        "  a = bf16[32,56,56,64] parameter(0)\n"
        "  w = bf16[3,3,64,64] parameter(1)\n"
        "  ROOT c = bf16[32,56,56,64] convolution(a, w), window={size=3x3 "
        "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n"));
    auto args = RandomArguments(client, *exe, device);
    const double ours = SecondsPerRun(*exe, Pointers(args), device, batch);
    const double direct = DirectConvSeconds(n, hw, c, k, batch);
    const double flops = 2.0 * n * hw * hw * k * c * 9;
    metrics.push_back(Metric("conv3x3_bf16_nhwc_tflops", "TFLOP/s",
                             flops / ours / 1e12, "cudnn_direct_fastest",
                             flops / direct / 1e12, 0.9));
  }

  {  // A sort of 64M random u32 keys (CUB's radix sort through pjrtd)
     // against CUB called directly.
    const int64_t n = int64_t{1} << 26;
    const int batch = 5;
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client, absl::StrFormat(
                     "HloModule sort\n"
                     "lt { a = u32[] parameter(0)\n  b = u32[] parameter(1)\n"
                     "  ROOT l = pred[] compare(a, b), direction=LT }\n"
                     "ENTRY e {\n  k = u32[%d] parameter(0)\n"
                     "  ROOT s = u32[%d] sort(k), dimensions={0}, "
                     "to_apply=lt\n}\n",
                     n, n)));
    std::vector<uint32_t> keys(n);
    std::mt19937 rng(5);
    for (uint32_t& k : keys) k = rng();
    auto in = Check(client.BufferFromHostBuffer(
        keys.data(), Shape(PrimitiveType::kU32, {n}), device));
    const double ours = SecondsPerRun(*exe, {in.get()}, device, batch);
    const double direct = DirectCubSortSeconds(n, batch);
    metrics.push_back(Metric("sort_u32_64M_gkeys_per_second", "Gkeys/s",
                             n / ours / 1e9, "cub_radix_sort_direct",
                             n / direct / 1e9, 0.9));
  }

  {  // A gather of 1M random rows of 1024 bf16 (2 GiB read, 2 GiB written)
     // against the bandwidth of a device-to-device copy of 2 GiB.
    const int64_t rows = int64_t{1} << 20, width = 1024;
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client,
        absl::StrFormat(
            "HloModule gather\nENTRY e {\n"
            "  t = bf16[%d,%d] parameter(0)\n  i = s32[%d,1] parameter(1)\n"
            "  ROOT g = bf16[%d,%d] gather(t, i), offset_dims={1}, "
            "collapsed_slice_dims={0}, start_index_map={0}, "
            "index_vector_dim=1, slice_sizes={1,%d}\n}\n",
            rows, width, rows, rows, width, width)));
    auto table = Check(client.CreateUninitializedBuffer(
        Shape(PrimitiveType::kBf16, {rows, width}), device));
    std::vector<int32_t> indices(rows);
    std::mt19937 rng(9);
    for (int32_t& i : indices) i = static_cast<int32_t>(rng() % rows);
    auto index = Check(client.BufferFromHostBuffer(
        indices.data(), Shape(PrimitiveType::kS32, {rows, 1}), device));
    const double ours =
        SecondsPerRun(*exe, {table.get(), index.get()}, device, 5);
    const int64_t bytes = rows * width * 2;
    void *src, *dst;
    CheckCuda(cudaMalloc(&src, bytes), "cudaMalloc");
    CheckCuda(cudaMalloc(&dst, bytes), "cudaMalloc");
    const double copy = MedianSeconds(5, [&] {
      CheckCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
                "cudaMemcpy");
    });
    cudaFree(src);
    cudaFree(dst);
    metrics.push_back(Metric(
        "gather_1M_rows_1024_bf16_GBps", "GB/s", 2.0 * bytes / ours / 1e9,
        "cudaMemcpy_device_to_device", 2.0 * bytes / copy / 1e9, 0.6));
  }

  // A while loop of 10,000 iterations of a small body: counted (JAX's
  // fori_loop: the trip count known, nothing read back) and predicated on
  // a value the body computes (its pred read back each iteration).
  // Microseconds per iteration against the goal of 10; the ratio is the
  // goal over the value (higher is better).
  for (bool counted : {true, false}) {
    const char* condition =
        counted ? "  ROOT lt = pred[] compare(i, n), direction=LT\n"
                : "  x = f32[256] get-tuple-element(p), index=1\n"
                  "  z = f32[] constant(0)\n"
                  "  s = f32[] reduce(x, z), dimensions={0}, to_apply=add\n"
                  "  lim = f32[] constant(1e30)\n"
                  "  small = pred[] compare(s, lim), direction=LT\n"
                  "  more = pred[] compare(i, n), direction=LT\n"
                  "  ROOT both = pred[] and(small, more)\n";
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client,
        absl::StrCat("HloModule loop\n"
                     "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
                     "  ROOT s = f32[] add(a, b) }\n"
                     "cond { p = (s32[], f32[256]) parameter(0)\n"
                     "  i = s32[] get-tuple-element(p), index=0\n"
                     "  n = s32[] constant(10000)\n",
                     condition,
                     "}\n"
                     "body { p = (s32[], f32[256]) parameter(0)\n"
                     "  i = s32[] get-tuple-element(p), index=0\n"
                     "  one = s32[] constant(1)\n"
                     "  j = s32[] add(i, one)\n"
                     "  x = f32[256] get-tuple-element(p), index=1\n"
                     "  h = f32[] constant(0.5)\n"
                     "  hb = f32[256] broadcast(h), dimensions={}\n"
                     "  y = f32[256] multiply(x, hb)\n"
                     "  ROOT t = (s32[], f32[256]) tuple(j, y) }\n"
                     "ENTRY e { x = f32[256] parameter(0)\n"
                     "  zero = s32[] constant(0)\n"
                     "  init = (s32[], f32[256]) tuple(zero, x)\n"
                     "  w = (s32[], f32[256]) while(init), condition=cond, "
                     "body=body\n"
                     "  ROOT r = f32[256] get-tuple-element(w), index=1 }\n")));
    auto args = RandomArguments(client, *exe, device);
    const double us =
        SecondsPerRun(*exe, Pointers(args), device, 1) / 10000 * 1e6;
    nlohmann::json m =
        Metric(absl::StrCat("while_", counted ? "counted" : "predicated",
                            "_10000_us_per_iteration"),
               "us", us, "goal_10us", 10, 0);
    m["ratio"] = 10 / us;
    metrics.push_back(m);
  }

  {  // Eight fused element-wise ops over 1 GiB against a device-to-device copy.
    const int64_t n = int64_t{1} << 28;
    auto exe = Check(pjrt::runtime::Executable::Compile(
        &client, pjrt::bench::ChainProgram(n)));
    auto x = Check(client.CreateUninitializedBuffer(
        Shape(PrimitiveType::kF32, {n}), device));
    const double ours =
        MedianSeconds(5, [&] { RunOnce(*exe, {x.get()}, device); });
    void *src, *dst;
    CheckCuda(cudaMalloc(&src, n * 4), "cudaMalloc");
    CheckCuda(cudaMalloc(&dst, n * 4), "cudaMalloc");
    const double copy = MedianSeconds(5, [&] {
      CheckCuda(cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToDevice),
                "cudaMemcpy");
    });
    cudaFree(src);
    cudaFree(dst);
    const double bytes = 2.0 * n * 4;
    metrics.push_back(Metric("fused_chain8_1GiB_GBps", "GB/s",
                             bytes / ours / 1e9, "cudaMemcpy_device_to_device",
                             bytes / copy / 1e9, 0.8));
  }

  {  // An upload from registered (shared-memory-like) pages against
     // cudaMemcpy from pinned memory.
    const int64_t bytes = int64_t{1} << 30;
    void* region = std::aligned_alloc(4096, bytes);
    std::memset(region, 1, bytes);
    Check(client.platform()->RegisterHostMemory(region, bytes));
    const Shape shape(PrimitiveType::kU8, {bytes});
    const double ours = MedianSeconds(5, [&] {
      auto b = Check(client.BufferFromHostBuffer(
          region, shape,
          pjrt::runtime::HostBufferSemantics::kImmutableUntilTransferCompletes,
          nullptr, device));
      Check(b->BlockHostUntilReady());
    });
    client.platform()->UnregisterHostMemory(region);
    std::free(region);
    void *pinned, *dst;
    CheckCuda(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault),
              "cudaHostAlloc");
    CheckCuda(cudaMalloc(&dst, bytes), "cudaMalloc");
    const double direct = MedianSeconds(5, [&] {
      CheckCuda(cudaMemcpy(dst, pinned, bytes, cudaMemcpyHostToDevice),
                "cudaMemcpy");
    });
    cudaFreeHost(pinned);
    cudaFree(dst);
    metrics.push_back(Metric("region_upload_1GiB_GBps", "GB/s",
                             bytes / ours / 1e9, "cudaMemcpy_from_pinned",
                             bytes / direct / 1e9, 0.7));
  }

  {  // The MLP training step, on the GPU against the host platform.
    pjrt::runtime::ClientOptions host_options;
    host_options.platform = "host";
    auto host = Check(pjrt::runtime::Client::Create(host_options));
    auto steps_per_second = [&](pjrt::runtime::Client& c) {
      auto exe = Check(pjrt::runtime::Executable::Compile(&c, mlp));
      pjrt::runtime::Device* d = c.devices()[0];
      auto args = RandomArguments(c, *exe, d);
      return 1.0 / MedianSeconds(20, [&] { RunOnce(*exe, Pointers(args), d); });
    };
    metrics.push_back(Metric("mlp_step_per_second_cuda", "steps/s",
                             steps_per_second(client), "host_platform",
                             steps_per_second(*host), 0));
  }
  std::cout
      << nlohmann::json{{"benchmarks", metrics}, {"skipped", skipped}}.dump(2)
      << "\n";
  return 0;
}
