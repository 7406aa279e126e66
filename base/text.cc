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

size_t FirstNonUtf8(absl::string_view text) {
  const auto byte = [&](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte, which rules
    // out overlong forms (E0, F0), surrogates (ED) and code points past
    // U+10FFFF (F4).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + 1 >= text.size() || byte(i + 1) < low || byte(i + 1) > high) {
      return i;
    }
    for (size_t k = 2; k < length; ++k) {
      if (i + k >= text.size() || (byte(i + k) & 0xC0) != 0x80) return i;
    }
    i += length;
  }
  return absl::string_view::npos;
}

absl::Status CheckUtf8(absl::string_view text, absl::string_view what) {
  const size_t bad = FirstNonUtf8(text);
  if (bad == absl::string_view::npos) return absl::OkStatus();
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s is not UTF-8: byte %#04x at line %d, column %d (offset %d) begins "
      "no well-formed sequence",
      what, static_cast<unsigned char>(text[bad]), line, bad - line_start + 1,
      bad));
}

}  // namespace pjrt
