#include "base/text.h"

#include "absl/strings/str_format.h"

namespace pjrt {
namespace {

// The length of the longest prefix of `text` of at most `limit` bytes that
// does not end inside a UTF-8 sequence.
size_t Utf8Prefix(absl::string_view text, size_t limit) {
  if (limit >= text.size()) return text.size();
  size_t end = limit;
  // Step back over continuation bytes (10xxxxxx) to the start of the
  // sequence that the cut would split.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return end;
}

}  // namespace

std::string Excerpt(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // Room for the suffix, which names at most a 20-digit count.
  constexpr size_t kSuffix = 32;
  size_t keep = max_bytes > kSuffix ? max_bytes - kSuffix : 0;
  keep = Utf8Prefix(text, keep);
  return absl::StrFormat("%s ... (%d more bytes)", text.substr(0, keep),
                         text.size() - keep);
}

std::string EscapeForLog(absl::string_view text, size_t max_bytes) {
  std::string out;
  size_t consumed = 0;
  for (; consumed < text.size(); ++consumed) {
    if (out.size() >= max_bytes) break;
    const unsigned char c = static_cast<unsigned char>(text[consumed]);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c >= 0x20 && c < 0x7F) {
          out.push_back(static_cast<char>(c));
        } else {
          out += absl::StrFormat("\\x%02x", c);
        }
    }
  }
  if (consumed < text.size()) {
    absl::StrAppendFormat(&out, " ... (%d more bytes)", text.size() - consumed);
  }
  return out;
}

absl::Status BoundMessage(const absl::Status& status) {
  if (status.message().size() <= kMaxMessageBytes) return status;
  return absl::Status(status.code(),
                      Excerpt(status.message(), kMaxMessageBytes));
}

}  // namespace pjrt
