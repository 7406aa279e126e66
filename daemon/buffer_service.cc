#include <malloc.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "base/cancellation.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "daemon/grpc_status.h"
#include "daemon/proto_convert.h"
#include "daemon/services.h"
#include "runtime/host_to_device_transfer.h"

namespace pjrt::daemon {
namespace {

// How often a handler blocked on a buffer checks that its call is still
// wanted, so that a cancelled call or a shutting-down daemon frees the
// thread.
constexpr absl::Duration kCancellationPollInterval =
    Cancellation::kPollInterval;

// While a large array streams through gRPC, malloc keeps up to 32 MiB free
// at the top of each heap instead of 128 KiB. A stream churns 1 MiB
// messages through gRPC's threads; at 128 KiB every one was handed back to
// the kernel and faulted in again page by page (44-57 thousand faults per
// 256 MiB, three quarters of an upload's time on a machine where faults
// are dear). Not for good: malloc_trim does not shrink the tops of
// threads' heaps, so a daemon that kept the high threshold would keep up
// to 32 MiB per heap after its clients left; back at 128 KiB, each heap
// gives its top back at its next free.
class StreamingScope {
 public:
  explicit StreamingScope(int64_t bytes) : large_(bytes >= kLargeStream) {
    if (!large_) return;
    MutexLock lock(&mu_);
    if (active_++ == 0) mallopt(M_TRIM_THRESHOLD, kStreamingTrimThreshold);
  }
  ~StreamingScope() {
    if (!large_) return;
    MutexLock lock(&mu_);
    if (--active_ == 0) mallopt(M_TRIM_THRESHOLD, kDefaultTrimThreshold);
  }
  StreamingScope(const StreamingScope&) = delete;
  StreamingScope& operator=(const StreamingScope&) = delete;

 private:
  static constexpr int64_t kLargeStream = int64_t{8} << 20;
  static constexpr int kStreamingTrimThreshold = 32 << 20;
  static constexpr int kDefaultTrimThreshold = 128 << 10;
  static Mutex mu_;
  static int active_ ABSL_GUARDED_BY(mu_);
  const bool large_;
};
Mutex StreamingScope::mu_;
int StreamingScope::active_ = 0;

// A data channel's transfer copies between the device and the socket in
// pieces of this size, through the channel's staging memory.
constexpr int64_t kChannelPieceBytes = int64_t{4} << 20;

// The staging memory of `channel` for a transfer of `total` bytes.
char* ChannelStaging(DataChannelUse& channel, int64_t total) {
  std::string& staging = channel->staging();
  size_t want = static_cast<size_t>(std::min(kChannelPieceBytes, total));
  if (staging.size() < want) staging.resize(want);
  return staging.data();
}

// The data channel an upload or download names, held for the transfer
// (ended by the hold unless the transfer succeeds).
absl::StatusOr<DataChannelUse> TakeChannel(Session& session, uint64_t handle) {
  PJRT_ASSIGN_OR_RETURN(auto channel, session.LookupDataChannel(handle));
  absl::Status acquired = channel->Acquire(handle);
  if (!acquired.ok()) {
    // Its bytes are on their way anyway, into another transfer's stream.
    channel->End();
    return acquired;
  }
  return DataChannelUse(std::move(channel));
}

struct SessionBuffer {
  std::shared_ptr<Session> session;
  std::shared_ptr<runtime::Buffer> buffer;
};

absl::StatusOr<SessionBuffer> Lookup(Authenticator* auth,
                                     SessionTable* sessions,
                                     const grpc::ServerContextBase& context,
                                     uint64_t session_id, uint64_t handle) {
  PJRT_ASSIGN_OR_RETURN(auto session,
                        CallerSession(auth, sessions, context, session_id));
  PJRT_ASSIGN_OR_RETURN(auto buffer, session->LookupBuffer(handle));
  return SessionBuffer{std::move(session), std::move(buffer)};
}

// Why a tuple's bytes cannot be read whole (`verb`: how the call reads),
// naming its elements' handles, which can.
absl::Status TupleReadError(const Session& session, uint64_t handle,
                            const runtime::Buffer& tuple, const char* verb) {
  std::vector<std::string> elements;
  for (const auto& element : tuple.tuple_elements()) {
    elements.push_back(absl::StrFormat("%#x", session.HandleOf(element.get())));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "buffer %#x is a tuple %s; %s its elements "
      "(handles %s) instead",
      handle, tuple.shape().ToString(), verb, absl::StrJoin(elements, ", ")));
}

}  // namespace

