#include "client/cpp/pjrt_client/client.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "base/version.h"
#include "client/cpp/pjrt_client/internal.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace pjrt_client {

namespace {

// The revisions this client speaks (proto/pjrt/v1/types.proto).
constexpr uint32_t kProtocolRevisionMin = pjrt::v1::PROTOCOL_REVISION_MIN;
constexpr uint32_t kProtocolRevisionMax = pjrt::v1::PROTOCOL_REVISION_MAX;
static_assert(kChunkBytes == pjrt::v1::MAX_CHUNK_BYTES);

}  // namespace
namespace v1 = ::pjrt::v1;

namespace {

// Deadline for Compile: a large program may take a while.
constexpr absl::Duration kCompileTimeout = absl::Minutes(30);

}  // namespace

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::string ResolveAddress(const std::string& address) {
  if (!address.empty()) return address;
  const char* env = std::getenv(kAddressEnvVar);
  if (env != nullptr && *env != '\0') return env;
  return kDefaultAddress;
}

Client::Client(std::string address, std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      channel_(std::move(channel)),
      stubs_(std::make_unique<Stubs>(channel_)) {}

Client::~Client() = default;

namespace {

// Adds "authorization: Bearer TOKEN" to every call of a channel.
class BearerToken : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* value) : value_(value) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;
};

class BearerTokenFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token)
      : value_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(&value_);
  }

 private:
  const std::string value_;
};

std::string OptionOrEnv(const std::string& value, const char* variable) {
  if (!value.empty()) return value;
  const char* env = std::getenv(variable);
  return env == nullptr ? std::string() : std::string(env);
}

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  if (path.empty()) return std::string();
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot read the %s %s", what, path));
  }
  // gRPC would log its parse errors and fail the connection as if no
  // daemon were there.
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the %s %s holds no PEM block (-----BEGIN ...-----)", what, path));
  }
  return text.str();
}

// OK for an address gRPC takes as a daemon's: a unix socket or another
// scheme gRPC knows, or host:port. Anything else gRPC would resolve as a
// name for the whole connect timeout before failing.
absl::Status CheckAddress(const std::string& address) {
  for (const char* scheme : {"unix:", "unix-abstract:", "vsock:", "dns:",
                             "ipv4:", "ipv6:", "passthrough:", "xds:"}) {
    if (absl::StartsWith(address, scheme)) return absl::OkStatus();
  }
  const size_t colon = address.rfind(':');
  const bool bracketed = absl::StartsWith(address, "[");
  const std::string port =
      colon == std::string::npos ? "" : address.substr(colon + 1);
  int number = -1;
  if (colon == std::string::npos || colon == 0 ||
      (bracketed ? address[colon - 1] != ']' || colon < 3
                 : address.find(':') != colon) ||
      port.empty() ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "address '%s' is neither unix:///path/name.sock nor host:port (such "
        "as 127.0.0.1:7070 or [::1]:7070)",
        address));
  }
  return absl::OkStatus();
}

}  // namespace

// The bytes of an array of `dims` elements of `dtype`; -1 when the dtype is
// unknown or the dimensions are negative or overflow.
static int64_t ShapeBytes(DType dtype, absl::Span<const int64_t> dims) {
  if (DTypeByteWidth(dtype) == 0) return -1;
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return -1;
  }
  if (count > (int64_t{1} << 60)) return -1;
  return DTypeBytes(dtype, count);
}

