#include "daemon/options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "base/version.h"
#include "daemon/metrics.h"
#include "device/platform.h"
#include "toml++/toml.h"

namespace pjrt::daemon {
namespace {

// Whether a host:port listen address can be reached from this host only.
bool IsLoopbackAddress(absl::string_view address) {
  absl::string_view host = address;
  if (absl::ConsumePrefix(&host, "[")) {
    host = host.substr(0, host.find(']'));
  } else if (size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || host == "ip6-localhost" ||
         absl::StartsWith(host, "127.");
}

constexpr const char* kLogLevels[] = {"trace", "debug",    "info", "warn",
                                      "error", "critical", "off"};

absl::Status KeyError(absl::string_view source, absl::string_view key,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: key '%s' must be %s", source, key, expected));
}

absl::StatusOr<int64_t> ByteSizeValue(const toml::node& node,
                                      absl::string_view source,
                                      absl::string_view key) {
  if (auto v = node.value_exact<int64_t>()) {
    if (*v < 0) return KeyError(source, key, "a non-negative byte count");
    return *v;
  }
  if (auto v = node.value<std::string>()) {
    auto parsed = ParseByteSize(*v);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key '%s': %s", source, key, parsed.status().message()));
    }
    return *parsed;
  }
  return KeyError(source, key, "a byte count such as 17179869184 or \"16GiB\"");
}

absl::StatusOr<absl::Duration> SecondsValue(const toml::node& node,
                                            absl::string_view source,
                                            absl::string_view key) {
  if (auto v = node.value<double>()) {
    // NaN and infinities are refused too.
    if (!(*v >= 0 && *v <= 1e9)) {
      return KeyError(source, key, "a number of seconds from 0 to 1e9");
    }
    return absl::Seconds(*v);
  }
  return KeyError(source, key, "a number of seconds");
}

// An integer in [min, max].
absl::StatusOr<int64_t> IntValue(const toml::node& node,
                                 absl::string_view source,
                                 absl::string_view key, int64_t min,
                                 int64_t max) {
  auto v = node.value_exact<int64_t>();
  if (!v || *v < min || *v > max) {
    return KeyError(source, key,
                    absl::StrFormat("an integer from %d to %d", min, max));
  }
  return *v;
}

// The limits' TOML keys (see docs/limits.md).
absl::StatusOr<bool> ApplyLimitKey(absl::string_view key,
                                   const toml::node& node,
                                   absl::string_view source,
                                   DaemonLimits* limits) {
  constexpr int64_t kMaxCount = int64_t{1} << 30;
  if (key == "max_sessions") {
    PJRT_ASSIGN_OR_RETURN(limits->max_sessions,
                          IntValue(node, source, key, 1, kMaxCount));
  } else if (key == "max_handles_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_handles_per_session,
                          IntValue(node, source, key, 1, int64_t{1} << 40));
  } else if (key == "max_waiting_calls_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_waiting_calls_per_session,
                          IntValue(node, source, key, 1, 1 << 16));
  } else if (key == "max_regions_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_regions_per_session,
                          IntValue(node, source, key, 0, 1 << 16));
  } else if (key == "max_regions") {
    PJRT_ASSIGN_OR_RETURN(limits->max_regions,
                          IntValue(node, source, key, 0, 1 << 20));
  } else if (key == "max_data_channels_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_data_channels_per_session,
                          IntValue(node, source, key, 0, 1 << 10));
  } else if (key == "max_data_channels") {
    PJRT_ASSIGN_OR_RETURN(limits->max_data_channels,
                          IntValue(node, source, key, 0, 1 << 20));
  } else if (key == "max_execute_lanes_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_execute_lanes_per_session,
                          IntValue(node, source, key, 0, 1 << 10));
  } else if (key == "max_execute_lanes") {
    PJRT_ASSIGN_OR_RETURN(limits->max_execute_lanes,
                          IntValue(node, source, key, 0, 1 << 12));
  } else if (key == "max_region_bytes_per_session") {
    PJRT_ASSIGN_OR_RETURN(limits->max_region_bytes_per_session,
                          ByteSizeValue(node, source, key));
  } else if (key == "max_region_bytes") {
    PJRT_ASSIGN_OR_RETURN(limits->max_region_bytes,
                          ByteSizeValue(node, source, key));
  } else if (key == "max_region_connections_per_user") {
    PJRT_ASSIGN_OR_RETURN(limits->max_region_connections_per_user,
                          IntValue(node, source, key, 1, 1 << 16));
  } else if (key == "max_region_connections_per_peer") {
    PJRT_ASSIGN_OR_RETURN(limits->max_region_connections_per_peer,
                          IntValue(node, source, key, 1, 1 << 16));
  } else if (key == "max_region_connections") {
    PJRT_ASSIGN_OR_RETURN(limits->max_region_connections,
                          IntValue(node, source, key, 1, 1 << 16));
  } else if (key == "max_concurrent_compiles") {
    PJRT_ASSIGN_OR_RETURN(limits->max_concurrent_compiles,
                          IntValue(node, source, key, 0, 1 << 16));
  } else if (key == "fair_queue_depth") {
    PJRT_ASSIGN_OR_RETURN(limits->fair_queue_depth,
                          IntValue(node, source, key, 1, 1 << 16));
  } else if (key == "max_handler_threads") {
    PJRT_ASSIGN_OR_RETURN(limits->max_handler_threads,
                          IntValue(node, source, key, 16, 1 << 20));
  } else if (key == "max_program_bytes") {
    PJRT_ASSIGN_OR_RETURN(limits->max_program_bytes,
                          ByteSizeValue(node, source, key));
  } else if (key == "compile_cache_entries") {
    PJRT_ASSIGN_OR_RETURN(limits->compile_cache_entries,
                          IntValue(node, source, key, 0, 1 << 20));
  } else if (key == "compile_cache_bytes") {
    PJRT_ASSIGN_OR_RETURN(limits->compile_cache_bytes,
                          ByteSizeValue(node, source, key));
  } else if (key == "max_collective_timeout_seconds") {
    PJRT_ASSIGN_OR_RETURN(limits->max_collective_timeout,
                          SecondsValue(node, source, key));
  } else if (key == "max_receive_timeout_seconds") {
    PJRT_ASSIGN_OR_RETURN(limits->max_receive_timeout,
                          SecondsValue(node, source, key));
  } else {
    return false;
  }
  return true;
}