absl::Status AddReadyState(const Session& session, uint64_t handle,
                           v1::GetReadyStateResponse* response) {
  PJRT_ASSIGN_OR_RETURN(auto buffer, session.LookupBuffer(handle));
  v1::BufferInfo info;
  BufferInfoToProto(session, handle, *buffer, &info);
  v1::ReadyState* state = response->add_states();
  state->set_handle(handle);
  state->set_ready(info.ready());
  state->set_error_code(info.error_code());
  state->set_error_message(info.error_message());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> CallerSession(
    Authenticator* auth, SessionTable* sessions,
    const grpc::ServerContextBase& context, uint64_t id) {
  PJRT_ASSIGN_OR_RETURN(Caller caller, auth->Authenticate(context));
  return sessions->Lookup(id, caller);
}

std::shared_ptr<Cancellation> CallCancellation(grpc::ServerContext* context,
                                               const Session& session) {
  const auto call_deadline = context->deadline();
  absl::Time deadline = absl::InfiniteFuture();
  if (call_deadline != std::chrono::system_clock::time_point::max()) {
    deadline = absl::FromChrono(call_deadline);
  }
  return std::make_shared<Cancellation>(
      session.cancellation(), deadline, [context]() -> absl::Status {
        if (!context->IsCancelled()) return absl::OkStatus();
        return absl::CancelledError(
            "the call was cancelled (by its client, its deadline, or the "
            "daemon shutting down)");
      });
}

absl::StatusOr<Session::WaitingCall> MaybeStartWaitingCall(
    Session& session, absl::Span<runtime::Buffer* const> buffers) {
  for (runtime::Buffer* buffer : buffers) {
    if (buffer->UseWouldBlock()) return session.StartWaitingCall();
  }
  return Session::WaitingCall();
}

absl::Status AwaitReady(grpc::ServerContext* context, runtime::Buffer& buffer,
                        absl::Duration timeout,
                        const Cancellation* session_cancellation,
                        Session* waiting_session) {
  absl::Time deadline = absl::Now() + timeout;
  // A wait for data from outside (a receive) or for collective peers holds
  // a thread for long: it counts against the session's waiting calls.
  Session::WaitingCall waiting;
  if (waiting_session != nullptr && buffer.UseWouldBlock()) {
    PJRT_ASSIGN_OR_RETURN(waiting, waiting_session->StartWaitingCall());
  }
  for (;;) {
    absl::Duration slice =
        std::min(kCancellationPollInterval, deadline - absl::Now());
    absl::Status status = buffer.BlockHostUntilReady(slice);
    if (!absl::IsDeadlineExceeded(status)) return status;
    // Ready as the slice ran out: wait again (at once) for its own status,
    // which is the answer, not the slice's deadline.
    if (buffer.IsReady()) return buffer.BlockHostUntilReady();
    if (context != nullptr && context->IsCancelled()) {
      return absl::CancelledError("the call was cancelled");
    }
    absl::Status cancelled = CheckCancelled(session_cancellation);
    if (!cancelled.ok()) return cancelled;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("buffer %s was not ready within %s",
                          buffer.DebugString(), absl::FormatDuration(timeout)));
    }
  }
}

