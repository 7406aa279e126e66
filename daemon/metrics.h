// The daemon's metrics, for Prometheus: what it has (devices' memory,
// sessions, buffers, compile cache) read when scraped, and what it did
// (RPCs, transfers, compiles, each client name's use) counted as it happens.
//
// DaemonMetrics::Render writes the text exposition format (version 0.0.4);
// MetricsServer serves it over HTTP on --metrics-listen (libmicrohttpd). RPCs
// are counted by one gRPC server interceptor (RpcMetricsFactory), not by the
// handlers. Names follow Prometheus's conventions: a pjrtd_ prefix, base
// units in the name (_bytes, _seconds), _total on counters. docs/metrics.md
// lists them.
#ifndef PJRT_DAEMON_METRICS_H_
#define PJRT_DAEMON_METRICS_H_

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "daemon/usage.h"
#include "grpcpp/support/server_interceptor.h"

struct MHD_Daemon;

namespace pjrt::daemon {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Writes samples in the text exposition format. Each family's samples are
// written together, after its HELP and TYPE lines.
class Exposition {
 public:
  // `type`: "counter", "gauge" or "histogram".
  void Family(absl::string_view name, absl::string_view type,
              absl::string_view help);
  void Sample(absl::string_view name, const MetricLabels& labels, double value);
  // The _bucket, _sum and _count samples of a histogram family `name`.
  void HistogramSamples(absl::string_view name, const MetricLabels& labels,
                        const Histogram::Snapshot& snapshot);
  // One gauge family with a single sample.
  void Gauge(absl::string_view name, absl::string_view help, double value);

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class DaemonMetrics {
 public:
  // `client_usage`: every client name's totals (ClientUsageTable), exported
  // per name.
  explicit DaemonMetrics(const ClientUsageTable* client_usage);

  // The counters of one gRPC method, by full name
  // ("/pjrt.v1.Buffers/Upload"); a method the daemon does not serve (or
  // none) gets those of service "unknown". Valid as long as this object.
  struct RpcMethod {
    std::string service;
    std::string method;
    // By google.rpc code, 0 (OK) to 16 (UNAUTHENTICATED).
    std::array<Counter, 17> calls;
    Histogram seconds{DurationBuckets()};
  };
  RpcMethod& FindRpc(const char* method);
  static void RecordRpc(RpcMethod& rpc, int code, absl::Duration elapsed);
  void RecordRpc(const char* method, int code, absl::Duration elapsed) {
    RecordRpc(FindRpc(method), code, elapsed);
  }

  void RecordTransfer(TransferDirection direction, TransferPath path,
                      int64_t bytes, absl::Duration elapsed);
  void RecordCompile(absl::Duration elapsed) {
    compile_seconds_.Observe(absl::ToDoubleSeconds(elapsed));
  }

  // Writes what it has now: called at every scrape, after the counters
  // above. The daemon adds one for its devices, sessions, caches.
  void AddCollector(std::function<void(Exposition&)> collector);

  std::string Render() const;

  // Bytes moved one way, over every path (for GetStats).
  double transfer_bytes(TransferDirection direction) const;

  struct RpcTotals {
    std::string method;  // "pjrt.v1.Buffers/Upload"
    int64_t calls = 0;
    int64_t errors = 0;
  };
  // Every method called at least once, by name.
  std::vector<RpcTotals> Rpcs() const;

 private:
  struct Transfer {
    Counter bytes;
    Histogram seconds{DurationBuckets()};
  };
  static int Index(TransferDirection direction, TransferPath path) {
    return static_cast<int>(direction) * kTransferPaths +
           static_cast<int>(path);
  }

  const ClientUsageTable* const client_usage_;
  const absl::Time start_ = absl::Now();
  // Built once from the services' descriptors; read without a lock.
  absl::flat_hash_map<std::string, std::unique_ptr<RpcMethod>> rpcs_;
  RpcMethod unknown_rpc_;
  std::array<Transfer, kTransferDirections * kTransferPaths> transfers_;
  Histogram compile_seconds_{DurationBuckets()};

  mutable Mutex mu_;
  std::vector<std::function<void(Exposition&)>> collectors_
      ABSL_GUARDED_BY(mu_);
};

// Counts a transfer that started at `start` and just finished: in `metrics`
// (may be null) and in `usage` (may be null), the usage of the session that
// moved the bytes.
void RecordTransfer(DaemonMetrics* metrics, SessionUsage* usage,
                    TransferDirection direction, TransferPath path,
                    int64_t bytes, absl::Time start);

// Counts every call of the server it is installed in (see
// grpc::ServerBuilder::experimental().SetInterceptorCreators).
class RpcMetricsFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(DaemonMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  DaemonMetrics* const metrics_;
};

// A --metrics-listen address: "IP:PORT" or "[IPv6]:PORT" ("localhost" is
// 127.0.0.1); INVALID_ARGUMENT naming it otherwise.
struct MetricsAddress {
  std::string host;
  int port = 0;
  sockaddr_storage storage = {};
};
absl::StatusOr<MetricsAddress> ParseMetricsAddress(const std::string& address);

// Serves GET /metrics over plain HTTP (libmicrohttpd, one thread).
class MetricsServer {
 public:
  // `address`: "IP:PORT" or "[IPv6]:PORT"; port 0 picks one.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, const DaemonMetrics* metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // "http://IP:PORT/metrics", the port resolved.
  const std::string& url() const { return url_; }
  const DaemonMetrics& metrics() const { return *metrics_; }

 private:
  explicit MetricsServer(const DaemonMetrics* metrics) : metrics_(metrics) {}
  const DaemonMetrics* const metrics_;
  MHD_Daemon* daemon_ = nullptr;
  std::string url_;
};

}  // namespace pjrt::daemon

#endif  // PJRT_DAEMON_METRICS_H_
