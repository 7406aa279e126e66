#include "daemon/tenants.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/server_context.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "base/token.h"
#include "daemon/options.h"

namespace pjrt::daemon {
namespace {

bool IsHexDigest(absl::string_view hex) {
  if (hex.size() != 2 * SHA256_DIGEST_LENGTH) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

absl::Status TenantKeyError(absl::string_view source, absl::string_view tenant,
                            absl::string_view key, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: tenant '%s': key '%s' must be %s", source, tenant, key, expected));
}

absl::StatusOr<int64_t> QuotaCount(const toml::node& node,
                                   absl::string_view source,
                                   absl::string_view tenant,
                                   absl::string_view key) {
  auto v = node.value_exact<int64_t>();
  if (!v || *v < 0 || *v > (int64_t{1} << 40)) {
    return TenantKeyError(source, tenant, absl::StrCat("quota.", key),
                          "an integer from 0 (no limit) to 2^40");
  }
  return *v;
}

absl::StatusOr<TenantQuota> ParseQuota(const toml::table& table,
                                       absl::string_view source,
                                       absl::string_view tenant) {
  TenantQuota quota;
  for (const auto& [raw_key, node] : table) {
    const std::string key(raw_key.str());
    if (key == "device_memory") {
      if (auto v = node.value_exact<int64_t>(); v && *v >= 0) {
        quota.device_memory = *v;
      } else if (auto s = node.value<std::string>()) {
        auto parsed = ParseByteSize(*s);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(
              absl::StrFormat("%s: tenant '%s': key 'quota.device_memory': %s",
                              source, tenant, parsed.status().message()));
        }
        quota.device_memory = *parsed;
      } else {
        return TenantKeyError(source, tenant, "quota.device_memory",
                              "a byte count such as \"4GiB\"");
      }
    } else if (key == "sessions") {
      PJRT_ASSIGN_OR_RETURN(quota.sessions,
                            QuotaCount(node, source, tenant, key));
    } else if (key == "buffers") {
      PJRT_ASSIGN_OR_RETURN(quota.buffers,
                            QuotaCount(node, source, tenant, key));
    } else if (key == "executables") {
      PJRT_ASSIGN_OR_RETURN(quota.executables,
                            QuotaCount(node, source, tenant, key));
    } else if (key == "queued_executions") {
      PJRT_ASSIGN_OR_RETURN(quota.queued_executions,
                            QuotaCount(node, source, tenant, key));
    } else if (key == "compile_cache_entries") {
      PJRT_ASSIGN_OR_RETURN(quota.compile_cache_entries,
                            QuotaCount(node, source, tenant, key));
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tenant '%s': unknown key 'quota.%s' (known: device_memory, "
          "sessions, buffers, executables, queued_executions, "
          "compile_cache_entries)",
          source, tenant, key));
    }
  }
  return quota;
}

absl::StatusOr<TenantConfig> ParseTenant(const toml::table& table, int index,
                                         absl::string_view source) {
  TenantConfig config;
  const toml::node* name = table.get("name");
  if (name == nullptr || !name->is_string() ||
      name->value<std::string>()->empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tenant %d has no name (name = \"...\")", source, index + 1));
  }
  config.name = *name->value<std::string>();
  if (config.name.size() > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tenant name '%s' is %d characters long; use at most 64", source,
        EscapeForLog(config.name), config.name.size()));
  }
  const std::string& tenant = config.name;
  for (const auto& [raw_key, node] : table) {
    const std::string key(raw_key.str());
    if (key == "name") continue;
    if (key == "role") {
      auto role = node.value<std::string>();
      if (role == "user") {
        config.role = TenantRole::kUser;
      } else if (role == "admin") {
        config.role = TenantRole::kAdmin;
      } else {
        return TenantKeyError(source, tenant, key, "\"user\" or \"admin\"");
      }
    } else if (key == "token_sha256") {
      auto value = node.value<std::string>();
      if (!value) {
        return TenantKeyError(source, tenant, key, "a string");
      }
      absl::string_view digest = *value;
      if (size_t dollar = digest.find('$'); dollar != absl::string_view::npos) {
        digest = digest.substr(dollar + 1);
      }
      if (!IsHexDigest(digest)) {
        return TenantKeyError(
            source, tenant, key,
            "64 lowercase hex digits (the token's SHA-256), optionally "
            "preceded by SALT$; pjrtctl token new prints one");
      }
      config.token_sha256 = *value;
    } else if (key == "cert_subject") {
      auto value = node.value<std::string>();
      if (!value || value->empty()) {
        return TenantKeyError(source, tenant, key,
                              "a certificate subject such as \"CN=alice\"");
      }
      config.cert_subject = *value;
    } else if (key == "uid" || key == "gid") {
      auto v = node.value_exact<int64_t>();
      if (!v || *v < 0 || *v > 0xfffffffe) {
        return TenantKeyError(source, tenant, key,
                              "a numeric id from 0 to 4294967294");
      }
      (key == "uid" ? config.uid : config.gid) = static_cast<uint32_t>(*v);
    } else if (key == "weight") {
      auto v = node.value_exact<int64_t>();
      if (!v || *v < 1 || *v > 1000) {
        return TenantKeyError(source, tenant, key, "an integer from 1 to 1000");
      }
      config.weight = static_cast<int>(*v);
    } else if (key == "quota") {
      const toml::table* quota = node.as_table();
      if (quota == nullptr) {
        return TenantKeyError(source, tenant, key, "a table ([tenant.quota])");
      }
      PJRT_ASSIGN_OR_RETURN(config.quota, ParseQuota(*quota, source, tenant));
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tenant '%s': unknown key '%s' (known: name, role, "
          "token_sha256, cert_subject, uid, gid, weight, quota)",
          source, tenant, key));
    }
  }
  if (config.token_sha256.empty() && config.cert_subject.empty() &&
      !config.uid.has_value() && !config.gid.has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tenant '%s' has no credential; give it token_sha256 (pjrtctl "
        "token new), cert_subject, uid or gid",
        source, tenant));
  }
  return config;
}

}  // namespace

