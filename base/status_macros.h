// Early-return helpers for absl::Status and absl::StatusOr<T>.
//
//   PJRT_RETURN_IF_ERROR(DoThing());
//   PJRT_ASSIGN_OR_RETURN(auto value, ComputeValue());
#ifndef PJRT_BASE_STATUS_MACROS_H_
#define PJRT_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PJRT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status pjrt_status_ = (expr);        \
    if (!pjrt_status_.ok()) return pjrt_status_; \
  } while (false)

#define PJRT_STATUS_CONCAT_INNER_(a, b) a##b
#define PJRT_STATUS_CONCAT_(a, b) PJRT_STATUS_CONCAT_INNER_(a, b)

#define PJRT_ASSIGN_OR_RETURN(lhs, expr)                                     \
  PJRT_ASSIGN_OR_RETURN_IMPL_(PJRT_STATUS_CONCAT_(pjrt_statusor_, __LINE__), \
                              lhs, expr)

#define PJRT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // PJRT_BASE_STATUS_MACROS_H_
