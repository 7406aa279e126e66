#include "compiler/cuda/backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "compiler/cuda/nccl.h"
#include "compiler/host/compiler.h"
#include "device/cuda/cuda_platform.h"

namespace pjrt::compiler::cuda {
namespace {

using host::BufferSlot;

// cuBLASLt's workspace, at the end of a run's scratch memory when the
// program has a matmul.
constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// device::CudaStatus, clearing a non-sticky error so that it does not fail
// the next call.
absl::Status CudaError(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return device::CudaStatus(error, what.c_str());
}

absl::Status BlasError(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s (%s)", what,
                                             cublasLtGetStatusString(status),
                                             cublasLtGetStatusName(status)));
}

// One cuBLASLt handle per GPU, for the life of the process.
absl::StatusOr<cublasLtHandle_t> BlasHandle(int device) {
  static Mutex mu;
  static auto* handles = new absl::flat_hash_map<int, cublasLtHandle_t>();
  MutexLock lock(&mu);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  cublasLtHandle_t handle = nullptr;
  PJRT_RETURN_IF_ERROR(BlasError(cublasLtCreate(&handle), "cublasLtCreate"));
  (*handles)[device] = handle;
  return handle;
}

// A matmul's cuBLASLt descriptors and chosen algorithm, made once per GPU
// and reused by every run.
struct GemmPlan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool f64 = false;

  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// Row-major out[b] (m x n) = op(lhs[b]) op(rhs[b]) as cuBLASLt's