absl::Status BufferService::UploadImpl(
    grpc::ServerContext* context, grpc::ServerReader<v1::UploadRequest>* reader,
    v1::BufferInfo* response) {
  v1::UploadRequest request;
  if (!reader->Read(&request)) {
    return absl::InvalidArgumentError("upload stream ended before its header");
  }
  if (!request.has_header()) {
    return absl::InvalidArgumentError(
        "the first message of an upload must be its header (session, shape, "
        "device); got a data chunk");
  }
  const absl::Time start = absl::Now();
  const v1::UploadHeader& header = request.header();
  // `header` lives in `request`, which the reads below reuse.
  const uint64_t channel_handle = header.channel_handle();
  auto session = CallerSession(auth_, sessions_, *context, header.session_id());
  if (!session.ok()) return session.status();
  // Another task's device: a whole-cluster session's upload streams there.
  int remote_task = -1;
  if (proxies_ != nullptr) {
    auto task = cluster_->TaskOfDevice(header.device_id());
    if (task.ok() && *task != cluster_->task_id()) remote_task = *task;
  }
  if (remote_task >= 0 && channel_handle == 0 && (*session)->whole_cluster()) {
    return ForwardUpload(context, reader, std::move(request), *session,
                         remote_task, response);
  }
  // Over a data channel: held from here, so that every failure below ends
  // it (the client's bytes may be on their way).
  DataChannelUse channel;
  if (channel_handle != 0) {
    auto taken = TakeChannel(**session, channel_handle);
    if (!taken.ok()) return taken.status();
    channel = *std::move(taken);
  }
  if (remote_task >= 0 && (*session)->whole_cluster()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("device %d is task %d's: an upload to another task's "
                        "device streams its bytes in chunks, not over a data "
                        "channel of this daemon",
                        header.device_id(), remote_task));
  }
  if (remote_task >= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d belongs to task %d, and this session "
        "reaches this task's (%d) devices only: upload "
        "through task %d's daemon, or open the session with "
        "whole_cluster to reach every task's devices",
        header.device_id(), remote_task, cluster_->task_id(), remote_task));
  }
  auto shape = ShapeFromProto(header.shape());
  if (!shape.ok()) return shape.status();
  auto device =
      LookupAddressableDevice(*client_, *cluster_, header.device_id());
  if (!device.ok()) return device.status();
  // The buffer's memory counts against the tenant's quota from now, not
  // from when its handle comes: stalled uploads would hold it uncounted.
  auto hold = (*session)->HoldDeviceMemory((*device)->local_hardware_id(),
                                           shape->ByteSize());
  if (!hold.ok()) return hold.status();
  auto transfer = client_->CreateHostToDeviceTransfer(*shape, *device);
  if (!transfer.ok()) return transfer.status();

  // `transfer` aborts the buffer (and frees its memory) on every early
  // return below.
  StreamingScope streaming(channel_handle == 0 ? (*transfer)->bytes_expected()
                                               : 0);
  if (channel_handle != 0) {
    const int64_t total = (*transfer)->bytes_expected();
    char* staging = ChannelStaging(channel, total);
    auto cancellation = CallCancellation(context, **session);
    const std::string what = absl::StrFormat("upload of %s", shape->ToString());
    for (int64_t offset = 0; offset < total; offset += kChannelPieceBytes) {
      int64_t size = std::min(kChannelPieceBytes, total - offset);
      absl::Status status =
          channel->Receive(staging, size, cancellation.get(), what);
      if (status.ok()) status = (*transfer)->Append(staging, size);
      if (!status.ok()) return status;
    }
    if (reader->Read(&request)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("an upload over data channel %#x carries its header "
                          "alone; got a second message",
                          channel_handle));
    }
  }
  int64_t chunks = 0;
  while (channel_handle == 0 && reader->Read(&request)) {
    if (!request.has_chunk() && request.has_header()) {
      return absl::InvalidArgumentError(
          "an upload carries one header; got a second one "
          "after " +
          std::to_string(chunks) + " chunks");
    }
    const std::string& chunk = request.chunk();
    if (static_cast<int64_t>(chunk.size()) > kMaxChunkBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("upload chunk %d is %d bytes; chunks may be at most "
                          "%d bytes (1 MiB)",
                          chunks, chunk.size(), kMaxChunkBytes));
    }
    absl::Status status =
        (*transfer)->Append(chunk.data(), static_cast<int64_t>(chunk.size()));
    if (!status.ok()) return status;
    ++chunks;
  }
  if (context->IsCancelled()) {
    spdlog::info("upload of {} cut off after {} of {} bytes; discarded",
                 shape->ToString(), (*transfer)->bytes_received(),
                 (*transfer)->bytes_expected());
    return absl::CancelledError(
        "upload cancelled; the partial buffer was discarded");
  }
  absl::Status status = (*transfer)->Finish();
  if (!status.ok()) return status;
  std::shared_ptr<runtime::Buffer> buffer = (*transfer)->buffer();
  hold->reset();  // the handle counts it from here
  auto handle = (*session)->AddBuffer(buffer);
  if (!handle.ok()) {
    buffer->Delete();
    return handle.status();
  }
  if (channel_handle != 0) channel.Succeeded();
  RecordTransfer(
      metrics_, (*session)->usage().get(), TransferDirection::kToDevice,
      channel_handle != 0 ? TransferPath::kDataChannel : TransferPath::kStream,
      buffer->size_bytes(), start);
  BufferInfoToProto(**session, *handle, *buffer, response);
  return absl::OkStatus();
}