// The host a TCP target names ("127.0.0.1:7070", "[::1]:7070",
// "dns:///host:7070", "ipv4:10.0.0.1:7070"); empty for a unix socket.
static std::string ChannelHost(std::string address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:") ||
      absl::StartsWith(address, "vsock:")) {
    return "";
  }
  for (const char* prefix : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, prefix)) {
      address = address.substr(std::string(prefix).size());
      break;
    }
  }
  address = address.substr(0, address.find(','));
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return "";
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const ConnectOptions& options) {
  std::string address = ResolveAddress(options.address);
  PJRT_RETURN_IF_ERROR(CheckAddress(address));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  const std::string token = OptionOrEnv(options.token, "PJRTD_TOKEN");
  const std::string ca = OptionOrEnv(options.tls_ca, "PJRTD_TLS_CA");
  const std::string cert = OptionOrEnv(options.tls_cert, "PJRTD_TLS_CERT");
  const std::string key = OptionOrEnv(options.tls_key, "PJRTD_TLS_KEY");
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both tls_cert and tls_key");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!ca.empty() || !cert.empty()) {
    grpc::SslCredentialsOptions ssl;
    PJRT_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(ca, "TLS CA file"));
    PJRT_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                          ReadPem(cert, "TLS certificate file"));
    PJRT_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(key, "TLS key file"));
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenFactory>(token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, std::move(interceptors));
}

absl::StatusOr<std::shared_ptr<Client>> Client::Connect(
    const ConnectOptions& options) {
  std::string address = ResolveAddress(options.address);
  PJRT_ASSIGN_OR_RETURN(auto channel, MakeChannel(options));
  if (!channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + options.timeout))) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot reach pjrtd at %s within %s: is the daemon running there? "
        "(start it with `pjrtd --listen %s`, or point %s or --address at "
        "the right place)",
        address, absl::FormatDuration(options.timeout), address,
        kAddressEnvVar));
  }
  std::shared_ptr<Client> client(new Client(address, channel));
  client->shared_memory_ = options.shared_memory;
  client->execute_lanes_ = options.execute_lanes;
  // Channels are plaintext: never beside TLS.
  if (options.data_channels &&
      OptionOrEnv(options.tls_ca, "PJRTD_TLS_CA").empty() &&
      OptionOrEnv(options.tls_cert, "PJRTD_TLS_CERT").empty()) {
    client->channel_host_ = ChannelHost(address);
  }
  grpc::ClientContext context;
  SetDeadline(&context, options.timeout);
  v1::ServerInfo described;
  grpc::Status status = client->stubs_->server->GetServerInfo(
      &context, v1::GetServerInfoRequest(), &described);
  if (!status.ok()) {
    return absl::Status(
        ToAbslStatus(status).code(),
        absl::StrFormat("pjrtd at %s did not describe itself: %s", address,
                        status.error_message()));
  }
  client->info_ = FromWire(described);
  const ServerInfo& info = client->info_;
  if (kProtocolRevisionMax < info.protocol_version_min ||
      kProtocolRevisionMin > info.protocol_version_max) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pjrtd at %s (%s) speaks pjrt.v1 revisions %d to %d; this client "
        "(%s) speaks %d to %d; use a client from the daemon's release",
        address, info.build_version, info.protocol_version_min,
        info.protocol_version_max, pjrt::kBuildVersion, kProtocolRevisionMin,
        kProtocolRevisionMax));
  }
  return client;
}

absl::StatusOr<std::vector<Device>> Client::Devices() {
  v1::ListDevicesResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(*stubs_->server,
                                 &v1::Server::Stub::ListDevices,
                                 v1::ListDevicesRequest(), &response));
  std::vector<Device> devices;
  for (const v1::Device& device : response.devices()) {
    devices.push_back(FromWire(device));
  }
  return devices;
}

absl::StatusOr<Stats> Client::Stats() {
  v1::Stats response;
  PJRT_RETURN_IF_ERROR(UnaryCall(*stubs_->server, &v1::Server::Stub::GetStats,
                                 v1::GetStatsRequest(), &response));
  return FromWire(response);
}

absl::StatusOr<ClusterStatus> Client::ClusterStatus(absl::Duration timeout) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetClusterStatusRequest request;
  request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
  v1::ClusterStatus response;
  grpc::Status status =
      stubs_->server->GetClusterStatus(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status);
  return FromWire(response);
}

absl::StatusOr<std::vector<SessionInfo>> Client::Sessions() {
  v1::ListSessionsResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(*stubs_->sessions,
                                 &v1::Sessions::Stub::ListSessions,
                                 v1::ListSessionsRequest(), &response));
  std::vector<SessionInfo> sessions;
  for (const v1::SessionInfo& session : response.sessions()) {
    sessions.push_back(FromWire(session));
  }
  return sessions;
}

