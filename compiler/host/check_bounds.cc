// HostProgram::CheckBounds: every element range a program's steps read or
// write lies inside its slot, proved once at compile time so that runs need
// no checks.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/host_program.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host {

namespace {

using Wide = __int128;

Wide WideProduct(absl::Span<const int64_t> dims) {
  Wide n = 1;
  for (int64_t d : dims) {
    n *= d;
    if (n == 0) return 0;
    if (n > (Wide{1} << 100)) return Wide{1} << 100;  // far past any slot
  }
  return n;
}

// Checks element ranges of one program against its slots.
class BoundsChecker {
 public:
  explicit BoundsChecker(const HostProgram& program) : program_(program) {}

  // Elements of `element_bytes` in slot `slot`, or an error if the slot
  // index is invalid.
  absl::StatusOr<Wide> Capacity(int slot, int element_bytes) const {
    if (slot < 0 || slot >= static_cast<int>(program_.slots.size())) {
      return absl::InternalError(absl::StrFormat(
          "step %d names slot %d, which does not exist", step_, slot));
    }
    if (element_bytes <= 0) {
      return absl::InternalError(absl::StrFormat(
          "step %d reads elements of %d bytes", step_, element_bytes));
    }
    return Wide{program_.slots[slot].bytes} / element_bytes;
  }

