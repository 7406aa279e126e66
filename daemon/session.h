// Session: the owner of a client's buffers and executables, and its lease.
//
// Every buffer and executable a client creates is registered in exactly one
// session under an unguessable handle; closing the session drops them all.
// Handles are only meaningful within their session: a handle of another
// session is "not found", exactly like one that never existed. Buffer and
// executable handles are drawn from one space, so a handle names one thing.
//
// Thread-safe.
#ifndef PJRT_DAEMON_SESSION_H_
#define PJRT_DAEMON_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/cancellation.h"
#include "base/check.h"
#include "base/mutex.h"
#include "daemon/data_channel.h"
#include "daemon/handle_table.h"
#include "daemon/shared_memory.h"
#include "daemon/tenants.h"
#include "daemon/usage.h"
#include "runtime/buffer.h"
#include "runtime/executable.h"

namespace pjrt::daemon {

// Something that keeps a session alive while it exists (the Attach stream).
// The session calls Detach at most once, with its mutex held, when the
// session closes; the implementation must not block or call back into the
// session.
class SessionAttachment {
 public:
  virtual ~SessionAttachment() = default;
  virtual void Detach(const absl::Status& why) = 0;
};

struct SessionCloseStats {
  int64_t buffers_freed = 0;
  int64_t bytes_freed = 0;
  int64_t executables_freed = 0;
  int64_t regions_freed = 0;
};

struct SessionSummary {
  uint64_t public_id = 0;
  std::string client_name;
  std::string peer;
  // The owning tenant, by name and account (null: anonymous).
  std::string tenant;
  const TenantAccount* account = nullptr;
  bool attached = false;
  int64_t buffer_count = 0;
  int64_t bytes = 0;
  // The most bytes it held at once.
  int64_t peak_bytes = 0;
  int64_t executable_count = 0;
  // What it used (device time, runs, bytes moved).
  std::shared_ptr<const SessionUsage> usage;
  absl::Duration age;
  // Zero while attached.
  absl::Duration lease_remaining;
};

// What one session may hold (see DaemonLimits).
struct SessionLimits {
  int64_t max_handles = int64_t{1} << 20;
  int max_waiting_calls = 64;
  int max_regions = 256;
  // 0: no limit.
  int64_t max_region_bytes = 0;
  int max_data_channels = 8;
};

class Session {
 public:
  // `parent_cancellation` (may be null): cancelling it cancels the
  // session's runs and waits too (the daemon's, at shutdown).
  Session(uint64_t id, uint64_t public_id, std::string client_name,
          std::string peer, absl::Duration lease, absl::Time now,
          SessionLimits limits = {},
          std::shared_ptr<const Cancellation> parent_cancellation = nullptr,
          std::shared_ptr<TenantAccount> account = nullptr);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }
  uint64_t public_id() const { return public_id_; }
  // The tenant that opened the session (null: the anonymous tenant). Its
  // quotas count what the session holds.
  const std::shared_ptr<TenantAccount>& account() const { return account_; }
  std::string tenant_name() const {
    return account_ == nullptr ? std::string("anonymous") : account_->name();
  }
  const std::string& client_name() const { return client_name_; }
  absl::Duration lease() const { return lease_; }

  // What the session uses: its runs report to it (see runtime::RunObserver),
  // the transfer paths tell it the bytes they move.
  const std::shared_ptr<SessionUsage>& usage() const { return usage_; }
  // REQUIRES: called once, before the session is shared
  // (SessionTable::Open sets it).
  void SetUsage(std::shared_ptr<SessionUsage> usage) {
    PJRT_DCHECK(!usage_set_) << "usage set twice";
    usage_set_ = true;
    usage_ = std::move(usage);
  }

  // "session 7 (train.py)", for logs and messages; never shows the id. The
  // client's name is escaped and cut short (it is client text).
  std::string DebugString() const;

  // Cancelled when the session closes (with the reason): the session's
  // executions stop and its calls' waits end.
  const std::shared_ptr<Cancellation>& cancellation() const {
    return cancellation_;
  }

  // A call that may wait for inputs not defined yet (see
  // SessionLimits::max_waiting_calls) holds one of these while it waits.
  class WaitingCall {
   public:
    WaitingCall() = default;
    explicit WaitingCall(Session* session) : session_(session) {}
    WaitingCall(WaitingCall&& other) noexcept
        : session_(std::exchange(other.session_, nullptr)) {}
    WaitingCall& operator=(WaitingCall&& other) noexcept {
      if (this != &other) {
        Release();
        session_ = std::exchange(other.session_, nullptr);
      }
      return *this;
    }
    WaitingCall(const WaitingCall&) = delete;
    WaitingCall& operator=(const WaitingCall&) = delete;
    ~WaitingCall() { Release(); }