absl::StatusOr<std::vector<TenantConfig>> ParseTenants(
    absl::string_view toml_text, absl::string_view source) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(toml_text.data(), toml_text.size()),
                        std::string_view(source.data(), source.size()));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: %s", source, e.source().begin.line, e.description()));
  }
  std::vector<TenantConfig> tenants;
  for (const auto& [raw_key, node] : table) {
    if (raw_key.str() != "tenant") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown key '%s'; a tenants file holds [[tenant]] tables",
          source, std::string(raw_key.str())));
    }
    const toml::array* list = node.as_array();
    if (list == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: 'tenant' must be an array of tables ([[tenant]])", source));
    }
    for (const toml::node& item : *list) {
      const toml::table* entry = item.as_table();
      if (entry == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: 'tenant' must be an array of tables ([[tenant]])", source));
      }
      PJRT_ASSIGN_OR_RETURN(
          TenantConfig config,
          ParseTenant(*entry, static_cast<int>(tenants.size()), source));
      tenants.push_back(std::move(config));
    }
  }
  absl::flat_hash_set<std::string> names, tokens, subjects;
  absl::flat_hash_set<uint32_t> uids, gids;
  for (const TenantConfig& t : tenants) {
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tenant '%s' is defined twice", source, t.name));
    }
    if (!t.token_sha256.empty() && !tokens.insert(t.token_sha256).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tenant '%s' has the token of another tenant", source, t.name));
    }
    if ((t.uid.has_value() && !uids.insert(*t.uid).second) ||
        (t.gid.has_value() && !gids.insert(*t.gid).second)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tenant '%s' has the uid or gid of another tenant", source,
          t.name));
    }
    if (!t.cert_subject.empty() && !subjects.insert(t.cert_subject).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tenant '%s' has the cert_subject of another tenant", source,
          t.name));
    }
  }
  if (tenants.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s defines no tenant; add a [[tenant]] table (see "
                        "docs/security.md)",
                        source));
  }
  return tenants;
}