  // [offset + min, offset + max] over `dims` of an affine map must lie in
  // [0, capacity).
  absl::Status CheckMap(int slot, int element_bytes, const AffineMap& map,
                        absl::Span<const int64_t> dims,
                        const char* what) const {
    if (map.strides.size() != dims.size()) {
      return Fail(slot, what, "a map whose rank differs from its loop's");
    }
    Wide lo = map.offset, hi = map.offset;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == 0) return absl::OkStatus();  // touches nothing
      const Wide reach = Wide{map.strides[d]} * (dims[d] - 1);
      if (reach < 0)
        lo += reach;
      else
        hi += reach;
    }
    return CheckRange(slot, element_bytes, lo, hi, what);
  }

  // Elements [0, count) of the slot.
  absl::Status CheckDense(int slot, int element_bytes, Wide count,
                          const char* what) const {
    if (count == 0) return absl::OkStatus();
    return CheckRange(slot, element_bytes, 0, count - 1, what);
  }

  absl::Status CheckRange(int slot, int element_bytes, Wide lo, Wide hi,
                          const char* what) const {
    PJRT_ASSIGN_OR_RETURN(Wide capacity, Capacity(slot, element_bytes));
    if (lo < 0 || hi >= capacity) {
      return Fail(
          slot, what,
          absl::StrFormat("elements [%d, %d] of a slot of %d elements",
                          static_cast<int64_t>(lo), static_cast<int64_t>(hi),
                          static_cast<int64_t>(capacity)));
    }
    return absl::OkStatus();
  }

  absl::Status Fail(int slot, const char* what,
                    const std::string& detail) const {
    return absl::InternalError(absl::StrFormat(
        "compiler error: step %d (%s) would touch %s: %s (slot %d); the "
        "program "
        "is refused",
        step_, what, detail, program_.slots[slot].shape.ToString(), slot));
  }

  void set_step(int step) { step_ = step; }

  // The ranges one step of the current index (set_step) reads and writes.
  // Each checks all of them and returns the first error.
  absl::Status Check(const LoopStep& s) const {
    absl::Status status;
    const Wide total = WideProduct(s.dims);
    if (total == 0) return status;
    status.Update(CheckDense(s.output_slot, hlo::ByteWidth(s.output_type),
                             total, "loop output"));
    for (const LoopInput& in : s.inputs) {
      if (in.kind != LoopInput::Kind::kBuffer) continue;
      status.Update(CheckMap(in.slot, hlo::ByteWidth(in.type), in.map, s.dims,
                             "loop input"));
    }
    return status;
  }

  absl::Status Check(const DotStep& s) const {
    absl::Status status;
    if (s.batch == 0 || s.m == 0 || s.n == 0) return status;
    const int bytes = hlo::ByteWidth(s.type);
    const int lhs_bytes = hlo::ByteWidth(s.operand_type);
    const int rhs_bytes = hlo::ByteWidth(s.rhs_type());
    status.Update(
        CheckDense(s.lhs, lhs_bytes, Wide{s.batch} * s.m * s.k, "dot lhs"));
    status.Update(
        CheckDense(s.rhs, rhs_bytes, Wide{s.batch} * s.k * s.n, "dot rhs"));
    status.Update(
        CheckDense(s.out, bytes, Wide{s.batch} * s.m * s.n, "dot out"));
    return status;
  }

  absl::Status Check(const ReduceStep& s) const {
    absl::Status status;
    if (Wide{s.outer} * s.inner == 0) return status;
    const int bytes = hlo::ByteWidth(s.type);
    status.Update(CheckDense(
        s.input, bytes, Wide{s.outer} * s.reduced * s.inner, "reduce input"));
    status.Update(CheckDense(s.init, bytes, 1, "reduce init"));
    status.Update(
        CheckDense(s.out, bytes, Wide{s.outer} * s.inner, "reduce out"));
    return status;
  }

  absl::Status Check(const GenericReduceStep& s) const {
    absl::Status status;
    if (Wide{s.outer} * s.inner == 0) return status;
    if (s.inputs.size() != s.types.size() || s.inits.size() != s.types.size() ||
        s.outs.size() != s.types.size()) {
      status.Update(
          absl::InternalError("a reduce step's lists differ in length"));
      return status;
    }
    for (size_t j = 0; j < s.types.size(); ++j) {
      const int bytes = hlo::ByteWidth(s.types[j]);
      status.Update(CheckDense(s.inputs[j], bytes,
                               Wide{s.outer} * s.reduced * s.inner,
                               "reduce input"));
      status.Update(CheckDense(s.inits[j], bytes, 1, "reduce init"));
      status.Update(
          CheckDense(s.outs[j], bytes, Wide{s.outer} * s.inner, "reduce out"));
    }
    return status;
  }

  absl::Status Check(const CopyStep& s) const {
    absl::Status status;
    if (WideProduct(s.dims) == 0) return status;
    status.Update(
        CheckMap(s.src, s.element_bytes, s.src_map, s.dims, "copy source"));
    status.Update(CheckMap(s.dst, s.element_bytes, s.dst_map, s.dims,
                           "copy destination"));
    return status;
  }

  absl::Status Check(const FillStep& s) const {
    absl::Status status;
    if (s.count == 0) return status;
    status.Update(CheckDense(s.value, s.element_bytes, 1, "fill value"));
    status.Update(CheckDense(s.dst, s.element_bytes, s.count, "fill"));
    return status;
  }

  absl::Status Check(const DynamicSliceStep& s) const {
    absl::Status status;
    const size_t rank = s.array_dims.size();
    if (s.sizes.size() != rank || s.start_slots.size() != rank ||
        s.start_types.size() != rank) {
      status.Update(
          absl::InternalError("a dynamic slice's lists differ in rank"));
      return status;
    }
    for (size_t d = 0; d < rank; ++d) {
      // The start is clamped to [0, array - size] at run time.
      if (s.sizes[d] < 0 || s.sizes[d] > s.array_dims[d]) {
        status.Update(absl::InternalError(
            absl::StrFormat("step %d: a window of %d in a dimension of %d",
                            step_, s.sizes[d], s.array_dims[d])));
        return status;
      }
      status.Update(CheckDense(s.start_slots[d],
                               hlo::ByteWidth(s.start_types[d]), 1,
                               "start index"));
    }
    const Wide array = WideProduct(s.array_dims);
    const Wide window = WideProduct(s.sizes);
    status.Update(CheckDense(s.update ? s.dst : s.src, s.element_bytes, array,
                             "dynamic slice array"));
    status.Update(CheckDense(s.update ? s.src : s.dst, s.element_bytes, window,
                             "dynamic slice window"));
    return status;
  }

  absl::Status Check(const KernelStep& s) const {
    absl::Status status;
    for (const auto* list : {&s.kernel->reads, &s.kernel->writes}) {
      for (const SlotAccess& access : *list) {
        status.Update(
            CheckDense(access.slot, 1, access.bytes, s.kernel->name.c_str()));
      }
    }
    return status;
  }

  absl::Status Check(const CollectiveStep& s) const {
    absl::Status status;
    if (s.inputs.size() != s.types.size() ||
        s.outputs.size() != s.types.size() ||
        s.operand_elements.size() != s.types.size() ||
        (s.types.size() > 1 && s.kind != CollectiveStep::Kind::kAllReduce) ||
        s.types.empty()) {
      status.Update(
          absl::InternalError("a collective's lists differ in length"));
      return status;
    }
    if (s.operand_elements[0] != WideProduct(s.input_dims)) {
      status.Update(
          absl::InternalError("a collective's operand sizes disagree"));
      return status;
    }
    for (size_t j = 0; j < s.types.size(); ++j) {
      const int bytes = hlo::ByteWidth(s.types[j]);
      // An all-reduce's (and a permute's) results have its operands'
      // shapes; the others' have output_dims.
      const bool same = s.kind == CollectiveStep::Kind::kAllReduce ||
                        s.kind == CollectiveStep::Kind::kCollectivePermute;
      status.Update(CheckDense(s.inputs[j], bytes, s.operand_elements[j],
                               "collective input"));
      status.Update(CheckDense(
          s.outputs[j], bytes,
          same ? Wide{s.operand_elements[j]} : WideProduct(s.output_dims),
          "collective output"));
    }
    return status;
  }

 private:
  const HostProgram& program_;
  int step_ = 0;
};

