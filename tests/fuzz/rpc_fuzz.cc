// Fuzz target: the daemon's client-facing RPCs, end to end through gRPC, on
// a daemon running in this process (host platform, two devices) behind a
// unix socket.
//
// An input is a pjrt.fuzz.Calls message (rpc_fuzz.proto, binary or text
// format): a sequence of calls with their requests, mutated structurally by
// LLVMFuzzerCustomMutator below. For each input the harness opens a session
// and makes a few objects in it: two buffers and an executable. In the
// requests, a session_id of 0 stands for that session, and a handle of 1 to
// 16 for one of its objects (an executable_handle for one of its
// executables, any other for one of its buffers), including the ones
// earlier calls of the input made. Other values go to the daemon as they are.
//
// Attach is held open briefly (see CallAttach).
//
// A finding: the process crashes or a sanitizer reports; a call answers
// INTERNAL, UNKNOWN or DATA_LOSS, or an error without a message; a call
// takes longer than kCallDeadline; or, once the input's sessions are closed,
// device memory is still in use.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/daemon.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "pjrt/v1/executable.grpc.pb.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/proto_mutator.h"
#include "tests/fuzz/rpc_fuzz.pb.h"

namespace pjrt::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr auto kCallDeadline = std::chrono::seconds(20);
constexpr int kMaxCalls = 24;
constexpr size_t kMaxInputBytes = 1 << 20;

struct Harness {
  std::string dir;
  std::unique_ptr<daemon::Daemon> daemon;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> generic;
  std::unique_ptr<v1::Buffers::Stub> buffers;
  std::unique_ptr<v1::Executables::Stub> executables;
  std::unique_ptr<v1::Sessions::Stub> sessions;
  std::unique_ptr<v1::Server::Stub> server;
  // Where execute lanes connect (ServerInfo.execute_lane_socket).
  std::string lane_socket;
};

Harness* harness = nullptr;

// The objects of the input being run.
struct Objects {
  uint64_t session = 0;
  std::vector<uint64_t> buffers;
  std::vector<uint64_t> executables;
  std::vector<uint64_t> other_sessions;
  // Cross-host descriptors made by earlier calls.
  std::vector<std::string> descriptors;
  // The input compiles its own program (which may run as long as it likes)
  // or makes buffers that wait for a transfer from another daemon: a call
  // that waits past its deadline is then no finding.
  bool may_wait = false;
};

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return context;
}

void CheckCall(const grpc::Status& status, absl::string_view method,
               bool may_wait = false) {
  if (status.ok()) return;
  const std::string where = absl::StrCat(method, ": ", status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DATA_LOSS:
      Fail("an internal error for a bad request", where);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (may_wait) break;
      Fail("a call that did not end within its deadline", where);
    case grpc::StatusCode::UNAVAILABLE:
      Fail("the daemon stopped answering", where);
    default:
      break;
  }
  if (status.error_message().empty())
    Fail("an error without a message", method);
}

// Replaces the placeholders of `message` (see the file comment).
void Resolve(Message* message, const Objects& objects, int depth = 0) {
  if (depth > 8) return;
  const auto* r = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, field); ++i) {
          Resolve(r->MutableRepeatedMessage(message, field, i), objects,
                  depth + 1);
        }
      } else {
        Resolve(r->MutableMessage(message, field), objects, depth + 1);
      }
      continue;
    }
    if (field->name() == "transfer_descriptor" &&
        !objects.descriptors.empty()) {
      // "1".."16" stand for the descriptors the input's calls made.
      int index = 0;
      if (absl::SimpleAtoi(r->GetString(*message, field), &index) &&
          index >= 1 && index <= 16) {
        r->SetString(
            message, field,
            objects.descriptors[(index - 1) % objects.descriptors.size()]);
      }
      continue;
    }
    if (field->type() != FieldDescriptor::TYPE_FIXED64 ||
        !absl::StrContains(field->name(), "handle")) {
      continue;
    }
    const auto& pool = absl::StartsWith(field->name(), "executable")
                           ? objects.executables
                           : objects.buffers;
    auto map = [&](uint64_t v) {
      return (v >= 1 && v <= 16 && !pool.empty()) ? pool[(v - 1) % pool.size()]
                                                  : v;
    };
    if (field->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*message, field); ++i) {
        r->SetRepeatedUInt64(message, field, i,
                             map(r->GetRepeatedUInt64(*message, field, i)));
      }
    } else {
      r->SetUInt64(message, field, map(r->GetUInt64(*message, field)));
    }
  }
  // Every session-scoped request has session_id as field 1.
  const FieldDescriptor* session =
      message->GetDescriptor()->FindFieldByName("session_id");
  if (session != nullptr && session->type() == FieldDescriptor::TYPE_FIXED64 &&
      !session->is_repeated() && r->GetUInt64(*message, session) == 0) {
    r->SetUInt64(message, session, objects.session);
  }
}

