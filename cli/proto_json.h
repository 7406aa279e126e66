// Protobuf messages as JSON for `pjrtctl --json`: field names as in the
// .proto, every field present (defaults included), 64-bit integers as JSON
// numbers (not strings, unlike protobuf's own JSON mapping), enums by name.
#ifndef PJRT_CLI_PROTO_JSON_H_
#define PJRT_CLI_PROTO_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace pjrt::cli {

nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_PROTO_JSON_H_
