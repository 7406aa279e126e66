// DiskCache: compiled artifacts (cubins) kept in a folder across daemon
// restarts, keyed by everything that decides their bytes.
//
// Each entry is one file, named by the SHA-256 of its key, holding the full
// key, the payload's size and its SHA-256, then the payload. Get trusts an
// entry only when all of these agree: a corrupt, truncated or foreign file
// is ignored (and the next Put rewrites it). Put writes a temporary file and
// renames it, so a reader never sees half an entry, and several daemons may
// share one folder.
//
// Thread-safe.
#ifndef PJRT_COMPILER_DISK_CACHE_H_
#define PJRT_COMPILER_DISK_CACHE_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pjrt::compiler {

class DiskCache {
 public:
  // An empty `dir` disables the cache (Get finds nothing, Put does nothing).
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }

  // The payload stored under `key`, if a valid entry holds it.
  std::optional<std::string> Get(absl::string_view key) const;

  // Stores `payload` under `key`, creating the folder if needed. An error
  // (a read-only folder, a full disk) leaves the cache as it was; callers
  // log it and go on without the cache.
  absl::Status Put(absl::string_view key, absl::string_view payload) const;

  // The file an entry for `key` lives in.
  std::string PathFor(absl::string_view key) const;

  // Lower-case hex SHA-256.
  static std::string Sha256Hex(absl::string_view data);

 private:
  const std::string dir_;
};

}  // namespace pjrt::compiler

#endif  // PJRT_COMPILER_DISK_CACHE_H_