// Remembers the handles a reply hands out.
void Harvest(const Message& reply, Objects* objects, int depth = 0) {
  if (depth > 8) return;
  const auto* r = reply.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(reply, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < r->FieldSize(reply, field); ++i) {
          Harvest(r->GetRepeatedMessage(reply, field, i), objects, depth + 1);
        }
      } else {
        Harvest(r->GetMessage(reply, field), objects, depth + 1);
      }
    } else if (field->name() == "descriptors" && field->is_repeated()) {
      for (int i = 0; i < r->FieldSize(reply, field); ++i) {
        objects->descriptors.push_back(r->GetRepeatedString(reply, field, i));
      }
    } else if (field->type() == FieldDescriptor::TYPE_FIXED64 &&
               !field->is_repeated()) {
      const uint64_t v = r->GetUInt64(reply, field);
      if (field->name() == "handle") objects->buffers.push_back(v);
      if (field->name() == "executable_handle")
        objects->executables.push_back(v);
      if (field->name() == "session_id") objects->other_sessions.push_back(v);
    }
  }
}

// The gRPC method a unary call of the Call oneof goes to: the field's name
// in CamelCase, looked up in the client-facing services.
const google::protobuf::MethodDescriptor* MethodOf(
    const FieldDescriptor* field) {
  std::string name;
  bool upper = true;
  for (char c : field->name()) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper
                ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                : c;
    upper = false;
  }
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* service : {"pjrt.v1.Buffers", "pjrt.v1.Executables",
                              "pjrt.v1.Server", "pjrt.v1.Sessions"}) {
    if (const auto* s = pool->FindServiceByName(service)) {
      if (const auto* m = s->FindMethodByName(name)) return m;
    }
  }
  Fail("no method for a call", field->name());
}

void CallUnary(const google::protobuf::MethodDescriptor* method,
               const Message& request, Objects* objects) {
  const std::string path =
      absl::StrCat("/", method->service()->full_name(), "/", method->name());
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer reply_buffer;
  grpc::CompletionQueue queue;
  auto context = Context();
  auto call = harness->generic->PrepareUnaryCall(context.get(), path,
                                                 request_buffer, &queue);
  call->StartCall();
  grpc::Status status;
  call->Finish(&reply_buffer, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  if (!queue.Next(&tag, &ok)) Fail("completion queue", path);
  CheckCall(status, path, objects->may_wait);
  if (!status.ok()) return;
  std::unique_ptr<Message> reply(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(method->output_type())
          ->New());
  std::vector<grpc::Slice> slices;
  if (!reply_buffer.Dump(&slices).ok()) Fail("reply bytes", path);
  std::string reply_bytes;
  for (const auto& s : slices) {
    reply_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (!reply->ParseFromString(reply_bytes)) Fail("an unreadable reply", path);
  Harvest(*reply, objects);
}

void CallUpload(const Upload& upload, Objects* objects) {
  auto context = Context();
  v1::BufferInfo info;
  auto writer = harness->buffers->Upload(context.get(), &info);
  v1::UploadRequest header;
  *header.mutable_header() = upload.header();
  if (!upload.chunks_first()) writer->Write(header);
  for (const std::string& chunk : upload.chunks()) {
    v1::UploadRequest request;
    request.set_chunk(chunk);
    if (!writer->Write(request)) break;
  }
  if (upload.chunks_first()) writer->Write(header);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  CheckCall(status, "Upload", objects->may_wait);
  if (status.ok()) Harvest(info, objects);
}

void CallDownload(const v1::DownloadRequest& request, const Objects& objects) {
  auto context = Context();
  auto reader = harness->buffers->Download(context.get(), request);
  v1::DownloadResponse response;
  while (reader->Read(&response)) {
  }
  CheckCall(reader->Finish(), "Download", objects.may_wait);
}

void CallExecuteStream(const ExecuteStream& stream, Objects* objects) {
  auto context = Context();
  auto call = harness->executables->ExecuteStream(context.get());
  for (const v1::ExecuteRequest& request : stream.requests()) {
    if (!call->Write(request)) break;
  }
  call->WritesDone();
  v1::ExecuteStreamResponse response;
  while (call->Read(&response)) Harvest(response, objects);
  CheckCall(call->Finish(), "ExecuteStream", objects->may_wait);
}

// --- execute lanes ---

int ConnectLane() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& name = harness->lane_socket;
  if (name.empty() || name.size() >= sizeof(addr.sun_path)) {
    Fail("the daemon offers no execute lane socket", name);
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Fail("connecting to the execute lane socket", std::strerror(errno));
  }
  timeval timeout{
      .tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kCallDeadline)
                    .count(),
      .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  return fd;
}

bool SendFrame(int fd, const std::string& message) {
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) {
    frame[i] = static_cast<char>((message.size() >> (8 * i)) & 0xff);
  }
  frame += message;
  return send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(frame.size());
}

