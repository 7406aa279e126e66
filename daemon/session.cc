#include "daemon/session.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/random.h"

namespace pjrt::daemon {

Session::Session(uint64_t id, uint64_t public_id, std::string client_name,
                 std::string peer, absl::Duration lease, absl::Time now)
    : id_(id),
      public_id_(public_id),
      client_name_(std::move(client_name)),
      peer_(std::move(peer)),
      lease_(lease),
      created_(now),
      last_renewal_(now) {}

std::string Session::DebugString() const {
  if (client_name_.empty()) return absl::StrFormat("session %d", public_id_);
  return absl::StrFormat("session %d (%s)", public_id_, client_name_);
}

absl::StatusOr<uint64_t> Session::AddBuffer(
    std::shared_ptr<runtime::Buffer> buffer) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s was closed while the buffer was being created",
                        DebugString()));
  }
  return AddBufferLocked(std::move(buffer));
}

uint64_t Session::AddBufferLocked(std::shared_ptr<runtime::Buffer> buffer) {
  if (auto it = handles_.find(buffer.get()); it != handles_.end()) {
    return it->second;
  }
  if (buffer->is_tuple()) {
    for (const auto& element : buffer->tuple_elements()) {
      AddBufferLocked(element);
    }
  }
  uint64_t handle = NewHandle();
  handles_.emplace(buffer.get(), handle);
  buffers_.emplace(handle, std::move(buffer));
  return handle;
}

uint64_t Session::HandleOf(const runtime::Buffer* buffer) const {
  pjrt::MutexLock lock(&mu_);
  auto it = handles_.find(buffer);
  return it == handles_.end() ? 0 : it->second;
}

void Session::EraseBufferLocked(
    uint64_t handle, std::vector<std::shared_ptr<runtime::Buffer>>* doomed) {
  auto it = buffers_.find(handle);
  if (it == buffers_.end()) return;  // listed twice, or an element of one
  std::shared_ptr<runtime::Buffer> buffer = std::move(it->second);
  buffers_.erase(it);
  handles_.erase(buffer.get());
  if (buffer->is_tuple()) {
    for (const auto& element : buffer->tuple_elements()) {
      if (auto e = handles_.find(element.get()); e != handles_.end()) {
        EraseBufferLocked(e->second, doomed);
      }
    }
  }
  doomed->push_back(std::move(buffer));
}

uint64_t Session::NewHandle() const {
  uint64_t handle;
  do {
    handle = SecureRandomId();
  } while (handle == 0 || buffers_.contains(handle) ||
           executables_.contains(handle));
  return handle;
}

absl::StatusOr<std::shared_ptr<runtime::Buffer>> Session::LookupBuffer(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  auto it = buffers_.find(handle);
  if (it == buffers_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "buffer handle %#x is not a buffer of this session (never created, "
        "already deleted, or owned by another session)",
        handle));
  }
  return it->second;
}

absl::Status Session::DeleteBuffers(absl::Span<const uint64_t> handles) {
  std::vector<std::shared_ptr<runtime::Buffer>> doomed;
  {
    pjrt::MutexLock lock(&mu_);
    for (uint64_t handle : handles) {
      if (!buffers_.contains(handle)) {
        return absl::NotFoundError(absl::StrFormat(
            "buffer handle %#x is not a buffer of this session; no buffer "
            "was deleted",
            handle));
      }
    }
    for (uint64_t handle : handles) EraseBufferLocked(handle, &doomed);
  }
  for (auto& buffer : doomed) buffer->Delete();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Session::AddExecutable(
    std::shared_ptr<runtime::Executable> executable) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s was closed while the program was being compiled", DebugString()));
  }
  uint64_t handle = NewHandle();
  executables_.emplace(handle, std::move(executable));
  return handle;
}

absl::StatusOr<std::shared_ptr<runtime::Executable>> Session::LookupExecutable(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  auto it = executables_.find(handle);
  if (it == executables_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "executable handle %#x is not an executable of this session (never "
        "compiled, already deleted, or owned by another session)",
        handle));
  }
  return it->second;
}