   private:
    void Release();
    Session* session_ = nullptr;
  };
  // RESOURCE_EXHAUSTED naming the limit when max_waiting_calls calls of the
  // session already wait.
  absl::StatusOr<WaitingCall> StartWaitingCall();

  // Registers `buffer` and returns its new handle. A tuple's elements that
  // are not registered yet get handles too (ElementHandle finds them).
  // FAILED_PRECONDITION if the session has closed meanwhile (the caller then
  // drops the buffer); RESOURCE_EXHAUSTED if the session would hold more
  // than max_handles handles. Every Add* below checks the same limit.
  absl::StatusOr<uint64_t> AddBuffer(std::shared_ptr<runtime::Buffer> buffer);

  // RESOURCE_EXHAUSTED unless `more` new handles fit under the session's
  // limit now.
  absl::Status CheckRoom(int64_t more) const;

  // Counts `bytes` on `device` (a local hardware id) against the tenant's
  // device-memory quota, for memory no handle counts yet (an upload in
  // flight, a run's scratch), until the returned hold is dropped (from any
  // thread, after the session too). RESOURCE_EXHAUSTED as a buffer's
  // charge would be; null without tenants.
  absl::StatusOr<std::shared_ptr<void>> HoldDeviceMemory(int device,
                                                         int64_t bytes);

  // OK when `handles` could name new buffers: INVALID_ARGUMENT naming the
  // handle when one is zero, given twice, or already in use in the session.
  absl::Status CheckNewHandles(absl::Span<const uint64_t> handles) const;

  // Registers the results of one run under handles the client chose (one
  // per buffer), after the checks of CheckNewHandles (on failure none is
  // registered); FAILED_PRECONDITION if the session has closed.
  absl::Status AddBuffersWithHandles(
      absl::Span<const uint64_t> handles,
      absl::Span<const std::shared_ptr<runtime::Buffer>> buffers);

  // The handle of a registered buffer (an element of a registered tuple), or
  // 0 if it has none.
  uint64_t HandleOf(const runtime::Buffer* buffer) const;

  // NOT_FOUND unless `handle` names a live buffer of this session.
  absl::StatusOr<std::shared_ptr<runtime::Buffer>> LookupBuffer(
      uint64_t handle) const;

  // Deletes the buffers named (a tuple with its elements, whose handles go
  // too); if any handle is unknown, deletes none and returns NOT_FOUND naming
  // it.
  absl::Status DeleteBuffers(absl::Span<const uint64_t> handles);
  // Deletes those of `buffers` and `executables` that are in the session
  // and passes over the others (already gone): what a client dropped.
  // Returns how many handles it deleted.
  int Release(absl::Span<const uint64_t> buffers,
              absl::Span<const uint64_t> executables);

  // Registers `executable` (which may be shared with the compile cache and
  // other sessions) and returns its new handle. FAILED_PRECONDITION if the
  // session has closed meanwhile.
  absl::StatusOr<uint64_t> AddExecutable(
      std::shared_ptr<runtime::Executable> executable);

  // NOT_FOUND unless `handle` names an executable of this session.
  absl::StatusOr<std::shared_ptr<runtime::Executable>> LookupExecutable(
      uint64_t handle) const;

  // Forgets the executable named; NOT_FOUND if the handle is unknown. Runs
  // already enqueued are not affected.
  absl::Status DeleteExecutable(uint64_t handle);

  // Registers a shared-memory region and returns its new handle.
  // FAILED_PRECONDITION if the session has closed; RESOURCE_EXHAUSTED if it
  // would hold more regions, or more region bytes, than its limits allow.
  absl::StatusOr<uint64_t> AddRegion(std::shared_ptr<Region> region);
  // NOT_FOUND unless `handle` names a region of this session.
  absl::StatusOr<std::shared_ptr<Region>> LookupRegion(uint64_t handle) const;
  // Forgets a region. NOT_FOUND for an unknown handle; FAILED_PRECONDITION
  // naming the count while transfers or zero-copy buffers use it.
  absl::Status UnregisterRegion(uint64_t handle);
  // Handles and regions, in no particular order.
  std::vector<std::pair<uint64_t, std::shared_ptr<Region>>> Regions() const;
  int region_count() const;