bool ReceiveExactly(int fd, char* data, size_t size, bool* timed_out) {
  while (size > 0) {
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The next reply on lane `fd`; false when the lane ended (or, with
// `timed_out`, the daemon did not answer within kCallDeadline).
bool ReceiveLaneReply(int fd, v1::ExecuteLaneReply* reply, bool* timed_out) {
  *timed_out = false;
  unsigned char prefix[4];
  if (!ReceiveExactly(fd, reinterpret_cast<char*>(prefix), 4, timed_out)) {
    return false;
  }
  const uint32_t length = uint32_t{prefix[0]} | (uint32_t{prefix[1]} << 8) |
                          (uint32_t{prefix[2]} << 16) |
                          (uint32_t{prefix[3]} << 24);
  if (length > (uint32_t{4} << 20)) {
    Fail("a lane reply longer than a lane's messages may be",
         absl::StrCat(length));
  }
  std::string body(length, '\0');
  if (!ReceiveExactly(fd, body.data(), length, timed_out)) {
    Fail("a lane reply cut short", absl::StrCat(length));
  }
  if (!reply->ParseFromString(body)) Fail("an unreadable lane reply", body);
  return true;
}

void CheckLaneReply(const v1::ExecuteLaneReply& reply, absl::string_view what,
                    bool may_wait) {
  CheckCall(grpc::Status(static_cast<grpc::StatusCode>(reply.error_code()),
                         reply.error_message()),
            what, may_wait);
}

// A request on a lane may wait (for a receive, or a long program) as an
// Execute may; a lane that does not answer is a finding otherwise.
void LaneUnanswered(bool timed_out, const Objects& objects,
                    absl::string_view what) {
  if (timed_out && !objects.may_wait) {
    Fail("a lane request that did not end within its deadline", what);
  }
}

void CallLaneExecute(const v1::ExecuteRequest& request, Objects* objects) {
  const int fd = ConnectLane();
  v1::ExecuteLaneHello hello;
  hello.set_session_id(request.session_id());
  hello.set_protocol_version(8);
  v1::ExecuteLaneReply reply;
  bool timed_out = false;
  if (!SendFrame(fd, hello.SerializeAsString()) ||
      !ReceiveLaneReply(fd, &reply, &timed_out)) {
    Fail("a lane hello went unanswered", request.ShortDebugString());
  }
  CheckLaneReply(reply, "lane hello", /*may_wait=*/false);
  if (reply.error_code() == 0) {
    if (!SendFrame(fd, request.SerializeAsString())) {
      Fail("a lane closed before its request", request.ShortDebugString());
    }
    if (ReceiveLaneReply(fd, &reply, &timed_out)) {
      CheckLaneReply(reply, "lane Execute", objects->may_wait);
      if (reply.error_code() == 0) Harvest(reply.response(), objects);
    } else {
      LaneUnanswered(timed_out, *objects, request.ShortDebugString());
    }
  }
  close(fd);
}

void CallLaneBytes(const LaneBytes& bytes, const Objects& objects) {
  const int fd = ConnectLane();
  for (const std::string& message : bytes.messages()) {
    if (!SendFrame(fd, message)) break;
    v1::ExecuteLaneReply reply;
    bool timed_out = false;
    if (!ReceiveLaneReply(fd, &reply, &timed_out)) {
      LaneUnanswered(timed_out, objects, "raw lane message");
      break;
    }
    CheckLaneReply(reply, "raw lane message", objects.may_wait);
  }
  if (bytes.trailing_length() != 0) {
    unsigned char prefix[4];
    for (int i = 0; i < 4; ++i) {
      prefix[i] = static_cast<unsigned char>(
          (bytes.trailing_length() >> (8 * i)) & 0xff);
    }
    send(fd, prefix, sizeof(prefix), MSG_NOSIGNAL);
  }
  close(fd);
}

// An Attach stream lasts as long as its caller wants: this one ends by its
// deadline after kAttachMillis.
constexpr int kAttachMillis = 50;

void CallAttach(const v1::AttachRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(kAttachMillis));
  auto reader = harness->sessions->Attach(&context, request);
  v1::SessionEvent event;
  while (reader->Read(&event)) {
  }
  CheckCall(reader->Finish(), "Attach", /*may_wait=*/true);
}

void Run(Call call, Objects* objects) {
  Resolve(&call, *objects);
  switch (call.call_case()) {
    case Call::kUpload:
      return CallUpload(call.upload(), objects);
    case Call::kDownload:
      return CallDownload(call.download(), *objects);
    case Call::kExecuteStream:
      return CallExecuteStream(call.execute_stream(), objects);
    case Call::kAttach:
      return CallAttach(call.attach());
    case Call::kLaneExecute:
      return CallLaneExecute(call.lane_execute(), objects);
    case Call::kLaneBytes:
      return CallLaneBytes(call.lane_bytes(), *objects);
    case Call::CALL_NOT_SET:
      return;
    default: {
      const auto* r = call.GetReflection();
      const FieldDescriptor* field =
          call.GetDescriptor()->FindFieldByNumber(call.call_case());
      CallUnary(MethodOf(field), r->GetMessage(call, field), objects);
    }
  }
}

// The session and objects every input starts with.
Objects MakeObjects() {
  Objects objects;
  {
    auto context = Context();
    v1::OpenSessionRequest request;
    request.set_client_name("rpc_fuzz");
    v1::OpenSessionResponse response;
    grpc::Status status =
        harness->sessions->OpenSession(context.get(), request, &response);
    if (!status.ok())
      Fail("opening the harness's session", status.error_message());
    objects.session = response.session_id();
  }
  auto upload = [&](v1::DType dtype, std::vector<int64_t> dims, int device,
                    std::string data) {
    Upload up;
    up.mutable_header()->set_session_id(objects.session);
    up.mutable_header()->set_device_id(device);
    up.mutable_header()->mutable_shape()->set_dtype(dtype);
    for (int64_t d : dims) up.mutable_header()->mutable_shape()->add_dims(d);
    up.add_chunks(std::move(data));
    CallUpload(up, &objects);
  };
  upload(v1::DTYPE_F32, {4}, 0, std::string(16, '\x01'));
  upload(v1::DTYPE_S32, {2, 3}, 1, std::string(24, '\x02'));
  v1::CompileRequest compile;
  compile.set_session_id(objects.session);
  compile.set_hlo_text(
      "HloModule add\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  b = f32[4] parameter(1)\n"
      "  ROOT s = f32[4] add(a, b)\n"
      "}\n");
  CallUnary(MethodOf(Call::descriptor()->FindFieldByName("compile")), compile,
            &objects);
  if (objects.buffers.size() != 2 || objects.executables.size() != 1) {
    Fail("making the harness's objects", "an upload or the compile failed");
  }
  return objects;
}

void CloseAll(const Objects& objects) {
  std::vector<uint64_t> ids = objects.other_sessions;
  ids.push_back(objects.session);
  for (uint64_t id : ids) {
    auto context = Context();
    v1::CloseSessionRequest request;
    request.set_session_id(id);
    v1::CloseSessionResponse response;
    // Already closed (by the input) is fine.
    harness->sessions->CloseSession(context.get(), request, &response);
  }
}

// Once every session is closed, every device's memory is free again.
void CheckNothingLeaked() {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  std::string last;
  while (absl::Now() < deadline) {
    auto context = Context();
    v1::GetStatsRequest request;
    v1::Stats stats;
    grpc::Status status =
        harness->server->GetStats(context.get(), request, &stats);
    if (!status.ok()) Fail("GetStats", status.error_message());
    bool clean = true;
    for (const auto& device : stats.devices()) {
      if (device.bytes_in_use() != 0) clean = false;
    }
    if (clean) return;
    last = stats.ShortDebugString();
    absl::SleepFor(
        absl::Milliseconds(5));  // polling a condition, with a deadline
  }
  Fail("device memory still in use after every session closed", last);
}

bool ParseInput(const uint8_t* data, size_t size, Calls* calls) {
  if (size > kMaxInputBytes) return false;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (calls->ParseFromString(bytes)) return true;
  calls->Clear();
  return google::protobuf::TextFormat::ParseFromString(bytes, calls);
}

}  // namespace
}  // namespace pjrt::fuzz

