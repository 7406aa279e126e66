// Benchmarks of the host compiler, in process (runtime + compiler, no
// daemon). Prints one JSON object: each metric with its baseline measured in
// the same run and the ratio (higher is better).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "bench/bench_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/stablehlo.h"
#include "nlohmann/json.hpp"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace {

using pjrt::bench::Check;
using pjrt::bench::MedianSeconds;

// Runs `exe` on `args` and waits for the results.
void RunOnce(pjrt::runtime::Executable& exe,
             std::vector<pjrt::runtime::Buffer*> args,
             pjrt::runtime::Device* device) {
  auto results = Check(exe.Execute(args, device));
  for (auto& r : results) Check(r->BlockHostUntilReady());
}

nlohmann::json Metric(const char* name, const char* unit, double value,
                      const char* baseline_name, double baseline, double goal) {
  return {{"metric", name},
          {"unit", unit},
          {"value", value},
          {"baseline", baseline_name},
          {"baseline_value", baseline},
          {"ratio", value / baseline},
          {"goal", goal}};
}

}  // namespace

int main() {
  pjrt::runtime::ClientOptions options;
  options.platform = "host";
  auto client = Check(pjrt::runtime::Client::Create(options));
  pjrt::runtime::Device* device = client->devices()[0];
  nlohmann::json metrics = nlohmann::json::array();

  // Matmuls of 1024^3: f32 goes to oneDNN where it is there, f64 to the
  // host kernels' Eigen GEMM (host_kernels.h).
  const auto matmul = [&](auto zero, pjrt::hlo::PrimitiveType type,
                          const char* type_name, const char* metric) {
    using T = decltype(zero);
    const int n = 1024;
    std::vector<T> a(n * n), b(n * n);
    for (int i = 0; i < n * n; ++i) {
      a[i] = static_cast<T>((i * 7) % 13) / T(13);
      b[i] = static_cast<T>((i * 5) % 11) / T(11);
    }
    pjrt::hlo::Shape shape(type, {n, n});
    auto ba = Check(client->BufferFromHostBuffer(a.data(), shape, device));
    auto bb = Check(client->BufferFromHostBuffer(b.data(), shape, device));
    auto exe = Check(pjrt::runtime::Executable::Compile(
        client.get(),
        absl::StrReplaceAll(R"(
HloModule matmul
ENTRY e {
  a = T[1024,1024] parameter(0)
  b = T[1024,1024] parameter(1)
  ROOT d = T[1024,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                            {{"T[", absl::StrCat(type_name, "[")}})));
    double ours = MedianSeconds(7, [&] {
      RunOnce(*exe, {ba.get(), bb.get()}, device);
    });
    std::vector<T> c(n * n);
    auto& pool = pjrt::compiler::host::ThreadPool::Get();
    double eigen = MedianSeconds(7, [&] {
      using M = Eigen::Tensor<T, 2, Eigen::RowMajor>;
      Eigen::TensorMap<const M> A(a.data(), n, n), B(b.data(), n, n);
      Eigen::TensorMap<M> C(c.data(), n, n);
      Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims = {
          Eigen::IndexPair<Eigen::Index>(1, 0)};
      C.device(pool.device()) = A.contract(B, dims);
    });
    double flops = 2.0 * n * n * n;
    metrics.push_back(Metric(metric, "GFLOP/s", flops / ours / 1e9,
                             "eigen_contraction_direct", flops / eigen / 1e9,
                             0.9));
  };
  matmul(0.0f, pjrt::hlo::PrimitiveType::kF32, "f32", "matmul_f32_1024_gflops");
  matmul(0.0, pjrt::hlo::PrimitiveType::kF64, "f64", "matmul_f64_1024_gflops");

  {  // A mixture of experts' ragged-dot: 4096 rows of 512 in 16 groups of
     // uneven sizes, each by its group's [512, 512], against the dense dot
     // of the same rows by one [512, 512] (the same useful work).
    const int64_t m = 4096, k = 512, n = 512, g = 16;
    std::vector<float> l(m * k), r(g * k * n), w(k * n);
    for (int64_t i = 0; i < m * k; ++i) l[i] = static_cast<float>(i % 17) / 17;
    for (int64_t i = 0; i < g * k * n; ++i)
      r[i] = static_cast<float>(i % 13) / 13;
    for (int64_t i = 0; i < k * n; ++i) w[i] = r[i];
    std::vector<int32_t> sizes(g);
    for (int64_t i = 0; i < g; ++i)
      sizes[i] = static_cast<int32_t>(32 + 45 * i);
    sizes[g - 1] += static_cast<int32_t>(m) -
                    std::accumulate(sizes.begin(), sizes.end(), int32_t{0});
    using pjrt::hlo::PrimitiveType;
    using pjrt::hlo::Shape;
    auto bl = Check(client->BufferFromHostBuffer(
        l.data(), Shape(PrimitiveType::kF32, {m, k}), device));
    auto br = Check(client->BufferFromHostBuffer(
        r.data(), Shape(PrimitiveType::kF32, {g, k, n}), device));
    auto bw = Check(client->BufferFromHostBuffer(
        w.data(), Shape(PrimitiveType::kF32, {k, n}), device));
    auto bs = Check(client->BufferFromHostBuffer(
        sizes.data(), Shape(PrimitiveType::kS32, {g}), device));
    auto ragged = Check(pjrt::runtime::Executable::Compile(client.get(), R"(
HloModule moe
ENTRY e {
  l = f32[4096,512] parameter(0)
  r = f32[16,512,512] parameter(1)
  s = s32[16] parameter(2)
  ROOT d = f32[4096,512] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})"));
    auto dense = Check(pjrt::runtime::Executable::Compile(client.get(), R"(
HloModule dense
ENTRY e {
  l = f32[4096,512] parameter(0)
  w = f32[512,512] parameter(1)
  ROOT d = f32[4096,512] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})"));
    const double ours = MedianSeconds(5, [&] {
      RunOnce(*ragged, {bl.get(), br.get(), bs.get()}, device);
    });
    const double base = MedianSeconds(5, [&] {
      RunOnce(*dense, {bl.get(), bw.get()}, device);
    });
    const double flops = 2.0 * m * k * n;
    metrics.push_back(Metric("ragged_dot_4096x512x512_16_groups_gflops",
                             "GFLOP/s", flops / ours / 1e9,
                             "dense_dot_same_rows", flops / base / 1e9, 0.5));
    // Its weight gradient: the rows contracted per group into [16, 512,
    // 512], against the dense [512, 4096] x [4096, 512].
    auto gradient = Check(pjrt::runtime::Executable::Compile(client.get(), R"(
HloModule moe_gradient
ENTRY e {
  l = f32[4096,512] parameter(0)
  r = f32[4096,512] parameter(1)
  s = s32[16] parameter(2)
  ROOT d = f32[16,512,512] ragged-dot(l, r, s), lhs_contracting_dims={0}, rhs_contracting_dims={0}, lhs_ragged_dims={0}
})"));
    auto outer = Check(pjrt::runtime::Executable::Compile(client.get(), R"(
HloModule dense_gradient
ENTRY e {
  l = f32[4096,512] parameter(0)
  r = f32[4096,512] parameter(1)
  ROOT d = f32[512,512] dot(l, r), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})"));
    const double grad = MedianSeconds(5, [&] {
      RunOnce(*gradient, {bl.get(), bl.get(), bs.get()}, device);
    });
    const double grad_base = MedianSeconds(5, [&] {
      RunOnce(*outer, {bl.get(), bl.get()}, device);
    });
    metrics.push_back(
        Metric("ragged_dot_gradient_4096x512x512_16_groups_gflops", "GFLOP/s",
               flops / grad / 1e9, "dense_dot_same_rows",
               flops / grad_base / 1e9, 0.5));
  }

  {  // Eight element-wise ops over 64 MiB of f32.
    const int64_t n = int64_t{16} << 20;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(i % 1000) - 500.0f;
    pjrt::hlo::Shape shape(pjrt::hlo::PrimitiveType::kF32, {n});
    auto bx = Check(client->BufferFromHostBuffer(x.data(), shape, device));
    auto exe = Check(pjrt::runtime::Executable::Compile(
        client.get(), pjrt::bench::ChainProgram(n)));
    double ours = MedianSeconds(9, [&] { RunOnce(*exe, {bx.get()}, device); });
    std::vector<float> dst(n);
    double copy = MedianSeconds(
        9, [&] { std::memcpy(dst.data(), x.data(), n * sizeof(float)); });
    double bytes = 2.0 * n * sizeof(float);  // read once, write once
    metrics.push_back(Metric("fused_elementwise_chain8_64MiB_GBps", "GB/s",
                             bytes / ours / 1e9, "memcpy_64MiB",
                             bytes / copy / 1e9, 0.5));
  }
  {  // All-reduce (sum) of 32 MiB of f32 over four host devices.
    pjrt::runtime::ClientOptions four;
    four.platform = "host";
    four.host_device_count = 4;
    auto client4 = Check(pjrt::runtime::Client::Create(four));
    const int64_t n = int64_t{8} << 20;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 977);
    pjrt::hlo::Shape shape(pjrt::hlo::PrimitiveType::kF32, {n});
    std::vector<std::shared_ptr<pjrt::runtime::Buffer>> inputs;
    std::vector<std::vector<pjrt::runtime::Buffer*>> args;
    for (pjrt::runtime::Device* d : client4->devices()) {
      inputs.push_back(
          Check(client4->BufferFromHostBuffer(x.data(), shape, d)));
      args.push_back({inputs.back().get()});
    }
    auto exe = Check(pjrt::runtime::Executable::Compile(client4.get(), R"(
HloModule allreduce, replica_count=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[8388608] parameter(0)
  ROOT r = f32[8388608] all-reduce(x), replica_groups={}, to_apply=add
})"));
    double ours = MedianSeconds(9, [&] {
      auto results = Check(exe->ExecuteReplicated(args));
      for (auto& device_results : results) {
        for (auto& r : device_results) Check(r->BlockHostUntilReady());
      }
    });
    // Baseline: memcpy of the same bytes, every device's input to an output
    // of its own (the least any all-reduce must move: read each input and
    // write each output once).
    std::vector<std::vector<float>> sources(4, x),
        copies(4, std::vector<float>(n));
    double copy = MedianSeconds(9, [&] {
      for (int d = 0; d < 4; ++d) {
        std::memcpy(copies[d].data(), sources[d].data(), n * sizeof(float));
      }
    });
    double bytes = 4.0 * n * sizeof(float);
    metrics.push_back(Metric("all_reduce_f32_4_host_devices_4x32MiB_GBps",
                             "GB/s", bytes / ours / 1e9, "memcpy_4x32MiB",
                             bytes / copy / 1e9, 0.5));
  }
  {  // The StableHLO frontend: the transformer step read and verified from
     // StableHLO, against its HLO twin read and verified by the HLO parser.
    const auto read = [](const char* relative) {
      std::ifstream file(std::string(PJRT_SOURCE_DIR) + "/" + relative);
      std::stringstream text;
      text << file.rdbuf();
      return text.str();
    };
    const std::string mlir = read("tests/data/transformer_step.mlir");
    const std::string hlo = read("tests/data/transformer_step.hlo");
    double stablehlo = MedianSeconds(21, [&] {
      Check(pjrt::hlo::ParseAndVerifyProgram(
                mlir, pjrt::hlo::ProgramFormat::kStableHlo)
                .status());
    });
    double hlo_only = MedianSeconds(21, [&] {
      Check(
          pjrt::hlo::ParseAndVerifyProgram(hlo, pjrt::hlo::ProgramFormat::kHlo)
              .status());
    });
    metrics.push_back(Metric("stablehlo_transformer_step_reads_per_second",
                             "1/s", 1 / stablehlo, "hlo_twin_reads_per_second",
                             1 / hlo_only, 0.3));
  }
  std::cout << nlohmann::json{{"benchmarks", metrics}}.dump(2) << std::endl;
  return 0;
}
