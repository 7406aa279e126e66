#include "daemon/session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "base/text.h"

namespace pjrt::daemon {

Session::Session(uint64_t id, uint64_t public_id, std::string client_name,
                 std::string peer, absl::Duration lease, absl::Time now,
                 SessionLimits limits,
                 std::shared_ptr<const Cancellation> parent_cancellation,
                 std::shared_ptr<TenantAccount> account)
    : id_(id),
      public_id_(public_id),
      client_name_(std::move(client_name)),
      peer_(std::move(peer)),
      lease_(lease),
      created_(now),
      limits_(limits),
      cancellation_(
          std::make_shared<Cancellation>(std::move(parent_cancellation))),
      account_(std::move(account)),
      last_renewal_(now) {}

std::string Session::DebugString() const {
  if (client_name_.empty()) return absl::StrFormat("session %d", public_id_);
  return absl::StrFormat("session %d (%s)", public_id_,
                         EscapeForLog(client_name_, 64));
}

void Session::WaitingCall::Release() {
  if (session_ == nullptr) return;
  pjrt::MutexLock lock(&session_->mu_);
  session_->waiting_calls_--;
  session_ = nullptr;
}

absl::StatusOr<Session::WaitingCall> Session::StartWaitingCall() {
  pjrt::MutexLock lock(&mu_);
  if (waiting_calls_ >= limits_.max_waiting_calls) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s already has %d calls waiting for inputs whose contents have not "
        "arrived (cross-host receives) or that another call is donating, "
        "the most a session may (max_waiting_calls_per_session); wait for "
        "them to finish",
        DebugString(), limits_.max_waiting_calls));
  }
  waiting_calls_++;
  return WaitingCall(this);
}

absl::Status Session::CheckRoom(int64_t more) const {
  pjrt::MutexLock lock(&mu_);
  return CheckRoomLocked(more);
}

absl::Status Session::CheckRoomLocked(int64_t more) const {
  if (handle_count() + more > limits_.max_handles) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s holds %d handles (buffers, executables, regions, and one per "
        "element of each tuple); %d more would exceed the %d a session may "
        "hold (max_handles_per_session); delete some first",
        DebugString(), handle_count(), more, limits_.max_handles));
  }
  return absl::OkStatus();
}

int64_t Session::NewHandlesFor(const runtime::Buffer& buffer) const {
  if (handles_.contains(&buffer)) return 0;
  int64_t count = 1;
  if (buffer.is_tuple()) {
    // A tuple's elements count once more each: a tuple of a thousand
    // copies of one buffer costs the daemon a thousand entries.
    count += static_cast<int64_t>(buffer.tuple_elements().size());
    for (const auto& element : buffer.tuple_elements()) {
      count += NewHandlesFor(*element);
    }
  }
  return count;
}

absl::StatusOr<uint64_t> Session::AddBuffer(
    std::shared_ptr<runtime::Buffer> buffer) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s was closed while the buffer was being created", DebugString()));
  }
  PJRT_RETURN_IF_ERROR(CheckRoomLocked(NewHandlesFor(*buffer)));
  std::vector<const runtime::Buffer*> added;
  CollectNewBuffersLocked(*buffer, &added);
  PJRT_RETURN_IF_ERROR(ChargeLocked(added));
  return AddBufferLocked(std::move(buffer));
}

void Session::CollectNewBuffersLocked(
    const runtime::Buffer& buffer,
    std::vector<const runtime::Buffer*>* out) const {
  if (handles_.contains(&buffer)) return;
  for (const runtime::Buffer* seen : *out) {
    if (seen == &buffer) return;
  }
  out->push_back(&buffer);
  if (buffer.is_tuple()) {
    for (const auto& element : buffer.tuple_elements()) {
      CollectNewBuffersLocked(*element, out);
    }
  }
}

namespace {

// Where a buffer's bytes count: its device's local index, or -1 for a
// tuple (whose elements count instead).
int ChargedDevice(const runtime::Buffer& buffer) {
  return buffer.is_tuple() ? -1 : buffer.device()->local_hardware_id();
}

int64_t ChargedBytes(const runtime::Buffer& buffer) {
  return buffer.is_tuple() ? 0 : buffer.size_bytes();
}

}  // namespace

