// Collectives among the daemon's GPUs through NCCL.
//
// The participants of a collective learn each other's GPUs at the launch's
// rendezvous (compiler/collectives.h); the group's NCCL communicators (a
// clique, one per GPU, created together by ncclCommInitAll on first use)
// are cached for the life of the process, keyed by the GPUs in group order.
// Each participant then enqueues its share on its own stream: all-reduce,
// all-gather and reduce-scatter as NCCL's, all-to-all and
// collective-permute as grouped sends and receives.
#ifndef PJRT_COMPILER_CUDA_NCCL_H_
#define PJRT_COMPILER_CUDA_NCCL_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compiler/host/host_program.h"
#include "compiler/program.h"

namespace pjrt::compiler::cuda {

// OK if NCCL can run `step`: its element types (no 16-bit integers, no
// complex), its reducer (add, multiply, maximum, minimum; and/or on pred),
// and, for all-to-all, a split dimension with only 1s before it (NCCL
// splits the major dimension; the code generator moves an all-gather's or
// a reduce-scatter's pieces through a temporary for any other).
// UNIMPLEMENTED naming the op and what is refused otherwise.
absl::Status CheckNcclCollective(const host::CollectiveStep& step);

// True when `dims` has only 1s before `dimension`: pieces cut along it are
// contiguous.
bool SplitsMajorDimension(const std::vector<int64_t>& dims, int64_t dimension);

// Enqueues this participant's share of `step` on `stream` (on GPU
// `device`). `inputs` and `outputs` are the device addresses of its
// operands and results. Errors name the op.
absl::Status RunNcclCollective(const host::CollectiveStep& step,
                               const RunContext& context,
                               absl::Span<void* const> inputs,
                               absl::Span<void* const> outputs, int device,
                               cudaStream_t stream);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_NCCL_H_