// The keys of what the daemon serves and how it runs: false for another key.
absl::StatusOr<bool> ApplyServingKey(absl::string_view key,
                                     const toml::node& node,
                                     absl::string_view source,
                                     DaemonOptions* options) {
  if (key == "listen") {
    options->listen.clear();
    if (auto single = node.value<std::string>()) {
      options->listen.push_back(*single);
    } else if (const toml::array* list = node.as_array()) {
      for (const toml::node& item : *list) {
        auto address = item.value<std::string>();
        if (!address) return KeyError(source, key, "a list of addresses");
        options->listen.push_back(*address);
      }
    } else {
      return KeyError(source, key, "an address or a list of addresses");
    }
  } else if (key == "platform") {
    auto v = node.value<std::string>();
    if (!v) return KeyError(source, key, "\"host\", \"cuda\" or \"auto\"");
    options->platform = *v;
  } else if (key == "host_devices") {
    PJRT_ASSIGN_OR_RETURN(options->host_devices,
                          IntValue(node, source, key, 1, 256));
  } else if (key == "memory_limit") {
    PJRT_ASSIGN_OR_RETURN(options->memory_limit_bytes,
                          ByteSizeValue(node, source, key));
  } else if (key == "allocation_model") {
    auto v = node.value<std::string>();
    if (!v) {
      return KeyError(source, key,
                      "\"synchronous\", \"compute-synchronized\" or "
                      "\"asynchronous\"");
    }
    options->allocation_model = *v;
  } else if (key == "queue_ahead") {
    PJRT_ASSIGN_OR_RETURN(options->queue_ahead,
                          IntValue(node, source, key, 0, 100000));
  } else if (key == "compile_cache_dir") {
    auto v = node.value<std::string>();
    if (!v) {
      return KeyError(source, key, "a folder, or \"\" for no persistent cache");
    }
    options->compile_cache_dir = *v;
  } else if (key == "log_level") {
    auto v = node.value<std::string>();
    if (!v) return KeyError(source, key, "a log level such as \"info\"");
    options->log_level = *v;
  } else if (key == "default_lease_seconds") {
    PJRT_ASSIGN_OR_RETURN(options->default_lease,
                          SecondsValue(node, source, key));
  } else if (key == "max_lease_seconds") {
    PJRT_ASSIGN_OR_RETURN(options->max_lease, SecondsValue(node, source, key));
  } else if (key == "shutdown_timeout_seconds") {
    PJRT_ASSIGN_OR_RETURN(options->shutdown_timeout,
                          SecondsValue(node, source, key));
  } else {
    return false;
  }
  return true;
}

