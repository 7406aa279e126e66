#include "base/token.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/random.h"

namespace pjrt {
namespace {

std::string RandomHex(int words) {
  std::string raw;
  for (int i = 0; i < words; ++i) {
    uint64_t value = SecureRandomId();
    raw.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  return absl::BytesToHexString(raw);
}

}  // namespace

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

NewToken MakeToken() {
  NewToken result;
  result.token = RandomHex(4);
  std::string salt = RandomHex(1);
  result.token_sha256 =
      absl::StrCat(salt, "$", Sha256Hex(absl::StrCat(salt, result.token)));
  return result;
}

bool TokenMatches(absl::string_view token, absl::string_view stored) {
  absl::string_view salt;
  absl::string_view digest = stored;
  if (size_t dollar = stored.find('$'); dollar != absl::string_view::npos) {
    salt = stored.substr(0, dollar);
    digest = stored.substr(dollar + 1);
  }
  std::string computed = Sha256Hex(absl::StrCat(salt, token));
  return computed.size() == digest.size() &&
         CRYPTO_memcmp(computed.data(), digest.data(), digest.size()) == 0;
}

}  // namespace pjrt
