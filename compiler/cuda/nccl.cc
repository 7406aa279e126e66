#include "compiler/cuda/nccl.h"

#include <nccl.h>

#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "compiler/collectives.h"
#include "compiler/host/kernel_util.h"

namespace pjrt::compiler::cuda {
namespace {

using hlo::PrimitiveType;
using host::CollectiveStep;
using host::ExprOp;

// The NCCL type that reduces values of `t` (16-bit integers and f8 are
// widened first, codegen.cc).
std::optional<ncclDataType_t> NcclType(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred:
    case PrimitiveType::kU8:
      return ncclUint8;
    case PrimitiveType::kS8:
      return ncclInt8;
    case PrimitiveType::kS32:
      return ncclInt32;
    case PrimitiveType::kU32:
      return ncclUint32;
    case PrimitiveType::kS64:
      return ncclInt64;
    case PrimitiveType::kU64:
      return ncclUint64;
    case PrimitiveType::kF16:
      return ncclFloat16;
    case PrimitiveType::kBf16:
      return ncclBfloat16;
    case PrimitiveType::kF32:
      return ncclFloat32;
    case PrimitiveType::kF64:
      return ncclFloat64;
    default:
      return std::nullopt;
  }
}

std::optional<ncclRedOp_t> NcclOp(ExprOp op, PrimitiveType t) {
  switch (op) {
    case ExprOp::kAdd:
      return ncclSum;
    case ExprOp::kMultiply:
      return ncclProd;
    case ExprOp::kMaximum:
      return ncclMax;
    case ExprOp::kMinimum:
      return ncclMin;
    // On pred (0 or 1), and is the minimum and or the maximum.
    case ExprOp::kAnd:
      return t == PrimitiveType::kPred ? std::optional(ncclMin) : std::nullopt;
    case ExprOp::kOr:
      return t == PrimitiveType::kPred ? std::optional(ncclMax) : std::nullopt;
    default:
      return std::nullopt;
  }
}

absl::Status NcclError(ncclResult_t result, absl::string_view what,
                       const CollectiveStep& step) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s: %s failed: %s", step.name,
                                             what, ncclGetErrorString(result)));
}

// Communicators of the GPUs of one group, in group order, for the life of
// the process.
absl::StatusOr<ncclComm_t> Communicator(const std::vector<int>& devices,
                                        int index, const CollectiveStep& step) {
  static Mutex mu;
  static auto* cliques =
      new std::map<std::vector<int>, std::vector<ncclComm_t>>();
  MutexLock lock(&mu);
  auto it = cliques->find(devices);
  if (it == cliques->end()) {
    std::vector<ncclComm_t> comms(devices.size(), nullptr);
    PJRT_RETURN_IF_ERROR(NcclError(
        ncclCommInitAll(comms.data(), static_cast<int>(devices.size()),
                        devices.data()),
        absl::StrFormat("ncclCommInitAll on GPUs %s",
                        absl::StrJoin(devices, ", ")),
        step));
    it = cliques->emplace(devices, std::move(comms)).first;
  }
  return it->second[index];
}

absl::Status StridedCopies(const CollectiveStep& s,
                           const std::vector<StridedCopy>& copies, void* dst,
                           const void* src, cudaStream_t stream) {
  for (const StridedCopy& c : copies) {
    const cudaError_t e = cudaMemcpy2DAsync(
        static_cast<char*>(dst) + c.dst_offset, c.dst_pitch,
        static_cast<const char*>(src) + c.src_offset, c.src_pitch, c.row_bytes,
        c.rows, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) {
      return absl::InternalError(absl::StrFormat(
          "%s: moving all-to-all pieces: %s", s.name, cudaGetErrorString(e)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool SplitsMajorDimension(const std::vector<int64_t>& dims, int64_t dimension) {
  for (int64_t d = 0; d < dimension && d < static_cast<int64_t>(dims.size());
       ++d) {
    if (dims[d] != 1) return false;
  }
  return true;
}

absl::Status CheckNcclCollective(const CollectiveStep& s) {
  const bool reduces = s.kind == CollectiveStep::Kind::kAllReduce ||
                       s.kind == CollectiveStep::Kind::kReduceScatter;
  // The others move bytes, whatever they are.
  for (PrimitiveType t : s.types) {
    if (reduces && (t == PrimitiveType::kS16 || t == PrimitiveType::kU16 ||
                    hlo::IsMiniFloat(t))) {
      return absl::InternalError(
          absl::StrFormat("%s: a reduction of %s reached NCCL unwidened",
                          s.name, hlo::PrimitiveTypeName(t)));
    }
    if (reduces && !NcclType(t).has_value()) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: NCCL reduces no %s values, so the CUDA backend cannot run this "
          "collective; run it with --platform host",
          s.name, hlo::PrimitiveTypeName(t)));
    }
  }
  if ((s.kind == CollectiveStep::Kind::kAllReduce ||
       s.kind == CollectiveStep::Kind::kReduceScatter) &&
      !NcclOp(s.op, s.types.empty() ? PrimitiveType::kF32 : s.types[0])
           .has_value()) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: NCCL reduces with add, multiply, maximum and minimum (and and/or "
        "on pred) only; run this collective with --platform host",
        s.name));
  }
  return absl::OkStatus();
}