// The keys of who may call and over what: false for another key.
absl::StatusOr<bool> ApplyAccessKey(absl::string_view key,
                                    const toml::node& node,
                                    absl::string_view source,
                                    DaemonOptions* options) {
  if (key == "admin_token_file") {
    auto v = node.value<std::string>();
    if (!v) return KeyError(source, key, "a file path");
    options->admin_token_file = *v;
  } else if (key == "tenants_file" || key == "tls_cert" || key == "tls_key" ||
             key == "tls_client_ca" || key == "cluster_tls_ca") {
    auto v = node.value<std::string>();
    if (!v) return KeyError(source, key, "a file path");
    std::string* field = key == "tenants_file"    ? &options->tenants_file
                         : key == "tls_cert"      ? &options->tls_cert
                         : key == "tls_key"       ? &options->tls_key
                         : key == "tls_client_ca" ? &options->tls_client_ca
                                                  : &options->cluster_tls_ca;
    *field = *v;
  } else if (key == "insecure_tcp") {
    const toml::value<bool>* v = node.as_boolean();
    if (v == nullptr) return KeyError(source, key, "true or false");
    options->insecure_tcp = v->get();
  } else if (key == "shared_memory") {
    // Exactly a boolean: toml++ would also read 0 or 1 as one.
    const toml::value<bool>* v = node.as_boolean();
    if (v == nullptr) return KeyError(source, key, "true or false");
    options->shared_memory = v->get();
  } else if (key == "data_channels") {
    const toml::value<bool>* v = node.as_boolean();
    if (v == nullptr) return KeyError(source, key, "true or false");
    options->data_channels = v->get();
  } else if (key == "metrics_listen") {
    auto v = node.value<std::string>();
    if (!v) {
      return KeyError(source, key,
                      "an IP:PORT address, e.g. \"127.0.0.1:9464\"");
    }
    options->metrics_listen = *v;
  } else {
    return false;
  }
  return true;
}

// The keys of the cluster and its cross-host transfers: false for another
// key.
absl::StatusOr<bool> ApplyClusterKey(absl::string_view key,
                                     const toml::node& node,
                                     absl::string_view source,
                                     DaemonOptions* options) {
  if (key == "task_id") {
    PJRT_ASSIGN_OR_RETURN(options->task_id,
                          IntValue(node, source, key, 0, 65535));
  } else if (key == "task_id_from_hostname") {
    const toml::value<bool>* v = node.as_boolean();
    if (v == nullptr) return KeyError(source, key, "true or false");
    options->task_id_from_hostname = v->get();
  } else if (key == "cluster") {
    options->cluster.clear();
    const toml::array* list = node.as_array();
    if (list == nullptr) {
      return KeyError(source, key, "a list of peer addresses, by task id");
    }
    for (const toml::node& item : *list) {
      auto address = item.value<std::string>();
      if (!address) return KeyError(source, key, "a list of addresses");
      options->cluster.push_back(*address);
    }
  } else if (key == "cluster_secret_file") {
    auto v = node.value<std::string>();
    if (!v) return KeyError(source, key, "a file path");
    options->cluster_secret_file = *v;
  } else if (key == "cluster_timeout_seconds") {
    PJRT_ASSIGN_OR_RETURN(options->cluster_timeout,
                          SecondsValue(node, source, key));
  } else if (key == "receive_timeout_seconds") {
    PJRT_ASSIGN_OR_RETURN(options->receive_timeout,
                          SecondsValue(node, source, key));
  } else {
    return false;
  }
  return true;
}