// Each slot's own bounds: its size, and where it lies (in scratch, in a
// constant, in the slot it views) or what it holds (a parameter, a result,
// an id).
absl::Status CheckSlots(const HostProgram& program) {
  const auto EdgeBytes = [&](const hlo::Shape& shape) {
    return program.packed_edges ? shape.ByteSize() : shape.UnpackedByteSize();
  };
  const std::vector<BufferSlot>& slots = program.slots;
  for (size_t i = 0; i < slots.size(); ++i) {
    const BufferSlot& slot = slots[i];
    if (slot.bytes < 0 || slot.bytes > hlo::kMaxArrayBytes) {
      return absl::InternalError(
          absl::StrFormat("slot %d has %d bytes", i, slot.bytes));
    }
    switch (slot.kind) {
      case BufferSlot::Kind::kScratch:
        if (slot.offset < 0 ||
            slot.offset + slot.bytes > program.scratch_bytes_) {
          return absl::InternalError(absl::StrFormat(
              "scratch slot %d ([%d, +%d)) lies outside the %d scratch bytes",
              i, slot.offset, slot.bytes, program.scratch_bytes_));
        }
        break;
      case BufferSlot::Kind::kConstant:
        if (slot.index < 0 ||
            slot.index >= static_cast<int64_t>(program.constants.size()) ||
            static_cast<int64_t>(program.constants[slot.index].size() * 8) <
                slot.bytes) {
          return absl::InternalError(absl::StrFormat(
              "constant slot %d has no data of %d bytes", i, slot.bytes));
        }
        break;
      case BufferSlot::Kind::kView:
        if (slot.index < 0 || slot.index >= static_cast<int64_t>(i) ||
            slots[slot.index].bytes < slot.bytes) {
          return absl::InternalError(
              absl::StrFormat("view slot %d (%d bytes) does not fit in slot %d",
                              i, slot.bytes, slot.index));
        }
        break;
      case BufferSlot::Kind::kParameter:
        if (slot.index < 0 ||
            slot.index >=
                static_cast<int64_t>(program.parameter_shapes_.size()) ||
            EdgeBytes(program.parameter_shapes_[slot.index]) != slot.bytes) {
          return absl::InternalError(absl::StrFormat(
              "parameter slot %d does not match parameter %d", i, slot.index));
        }
        break;
      case BufferSlot::Kind::kResult:
        if (slot.index < 0 ||
            slot.index >= static_cast<int64_t>(program.result_shapes_.size()) ||
            EdgeBytes(program.result_shapes_[slot.index]) != slot.bytes) {
          return absl::InternalError(absl::StrFormat(
              "result slot %d does not match result %d", i, slot.index));
        }
        break;
      case BufferSlot::Kind::kReplicaId:
      case BufferSlot::Kind::kPartitionId:
        if (slot.bytes > 4) {
          return absl::InternalError(
              absl::StrFormat("id slot %d is %d bytes", i, slot.bytes));
        }
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HostProgram::CheckBounds() const {
  PJRT_RETURN_IF_ERROR(CheckSlots(*this));
  BoundsChecker c(*this);
  for (size_t i = 0; i < steps.size(); ++i) {
    c.set_step(static_cast<int>(i));
    PJRT_RETURN_IF_ERROR(
        std::visit([&c](const auto& s) { return c.Check(s); }, steps[i]));
  }
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::host
