// The C++ client's own value types: what the daemon says about itself, its
// devices, sessions, buffers and programs, as plain structs. They mirror the
// messages of proto/pjrt/v1 field for field (times as absl::Duration), so
// that a program using the client needs neither protobuf's headers nor the
// generated code; the client converts at the wire.
#ifndef PJRT_CLIENT_CPP_TYPES_H_
#define PJRT_CLIENT_CPP_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pjrt_client {

// Element type of an array. The numbers are XLA's PrimitiveType numbers (as
// on the wire: pjrt.v1.DType).
enum class DType : int32_t {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kC64 = 15,
  kBF16 = 16,
  kC128 = 18,
  kF8E5M2 = 19,
  kF8E4M3FN = 20,
  kS4 = 21,
  kU4 = 22,
  kF8E4M3B11FNUZ = 23,
  kF8E5M2FNUZ = 24,
  kF8E4M3FNUZ = 25,
  kS2 = 26,
  kU2 = 27,
  kF8E4M3 = 28,
  kF8E3M4 = 29,
  kF4E2M1FN = 32,
  kF8E8M0FNU = 33,
  kF6E2M3FN = 34,
  kF6E3M2FN = 35,
};

// "f32", "bf16", ...: an element type as HLO spells it ("dtype#N" if
// unknown).
std::string DTypeName(DType dtype);

// True for the floats narrower than 16 bits (the f8 types, f6e2m3fn,
// f6e3m2fn and f4e2m1fn), held as one code per byte (f4e2m1fn packed two
// per byte on the wire, like s4).
bool IsMiniFloat(DType dtype);
// Bytes per element (1 for pred, and for the packed types once unpacked);
// 0 if unknown.
int DTypeByteWidth(DType dtype);
// Bytes of `count` elements on the wire and in buffers (s4, u4 and f4e2m1fn
// packed two per byte, element 2i in the high nibble of byte i; s2 and u2
// four per byte).
int64_t DTypeBytes(DType dtype, int64_t count);

// A dense array shape. Data is row-major, little-endian, unpadded; pred is
// one byte per element.
struct ArrayShape {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;

  friend bool operator==(const ArrayShape& a, const ArrayShape& b) {
    return a.dtype == b.dtype && a.dims == b.dims;
  }
  friend bool operator!=(const ArrayShape& a, const ArrayShape& b) {
    return !(a == b);
  }
};

// "f32[2,3]", "pred[]": a shape as HLO spells it.
std::string ShapeToString(const ArrayShape& shape);

struct Device {
  // Global id: the same whichever task of the cluster is asked.
  int id = 0;
  // Ordinal of the device on its own host.
  int local_hardware_id = 0;
  // The task (daemon) that owns the device.
  int task_id = 0;
  // "host" or "cuda".
  std::string platform;
  // Human-readable kind, e.g. "cpu" or "NVIDIA H200".
  std::string kind;
  // Memory the daemon may allocate on the device.
  int64_t memory_bytes = 0;
  // True when this daemon owns the device (buffers can be placed on it).
  bool addressable = false;
  // Empty while the device works; once it has failed for good, why.
  std::string unhealthy_reason;
};

// What the daemon says about itself (Client::server_info()).
struct ServerInfo {
  std::string build_version;
  // The protocol revisions it speaks.
  uint32_t protocol_version_min = 0;
  uint32_t protocol_version_max = 0;
  std::string platform;
  std::vector<std::string> capabilities;
  int task_id = 0;
  int task_count = 0;
  int addressable_device_count = 0;
  int64_t pid = 0;
  absl::Duration uptime;
  // Where its fast paths listen (empty: not offered).
  std::string region_socket;
  std::string execute_lane_socket;
  // The compiler of the platform's programs; empty when the daemon cannot
  // compile for its platform.
  std::string backend;
  std::string metrics_url;
};

struct DeviceStats {
  int device_id = 0;
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_limit = 0;
  int64_t num_allocs = 0;
  int64_t total_allocs = 0;
  int64_t largest_free_block = 0;
  double fragmentation = 0;
  int queue_depth = 0;
  int64_t bytes_reserved = 0;
  int64_t executions = 0;
  int64_t execution_failures = 0;
  absl::Duration busy;
};

struct RpcStats {
  std::string method;
  int64_t calls = 0;
  int64_t errors = 0;
};

struct CompileCacheStats {
  int entries = 0;
  int capacity = 0;
  int64_t hits = 0;
  int64_t compiles = 0;
  int64_t failures = 0;
  int64_t evictions = 0;
};