// The error for a key that no Apply*Key knows; lists every known key.
absl::Status UnknownKeyError(absl::string_view source, const std::string& key) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: unknown key '%s'; known keys are listen, platform, "
      "host_devices, memory_limit, allocation_model, queue_ahead, "
      "log_level, compile_cache_dir, default_lease_seconds, "
      "max_lease_seconds, "
      "shutdown_timeout_seconds, admin_token_file, tenants_file, "
      "tls_cert, tls_key, tls_client_ca, insecure_tcp, shared_memory, "
      "data_channels, metrics_listen, task_id, task_id_from_hostname, "
      "cluster, cluster_secret_file, cluster_tls_ca, "
      "cluster_timeout_seconds, "
      "receive_timeout_seconds, and the limits of docs/limits.md "
      "(max_sessions, max_handles_per_session, "
      "max_waiting_calls_per_session, max_regions_per_session, "
      "max_regions, max_region_bytes_per_session, max_region_bytes, "
      "max_region_connections_per_peer, max_region_connections_per_user, "
      "max_region_connections, max_data_channels_per_session, "
      "max_data_channels, max_execute_lanes_per_session, "
      "max_execute_lanes, max_program_bytes, max_concurrent_compiles, "
      "fair_queue_depth, "
      "max_handler_threads, "
      "compile_cache_entries, compile_cache_bytes, "
      "max_collective_timeout_seconds, max_receive_timeout_seconds)",
      source, EscapeForLog(key, 64)));
}
}  // namespace

absl::Status ApplyConfigText(absl::string_view toml_text,
                             absl::string_view source, DaemonOptions* options) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(toml_text.data(), toml_text.size()),
                        std::string_view(source.data(), source.size()));
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d:%d: %s", source, where.line, where.column, e.description()));
  }
  for (const auto& [raw_key, node] : table) {
    std::string key(raw_key.str());
    PJRT_ASSIGN_OR_RETURN(bool known,
                          ApplyServingKey(key, node, source, options));
    if (known) continue;
    PJRT_ASSIGN_OR_RETURN(known, ApplyAccessKey(key, node, source, options));
    if (known) continue;
    PJRT_ASSIGN_OR_RETURN(known, ApplyClusterKey(key, node, source, options));
    if (known) continue;
    PJRT_ASSIGN_OR_RETURN(known,
                          ApplyLimitKey(key, node, source, &options->limits));
    if (known) continue;
    return UnknownKeyError(source, key);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> TaskIdFromHostname(absl::string_view hostname) {
  const absl::string_view label = hostname.substr(0, hostname.find('.'));
  const size_t dash = label.rfind('-');
  int id = -1;
  if (dash == absl::string_view::npos || dash + 1 == label.size() ||
      label.size() - dash - 1 > 5 ||
      !absl::SimpleAtoi(label.substr(dash + 1), &id) ||
      label.substr(dash + 1).find_first_not_of("0123456789") !=
          absl::string_view::npos ||
      id > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--task-id-from-hostname: host name \"%s\" does not end in "
        "-<task id> (a StatefulSet's pods are named <set>-0, <set>-1, ...)",
        hostname));
  }
  return id;
}

