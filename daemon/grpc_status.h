// Conversions between absl::Status and grpc::Status, and the guard every
// handler runs in. The two code spaces are numbered identically (both follow
// google.rpc.Code).
//
// What a client receives is bounded and meaningful: messages are cut to
// kMaxMessageBytes (they may quote client text), UNKNOWN is never sent (it
// would mean "we do not know what happened"; an internal failure is
// INTERNAL), and an exception thrown while handling a call ends that call
// only: std::bad_alloc and std::length_error become RESOURCE_EXHAUSTED,
// anything else INTERNAL, instead of reaching gRPC (which reports UNKNOWN)
// or ending the daemon.
#ifndef PJRT_DAEMON_GRPC_STATUS_H_
#define PJRT_DAEMON_GRPC_STATUS_H_

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/log.h"
#include "base/text.h"
#include "grpcpp/support/status.h"

namespace pjrt::daemon {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  auto code = static_cast<grpc::StatusCode>(status.code());
  if (code == grpc::StatusCode::UNKNOWN) code = grpc::StatusCode::INTERNAL;
  return grpc::Status(code, Excerpt(status.message(), kMaxMessageBytes));
}

// A handler that already has gRPC's status (one relaying a peer's) passes
// it through; so Guarded takes handlers of either kind.
inline grpc::Status ToGrpcStatus(grpc::Status status) { return status; }

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// The status for an exception caught while doing `what` (an RPC's name).
inline absl::Status StatusFromException(absl::string_view what,
                                        std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": the daemon ran out of host memory for this call"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": a size in the request is too large for the daemon (", e.what(),
        ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(what, ": internal error: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, ": internal error"));
  }
}

// Runs `handler` (returning absl::Status, converted here, or grpc::Status)
// and turns any exception it throws into a status for this call alone.
template <typename Handler>
grpc::Status Guarded(absl::string_view rpc, Handler&& handler) {
  try {
    return ToGrpcStatus(std::forward<Handler>(handler)());
  } catch (...) {
    absl::Status status = StatusFromException(rpc, std::current_exception());
    spdlog::error("{}", status);
    return ToGrpcStatus(status);
  }
}

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_GRPC_STATUS_H_
