// Data channels of the C++ client: raw TCP connections beside gRPC that
// carry an array's bytes (see daemon/data_channel.h for the handshake).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/socket_io.h"
#include "client/cpp/pjrt_client/client.h"
#include "client/cpp/pjrt_client/internal.h"

namespace pjrt_client {
namespace v1 = pjrt::v1;
namespace {

constexpr char kMagic[8] = {'P', 'J', 'R', 'T', 'D', 'C', 'H', '1'};
// How long opening a channel may take before the client streams instead.
constexpr int kConnectTimeoutMs = 5000;

void Close(int fd) {
  if (fd >= 0) close(fd);
}

// A connected TCP socket to `host`:`port`, or -1.
int ConnectTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) !=
      0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                a->ai_protocol);
    if (fd < 0) continue;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
      int error = 0;
      socklen_t length = sizeof(error);
      if (poll(&p, 1, kConnectTimeoutMs) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
          error == 0) {
        rc = 0;
      }
    }
    if (rc != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

// Waits up to kConnectTimeoutMs for `fd` to be readable.
bool Readable(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, kConnectTimeoutMs) == 1;
}

absl::Status SendAll(int fd, const uint8_t* data, size_t size) {
  size_t done = 0;
  if (pjrt::SendAll(fd, data, size, &done)) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrFormat("the data channel broke after %d of %d bytes: %s", done,
                      size, errno != 0 ? strerror(errno) : "closed"));
}

absl::Status ReceiveAll(int fd, uint8_t* data, size_t size) {
  size_t done = 0;
  if (pjrt::ReceiveAll(fd, data, size, &done)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrFormat(
      "the data channel ended after %d of %d bytes: %s", done, size,
      errno != 0 ? strerror(errno) : "closed by the daemon"));
}

}  // namespace

std::optional<ChannelSocket> SessionState::TakeChannel() {
  {
    pjrt::MutexLock lock(&mu);
    if (closed || client->channel_host_.empty() || !channels_unusable.empty()) {
      return std::nullopt;
    }
    if (!idle_channels.empty()) {
      ChannelSocket channel = idle_channels.back();
      idle_channels.pop_back();
      return channel;
    }
    if (open_channels >= kMaxDataChannels) return std::nullopt;
    ++open_channels;
  }
  std::string unusable;
  std::optional<ChannelSocket> opened;
  do {
    v1::OpenDataChannelRequest request;
    request.set_session_id(id);
    v1::OpenDataChannelResponse ticket;
    grpc::ClientContext context;
    SetDeadline(&context, absl::Milliseconds(kConnectTimeoutMs));
    grpc::Status status =
        buffers_stub().OpenDataChannel(&context, request, &ticket);
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
          status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        unusable = status.error_message();
      }
      break;
    }
    int fd = ConnectTcp(client->channel_host_, ticket.port());
    if (fd < 0) {
      // A firewall, or a daemon listening on another interface.
      unusable = absl::StrFormat("cannot connect to %s port %d",
                                 client->channel_host_, ticket.port());
      break;
    }
    std::string hello(kMagic, sizeof(kMagic));
    hello += ticket.token();
    uint8_t reply[16];
    size_t got = 0;
    bool sent = send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(hello.size());
    while (sent && got < sizeof(reply) && Readable(fd)) {
      ssize_t n = recv(fd, reply + got, sizeof(reply) - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    uint64_t handle = 0;
    if (got == sizeof(reply) && std::memcmp(reply, kMagic, 8) == 0) {
      for (int i = 7; i >= 0; --i) handle = (handle << 8) | reply[8 + i];
    } else if (got >= sizeof(kMagic) && std::memcmp(reply, kMagic, 8) != 0) {
      unusable = absl::StrFormat("port %d did not answer as a data channel",
                                 ticket.port());
    }  // else closed or slow (the daemon is busy): stream this time
    if (handle == 0) {  // refused (too many channels): stream this time
      close(fd);
      break;
    }
    // Transfers block on the socket; the daemon ends a stalled one.
    int flags = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &flags, sizeof(flags));
    int mode = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, mode & ~O_NONBLOCK);
    opened = ChannelSocket{fd, handle};
  } while (false);
  if (!opened.has_value()) {
    pjrt::MutexLock lock(&mu);
    --open_channels;
    if (!unusable.empty()) channels_unusable = unusable;
  }
  return opened;
}

void SessionState::GiveBackChannel(ChannelSocket channel) {
  {
    pjrt::MutexLock lock(&mu);
    if (!closed) {
      idle_channels.push_back(channel);
      return;
    }
    --open_channels;
  }
  Close(channel.fd);
}

void SessionState::DiscardChannel(ChannelSocket channel) {
  Close(channel.fd);
  pjrt::MutexLock lock(&mu);
  --open_channels;
}

absl::StatusOr<v1::BufferInfo> UploadOverChannel(
    SessionState& session, const ChannelSocket& channel,
    const v1::UploadHeader& header, absl::Span<const uint8_t> data) {
  v1::BufferInfo info;
  grpc::ClientContext context;
  auto writer = session.buffers_stub().Upload(&context, &info);
  v1::UploadRequest request;
  *request.mutable_header() = header;
  request.mutable_header()->set_channel_handle(channel.handle);
  // A failed write means the daemon has answered already; Finish says how.
  if (writer->Write(request)) writer->WritesDone();
  // Finish returns once the daemon has every byte, or has failed: then the
  // daemon has ended the channel, or (refused before its handler ran) not,
  // and shutting our end wakes the send below either way.
  grpc::Status status;
  std::thread finisher([&] {
    status = writer->Finish();
    if (!status.ok()) shutdown(channel.fd, SHUT_RDWR);
  });
  absl::Status sent = SendAll(channel.fd, data.data(), data.size());
  finisher.join();
  if (status.ok() && sent.ok()) {
    session.GiveBackChannel(channel);
    return info;
  }
  session.DiscardChannel(channel);
  if (!status.ok()) return ToAbslStatus(status);
  return sent;
}

absl::Status DownloadOverChannel(SessionState& session,
                                 const ChannelSocket& channel, uint64_t handle,
                                 absl::Span<uint8_t> out) {
  v1::DownloadRequest request;
  request.set_session_id(session.id);
  request.set_handle(handle);
  request.set_channel_handle(channel.handle);
  grpc::ClientContext context;
  auto reader = session.buffers_stub().Download(&context, request);
  v1::DownloadResponse response;
  absl::Status received = absl::OkStatus();
  bool extra = false;
  if (reader->Read(&response)) {
    // The header: the bytes follow on the channel.
    if (response.header().size_bytes() != static_cast<int64_t>(out.size())) {
      context.TryCancel();
      received = absl::DataLossError(
          absl::StrFormat("daemon announced %d bytes for buffer %#x of %d",
                          response.header().size_bytes(), handle, out.size()));
    } else {
      received = ReceiveAll(channel.fd, out.data(), out.size());
      if (received.ok()) extra = reader->Read(&response);
    }
  }
  grpc::Status status = reader->Finish();
  if (!received.ok() && absl::IsDataLoss(received)) {
    session.DiscardChannel(channel);
    return received;
  }
  if (status.ok() && received.ok() && !extra) {
    session.GiveBackChannel(channel);
    return absl::OkStatus();
  }
  session.DiscardChannel(channel);
  if (!status.ok()) return ToAbslStatus(status);
  if (extra) {
    return absl::DataLossError(absl::StrFormat(
        "daemon sent chunks beside data channel %#x for buffer %#x",
        channel.handle, handle));
  }
  return received;
}

}  // namespace pjrt_client