absl::Status ValidateOptions(const DaemonOptions& options) {
  if (options.listen.empty()) {
    return absl::InvalidArgumentError(
        "no listen address; give at least one --listen");
  }
  for (size_t i = 0; i < options.listen.size(); ++i) {
    const std::string& address = options.listen[i];
    if (address.empty()) {
      return absl::InvalidArgumentError("an empty listen address was given");
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.listen[j] == address) {
        return absl::InvalidArgumentError(
            absl::StrFormat("listen address '%s' is given twice", address));
      }
    }
    if (absl::StartsWith(address, "unix:")) {
      // An absolute path: gRPC reads unix://x.sock as /x.sock, "unix:" as
      // an abstract socket, and the daemon's side sockets would go beside
      // a relative one in the working folder.
      absl::string_view path = address;
      path.remove_prefix(5);
      if (absl::StartsWith(path, "//")) path.remove_prefix(2);
      if (!absl::StartsWith(path, "/") || path.size() < 2) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "listen address '%s' needs an absolute path: unix:///folder/"
            "name.sock",
            address));
      }
      continue;
    }
    // host:port, the port within 0 (any free one) to 65535. (gRPC takes a
    // missing port for 443 and a host alone for a name to resolve.)
    const size_t colon = address.rfind(':');
    const bool bracketed = absl::StartsWith(address, "[");
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        (bracketed && address[colon - 1] != ']') ||
        (!bracketed && address.find(':') != colon) ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
        address.substr(colon + 1).find_first_not_of("0123456789") !=
            std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "listen address '%s' is neither unix:///path/name.sock nor "
          "host:port (such as 127.0.0.1:7070, [::1]:7070, 0.0.0.0:0 for any "
          "free port)",
          address));
    }
    if (port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "listen address '%s' has port %d; give a port from 0 (any free "
          "one) to 65535",
          address, port));
    }
  }
  if (!options.metrics_listen.empty()) {
    PJRT_RETURN_IF_ERROR(ParseMetricsAddress(options.metrics_listen).status());
  }
  if (options.platform != "host" && options.platform != "cuda" &&
      options.platform != "auto") {
    return absl::InvalidArgumentError(
        absl::StrFormat("platform '%s' is unknown; expected host, cuda or auto",
                        options.platform));
  }
  if (!options.allocation_model.empty()) {
    auto model = device::ParseAllocationModel(options.allocation_model);
    if (!model.ok()) return model.status();
  }
  if (options.queue_ahead < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("queue-ahead %d is negative; use 0 for the default",
                        options.queue_ahead));
  }
  bool known_level = false;
  for (const char* level : kLogLevels)
    known_level |= options.log_level == level;
  if (!known_level) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "log level '%s' is unknown; expected trace, debug, info, warn, error, "
        "critical or off",
        options.log_level));
  }
  if (options.default_lease <= absl::ZeroDuration() ||
      options.max_lease < options.default_lease) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "session leases must satisfy 0 < default (%s) <= maximum (%s)",
        absl::FormatDuration(options.default_lease),
        absl::FormatDuration(options.max_lease)));
  }
  const int tasks = std::max<int>(1, static_cast<int>(options.cluster.size()));
  if (options.task_id < 0 || options.task_id >= tasks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "task id %d is outside the cluster of %d task(s); give --task-id "
        "between 0 and %d, and one --cluster address per task",
        options.task_id, tasks, tasks - 1));
  }
  for (size_t i = 0; i < options.cluster.size(); ++i) {
    const std::string& address = options.cluster[i];
    size_t colon = address.rfind(':');
    int port = 0;
    if (address.empty() || absl::StartsWith(address, "unix:") ||
        colon == std::string::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cluster address %d '%s' is not host:port with a port from 1 to "
          "65535 (peers talk over TCP)",
          i, address));
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.cluster[j] == address) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "cluster address '%s' is given for both task %d and task %d",
            address, j, i));
      }
    }
    for (const std::string& listen : options.listen) {
      if (listen == address) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "'%s' is both a --listen address and this cluster's peer "
            "address for task %d; peers and clients need different ports",
            address, i));
      }
    }
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert and --tls-key (tls_cert and tls_key)");
  }
  if (!options.cluster_tls_ca.empty() && options.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--cluster-tls-ca needs --tls-cert and --tls-key: each task serves "
        "its peers with its own certificate");
  }
  if (!options.tls_client_ca.empty() && options.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: client certificates "
        "are checked only over TLS");
  }
  for (const std::string& address : options.listen) {
    if (absl::StartsWith(address, "unix:") || IsLoopbackAddress(address)) {
      continue;
    }
    const bool secured =
        !options.tls_cert.empty() && !options.tenants_file.empty();
    if (!secured && !options.insecure_tcp) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--listen %s is reachable from other hosts: give it TLS "
          "(--tls-cert, --tls-key) and tenants (--tenants), or pass "
          "--insecure-tcp to serve anyone who can reach it in plaintext",
          address));
    }
  }
  if (options.cluster.size() > 1 && options.cluster_secret_file.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a cluster of %d tasks needs --cluster-secret-file: the tasks prove "
        "to each other that they belong together with it",
        options.cluster.size()));
  }
  if (options.cluster_timeout <= absl::ZeroDuration() ||
      options.receive_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "cluster and receive timeouts must be positive");
  }
  if (options.host_devices < 1 || options.host_devices > 256) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host_devices is %d; it must lie in [1, 256]", options.host_devices));
  }
  const DaemonLimits& limits = options.limits;
  if (limits.max_collective_timeout <= absl::ZeroDuration() ||
      limits.max_receive_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "max_collective_timeout_seconds and max_receive_timeout_seconds must "
        "be positive");
  }
  if (options.receive_timeout > limits.max_receive_timeout) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the default receive timeout (%s) exceeds max_receive_timeout_seconds "
        "(%s)",
        absl::FormatDuration(options.receive_timeout),
        absl::FormatDuration(limits.max_receive_timeout)));
  }
  if (limits.max_program_bytes <= 0) {
    return absl::InvalidArgumentError("max_program_bytes must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path,
                                            absl::string_view what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot read %s %s: %s", what, path, std::strerror(errno)));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s is readable by others (mode %o); make it private with chmod "
        "600",
        what, path, st.st_mode & 0777));
  }
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot read %s %s", what, path));
  }
  return text.str();
}