absl::Status Session::ChargeLocked(
    absl::Span<const runtime::Buffer* const> buffers) {
  if (account_ == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < buffers.size(); ++i) {
    absl::Status status = account_->TakeBuffers(1, ChargedDevice(*buffers[i]),
                                                ChargedBytes(*buffers[i]));
    if (!status.ok()) {
      for (size_t j = 0; j < i; ++j) Refund(*buffers[j]);
      Audit("quota_refused", {{"tenant", account_->name()},
                              {"session", absl::StrCat(public_id_)},
                              {"reason", std::string(status.message())}});
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<void>> Session::HoldDeviceMemory(int device,
                                                                int64_t bytes) {
  if (account_ == nullptr || bytes <= 0) return nullptr;
  absl::Status status = account_->TakeBuffers(0, device, bytes);
  if (!status.ok()) {
    Audit("quota_refused", {{"tenant", account_->name()},
                            {"session", absl::StrCat(public_id_)},
                            {"reason", std::string(status.message())}});
    return status;
  }
  std::shared_ptr<TenantAccount> account = account_;
  return std::shared_ptr<void>(nullptr, [account, device, bytes](void*) {
    account->GiveBuffers(0, device, bytes);
  });
}

void Session::Refund(const runtime::Buffer& buffer) {
  if (account_ == nullptr) return;
  account_->GiveBuffers(1, ChargedDevice(buffer), ChargedBytes(buffer));
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
  bytes_ += buffer->size_bytes();
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  if (buffer->is_tuple()) {
    tuple_elements_ += static_cast<int64_t>(buffer->tuple_elements().size());
  }
  buffers_.Insert(handle, std::move(buffer));
  return handle;
}

absl::Status Session::CheckNewHandles(
    absl::Span<const uint64_t> handles) const {
  pjrt::MutexLock lock(&mu_);
  return CheckNewHandlesLocked(handles);
}

absl::Status Session::CheckNewHandlesLocked(
    absl::Span<const uint64_t> handles) const {
  for (size_t i = 0; i < handles.size(); ++i) {
    uint64_t handle = handles[i];
    if (handle == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "result handle %d is 0; result handles must be nonzero", i));
    }
    if (HandleInUse(handle)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "result handle %d (%#x) is already in use in this session; draw "
          "result handles at random",
          i, handle));
    }
    for (size_t j = 0; j < i; ++j) {
      if (handles[j] == handle) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "result handles %d and %d are both %#x; each result needs its "
            "own",
            j, i, handle));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Session::AddBuffersWithHandles(
    absl::Span<const uint64_t> handles,
    absl::Span<const std::shared_ptr<runtime::Buffer>> buffers) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s was closed while the results were being created", DebugString()));
  }
  if (handles.size() != buffers.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d result handles given for %d results",
                        handles.size(), buffers.size()));
  }
  for (const auto& buffer : buffers) {
    if (buffer->is_tuple()) {
      return absl::InvalidArgumentError(
          "client-chosen result handles cannot name a tuple result; run "
          "without keep_tuple_result");
    }
  }
  PJRT_RETURN_IF_ERROR(CheckNewHandlesLocked(handles));
  PJRT_RETURN_IF_ERROR(CheckRoomLocked(static_cast<int64_t>(handles.size())));
  std::vector<const runtime::Buffer*> added;
  for (const auto& buffer : buffers) added.push_back(buffer.get());
  PJRT_RETURN_IF_ERROR(ChargeLocked(added));
  for (size_t i = 0; i < handles.size(); ++i) {
    handles_.emplace(buffers[i].get(), handles[i]);
    bytes_ += buffers[i]->size_bytes();
    buffers_.Insert(handles[i], buffers[i]);
  }
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  return absl::OkStatus();
}

uint64_t Session::HandleOf(const runtime::Buffer* buffer) const {
  pjrt::MutexLock lock(&mu_);
  auto it = handles_.find(buffer);
  return it == handles_.end() ? 0 : it->second;
}

void Session::EraseBufferLocked(
    uint64_t handle, std::vector<std::shared_ptr<runtime::Buffer>>* doomed) {
  std::shared_ptr<runtime::Buffer> buffer = buffers_.Take(handle);
  if (buffer == nullptr) return;  // listed twice, or an element of one
  handles_.erase(buffer.get());
  Refund(*buffer);
  bytes_ -= buffer->size_bytes();
  if (buffer->is_tuple()) {
    tuple_elements_ -= static_cast<int64_t>(buffer->tuple_elements().size());
  }
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
  } while (handle == 0 || HandleInUse(handle));
  return handle;
}