absl::Status BufferService::DownloadImpl(
    grpc::ServerContext* context, const v1::DownloadRequest* request,
    grpc::ServerWriter<v1::DownloadResponse>* writer) {
  if (request->channel_handle() != 0) {
    return DownloadOverChannel(context, request, writer);
  }
  auto remote = FindRemote(*context, request->session_id(), request->handle());
  if (!remote.ok()) return remote.status();
  if (remote->has_value()) {
    return ForwardDownload(context, *request, **remote, writer);
  }
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  runtime::Buffer& buffer = *found->buffer;
  if (buffer.is_tuple()) {
    return TupleReadError(*found->session, request->handle(), buffer,
                          "download");
  }
  absl::Status ready =
      AwaitReady(context, buffer, absl::InfiniteDuration(),
                 found->session->cancellation().get(), found->session.get());
  if (!ready.ok()) return ready;

  v1::DownloadResponse response;
  BufferInfoToProto(*found->session, request->handle(), buffer,
                    response.mutable_header());
  if (!writer->Write(response)) {
    return absl::CancelledError("client went away");
  }
  const int64_t total = buffer.size_bytes();
  const absl::Time start = absl::Now();
  StreamingScope streaming(total);
  for (int64_t offset = 0; offset < total; offset += kMaxChunkBytes) {
    int64_t size = std::min(kMaxChunkBytes, total - offset);
    std::string* chunk = response.mutable_chunk();
    chunk->resize(static_cast<size_t>(size));
    absl::Status status = buffer.CopyRawToHost(chunk->data(), offset, size);
    if (!status.ok()) return status;
    if (!writer->Write(response)) {
      return absl::CancelledError("client went away");
    }
  }
  RecordTransfer(metrics_, found->session->usage().get(),
                 TransferDirection::kFromDevice, TransferPath::kStream, total,
                 start);
  return absl::OkStatus();
}

absl::Status BufferService::DownloadOverChannel(
    grpc::ServerContext* context, const v1::DownloadRequest* request,
    grpc::ServerWriter<v1::DownloadResponse>* writer) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  // Held from here: a failure below ends the channel, as the client
  // expects of any failed transfer over one.
  auto channel = TakeChannel(**session, request->channel_handle());
  if (!channel.ok()) return channel.status();
  auto found = (*session)->LookupBuffer(request->handle());
  if (!found.ok()) return found.status();
  runtime::Buffer& buffer = **found;
  if (buffer.is_tuple()) {
    return TupleReadError(**session, request->handle(), buffer, "download");
  }
  absl::Status ready =
      AwaitReady(context, buffer, absl::InfiniteDuration(),
                 (*session)->cancellation().get(), session->get());
  if (!ready.ok()) return ready;
  v1::DownloadResponse response;
  BufferInfoToProto(**session, request->handle(), buffer,
                    response.mutable_header());
  if (!writer->Write(response)) {
    return absl::CancelledError("client went away");
  }
  const int64_t total = buffer.size_bytes();
  const absl::Time start = absl::Now();
  char* staging = ChannelStaging(*channel, total);
  auto cancellation = CallCancellation(context, **session);
  const std::string what =
      absl::StrFormat("download of buffer %#x", request->handle());
  for (int64_t offset = 0; offset < total; offset += kChannelPieceBytes) {
    int64_t size = std::min(kChannelPieceBytes, total - offset);
    absl::Status status = buffer.CopyRawToHost(staging, offset, size);
    if (status.ok()) {
      status = (*channel)->Send(staging, size, cancellation.get(), what);
    }
    if (!status.ok()) return status;
  }
  channel->Succeeded();
  RecordTransfer(metrics_, (*session)->usage().get(),
                 TransferDirection::kFromDevice, TransferPath::kDataChannel,
                 total, start);
  return absl::OkStatus();
}

absl::Status BufferService::OpenDataChannelImpl(
    grpc::ServerContext* context, const v1::OpenDataChannelRequest* request,
    v1::OpenDataChannelResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  if (channels_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("this daemon offers no data channels (%s); stream "
                        "arrays with Upload and Download instead",
                        no_channels_reason_));
  }
  auto ticket = channels_->Offer(*session);
  if (!ticket.ok()) return ticket.status();
  response->set_port(ticket->port);
  response->set_token(ticket->token);
  return absl::OkStatus();
}

