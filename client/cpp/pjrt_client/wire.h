// Conversions between the client's value types (types.h) and the protocol's
// messages (proto/pjrt/v1): the one place where the two meet.
#ifndef PJRT_CLIENT_CPP_WIRE_H_
#define PJRT_CLIENT_CPP_WIRE_H_

#include "client/cpp/pjrt_client/types.h"
#include "pjrt/v1/buffer.pb.h"
#include "pjrt/v1/executable.pb.h"
#include "pjrt/v1/server.pb.h"
#include "pjrt/v1/session.pb.h"
#include "pjrt/v1/types.pb.h"

namespace pjrt_client {

pjrt::v1::DType ToWire(DType dtype);
DType FromWire(pjrt::v1::DType dtype);

void ToWire(const ArrayShape& shape, pjrt::v1::ArrayShape* out);
ArrayShape FromWire(const pjrt::v1::ArrayShape& shape);
void ToWire(const CompileOptions& options, pjrt::v1::CompileOptions* out);

Device FromWire(const pjrt::v1::Device& device);
ServerInfo FromWire(const pjrt::v1::ServerInfo& info);
Stats FromWire(const pjrt::v1::Stats& stats);
SessionInfo FromWire(const pjrt::v1::SessionInfo& session);
ClusterStatus FromWire(const pjrt::v1::ClusterStatus& cluster);
// Moves the contents (`data`) out of `info`.
BufferInfo FromWire(pjrt::v1::BufferInfo&& info);
CompileInfo FromWire(const pjrt::v1::CompileResponse& response);
RemoteCopy FromWire(const pjrt::v1::CopyToRemoteDeviceResponse& response);

}  // namespace pjrt_client

#endif  // PJRT_CLIENT_CPP_WIRE_H_
