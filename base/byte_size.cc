#include "base/byte_size.h"

#include <cctype>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace pjrt {

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < s.size() &&
         std::isdigit(static_cast<unsigned char>(s[digits]))) {
    ++digits;
  }
  const auto error = [&] {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a byte size; write a whole number of bytes, optionally "
        "with a unit: 1048576, 512MiB, 16GiB, 2G",
        text));
  };
  uint64_t number;
  if (digits == 0 || !absl::SimpleAtoi(s.substr(0, digits), &number)) {
    return error();
  }
  std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(s.substr(digits)));
  uint64_t multiplier;
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else if (unit == "k" || unit == "kib") {
    multiplier = uint64_t{1} << 10;
  } else if (unit == "m" || unit == "mib") {
    multiplier = uint64_t{1} << 20;
  } else if (unit == "g" || unit == "gib") {
    multiplier = uint64_t{1} << 30;
  } else if (unit == "t" || unit == "tib") {
    multiplier = uint64_t{1} << 40;
  } else if (unit == "kb") {
    multiplier = 1000;
  } else if (unit == "mb") {
    multiplier = 1000 * 1000;
  } else if (unit == "gb") {
    multiplier = 1000 * 1000 * 1000;
  } else if (unit == "tb") {
    multiplier = uint64_t{1000} * 1000 * 1000 * 1000;
  } else {
    return error();
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  if (number > kMax / multiplier) {
    return absl::InvalidArgumentError(
        absl::StrFormat("byte size '%s' is too large", text));
  }
  return static_cast<int64_t>(number * multiplier);
}

std::string FormatByteSize(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB",
                                           "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while ((value >= 1024 || value <= -1024) && unit < 5) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%d B", bytes);
  return absl::StrFormat("%.4g %s", value, kUnits[unit]);
}

}  // namespace pjrt
