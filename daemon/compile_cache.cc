#include "daemon/compile_cache.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pjrt::daemon {

std::string CompileCacheKey(absl::string_view program_text,
                            absl::string_view options_bytes,
                            absl::string_view backend_fingerprint) {
  return absl::StrCat(backend_fingerprint.size(), ":", backend_fingerprint,
                      options_bytes.size(), ":", options_bytes, program_text);
}

std::string Fingerprint(absl::string_view key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // EVP_Digest fails only on allocation failure; an empty fingerprint then
  // shows in messages but never affects correctness (the cache is keyed by
  // the full text).
  if (EVP_Digest(key.data(), key.size(), digest, &size, EVP_sha256(),
                 nullptr) != 1) {
    return std::string();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), size));
}

}  // namespace pjrt::daemon