absl::Status Client::Ping() {
  v1::PingResponse response;
  return UnaryCall(*stubs_->server, &v1::Server::Stub::Ping, v1::PingRequest(),
                   &response);
}

absl::StatusOr<std::unique_ptr<Session>> Client::OpenSession(
    const SessionOptions& options) {
  v1::OpenSessionRequest request;
  request.set_client_name(options.client_name);
  request.set_lease_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds(options.lease)));
  // The revision that added whole-cluster sessions.
  constexpr uint32_t kWholeClusterRevision =
      v1::PROTOCOL_REVISION_WHOLE_CLUSTER;
  if (options.whole_cluster &&
      info_.protocol_version_max < kWholeClusterRevision) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pjrtd at %s (%s) has no whole-cluster sessions (pjrt.v1 revision "
        "%d; it speaks up to %d)",
        address_, info_.build_version, kWholeClusterRevision,
        info_.protocol_version_max));
  }
  // The newest revision both sides speak (a daemon checks it is one of
  // its own).
  request.set_protocol_version(
      std::min<uint32_t>(kProtocolRevisionMax, info_.protocol_version_max));
  request.set_whole_cluster(options.whole_cluster);
  v1::OpenSessionResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(
      *stubs_->sessions, &v1::Sessions::Stub::OpenSession, request, &response));
  auto state = std::make_shared<SessionState>();
  state->client = shared_from_this();
  state->id = response.session_id();
  state->public_id = response.public_id();
  if (options.whole_cluster) {
    pjrt::MutexLock lock(&state->mu);
    state->shm = SessionState::Shm::kUnusable;
    state->channels_unusable =
        "a whole-cluster session streams its arrays through gRPC";
  }
  std::unique_ptr<Session> session(new Session(state));
  if (options.attach) {
    v1::AttachRequest attach;
    attach.set_session_id(state->id);
    state->attach_reader =
        stubs_->sessions->Attach(&state->attach_context, attach);
    v1::SessionEvent event;
    // The first event confirms the attachment.
    if (!state->attach_reader->Read(&event)) {
      grpc::Status status = state->attach_reader->Finish();
      state->attach_reader.reset();
      return absl::Status(
          ToAbslStatus(status).code(),
          absl::StrFormat("cannot attach to the new session: %s",
                          status.error_message()));
    }
  }
  return session;
}

Session::Session(std::shared_ptr<SessionState> state)
    : state_(std::move(state)) {}

Session::~Session() {
  bool kept;
  {
    pjrt::MutexLock lock(&state_->mu);
    kept = state_->kept;
  }
  if (kept) {
    state_->Shutdown();
    // The session lives on: what was dropped must not.
    state_->FlushReleases();
    return;
  }
  Close().IgnoreError();
}