  // Registers a connected data channel and returns its new handle.
  // FAILED_PRECONDITION if the session has closed; RESOURCE_EXHAUSTED if
  // it holds max_data_channels channels that have not ended.
  absl::StatusOr<uint64_t> AddDataChannel(std::shared_ptr<DataChannel> channel);
  // NOT_FOUND unless `handle` names a channel of this session that has not
  // ended (an ended one is forgotten here).
  absl::StatusOr<std::shared_ptr<DataChannel>> LookupDataChannel(
      uint64_t handle);

  // Renews the lease.
  void Touch(absl::Time now);
  // True if the lease ran out before `now` and no attachment holds it.
  bool Expired(absl::Time now) const;

  // Attaches `attachment`. FAILED_PRECONDITION if one is already attached or
  // the session is closed.
  absl::Status Attach(SessionAttachment* attachment);
  // Forgets `attachment` without calling it (it went away by itself).
  // Returns false if it was no longer attached.
  bool ForgetAttachment(SessionAttachment* attachment);
  // Detaches the current attachment, if any, telling it `why`.
  void Detach(const absl::Status& why);

  // Cancels the session's runs and waits, deletes every buffer, drops every
  // executable and region, ends every data channel, detaches, and refuses new
  // buffers, executables and regions from now on (a region stays mapped until
  // the last transfer or zero-copy buffer using it ends). Returns what was
  // freed. Idempotent.
  SessionCloseStats Close(const absl::Status& why);

  SessionSummary Summarize(absl::Time now) const;
  int64_t buffer_count() const;
  int64_t executable_count() const;
  bool closed() const;

  // --- A whole-cluster session (v1::OpenSessionRequest.whole_cluster) ------
  //
  // Such a session holds buffers and executables on other tasks too, in its
  // proxy session on each (see ProxySessions). A buffer there keeps the
  // handle its task gave it, reserved here so that no handle of this
  // session names two things; an executable keeps this session's handle,
  // mapped to its handle on each task that runs a part of it.
  void SetWholeCluster() {
    whole_cluster_.store(true, std::memory_order_relaxed);
  }
  bool whole_cluster() const {
    return whole_cluster_.load(std::memory_order_relaxed);
  }
  // A proxy: its secret id on its task, and the incarnation of the task it
  // was opened on (a task that restarted has lost it).
  struct Proxy {
    uint64_t id = 0;
    uint64_t incarnation = 0;
  };
  // This session's proxy on `task`, if one is open.
  std::optional<Proxy> ProxyOn(int task) const;
  // Records the proxy on `task` unless one is recorded; returns the one
  // in force (FAILED_PRECONDITION if the session has closed: the caller
  // closes the proxy it opened).
  absl::StatusOr<Proxy> SetProxy(int task, Proxy proxy);
  // Every proxy's id, by task.
  absl::flat_hash_map<int, uint64_t> Proxies() const;
  // Puts back releases that could not be sent (their task did not
  // answer), for the next try.
  void RequeueRemoteReleases(int task, std::vector<uint64_t> buffers,
                             std::vector<uint64_t> executables);
  // Forgets the proxy on `task` if it is `proxy_id` (it ended there: the
  // next call that needs the task opens a new one), with what it held: the
  // buffers on `task` and the executables' parts there. Returns false if
  // another proxy is in force.
  bool ForgetProxy(int task, uint64_t proxy_id);
  // Registers buffers of the proxy on `task` under their handles there.
  // INTERNAL when one is in use here (odds of 2^-64 per pair);
  // RESOURCE_EXHAUSTED past max_handles; FAILED_PRECONDITION when the session
  // has closed.
  absl::Status AddRemoteBuffers(int task, absl::Span<const uint64_t> handles);
  // The task whose device holds buffer `handle`, or -1 if it is not a
  // remote buffer of this session.
  int RemoteBufferTask(uint64_t handle) const;
  // Forgets the remote buffers among `handles` and returns them by task.
  absl::flat_hash_map<int, std::vector<uint64_t>> ForgetRemoteBuffers(
      absl::Span<const uint64_t> handles);
  // The handles of executable `handle` on other tasks: nullopt when it runs
  // on this task alone; a task is missing when its part was lost (the task
  // restarted).
  void SetRemoteParts(uint64_t handle,
                      absl::flat_hash_map<int, uint64_t> parts);
  std::optional<absl::flat_hash_map<int, uint64_t>> RemoteParts(
      uint64_t handle) const;
  // What Release and DeleteExecutable forgot of other tasks, for the
  // proxies to delete there: buffers, and executables, by task.
  struct RemoteReleases {
    absl::flat_hash_map<int, std::vector<uint64_t>> buffers;
    absl::flat_hash_map<int, std::vector<uint64_t>> executables;
    bool empty() const { return buffers.empty() && executables.empty(); }
  };
  RemoteReleases TakeRemoteReleases();

