#include "daemon/proto_convert.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "base/text.h"
#include "hlo/ir.h"

namespace pjrt::daemon {

absl::StatusOr<hlo::Shape> ShapeFromProto(const v1::ArrayShape& proto) {
  auto type = static_cast<hlo::PrimitiveType>(proto.dtype());
  return hlo::MakeArrayShape(type, proto.dims());
}

void ShapeToProto(const hlo::Shape& shape, v1::ArrayShape* proto) {
  proto->set_dtype(static_cast<v1::DType>(shape.element_type()));
  proto->mutable_dims()->Assign(shape.dimensions().begin(),
                                shape.dimensions().end());
}

void DeviceToProto(const runtime::Device& device, v1::Device* proto) {
  proto->set_id(device.id());
  proto->set_local_hardware_id(device.local_hardware_id());
  proto->set_task_id(device.task_id());
  proto->set_platform(std::string(device.platform_name()));
  proto->set_kind(std::string(device.kind()));
  proto->set_memory_bytes(device.memory_bytes());
  proto->set_addressable(true);
}

void DeviceHealthToProto(device::Platform& platform,
                         const runtime::Device& device, v1::Device* proto) {
  absl::Status health =
      platform.DeviceHealth(device.local_hardware_id(), /*probe=*/true);
  if (!health.ok()) proto->set_unhealthy_reason(std::string(health.message()));
}

void BufferInfoToProto(const Session& session, uint64_t handle,
                       runtime::Buffer& buffer, v1::BufferInfo* info) {
  info->set_handle(handle);
  info->set_device_id(buffer.device()->id());
  if (buffer.is_tuple()) {
    info->set_is_tuple(true);
    for (const auto& element : buffer.tuple_elements()) {
      BufferInfoToProto(session, session.HandleOf(element.get()), *element,
                        info->add_tuple_elements());
    }
  } else {
    ShapeToProto(buffer.shape(), info->mutable_shape());
    info->set_size_bytes(buffer.size_bytes());
  }
  // A deleted or donated buffer is settled too: its error says which (a
  // caller polling for readiness must not wait for ever).
  const bool ready =
      buffer.IsReady() || (!buffer.is_tuple() && buffer.IsDeleted());
  info->set_ready(ready);
  if (ready) {
    absl::Status status = buffer.BlockHostUntilReady(absl::ZeroDuration());
    if (!status.ok()) {
      // As ToGrpcStatus: a status from elsewhere (a peer's transfer) may
      // be UNKNOWN, which a client must never see.
      info->set_error_code(status.code() == absl::StatusCode::kUnknown
                               ? static_cast<int>(absl::StatusCode::kInternal)
                               : static_cast<int>(status.code()));
      info->set_error_message(
          Excerpt(status.message(), kMaxBufferInfoErrorBytes));
    }
  }
}

absl::StatusOr<runtime::CompileOptions> CompileOptionsFromProto(
    const v1::CompileOptions& proto, absl::Duration max_collective_timeout) {
  runtime::CompileOptions options;
  if (proto.num_replicas() < 0 || proto.num_partitions() < 0 ||
      proto.num_replicas() > hlo::kMaxProgramDevices ||
      proto.num_partitions() > hlo::kMaxProgramDevices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_replicas=%d and num_partitions=%d must lie in [0, %d] (0 means "
        "the module header's replica_count / num_partitions)",
        proto.num_replicas(), proto.num_partitions(), hlo::kMaxProgramDevices));
  }
  options.num_replicas = proto.num_replicas();
  options.num_partitions = proto.num_partitions();
  options.portable = proto.portable();
  switch (proto.program_format()) {
    case v1::PROGRAM_FORMAT_UNSPECIFIED:
      options.format = hlo::ProgramFormat::kAuto;
      break;
    case v1::PROGRAM_FORMAT_HLO:
      options.format = hlo::ProgramFormat::kHlo;
      break;
    case v1::PROGRAM_FORMAT_STABLEHLO:
      options.format = hlo::ProgramFormat::kStableHlo;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "program_format %d is not one this daemon knows; use "
          "PROGRAM_FORMAT_HLO (1), PROGRAM_FORMAT_STABLEHLO (2) or leave it "
          "unset to detect it",
          static_cast<int>(proto.program_format())));
  }
  if (proto.device_assignment_size() > 0) {
    const int replicas = proto.num_replicas();
    const int partitions = proto.num_partitions();
    if (replicas == 0 || partitions == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a device_assignment (here of %d devices) needs num_replicas and "
          "num_partitions (here %d and %d) to say how it is laid out",
          proto.device_assignment_size(), replicas, partitions));
    }
    if (proto.device_assignment_size() !=
        static_cast<int64_t>(replicas) * partitions) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device_assignment has %d devices, but %d replicas x %d partitions "
          "need %d",
          proto.device_assignment_size(), replicas, partitions,
          static_cast<int64_t>(replicas) * partitions));
    }
    options.device_assignment.assign(replicas, std::vector<int>(partitions));
    for (int r = 0; r < replicas; ++r) {
      for (int p = 0; p < partitions; ++p) {
        options.device_assignment[r][p] =
            proto.device_assignment(r * partitions + p);
      }
    }
  }
  options.non_donatable_parameters.assign(
      proto.non_donatable_parameters().begin(),
      proto.non_donatable_parameters().end());
  const double timeout = proto.collective_timeout_seconds();
  const double max = absl::ToDoubleSeconds(max_collective_timeout);
  // NaN fails the comparison too.
  if (!(timeout >= 0 && timeout <= max)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collective_timeout_seconds=%g must lie in [0, %g] (0 means %s; the "
        "daemon's max_collective_timeout_seconds is %g)",
        timeout, max,
        absl::FormatDuration(
            std::min(runtime::CompileOptions().collective_timeout,
                     max_collective_timeout)),
        max));
  }
  options.collective_timeout =
      timeout > 0
          ? absl::Seconds(timeout)
          : std::min(options.collective_timeout, max_collective_timeout);
  return options;
}

runtime::ExecuteRunOptions ExecuteOptionsFromProto(
    const v1::ExecuteOptions& proto) {
  runtime::ExecuteRunOptions options;
  options.launch_id = proto.launch_id();
  options.arguments_are_tupled = proto.arguments_are_tupled();
  options.untuple_result = !proto.keep_tuple_result();
  return options;
}

}  // namespace pjrt::daemon