absl::Status BufferService::ReadBufferImpl(grpc::ServerContext* context,
                                           const v1::DownloadRequest* request,
                                           v1::BufferInfo* response) {
  auto remote = FindRemote(*context, request->session_id(), request->handle());
  if (!remote.ok()) return remote.status();
  if (remote->has_value()) {
    return proxies_->Forward(context, (*remote)->task, (*remote)->proxy,
                             *request, response,
                             &v1::Peer::Stub::ProxyReadBuffer);
  }
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  runtime::Buffer& buffer = *found->buffer;
  if (buffer.is_tuple()) {
    return TupleReadError(*found->session, request->handle(), buffer, "read");
  }
  if (buffer.size_bytes() > kMaxInlineBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("buffer %#x (%s) is %d bytes; ReadBuffer returns at "
                        "most %d (1 MiB): read it with Download",
                        request->handle(), buffer.shape().ToString(),
                        buffer.size_bytes(), kMaxInlineBytes));
  }
  absl::Status ready =
      AwaitReady(context, buffer, absl::InfiniteDuration(),
                 found->session->cancellation().get(), found->session.get());
  if (!ready.ok()) return ready;
  BufferInfoToProto(*found->session, request->handle(), buffer, response);
  std::string* data = response->mutable_data();
  if (buffer.size_bytes() == 0) return absl::OkStatus();
  data->resize(static_cast<size_t>(buffer.size_bytes()));
  const absl::Time start = absl::Now();
  absl::Status copied =
      buffer.CopyRawToHost(data->data(), 0, buffer.size_bytes());
  if (!copied.ok()) return copied;
  RecordTransfer(metrics_, found->session->usage().get(),
                 TransferDirection::kFromDevice, TransferPath::kStream,
                 buffer.size_bytes(), start);
  return absl::OkStatus();
}

absl::Status BufferService::DescribeBufferImpl(
    grpc::ServerContext* context, const v1::DescribeBufferRequest* request,
    v1::BufferInfo* response) {
  auto remote = FindRemote(*context, request->session_id(), request->handle());
  if (!remote.ok()) return remote.status();
  if (remote->has_value()) {
    return proxies_->Forward(context, (*remote)->task, (*remote)->proxy,
                             *request, response,
                             &v1::Peer::Stub::ProxyDescribeBuffer);
  }
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  BufferInfoToProto(*found->session, request->handle(), *found->buffer,
                    response);
  return absl::OkStatus();
}

absl::Status BufferService::DeleteBuffersImpl(
    grpc::ServerContext* context, const v1::DeleteBuffersRequest* request,
    v1::DeleteBuffersResponse*) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  if (proxies_ != nullptr && (*session)->whole_cluster()) {
    return DeleteAcrossTasks(context, *session, *request);
  }
  if (request->skip_unknown()) {
    (*session)->Release(request->handles(), {});
    return absl::OkStatus();
  }
  return (*session)->DeleteBuffers(request->handles());
}

absl::Status BufferService::BlockUntilReadyImpl(
    grpc::ServerContext* context, const v1::BlockUntilReadyRequest* request,
    v1::BufferInfo* response) {
  auto remote = FindRemote(*context, request->session_id(), request->handle());
  if (!remote.ok()) return remote.status();
  if (remote->has_value()) {
    return proxies_->Forward(context, (*remote)->task, (*remote)->proxy,
                             *request, response,
                             &v1::Peer::Stub::ProxyBlockUntilReady);
  }
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  if (request->timeout_ms() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("timeout_ms is %d; use a positive value, or 0 to wait "
                        "without a bound",
                        request->timeout_ms()));
  }
  absl::Duration timeout = request->timeout_ms() == 0
                               ? absl::InfiniteDuration()
                               : absl::Milliseconds(request->timeout_ms());
  absl::Status status =
      AwaitReady(context, *found->buffer, timeout,
                 found->session->cancellation().get(), found->session.get());
  if (!status.ok()) return status;
  BufferInfoToProto(*found->session, request->handle(), *found->buffer,
                    response);
  return absl::OkStatus();
}

