// Conversions between pjrt.v1 messages and runtime types.
#ifndef PJRT_DAEMON_PROTO_CONVERT_H_
#define PJRT_DAEMON_PROTO_CONVERT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/session.h"
#include "hlo/shape.h"
#include "pjrt/v1/buffer.pb.h"
#include "pjrt/v1/executable.pb.h"
#include "pjrt/v1/types.pb.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/executable.h"

namespace pjrt::daemon {

// Validates a shape sent by a client: INVALID_ARGUMENT naming the bad dtype
// or dimension.
absl::StatusOr<hlo::Shape> ShapeFromProto(const v1::ArrayShape& proto);
void ShapeToProto(const hlo::Shape& shape, v1::ArrayShape* proto);

void DeviceToProto(const runtime::Device& device, v1::Device* proto);

// Sets proto->unhealthy_reason when `device` has failed for good (asks the
// device: a driver call on CUDA).
void DeviceHealthToProto(device::Platform& platform,
                         const runtime::Device& device, v1::Device* proto);

// Longest error message a BufferInfo carries (the whole message comes with
// BlockUntilReady or Download); a tuple's description repeats it per element.
inline constexpr size_t kMaxBufferInfoErrorBytes = 1024;

// Fills `info` for `buffer` known by `handle` in `session` (which gives a
// tuple's element handles). Does not wait.
void BufferInfoToProto(const Session& session, uint64_t handle,
                       runtime::Buffer& buffer, v1::BufferInfo* info);

// Checks what a client may get wrong without knowing the devices:
// INVALID_ARGUMENT naming the field. The runtime checks the rest. A
// collective timeout above `max_collective_timeout` is refused.
absl::StatusOr<runtime::CompileOptions> CompileOptionsFromProto(
    const v1::CompileOptions& proto, absl::Duration max_collective_timeout);

runtime::ExecuteRunOptions ExecuteOptionsFromProto(
    const v1::ExecuteOptions& proto);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_PROTO_CONVERT_H_
