// Bearer tokens of the daemon's tenants: made by `pjrtctl token new`,
// kept in the tenants file only as a salted SHA-256 (docs/security.md).
#ifndef PJRT_BASE_TOKEN_H_
#define PJRT_BASE_TOKEN_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pjrt {

// The lowercase hex SHA-256 of `text`.
std::string Sha256Hex(absl::string_view text);

struct NewToken {
  // 32 random bytes, hex.
  std::string token;
  // "SALT$HEX": HEX is the SHA-256 of SALT followed by the token.
  std::string token_sha256;
};

// A fresh token from the kernel's CSPRNG, with its salted hash.
NewToken MakeToken();

// Whether `token` matches `stored`: a hex SHA-256 of the token, or
// "SALT$HEX" as MakeToken writes. Compares in constant time.
bool TokenMatches(absl::string_view token, absl::string_view stored);

}  // namespace pjrt

#endif  // PJRT_BASE_TOKEN_H_