absl::Status BufferService::CopyToDeviceImpl(
    grpc::ServerContext* context, const v1::CopyToDeviceRequest* request,
    v1::BufferInfo* response) {
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  auto device =
      LookupAddressableDevice(*client_, *cluster_, request->device_id());
  if (!device.ok()) return device.status();
  runtime::Buffer* source = found->buffer.get();
  auto waiting = MaybeStartWaitingCall(*found->session, {&source, 1});
  if (!waiting.ok()) return waiting.status();
  std::shared_ptr<Cancellation> cancellation =
      CallCancellation(context, *found->session);
  auto copy = found->buffer->CopyToDevice(*device, cancellation.get());
  if (!copy.ok()) return copy.status();
  auto handle = found->session->AddBuffer(*copy);
  if (!handle.ok()) {
    (*copy)->Delete();
    return handle.status();
  }
  BufferInfoToProto(*found->session, *handle, **copy, response);
  return absl::OkStatus();
}

absl::Status BufferService::GetReadyStateImpl(
    grpc::ServerContext* context, const v1::GetReadyStateRequest* request,
    v1::GetReadyStateResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  if (request->handles_size() > kMaxReadyStateHandles) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GetReadyState names %d handles; at most %d per call",
                        request->handles_size(), kMaxReadyStateHandles));
  }
  if (proxies_ != nullptr && (*session)->whole_cluster()) {
    return RemoteReadyState(context, *session, *request, response);
  }
  for (uint64_t handle : request->handles()) {
    absl::Status status = AddReadyState(**session, handle, response);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status BufferService::MakeTupleImpl(grpc::ServerContext* context,
                                          const v1::MakeTupleRequest* request,
                                          v1::BufferInfo* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  if (request->handles_size() == 0) {
    return absl::InvalidArgumentError(
        "MakeTuple needs at least one element handle");
  }
  std::vector<std::shared_ptr<runtime::Buffer>> elements;
  for (int i = 0; i < request->handles_size(); ++i) {
    auto buffer = (*session)->LookupBuffer(request->handles(i));
    if (!buffer.ok()) {
      return absl::Status(
          buffer.status().code(),
          absl::StrFormat("element %d: %s", i, buffer.status().message()));
    }
    if (!elements.empty() && (*buffer)->device() != elements[0]->device()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("element %d is on %s but element 0 is on %s; a "
                          "tuple's elements must share a device",
                          i, (*buffer)->device()->DebugString(),
                          elements[0]->device()->DebugString()));
    }
    elements.push_back(*std::move(buffer));
  }
  // Tuples of tuples grow fast: check the limits on the would-be shape
  // (which shares its elements' shapes, so costs one entry per element).
  std::vector<hlo::Shape> shapes;
  shapes.reserve(elements.size());
  for (const auto& e : elements) shapes.push_back(e->shape());
  absl::Status limits =
      hlo::CheckShapeLimits(hlo::Shape::Tuple(std::move(shapes)));
  if (!limits.ok()) return limits;
  runtime::Device* device = elements[0]->device();
  auto tuple = runtime::Buffer::MakeTuple(client_, device, std::move(elements));
  auto handle = (*session)->AddBuffer(tuple);
  if (!handle.ok()) return handle.status();
  BufferInfoToProto(**session, *handle, *tuple, response);
  return absl::OkStatus();
}

absl::StatusOr<runtime::Device*> LookupAddressableDevice(
    const runtime::Client& client, const Cluster& cluster, int id) {
  auto device = client.LookupDevice(id);
  if (device.ok() || !cluster.multi_task()) return device;
  auto task = cluster.TaskOfDevice(id);
  if (!task.ok()) return task.status();
  return absl::InvalidArgumentError(absl::StrFormat(
      "device %d belongs to task %d; this daemon is task %d and addresses "
      "devices %d to %d (send the call to task %d's daemon)",
      id, *task, cluster.task_id(), client.devices().front()->id(),
      client.devices().back()->id(), *task));
}