bool Session::HandleInUse(uint64_t handle) const {
  return buffers_.contains(handle) || executables_.contains(handle) ||
         regions_.contains(handle) || channels_.contains(handle) ||
         remote_buffers_.contains(handle);
}

absl::StatusOr<uint64_t> Session::AddRegion(std::shared_ptr<Region> region) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is closed", DebugString()));
  }
  if (regions_.size() >= limits_.max_regions) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s already holds %d regions, the most a session may "
                        "(max_regions_per_session); unregister one first",
                        DebugString(), regions_.size()));
  }
  if (limits_.max_region_bytes > 0 &&
      region->size() > limits_.max_region_bytes - region_bytes_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s holds regions of %d bytes; %d more would exceed the %d bytes a "
        "session may register (max_region_bytes_per_session)",
        DebugString(), region_bytes_, region->size(),
        limits_.max_region_bytes));
  }
  PJRT_RETURN_IF_ERROR(CheckRoomLocked(1));
  uint64_t handle = NewHandle();
  region_bytes_ += region->size();
  regions_.Insert(handle, std::move(region));
  return handle;
}

absl::StatusOr<std::shared_ptr<Region>> Session::LookupRegion(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  return regions_.Lookup(handle);
}

absl::Status Session::UnregisterRegion(uint64_t handle) {
  std::shared_ptr<Region> region;
  {
    pjrt::MutexLock lock(&mu_);
    Region* found = regions_.Find(handle);
    if (found == nullptr) return regions_.NotFound(handle);
    int64_t uses = found->uses();
    if (uses > 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "region %#x is in use by %d transfer(s) or zero-copy buffer(s); "
          "wait for the transfers and delete those buffers first",
          handle, uses));
    }
    region = regions_.Take(handle);
    region_bytes_ -= region->size();
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Session::AddDataChannel(
    std::shared_ptr<DataChannel> channel) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is closed", DebugString()));
  }
  channels_.EraseIf(
      [](DataChannel& channel) { return channel.EndIfAbandoned(); });
  if (channels_.size() >= limits_.max_data_channels) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s already has %d data channels, the most a session may "
        "(max_data_channels_per_session)",
        DebugString(), channels_.size()));
  }
  uint64_t handle = NewHandle();
  channels_.Insert(handle, std::move(channel));
  return handle;
}

absl::StatusOr<std::shared_ptr<DataChannel>> Session::LookupDataChannel(
    uint64_t handle) {
  pjrt::MutexLock lock(&mu_);
  DataChannel* channel = channels_.Find(handle);
  if (channel != nullptr && channel->ended()) channels_.Take(handle);
  return channels_.Lookup(handle);
}

std::vector<std::pair<uint64_t, std::shared_ptr<Region>>> Session::Regions()
    const {
  pjrt::MutexLock lock(&mu_);
  return {regions_.begin(), regions_.end()};
}

int Session::region_count() const {
  pjrt::MutexLock lock(&mu_);
  return static_cast<int>(regions_.size());
}

absl::StatusOr<std::shared_ptr<runtime::Buffer>> Session::LookupBuffer(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  if (!buffers_.contains(handle)) {
    if (auto remote = remote_buffers_.find(handle);
        remote != remote_buffers_.end()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "buffer %#x lives on a device of task %d; this call takes buffers "
          "of this task's devices only (read it back, or run programs on it "
          "with ExecuteReplicated)",
          handle, remote->second));
    }
  }
  return buffers_.Lookup(handle);
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

int Session::Release(absl::Span<const uint64_t> buffers,
                     absl::Span<const uint64_t> executables) {
  if (buffers.empty() && executables.empty()) return 0;
  std::vector<std::shared_ptr<runtime::Buffer>> doomed;
  std::vector<std::shared_ptr<runtime::Executable>> dropped;
  int released = 0;
  {
    pjrt::MutexLock lock(&mu_);
    for (uint64_t handle : buffers) {
      if (auto remote = remote_buffers_.find(handle);
          remote != remote_buffers_.end()) {
        remote_releases_.buffers[remote->second].push_back(handle);
        remote_buffers_.erase(remote);
        ++released;
        continue;
      }
      if (!buffers_.contains(handle)) continue;
      EraseBufferLocked(handle, &doomed);
      ++released;
    }
    for (uint64_t handle : executables) {
      if (!executables_.contains(handle)) continue;
      ReleaseRemotePartsLocked(handle);
      dropped.push_back(executables_.Take(handle));
      if (account_ != nullptr) account_->GiveExecutables(1);
      ++released;
    }
  }
  // The last references may go here: outside the lock.
  for (auto& buffer : doomed) buffer->Delete();
  return released;
}

