// Collectives among the daemon's GPUs through NCCL.
//
// The participants of a collective learn each other's GPUs at the launch's
// rendezvous (compiler/collectives.h); the group's NCCL communicators (a
// clique, one per GPU, created together by ncclCommInitAll on first use)
// are cached for the life of the process, keyed by the GPUs in group order.
// Each participant then enqueues its share on its own stream: all-reduce,
// all-gather and reduce-scatter as NCCL's, all-to-all and
// collective-permute as grouped sends and receives. An all-to-all along a
// dimension with larger ones before it cuts pieces that are not contiguous
// (and how many depends on the group size, known only at run time): they
// are gathered into blocks of a temporary by strided copies before the
// sends, and the blocks received spread back after.
#ifndef PJRT_COMPILER_CUDA_NCCL_H_
#define PJRT_COMPILER_CUDA_NCCL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compiler/host/host_program.h"
#include "compiler/program.h"

namespace pjrt::compiler::cuda {

// OK if NCCL can run `step`: a reduction's element types (NCCL reduces no
// 16-bit integers, f8, 4-bit or complex values; all-gather, all-to-all and
// collective-permute move bytes of any type) and its reducer (add,
// multiply, maximum, minimum; and/or on pred). UNIMPLEMENTED naming the op
// and what is refused otherwise.
absl::Status CheckNcclCollective(const host::CollectiveStep& step);

// True when `dims` has only 1s before `dimension`: pieces cut along it are
// contiguous.
bool SplitsMajorDimension(const std::vector<int64_t>& dims, int64_t dimension);

// True when the all-to-all `step` cuts pieces that are not contiguous
// (its split dimension has larger ones before it): its launch then takes
// two temporaries of its operand's size (AllToAllPieceCopies).
bool AllToAllNeedsTemporaries(const host::CollectiveStep& step);

// A strided copy as cudaMemcpy2DAsync takes it: `rows` rows of
// `row_bytes`, the source's `src_pitch` bytes apart, the destination's
// `dst_pitch`; offsets and pitches in bytes.
struct StridedCopy {
  int64_t dst_offset = 0, dst_pitch = 0;
  int64_t src_offset = 0, src_pitch = 0;
  int64_t row_bytes = 0, rows = 0;
};

// For an all-to-all of `group_size` participants: the copies that gather
// piece p of the operand (the p-th of group_size equal parts along the
// split dimension) into block p of a temporary of the same size (`pack`),
// or that spread block p of a temporary into piece p of the result. One
// copy per piece; none when the operand is empty.
std::vector<StridedCopy> AllToAllPieceCopies(const host::CollectiveStep& step,
                                             int64_t group_size, bool pack);

// Enqueues this participant's share of `step` on `stream` (on GPU
// `device`). `inputs` and `outputs` are the device addresses of its
// operands and results, `temporaries` those of the scratch it takes
// (AllToAllNeedsTemporaries). Errors name the op.
absl::Status RunNcclCollective(const host::CollectiveStep& step,
                               const RunContext& context,
                               absl::Span<void* const> inputs,
                               absl::Span<void* const> outputs,
                               absl::Span<void* const> temporaries, int device,
                               cudaStream_t stream);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_NCCL_H_