// The daemon's counters (Client::Stats()).
struct Stats {
  std::vector<DeviceStats> devices;
  int session_count = 0;
  int64_t buffer_count = 0;
  int64_t executable_count = 0;
  CompileCacheStats compile_cache;
  int cross_host_receives_pending = 0;
  int64_t cross_host_bytes_received = 0;
  int64_t region_count = 0;
  int64_t region_bytes = 0;
  int64_t data_channel_count = 0;
  int64_t execute_lane_count = 0;
  std::vector<RpcStats> rpcs;
  int64_t bytes_to_device = 0;
  int64_t bytes_from_device = 0;
};

struct DeviceTime {
  int device_id = 0;
  absl::Duration time;
};

// One open session of the daemon (Client::Sessions()).
struct SessionInfo {
  uint64_t public_id = 0;
  std::string client_name;
  std::string peer;
  bool attached = false;
  int64_t buffer_count = 0;
  int64_t bytes = 0;
  absl::Duration age;
  // Until the lease expires; zero while attached.
  absl::Duration lease_remaining;
  int64_t executable_count = 0;
  std::string tenant;
  // How long its runs held the devices, in all and per device.
  absl::Duration device_time;
  std::vector<DeviceTime> device_times;
  int64_t executions = 0;
  int64_t failed_executions = 0;
  int64_t bytes_to_device = 0;
  int64_t bytes_from_device = 0;
  int64_t peak_bytes = 0;
};

struct TaskStatus {
  int task_id = 0;
  std::string address;
  // The task that answered.
  bool self = false;
  bool reachable = false;
  // Why it is not reachable.
  std::string error;
  int device_count = 0;
  absl::Duration round_trip;
};

// The tasks of the daemon's cluster (Client::ClusterStatus()).
struct ClusterStatus {
  // The task that answered.
  int task_id = 0;
  std::vector<TaskStatus> tasks;
};

// How Compile reads the program text.
enum class ProgramFormat {
  // StableHLO when the text starts with `module`, `func.func` or a `#`
  // alias; HLO otherwise.
  kDetect = 0,
  // HLO text, as XLA's HloModule::ToString() prints it.
  kHlo = 1,
  // StableHLO in MLIR's textual form (pretty or generic).
  kStableHlo = 2,
};

struct CompileOptions {
  // 0: the module header's replica_count / num_partitions (default 1).
  int num_replicas = 0;
  int num_partitions = 0;
  // Global device ids, replica-major: the device of replica r, partition p
  // is device_assignment[r * num_partitions + p]. Empty: the default
  // assignment (device r * num_partitions + p).
  std::vector<int> device_assignment;
  // No assignment: one replica, one partition, runs on any device chosen at
  // execution.
  bool portable = false;
  // Parameters that input_output_alias would donate but that must be copied
  // instead, so that the caller can keep using the argument.
  std::vector<int> non_donatable_parameters;
  // Bound on any wait for a peer at a collective; zero means 30 s.
  absl::Duration collective_timeout;
  ProgramFormat program_format = ProgramFormat::kDetect;
};

// A buffer as the daemon describes it (Buffer::info(), Buffer::Describe()).
struct BufferInfo {
  uint64_t handle = 0;
  // Unset (kInvalid, no dims) for a tuple.
  ArrayShape shape;
  int device_id = 0;
  int64_t size_bytes = 0;
  // True once the contents are defined (or the producer failed).
  bool ready = false;
  // When ready and the producer failed: the status code and message every
  // reader of the buffer gets.
  int error_code = 0;
  std::string error_message;
  // A tuple holds no data itself; its elements, each with its own handle,
  // do.
  bool is_tuple = false;
  std::vector<BufferInfo> tuple_elements;
  // The contents, present only when the call that made the buffer fetched
  // them (ExecuteOptions::fetch_results).
  std::optional<std::string> data;
};

// What compiling a program gave (Executable::info()).
struct CompileInfo {
  uint64_t executable_handle = 0;
  // The HloModule's name.
  std::string name;
  // One per array the program takes (a tuple parameter replaced by its
  // elements) and one per result (a tuple root's elements, flattened).
  std::vector<ArrayShape> parameter_shapes;
  std::vector<ArrayShape> result_shapes;
  bool result_is_tuple = false;
  // Time this call spent compiling or waiting for a compile of the same
  // program (near zero on a cache hit).
  absl::Duration compile_time;
  bool cache_hit = false;
  // Hex SHA-256 of program and options: the cache key.
  std::string fingerprint;
  int num_replicas = 0;
  int num_partitions = 0;
  bool portable = false;
  // Replica-major, as in CompileOptions; empty when portable.
  std::vector<int> device_assignment;
  std::vector<int> addressable_device_ids;
  std::vector<int> donated_parameters;
  bool parameter_is_tuple = false;
};

// A finished Buffer::CopyToRemoteDevice.
struct RemoteCopy {
  int64_t bytes = 0;
  int receiver_task_id = 0;
  absl::Duration duration;
};

}  // namespace pjrt_client

#endif  // PJRT_CLIENT_CPP_TYPES_H_