absl::Status Session::Keep() {
  if (state_->attach_reader != nullptr) {
    return absl::FailedPreconditionError(
        "an attached session ends with its connection and cannot be kept; "
        "open it with attach = false and a lease");
  }
  pjrt::MutexLock lock(&state_->mu);
  state_->kept = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Session>> Client::ResumeSession(
    uint64_t session_id) {
  auto state = std::make_shared<SessionState>();
  state->client = shared_from_this();
  state->id = session_id;
  {
    pjrt::MutexLock lock(&state->mu);
    state->kept = true;
  }
  std::unique_ptr<Session> session(new Session(state));
  absl::Status alive = session->KeepAlive();
  if (!alive.ok()) return alive;
  return session;
}

uint64_t Session::id() const { return state_->id; }
uint64_t Session::public_id() const { return state_->public_id; }
Client& Session::client() const { return *state_->client; }

absl::Status Session::Close() {
  {
    pjrt::MutexLock lock(&state_->mu);
    if (state_->closed) return absl::OkStatus();
  }
  // Runs sent first; then nothing is left to wait for.
  state_->Shutdown();
  {
    pjrt::MutexLock lock(&state_->mu);
    state_->closed = true;
  }
  v1::CloseSessionRequest request;
  request.set_session_id(state_->id);
  v1::CloseSessionResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::Status status =
      state_->sessions_stub().CloseSession(&context, request, &response);
  if (state_->attach_reader != nullptr) {
    state_->attach_context.TryCancel();
    state_->attach_reader->Finish().ok();
    state_->attach_reader.reset();
  }
  return ToAbslStatus(status);
}

absl::Status Session::KeepAlive() {
  v1::KeepAliveRequest request;
  request.set_session_id(state_->id);
  v1::KeepAliveResponse response;
  return UnaryCall(state_->sessions_stub(), &v1::Sessions::Stub::KeepAlive,
                   request, &response);
}

absl::StatusOr<Buffer> Session::Upload(DType dtype,
                                       absl::Span<const int64_t> dims,
                                       absl::Span<const uint8_t> data,
                                       int device_id,
                                       const Progress& progress) {
  if (static_cast<int64_t>(data.size()) >= kSharedMemoryThreshold) {
    if (std::optional<Mapping> staging =
            state_->TakeStaging(static_cast<int64_t>(data.size()))) {
      std::memcpy(staging->data, data.data(), data.size());
      auto buffer = UploadFromHandle(staging->handle, 0, dtype, dims, device_id,
                                     /*zero_copy=*/false);
      state_->GiveBackStaging(*staging);
      if (buffer.ok() && progress) {
        progress(static_cast<int64_t>(data.size()),
                 static_cast<int64_t>(data.size()));
      }
      return buffer;
    }
    // The channel carries exactly the shape's bytes: another size streams,
    // and the daemon names what is wrong.
    std::optional<ChannelSocket> channel;
    if (ShapeBytes(dtype, dims) == static_cast<int64_t>(data.size())) {
      channel = state_->TakeChannel();
    }
    if (channel.has_value()) {
      v1::UploadHeader header;
      header.set_session_id(state_->id);
      header.mutable_shape()->set_dtype(ToWire(dtype));
      for (int64_t d : dims) header.mutable_shape()->add_dims(d);
      header.set_device_id(device_id);
      auto info = UploadOverChannel(*state_, *channel, header, data);
      if (info.ok()) {
        if (progress) {
          progress(static_cast<int64_t>(data.size()),
                   static_cast<int64_t>(data.size()));
        }
        return Buffer(state_, FromWire(*std::move(info)));
      }
      // Memory or a quota held by buffers this client dropped: the stream
      // below tries again once they are freed.
      if (!absl::IsResourceExhausted(info.status()) ||
          !state_->FreeReleasesForRetry()) {
        return info.status();
      }
    }
  }
  v1::BufferInfo info;
  const auto stream = [&]() -> grpc::Status {
    grpc::ClientContext context;
    auto writer = state_->buffers_stub().Upload(&context, &info);
    v1::UploadRequest request;
    v1::UploadHeader* header = request.mutable_header();
    header->set_session_id(state_->id);
    header->mutable_shape()->set_dtype(ToWire(dtype));
    for (int64_t d : dims) header->mutable_shape()->add_dims(d);
    header->set_device_id(device_id);
    bool ok = writer->Write(request);
    for (size_t offset = 0; ok && offset < data.size(); offset += kChunkBytes) {
      size_t size = std::min<size_t>(kChunkBytes, data.size() - offset);
      request.set_chunk(data.data() + offset, size);
      ok = writer->Write(request);
      if (ok && progress) {
        progress(static_cast<int64_t>(offset + size),
                 static_cast<int64_t>(data.size()));
      }
    }
    // A failed write means the daemon has already answered (with an
    // error); Finish returns it.
    if (ok) writer->WritesDone();
    return writer->Finish();
  };
  grpc::Status status = stream();
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      state_->FreeReleasesForRetry()) {
    // Memory or a quota was held by buffers this client dropped.
    status = stream();
  }
  if (!status.ok()) return ToAbslStatus(status);
  return Buffer(state_, FromWire(std::move(info)));
}

