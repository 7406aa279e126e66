#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "daemon/grpc_status.h"
#include "daemon/proto_convert.h"
#include "daemon/services.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace pjrt::daemon {
namespace {

// The options as bytes that are equal exactly when the options are.
std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// `status` with `context` in front of its message, code unchanged.
absl::Status WithContext(const absl::Status& status,
                         absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace

grpc::Status ExecutableService::Compile(grpc::ServerContext*,
                                        const v1::CompileRequest* request,
                                        v1::CompileResponse* response) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  const std::string& text = request->hlo_text();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "hlo_text is empty; send the program's HLO text (as printed by XLA's "
        "HloModule::ToString() or jax.jit(f).lower(...).as_text("
        "dialect=\"hlo\"))");
  }
  runtime::CompileOptions options = CompileOptionsFromProto(request->options());
  std::string key =
      CompileCacheKey(text, DeterministicBytes(request->options()));
  auto compiled = cache_->GetOrCompile(
      key, [&]() -> absl::StatusOr<std::shared_ptr<runtime::Executable>> {
        return runtime::Executable::Compile(client_, text, options);
      });
  if (!compiled.ok()) {
    spdlog::info("{}: compile of a {}-byte program failed: {}",
                 (*session)->DebugString(), text.size(), compiled.status());
    return ToGrpcStatus(compiled.status());
  }
  const runtime::Executable& executable = *compiled->value;
  auto handle = (*session)->AddExecutable(compiled->value);
  if (!handle.ok()) return ToGrpcStatus(handle.status());

  response->set_executable_handle(*handle);
  response->set_name(executable.name());
  for (const hlo::Shape& shape : executable.parameter_shapes()) {
    ShapeToProto(shape, response->add_parameter_shapes());
  }
  for (const hlo::Shape& shape : executable.result_shapes()) {
    ShapeToProto(shape, response->add_result_shapes());
  }
  response->set_result_is_tuple(executable.result_is_tuple());
  response->set_compile_seconds(absl::ToDoubleSeconds(compiled->elapsed));
  response->set_cache_hit(compiled->cache_hit);
  response->set_fingerprint(compiled->fingerprint);
  spdlog::info(
      "{}: compiled {} in {}{} (fingerprint {:.12})", (*session)->DebugString(),
      executable.name(), absl::FormatDuration(compiled->elapsed),
      compiled->cache_hit ? ", from the cache" : "", compiled->fingerprint);
  return grpc::Status::OK;
}

grpc::Status ExecutableService::Execute(grpc::ServerContext*,
                                        const v1::ExecuteRequest* request,
                                        v1::ExecuteResponse* response) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  auto executable = (*session)->LookupExecutable(request->executable_handle());
  if (!executable.ok()) return ToGrpcStatus(executable.status());
  auto device = client_->LookupDevice(request->device_id());
  if (!device.ok()) return ToGrpcStatus(device.status());

  // The shared pointers keep the arguments alive for the call; the runtime's
  // holds protect them while the run is in flight.
  std::vector<std::shared_ptr<runtime::Buffer>> arguments;
  std::vector<runtime::Buffer*> raw_arguments;
  arguments.reserve(request->argument_handles_size());
  raw_arguments.reserve(request->argument_handles_size());
  for (int i = 0; i < request->argument_handles_size(); ++i) {
    auto buffer = (*session)->LookupBuffer(request->argument_handles(i));
    if (!buffer.ok()) {
      return ToGrpcStatus(
          WithContext(buffer.status(), absl::StrFormat("argument %d", i)));
    }
    raw_arguments.push_back(buffer->get());
    arguments.push_back(*std::move(buffer));
  }

  runtime::ExecuteRunOptions options;
  options.launch_id = request->launch_id();
  // The runtime's errors name the executable, the argument and what was
  // expected.
  auto results = (*executable)->Execute(raw_arguments, *device, options);
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (size_t i = 0; i < results->size(); ++i) {
    std::shared_ptr<runtime::Buffer>& result = (*results)[i];
    auto handle = (*session)->AddBuffer(result);
    if (!handle.ok()) {
      // The session closed meanwhile (and freed the results registered so
      // far); free the rest.
      for (size_t j = i; j < results->size(); ++j) (*results)[j]->Delete();
      return ToGrpcStatus(handle.status());
    }
    BufferInfoToProto(*handle, *result, response->add_results());
  }
  return grpc::Status::OK;
}

grpc::Status ExecutableService::DeleteExecutable(
    grpc::ServerContext*, const v1::DeleteExecutableRequest* request,
    v1::DeleteExecutableResponse*) {
  auto session = sessions_->Lookup(request->session_id());
  if (!session.ok()) return ToGrpcStatus(session.status());
  return ToGrpcStatus(
      (*session)->DeleteExecutable(request->executable_handle()));
}

}  // namespace pjrt::daemon