absl::Status BufferService::MakeCrossHostReceiveBuffersImpl(
    grpc::ServerContext* context,
    const v1::MakeCrossHostReceiveBuffersRequest* request,
    v1::MakeCrossHostReceiveBuffersResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  auto device =
      LookupAddressableDevice(*client_, *cluster_, request->device_id());
  if (!device.ok()) return device.status();
  const double max_seconds = absl::ToDoubleSeconds(max_receive_timeout_);
  // NaN fails the comparison too.
  if (!(request->timeout_seconds() >= 0 &&
        request->timeout_seconds() <= max_seconds)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "timeout_seconds is %g; give 0 for the default (%s) or "
        "up to %g (the daemon's max_receive_timeout_seconds)",
        request->timeout_seconds(),
        absl::FormatDuration(default_receive_timeout_), max_seconds));
  }
  {
    absl::Status room = (*session)->CheckRoom(request->shapes_size());
    if (!room.ok()) return room;
  }
  std::vector<hlo::Shape> shapes;
  for (int i = 0; i < request->shapes_size(); ++i) {
    auto shape = ShapeFromProto(request->shapes(i));
    if (!shape.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shape %d: %s", i, shape.status().message()));
    }
    shapes.push_back(*std::move(shape));
  }
  absl::Duration timeout = request->timeout_seconds() == 0
                               ? default_receive_timeout_
                               : absl::Seconds(request->timeout_seconds());
  auto made = receives_->Make(shapes, *device, timeout);
  if (!made.ok()) return made.status();
  std::vector<uint64_t> handles;
  for (const auto& buffer : made->buffers) {
    auto handle = (*session)->AddBuffer(buffer);
    if (!handle.ok()) {
      // Dropping the rest: their receives are cancelled with the buffers.
      for (const auto& b : made->buffers) b->Delete();
      (*session)->DeleteBuffers(handles).IgnoreError();
      return handle.status();
    }
    handles.push_back(*handle);
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    BufferInfoToProto(**session, handles[i], *made->buffers[i],
                      response->add_buffers());
    response->add_descriptors(made->descriptors[i]);
  }
  response->set_expires_in_seconds(absl::ToDoubleSeconds(timeout));
  return absl::OkStatus();
}

absl::Status BufferService::CancelCrossHostReceivesImpl(
    grpc::ServerContext* context,
    const v1::CancelCrossHostReceivesRequest* request,
    v1::CancelCrossHostReceivesResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  for (uint64_t handle : request->handles()) {
    auto buffer = (*session)->LookupBuffer(handle);
    if (!buffer.ok()) return buffer.status();
    buffers.push_back(*std::move(buffer));
  }
  response->set_cancelled(receives_->Cancel(buffers));
  return absl::OkStatus();
}

absl::Status BufferService::CopyToRemoteDeviceImpl(
    grpc::ServerContext* context, const v1::CopyToRemoteDeviceRequest* request,
    v1::CopyToRemoteDeviceResponse* response) {
  const absl::Time start = absl::Now();
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  runtime::Buffer& buffer = *found->buffer;
  if (buffer.is_tuple()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("buffer %#x is a tuple; copy its "
                        "elements one by one",
                        request->handle()));
  }
  if (!cluster_->multi_task()) {
    return absl::FailedPreconditionError(
        "this daemon is not part of a cluster (start it with --cluster); use "
        "CopyToDevice between its own devices");
  }
  auto descriptor = ParseDescriptor(request->transfer_descriptor());
  if (!descriptor.ok()) return descriptor.status();
  const int task = descriptor->task_id();
  if (task < 0 || task >= cluster_->task_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the descriptor names task %d, but this cluster has "
                        "tasks 0 to %d",
                        task, cluster_->task_count() - 1));
  }
  auto shape = ShapeFromProto(descriptor->shape());
  if (!shape.ok() || !(*shape == buffer.shape())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("buffer %#x is %s, but the receive named by the "
                        "descriptor is %s",
                        request->handle(), buffer.shape().ToString(),
                        shape.ok() ? shape->ToString() : "malformed"));
  }
  const absl::Time expiry =
      absl::FromUnixMicros(descriptor->expires_unix_micros());
  if (absl::Now() >= expiry) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the descriptor expired %s ago; ask task %d for a new "
                        "receive",
                        absl::FormatDuration(absl::Trunc(
                            absl::Now() - expiry, absl::Milliseconds(1))),
                        task));
  }
  // The bytes must be defined before they can be sent.
  absl::Status ready =
      AwaitReady(context, buffer, expiry - absl::Now(),
                 found->session->cancellation().get(), found->session.get());
  if (!ready.ok()) return ready;

  PJRT_ASSIGN_OR_RETURN(
      const int64_t total,
      PushToTask(*cluster_,
                 client_->platform()->host_can_access_device_memory(), buffer,
                 task, request->transfer_descriptor(), kMaxChunkBytes,
                 [context] { return context->IsCancelled(); }));
  RecordTransfer(metrics_, found->session->usage().get(),
                 TransferDirection::kFromDevice, TransferPath::kPeer, total,
                 start);
  response->set_bytes(total);
  response->set_receiver_task_id(task);
  response->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::Status BufferService::UploadFromRegionImpl(
    grpc::ServerContext* context, const v1::UploadFromRegionRequest* request,
    v1::BufferInfo* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  auto region = (*session)->LookupRegion(request->region_handle());
  if (!region.ok()) return region.status();
  auto shape = ShapeFromProto(request->shape());
  if (!shape.ok()) return shape.status();
  auto device =
      LookupAddressableDevice(*client_, *cluster_, request->device_id());
  if (!device.ok()) return device.status();
  auto slice = (*region)->Slice(request->offset(), shape->ByteSize());
  if (!slice.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("upload of %s from region %#x: %s", shape->ToString(),
                        request->region_handle(), slice.status().message()));
  }
  // Zero copy makes the slice the buffer's memory; it then stays in use
  // until the buffer lets go of it. Otherwise the slice is in use until the
  // copy is done, and the reply waits for that.
  const absl::Time start = absl::Now();
  const bool aliased =
      request->zero_copy() &&
      client_->platform()->host_can_access_device_memory() &&
      reinterpret_cast<uintptr_t>(*slice) % runtime::kZeroCopyAlignment == 0;
  auto copied = std::make_shared<absl::Notification>();
  auto buffer = client_->BufferFromHostBuffer(
      *slice, *shape,
      aliased ? runtime::HostBufferSemantics::kZeroCopy
              : runtime::HostBufferSemantics::kImmutableUntilTransferCompletes,
      [use = (*region)->Acquire(), copied]() mutable {
        use = Region::Use();
        copied->Notify();
      },
      *device);
  if (!buffer.ok()) return buffer.status();
  if (!aliased) copied->WaitForNotification();
  auto handle = (*session)->AddBuffer(*buffer);
  if (!handle.ok()) {
    (*buffer)->Delete();
    return handle.status();
  }
  RecordTransfer(metrics_, (*session)->usage().get(),
                 TransferDirection::kToDevice, TransferPath::kSharedMemory,
                 (*buffer)->size_bytes(), start);
  BufferInfoToProto(**session, *handle, **buffer, response);
  return absl::OkStatus();
}

