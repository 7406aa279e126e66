// Tenants: who may use the daemon, how each proves itself, and what each
// may hold (docs/security.md).
//
// Without a tenants file every caller is the anonymous tenant: nothing is
// checked beyond what the transport allows (the daemon's unix socket mode,
// or a loopback TCP port). With one (--tenants FILE), every call proves a
// tenant by a bearer token ("authorization: Bearer ..." metadata) or a
// verified client certificate's subject, and a session belongs to the
// tenant that opened it.
//
// Thread-safe.
#ifndef PJRT_DAEMON_TENANTS_H_
#define PJRT_DAEMON_TENANTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"

namespace grpc {
class ServerContextBase;
}

namespace pjrt::daemon {

enum class TenantRole { kUser, kAdmin };

// What one tenant may hold at once; 0 means no limit.
struct TenantQuota {
  // Bytes of buffers per device.
  int64_t device_memory = 0;
  int64_t sessions = 0;
  int64_t buffers = 0;
  int64_t executables = 0;
  // Executions enqueued and not finished, per device.
  int64_t queued_executions = 0;
  // Compiled programs kept in the daemon's compile cache for the tenant
  // (beyond, its least recently used go first).
  int64_t compile_cache_entries = 0;
};

struct TenantConfig {
  std::string name;
  TenantRole role = TenantRole::kUser;
  // Hex SHA-256 of the token, or "SALT$HEX" with HEX the SHA-256 of SALT
  // followed by the token. Empty: no token.
  std::string token_sha256;
  // A verified client certificate with this subject (as gRPC writes it,
  // e.g. "CN=alice,O=ml") proves this tenant. Empty: none.
  std::string cert_subject;
  // A process with this uid, or else with this primary gid, calling over
  // the daemon's unix socket (SO_PEERCRED) proves this tenant.
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  // Share of each device's execution queue (weighted round robin).
  int weight = 1;
  TenantQuota quota;
};

// Parses a tenants file's text. INVALID_ARGUMENT naming `source`, the
// tenant and the key for anything wrong: unknown keys, duplicate names or
// credentials, a tenant with no credential, malformed hashes.
absl::StatusOr<std::vector<TenantConfig>> ParseTenants(
    absl::string_view toml_text, absl::string_view source);

// Reads and parses a tenants file, which must not be readable or writable
// by anyone but its owner (mode 600 or 400).
absl::StatusOr<std::vector<TenantConfig>> LoadTenantsFile(
    const std::string& path);

// One tenant's live use of the daemon, against its quota. Kept across
// reloads of the tenants file (by name), so that use is not forgotten.
class TenantAccount {
 public:
  TenantAccount(TenantConfig config, int device_count);

  std::string name() const;
  TenantRole role() const;
  int weight() const;
  TenantQuota quota() const;
  void Reconfigure(TenantConfig config);
  // Whether a local process of `uid` and primary `gid` may act for this
  // tenant: any, unless the tenant is known by a uid or gid.
  bool AdmitsLocalProcess(uint32_t uid, uint32_t gid) const;

  // Each Take* checks the quota and counts `n` more, or returns
  // RESOURCE_EXHAUSTED naming the quota, its limit and the current use;
  // each Give* gives back what a Take* counted.
  absl::Status TakeSession();
  void GiveSession();
  absl::Status TakeExecutables(int64_t n);
  void GiveExecutables(int64_t n);
  // Buffers count once each; bytes count on `device` (an index into the
  // daemon's addressable devices).
  absl::Status TakeBuffers(int64_t n, int device, int64_t bytes);
  void GiveBuffers(int64_t n, int device, int64_t bytes);
  absl::Status TakeQueuedExecution(int device);
  void GiveQueuedExecution(int device);

  int64_t sessions() const { return sessions_.load(); }
  int64_t buffers() const { return buffers_.load(); }
  int64_t executables() const { return executables_.load(); }
  int64_t device_memory(int device) const;
  int64_t queued_executions(int device) const;

 private:
  mutable Mutex mu_;
  TenantConfig config_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> sessions_{0};
  std::atomic<int64_t> buffers_{0};
  std::atomic<int64_t> executables_{0};
  std::vector<int64_t> device_memory_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> queued_ ABSL_GUARDED_BY(mu_);
};

// Who makes a call. `account` is null for the anonymous tenant (no tenants
// file), which may do everything the transport lets it.
struct Caller {
  std::shared_ptr<TenantAccount> account;
  // How the caller was identified, for logs: "token", "certificate",
  // "uid", "gid" or "anonymous".
  std::string method = "anonymous";

  bool anonymous() const { return account == nullptr; }
  bool admin() const {
    return account == nullptr || account->role() == TenantRole::kAdmin;
  }
  std::string name() const {
    return account == nullptr ? std::string("anonymous") : account->name();
  }
};

class Authenticator {
 public:
  // `device_count`: the daemon's addressable devices (for per-device use).
  explicit Authenticator(int device_count) : device_count_(device_count) {}

  // Puts `tenants` in force (at start-up, and again on SIGHUP). Accounts of
  // tenants that remain keep their use; a tenant removed can no longer
  // authenticate, and its open sessions end with their leases.
  void Configure(std::vector<TenantConfig> tenants, std::string source);

  // True once Configure was called with a tenants file.
  bool enabled() const;

  // How to find the uid and gid of a unix-socket caller from its gRPC peer
  // name (see UnixListener); without one, uid and gid tenants cannot
  // authenticate.
  using UnixPeerLookup =
      std::function<std::optional<std::pair<uint32_t, uint32_t>>(
          const std::string& peer)>;
  void SetUnixPeerLookup(UnixPeerLookup lookup);

  // The caller of `context`. UNAUTHENTICATED, with an audit line, when
  // tenants are in force and the call proves none (no credential, a token
  // that matches no tenant, a certificate subject that names none).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context);

  // The caller for a session another task of the cluster opens here on
  // behalf of its tenant `tenant` ("" for its anonymous one): anonymous
  // when no tenants are in force here; the tenant of that name when they
  // are (PERMISSION_DENIED naming it when there is none, or when the
  // other task's session has no tenant).
  absl::StatusOr<Caller> CallerForPeer(absl::string_view tenant,
                                       int origin_task) const;

  // PERMISSION_DENIED naming `what` unless `caller` is an admin.
  static absl::Status RequireAdmin(const Caller& caller,
                                   absl::string_view what);

  // Every account, for stats.
  std::vector<std::shared_ptr<TenantAccount>> accounts() const;

 private:
  const int device_count_;
  mutable Mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  std::string source_ ABSL_GUARDED_BY(mu_);
  UnixPeerLookup unix_peers_ ABSL_GUARDED_BY(mu_);
  std::vector<TenantConfig> configs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<TenantAccount>> accounts_
      ABSL_GUARDED_BY(mu_);
  // SHA-256 of a token already matched → the tenant's name; cleared on
  // reconfiguration.
  absl::flat_hash_map<std::string, std::string> token_cache_
      ABSL_GUARDED_BY(mu_);
};

// Writes one structured audit line: `event` and key=value fields, values
// quoted and escaped. Logged at info level under the "audit" tag, so that
// journalctl -t / grep finds every one.
void Audit(
    absl::string_view event,
    std::initializer_list<std::pair<absl::string_view, std::string>> fields);

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_TENANTS_H_
