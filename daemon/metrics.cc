#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "microhttpd.h"

namespace pjrt::daemon {
namespace {

// The services whose calls are counted by name.
constexpr const char* kServices[] = {
    "pjrt.v1.Server",
    "pjrt.v1.Sessions",
    "pjrt.v1.Buffers",
    "pjrt.v1.Executables",
    "pjrt.v1.Peer",
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection"};

constexpr const char* kCodeNames[17] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};

void AppendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[32];
    auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out.append(buffer, end);
  }
}

void AppendLabelValue(std::string& out, absl::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

void AppendHelp(std::string& out, absl::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

}  // namespace

void Exposition::Family(absl::string_view name, absl::string_view type,
                        absl::string_view help) {
  absl::StrAppend(&out_, "# HELP ", name, " ");
  AppendHelp(out_, help);
  absl::StrAppend(&out_, "\n# TYPE ", name, " ", type, "\n");
}

void Exposition::Sample(absl::string_view name, const MetricLabels& labels,
                        double value) {
  out_.append(name.data(), name.size());
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      absl::StrAppend(&out_, labels[i].first, "=\"");
      AppendLabelValue(out_, labels[i].second);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  AppendNumber(out_, value);
  out_ += '\n';
}

void Exposition::HistogramSamples(absl::string_view name,
                                  const MetricLabels& labels,
                                  const Histogram::Snapshot& snapshot) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  MetricLabels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i <= snapshot.upper_bounds.size(); ++i) {
    std::string le;
    AppendNumber(le, i < snapshot.upper_bounds.size()
                         ? snapshot.upper_bounds[i]
                         : std::numeric_limits<double>::infinity());
    with_le.back().second = std::move(le);
    Sample(bucket, with_le, static_cast<double>(snapshot.cumulative[i]));
  }
  Sample(absl::StrCat(name, "_sum"), labels, snapshot.sum);
  Sample(absl::StrCat(name, "_count"), labels,
         static_cast<double>(snapshot.count));
}

void Exposition::Gauge(absl::string_view name, absl::string_view help,
                       double value) {
  Family(name, "gauge", help);
  Sample(name, {}, value);
}

DaemonMetrics::DaemonMetrics(const ClientUsageTable* client_usage)
    : client_usage_(client_usage) {
  unknown_rpc_.service = "unknown";
  unknown_rpc_.method = "unknown";
  const google::protobuf::DescriptorPool* pool =
      google::protobuf::DescriptorPool::generated_pool();
  for (const char* name : kServices) {
    const google::protobuf::ServiceDescriptor* service =
        pool->FindServiceByName(name);
    if (service == nullptr) continue;  // not linked into this binary
    for (int i = 0; i < service->method_count(); ++i) {
      auto rpc = std::make_unique<RpcMethod>();
      rpc->service = service->full_name();
      rpc->method = service->method(i)->name();
      rpcs_.emplace(absl::StrCat("/", rpc->service, "/", rpc->method),
                    std::move(rpc));
    }
  }
}

DaemonMetrics::RpcMethod& DaemonMetrics::FindRpc(const char* method) {
  if (method == nullptr) return unknown_rpc_;
  auto it = rpcs_.find(absl::string_view(method));
  return it == rpcs_.end() ? unknown_rpc_ : *it->second;
}

void DaemonMetrics::RecordRpc(RpcMethod& rpc, int code,
                              absl::Duration elapsed) {
  if (code < 0 || code > 16) code = 2;  // UNKNOWN
  rpc.calls[code].Add();
  rpc.seconds.Observe(absl::ToDoubleSeconds(elapsed));
}

void DaemonMetrics::RecordTransfer(TransferDirection direction,
                                   TransferPath path, int64_t bytes,
                                   absl::Duration elapsed) {
  Transfer& transfer = transfers_[Index(direction, path)];
  transfer.bytes.Add(static_cast<double>(bytes));
  transfer.seconds.Observe(absl::ToDoubleSeconds(elapsed));
}

double DaemonMetrics::transfer_bytes(TransferDirection direction) const {
  double bytes = 0;
  for (int p = 0; p < kTransferPaths; ++p) {
    bytes += transfers_[Index(direction, static_cast<TransferPath>(p))]
                 .bytes.value();
  }
  return bytes;
}

std::vector<DaemonMetrics::RpcTotals> DaemonMetrics::Rpcs() const {
  std::vector<RpcTotals> totals;
  const auto add = [&](const RpcMethod& rpc) {
    RpcTotals t{.method = absl::StrCat(rpc.service, "/", rpc.method)};
    for (int code = 0; code < 17; ++code) {
      const auto calls = static_cast<int64_t>(rpc.calls[code].value());
      t.calls += calls;
      if (code != 0) t.errors += calls;
    }
    if (t.calls > 0) totals.push_back(std::move(t));
  };
  for (const auto& [name, rpc] : rpcs_) add(*rpc);
  add(unknown_rpc_);
  std::sort(totals.begin(), totals.end(),
            [](const RpcTotals& a, const RpcTotals& b) {
              return a.method < b.method;
            });
  return totals;
}

