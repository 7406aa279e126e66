// The C++ client of pjrtd.
//
//   auto client = pjrt_client::Client::Connect({.address = "unix:///tmp/p.sock"});
//   auto session = (*client)->OpenSession("my-tool");
//   std::vector<float> x = {1, 2, 3};
//   auto buffer = (*session)->Upload(pjrt::v1::DTYPE_F32, {3}, AsBytes(x), 0);
//   auto bytes = buffer->Download();   // 12 bytes, row-major
//
// Ownership: a Session closes itself (freeing everything it owns on the
// daemon) when destroyed; a Buffer deletes itself when destroyed. A Buffer may
// outlive its Session object; it is then already gone on the daemon and its
// destructor does nothing.
//
// Thread-safety: Client and Session may be used from several threads at once.
// A Buffer is a handle; using one Buffer object from several threads needs
// external synchronisation, as for any value type.
#ifndef PJRT_CLIENT_CPP_CLIENT_H_
#define PJRT_CLIENT_CPP_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/channel.h"
#include "pjrt/v1/buffer.grpc.pb.h"
#include "pjrt/v1/server.grpc.pb.h"
#include "pjrt/v1/session.grpc.pb.h"

namespace pjrt_client {

// Where pjrtd listens unless told otherwise.
inline constexpr char kDefaultAddress[] = "unix:///run/pjrtd/pjrtd.sock";
// The environment variable that overrides the default address.
inline constexpr char kAddressEnvVar[] = "PJRTD_ADDRESS";
// Bytes per upload chunk (the protocol's maximum).
inline constexpr int64_t kChunkBytes = int64_t{1} << 20;

// The address to use: `address` if not empty, else $PJRTD_ADDRESS, else
// kDefaultAddress.
std::string ResolveAddress(const std::string& address);

struct ConnectOptions {
  // See ResolveAddress.
  std::string address;
  // How long Connect waits for the daemon to answer.
  absl::Duration timeout = absl::Seconds(10);
};

struct SessionOptions {
  // Shown in `pjrtctl sessions` and the daemon's log.
  std::string client_name;
  // Tie the session to this process: the daemon closes it if the process
  // dies or its connection breaks. Without it, only the lease does.
  bool attach = true;
  // Lease without attachment; zero means the daemon's default.
  absl::Duration lease = absl::ZeroDuration();
};

class Session;
class Buffer;

class Client : public std::enable_shared_from_this<Client> {
 public:
  // Connects and checks that the daemon speaks this client's protocol.
  // UNAVAILABLE (naming the address) if nothing answers within the timeout;
  // FAILED_PRECONDITION on a protocol mismatch.
  static absl::StatusOr<std::shared_ptr<Client>> Connect(
      const ConnectOptions& options = {});

  const std::string& address() const { return address_; }
  // What the daemon said about itself at connect time.
  const pjrt::v1::ServerInfo& server_info() const { return info_; }

  absl::StatusOr<std::vector<pjrt::v1::Device>> Devices();
  absl::StatusOr<pjrt::v1::Stats> Stats();
  absl::StatusOr<std::vector<pjrt::v1::SessionInfo>> Sessions();
  absl::Status Ping();

  absl::StatusOr<std::unique_ptr<Session>> OpenSession(
      const SessionOptions& options = {});

  // The underlying channel and stubs, for calls this class does not wrap.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  pjrt::v1::Server::Stub& server_stub() { return *server_; }
  pjrt::v1::Sessions::Stub& sessions_stub() { return *sessions_; }
  pjrt::v1::Buffers::Stub& buffers_stub() { return *buffers_; }

 private:
  Client(std::string address, std::shared_ptr<grpc::Channel> channel);

  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pjrt::v1::Server::Stub> server_;
  std::unique_ptr<pjrt::v1::Sessions::Stub> sessions_;
  std::unique_ptr<pjrt::v1::Buffers::Stub> buffers_;
  pjrt::v1::ServerInfo info_;
};

// Shared between a Session and its Buffers, so that a Buffer knows whether
// its session is still open.
struct SessionState;

class Session {
 public:
  // Closes the session (see Close), ignoring errors.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const;
  uint64_t public_id() const;
  Client& client() const;

  // Uploads `data` (row-major, little-endian, exactly the byte size of
  // dtype × dims) to device `device_id`.
  absl::StatusOr<Buffer> Upload(pjrt::v1::DType dtype,
                                absl::Span<const int64_t> dims,
                                absl::Span<const uint8_t> data, int device_id);

  // Takes ownership of a buffer of this session known by handle.
  absl::StatusOr<Buffer> Adopt(uint64_t handle);

  absl::Status KeepAlive();

  // Closes the session: the daemon frees every buffer it owns. Idempotent.
  absl::Status Close();

 private:
  friend class Client;
  explicit Session(std::shared_ptr<SessionState> state);
  std::shared_ptr<SessionState> state_;
};

class Buffer {
 public:
  Buffer() = default;
  // Deletes the buffer on the daemon (errors are ignored; use Delete() to
  // see them).
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool valid() const { return state_ != nullptr && info_.handle() != 0; }
  uint64_t handle() const { return info_.handle(); }
  pjrt::v1::DType dtype() const { return info_.shape().dtype(); }
  std::vector<int64_t> dims() const;
  int device_id() const { return info_.device_id(); }
  int64_t size_bytes() const { return info_.size_bytes(); }
  // As returned when the buffer was created.
  const pjrt::v1::BufferInfo& info() const { return info_; }

  // Reads the whole array (waits until it is defined).
  absl::StatusOr<std::vector<uint8_t>> Download() const;
  // Same, into `out`, which must be exactly size_bytes() long.
  absl::Status DownloadInto(absl::Span<uint8_t> out) const;

  absl::StatusOr<pjrt::v1::BufferInfo> Describe() const;
  // Zero timeout waits without a bound.
  absl::Status BlockUntilReady(
      absl::Duration timeout = absl::ZeroDuration()) const;
  absl::StatusOr<Buffer> CopyToDevice(int device_id) const;

  // Deletes the buffer on the daemon now; the object becomes invalid.
  absl::Status Delete();
  // Gives up ownership without deleting; returns the handle.
  uint64_t Release();

 private:
  friend class Session;
  Buffer(std::shared_ptr<SessionState> state, pjrt::v1::BufferInfo info)
      : state_(std::move(state)), info_(std::move(info)) {}

  std::shared_ptr<SessionState> state_;
  pjrt::v1::BufferInfo info_;
};

// Views a contiguous container's bytes: AsBytes(std::vector<float>{...}).
template <typename Container>
absl::Span<const uint8_t> AsBytes(const Container& c) {
  return absl::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(c.data()),
      c.size() * sizeof(*c.data()));
}

// grpc::Status to absl::Status, keeping the code and the daemon's message.
absl::Status ToAbslStatus(const grpc::Status& status);

}  // namespace pjrt_client

#endif  // PJRT_CLIENT_CPP_CLIENT_H_