// column-major out^T (n x m) = op(rhs^T) op(lhs^T).
absl::StatusOr<std::unique_ptr<GemmPlan>> PlanGemm(const host::DotStep& s, int device) {
  auto plan = std::make_unique<GemmPlan>();
  PJRT_ASSIGN_OR_RETURN(plan->handle, BlasHandle(device));
  plan->f64 = s.type == hlo::PrimitiveType::kF64;
  const bool f64 = plan->f64;
  const cudaDataType_t dt = f64 ? CUDA_R_64F : CUDA_R_32F;
  // bf16 and f16 operands are multiplied as they are, accumulating in f32.
  const cudaDataType_t operand_type =
      s.operand_type == hlo::PrimitiveType::kBf16  ? CUDA_R_16BF
      : s.operand_type == hlo::PrimitiveType::kF16 ? CUDA_R_16F
                                                   : dt;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  PJRT_RETURN_IF_ERROR(BlasError(cublasLtMatmulDescCreate(&plan->desc, compute, scale),
                                 "cublasLtMatmulDescCreate"));
  const cublasOperation_t op_a = s.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.lhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  // Stored shapes, column-major: rhs is n x k (k x n when transposed), lhs
  // k x m (m x k when transposed), out n x m.
  const uint64_t a_rows = s.rhs_transposed ? s.k : s.n, a_cols = s.rhs_transposed ? s.n : s.k;
  const uint64_t b_rows = s.lhs_transposed ? s.m : s.k, b_cols = s.lhs_transposed ? s.k : s.m;
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatrixLayoutCreate(&plan->a, operand_type, a_rows, a_cols, a_rows),
      "cublasLtMatrixLayoutCreate"));
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatrixLayoutCreate(&plan->b, operand_type, b_rows, b_cols, b_rows),
      "cublasLtMatrixLayoutCreate"));
  PJRT_RETURN_IF_ERROR(BlasError(cublasLtMatrixLayoutCreate(&plan->c, dt, s.n, s.m, s.n),
                                 "cublasLtMatrixLayoutCreate"));
  if (s.batch > 1) {
    const int32_t count = static_cast<int32_t>(s.batch);
    const auto batch = [&](cublasLtMatrixLayout_t layout, int64_t stride) {
      absl::Status st = BlasError(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                           &count, sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
      st.Update(BlasError(
          cublasLtMatrixLayoutSetAttribute(
              layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
          "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
      return st;
    };
    PJRT_RETURN_IF_ERROR(batch(plan->a, s.k * s.n));
    PJRT_RETURN_IF_ERROR(batch(plan->b, s.m * s.k));
    PJRT_RETURN_IF_ERROR(batch(plan->c, s.m * s.n));
  }
  cublasLtMatmulPreference_t preference = nullptr;
  PJRT_RETURN_IF_ERROR(BlasError(cublasLtMatmulPreferenceCreate(&preference),
                                 "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace_bytes = kGemmWorkspaceBytes;
  absl::Status status = BlasError(
      cublasLtMatmulPreferenceSetAttribute(preference,
                                           CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes)),
      "cublasLtMatmulPreferenceSetAttribute");
  int found = 0;
  if (status.ok()) {
    status = BlasError(cublasLtMatmulAlgoGetHeuristic(plan->handle, plan->desc, plan->a,
                                                      plan->b, plan->c, plan->c, preference, 1,
                                                      &plan->heuristic, &found),
                       "cublasLtMatmulAlgoGetHeuristic");
  }
  cublasLtMatmulPreferenceDestroy(preference);
  PJRT_RETURN_IF_ERROR(status);
  if (found == 0) {
    return absl::InternalError(absl::StrFormat(
        "cuBLASLt has no algorithm for a %s matmul of [%d,%d] x [%d,%d] (batch %d)",
        hlo::PrimitiveTypeName(s.operand_type), s.m, s.k, s.k, s.n, s.batch));
  }
  return plan;
}

absl::Status RunGemm(const GemmPlan& plan, void* out, const void* lhs, const void* rhs,
                     void* workspace, cudaStream_t stream) {
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = plan.f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = plan.f64 ? static_cast<const void*>(&zero64) : &zero32;
  return BlasError(cublasLtMatmul(plan.handle, plan.desc, alpha, rhs, plan.a, lhs, plan.b, beta,
                                  out, plan.c, out, plan.c, &plan.heuristic.algo, workspace,
                                  kGemmWorkspaceBytes, stream),
                   "cublasLtMatmul");
}

class CudaProgram : public Program {
 public:
  explicit CudaProgram(CudaCompilation c) : c_(std::move(c)) {
    const host::HostProgram& lowered = *c_.lowered;
    int64_t bytes = AlignUp(lowered.scratch_bytes(), 256);
    temporaries_offset_ = bytes;
    bytes += c_.generated.temporary_bytes;
    for (const BufferSlot& slot : lowered.slots) {
      uses_ids_ |= slot.kind == BufferSlot::Kind::kReplicaId ||
                   slot.kind == BufferSlot::Kind::kPartitionId;
    }
    if (uses_ids_) {
      ids_offset_ = bytes;
      bytes += 256;
    }
    for (const Launch& launch : c_.generated.launches) {
      if (launch.kind == Launch::Kind::kGemm && workspace_offset_ < 0) {
        workspace_offset_ = bytes;
        bytes += kGemmWorkspaceBytes;
      }
    }
    scratch_bytes_ = bytes;
  }

  ~CudaProgram() override {
    for (auto& [device, pointers] : constants_) {
      cudaSetDevice(device);
      for (void* p : pointers) cudaFree(p);
    }
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  absl::Status Run(const RunContext& context) const override {
    void* native = context.stream != nullptr ? context.stream->native_handle() : nullptr;
    if (native == nullptr) {
      return absl::FailedPreconditionError(
          "a CUDA program runs on a CUDA stream; this run has none");
    }
    cudaStream_t stream = static_cast<cudaStream_t>(native);
    int device = 0;
    PJRT_RETURN_IF_ERROR(CudaError(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice"));
    PJRT_RETURN_IF_ERROR(CudaError(cudaSetDevice(device), "cudaSetDevice"));
    PJRT_RETURN_IF_ERROR(EnsureLoaded());
    PJRT_ASSIGN_OR_RETURN(const std::vector<void*>* constants, ConstantsOn(device));

    const host::HostProgram& lowered = *c_.lowered;
    char* scratch = static_cast<char*>(context.scratch);
    std::vector<void*> addresses(lowered.slots.size() + c_.generated.temporary_offsets.size(),
                                 nullptr);
    for (size_t k = 0; k < c_.generated.temporary_offsets.size(); ++k) {
      addresses[lowered.slots.size() + k] =
          scratch + temporaries_offset_ + c_.generated.temporary_offsets[k];
    }
    for (size_t i = 0; i < lowered.slots.size(); ++i) {
      const BufferSlot& slot = lowered.slots[i];
      switch (slot.kind) {
        case BufferSlot::Kind::kParameter: addresses[i] = context.arguments[slot.index]; break;
        case BufferSlot::Kind::kResult: addresses[i] = context.results[slot.index]; break;
        case BufferSlot::Kind::kScratch: addresses[i] = scratch + slot.offset; break;
        case BufferSlot::Kind::kConstant: addresses[i] = (*constants)[slot.index]; break;
        case BufferSlot::Kind::kView: addresses[i] = addresses[slot.index]; break;
        case BufferSlot::Kind::kReplicaId: addresses[i] = scratch + ids_offset_; break;
        case BufferSlot::Kind::kPartitionId: addresses[i] = scratch + ids_offset_ + 4; break;
      }
    }
    if (uses_ids_) {
      uint32_t replica = static_cast<uint32_t>(context.replica_id);
      uint32_t partition = static_cast<uint32_t>(context.partition_id);
      void* ids = scratch + ids_offset_;
      void* args[] = {&ids, &replica, &partition};
      PJRT_RETURN_IF_ERROR(CudaError(
          cudaLaunchKernel(reinterpret_cast<const void*>(set_ids_), dim3(1), dim3(1), args, 0,
                           stream),
          "launching pj_set_ids"));
    }
    for (size_t l = 0; l < c_.generated.launches.size(); ++l) {
      const Launch& launch = c_.generated.launches[l];
      if (launch.kind == Launch::Kind::kGemm) {
        absl::StatusOr<const GemmPlan*> plan = GemmPlanFor(l, device);
        if (!plan.ok()) return Annotate(plan.status(), launch);
        absl::Status s = RunGemm(**plan, addresses[launch.slots[0]], addresses[launch.slots[1]],
                                 addresses[launch.slots[2]], scratch + workspace_offset_, stream);
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.kind == Launch::Kind::kCollective) {
        const size_t count = launch.collective.inputs.size();
        std::vector<void*> ins, outs;
        for (size_t a = 0; a < launch.slots.size(); ++a) {
          (a < count ? ins : outs).push_back(addresses[launch.slots[a]]);
        }
        absl::Status s = RunNcclCollective(launch.collective, context, ins, outs, device, stream);
        if (!s.ok()) return s;
        continue;
      }
      if (launch.skip_when_same_memory &&
          addresses[launch.slots[0]] == addresses[launch.slots[1]]) {
        continue;
      }
      std::vector<void*> values(launch.slots.size());
      std::vector<void*> args(launch.slots.size());
      for (size_t a = 0; a < launch.slots.size(); ++a) {
        values[a] = addresses[launch.slots[a]];
        args[a] = &values[a];
      }
      absl::Status s = CudaError(
          cudaLaunchKernel(reinterpret_cast<const void*>(kernels_[l]),
                           dim3(static_cast<unsigned>(launch.blocks)),
                           dim3(static_cast<unsigned>(launch.threads),
                                static_cast<unsigned>(launch.threads_y)),
                           args.data(), 0, stream),
          absl::StrCat("launching ", launch.kernel));
      if (!s.ok()) return Annotate(s, launch);
    }
    return absl::OkStatus();
  }

  int64_t scratch_bytes() const override { return scratch_bytes_; }
  int64_t host_memory_bytes() const override {
    return static_cast<int64_t>(sizeof(*this) + c_.cubin.cubin.size() +
                                c_.generated.source.size()) +
           c_.lowered->host_memory_bytes();
  }
  const std::vector<hlo::Shape>& parameter_shapes() const override {
    return c_.lowered->parameter_shapes();
  }
  const std::vector<hlo::Shape>& result_shapes() const override {
    return c_.lowered->result_shapes();
  }
  std::vector<const CollectiveOp*> collectives() const override {
    return c_.lowered->collectives();
  }

 private:
  static absl::Status Annotate(const absl::Status& s, const Launch& launch) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (", launch.origin, ")"));
  }

  // Loads the cubin (into every GPU's context) and finds its kernels, once.
  absl::Status EnsureLoaded() const {
    MutexLock lock(&mu_);
    if (library_ != nullptr) return absl::OkStatus();
    cudaLibrary_t library = nullptr;
    PJRT_RETURN_IF_ERROR(CudaError(
        cudaLibraryLoadData(&library, c_.cubin.cubin.data(), nullptr, nullptr, 0, nullptr,
                            nullptr, 0),
        absl::StrFormat("loading the program's %s cubin", c_.arch)));
    std::vector<cudaKernel_t> kernels(c_.generated.launches.size(), nullptr);
    for (size_t l = 0; l < kernels.size(); ++l) {
      const Launch& launch = c_.generated.launches[l];
      if (launch.kind != Launch::Kind::kKernel) continue;
      absl::Status s = CudaError(cudaLibraryGetKernel(&kernels[l], library, launch.kernel.c_str()),
                                 absl::StrCat("finding kernel ", launch.kernel));
      if (!s.ok()) {
        cudaLibraryUnload(library);
        return Annotate(s, launch);
      }
    }
    cudaKernel_t set_ids = nullptr;
    if (uses_ids_) {
      absl::Status s = CudaError(cudaLibraryGetKernel(&set_ids, library, "pj_set_ids"),
                                 "finding kernel pj_set_ids");
      if (!s.ok()) {
        cudaLibraryUnload(library);
        return s;
      }
    }
    library_ = library;
    kernels_ = std::move(kernels);
    set_ids_ = set_ids;
    return absl::OkStatus();
  }

  // The cuBLASLt plan of launch `l` on `device`, made on its first run there.
  absl::StatusOr<const GemmPlan*> GemmPlanFor(size_t l, int device) const {
    MutexLock lock(&mu_);
    auto& plan = gemm_plans_[{l, device}];
    if (plan == nullptr) {
      PJRT_ASSIGN_OR_RETURN(plan, PlanGemm(c_.generated.launches[l].gemm, device));
    }
    return plan.get();
  }

  // The program's constants in `device`'s memory, uploaded on its first run
  // there.
  absl::StatusOr<const std::vector<void*>*> ConstantsOn(int device) const {
    MutexLock lock(&mu_);
    if (auto it = constants_.find(device); it != constants_.end()) return &it->second;
    std::vector<void*> pointers;
    absl::Status status;
    for (const std::vector<uint64_t>& data : c_.lowered->constants) {
      void* p = nullptr;
      const size_t bytes = std::max<size_t>(data.size() * sizeof(uint64_t), 8);
      status = CudaError(cudaMalloc(&p, bytes), "cudaMalloc for the program's constants");
      if (!status.ok()) break;
      pointers.push_back(p);
      status = CudaError(cudaMemcpy(p, data.data(), data.size() * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice),
                         "uploading the program's constants");
      if (!status.ok()) break;
    }
    if (!status.ok()) {
      for (void* p : pointers) cudaFree(p);
      if (status.code() == absl::StatusCode::kInternal &&
          status.message().find("cudaMalloc") != absl::string_view::npos) {
        return absl::ResourceExhaustedError(status.message());
      }
      return status;
    }
    // std::map nodes stay put: the pointer outlives the lock.
    return &(constants_[device] = std::move(pointers));
  }

  const CudaCompilation c_;
  bool uses_ids_ = false;
  int64_t temporaries_offset_ = 0;
  int64_t ids_offset_ = 0;
  int64_t workspace_offset_ = -1;
  int64_t scratch_bytes_ = 0;
  mutable Mutex mu_;
  mutable cudaLibrary_t library_ = nullptr;
  mutable std::vector<cudaKernel_t> kernels_;
  mutable cudaKernel_t set_ids_ = nullptr;
  mutable std::map<int, std::vector<void*>> constants_;
  mutable std::map<std::pair<size_t, int>, std::unique_ptr<GemmPlan>> gemm_plans_;
};

// The kernel that writes a run's replica and partition ids where the
// program reads them.
constexpr char kSetIds[] = R"cuda(
extern "C" __global__ void pj_set_ids(pj_u32* ids, pj_u32 replica, pj_u32 partition) {
  ids[0] = replica;
  ids[1] = partition;
}
)cuda";

class CudaBackend : public Backend {
 public:
  CudaBackend(const device::Platform& platform, const std::string& cache_dir)
      : cache_(cache_dir) {
    const device::DeviceDescription d = platform.Describe(0);
    kind_ = d.kind;
    arch_ = absl::StrFormat("sm_%d%d", d.compute_capability_major,
                            d.compute_capability_minor);
  }

  const std::string& platform() const override { return platform_; }
  std::string fingerprint() const override {
    return absl::StrCat("cuda;", kind_, ";", arch_, ";nvrtc ", NvrtcVersion());
  }
  std::string Describe() const override {
    return absl::StrFormat(
        "cuda: NVRTC %s kernels for %s, cuBLASLt, NCCL; compile cache %s", NvrtcVersion(), arch_,
        cache_.enabled() ? cache_.dir() : "off");
  }
  absl::StatusOr<std::unique_ptr<Program>> Compile(
      const hlo::Module& module, const BackendOptions& options) const override {
    PJRT_ASSIGN_OR_RETURN(CudaCompilation c, CompileForCuda(module, options, arch_, cache_));
    return MakeCudaProgram(std::move(c));
  }

 private:
  const std::string platform_ = "cuda";
  const DiskCache cache_;
  std::string kind_;
  std::string arch_;
};

}  // namespace

// "kernel pj_loop_3 (loop over f32[8] (exp) for %e (line 4))": the kernel
// whose source holds the first line NVRTC's `log` complains about
// ("pjrt_kernels.cu(123): error ..."); empty when it cannot tell.
std::string KernelAtErrorLine(const GeneratedProgram& g, absl::string_view log) {
  constexpr absl::string_view kFile = "pjrt_kernels.cu(";
  const size_t at = log.find(kFile);
  if (at == absl::string_view::npos) return "";
  int line = 0;
  for (size_t i = at + kFile.size(); i < log.size() && absl::ascii_isdigit(log[i]); ++i) {
    line = line * 10 + (log[i] - '0');
  }
  // The kernel defined last before that line.
  const Launch* found = nullptr;
  for (const Launch& launch : g.launches) {
    if (launch.kind != Launch::Kind::kKernel) continue;
    const size_t def = g.source.find(absl::StrCat(" ", launch.kernel, "("));
    if (def == std::string::npos) continue;
    const int def_line =
        1 + static_cast<int>(std::count(g.source.begin(), g.source.begin() + def, '\n'));
    if (def_line <= line) found = &launch;
  }
  return found != nullptr ? absl::StrFormat("kernel %s (%s)", found->kernel, found->origin)
                          : std::string();
}

absl::StatusOr<CudaCompilation> CompileForCuda(const hlo::Module& module,
                                               const BackendOptions& options,
                                               const std::string& arch,
                                               const DiskCache& cache) {
  CudaCompilation c;
  c.arch = arch;
  host::HostCompileOptions host_options;
  host_options.aliases = options.aliases;
  host_options.half_dot_operands = true;  // cuBLASLt multiplies them as they are
  PJRT_ASSIGN_OR_RETURN(c.lowered, host::CompileForHost(module, host_options));
  PJRT_ASSIGN_OR_RETURN(c.generated, GenerateCuda(*c.lowered));
  absl::StrAppend(&c.generated.source, kSetIds);
  const std::string key =
      absl::StrCat("cubin;", arch, ";nvrtc ", NvrtcVersion(), ";", c.generated.source);
  if (std::optional<std::string> cubin = cache.Get(key); cubin.has_value()) {
    c.cubin.cubin = *std::move(cubin);
    c.from_cache = true;
    return c;
  }
  absl::StatusOr<CompiledCubin> cubin = CompileWithNvrtc(c.generated.source, arch);
  if (!cubin.ok()) {
    spdlog::debug("the generated source NVRTC refused:\n{}", c.generated.source);
    const std::string where = KernelAtErrorLine(c.generated, cubin.status().message());
    if (where.empty()) return cubin.status();
    return absl::Status(cubin.status().code(),
                        absl::StrCat(where, ": ", cubin.status().message()));
  }
  c.cubin = *std::move(cubin);
  if (absl::Status s = cache.Put(key, c.cubin.cubin); !s.ok()) {
    spdlog::warn("the compile cache is not used: {}", s.message());
  }
  return c;
}

std::unique_ptr<Program> MakeCudaProgram(CudaCompilation compilation) {
  return std::make_unique<CudaProgram>(std::move(compilation));
}

std::unique_ptr<Backend> CreateCudaBackend(const device::Platform& platform,
                                           const std::string& cache_dir) {
  return std::make_unique<CudaBackend>(platform, cache_dir);
}

}  // namespace pjrt::compiler::cuda