absl::StatusOr<Buffer> Session::Adopt(uint64_t handle) {
  v1::DescribeBufferRequest request;
  request.set_session_id(state_->id);
  request.set_handle(handle);
  v1::BufferInfo info;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->buffers_stub(),
                                 &v1::Buffers::Stub::DescribeBuffer, request,
                                 &info));
  return Buffer(state_, FromWire(std::move(info)));
}

absl::StatusOr<Executable> Session::Compile(const std::string& hlo_text,
                                            const CompileOptions& options) {
  PJRT_RETURN_IF_ERROR(pjrt::CheckUtf8(hlo_text, "the program text"));
  v1::CompileRequest request;
  request.set_session_id(state_->id);
  request.set_hlo_text(hlo_text);
  ToWire(options, request.mutable_options());
  v1::CompileResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->executables_stub(),
                                 &v1::Executables::Stub::Compile, request,
                                 &response, kCompileTimeout));
  return Executable(state_, FromWire(response));
}

Executable::~Executable() { Drop(); }

void Executable::Drop() {
  if (!valid()) return;
  std::shared_ptr<SessionState> state = std::move(state_);
  uint64_t handle = std::exchange(info_, CompileInfo()).executable_handle;
  state->DropExecutable(handle);
}

Executable::Executable(Executable&& other) noexcept
    : state_(std::move(other.state_)),
      info_(std::exchange(other.info_, CompileInfo())) {}

Executable& Executable::operator=(Executable&& other) noexcept {
  if (this != &other) {
    Drop();
    state_ = std::move(other.state_);
    info_ = std::exchange(other.info_, CompileInfo());
  }
  return *this;
}

namespace {

absl::Status AddArguments(absl::Span<const Buffer* const> arguments,
                          absl::string_view where,
                          google::protobuf::RepeatedField<uint64_t>* handles) {
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Buffer* argument = arguments[i];
    if (argument == nullptr || !argument->valid()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%sargument %d is %s; pass a valid buffer of this session", where, i,
          argument == nullptr ? "null"
                              : "an invalid (moved or deleted) buffer"));
    }
    handles->Add(argument->handle());
  }
  return absl::OkStatus();
}

void ExecuteOptionsToProto(const ExecuteOptions& options,
                           v1::ExecuteOptions* proto) {
  proto->set_launch_id(options.launch_id);
  proto->set_arguments_are_tupled(options.arguments_are_tupled);
  proto->set_keep_tuple_result(options.keep_tuple_result);
  proto->set_wait_until_ready(options.wait_until_ready);
  proto->set_fetch_results(options.fetch_results);
}

}  // namespace

absl::StatusOr<std::vector<Buffer>> Executable::Execute(
    absl::Span<const Buffer* const> arguments, int device_id,
    const ExecuteOptions& options) const {
  if (!valid()) {
    return absl::FailedPreconditionError("executable is not valid");
  }
  v1::ExecuteRequest request;
  request.set_session_id(state_->id);
  request.set_executable_handle(handle());
  absl::Status added =
      AddArguments(arguments, "", request.mutable_argument_handles());
  if (!added.ok()) return added;
  // A plain Execute must not overtake pipelined runs making its arguments.
  for (const Buffer* argument : arguments) {
    absl::Status synced = argument->Sync();
    if (!synced.ok()) return synced;
  }
  request.set_device_id(device_id);
  ExecuteOptionsToProto(options, request.mutable_options());
  // What the program dropped goes with the run: no call of its own.
  state_->TakeReleases(&request);
  v1::ExecuteResponse response;
  absl::Status status = state_->ExecuteCall(request, &response);
  if (absl::IsResourceExhausted(status)) {
    // Memory or a quota may be held by what the program dropped and the
    // daemon has not freed yet: free it, then try once more.
    state_->FlushReleases();
    request.clear_release_buffers();
    request.clear_release_executables();
    status = state_->ExecuteCall(request, &response);
  }
  if (!status.ok()) return status;
  std::vector<Buffer> results;
  results.reserve(response.results_size());
  for (v1::BufferInfo& info : *response.mutable_results()) {
    results.push_back(Buffer(state_, FromWire(std::move(info))));
  }
  return results;
}