absl::StatusOr<std::vector<TenantConfig>> LoadTenantsFile(
    const std::string& path) {
  PJRT_ASSIGN_OR_RETURN(std::string text,
                        ReadPrivateFile(path, "tenants file"));
  return ParseTenants(text, path);
}

// --- TenantAccount
// ------------------------------------------------------------

TenantAccount::TenantAccount(TenantConfig config, int device_count)
    : config_(std::move(config)),
      device_memory_(static_cast<size_t>(device_count), 0),
      queued_(static_cast<size_t>(device_count), 0) {}

std::string TenantAccount::name() const {
  MutexLock lock(&mu_);
  return config_.name;
}

TenantRole TenantAccount::role() const {
  MutexLock lock(&mu_);
  return config_.role;
}

int TenantAccount::weight() const {
  MutexLock lock(&mu_);
  return config_.weight;
}

TenantQuota TenantAccount::quota() const {
  MutexLock lock(&mu_);
  return config_.quota;
}

bool TenantAccount::AdmitsLocalProcess(uint32_t uid, uint32_t gid) const {
  MutexLock lock(&mu_);
  if (config_.uid.has_value()) return *config_.uid == uid;
  if (config_.gid.has_value()) return *config_.gid == gid;
  return true;
}

void TenantAccount::Reconfigure(TenantConfig config) {
  MutexLock lock(&mu_);
  config_ = std::move(config);
}

namespace {

// Counts `n` more of `counter` unless that passes `limit` (0: none).
absl::Status TakeCount(std::atomic<int64_t>& counter, int64_t n, int64_t limit,
                       absl::string_view tenant, absl::string_view quota,
                       absl::string_view what) {
  int64_t now = counter.load();
  do {
    if (limit > 0 && now + n > limit) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "tenant '%s' holds %d %s; %d more would exceed its quota "
          "quota.%s = %d; free some first",
          tenant, now, what, n, quota, limit));
    }
  } while (!counter.compare_exchange_weak(now, now + n));
  return absl::OkStatus();
}

}  // namespace

absl::Status TenantAccount::TakeSession() {
  TenantQuota q = quota();
  return TakeCount(sessions_, 1, q.sessions, name(), "sessions",
                   "open sessions");
}

void TenantAccount::GiveSession() { sessions_.fetch_sub(1); }

absl::Status TenantAccount::TakeExecutables(int64_t n) {
  TenantQuota q = quota();
  return TakeCount(executables_, n, q.executables, name(), "executables",
                   "executables");
}

void TenantAccount::GiveExecutables(int64_t n) { executables_.fetch_sub(n); }

absl::Status TenantAccount::TakeBuffers(int64_t n, int device, int64_t bytes) {
  TenantQuota q = quota();
  const std::string tenant = name();
  PJRT_RETURN_IF_ERROR(
      TakeCount(buffers_, n, q.buffers, tenant, "buffers", "buffers"));
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(device_memory_.size())) {
    return absl::OkStatus();  // not a device of ours: nothing to count
  }
  int64_t& used = device_memory_[static_cast<size_t>(device)];
  if (q.device_memory > 0 && bytes > q.device_memory - used) {
    buffers_.fetch_sub(n);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "tenant '%s' holds %d bytes of buffers on device %d; %d more would "
        "exceed its quota quota.device_memory = %d bytes per device; delete "
        "some buffers first",
        tenant, used, device, bytes, q.device_memory));
  }
  used += bytes;
  return absl::OkStatus();
}

void TenantAccount::GiveBuffers(int64_t n, int device, int64_t bytes) {
  buffers_.fetch_sub(n);
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(device_memory_.size())) return;
  device_memory_[static_cast<size_t>(device)] -= bytes;
}