absl::Status BufferService::DownloadToRegionImpl(
    grpc::ServerContext* context, const v1::DownloadToRegionRequest* request,
    v1::BufferInfo* response) {
  auto found = Lookup(auth_, sessions_, *context, request->session_id(),
                      request->handle());
  if (!found.ok()) return found.status();
  auto region = found->session->LookupRegion(request->region_handle());
  if (!region.ok()) return region.status();
  runtime::Buffer& buffer = *found->buffer;
  if (buffer.is_tuple()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("buffer %#x is a tuple %s; download its elements "
                        "instead",
                        request->handle(), buffer.shape().ToString()));
  }
  auto slice = (*region)->Slice(request->offset(), buffer.size_bytes());
  if (!slice.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("download of buffer %#x (%s) into region %#x: %s",
                        request->handle(), buffer.shape().ToString(),
                        request->region_handle(), slice.status().message()));
  }
  Region::Use use = (*region)->Acquire();
  absl::Status ready =
      AwaitReady(context, buffer, absl::InfiniteDuration(),
                 found->session->cancellation().get(), found->session.get());
  if (!ready.ok()) return ready;
  const absl::Time start = absl::Now();
  absl::Status status = buffer.CopyRawToHost(*slice, 0, buffer.size_bytes());
  if (!status.ok()) return status;
  RecordTransfer(metrics_, found->session->usage().get(),
                 TransferDirection::kFromDevice, TransferPath::kSharedMemory,
                 buffer.size_bytes(), start);
  BufferInfoToProto(*found->session, request->handle(), buffer, response);
  return absl::OkStatus();
}

absl::Status BufferService::UnregisterRegionImpl(
    grpc::ServerContext* context, const v1::UnregisterRegionRequest* request,
    v1::UnregisterRegionResponse*) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  return (*session)->UnregisterRegion(request->region_handle());
}

absl::Status BufferService::ListRegionsImpl(
    grpc::ServerContext* context, const v1::ListRegionsRequest* request,
    v1::ListRegionsResponse* response) {
  auto session =
      CallerSession(auth_, sessions_, *context, request->session_id());
  if (!session.ok()) return session.status();
  for (const auto& [handle, region] : (*session)->Regions()) {
    v1::RegionInfo* info = response->add_regions();
    info->set_region_handle(handle);
    info->set_size_bytes(region->size());
    info->set_name(region->name());
    info->set_uses(region->uses());
  }
  return absl::OkStatus();
}

}  // namespace pjrt::daemon