absl::StatusOr<uint64_t> Session::AddExecutable(
    std::shared_ptr<runtime::Executable> executable) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s was closed while the program was being compiled", DebugString()));
  }
  PJRT_RETURN_IF_ERROR(CheckRoomLocked(1));
  if (account_ != nullptr) {
    absl::Status status = account_->TakeExecutables(1);
    if (!status.ok()) {
      Audit("quota_refused", {{"tenant", account_->name()},
                              {"session", absl::StrCat(public_id_)},
                              {"reason", std::string(status.message())}});
      return status;
    }
  }
  uint64_t handle = NewHandle();
  executables_.Insert(handle, std::move(executable));
  return handle;
}

absl::StatusOr<std::shared_ptr<runtime::Executable>> Session::LookupExecutable(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  return executables_.Lookup(handle);
}

absl::Status Session::DeleteExecutable(uint64_t handle) {
  std::shared_ptr<runtime::Executable> doomed;
  {
    pjrt::MutexLock lock(&mu_);
    if (!executables_.contains(handle)) return executables_.NotFound(handle);
    ReleaseRemotePartsLocked(handle);
    doomed = executables_.Take(handle);
    if (account_ != nullptr) account_->GiveExecutables(1);
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
  // First stop what runs and waits for the session: a waiting call holds
  // its arguments, which the deletes below would otherwise wait for.
  cancellation_->Cancel(
      why.ok() ? absl::CancelledError(
                     absl::StrFormat("%s was closed", DebugString()))
               : absl::Status(why.code(),
                              absl::StrFormat("%s was closed: %s",
                                              DebugString(), why.message())));
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  std::vector<std::shared_ptr<runtime::Executable>> executables;
  std::vector<std::shared_ptr<Region>> regions;
  {
    pjrt::MutexLock lock(&mu_);
    if (!closed_ && account_ != nullptr) {
      for (const auto& [handle, buffer] : buffers_) Refund(*buffer);
      account_->GiveExecutables(executables_.size());
      account_->GiveSession();
    }
    closed_ = true;
    buffers = buffers_.TakeAll();
    handles_.clear();
    bytes_ = 0;
    region_bytes_ = 0;
    tuple_elements_ = 0;
    executables = executables_.TakeAll();
    regions = regions_.TakeAll();
    // The proxies end with the session, and with them what they hold;
    // proxies_ stays, for ProxySessions to close them.
    remote_buffers_.clear();
    remote_parts_.clear();
    remote_releases_ = {};
    for (auto& channel : channels_.TakeAll()) channel->End();
    if (attachment_ != nullptr) {
      attachment_->Detach(why);
      attachment_ = nullptr;
    }
  }
  SessionCloseStats stats;
  stats.executables_freed = static_cast<int64_t>(executables.size());
  stats.regions_freed = static_cast<int64_t>(regions.size());
  // Arrays first: a tuple's Delete deletes its elements, which must be
  // counted before.
  for (auto& buffer : buffers) {
    if (buffer->is_tuple()) continue;
    if (!buffer->IsDeleted()) {
      stats.buffers_freed++;
      stats.bytes_freed += buffer->size_bytes();
    }
    buffer->Delete();
  }
  for (auto& buffer : buffers) {
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
  summary.tenant = tenant_name();
  summary.account = account_.get();
  summary.attached = attachment_ != nullptr;
  summary.buffer_count = buffers_.size();
  summary.executable_count = executables_.size();
  summary.bytes = bytes_;
  summary.peak_bytes = peak_bytes_;
  summary.usage = usage_;
  summary.age = now - created_;
  summary.lease_remaining =
      summary.attached
          ? absl::ZeroDuration()
          : std::max(absl::ZeroDuration(), last_renewal_ + lease_ - now);
  return summary;
}

int64_t Session::buffer_count() const {
  pjrt::MutexLock lock(&mu_);
  return buffers_.size();
}

int64_t Session::executable_count() const {
  pjrt::MutexLock lock(&mu_);
  return executables_.size();
}

bool Session::closed() const {
  pjrt::MutexLock lock(&mu_);
  return closed_;
}

std::optional<Session::Proxy> Session::ProxyOn(int task) const {
  pjrt::MutexLock lock(&mu_);
  auto it = proxies_.find(task);
  if (it == proxies_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<Session::Proxy> Session::SetProxy(int task, Proxy proxy) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is closed", DebugString()));
  }
  return proxies_.try_emplace(task, proxy).first->second;
}

bool Session::ForgetProxy(int task, uint64_t proxy_id) {
  pjrt::MutexLock lock(&mu_);
  auto it = proxies_.find(task);
  if (it == proxies_.end() || it->second.id != proxy_id) return false;
  proxies_.erase(it);
  absl::erase_if(remote_buffers_,
                 [task](const auto& entry) { return entry.second == task; });
  for (auto& [handle, parts] : remote_parts_) parts.erase(task);
  remote_releases_.buffers.erase(task);
  remote_releases_.executables.erase(task);
  return true;
}

absl::flat_hash_map<int, uint64_t> Session::Proxies() const {
  pjrt::MutexLock lock(&mu_);
  absl::flat_hash_map<int, uint64_t> ids;
  for (const auto& [task, proxy] : proxies_) ids[task] = proxy.id;
  return ids;
}

void Session::RequeueRemoteReleases(int task, std::vector<uint64_t> buffers,
                                    std::vector<uint64_t> executables) {
  pjrt::MutexLock lock(&mu_);
  if (closed_ || !proxies_.contains(task)) return;
  auto& b = remote_releases_.buffers[task];
  b.insert(b.end(), buffers.begin(), buffers.end());
  auto& e = remote_releases_.executables[task];
  e.insert(e.end(), executables.begin(), executables.end());
  if (b.empty()) remote_releases_.buffers.erase(task);
  if (e.empty()) remote_releases_.executables.erase(task);
}

absl::Status Session::AddRemoteBuffers(int task,
                                       absl::Span<const uint64_t> handles) {
  pjrt::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is closed", DebugString()));
  }
  PJRT_RETURN_IF_ERROR(CheckRoomLocked(static_cast<int64_t>(handles.size())));
  for (uint64_t handle : handles) {
    // Task `task` drew the handle at random in its proxy; one that this
    // session uses already (odds of 2^-64 per pair) cannot name both.
    if (HandleInUse(handle)) {
      return absl::InternalError(absl::StrFormat(
          "task %d chose buffer handle %#x, which this session already uses",
          task, handle));
    }
  }
  for (uint64_t handle : handles) remote_buffers_.emplace(handle, task);
  return absl::OkStatus();
}

int Session::RemoteBufferTask(uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  auto it = remote_buffers_.find(handle);
  return it == remote_buffers_.end() ? -1 : it->second;
}

absl::flat_hash_map<int, std::vector<uint64_t>> Session::ForgetRemoteBuffers(
    absl::Span<const uint64_t> handles) {
  absl::flat_hash_map<int, std::vector<uint64_t>> by_task;
  pjrt::MutexLock lock(&mu_);
  for (uint64_t handle : handles) {
    auto it = remote_buffers_.find(handle);
    if (it == remote_buffers_.end()) continue;
    by_task[it->second].push_back(handle);
    remote_buffers_.erase(it);
  }
  return by_task;
}

void Session::SetRemoteParts(uint64_t handle,
                             absl::flat_hash_map<int, uint64_t> parts) {
  pjrt::MutexLock lock(&mu_);
  if (closed_ || !executables_.contains(handle)) return;
  remote_parts_[handle] = std::move(parts);
}

std::optional<absl::flat_hash_map<int, uint64_t>> Session::RemoteParts(
    uint64_t handle) const {
  pjrt::MutexLock lock(&mu_);
  auto it = remote_parts_.find(handle);
  if (it == remote_parts_.end()) return std::nullopt;
  return it->second;
}

void Session::ReleaseRemotePartsLocked(uint64_t handle) {
  auto it = remote_parts_.find(handle);
  if (it == remote_parts_.end()) return;
  for (const auto& [task, part] : it->second) {
    remote_releases_.executables[task].push_back(part);
  }
  remote_parts_.erase(it);
}

Session::RemoteReleases Session::TakeRemoteReleases() {
  pjrt::MutexLock lock(&mu_);
  return std::exchange(remote_releases_, {});
}

}  // namespace pjrt::daemon
