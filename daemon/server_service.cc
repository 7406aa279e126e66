#include <unistd.h>

#include "absl/strings/str_format.h"
#include "base/version.h"
#include "daemon/proto_convert.h"
#include "daemon/services.h"

namespace pjrt::daemon {

absl::Status ServerService::GetServerInfoImpl(grpc::ServerContext* context,
                                              const v1::GetServerInfoRequest*,
                                              v1::ServerInfo* response) {
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return caller.status();
  response->set_build_version(kBuildVersion);
  response->set_protocol_version_min(kProtocolRevisionMin);
  response->set_protocol_version_max(kProtocolRevisionMax);
  response->set_platform(std::string(client_->platform_name()));
  if (auto backend = client_->backend(); backend.ok()) {
    response->set_backend((*backend)->Describe());
  }
  for (const char* capability :
       {"sessions", "sessions.attach", "buffers", "buffers.copy_to_device",
        "buffers.ready_state", "executables", "stats", "cluster",
        "buffers.cross_host", "executables.stream", "executables.stablehlo"}) {
    response->add_capabilities(capability);
  }
  if (!region_socket_.empty()) {
    response->add_capabilities("buffers.shared_memory");
    response->set_region_socket(region_socket_);
  }
  if (lanes_ != nullptr) {
    response->add_capabilities("executables.lane");
    response->set_execute_lane_socket(lanes_->address());
  }
  if (!metrics_url_.empty()) {
    response->add_capabilities("metrics");
    response->set_metrics_url(metrics_url_);
  }
  response->set_task_id(client_->task_id());
  response->set_task_count(cluster_->task_count());
  response->set_addressable_device_count(
      static_cast<int>(client_->devices().size()));
  response->set_pid(getpid());
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  return absl::OkStatus();
}

absl::Status ServerService::ListDevicesImpl(grpc::ServerContext* context,
                                            const v1::ListDevicesRequest*,
                                            v1::ListDevicesResponse* response) {
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return caller.status();
  if (!cluster_->multi_task()) {
    for (const runtime::Device* device : client_->devices()) {
      v1::Device* proto = response->add_devices();
      DeviceToProto(*device, proto);
      DeviceHealthToProto(*client_->platform(), *device, proto);
    }
    return absl::OkStatus();
  }
  for (v1::Device& device : cluster_->AllDevices()) {
    v1::Device* proto = response->add_devices();
    *proto = std::move(device);
    if (!proto->addressable()) continue;
    // This daemon's own devices: how they are now.
    for (const runtime::Device* mine : client_->devices()) {
      if (mine->id() == proto->id())
        DeviceHealthToProto(*client_->platform(), *mine, proto);
    }
  }
  return absl::OkStatus();
}

absl::Status ServerService::GetClusterStatusImpl(
    grpc::ServerContext* context, const v1::GetClusterStatusRequest* request,
    v1::ClusterStatus* response) {
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return caller.status();
  absl::Status admin =
      Authenticator::RequireAdmin(*caller, "reading the cluster's status");
  if (!admin.ok()) return admin;
  double seconds = request->timeout_seconds();
  // NaN fails the comparison too.
  if (!(seconds >= 0 && seconds <= 60)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("timeout_seconds is %g; give 0 for 2 seconds, or up "
                        "to 60",
                        seconds));
  }
  *response = cluster_->Status(seconds == 0 ? absl::Seconds(2)
                                            : absl::Seconds(seconds));
  return absl::OkStatus();
}

absl::Status ServerService::GetStatsImpl(grpc::ServerContext* context,
                                         const v1::GetStatsRequest*,
                                         v1::Stats* response) {
  // Daemon-wide figures tell of every tenant's work: admins only.
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return caller.status();
  absl::Status admin =
      Authenticator::RequireAdmin(*caller, "reading the daemon's stats");
  if (!admin.ok()) return admin;
  for (const runtime::Device* device : client_->devices()) {
    device::AllocatorStats stats = device->allocator()->GetStats();
    v1::DeviceStats* out = response->add_devices();
    out->set_device_id(device->id());
    out->set_bytes_in_use(stats.bytes_in_use);
    out->set_peak_bytes_in_use(stats.peak_bytes_in_use);
    out->set_bytes_limit(stats.bytes_limit);
    out->set_num_allocs(stats.num_allocs);
    out->set_total_allocs(stats.total_allocs);
    out->set_largest_free_block(stats.largest_free_block);
    out->set_fragmentation(stats.fragmentation);
    out->set_bytes_reserved(stats.bytes_reserved);
    out->set_queue_depth(
        static_cast<int32_t>(device->local_device_state()->queue_depth()));
    const auto& runs = device->local_device_state()->run_stats();
    out->set_executions(static_cast<int64_t>(runs.started.value()));
    out->set_execution_failures(static_cast<int64_t>(runs.failed.value()));
    out->set_busy_seconds(runs.busy_seconds.value());
  }
  if (metrics_ != nullptr) {
    for (const DaemonMetrics::RpcTotals& rpc : metrics_->Rpcs()) {
      v1::RpcStats* out = response->add_rpcs();
      out->set_method(rpc.method);
      out->set_calls(rpc.calls);
      out->set_errors(rpc.errors);
    }
    response->set_bytes_to_device(static_cast<int64_t>(
        metrics_->transfer_bytes(TransferDirection::kToDevice)));
    response->set_bytes_from_device(static_cast<int64_t>(
        metrics_->transfer_bytes(TransferDirection::kFromDevice)));
  }
  response->set_session_count(sessions_->size());
  response->set_buffer_count(sessions_->buffer_count());
  response->set_executable_count(sessions_->executable_count());
  response->set_cross_host_receives_pending(receives_->pending());
  response->set_cross_host_bytes_received(receives_->bytes_received());
  auto [region_count, region_bytes] = sessions_->region_totals();
  response->set_region_count(region_count);
  response->set_region_bytes(region_bytes);
  if (channels_ != nullptr) {
    response->set_data_channel_count(channels_->channels());
  }
  if (lanes_ != nullptr) response->set_execute_lane_count(lanes_->lanes());
  CompileCacheStats cache = compile_cache_->stats();
  v1::CompileCacheStats* out = response->mutable_compile_cache();
  out->set_entries(cache.entries);
  out->set_capacity(cache.capacity);
  out->set_hits(cache.hits);
  out->set_compiles(cache.compiles);
  out->set_failures(cache.failures);
  out->set_evictions(cache.evictions);
  return absl::OkStatus();
}

absl::Status ServerService::PingImpl(grpc::ServerContext* context,
                                     const v1::PingRequest*,
                                     v1::PingResponse*) {
  auto caller = auth_->Authenticate(*context);
  if (!caller.ok()) return caller.status();
  return absl::OkStatus();
}

}  // namespace pjrt::daemon