absl::Status TenantAccount::TakeQueuedExecution(int device) {
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(queued_.size())) {
    return absl::OkStatus();
  }
  int64_t& queued = queued_[static_cast<size_t>(device)];
  const int64_t limit = config_.quota.queued_executions;
  if (limit > 0 && queued >= limit) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "tenant '%s' has %d executions queued on device %d, its quota "
        "quota.queued_executions = %d; wait for some to finish",
        config_.name, queued, device, limit));
  }
  ++queued;
  return absl::OkStatus();
}

void TenantAccount::GiveQueuedExecution(int device) {
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(queued_.size())) return;
  --queued_[static_cast<size_t>(device)];
}

int64_t TenantAccount::device_memory(int device) const {
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(device_memory_.size())) return 0;
  return device_memory_[static_cast<size_t>(device)];
}

int64_t TenantAccount::queued_executions(int device) const {
  MutexLock lock(&mu_);
  if (device < 0 || device >= static_cast<int>(queued_.size())) return 0;
  return queued_[static_cast<size_t>(device)];
}

// --- Authenticator
// ------------------------------------------------------------

void Authenticator::Configure(std::vector<TenantConfig> tenants,
                              std::string source) {
  MutexLock lock(&mu_);
  enabled_ = true;
  source_ = std::move(source);
  token_cache_.clear();
  for (const TenantConfig& config : tenants) {
    auto it = accounts_.find(config.name);
    if (it == accounts_.end()) {
      accounts_.emplace(config.name,
                        std::make_shared<TenantAccount>(config, device_count_));
    } else {
      it->second->Reconfigure(config);
    }
  }
  configs_ = std::move(tenants);
}

void Authenticator::SetUnixPeerLookup(UnixPeerLookup lookup) {
  MutexLock lock(&mu_);
  unix_peers_ = std::move(lookup);
}

bool Authenticator::enabled() const {
  MutexLock lock(&mu_);
  return enabled_;
}