using namespace pjrt::fuzz;  // NOLINT: the libFuzzer entry points

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  spdlog::set_level(spdlog::level::off);
  char dir_template[] = "/tmp/pjrt-rpc-fuzz.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) Fail("mkdtemp", std::strerror(errno));
  harness = new Harness;
  harness->dir = dir_template;
  pjrt::daemon::DaemonOptions options;
  options.platform = "host";
  options.host_devices = 2;
  options.memory_limit_bytes = 256 << 20;
  const std::string socket = harness->dir + "/pjrtd.sock";
  options.listen = {absl::StrCat("unix://", socket)};
  // For the execute lanes (beside the region socket).
  options.shared_memory = true;
  auto daemon = pjrt::daemon::Daemon::Start(options);
  CheckOk(daemon.status(), "starting the daemon");
  harness->daemon = *std::move(daemon);
  harness->channel = grpc::CreateChannel(absl::StrCat("unix://", socket),
                                         grpc::InsecureChannelCredentials());
  harness->generic = std::make_unique<grpc::GenericStub>(harness->channel);
  harness->buffers = pjrt::v1::Buffers::NewStub(harness->channel);
  harness->executables = pjrt::v1::Executables::NewStub(harness->channel);
  harness->sessions = pjrt::v1::Sessions::NewStub(harness->channel);
  harness->server = pjrt::v1::Server::NewStub(harness->channel);
  {
    auto context = Context();
    pjrt::v1::ServerInfo info;
    grpc::Status status = harness->server->GetServerInfo(
        context.get(), pjrt::v1::GetServerInfoRequest(), &info);
    if (!status.ok()) Fail("GetServerInfo", status.error_message());
    harness->lane_socket = info.execute_lane_socket();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Calls calls;
  if (!ParseInput(data, size, &calls) || calls.calls_size() > kMaxCalls)
    return -1;
  Objects objects = MakeObjects();
  for (const Call& call : calls.calls()) {
    if (call.has_compile() || call.has_make_cross_host_receive_buffers()) {
      objects.may_wait = true;
    }
  }
  for (const Call& call : calls.calls()) Run(call, &objects);
  CloseAll(objects);
  CheckNothingLeaked();
  return 0;
}