absl::Status Session::DeleteExecutable(uint64_t handle) {
  std::shared_ptr<runtime::Executable> doomed;
  {
    pjrt::MutexLock lock(&mu_);
    auto it = executables_.find(handle);
    if (it == executables_.end()) {
      return absl::NotFoundError(absl::StrFormat(
          "executable handle %#x is not an executable of this session (never "
          "compiled, already deleted, or owned by another session)",
          handle));
    }
    doomed = std::move(it->second);
    executables_.erase(it);
  }
  // `doomed` may be the last reference: destroy it outside the lock.
  return absl::OkStatus();
}

void Session::Touch(absl::Time now) {
  pjrt::MutexLock lock(&mu_);
  if (now > last_renewal_) last_renewal_ = now;
}

bool Session::Expired(absl::Time now) const {
  pjrt::MutexLock lock(&mu_);
  return attachment_ == nullptr && now - last_renewal_ > lease_;
}

absl::Status Session::Attach(SessionAttachment* attachment) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is closed", DebugString()));
  }
  if (attachment_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is already attached by another call; a session has at most one "
        "Attach stream",
        DebugString()));
  }
  attachment_ = attachment;
  return absl::OkStatus();
}

bool Session::ForgetAttachment(SessionAttachment* attachment) {
  pjrt::MutexLock lock(&mu_);
  if (attachment_ != attachment) return false;
  attachment_ = nullptr;
  return true;
}

void Session::Detach(const absl::Status& why) {
  pjrt::MutexLock lock(&mu_);
  if (attachment_ == nullptr) return;
  attachment_->Detach(why);
  attachment_ = nullptr;
}

SessionCloseStats Session::Close(const absl::Status& why) {
  absl::flat_hash_map<uint64_t, std::shared_ptr<runtime::Buffer>> buffers;
  absl::flat_hash_map<uint64_t, std::shared_ptr<runtime::Executable>>
      executables;
  {
    pjrt::MutexLock lock(&mu_);
    closed_ = true;
    buffers.swap(buffers_);
    handles_.clear();
    executables.swap(executables_);
    if (attachment_ != nullptr) {
      attachment_->Detach(why);
      attachment_ = nullptr;
    }
  }
  SessionCloseStats stats;
  stats.executables_freed = static_cast<int64_t>(executables.size());
  // Arrays first: a tuple's Delete deletes its elements, which must be
  // counted before.
  for (auto& [handle, buffer] : buffers) {
    if (buffer->is_tuple()) continue;
    if (!buffer->IsDeleted()) {
      stats.buffers_freed++;
      stats.bytes_freed += buffer->size_bytes();
    }
    buffer->Delete();
  }
  for (auto& [handle, buffer] : buffers) {
    if (buffer->is_tuple()) buffer->Delete();
  }
  return stats;
}

SessionSummary Session::Summarize(absl::Time now) const {
  pjrt::MutexLock lock(&mu_);
  SessionSummary summary;
  summary.public_id = public_id_;
  summary.client_name = client_name_;
  summary.peer = peer_;
  summary.attached = attachment_ != nullptr;
  summary.buffer_count = static_cast<int64_t>(buffers_.size());
  summary.executable_count = static_cast<int64_t>(executables_.size());
  for (const auto& [handle, buffer] : buffers_) {
    summary.bytes += buffer->size_bytes();
  }
  summary.age = now - created_;
  summary.lease_remaining =
      summary.attached ? absl::ZeroDuration()
                       : std::max(absl::ZeroDuration(),
                                  last_renewal_ + lease_ - now);
  return summary;
}

int64_t Session::buffer_count() const {
  pjrt::MutexLock lock(&mu_);
  return static_cast<int64_t>(buffers_.size());
}

int64_t Session::executable_count() const {
  pjrt::MutexLock lock(&mu_);
  return static_cast<int64_t>(executables_.size());
}

}  // namespace pjrt::daemon