bool AllToAllNeedsTemporaries(const CollectiveStep& s) {
  return s.kind == CollectiveStep::Kind::kAllToAll &&
         !SplitsMajorDimension(s.input_dims, s.dimension) &&
         host::Product(s.input_dims) > 0;
}

std::vector<StridedCopy> AllToAllPieceCopies(const CollectiveStep& s,
                                             int64_t group_size, bool pack) {
  std::vector<StridedCopy> copies;
  const int64_t d = s.dimension;
  int64_t outer = 1, inner = hlo::ByteWidth(s.types[0]);
  for (int64_t i = 0; i < static_cast<int64_t>(s.input_dims.size()); ++i) {
    if (i < d) outer *= s.input_dims[i];
    if (i > d) inner *= s.input_dims[i];
  }
  if (outer * inner == 0 || group_size <= 0) return copies;
  // Each row of the operand (one index before the split dimension) holds
  // the group's pieces side by side; block p of the temporary holds piece
  // p of every row, one after the other.
  const int64_t row = s.input_dims[d] * inner;
  const int64_t piece = row / group_size;
  for (int64_t p = 0; p < group_size; ++p) {
    StridedCopy c;
    c.row_bytes = piece;
    c.rows = outer;
    const int64_t strided_offset = p * piece, block_offset = p * piece * outer;
    c.src_offset = pack ? strided_offset : block_offset;
    c.src_pitch = pack ? row : piece;
    c.dst_offset = pack ? block_offset : strided_offset;
    c.dst_pitch = pack ? piece : row;
    copies.push_back(c);
  }
  return copies;
}