absl::StatusOr<std::string> ReadClusterSecret(const std::string& path) {
  PJRT_ASSIGN_OR_RETURN(std::string text,
                        ReadPrivateFile(path, "cluster secret file"));
  std::string secret(absl::StripTrailingAsciiWhitespace(text));
  if (secret.size() < 16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster secret file %s holds %d characters; use at least 16 (e.g. "
        "head -c 32 /dev/urandom | base64 > %s)",
        path, secret.size(), path));
  }
  return secret;
}

namespace {

// What the command line gave, before it overrides the config file: a flag
// still at its value here was not given.
struct CommandLineFlags {
  std::string config_path;
  std::vector<std::string> listen;
  std::string platform, log_level, memory_limit, address_file;
  int host_devices = 0;
  std::string allocation_model;
  int queue_ahead = -1;
  std::optional<std::string> compile_cache_dir;
  std::string admin_token_file;
  std::string tenants_file, tls_cert, tls_key, tls_client_ca;
  std::string cluster_tls_ca;
  bool insecure_tcp = false;
  bool no_shared_memory = false;
  std::string metrics_listen;
  bool no_data_channels = false;
  int task_id = -1;
  bool task_id_from_hostname = false;
  std::string cluster, cluster_secret_file;
  double cluster_timeout = -1, receive_timeout = -1;
};

// The flags of what the daemon serves and how it runs. --help lists the
// flags in the order they are added.
void AddServingFlags(CLI::App& app, CommandLineFlags* flags) {
  app.add_option("--config", flags->config_path,
                 "TOML config file (see deploy/pjrtd.toml)")
      ->check(CLI::ExistingFile);
  app.add_option("--listen", flags->listen,
                 "Address to serve on, repeatable: unix:///path/to.sock or "
                 "host:port (port 0 picks one). Default: " +
                     std::string(kDefaultListenAddress));
  app.add_option("--platform", flags->platform,
                 "host, cuda or auto (default auto)")
      ->check(CLI::IsMember({"host", "cuda", "auto"}));
  app.add_option(
         "--host-devices", flags->host_devices,
         "Number of virtual CPU devices of the host platform (default 1)")
      ->check(CLI::Range(1, 256));
  app.add_option(
      "--memory-limit", flags->memory_limit,
      "Memory limit per device, e.g. 8GiB (default: the device's memory)");
  app.add_option("--allocation-model", flags->allocation_model,
                 "synchronous, compute-synchronized or asynchronous (default: "
                 "the platform's: synchronous on host, compute-synchronized on "
                 "cuda)")
      ->check(CLI::IsMember(
          {"synchronous", "compute-synchronized", "asynchronous"}));
  app.add_option("--queue-ahead", flags->queue_ahead,
                 "Executions the host may enqueue ahead of each device "
                 "(default 32)")
      ->check(CLI::Range(1, 100000));
  app.add_option(
      "--log-level", flags->log_level,
      "trace, debug, info, warn, error, critical or off (default info)");
  app.add_option("--compile-cache-dir", flags->compile_cache_dir,
                 "Keep compiled GPU kernels here across restarts (default "
                 "/var/cache/pjrtd; \"\" for none)");
  app.add_option(
      "--address-file", flags->address_file,
      "Write the resolved listen addresses to this file once serving");
}

// The flags of who may call and over what.
void AddAccessFlags(CLI::App& app, CommandLineFlags* flags) {
  app.add_option("--admin-token-file", flags->admin_token_file,
                 "Write an admin token here (mode 600) that lets whoever can "
                 "read it close other clients' sessions (pjrtctl sessions "
                 "--close); off by default");
  app.add_option("--tenants", flags->tenants_file,
                 "Admit only the tenants of this TOML file (mode 600), each "
                 "with its role and quotas; reloaded on SIGHUP (see "
                 "docs/security.md)");
  app.add_option("--tls-cert", flags->tls_cert,
                 "Serve TCP listeners over TLS with this PEM certificate "
                 "chain (needs --tls-key)");
  app.add_option("--tls-key", flags->tls_key,
                 "The TLS certificate's PEM private key");
  app.add_option("--tls-client-ca", flags->tls_client_ca,
                 "Require client certificates signed by this PEM CA (mutual "
                 "TLS); a certificate's subject may name a tenant");
  app.add_option("--cluster-tls-ca", flags->cluster_tls_ca,
                 "Serve and call the cluster's peers over TLS (this task's "
                 "--tls-cert, checked by peers against this PEM CA, which "
                 "signed every task's certificate)");
  app.add_flag("--insecure-tcp", flags->insecure_tcp,
               "Allow a plaintext TCP listener on a non-loopback address "
               "without TLS and tenants: anyone who reaches it may use the "
               "daemon");
  app.add_flag("--no-shared-memory", flags->no_shared_memory,
               "Refuse shared-memory regions: local clients then stream "
               "their data like remote ones");
  app.add_option("--metrics-listen", flags->metrics_listen,
                 "Serve Prometheus metrics at http://IP:PORT/metrics, e.g. "
                 "127.0.0.1:9464 (port 0 picks one; off by default)");
  app.add_flag("--no-data-channels", flags->no_data_channels,
               "Offer no data channels: TCP clients then stream their data "
               "through gRPC");
}

// The flags of the cluster and its cross-host transfers.
void AddClusterFlags(CLI::App& app, CommandLineFlags* flags) {
  app.add_option("--task-id", flags->task_id,
                 "This daemon's task id in its cluster (default 0)")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--task-id-from-hostname", flags->task_id_from_hostname,
               "Take the task id from the host name's last '-' number (the "
               "ordinal of a Kubernetes StatefulSet's pod, e.g. pjrtd-2 is "
               "task 2)");
  app.add_option("--cluster", flags->cluster,
                 "Peer addresses of every task, by task id, comma-separated: "
                 "host0:port,host1:port,... This daemon serves its peers on "
                 "the entry of its own task id.\nExample: --task-id 1 "
                 "--cluster 10.0.0.1:7100,10.0.0.2:7100 "
                 "--cluster-secret-file /etc/pjrtd/cluster.secret");
  app.add_option("--cluster-secret-file", flags->cluster_secret_file,
                 "File with the secret every task of the cluster shares "
                 "(mode 600, at least 16 characters)");
  // Positive and finite: CLI11's PositiveNumber lets NaN through.
  const CLI::Validator seconds(
      [](std::string& input) -> std::string {
        double value = 0;
        if (!absl::SimpleAtod(input, &value) || !std::isfinite(value) ||
            value <= 0) {
          return absl::StrFormat(
              "'%s' is not a positive, finite number of seconds", input);
        }
        return std::string();
      },
      "SECONDS");
  app.add_option("--cluster-timeout", flags->cluster_timeout,
                 "Seconds start-up waits for every peer (default 300)")
      ->check(seconds);
  app.add_option("--receive-timeout", flags->receive_timeout,
                 "Default seconds a cross-host receive waits for its data "
                 "(default 300)")
      ->check(seconds);
}

