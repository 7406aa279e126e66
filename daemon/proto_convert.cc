#include "daemon/proto_convert.h"

#include <string>

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

void BufferInfoToProto(uint64_t handle, runtime::Buffer& buffer,
                       v1::BufferInfo* info) {
  info->set_handle(handle);
  ShapeToProto(buffer.shape(), info->mutable_shape());
  info->set_device_id(buffer.device()->id());
  info->set_size_bytes(buffer.size_bytes());
  bool ready = buffer.IsReady();
  info->set_ready(ready);
  if (ready) {
    absl::Status status = buffer.BlockHostUntilReady(absl::ZeroDuration());
    if (!status.ok()) {
      info->set_error_code(static_cast<int>(status.code()));
      info->set_error_message(std::string(status.message()));
    }
  }
}

runtime::CompileOptions CompileOptionsFromProto(const v1::CompileOptions&) {
  return runtime::CompileOptions();
}

}  // namespace pjrt::daemon