absl::Status RunNcclCollective(const CollectiveStep& s,
                               const RunContext& context,
                               absl::Span<void* const> inputs,
                               absl::Span<void* const> outputs,
                               absl::Span<void* const> temporaries, int device,
                               cudaStream_t stream) {
  std::vector<int64_t> group;
  int index = 0;
  PJRT_RETURN_IF_ERROR(CollectiveGroup(s, context, &group, &index));
  const int n = static_cast<int>(group.size());
  const int width = hlo::ByteWidth(s.types[0]);
  const int64_t in_elements = host::Product(s.input_dims);
  const int64_t out_elements = host::Product(s.output_dims);
  // What moves without being reduced moves as bytes.
  const int64_t in_bytes = in_elements * width;
  const int64_t out_bytes = out_elements * width;

  if (n == 1) {
    // Alone in its group: every collective copies its operands (a permute
    // with no pair into this member gives zeros).
    for (size_t j = 0; j < outputs.size(); ++j) {
      const int64_t bytes =
          s.kind == CollectiveStep::Kind::kAllReduce
              ? s.operand_elements[j] * hlo::ByteWidth(s.types[j])
              : out_elements * width;
      bool has_source = s.kind != CollectiveStep::Kind::kCollectivePermute;
      for (const auto& [from, to] : s.source_target_pairs)
        has_source |= from == 0 && to == 0;
      const cudaError_t e =
          has_source ? cudaMemcpyAsync(outputs[j], inputs[j], bytes,
                                       cudaMemcpyDeviceToDevice, stream)
                     : cudaMemsetAsync(outputs[j], 0, bytes, stream);
      if (e != cudaSuccess) {
        return absl::InternalError(
            absl::StrFormat("%s: %s", s.name, cudaGetErrorString(e)));
      }
    }
    return absl::OkStatus();
  }
  if (context.collectives == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s joins %d participants, but this run has no launch to meet them in",
        s.name, n));
  }
  // Learn the group's GPUs at the launch's rendezvous.
  const std::string key = context.collectives->NextInstance(
      absl::StrCat(s.key, "#gpus"), group[index]);
  const int mine = device;
  PJRT_ASSIGN_OR_RETURN(
      std::vector<CollectiveHub::Member> members,
      context.collectives->Arrive(key, s.name, group, index, {&mine, nullptr},
                                  context.cancellation));
  std::vector<int> devices;
  for (const CollectiveHub::Member& m : members) {
    devices.push_back(*static_cast<const int*>(m.input));
  }
  context.collectives->Depart(key);
  for (int i = 0; i < n; ++i) {
    for (int k = i + 1; k < n; ++k) {
      if (devices[i] == devices[k]) {
        return absl::FailedPreconditionError(
            absl::StrFormat("%s places two participants (%s and %s) on GPU %d; "
                            "NCCL needs a GPU "
                            "of its own for each",
                            s.name, context.collectives->Name(group[i]),
                            context.collectives->Name(group[k]), devices[i]));
      }
    }
  }
  PJRT_ASSIGN_OR_RETURN(ncclComm_t comm, Communicator(devices, index, s));
  // An all-to-all's pieces, contiguous or gathered into blocks.
  const void* send = inputs.empty() ? nullptr : inputs[0];
  void* receive = outputs.empty() ? nullptr : outputs[0];
  const bool strided = AllToAllNeedsTemporaries(s);
  if (strided) {
    if (temporaries.size() != 2) {
      return absl::InternalError(absl::StrFormat(
          "%s: an all-to-all of strided pieces needs 2 temporaries, has %d",
          s.name, temporaries.size()));
    }
    PJRT_RETURN_IF_ERROR(StridedCopies(s, AllToAllPieceCopies(s, n, true),
                                       temporaries[0], inputs[0], stream));
    send = temporaries[0];
    receive = temporaries[1];
  }
  PJRT_RETURN_IF_ERROR(NcclError(ncclGroupStart(), "ncclGroupStart", s));
  absl::Status status;
  switch (s.kind) {
    case CollectiveStep::Kind::kAllReduce:
      for (size_t j = 0; j < inputs.size() && status.ok(); ++j) {
        status = NcclError(
            ncclAllReduce(inputs[j], outputs[j], s.operand_elements[j],
                          *NcclType(s.types[j]), *NcclOp(s.op, s.types[j]),
                          comm, stream),
            "ncclAllReduce", s);
      }
      break;
    case CollectiveStep::Kind::kAllGather:
      status = NcclError(ncclAllGather(inputs[0], outputs[0], in_bytes,
                                       ncclUint8, comm, stream),
                         "ncclAllGather", s);
      break;
    case CollectiveStep::Kind::kReduceScatter:
      status =
          NcclError(ncclReduceScatter(inputs[0], outputs[0], out_elements,
                                      *NcclType(s.types[0]),
                                      *NcclOp(s.op, s.types[0]), comm, stream),
                    "ncclReduceScatter", s);
      break;
    case CollectiveStep::Kind::kAllToAll: {
      const int64_t chunk = in_bytes / n;
      for (int p = 0; p < n && status.ok(); ++p) {
        status = NcclError(ncclSend(static_cast<const char*>(send) + p * chunk,
                                    chunk, ncclUint8, p, comm, stream),
                           "ncclSend", s);
        if (status.ok()) {
          status = NcclError(ncclRecv(static_cast<char*>(receive) + p * chunk,
                                      chunk, ncclUint8, p, comm, stream),
                             "ncclRecv", s);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kCollectivePermute: {
      bool received = false;
      for (const auto& [from, to] : s.source_target_pairs) {
        if (from == index && status.ok()) {
          status = NcclError(ncclSend(inputs[0], in_bytes, ncclUint8,
                                      static_cast<int>(to), comm, stream),
                             "ncclSend", s);
        }
        if (to == index && status.ok()) {
          received = true;
          status = NcclError(ncclRecv(outputs[0], out_bytes, ncclUint8,
                                      static_cast<int>(from), comm, stream),
                             "ncclRecv", s);
        }
      }
      if (!received && status.ok()) {
        const cudaError_t e = cudaMemsetAsync(outputs[0], 0, out_bytes, stream);
        if (e != cudaSuccess) {
          status = absl::InternalError(
              absl::StrFormat("%s: %s", s.name, cudaGetErrorString(e)));
        }
      }
      break;
    }
  }
  status.Update(NcclError(ncclGroupEnd(), "ncclGroupEnd", s));
  if (status.ok() && strided) {
    status = StridedCopies(s, AllToAllPieceCopies(s, n, false), outputs[0],
                           temporaries[1], stream);
  }
  return status;
}

}  // namespace pjrt::compiler::cuda