 private:
  // A handle unused by any buffer or executable of the session.
  uint64_t NewHandle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HandleInUse(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckNewHandlesLocked(absl::Span<const uint64_t> handles) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t AddBufferLocked(std::shared_ptr<runtime::Buffer> buffer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Handles registering `buffer` would add (itself and its unregistered
  // tuple elements), plus one per element of each tuple among them.
  int64_t NewHandlesFor(const runtime::Buffer& buffer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED unless `more` handles fit under the limit.
  absl::Status CheckRoomLocked(int64_t more) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t handle_count() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return buffers_.size() + executables_.size() + regions_.size() +
           static_cast<int64_t>(remote_buffers_.size()) + tuple_elements_;
  }
  // Queues the remote parts of executable `handle` for deletion.
  void ReleaseRemotePartsLocked(uint64_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unregisters `handle` and, for a tuple, its elements; appends what it
  // unregistered to `doomed`.
  // The buffers that registering `buffer` would add (itself and, for a
  // tuple, its elements), each once, skipping those registered.
  void CollectNewBuffersLocked(const runtime::Buffer& buffer,
                               std::vector<const runtime::Buffer*>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `buffers` against the tenant's quotas (all or none).
  absl::Status ChargeLocked(absl::Span<const runtime::Buffer* const> buffers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Refund(const runtime::Buffer& buffer);
  void EraseBufferLocked(uint64_t handle,
                         std::vector<std::shared_ptr<runtime::Buffer>>* doomed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t id_;
  const uint64_t public_id_;
  const std::string client_name_;
  const std::string peer_;
  const absl::Duration lease_;
  const absl::Time created_;
  const SessionLimits limits_;
  const std::shared_ptr<Cancellation> cancellation_;
  const std::shared_ptr<TenantAccount> account_;

  mutable pjrt::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_renewal_ ABSL_GUARDED_BY(mu_);
  SessionAttachment* attachment_ ABSL_GUARDED_BY(mu_) = nullptr;
  HandleTable<runtime::Buffer> buffers_ ABSL_GUARDED_BY(mu_){
      "buffer", "a buffer",
      "never created, already deleted, or owned by another session"};
  // The inverse of buffers_.
  absl::flat_hash_map<const runtime::Buffer*, uint64_t> handles_
      ABSL_GUARDED_BY(mu_);
  HandleTable<runtime::Executable> executables_ ABSL_GUARDED_BY(mu_){
      "executable", "an executable",
      "never compiled, already deleted, or owned by another session"};
  HandleTable<Region> regions_ ABSL_GUARDED_BY(mu_){
      "region", "a region",
      "never registered, already unregistered, or owned by another session"};
  HandleTable<DataChannel> channels_ ABSL_GUARDED_BY(mu_){
      "data channel", "an open data channel",
      "never opened, ended after a failed transfer or by its client, or "
      "owned by another session"};
  // Bytes of the registered arrays, and of the registered regions.
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t region_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Elements of the registered tuples (each counts as a handle too).
  int64_t tuple_elements_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_calls_ ABSL_GUARDED_BY(mu_) = 0;

  std::atomic<bool> whole_cluster_{false};
  std::shared_ptr<SessionUsage> usage_ =
      std::make_shared<SessionUsage>(std::vector<int>{}, nullptr);
  bool usage_set_ = false;
  absl::flat_hash_map<int, Proxy> proxies_ ABSL_GUARDED_BY(mu_);
  // Buffers on other tasks: handle → task.
  absl::flat_hash_map<uint64_t, int> remote_buffers_ ABSL_GUARDED_BY(mu_);
  // Executables with parts on other tasks: handle → task → handle there.
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<int, uint64_t>>
      remote_parts_ ABSL_GUARDED_BY(mu_);
  RemoteReleases remote_releases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_SESSION_H_
