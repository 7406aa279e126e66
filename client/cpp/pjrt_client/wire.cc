#include "client/cpp/pjrt_client/wire.h"

#include <utility>

namespace pjrt_client {

namespace v1 = ::pjrt::v1;

namespace {

// The value types carry the wire's numbers.
static_assert(static_cast<int>(DType::kPred) == v1::DTYPE_PRED);
static_assert(static_cast<int>(DType::kS8) == v1::DTYPE_S8);
static_assert(static_cast<int>(DType::kS16) == v1::DTYPE_S16);
static_assert(static_cast<int>(DType::kS32) == v1::DTYPE_S32);
static_assert(static_cast<int>(DType::kS64) == v1::DTYPE_S64);
static_assert(static_cast<int>(DType::kU8) == v1::DTYPE_U8);
static_assert(static_cast<int>(DType::kU16) == v1::DTYPE_U16);
static_assert(static_cast<int>(DType::kU32) == v1::DTYPE_U32);
static_assert(static_cast<int>(DType::kU64) == v1::DTYPE_U64);
static_assert(static_cast<int>(DType::kF16) == v1::DTYPE_F16);
static_assert(static_cast<int>(DType::kF32) == v1::DTYPE_F32);
static_assert(static_cast<int>(DType::kF64) == v1::DTYPE_F64);
static_assert(static_cast<int>(DType::kC64) == v1::DTYPE_C64);
static_assert(static_cast<int>(DType::kBF16) == v1::DTYPE_BF16);
static_assert(static_cast<int>(DType::kC128) == v1::DTYPE_C128);
static_assert(static_cast<int>(DType::kF8E5M2) == v1::DTYPE_F8E5M2);
static_assert(static_cast<int>(DType::kF8E4M3FN) == v1::DTYPE_F8E4M3FN);
static_assert(static_cast<int>(DType::kS4) == v1::DTYPE_S4);
static_assert(static_cast<int>(DType::kU4) == v1::DTYPE_U4);
static_assert(static_cast<int>(DType::kF8E4M3B11FNUZ) ==
              v1::DTYPE_F8E4M3B11FNUZ);
static_assert(static_cast<int>(DType::kF8E5M2FNUZ) == v1::DTYPE_F8E5M2FNUZ);
static_assert(static_cast<int>(DType::kF8E4M3FNUZ) == v1::DTYPE_F8E4M3FNUZ);
static_assert(static_cast<int>(DType::kF8E4M3) == v1::DTYPE_F8E4M3);
static_assert(static_cast<int>(DType::kF8E3M4) == v1::DTYPE_F8E3M4);
static_assert(static_cast<int>(DType::kF4E2M1FN) == v1::DTYPE_F4E2M1FN);
static_assert(static_cast<int>(DType::kS2) == v1::DTYPE_S2);
static_assert(static_cast<int>(DType::kU2) == v1::DTYPE_U2);
static_assert(static_cast<int>(DType::kF8E8M0FNU) == v1::DTYPE_F8E8M0FNU);
static_assert(static_cast<int>(DType::kF6E2M3FN) == v1::DTYPE_F6E2M3FN);
static_assert(static_cast<int>(DType::kF6E3M2FN) == v1::DTYPE_F6E3M2FN);
static_assert(static_cast<int>(ProgramFormat::kDetect) ==
              v1::PROGRAM_FORMAT_UNSPECIFIED);
static_assert(static_cast<int>(ProgramFormat::kHlo) == v1::PROGRAM_FORMAT_HLO);
static_assert(static_cast<int>(ProgramFormat::kStableHlo) ==
              v1::PROGRAM_FORMAT_STABLEHLO);

template <typename T, typename Repeated>
std::vector<T> ToVector(const Repeated& repeated) {
  return std::vector<T>(repeated.begin(), repeated.end());
}

}  // namespace

// A number the daemon sends that this client does not know stays as it is
// (DTypeName prints it as "dtype#N").
v1::DType ToWire(DType dtype) { return static_cast<v1::DType>(dtype); }
DType FromWire(v1::DType dtype) { return static_cast<DType>(dtype); }

void ToWire(const ArrayShape& shape, v1::ArrayShape* out) {
  out->set_dtype(ToWire(shape.dtype));
  out->mutable_dims()->Assign(shape.dims.begin(), shape.dims.end());
}

ArrayShape FromWire(const v1::ArrayShape& shape) {
  return {FromWire(shape.dtype()), ToVector<int64_t>(shape.dims())};
}

void ToWire(const CompileOptions& options, v1::CompileOptions* out) {
  out->set_num_replicas(options.num_replicas);
  out->set_num_partitions(options.num_partitions);
  out->mutable_device_assignment()->Assign(options.device_assignment.begin(),
                                           options.device_assignment.end());
  out->set_portable(options.portable);
  out->mutable_non_donatable_parameters()->Assign(
      options.non_donatable_parameters.begin(),
      options.non_donatable_parameters.end());
  out->set_collective_timeout_seconds(
      absl::ToDoubleSeconds(options.collective_timeout));
  out->set_program_format(
      static_cast<v1::ProgramFormat>(options.program_format));
}

Device FromWire(const v1::Device& device) {
  return {.id = device.id(),
          .local_hardware_id = device.local_hardware_id(),
          .task_id = device.task_id(),
          .platform = device.platform(),
          .kind = device.kind(),
          .memory_bytes = device.memory_bytes(),
          .addressable = device.addressable(),
          .unhealthy_reason = device.unhealthy_reason()};
}

ServerInfo FromWire(const v1::ServerInfo& info) {
  return {.build_version = info.build_version(),
          .protocol_version_min = info.protocol_version_min(),
          .protocol_version_max = info.protocol_version_max(),
          .platform = info.platform(),
          .capabilities = ToVector<std::string>(info.capabilities()),
          .task_id = info.task_id(),
          .task_count = info.task_count(),
          .addressable_device_count = info.addressable_device_count(),
          .pid = info.pid(),
          .uptime = absl::Seconds(info.uptime_seconds()),
          .region_socket = info.region_socket(),
          .execute_lane_socket = info.execute_lane_socket(),
          .backend = info.backend(),
          .metrics_url = info.metrics_url()};
}

Stats FromWire(const v1::Stats& stats) {
  Stats out;
  for (const v1::DeviceStats& d : stats.devices()) {
    out.devices.push_back({.device_id = d.device_id(),
                           .bytes_in_use = d.bytes_in_use(),
                           .peak_bytes_in_use = d.peak_bytes_in_use(),
                           .bytes_limit = d.bytes_limit(),
                           .num_allocs = d.num_allocs(),
                           .total_allocs = d.total_allocs(),
                           .largest_free_block = d.largest_free_block(),
                           .fragmentation = d.fragmentation(),
                           .queue_depth = d.queue_depth(),
                           .bytes_reserved = d.bytes_reserved(),
                           .executions = d.executions(),
                           .execution_failures = d.execution_failures(),
                           .busy = absl::Seconds(d.busy_seconds())});
  }
  out.session_count = stats.session_count();
  out.buffer_count = stats.buffer_count();
  out.executable_count = stats.executable_count();
  const v1::CompileCacheStats& cache = stats.compile_cache();
  out.compile_cache = {.entries = cache.entries(),
                       .capacity = cache.capacity(),
                       .hits = cache.hits(),
                       .compiles = cache.compiles(),
                       .failures = cache.failures(),
                       .evictions = cache.evictions()};
  out.cross_host_receives_pending = stats.cross_host_receives_pending();
  out.cross_host_bytes_received = stats.cross_host_bytes_received();
  out.region_count = stats.region_count();
  out.region_bytes = stats.region_bytes();
  out.data_channel_count = stats.data_channel_count();
  out.execute_lane_count = stats.execute_lane_count();
  for (const v1::RpcStats& rpc : stats.rpcs()) {
    out.rpcs.push_back(
        {.method = rpc.method(), .calls = rpc.calls(), .errors = rpc.errors()});
  }
  out.bytes_to_device = stats.bytes_to_device();
  out.bytes_from_device = stats.bytes_from_device();
  return out;
}

SessionInfo FromWire(const v1::SessionInfo& session) {
  SessionInfo out{
      .public_id = session.public_id(),
      .client_name = session.client_name(),
      .peer = session.peer(),
      .attached = session.attached(),
      .buffer_count = session.buffer_count(),
      .bytes = session.bytes(),
      .age = absl::Seconds(session.age_seconds()),
      .lease_remaining = absl::Seconds(session.lease_remaining_seconds()),
      .executable_count = session.executable_count(),
      .tenant = session.tenant(),
      .device_time = absl::Seconds(session.device_seconds()),
      .executions = session.executions(),
      .failed_executions = session.failed_executions(),
      .bytes_to_device = session.bytes_to_device(),
      .bytes_from_device = session.bytes_from_device(),
      .peak_bytes = session.peak_bytes()};
  for (const v1::DeviceTime& d : session.device_times()) {
    out.device_times.push_back(
        {.device_id = d.device_id(), .time = absl::Seconds(d.seconds())});
  }
  return out;
}

ClusterStatus FromWire(const v1::ClusterStatus& cluster) {
  ClusterStatus out{.task_id = cluster.task_id()};
  for (const v1::TaskStatus& task : cluster.tasks()) {
    out.tasks.push_back(
        {.task_id = task.task_id(),
         .address = task.address(),
         .self = task.self(),
         .reachable = task.reachable(),
         .error = task.error(),
         .device_count = task.device_count(),
         .round_trip = absl::Milliseconds(task.round_trip_ms())});
  }
  return out;
}

BufferInfo FromWire(v1::BufferInfo&& info) {
  BufferInfo out{.handle = info.handle(),
                 .shape = FromWire(info.shape()),
                 .device_id = info.device_id(),
                 .size_bytes = info.size_bytes(),
                 .ready = info.ready(),
                 .error_code = info.error_code(),
                 .error_message = std::move(*info.mutable_error_message()),
                 .is_tuple = info.is_tuple()};
  out.tuple_elements.reserve(info.tuple_elements_size());
  for (v1::BufferInfo& element : *info.mutable_tuple_elements()) {
    out.tuple_elements.push_back(FromWire(std::move(element)));
  }
  if (info.has_data()) out.data = std::move(*info.mutable_data());
  return out;
}

CompileInfo FromWire(const v1::CompileResponse& response) {
  CompileInfo out{
      .executable_handle = response.executable_handle(),
      .name = response.name(),
      .result_is_tuple = response.result_is_tuple(),
      .compile_time = absl::Seconds(response.compile_seconds()),
      .cache_hit = response.cache_hit(),
      .fingerprint = response.fingerprint(),
      .num_replicas = response.num_replicas(),
      .num_partitions = response.num_partitions(),
      .portable = response.portable(),
      .device_assignment = ToVector<int>(response.device_assignment()),
      .addressable_device_ids =
          ToVector<int>(response.addressable_device_ids()),
      .donated_parameters = ToVector<int>(response.donated_parameters()),
      .parameter_is_tuple = response.parameter_is_tuple()};
  for (const v1::ArrayShape& shape : response.parameter_shapes()) {
    out.parameter_shapes.push_back(FromWire(shape));
  }
  for (const v1::ArrayShape& shape : response.result_shapes()) {
    out.result_shapes.push_back(FromWire(shape));
  }
  return out;
}

RemoteCopy FromWire(const v1::CopyToRemoteDeviceResponse& response) {
  return {.bytes = response.bytes(),
          .receiver_task_id = response.receiver_task_id(),
          .duration = absl::Seconds(response.seconds())};
}

}  // namespace pjrt_client
