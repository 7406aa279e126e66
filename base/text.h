// Client-supplied text in messages and logs: bounded and escaped.
//
// A client controls names, program text and the messages derived from them.
// Quoting such text in full lets one request grow every log line and every
// reply by megabytes, and a newline in it forges log lines. These helpers
// cut text to a bounded excerpt (saying how much was left out) and escape
// whatever is not printable ASCII.
#ifndef PJRT_BASE_TEXT_H_
#define PJRT_BASE_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pjrt {

// Longest status message the daemon sends or logs; longer ones are cut.
inline constexpr size_t kMaxMessageBytes = 4096;

// `text` if it has at most `max_bytes` bytes; otherwise its first bytes and
// " ... (N more bytes)", the whole at most about `max_bytes` long. Never cuts
// a UTF-8 sequence in two.
std::string Excerpt(absl::string_view text, size_t max_bytes);

// `text` with every byte outside printable ASCII escaped (\n, \t, \\, \xNN),
// cut as Excerpt does to `max_bytes` of escaped text: safe to put in one log
// line.
std::string EscapeForLog(absl::string_view text, size_t max_bytes = 256);

// `status` with its message cut to kMaxMessageBytes (code unchanged).
absl::Status BoundMessage(const absl::Status& status);

// The offset of the first byte of `text` that does not begin or continue a
// well-formed UTF-8 sequence (Unicode's definition: no overlong forms, no
// surrogates, nothing past U+10FFFF), or npos if it is all UTF-8. A
// protobuf `string` field must be UTF-8: gRPC refuses a message with
// another as malformed, with no word of which field or byte.
size_t FirstNonUtf8(absl::string_view text);

// OK, or INVALID_ARGUMENT naming `what`, the offending byte and its line
// and column (counted in bytes from 1), for text that is not UTF-8.
absl::Status CheckUtf8(absl::string_view text, absl::string_view what);

}  // namespace pjrt

#endif  // PJRT_BASE_TEXT_H_
