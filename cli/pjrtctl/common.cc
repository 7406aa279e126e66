#include "cli/pjrtctl/common.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {

int Fail(const GlobalOptions& g, const absl::Status& status, int exit_code) {
  if (g.json) {
    json doc = {{"error",
                 {{"code", absl::StatusCodeToString(status.code())},
                  {"message", std::string(status.message())}}}};
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cerr << "pjrtctl: " << absl::StatusCodeToString(status.code()) << ": "
              << status.message() << "\n";
  }
  return exit_code;
}

int FailUsage(const GlobalOptions& g, const absl::Status& status) {
  return Fail(g, status, kExitUsage);
}

absl::StatusOr<std::shared_ptr<pjrt_client::Client>> Connect(
    const GlobalOptions& g, bool shared_memory) {
  std::string token;
  if (!g.token_file.empty()) {
    std::ifstream file(g.token_file);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cannot read the token file %s", g.token_file));
    }
    token = std::string(absl::StripAsciiWhitespace(text.str()));
    if (token.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the token file %s is empty; it holds the tenant's token, as "
          "`pjrtctl token new` printed it",
          g.token_file));
    }
  }
  return pjrt_client::Client::Connect(
      {.address = g.address,
       .timeout = absl::Seconds(g.timeout_seconds),
       .shared_memory = shared_memory,
       .token = token,
       .tls_ca = g.tls_ca,
       .tls_cert = g.tls_cert,
       .tls_key = g.tls_key});
}

absl::StatusOr<int> DeviceOrFirst(pjrt_client::Client& client, int requested) {
  if (requested >= 0) return requested;
  PJRT_ASSIGN_OR_RETURN(auto devices, client.Devices());
  for (const auto& device : devices) {
    if (device.addressable) return device.id;
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("%s has no addressable device", client.address()));
}

absl::StatusOr<uint64_t> ParseHex(const std::string& text, const char* what) {
  std::string digits = text;
  if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) {
    digits = digits.substr(2);
  }
  uint64_t value = 0;
  bool ok = !digits.empty() && digits.size() <= 16;
  for (char c : digits) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                        : -1;
    if (d < 0) ok = false;
    value = value * 16 + (d < 0 ? 0 : d);
  }
  if (!ok || value == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' is not a hexadecimal token such as 0x1f2e3d4c5b6a7980 (as "
        "`pjrtctl put --keep` prints)",
        what, text));
  }
  return value;
}

std::string Hex(uint64_t value) { return absl::StrFormat("%#018x", value); }

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read %s: %s", path, std::strerror(errno)));
  }
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

json ShapeJson(const pjrt_client::ArrayShape& shape) {
  return {{"dtype", pjrt_client::DTypeName(shape.dtype)},
          {"dims", shape.dims},
          {"shape", pjrt_client::ShapeToString(shape)}};
}

std::string Seconds(double seconds) {
  return absl::FormatDuration(
      absl::Trunc(absl::Seconds(seconds), absl::Microseconds(1)));
}

std::string Yes(bool b) { return b ? "yes" : "no"; }

CLI::Validator WholeNumber(int64_t min, int64_t max) {
  const bool unbounded = max == std::numeric_limits<int64_t>::max();
  const std::string range = unbounded
                                ? absl::StrFormat("of %d or more", min)
                                : absl::StrFormat("from %d to %d", min, max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        int64_t v = 0;
        if (!absl::SimpleAtoi(text, &v) || v < min || v > max) {
          return absl::StrFormat("'%s' is not a whole number %s", text, range);
        }
        return "";
      },
      unbounded ? absl::StrFormat("INT >= %d", min)
                : absl::StrFormat("INT in [%d - %d]", min, max));
}

namespace {

CLI::Validator NumberCheck(double min, bool min_included, double max,
                           const std::string& range,
                           const std::string& description) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        // NaN fails both comparisons.
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) ||
            !(min_included ? v >= min : v > min) || !(v <= max)) {
          return absl::StrFormat("'%s' is not a number %s", text, range);
        }
        return "";
      },
      description);
}

}  // namespace

CLI::Validator PositiveNumber() {
  return NumberCheck(0, false, std::numeric_limits<double>::max(), "above 0",
                     "NUMBER > 0");
}

CLI::Validator NonNegativeNumber() {
  return NumberCheck(0, true, std::numeric_limits<double>::max(),
                     "of 0 or more", "NUMBER >= 0");
}

CLI::Validator NumberFromTo(double min, double max) {
  return NumberCheck(min, true, max, absl::StrFormat("from %g to %g", min, max),
                     absl::StrFormat("NUMBER in [%g - %g]", min, max));
}

}  // namespace pjrt::cli
