// Parsing of byte sizes written by people: "1048576", "512MiB", "16 GiB",
// "2G" (G, M, K and their -iB forms are all powers of 1024; "GB", "MB", "KB"
// are powers of 1000).
#ifndef PJRT_BASE_BYTE_SIZE_H_
#define PJRT_BASE_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pjrt {

// INVALID_ARGUMENT naming the text if it is not a non-negative size that fits
// in int64.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// "512 B", "1.5 MiB", "16 GiB": four significant digits, powers of 1024.
std::string FormatByteSize(int64_t bytes);

}  // namespace pjrt

#endif  // PJRT_BASE_BYTE_SIZE_H_
