// Conversions between absl::Status and grpc::Status. The two code spaces are
// numbered identically (both follow google.rpc.Code).
#ifndef PJRT_DAEMON_GRPC_STATUS_H_
#define PJRT_DAEMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pjrt::daemon {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_GRPC_STATUS_H_
