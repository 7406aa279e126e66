#include "compiler/cuda/backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cufft.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/cancellation.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "compiler/cuda/cub_sort.h"
#include "compiler/cuda/cudnn_conv.h"
#include "compiler/cuda/nccl.h"
#include "compiler/host/compiler.h"
#include "device/cuda/cuda_platform.h"

namespace pjrt::compiler::cuda {
namespace {

using host::BufferSlot;

// cuBLASLt's and cuDNN's workspace (their calls are ordered on the run's
// stream, so they share it), at the end of a run's scratch memory when the
// program has a matmul or a convolution cuDNN may compute.
constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

// The alignment of every scratch slot and of the scratch itself (the
// device allocator's: device::Allocator gives 256-byte aligned memory).
constexpr int64_t kScratchAlignment = 256;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// 90 for "sm_90" (and "sm_90a"); 0 for a name not of that form.
int ComputeCapability(absl::string_view arch) {
  if (!absl::ConsumePrefix(&arch, "sm_")) return 0;
  while (!arch.empty() && !absl::ascii_isdigit(arch.back())) {
    arch.remove_suffix(1);
  }
  int capability = 0;
  return absl::SimpleAtoi(arch, &capability) ? capability : 0;
}

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

// One cuDNN handle per GPU, for the life of the process. A handle holds
// the stream it enqueues on, so its users take `mu` from setting the
// stream to enqueueing (and while planning with it).
struct DnnHandle {
  cudnnHandle_t handle = nullptr;
  Mutex mu;
};

absl::StatusOr<DnnHandle*> DnnHandleFor(int device) {
  static Mutex mu;
  static auto* handles = new absl::flat_hash_map<int, DnnHandle*>();
  MutexLock lock(&mu);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrFormat("cudnnCreate on GPU %d failed: %s", device,
                        cudnnGetErrorString(status)));
  }
  auto* h = new DnnHandle;
  h->handle = handle;
  (*handles)[device] = h;
  return h;
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
absl::StatusOr<std::unique_ptr<GemmPlan>> PlanGemm(const host::DotStep& s,
                                                   int device) {
  auto plan = std::make_unique<GemmPlan>();
  PJRT_ASSIGN_OR_RETURN(plan->handle, BlasHandle(device));
  plan->f64 = s.type == hlo::PrimitiveType::kF64;
  const bool f64 = plan->f64;
  const cudaDataType_t dt = f64 ? CUDA_R_64F : CUDA_R_32F;
  // bf16, f16 and fp8 operands are multiplied as they are, accumulating in
  // f32 (fp8 with cuBLASLt's default, the more precise accumulation).
  const auto library_type = [dt](hlo::PrimitiveType t) {
    switch (t) {
      case hlo::PrimitiveType::kBf16:
        return CUDA_R_16BF;
      case hlo::PrimitiveType::kF16:
        return CUDA_R_16F;
      case hlo::PrimitiveType::kF8E4M3FN:
        return CUDA_R_8F_E4M3;
      case hlo::PrimitiveType::kF8E5M2:
        return CUDA_R_8F_E5M2;
      default:
        return dt;
    }
  };
  const cudaDataType_t lhs_type = library_type(s.operand_type),
                       rhs_type = library_type(s.rhs_type());
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  PJRT_RETURN_IF_ERROR(
      BlasError(cublasLtMatmulDescCreate(&plan->desc, compute, scale),
                "cublasLtMatmulDescCreate"));
  const cublasOperation_t op_a = s.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.lhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &op_a, sizeof(op_a)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                     &op_b, sizeof(op_b)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  // Stored shapes, column-major: rhs is n x k (k x n when transposed), lhs
  // k x m (m x k when transposed), out n x m.
  const uint64_t a_rows = s.rhs_transposed ? s.k : s.n,
                 a_cols = s.rhs_transposed ? s.n : s.k;
  const uint64_t b_rows = s.lhs_transposed ? s.m : s.k,
                 b_cols = s.lhs_transposed ? s.k : s.m;
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatrixLayoutCreate(&plan->a, rhs_type, a_rows, a_cols, a_rows),
      "cublasLtMatrixLayoutCreate"));
  PJRT_RETURN_IF_ERROR(BlasError(
      cublasLtMatrixLayoutCreate(&plan->b, lhs_type, b_rows, b_cols, b_rows),
      "cublasLtMatrixLayoutCreate"));
  PJRT_RETURN_IF_ERROR(
      BlasError(cublasLtMatrixLayoutCreate(&plan->c, dt, s.n, s.m, s.n),
                "cublasLtMatrixLayoutCreate"));
  if (s.batch > 1) {
    const int32_t count = static_cast<int32_t>(s.batch);
    const auto batch = [&](cublasLtMatrixLayout_t layout, int64_t stride) {
      absl::Status st =
          BlasError(cublasLtMatrixLayoutSetAttribute(
                        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                        sizeof(count)),
                    "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
      st.Update(
          BlasError(cublasLtMatrixLayoutSetAttribute(
                        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        &stride, sizeof(stride)),
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
  absl::Status status =
      BlasError(cublasLtMatmulPreferenceSetAttribute(
                    preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &workspace_bytes, sizeof(workspace_bytes)),
                "cublasLtMatmulPreferenceSetAttribute");
  int found = 0;
  if (status.ok()) {
    status = BlasError(cublasLtMatmulAlgoGetHeuristic(
                           plan->handle, plan->desc, plan->a, plan->b, plan->c,
                           plan->c, preference, 1, &plan->heuristic, &found),
                       "cublasLtMatmulAlgoGetHeuristic");
  }
  cublasLtMatmulPreferenceDestroy(preference);
  PJRT_RETURN_IF_ERROR(status);
  if (found == 0) {
    return absl::InternalError(absl::StrFormat(
        "cuBLASLt has no algorithm for a %s by %s matmul of [%d,%d] x [%d,%d] "
        "(batch %d)",
        hlo::PrimitiveTypeName(s.operand_type),
        hlo::PrimitiveTypeName(s.rhs_type()), s.m, s.k, s.k, s.n, s.batch));
  }
  return plan;
}

absl::Status RunGemm(const GemmPlan& plan, void* out, const void* lhs,
                     const void* rhs, void* workspace, cudaStream_t stream) {
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = plan.f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = plan.f64 ? static_cast<const void*>(&zero64) : &zero32;
  return BlasError(
      cublasLtMatmul(plan.handle, plan.desc, alpha, rhs, plan.a, lhs, plan.b,
                     beta, out, plan.c, out, plan.c, &plan.heuristic.algo,
                     workspace, kGemmWorkspaceBytes, stream),
      "cublasLtMatmul");
}

absl::Status FftError(cufftResult result, absl::string_view what) {
  if (result == CUFFT_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s failed: cufftResult %d (cufft.h names the codes)",
                      what, static_cast<int>(result)));
}

// A cuFFT plan of one fft launch on one stream: its work area is its own,
// so that runs on other streams never share it, and uses on its stream are
// ordered by the stream. `mu` makes the enqueue of one host thread at a
// time (cuFFT's rule for a plan).
struct FftPlan {
  cufftHandle handle = 0;
  bool made = false;
  Mutex mu;
  ~FftPlan() {
    if (made) cufftDestroy(handle);
  }
};

absl::StatusOr<std::unique_ptr<FftPlan>> PlanFft(const Launch::Fft& f,
                                                 cudaStream_t stream) {
  auto plan = std::make_unique<FftPlan>();
  PJRT_RETURN_IF_ERROR(FftError(cufftCreate(&plan->handle), "cufftCreate"));
  plan->made = true;
  std::vector<long long> n(f.lengths.begin(), f.lengths.end());
  cufftType type;
  switch (f.type) {
    case host::FftType::kFft:
    case host::FftType::kIfft:
      type = f.wide ? CUFFT_Z2Z : CUFFT_C2C;
      break;
    case host::FftType::kRfft:
      type = f.wide ? CUFFT_D2Z : CUFFT_R2C;
      break;
    case host::FftType::kIrfft:
      type = f.wide ? CUFFT_Z2D : CUFFT_C2R;
      break;
  }
  // No embeddings: each batch element is its block, contiguous, row-major.
  size_t work = 0;
  PJRT_RETURN_IF_ERROR(FftError(
      cufftMakePlanMany64(plan->handle, static_cast<int>(n.size()), n.data(),
                          nullptr, 1, 0, nullptr, 1, 0, type, f.batch, &work),
      absl::StrFormat("cufftMakePlanMany64 for %d transforms of [%s]", f.batch,
                      absl::StrJoin(f.lengths, ","))));
  PJRT_RETURN_IF_ERROR(
      FftError(cufftSetStream(plan->handle, stream), "cufftSetStream"));
  return plan;
}

absl::Status RunFft(FftPlan& plan, const Launch::Fft& f, void* out, void* in) {
  MutexLock lock(&plan.mu);
  const bool inverse = f.type == host::FftType::kIfft;
  const int direction = inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
  switch (f.type) {
    case host::FftType::kFft:
    case host::FftType::kIfft:
      return f.wide
                 ? FftError(cufftExecZ2Z(plan.handle,
                                         static_cast<cufftDoubleComplex*>(in),
                                         static_cast<cufftDoubleComplex*>(out),
                                         direction),
                            "cufftExecZ2Z")
                 : FftError(
                       cufftExecC2C(plan.handle, static_cast<cufftComplex*>(in),
                                    static_cast<cufftComplex*>(out), direction),
                       "cufftExecC2C");
    case host::FftType::kRfft:
      return f.wide
                 ? FftError(cufftExecD2Z(plan.handle,
                                         static_cast<cufftDoubleReal*>(in),
                                         static_cast<cufftDoubleComplex*>(out)),
                            "cufftExecD2Z")
                 : FftError(
                       cufftExecR2C(plan.handle, static_cast<cufftReal*>(in),
                                    static_cast<cufftComplex*>(out)),
                       "cufftExecR2C");
    case host::FftType::kIrfft:
      return f.wide
                 ? FftError(cufftExecZ2D(plan.handle,
                                         static_cast<cufftDoubleComplex*>(in),
                                         static_cast<cufftDoubleReal*>(out)),
                            "cufftExecZ2D")
                 : FftError(
                       cufftExecC2R(plan.handle, static_cast<cufftComplex*>(in),
                                    static_cast<cufftReal*>(out)),
                       "cufftExecC2R");
  }
  return absl::InternalError("unknown fft type");
}

class CudaProgram : public Program {
 public:
  explicit CudaProgram(CudaCompilation c) : c_(std::move(c)) {
    const host::HostProgram& lowered = *c_.lowered;
    int64_t bytes = AlignUp(lowered.scratch_bytes(), 256);
    temporaries_offset_ = bytes;
    bytes += c_.generated.temporary_bytes;
    const auto note_ids = [&](const host::HostProgram& program) {
      for (const BufferSlot& slot : program.slots) {
        uses_ids_ |= slot.kind == BufferSlot::Kind::kReplicaId ||
                     slot.kind == BufferSlot::Kind::kPartitionId;
      }
    };
    note_ids(lowered);
    ForEachLaunch(c_.generated.launches, [&](const Launch& launch) {
      for (const auto& sub : launch.control.programs) note_ids(*sub->lowered);
    });
    if (uses_ids_) {
      ids_offset_ = bytes;
      bytes += 256;
    }
    // One workspace for cuBLASLt, cuDNN and CUB: their calls are ordered on
    // the run's stream. CUB says what a sort needs only with a GPU at hand
    // (the size follows its architecture): asked here, a failure is the
    // error of the run that reaches the sort.
    int64_t workspace = 0;
    ForEachLaunch(c_.generated.launches, [&](const Launch& launch) {
      if (launch.kind == Launch::Kind::kGemm || launch.cudnn != nullptr) {
        workspace = std::max(workspace, kGemmWorkspaceBytes);
      }
      if (launch.kind == Launch::Kind::kSort && sort_status_.ok()) {
        size_t need = 0;
        sort_status_ =
            Annotate(CudaError(CubSort(launch.sort, nullptr, &need, nullptr,
                                       nullptr, nullptr, nullptr, nullptr),
                               "sizing CUB's temporary storage"),
                     launch);
        workspace = std::max(workspace, static_cast<int64_t>(need));
      }
    });
    if (workspace > 0) {
      workspace_offset_ = bytes;
      workspace_bytes_ = AlignUp(workspace, 256);
      bytes += workspace_bytes_;
    }
    scratch_bytes_ = bytes;
  }

  ~CudaProgram() override {
    for (auto& [key, pointers] : constants_) {
      cudaSetDevice(key.second);
      for (void* p : pointers) cudaFree(p);
    }
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  absl::Status Run(const RunContext& context) const override {
    void* native =
        context.stream != nullptr ? context.stream->native_handle() : nullptr;
    if (native == nullptr) {
      return absl::FailedPreconditionError(
          "a CUDA program runs on a CUDA stream; this run has none");
    }
    cudaStream_t stream = static_cast<cudaStream_t>(native);
    if (reinterpret_cast<uintptr_t>(context.scratch) % kScratchAlignment != 0) {
      return absl::InternalError(absl::StrFormat(
          "a CUDA program's scratch must be %d-byte aligned; got %p",
          kScratchAlignment, context.scratch));
    }
    int device = 0;
    PJRT_RETURN_IF_ERROR(
        CudaError(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice"));
    PJRT_RETURN_IF_ERROR(CudaError(cudaSetDevice(device), "cudaSetDevice"));
    PJRT_RETURN_IF_ERROR(EnsureLoaded());
    char* scratch = static_cast<char*>(context.scratch);
    if (uses_ids_) {
      uint32_t replica = static_cast<uint32_t>(context.replica_id);
      uint32_t partition = static_cast<uint32_t>(context.partition_id);
      void* ids = scratch + ids_offset_;
      void* args[] = {&ids, &replica, &partition};
      PJRT_RETURN_IF_ERROR(
          CudaError(cudaLaunchKernel(reinterpret_cast<const void*>(set_ids_),
                                     dim3(1), dim3(1), args, 0, stream),
                    "launching pj_set_ids"));
    }
    const Env env{context, stream, device, scratch};
    return RunLaunches(*c_.lowered, c_.generated.launches,
                       c_.generated.temporary_offsets,
                       scratch + temporaries_offset_, context.arguments,
                       context.results, scratch, env);
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
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " (", launch.origin, ")"));
  }

  // What every level of a run shares.
  struct Env {
    const RunContext& context;
    cudaStream_t stream;
    int device;
    char* scratch;  // the run's scratch (ids and the gemm workspace)
  };

  // Enqueues `launches` of `program` (the top level or a sub-program) with
  // its arguments and results, its scratch at `scratch` and its generated
  // temporaries at `temporaries`.
  absl::Status RunLaunches(const host::HostProgram& program,
                           const std::vector<Launch>& launches,
                           const std::vector<int64_t>& temporary_offsets,
                           char* temporaries, absl::Span<void* const> arguments,
                           absl::Span<void* const> results, char* scratch,
                           const Env& env) const {
    PJRT_ASSIGN_OR_RETURN(const std::vector<void*>* constants,
                          ConstantsOn(program, env.device, env.stream));
    std::vector<void*> addresses(
        program.slots.size() + temporary_offsets.size(), nullptr);
    for (size_t k = 0; k < temporary_offsets.size(); ++k) {
      addresses[program.slots.size() + k] = temporaries + temporary_offsets[k];
    }
    for (size_t i = 0; i < program.slots.size(); ++i) {
      const BufferSlot& slot = program.slots[i];
      switch (slot.kind) {
        case BufferSlot::Kind::kParameter:
          addresses[i] = arguments[slot.index];
          break;
        case BufferSlot::Kind::kResult:
          addresses[i] = results[slot.index];
          break;
        case BufferSlot::Kind::kScratch:
          addresses[i] = scratch + slot.offset;
          break;
        case BufferSlot::Kind::kConstant:
          addresses[i] = (*constants)[slot.index];
          break;
        case BufferSlot::Kind::kView:
          addresses[i] = addresses[slot.index];
          break;
        case BufferSlot::Kind::kReplicaId:
          addresses[i] = env.scratch + ids_offset_;
          break;
        case BufferSlot::Kind::kPartitionId:
          addresses[i] = env.scratch + ids_offset_ + 4;
          break;
      }
    }
    const cudaStream_t stream = env.stream;
    for (const Launch& launch : launches) {
      if (launch.kind == Launch::Kind::kGemm) {
        absl::StatusOr<const GemmPlan*> plan = GemmPlanFor(launch, env.device);
        if (!plan.ok()) return Annotate(plan.status(), launch);
        absl::Status s =
            RunGemm(**plan, addresses[launch.slots[0]],
                    addresses[launch.slots[1]], addresses[launch.slots[2]],
                    env.scratch + workspace_offset_, stream);
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.kind == Launch::Kind::kSort) {
        PJRT_RETURN_IF_ERROR(sort_status_);
        const auto at = [&](int a) {
          return launch.slots[a] < 0 ? nullptr : addresses[launch.slots[a]];
        };
        size_t bytes = static_cast<size_t>(workspace_bytes_);
        absl::Status s = CudaError(
            CubSort(launch.sort, env.scratch + workspace_offset_, &bytes, at(0),
                    at(1), static_cast<const uint32_t*>(at(2)),
                    static_cast<uint32_t*>(at(3)), stream),
            "CUB's sort");
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.kind == Launch::Kind::kFft) {
        absl::StatusOr<FftPlan*> plan = FftPlanFor(launch, env.device, stream);
        if (!plan.ok()) return Annotate(plan.status(), launch);
        absl::Status s = RunFft(**plan, launch.fft, addresses[launch.slots[0]],
                                addresses[launch.slots[1]]);
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.kind == Launch::Kind::kCollective) {
        // Slots: the operands, the results, then any temporaries.
        const size_t count = launch.collective.inputs.size();
        const size_t results = count + launch.collective.outputs.size();
        std::vector<void*> ins, outs, temporaries;
        for (size_t a = 0; a < launch.slots.size(); ++a) {
          (a < count     ? ins
           : a < results ? outs
                         : temporaries)
              .push_back(addresses[launch.slots[a]]);
        }
        absl::Status s =
            RunNcclCollective(launch.collective, env.context, ins, outs,
                              temporaries, env.device, stream);
        if (!s.ok()) return s;
        continue;
      }
      if (launch.kind == Launch::Kind::kWhile) {
        absl::Status s = RunWhile(launch.control, addresses, env);
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.kind == Launch::Kind::kConditional) {
        absl::Status s = RunConditional(launch.control, addresses, env);
        if (!s.ok()) return Annotate(s, launch);
        continue;
      }
      if (launch.cudnn != nullptr) {
        absl::StatusOr<bool> ran = RunCudnnConv(launch, addresses, env);
        if (!ran.ok()) return Annotate(ran.status(), launch);
        if (*ran) continue;  // else the direct kernel
      }
      if (launch.skip_when_same_memory &&
          addresses[launch.slots[0]] == addresses[launch.slots[1]]) {
        continue;
      }
      absl::Status s = LaunchKernel(launch, addresses, env);
      if (!s.ok()) return Annotate(s, launch);
    }
    return absl::OkStatus();
  }

  // Enqueues the generated kernel of `launch` on its slots' `addresses`.
  absl::Status LaunchKernel(const Launch& launch,
                            const std::vector<void*>& addresses,
                            const Env& env) const {
    std::vector<void*> values(launch.slots.size());
    std::vector<void*> args(launch.slots.size());
    for (size_t a = 0; a < launch.slots.size(); ++a) {
      values[a] = addresses[launch.slots[a]];
      args[a] = &values[a];
    }
    // An rng's key and draw for this run, by value after the slots.
    unsigned long long key = 0, draw = 0;
    if (launch.rng != nullptr) {
      key = launch.rng->Key(env.context.prng_seed);
      draw = launch.rng->NextDraw();
      args.push_back(&key);
      args.push_back(&draw);
    }
    return CudaError(
        cudaLaunchKernel(
            reinterpret_cast<const void*>(kernels_.at(launch.kernel)),
            dim3(static_cast<unsigned>(launch.blocks)),
            dim3(static_cast<unsigned>(launch.threads),
                 static_cast<unsigned>(launch.threads_y)),
            args.data(), 0, env.stream),
        absl::StrCat("launching ", launch.kernel));
  }

  // Enqueues the convolution `launch` through cuDNN; false (nothing
  // enqueued) when cuDNN has no engine for it on this GPU or a pointer is
  // not aligned as its plan says, so that the launch's kernel runs.
  absl::StatusOr<bool> RunCudnnConv(const Launch& launch,
                                    const std::vector<void*>& addresses,
                                    const Env& env) const {
    void* tensors[3];
    for (int t = 0; t < 3; ++t) {
      tensors[t] = addresses[launch.cudnn_slots[t]];
      if (reinterpret_cast<uintptr_t>(tensors[t]) % kCudnnAlignment != 0) {
        return false;
      }
    }
    const ConvPlan& plan = ConvPlanFor(launch, env.device);
    if (plan.plan == nullptr) return false;
    {
      MutexLock lock(&plan.handle->mu);
      PJRT_RETURN_IF_ERROR(plan.plan->Run(plan.handle->handle, env.stream,
                                          tensors[0], tensors[1], tensors[2],
                                          env.scratch + workspace_offset_));
    }
    if (launch.cudnn_then != nullptr) {
      PJRT_RETURN_IF_ERROR(LaunchKernel(*launch.cudnn_then, addresses, env));
    }
    return true;
  }

  // Copies `bytes` from the device at `from` to the host, once the stream
  // has done everything enqueued before: how a loop reads its predicate
  // and a conditional its selector (one round trip each time).
  static absl::Status ReadBack(void* to, const void* from, size_t bytes,
                               cudaStream_t stream) {
    PJRT_RETURN_IF_ERROR(CudaError(
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream),
        "reading a loop predicate or branch selector back"));
    return CudaError(cudaStreamSynchronize(stream),
                     "waiting for a loop predicate");
  }

  // A sub-program of `c`, on `arguments` and `results`.
  absl::Status RunSub(const ControlFlow& c, size_t p,
                      const std::vector<void*>& addresses,
                      const std::vector<void*>& arguments,
                      const std::vector<void*>& results, const Env& env) const {
    const SubProgram& sub = *c.programs[p];
    return RunLaunches(*sub.lowered, sub.launches, sub.temporary_offsets,
                       static_cast<char*>(addresses[c.temporaries]), arguments,
                       results, static_cast<char*>(addresses[c.scratch]), env);
  }

  // As host::WhileKernel: the state in place (A) and in spares (B),
  // swapped after each run of the body; the condition's pred read back
  // before each, unless the trip count is known. A cancelled run stops
  // between iterations.
  absl::Status RunWhile(const ControlFlow& c,
                        const std::vector<void*>& addresses,
                        const Env& env) const {
    const size_t n = c.state.size();
    std::vector<void*> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = addresses[c.state[i]];
      b[i] = c.spare[i] >= 0 ? addresses[c.spare[i]] : a[i];
      if (addresses[c.init[i]] != a[i]) {
        PJRT_RETURN_IF_ERROR(
            CudaError(cudaMemcpyAsync(a[i], addresses[c.init[i]], c.bytes[i],
                                      cudaMemcpyDeviceToDevice, env.stream),
                      "copying a loop's initial state"));
      }
    }
    void* predicate = addresses[c.predicate];
    for (int64_t iteration = 0;; ++iteration) {
      PJRT_RETURN_IF_ERROR(CheckCancelled(env.context.cancellation));
      if (c.trip_count >= 0) {
        // A counted loop: its bodies are enqueued back to back, nothing
        // read back; after the first two, as many as fit in graphs.
        if (iteration == c.trip_count) break;
        if (iteration == 2 && c.graphs) {
          PJRT_ASSIGN_OR_RETURN(const int64_t done,
                                RunGraphs(c, addresses, a, b, env));
          iteration += done;
          if (iteration == c.trip_count) break;
        }
      } else {
        PJRT_RETURN_IF_ERROR(RunSub(c, 0, addresses, a, {predicate}, env));
        uint8_t more = 0;
        PJRT_RETURN_IF_ERROR(ReadBack(&more, predicate, 1, env.stream));
        if (more == 0) break;
      }
      PJRT_RETURN_IF_ERROR(RunSub(c, 1, addresses, a, b, env));
      std::swap(a, b);
    }
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != addresses[c.state[i]]) {
        PJRT_RETURN_IF_ERROR(
            CudaError(cudaMemcpyAsync(addresses[c.state[i]], a[i], c.bytes[i],
                                      cudaMemcpyDeviceToDevice, env.stream),
                      "copying a loop's final state"));
      }
    }
    return absl::OkStatus();
  }

  // Runs iterations of the counted loop `c` from state `a` (spares `b`) as
  // CUDA graphs of kGraphIterations iterations, captured on a stream of
  // their own (nothing else can join the capture) and launched on the
  // run's stream; the state ends on the buffers it began on. Returns how
  // many iterations ran: a multiple of kGraphIterations, none when the
  // body could not be captured (said once in the log; the loop goes on
  // without graphs). A cancelled run stops between graphs.
  absl::StatusOr<int64_t> RunGraphs(const ControlFlow& c,
                                    const std::vector<void*>& addresses,
                                    const std::vector<void*>& a,
                                    const std::vector<void*>& b,
                                    const Env& env) const {
    cudaStream_t capture = nullptr;
    PJRT_RETURN_IF_ERROR(
        CudaError(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking),
                  "creating a stream to capture a loop body"));
    cudaGraphExec_t exec = nullptr;
    const absl::Status captured =
        CaptureBody(c, addresses, a, b, env, capture, &exec);
    cudaStreamDestroy(capture);
    if (!captured.ok()) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true)) {
        spdlog::warn(
            "a counted loop's body could not be captured into a CUDA graph; "
            "its iterations run one by one: {}",
            captured);
      }
      return int64_t{0};
    }
    int64_t done = 0;
    absl::Status s;
    const int64_t graphs = (c.trip_count - 2) / kGraphIterations;
    for (int64_t g = 0; g < graphs; ++g) {
      s = CheckCancelled(env.context.cancellation);
      if (!s.ok()) break;
      s = CudaError(cudaGraphLaunch(exec, env.stream),
                    "launching a loop body's graph");
      if (!s.ok()) break;
      done += kGraphIterations;
    }
    // Freed once the launches in flight complete.
    cudaGraphExecDestroy(exec);
    PJRT_RETURN_IF_ERROR(s);
    return done;
  }

  // Captures kGraphIterations iterations of `c`'s body from state `a`
  // (spares `b`) on `capture` into `*exec`. Nothing runs; the capture is
  // ended whatever happens during it.
  absl::Status CaptureBody(const ControlFlow& c,
                           const std::vector<void*>& addresses,
                           std::vector<void*> a, std::vector<void*> b,
                           const Env& env, cudaStream_t capture,
                           cudaGraphExec_t* exec) const {
    PJRT_RETURN_IF_ERROR(CudaError(
        cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal),
        "capturing a loop body"));
    const Env inner{env.context, capture, env.device, env.scratch};
    absl::Status s;
    for (int64_t k = 0; k < kGraphIterations && s.ok(); ++k) {
      s = RunSub(c, 1, addresses, a, b, inner);
      std::swap(a, b);
    }
    cudaGraph_t graph = nullptr;
    s.Update(CudaError(cudaStreamEndCapture(capture, &graph),
                       "capturing a loop body"));
    if (s.ok()) {
      s = CudaError(cudaGraphInstantiate(exec, graph, 0),
                    "instantiating a loop body's graph");
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    return s;
  }

  // As host::ConditionalKernel: the selector read back, then the branch
  // it names.
  absl::Status RunConditional(const ControlFlow& c,
                              const std::vector<void*>& addresses,
                              const Env& env) const {
    const int64_t last = static_cast<int64_t>(c.programs.size()) - 1;
    int64_t branch = 0;
    if (c.selector_is_pred) {
      uint8_t pred = 0;
      PJRT_RETURN_IF_ERROR(
          ReadBack(&pred, addresses[c.selector], 1, env.stream));
      branch = pred != 0 ? 0 : 1;
    } else {
      int32_t index = 0;
      PJRT_RETURN_IF_ERROR(
          ReadBack(&index, addresses[c.selector], 4, env.stream));
      branch = index < 0 || index > last ? last : index;
    }
    std::vector<void*> arguments, results;
    for (int slot : c.inputs[branch]) arguments.push_back(addresses[slot]);
    for (int slot : c.outputs) results.push_back(addresses[slot]);
    return RunSub(c, static_cast<size_t>(branch), addresses, arguments, results,
                  env);
  }

  // Loads the cubin (into every GPU's context) and finds its kernels, once.
  absl::Status EnsureLoaded() const {
    MutexLock lock(&mu_);
    if (library_ != nullptr) return absl::OkStatus();
    cudaLibrary_t library = nullptr;
    PJRT_RETURN_IF_ERROR(
        CudaError(cudaLibraryLoadData(&library, c_.cubin.cubin.data(), nullptr,
                                      nullptr, 0, nullptr, nullptr, 0),
                  absl::StrFormat("loading the program's %s cubin", c_.arch)));
    absl::flat_hash_map<std::string, cudaKernel_t> kernels;
    absl::Status found;
    ForEachLaunch(c_.generated.launches, [&](const Launch& launch) {
      if (launch.kind != Launch::Kind::kKernel || !found.ok() ||
          kernels.contains(launch.kernel)) {
        return;
      }
      cudaKernel_t kernel = nullptr;
      absl::Status s = CudaError(
          cudaLibraryGetKernel(&kernel, library, launch.kernel.c_str()),
          absl::StrCat("finding kernel ", launch.kernel));
      if (!s.ok()) {
        found = Annotate(s, launch);
        return;
      }
      kernels[launch.kernel] = kernel;
    });
    if (!found.ok()) {
      cudaLibraryUnload(library);
      return found;
    }
    cudaKernel_t set_ids = nullptr;
    if (uses_ids_) {
      absl::Status s =
          CudaError(cudaLibraryGetKernel(&set_ids, library, "pj_set_ids"),
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

  // The cuBLASLt plan of `launch` on `device`, made on its first run there.
  absl::StatusOr<const GemmPlan*> GemmPlanFor(const Launch& launch,
                                              int device) const {
    MutexLock lock(&mu_);
    auto& plan = gemm_plans_[{&launch, device}];
    if (plan == nullptr) {
      PJRT_ASSIGN_OR_RETURN(plan, PlanGemm(launch.gemm, device));
    }
    return plan.get();
  }

  // A convolution's cuDNN plan on one GPU and the handle it runs through;
  // no plan where cuDNN has none.
  struct ConvPlan {
    std::unique_ptr<CudnnConvPlan> plan;
    DnnHandle* handle = nullptr;
  };

  // The cuDNN plan of `launch` on `device`, made on its first run there;
  // without one (cuDNN has no engine for it, or fails: said once in the
  // log) the launch's kernel runs.
  const ConvPlan& ConvPlanFor(const Launch& launch, int device) const {
    MutexLock lock(&mu_);
    const auto key = std::make_pair(&launch, device);
    if (auto it = conv_plans_.find(key); it != conv_plans_.end()) {
      return it->second;
    }
    ConvPlan& kept = conv_plans_[key];
    const absl::StatusOr<DnnHandle*> handle = DnnHandleFor(device);
    absl::StatusOr<std::unique_ptr<CudnnConvPlan>> plan =
        [&]() -> absl::StatusOr<std::unique_ptr<CudnnConvPlan>> {
      if (!handle.ok()) return handle.status();
      MutexLock handle_lock(&(*handle)->mu);
      return PlanCudnnConv(*launch.cudnn, (*handle)->handle,
                           kGemmWorkspaceBytes);
    }();
    if (plan.ok()) {
      spdlog::debug("{}: cuDNN engine {} ({} bytes of workspace) on GPU {}",
                    launch.origin, (*plan)->engine(),
                    (*plan)->workspace_bytes(), device);
      kept.plan = *std::move(plan);
      kept.handle = *handle;
    } else if (plan.status().code() == absl::StatusCode::kNotFound) {
      spdlog::info("{}: the direct kernel runs on GPU {}: {}", launch.origin,
                   device, plan.status().message());
    } else {
      spdlog::warn("{}: the direct kernel runs on GPU {}: {}", launch.origin,
                   device, plan.status().message());
    }
    return kept;
  }

  absl::StatusOr<FftPlan*> FftPlanFor(const Launch& launch, int device,
                                      cudaStream_t stream) const {
    MutexLock lock(&mu_);
    auto& plan = fft_plans_[{&launch, device, stream}];
    if (plan == nullptr) {
      PJRT_ASSIGN_OR_RETURN(plan, PlanFft(launch.fft, stream));
    }
    return plan.get();
  }

  // The constants of `program` (the top level or a sub-program) in
  // `device`'s memory, uploaded on its first run there by `stream` (the
  // run's: a plain cudaMemcpy would go on the legacy default stream, which
  // the non-blocking run streams do not wait for) and waited for, since
  // runs on other streams then use them as they are.
  absl::StatusOr<const std::vector<void*>*> ConstantsOn(
      const host::HostProgram& program, int device, cudaStream_t stream) const {
    MutexLock lock(&mu_);
    const auto key = std::make_pair(&program, device);
    if (auto it = constants_.find(key); it != constants_.end())
      return &it->second;
    std::vector<void*> pointers;
    absl::Status status;
    for (const std::vector<uint64_t>& data : program.constants) {
      void* p = nullptr;
      const size_t bytes = std::max<size_t>(data.size() * sizeof(uint64_t), 8);
      status = CudaError(cudaMalloc(&p, bytes),
                         "cudaMalloc for the program's constants");
      if (!status.ok()) break;
      pointers.push_back(p);
      status = CudaError(
          cudaMemcpyAsync(p, data.data(), data.size() * sizeof(uint64_t),
                          cudaMemcpyHostToDevice, stream),
          "uploading the program's constants");
      if (!status.ok()) break;
    }
    if (status.ok()) {
      status = CudaError(cudaStreamSynchronize(stream),
                         "waiting for the program's constants");
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
    return &(constants_[key] = std::move(pointers));
  }

  const CudaCompilation c_;
  bool uses_ids_ = false;
  int64_t temporaries_offset_ = 0;
  int64_t ids_offset_ = 0;
  int64_t workspace_offset_ = -1;
  int64_t workspace_bytes_ = 0;
  // Whether CUB could size every sort's temporary storage.
  absl::Status sort_status_;
  int64_t scratch_bytes_ = 0;
  mutable Mutex mu_;
  mutable cudaLibrary_t library_ = nullptr;
  // Every kernel of the program and its sub-programs, by name.
  mutable absl::flat_hash_map<std::string, cudaKernel_t> kernels_;
  mutable cudaKernel_t set_ids_ = nullptr;
  // By (program or sub-program, device).
  mutable std::map<std::pair<const host::HostProgram*, int>, std::vector<void*>>
      constants_;
  // By (launch, device).
  mutable std::map<std::pair<const Launch*, int>, std::unique_ptr<GemmPlan>>
      gemm_plans_;
  // By (launch, device); std::map nodes stay put, so a reference outlives
  // the lock.
  mutable std::map<std::pair<const Launch*, int>, ConvPlan> conv_plans_;
  // By (launch, device, stream): a plan is bound to its stream.
  mutable std::map<std::tuple<const Launch*, int, cudaStream_t>,
                   std::unique_ptr<FftPlan>>
      fft_plans_;
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
        "cuda: NVRTC %s kernels for %s, cuBLASLt, cuDNN %d, NCCL; compile "
        "cache %s",
        NvrtcVersion(), arch_, static_cast<int>(cudnnGetVersion()),
        cache_.enabled() ? cache_.dir() : "off");
  }
  std::string target() const override { return arch_; }
  absl::StatusOr<std::unique_ptr<Program>> Compile(
      const hlo::Module& module, const BackendOptions& options) const override {
    PJRT_ASSIGN_OR_RETURN(CudaCompilation c,
                          CompileForCuda(module, options, arch_, cache_));
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
std::string KernelAtErrorLine(const GeneratedProgram& g,
                              absl::string_view log) {
  constexpr absl::string_view kFile = "pjrt_kernels.cu(";
  const size_t at = log.find(kFile);
  if (at == absl::string_view::npos) return "";
  int line = 0;
  for (size_t i = at + kFile.size();
       i < log.size() && absl::ascii_isdigit(log[i]); ++i) {
    line = line * 10 + (log[i] - '0');
  }
  // The kernel defined last before that line.
  const Launch* found = nullptr;
  for (const Launch& launch : g.launches) {
    if (launch.kind != Launch::Kind::kKernel) continue;
    const size_t def = g.source.find(absl::StrCat(" ", launch.kernel, "("));
    if (def == std::string::npos) continue;
    const int def_line =
        1 + static_cast<int>(
                std::count(g.source.begin(), g.source.begin() + def, '\n'));
    if (def_line <= line) found = &launch;
  }
  return found != nullptr
             ? absl::StrFormat("kernel %s (%s)", found->kernel, found->origin)
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
  // cuBLASLt multiplies them as they are; fp8 where the GPU has fp8 tensor
  // cores (compute capability 8.9 and up).
  host_options.half_dot_operands = true;
  host_options.fp8_dot_operands = ComputeCapability(arch) >= 89;
  // cuBLASLt's algorithms assume 256-byte aligned matrices unless told
  // otherwise, and cuDNN's fastest engines want them too.
  host_options.scratch_alignment = kScratchAlignment;
  PJRT_ASSIGN_OR_RETURN(c.lowered, host::CompileForHost(module, host_options));
  PJRT_ASSIGN_OR_RETURN(c.generated, GenerateCuda(*c.lowered));
  absl::StrAppend(&c.generated.source, kSetIds);
  const std::string key = absl::StrCat("cubin;", arch, ";nvrtc ",
                                       NvrtcVersion(), ";", c.generated.source);
  if (std::optional<std::string> cubin = cache.Get(key); cubin.has_value()) {
    c.cubin.cubin = *std::move(cubin);
    c.from_cache = true;
    return c;
  }
  absl::StatusOr<CompiledCubin> cubin =
      CompileWithNvrtc(c.generated.source, arch);
  if (!cubin.ok()) {
    spdlog::debug("the generated source NVRTC refused:\n{}",
                  c.generated.source);
    const std::string where =
        KernelAtErrorLine(c.generated, cubin.status().message());
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
