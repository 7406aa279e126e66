#include "compiler/disk_cache.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/random.h"

namespace pjrt::compiler {
namespace {

constexpr absl::string_view kMagic = "pjrtd compile cache 1\n";

std::string Sha256(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(),
                 nullptr) != 1) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(digest), size);
}

void AppendU64(std::string* out, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out->append(bytes, 8);
}

bool ReadU64(absl::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i)
    *v |= uint64_t{static_cast<unsigned char>((*in)[i])} << (8 * i);
  in->remove_prefix(8);
  return true;
}

}  // namespace

std::string DiskCache::Sha256Hex(absl::string_view data) {
  std::string hex;
  for (unsigned char c : Sha256(data)) absl::StrAppendFormat(&hex, "%02x", c);
  return hex;
}

std::string DiskCache::PathFor(absl::string_view key) const {
  return absl::StrCat(dir_, "/", Sha256Hex(key), ".bin");
}

std::optional<std::string> DiskCache::Get(absl::string_view key) const {
  if (!enabled()) return std::nullopt;
  std::ifstream file(PathFor(key), std::ios::binary);
  if (!file) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  absl::string_view in(bytes);
  if (!absl::ConsumePrefix(&in, kMagic)) return std::nullopt;
  uint64_t key_size = 0, payload_size = 0;
  if (!ReadU64(&in, &key_size) || key_size > in.size()) return std::nullopt;
  if (in.substr(0, key_size) != key)
    return std::nullopt;  // another key's entry
  in.remove_prefix(key_size);
  if (!ReadU64(&in, &payload_size)) return std::nullopt;
  const std::string digest = Sha256("");
  if (in.size() < digest.size()) return std::nullopt;
  const absl::string_view stored_digest = in.substr(0, digest.size());
  in.remove_prefix(digest.size());
  if (in.size() != payload_size) return std::nullopt;    // truncated or padded
  if (Sha256(in) != stored_digest) return std::nullopt;  // corrupt
  return std::string(in);
}

absl::Status DiskCache::Put(absl::string_view key,
                            absl::string_view payload) const {
  if (!enabled()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("cannot create the compile cache folder %s: %s", dir_,
                        error.message()));
  }
  std::string entry(kMagic);
  AppendU64(&entry, key.size());
  absl::StrAppend(&entry, key);
  AppendU64(&entry, payload.size());
  absl::StrAppend(&entry, Sha256(payload), payload);
  const std::string path = PathFor(key);
  const std::string temporary =
      absl::StrFormat("%s.%d.%016x.tmp", path, getpid(), SecureRandomId());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(entry.data(), static_cast<std::streamsize>(entry.size()));
    file.flush();
    if (!file) {
      std::filesystem::remove(temporary, error);
      return absl::UnavailableError(absl::StrFormat(
          "cannot write the compile cache entry %s (is the disk full or the "
          "folder read-only?)",
          temporary));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    return absl::UnavailableError(absl::StrFormat(
        "cannot rename %s to %s: %s", temporary, path, error.message()));
  }
  return absl::OkStatus();
}

}  // namespace pjrt::compiler