absl::Status ApplyConfigFile(const std::string& path, DaemonOptions* options) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot read config file %s", path));
  }
  return ApplyConfigText(text.str(), path, options);
}

// The serving and access flags given override the config file's values.
void OverrideServingAndAccessOptions(const CommandLineFlags& flags,
                                     DaemonOptions* options) {
  if (!flags.listen.empty()) options->listen = flags.listen;
  if (!flags.platform.empty()) options->platform = flags.platform;
  if (flags.host_devices > 0) options->host_devices = flags.host_devices;
  if (!flags.log_level.empty()) options->log_level = flags.log_level;
  if (!flags.allocation_model.empty()) {
    options->allocation_model = flags.allocation_model;
  }
  if (flags.queue_ahead > 0) options->queue_ahead = flags.queue_ahead;
  if (!flags.address_file.empty()) options->address_file = flags.address_file;
  if (flags.compile_cache_dir.has_value()) {
    options->compile_cache_dir = *flags.compile_cache_dir;
  }
  if (!flags.admin_token_file.empty()) {
    options->admin_token_file = flags.admin_token_file;
  }
  if (!flags.tenants_file.empty()) options->tenants_file = flags.tenants_file;
  if (!flags.tls_cert.empty()) options->tls_cert = flags.tls_cert;
  if (!flags.tls_key.empty()) options->tls_key = flags.tls_key;
  if (!flags.tls_client_ca.empty()) {
    options->tls_client_ca = flags.tls_client_ca;
  }
  if (!flags.cluster_tls_ca.empty()) {
    options->cluster_tls_ca = flags.cluster_tls_ca;
  }
  if (flags.insecure_tcp) options->insecure_tcp = true;
  if (flags.no_shared_memory) options->shared_memory = false;
  if (flags.no_data_channels) options->data_channels = false;
  if (!flags.metrics_listen.empty()) {
    options->metrics_listen = flags.metrics_listen;
  }
}

