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

std::optional<ncclDataType_t> NcclType(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred:
    case PrimitiveType::kU8:
      return ncclUint8;
    case PrimitiveType::kS8:
      return ncclInt8;
    // Moved only (all-gather, all-to-all, collective-permute): reductions
    // of them are widened to 32 bits first (codegen.cc).
    case PrimitiveType::kS16:
    case PrimitiveType::kU16:
      return ncclFloat16;
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
  for (PrimitiveType t : s.types) {
    if (reduces && (t == PrimitiveType::kS16 || t == PrimitiveType::kU16)) {
      return absl::InternalError(
          absl::StrFormat("%s: a reduction of %s reached NCCL unwidened",
                          s.name, hlo::PrimitiveTypeName(t)));
    }
    if (!NcclType(t).has_value()) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: NCCL has no %s type, so the CUDA backend cannot run this "
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
  if (s.kind == CollectiveStep::Kind::kAllToAll) {
    if (!SplitsMajorDimension(s.input_dims, s.dimension)) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: the CUDA backend splits collectives along their major dimension "
          "only (dimension %d of [%s] has larger dimensions before it); run "
          "it with --platform host",
          s.name, s.dimension, absl::StrJoin(s.input_dims, ",")));
    }
  }
  return absl::OkStatus();
}

absl::Status RunNcclCollective(const CollectiveStep& s,
                               const RunContext& context,
                               absl::Span<void* const> inputs,
                               absl::Span<void* const> outputs, int device,
                               cudaStream_t stream) {
  std::vector<int64_t> group;
  int index = 0;
  PJRT_RETURN_IF_ERROR(CollectiveGroup(s, context, &group, &index));
  const int n = static_cast<int>(group.size());
  const int width = hlo::ByteWidth(s.types[0]);
  const int64_t in_elements = host::Product(s.input_dims);
  const int64_t out_elements = host::Product(s.output_dims);

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
  const std::string key = absl::StrCat(s.key, "#gpus");
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
  const ncclDataType_t type = *NcclType(s.types[0]);
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
      status = NcclError(
          ncclAllGather(inputs[0], outputs[0], in_elements, type, comm, stream),
          "ncclAllGather", s);
      break;
    case CollectiveStep::Kind::kReduceScatter:
      status =
          NcclError(ncclReduceScatter(inputs[0], outputs[0], out_elements, type,
                                      *NcclOp(s.op, s.types[0]), comm, stream),
                    "ncclReduceScatter", s);
      break;
    case CollectiveStep::Kind::kAllToAll: {
      const int64_t chunk = in_elements / n;
      for (int p = 0; p < n && status.ok(); ++p) {
        status = NcclError(
            ncclSend(static_cast<const char*>(inputs[0]) + p * chunk * width,
                     chunk, type, p, comm, stream),
            "ncclSend", s);
        if (status.ok()) {
          status = NcclError(
              ncclRecv(static_cast<char*>(outputs[0]) + p * chunk * width,
                       chunk, type, p, comm, stream),
              "ncclRecv", s);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kCollectivePermute: {
      bool received = false;
      for (const auto& [from, to] : s.source_target_pairs) {
        if (from == index && status.ok()) {
          status = NcclError(ncclSend(inputs[0], in_elements, type,
                                      static_cast<int>(to), comm, stream),
                             "ncclSend", s);
        }
        if (to == index && status.ok()) {
          received = true;
          status = NcclError(ncclRecv(outputs[0], out_elements, type,
                                      static_cast<int>(from), comm, stream),
                             "ncclRecv", s);
        }
      }
      if (!received && status.ok()) {
        const cudaError_t e =
            cudaMemsetAsync(outputs[0], 0, out_elements * width, stream);
        if (e != cudaSuccess) {
          status = absl::InternalError(
              absl::StrFormat("%s: %s", s.name, cudaGetErrorString(e)));
        }
      }
      break;
    }
  }
  status.Update(NcclError(ncclGroupEnd(), "ncclGroupEnd", s));
  return status;
}

}  // namespace pjrt::compiler::cuda
