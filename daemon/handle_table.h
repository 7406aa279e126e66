// HandleTable<T>: the objects of one kind that a session holds (buffers,
// executables, shared-memory regions, data channels), by handle.
//
// Not thread-safe: the session's lock guards its tables. The session draws
// the handles, unique across all of its tables; a table only holds them and
// says, in one form for every kind, that a handle names nothing:
//
//   buffer handle 0x1f... is not a buffer of this session (never created,
//   already deleted, or owned by another session)
#ifndef PJRT_DAEMON_HANDLE_TABLE_H_
#define PJRT_DAEMON_HANDLE_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/check.h"

namespace pjrt::daemon {

template <typename T>
class HandleTable {
 public:
  using Map = absl::flat_hash_map<uint64_t, std::shared_ptr<T>>;

  // Messages call a handle "`kind` handle" and say it is not `a_kind` of
  // this session, for one of `reasons`: ("buffer", "a buffer", "never
  // created, already deleted, or owned by another session").
  HandleTable(absl::string_view kind, absl::string_view a_kind,
              absl::string_view reasons)
      : kind_(kind), a_kind_(a_kind), reasons_(reasons) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  bool contains(uint64_t handle) const { return map_.contains(handle); }
  int64_t size() const { return static_cast<int64_t>(map_.size()); }
  bool empty() const { return map_.empty(); }
  typename Map::const_iterator begin() const { return map_.begin(); }
  typename Map::const_iterator end() const { return map_.end(); }

  // REQUIRES: `handle` is nonzero and names nothing in this table.
  void Insert(uint64_t handle, std::shared_ptr<T> value) {
    PJRT_DCHECK(handle != 0 && !map_.contains(handle))
        << kind_ << " handle " << handle;
    map_.emplace(handle, std::move(value));
  }

  // The object `handle` names, or NotFound(handle).
  absl::StatusOr<std::shared_ptr<T>> Lookup(uint64_t handle) const {
    auto it = map_.find(handle);
    if (it == map_.end()) return NotFound(handle);
    return it->second;
  }

  // The object, or null; for callers that hold the lock for more.
  T* Find(uint64_t handle) const {
    auto it = map_.find(handle);
    return it == map_.end() ? nullptr : it->second.get();
  }

  // Removes and returns the object `handle` names; null if none.
  std::shared_ptr<T> Take(uint64_t handle) {
    auto it = map_.find(handle);
    if (it == map_.end()) return nullptr;
    std::shared_ptr<T> value = std::move(it->second);
    map_.erase(it);
    return value;
  }

  // Removes the objects for which `pred(object)` holds.
  template <typename Predicate>
  void EraseIf(Predicate pred) {
    absl::erase_if(map_,
                   [&](const auto& entry) { return pred(*entry.second); });
  }

  // Every object, removed from the table.
  std::vector<std::shared_ptr<T>> TakeAll() {
    std::vector<std::shared_ptr<T>> all;
    all.reserve(map_.size());
    for (auto& [handle, value] : map_) all.push_back(std::move(value));
    map_.clear();
    return all;
  }

  // NOT_FOUND: `handle` names no object of this table.
  absl::Status NotFound(uint64_t handle) const {
    return absl::NotFoundError(
        absl::StrFormat("%s handle %#x is not %s of this session (%s)", kind_,
                        handle, a_kind_, reasons_));
  }

 private:
  const std::string kind_;
  const std::string a_kind_;
  const std::string reasons_;
  Map map_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_HANDLE_TABLE_H_