absl::StatusOr<std::vector<std::vector<Buffer>>> Executable::ExecuteReplicated(
    absl::Span<const std::vector<const Buffer*>> arguments,
    const ExecuteOptions& options) const {
  if (!valid()) {
    return absl::FailedPreconditionError("executable is not valid");
  }
  v1::ExecuteReplicatedRequest request;
  request.set_session_id(state_->id);
  request.set_executable_handle(handle());
  for (size_t d = 0; d < arguments.size(); ++d) {
    absl::Status added =
        AddArguments(arguments[d], absl::StrFormat("list %d: ", d),
                     request.add_arguments()->mutable_argument_handles());
    if (!added.ok()) return added;
    for (const Buffer* argument : arguments[d]) {
      absl::Status synced = argument->Sync();
      if (!synced.ok()) return synced;
    }
  }
  ExecuteOptionsToProto(options, request.mutable_options());
  v1::ExecuteReplicatedResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->executables_stub(),
                                 &v1::Executables::Stub::ExecuteReplicated,
                                 request, &response));
  std::vector<std::vector<Buffer>> results(response.results_size());
  for (int d = 0; d < response.results_size(); ++d) {
    for (v1::BufferInfo& info :
         *response.mutable_results(d)->mutable_results()) {
      results[d].push_back(Buffer(state_, FromWire(std::move(info))));
    }
  }
  return results;
}

absl::Status Executable::Delete() {
  if (!valid()) return absl::OkStatus();
  std::shared_ptr<SessionState> state = std::move(state_);
  uint64_t handle = std::exchange(info_, CompileInfo()).executable_handle;
  // A closed session has already dropped the executable.
  if (state->IsClosed()) return absl::OkStatus();
  return state->DeleteExecutableNow(handle);
}

uint64_t Executable::Release() {
  uint64_t handle = std::exchange(info_, CompileInfo()).executable_handle;
  state_.reset();
  return handle;
}

absl::StatusOr<Buffer> Session::MakeTuple(std::vector<Buffer> elements) {
  v1::MakeTupleRequest request;
  request.set_session_id(state_->id);
  for (size_t i = 0; i < elements.size(); ++i) {
    if (!elements[i].valid()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "element %d is an invalid (moved or deleted) buffer", i));
    }
    absl::Status synced = elements[i].Sync();
    if (!synced.ok()) return synced;
    request.add_handles(elements[i].handle());
  }
  v1::BufferInfo response;
  PJRT_RETURN_IF_ERROR(UnaryCall(state_->buffers_stub(),
                                 &v1::Buffers::Stub::MakeTuple, request,
                                 &response));
  // The tuple owns them now.
  for (Buffer& element : elements) element.Release();
  return Buffer(state_, FromWire(std::move(response)));
}

absl::StatusOr<Session::CrossHostReceive> Session::MakeCrossHostReceiveBuffers(
    const std::vector<ArrayShape>& shapes, int device_id,
    absl::Duration timeout) {
  v1::MakeCrossHostReceiveBuffersRequest request;
  request.set_session_id(state_->id);
  for (const ArrayShape& shape : shapes) ToWire(shape, request.add_shapes());
  request.set_device_id(device_id);
  request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
  v1::MakeCrossHostReceiveBuffersResponse response;
  PJRT_RETURN_IF_ERROR(UnaryCall(
      state_->buffers_stub(), &v1::Buffers::Stub::MakeCrossHostReceiveBuffers,
      request, &response));
  CrossHostReceive out;
  for (int i = 0; i < response.buffers_size(); ++i) {
    out.buffers.push_back(
        Buffer(state_, FromWire(std::move(*response.mutable_buffers(i)))));
    out.descriptors.push_back(response.descriptors(i));
  }
  return out;
}

}  // namespace pjrt_client