absl::StatusOr<Caller> Authenticator::Authenticate(
    const grpc::ServerContextBase& context) {
  {
    MutexLock lock(&mu_);
    if (!enabled_) return Caller{};
  }
  const auto& metadata = context.client_metadata();
  std::string token;
  bool has_authorization = false;
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    has_authorization = true;
    absl::string_view value(it->second.data(), it->second.size());
    if (absl::ConsumePrefix(&value, "Bearer ") ||
        absl::ConsumePrefix(&value, "bearer ")) {
      token = std::string(absl::StripAsciiWhitespace(value));
    }
  }
  std::vector<std::string> subjects;
  if (auto auth = context.auth_context(); auth != nullptr) {
    for (const char* property :
         {GRPC_X509_SUBJECT_PROPERTY_NAME, GRPC_X509_CN_PROPERTY_NAME}) {
      for (const auto& value : auth->FindPropertyValues(property)) {
        std::string text(value.data(), value.size());
        subjects.push_back(std::string(property) == GRPC_X509_CN_PROPERTY_NAME
                               ? absl::StrCat("CN=", text)
                               : text);
      }
    }
  }
  const std::string peer = context.peer();
  MutexLock lock(&mu_);
  if (!token.empty()) {
    const std::string key = Sha256Hex(token);
    std::string tenant;
    if (auto it = token_cache_.find(key); it != token_cache_.end()) {
      tenant = it->second;
    } else {
      for (const TenantConfig& config : configs_) {
        if (!config.token_sha256.empty() &&
            TokenMatches(token, config.token_sha256)) {
          tenant = config.name;
          token_cache_.emplace(key, tenant);
          break;
        }
      }
    }
    if (tenant.empty()) {
      Audit("auth_failed", {{"peer", peer}, {"reason", "unknown token"}});
      return absl::UnauthenticatedError(absl::StrFormat(
          "the bearer token matches no tenant of %s; ask the daemon's "
          "administrator for a token",
          source_));
    }
    return Caller{accounts_.at(tenant), "token"};
  }
  for (const std::string& subject : subjects) {
    for (const TenantConfig& config : configs_) {
      if (!config.cert_subject.empty() && config.cert_subject == subject) {
        return Caller{accounts_.at(config.name), "certificate"};
      }
    }
  }
  // A local process over the unix socket: its uid, then its gid.
  std::optional<std::pair<uint32_t, uint32_t>> local;
  if (unix_peers_ != nullptr) local = unix_peers_(peer);
  if (local.has_value()) {
    for (const TenantConfig& config : configs_) {
      if (config.uid == local->first) {
        return Caller{accounts_.at(config.name), "uid"};
      }
    }
    for (const TenantConfig& config : configs_) {
      if (config.gid == local->second) {
        return Caller{accounts_.at(config.name), "gid"};
      }
    }
  }
  if (has_authorization) {
    Audit("auth_failed",
          {{"peer", peer}, {"reason", "malformed authorization"}});
    return absl::UnauthenticatedError(
        "the authorization metadata is not 'Bearer TOKEN'; pass the token "
        "as token= (Python), ConnectOptions::token (C++), PJRTD_TOKEN or "
        "pjrtctl --token-file");
  }
  Audit("auth_failed",
        {{"peer", peer},
         {"reason", !subjects.empty() ? "certificate names no tenant"
                    : local.has_value()
                        ? absl::StrFormat("uid %d gid %d names no tenant",
                                          local->first, local->second)
                        : "no credential"}});
  if (!subjects.empty()) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "the client certificate's subject '%s' names no tenant of %s",
        EscapeForLog(subjects.front()), source_));
  }
  if (local.has_value()) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "this daemon admits tenants only (%s), and none has uid %d or gid "
        "%d: pass a token (token= in Python, ConnectOptions::token in C++, "
        "PJRTD_TOKEN, pjrtctl --token-file)",
        source_, local->first, local->second));
  }
  return absl::UnauthenticatedError(absl::StrFormat(
      "this daemon admits tenants only (%s): pass a token (token= in Python, "
      "ConnectOptions::token in C++, PJRTD_TOKEN, pjrtctl --token-file) or "
      "a client certificate",
      source_));
}

absl::Status Authenticator::RequireAdmin(const Caller& caller,
                                         absl::string_view what) {
  if (caller.admin()) return absl::OkStatus();
  Audit("permission_denied",
        {{"tenant", caller.name()}, {"action", std::string(what)}});
  return absl::PermissionDeniedError(
      absl::StrFormat("%s needs the admin role; tenant '%s' has the user role",
                      what, caller.name()));
}

absl::StatusOr<Caller> Authenticator::CallerForPeer(absl::string_view tenant,
                                                    int origin_task) const {
  MutexLock lock(&mu_);
  if (!enabled_) return Caller{};
  if (tenant.empty()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "this task admits the tenants of %s only, and the session on task %d "
        "has none: give every task of the cluster the same tenants file",
        source_, origin_task));
  }
  for (const TenantConfig& config : configs_) {
    if (config.name == tenant) return Caller{accounts_.at(config.name), "peer"};
  }
  return absl::PermissionDeniedError(absl::StrFormat(
      "tenant \"%s\" of task %d's session is not one of this task's tenants "
      "(%s): give every task of the cluster the same tenants file",
      absl::CEscape(tenant.substr(0, 64)), origin_task, source_));
}

std::vector<std::shared_ptr<TenantAccount>> Authenticator::accounts() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<TenantAccount>> result;
  for (const auto& [name, account] : accounts_) result.push_back(account);
  return result;
}

void Audit(
    absl::string_view event,
    std::initializer_list<std::pair<absl::string_view, std::string>> fields) {
  std::string line = absl::StrCat("audit event=", event);
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&line, " ", key, "=\"", absl::CEscape(value), "\"");
  }
  spdlog::info("{}", line);
}

}  // namespace pjrt::daemon