// The cluster flags given override the config file's values; the task id
// comes from the host name when asked (by either).
absl::Status OverrideClusterOptions(const CommandLineFlags& flags,
                                    DaemonOptions* options) {
  if (flags.task_id >= 0) options->task_id = flags.task_id;
  if (flags.task_id_from_hostname) options->task_id_from_hostname = true;
  if (options->task_id_from_hostname) {
    if (flags.task_id >= 0) {
      return absl::InvalidArgumentError(
          "give --task-id or --task-id-from-hostname, not both");
    }
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--task-id-from-hostname: cannot read the host name: %s",
          std::strerror(errno)));
    }
    PJRT_ASSIGN_OR_RETURN(options->task_id, TaskIdFromHostname(name));
  }
  if (!flags.cluster.empty()) {
    options->cluster =
        absl::StrSplit(flags.cluster, ',', absl::SkipWhitespace());
    for (std::string& address : options->cluster) {
      address = std::string(absl::StripAsciiWhitespace(address));
    }
  }
  if (!flags.cluster_secret_file.empty()) {
    options->cluster_secret_file = flags.cluster_secret_file;
  }
  if (flags.cluster_timeout > 0) {
    options->cluster_timeout = absl::Seconds(flags.cluster_timeout);
  }
  if (flags.receive_timeout > 0) {
    options->receive_timeout = absl::Seconds(flags.receive_timeout);
  }
  return absl::OkStatus();
}

// The options of the config file (if any) with the flags given over them,
// checked together.
absl::Status ApplyCommandLine(const CommandLineFlags& flags,
                              DaemonOptions* options) {
  if (!flags.config_path.empty()) {
    PJRT_RETURN_IF_ERROR(ApplyConfigFile(flags.config_path, options));
  }
  OverrideServingAndAccessOptions(flags, options);
  PJRT_RETURN_IF_ERROR(OverrideClusterOptions(flags, options));
  if (!flags.memory_limit.empty()) {
    auto bytes = ParseByteSize(flags.memory_limit);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--memory-limit: %s", bytes.status().message()));
    }
    options->memory_limit_bytes = *bytes;
  }
  return ValidateOptions(*options);
}

}  // namespace

ParsedCommandLine ParseCommandLine(int argc, char** argv) {
  ParsedCommandLine result;
  CLI::App app{
      "pjrtd: serves this machine's accelerators (or its CPU as virtual "
      "devices) to clients over gRPC.\n\nExample:\n  pjrtd --listen "
      "unix:///tmp/pjrtd.sock --listen 127.0.0.1:7070 --platform host "
      "--host-devices 4\n",
      "pjrtd"};
  app.set_version_flag("--version", std::string("pjrtd ") + kBuildVersion);
  CommandLineFlags flags;
  AddServingFlags(app, &flags);
  AddAccessFlags(app, &flags);
  AddClusterFlags(app, &flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    result.exit_code = code == 0 ? 0 : 2;
    return result;
  }

  absl::Status status = ApplyCommandLine(flags, &result.options);
  if (!status.ok()) {
    std::cerr << "pjrtd: " << status.message() << "\n";
    result.exit_code = 2;
  }
  return result;
}

}  // namespace pjrt::daemon
