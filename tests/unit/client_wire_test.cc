// The C++ client's value types against the protocol's messages: every field
// crosses the wire conversion (client/cpp/pjrt_client/wire.h) intact.
#include <cctype>
#include <string>

#include "client/cpp/pjrt_client/wire.h"
#include "gtest/gtest.h"

namespace pjrt_client {
namespace {

namespace v1 = ::pjrt::v1;

TEST(ClientWire, EveryDTypeOfTheProtocolKeepsItsNumberAndHasAName) {
  const google::protobuf::EnumDescriptor* dtypes = v1::DType_descriptor();
  for (int i = 0; i < dtypes->value_count(); ++i) {
    const auto wire = static_cast<v1::DType>(dtypes->value(i)->number());
    SCOPED_TRACE(dtypes->value(i)->name());
    EXPECT_EQ(ToWire(FromWire(wire)), wire);
    if (wire == v1::DTYPE_UNSPECIFIED) continue;
    // "DTYPE_F32" is "f32".
    std::string name = dtypes->value(i)->name().substr(6);
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(DTypeName(FromWire(wire)), name);
    EXPECT_GT(DTypeByteWidth(FromWire(wire)), 0);
  }
  EXPECT_EQ(DTypeName(static_cast<DType>(99)), "dtype#99");
  EXPECT_EQ(DTypeBytes(DType::kS4, 5), 3);
  EXPECT_EQ(DTypeBytes(DType::kC128, 2), 32);
}

TEST(ClientWire, ShapesAndCompileOptionsReachTheMessage) {
  v1::ArrayShape shape;
  ToWire(ArrayShape{DType::kBF16, {2, 0, 7}}, &shape);
  EXPECT_EQ(shape.dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(std::vector<int64_t>(shape.dims().begin(), shape.dims().end()),
            std::vector<int64_t>({2, 0, 7}));
  EXPECT_EQ(FromWire(shape), (ArrayShape{DType::kBF16, {2, 0, 7}}));
  EXPECT_EQ(ShapeToString(FromWire(shape)), "bf16[2,0,7]");

  v1::CompileOptions options;
  ToWire(CompileOptions{.num_replicas = 2,
                        .num_partitions = 3,
                        .device_assignment = {5, 4, 3, 2, 1, 0},
                        .portable = true,
                        .non_donatable_parameters = {1},
                        .collective_timeout = absl::Milliseconds(1500),
                        .program_format = ProgramFormat::kStableHlo},
         &options);
  EXPECT_EQ(options.num_replicas(), 2);
  EXPECT_EQ(options.num_partitions(), 3);
  EXPECT_EQ(options.device_assignment_size(), 6);
  EXPECT_EQ(options.device_assignment(0), 5);
  EXPECT_TRUE(options.portable());
  EXPECT_EQ(options.non_donatable_parameters(0), 1);
  EXPECT_DOUBLE_EQ(options.collective_timeout_seconds(), 1.5);
  EXPECT_EQ(options.program_format(), v1::PROGRAM_FORMAT_STABLEHLO);
}

TEST(ClientWire, ABufferKeepsItsTupleElementsErrorAndFetchedContents) {
  v1::BufferInfo tuple;
  tuple.set_handle(0xabc);
  tuple.set_is_tuple(true);
  tuple.set_ready(true);
  v1::BufferInfo* element = tuple.add_tuple_elements();
  element->set_handle(0xdef);
  element->mutable_shape()->set_dtype(v1::DTYPE_S32);
  element->mutable_shape()->add_dims(2);
  element->set_device_id(3);
  element->set_size_bytes(8);
  element->set_ready(true);
  element->set_error_code(13);
  element->set_error_message("the producer failed");
  element->set_data(std::string("\1\0\0\0\2\0\0\0", 8));
  const BufferInfo info = FromWire(std::move(tuple));
  EXPECT_EQ(info.handle, 0xabcu);
  EXPECT_TRUE(info.is_tuple);
  EXPECT_FALSE(info.data.has_value());
  ASSERT_EQ(info.tuple_elements.size(), 1u);
  const BufferInfo& e = info.tuple_elements[0];
  EXPECT_EQ(e.handle, 0xdefu);
  EXPECT_EQ(e.shape, (ArrayShape{DType::kS32, {2}}));
  EXPECT_EQ(e.device_id, 3);
  EXPECT_EQ(e.size_bytes, 8);
  EXPECT_EQ(e.error_code, 13);
  EXPECT_EQ(e.error_message, "the producer failed");
  ASSERT_TRUE(e.data.has_value());
  EXPECT_EQ(e.data->size(), 8u);
}

TEST(ClientWire, CompileResponseStatsSessionsAndClusterConvertEveryField) {
  v1::CompileResponse response;
  response.set_executable_handle(7);
  response.set_name("m");
  response.add_parameter_shapes()->set_dtype(v1::DTYPE_F32);
  response.add_result_shapes()->set_dtype(v1::DTYPE_PRED);
  response.set_result_is_tuple(true);
  response.set_compile_seconds(0.25);
  response.set_cache_hit(true);
  response.set_fingerprint("ff");
  response.set_num_replicas(2);
  response.set_num_partitions(1);
  response.add_device_assignment(1);
  response.add_device_assignment(0);
  response.add_addressable_device_ids(1);
  response.add_donated_parameters(0);
  response.set_parameter_is_tuple(true);
  const CompileInfo compiled = FromWire(response);
  EXPECT_EQ(compiled.executable_handle, 7u);
  EXPECT_EQ(compiled.name, "m");
  EXPECT_EQ(compiled.parameter_shapes[0].dtype, DType::kF32);
  EXPECT_EQ(compiled.result_shapes[0].dtype, DType::kPred);
  EXPECT_TRUE(compiled.result_is_tuple);
  EXPECT_EQ(compiled.compile_time, absl::Milliseconds(250));
  EXPECT_TRUE(compiled.cache_hit);
  EXPECT_EQ(compiled.fingerprint, "ff");
  EXPECT_EQ(compiled.device_assignment, std::vector<int>({1, 0}));
  EXPECT_EQ(compiled.addressable_device_ids, std::vector<int>({1}));
  EXPECT_EQ(compiled.donated_parameters, std::vector<int>({0}));
  EXPECT_TRUE(compiled.parameter_is_tuple);

  v1::Stats stats;
  v1::DeviceStats* device = stats.add_devices();
  device->set_device_id(1);
  device->set_bytes_in_use(10);
  device->set_busy_seconds(2);
  stats.mutable_compile_cache()->set_hits(4);
  stats.set_session_count(3);
  stats.set_bytes_to_device(99);
  v1::RpcStats* rpc = stats.add_rpcs();
  rpc->set_method("/pjrt.v1.Server/Ping");
  rpc->set_calls(5);
  const Stats converted = FromWire(stats);
  ASSERT_EQ(converted.devices.size(), 1u);
  EXPECT_EQ(converted.devices[0].bytes_in_use, 10);
  EXPECT_EQ(converted.devices[0].busy, absl::Seconds(2));
  EXPECT_EQ(converted.compile_cache.hits, 4);
  EXPECT_EQ(converted.session_count, 3);
  EXPECT_EQ(converted.bytes_to_device, 99);
  EXPECT_EQ(converted.rpcs[0].method, "/pjrt.v1.Server/Ping");
  EXPECT_EQ(converted.rpcs[0].calls, 5);

  v1::SessionInfo session;
  session.set_public_id(12);
  session.set_tenant("team");
  session.set_lease_remaining_seconds(30);
  v1::DeviceTime* time = session.add_device_times();
  time->set_device_id(2);
  time->set_seconds(0.5);
  session.set_peak_bytes(77);
  const SessionInfo listed = FromWire(session);
  EXPECT_EQ(listed.public_id, 12u);
  EXPECT_EQ(listed.tenant, "team");
  EXPECT_EQ(listed.lease_remaining, absl::Seconds(30));
  EXPECT_EQ(listed.device_times[0].device_id, 2);
  EXPECT_EQ(listed.device_times[0].time, absl::Milliseconds(500));
  EXPECT_EQ(listed.peak_bytes, 77);

  v1::ClusterStatus cluster;
  cluster.set_task_id(1);
  v1::TaskStatus* task = cluster.add_tasks();
  task->set_task_id(0);
  task->set_address("10.0.0.1:7070");
  task->set_error("connection refused");
  task->set_round_trip_ms(1.5);
  const ClusterStatus status = FromWire(cluster);
  EXPECT_EQ(status.task_id, 1);
  EXPECT_EQ(status.tasks[0].address, "10.0.0.1:7070");
  EXPECT_EQ(status.tasks[0].error, "connection refused");
  EXPECT_EQ(status.tasks[0].round_trip, absl::Microseconds(1500));

  v1::CopyToRemoteDeviceResponse copy;
  copy.set_bytes(1024);
  copy.set_receiver_task_id(1);
  copy.set_seconds(0.125);
  const RemoteCopy sent = FromWire(copy);
  EXPECT_EQ(sent.bytes, 1024);
  EXPECT_EQ(sent.receiver_task_id, 1);
  EXPECT_EQ(sent.duration, absl::Milliseconds(125));
}

}  // namespace
}  // namespace pjrt_client