// Mutates the calls as messages: usually one field of one request, sometimes
// the sequence itself (a call added, copied, dropped or two swapped).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  Calls calls;
  if (!ParseInput(data, size, &calls)) calls.Clear();
  const int n = calls.calls_size();
  switch (rng() % 8) {
    case 0:
      if (n < kMaxCalls) {
        Call* added = calls.add_calls();
        if (n > 0 && rng() % 2 == 0) {
          added->CopyFrom(calls.calls(static_cast<int>(rng() % n)));
        } else {
          // A new call of a random kind, with a default request.
          const auto* oneof = Call::descriptor()->oneof_decl(0);
          const FieldDescriptor* field =
              oneof->field(static_cast<int>(rng() % oneof->field_count()));
          added->GetReflection()->MutableMessage(added, field);
        }
      }
      break;
    case 1:
      if (n > 0) {
        calls.mutable_calls()->SwapElements(static_cast<int>(rng() % n), n - 1);
        calls.mutable_calls()->RemoveLast();
      }
      break;
    case 2:
      if (n > 1) {
        calls.mutable_calls()->SwapElements(static_cast<int>(rng() % n),
                                            static_cast<int>(rng() % n));
      }
      break;
    default:
      if (n == 0) {
        calls.add_calls()->mutable_ping();
      } else {
        MutateMessage(calls.mutable_calls(static_cast<int>(rng() % n)), rng);
      }
  }
  const std::string out = calls.SerializeAsString();
  if (out.size() > max_size) return size;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