void DaemonMetrics::AddCollector(std::function<void(Exposition&)> collector) {
  MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string DaemonMetrics::Render() const {
  Exposition out;
  out.Gauge("pjrtd_start_time_seconds",
            "When the daemon started, in seconds since the Unix epoch.",
            absl::ToDoubleSeconds(start_ - absl::UnixEpoch()));

  // RPCs: every method served, with the codes it has answered.
  std::vector<const RpcMethod*> methods;
  for (const auto& [name, rpc] : rpcs_) methods.push_back(rpc.get());
  std::sort(methods.begin(), methods.end(),
            [](const RpcMethod* a, const RpcMethod* b) {
              return std::tie(a->service, a->method) <
                     std::tie(b->service, b->method);
            });
  methods.push_back(&unknown_rpc_);
  out.Family("pjrtd_rpcs_total", "counter",
             "gRPC calls finished, by service, method and status code.");
  for (const RpcMethod* rpc : methods) {
    for (int code = 0; code < 17; ++code) {
      double calls = rpc->calls[code].value();
      if (calls == 0 && code != 0) continue;
      if (calls == 0 && rpc == &unknown_rpc_) continue;
      out.Sample("pjrtd_rpcs_total",
                 {{"service", rpc->service},
                  {"method", rpc->method},
                  {"code", kCodeNames[code]}},
                 calls);
    }
  }
  out.Family("pjrtd_rpc_duration_seconds", "histogram",
             "Time from a gRPC call's arrival to its status (a stream's "
             "whole life), by service and method.");
  for (const RpcMethod* rpc : methods) {
    Histogram::Snapshot snapshot = rpc->seconds.Read();
    if (snapshot.count == 0) continue;
    out.HistogramSamples("pjrtd_rpc_duration_seconds",
                         {{"service", rpc->service}, {"method", rpc->method}},
                         snapshot);
  }

  // Transfers.
  const auto each_transfer = [&](auto&& write) {
    for (int d = 0; d < kTransferDirections; ++d) {
      for (int p = 0; p < kTransferPaths; ++p) {
        const auto direction = static_cast<TransferDirection>(d);
        const auto path = static_cast<TransferPath>(p);
        write(MetricLabels{{"direction",
                            std::string(TransferDirectionName(direction))},
                           {"path", std::string(TransferPathName(path))}},
              transfers_[Index(direction, path)]);
      }
    }
  };
  out.Family("pjrtd_transfer_bytes_total", "counter",
             "Array bytes moved between clients (or other tasks) and the "
             "devices, by direction and path.");
  each_transfer([&](const MetricLabels& labels, const Transfer& transfer) {
    out.Sample("pjrtd_transfer_bytes_total", labels, transfer.bytes.value());
  });
  out.Family("pjrtd_transfer_duration_seconds", "histogram",
             "Time of each transfer, by direction and path.");
  each_transfer([&](const MetricLabels& labels, const Transfer& transfer) {
    out.HistogramSamples("pjrtd_transfer_duration_seconds", labels,
                         transfer.seconds.Read());
  });

  out.Family("pjrtd_compile_duration_seconds", "histogram",
             "Time of each compile actually run (cache misses).");
  out.HistogramSamples("pjrtd_compile_duration_seconds", {},
                       compile_seconds_.Read());

  // Each client name's use.
  if (client_usage_ != nullptr) {
    auto clients = client_usage_->List();
    std::sort(clients.begin(), clients.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    struct Figure {
      const char* name;
      const char* help;
      Counter UsageTotals::*counter;
    };
    const Figure figures[] = {
        {"pjrtd_client_device_seconds_total",
         "Device time of the runs of each client name's sessions (the first "
         "16 names; later ones are counted as client \"other\").",
         &UsageTotals::device_seconds},
        {"pjrtd_client_executions_total",
         "Runs of each client name's sessions, one per device.",
         &UsageTotals::runs},
        {"pjrtd_client_execution_failures_total",
         "Runs of each client name's sessions that failed.",
         &UsageTotals::failed_runs},
        {"pjrtd_client_transfer_bytes_total",
         "Array bytes each client name's sessions moved, by direction.",
         nullptr},
    };
    for (const Figure& figure : figures) {
      out.Family(figure.name, "counter", figure.help);
      for (const auto& [name, totals] : clients) {
        if (figure.counter != nullptr) {
          out.Sample(figure.name, {{"client", name}},
                     ((*totals).*(figure.counter)).value());
          continue;
        }
        out.Sample(figure.name, {{"client", name}, {"direction", "to_device"}},
                   totals->bytes_to_device.value());
        out.Sample(figure.name,
                   {{"client", name}, {"direction", "from_device"}},
                   totals->bytes_from_device.value());
      }
    }
  }

  std::vector<std::function<void(Exposition&)>> collectors;
  {
    MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const auto& collect : collectors) collect(out);
  return out.Take();
}

void RecordTransfer(DaemonMetrics* metrics, SessionUsage* usage,
                    TransferDirection direction, TransferPath path,
                    int64_t bytes, absl::Time start) {
  if (metrics != nullptr) {
    metrics->RecordTransfer(direction, path, bytes, absl::Now() - start);
  }
  if (usage != nullptr) usage->Transferred(direction, bytes);
}

namespace {

class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  // The method is looked up now: the name gRPC gives may not outlive the
  // call's context (an unknown method's does not).
  RpcMetricsInterceptor(DaemonMetrics* metrics, const char* method)
      : rpc_(metrics->FindRpc(method)) {}
  // When the call ends: with the status sent, or as CANCELLED when none
  // was (the client went away first).
  ~RpcMetricsInterceptor() override {
    DaemonMetrics::RecordRpc(rpc_, code_, absl::Now() - start_);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      code_ = static_cast<int>(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  DaemonMetrics::RpcMethod& rpc_;
  const absl::Time start_ = absl::Now();
  int code_ = static_cast<int>(grpc::StatusCode::CANCELLED);
};

}  // namespace

grpc::experimental::Interceptor* RpcMetricsFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcMetricsInterceptor(metrics_, info->method());
}

namespace {

MHD_Result HandleHttp(void* self, MHD_Connection* connection, const char* url,
                      const char* method, const char*, const char*, size_t*,
                      void**) {
  const auto* server = static_cast<const MetricsServer*>(self);
  const absl::string_view verb = method;
  unsigned status = MHD_HTTP_OK;
  std::string body;
  const char* type = "text/plain; version=0.0.4; charset=utf-8";
  if (absl::string_view(url) != "/metrics") {
    status = MHD_HTTP_NOT_FOUND;
    body = "pjrtd serves its metrics at /metrics\n";
    type = "text/plain; charset=utf-8";
  } else if (verb != "GET" && verb != "HEAD") {
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
    body = "GET /metrics\n";
    type = "text/plain; charset=utf-8";
  } else {
    body = server->metrics().Render();
  }
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  MHD_Result result = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return result;
}

}  // namespace

absl::StatusOr<MetricsAddress> ParseMetricsAddress(const std::string& address) {
  // IP:PORT, an IPv6 address in brackets.
  MetricsAddress parsed;
  const size_t colon = address.rfind(':');
  parsed.host = colon == std::string::npos ? "" : address.substr(0, colon);
  if (parsed.host == "localhost") parsed.host = "127.0.0.1";
  const std::string& host = parsed.host;
  const bool ipv6 =
      host.size() > 2 && host.front() == '[' && host.back() == ']';
  bool ok = colon != std::string::npos &&
            absl::SimpleAtoi(address.substr(colon + 1), &parsed.port) &&
            parsed.port >= 0 && parsed.port <= 65535;
  const auto port = htons(static_cast<uint16_t>(parsed.port));
  if (ok && ipv6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&parsed.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = port;
    ok = inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(),
                   &in6->sin6_addr) == 1;
  } else if (ok) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&parsed.storage);
    in4->sin_family = AF_INET;
    in4->sin_port = port;
    ok = inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--metrics-listen \"%s\" is not IP:PORT (e.g. 127.0.0.1:9464, or "
        "[::1]:9464; port 0 picks one)",
        address));
  }
  return parsed;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, const DaemonMetrics* metrics) {
  PJRT_ASSIGN_OR_RETURN(MetricsAddress parsed, ParseMetricsAddress(address));
  const bool ipv6 = parsed.storage.ss_family == AF_INET6;
  sockaddr_storage storage = parsed.storage;
  const std::string& host = parsed.host;
  const int port = parsed.port;
  auto server = std::unique_ptr<MetricsServer>(new MetricsServer(metrics));
  // libmicrohttpd's messages go to the daemon's log.
  const auto log = [](void*, const char* format, va_list args) {
    char message[512];
    vsnprintf(message, sizeof(message), format, args);
    spdlog::warn("metrics server: {}",
                 absl::StripTrailingAsciiWhitespace(message));
  };
  void (*logger)(void*, const char*, va_list) = log;
  server->daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
          (ipv6 ? MHD_USE_IPv6 : 0),
      0, nullptr, nullptr, &HandleHttp, server.get(),
      MHD_OPTION_EXTERNAL_LOGGER, logger, nullptr, MHD_OPTION_SOCK_ADDR,
      reinterpret_cast<sockaddr*>(&storage), MHD_OPTION_CONNECTION_LIMIT, 16u,
      MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "could not serve metrics on %s (address in use, not an address of "
        "this host, or no permission)",
        address));
  }
  const MHD_DaemonInfo* info =
      MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  const int bound = info != nullptr ? info->port : port;
  server->url_ = absl::StrFormat("http://%s:%d/metrics", host, bound);
  return server;
}

MetricsServer::~MetricsServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace pjrt::daemon
