// The C++ client of pjrtd.
//
//   auto client = pjrt_client::Client::Connect({.address =
//   "unix:///tmp/p.sock"}); auto session = (*client)->OpenSession("my-tool");
//   std::vector<float> x = {1, 2, 3};
//   auto buffer = (*session)->Upload(DType::kF32, {3}, AsBytes(x), 0);
//   auto bytes = buffer->Download();   // 12 bytes, row-major
//   auto executable = (*session)->Compile(hlo_text);
//   auto results = executable->Execute({&*buffer}, /*device_id=*/0);
//
// Ownership: a Session closes itself (freeing everything it owns on the
// daemon) when destroyed; a Buffer deletes itself, and an Executable drops
// itself, when destroyed. Buffers and Executables may outlive their Session
// object; they are then already gone on the daemon and their destructors do
// nothing.
//
// The interface speaks in its own value types (types.h), not the protocol's
// messages: a program using it needs no protobuf headers.
//
// Thread-safety: Client and Session may be used from several threads at once.
// Buffer and Executable are handles; using one such object from several
// threads needs external synchronisation, as for any value type (Execute is
// const and may be called concurrently).
#ifndef PJRT_CLIENT_CPP_CLIENT_H_
#define PJRT_CLIENT_CPP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

// As installed, in include/pjrt/pjrt_client/ (the build adds client/cpp).
#include "pjrt_client/types.h"

namespace pjrt_client {

// Where pjrtd listens unless told otherwise.
inline constexpr char kDefaultAddress[] = "unix:///run/pjrtd/pjrtd.sock";
// The environment variable that overrides the default address.
inline constexpr char kAddressEnvVar[] = "PJRTD_ADDRESS";
// Bytes per upload chunk (the protocol's maximum, MAX_CHUNK_BYTES of
// proto/pjrt/v1/types.proto; the client checks they agree).
inline constexpr int64_t kChunkBytes = int64_t{1} << 20;

// The address to use: `address` if not empty, else $PJRTD_ADDRESS, else
// kDefaultAddress.
std::string ResolveAddress(const std::string& address);

struct ConnectOptions {
  // See ResolveAddress.
  std::string address;
  // How long Connect waits for the daemon to answer.
  absl::Duration timeout = absl::Seconds(10);
  // Move arrays of kSharedMemoryThreshold bytes or more through shared
  // memory when the daemon is on this host (it offers a region socket and
  // the socket is reachable); otherwise, or when false, stream them.
  bool shared_memory = true;
  // Over plaintext TCP, move arrays of kSharedMemoryThreshold bytes or more
  // that do not go through shared memory over data channels (raw TCP
  // connections beside gRPC; docs/architecture.md) when the daemon offers
  // them; otherwise, or when false, stream them.
  bool data_channels = true;
  // Send Execute calls over execute lanes (unix sockets of the session
  // beside gRPC, one write and one read per call; docs/architecture.md)
  // when the daemon offers them and this process reaches their socket;
  // otherwise, or when false, call gRPC.
  bool execute_lanes = true;
  // The tenant's bearer token, for a daemon with a tenants file; empty:
  // $PJRTD_TOKEN, if set.
  std::string token;
  // PEM files. tls_ca: connect over TLS, trusting this CA ($PJRTD_TLS_CA).
  // tls_cert and tls_key: present this client certificate (mutual TLS;
  // $PJRTD_TLS_CERT, $PJRTD_TLS_KEY).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

// The channel Connect uses for `options` (TLS and token applied), for
// tools that call the daemon's services directly.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const ConnectOptions& options);

// Arrays smaller than this are streamed even when shared memory works.
inline constexpr int64_t kSharedMemoryThreshold = int64_t{1} << 20;
// Arrays of at most this many bytes are read in one unary call (ReadBuffer).
inline constexpr int64_t kInlineBytes = int64_t{1} << 20;

struct SessionOptions {
  // Shown in `pjrtctl sessions` and the daemon's log.
  std::string client_name;
  // Tie the session to this process: the daemon closes it if the process
  // dies or its connection breaks. Without it, only the lease does.
  bool attach = true;
  // Lease without attachment; zero means the daemon's default.
  absl::Duration lease = absl::ZeroDuration();
  // Drive every task of the daemon's cluster from this session (single
  // controller): Upload takes any device of the cluster, and a program
  // whose device assignment spans tasks takes one argument list per device
  // of the assignment, ExecuteReplicated launching it on every task. Its
  // arrays stream through gRPC (they may live on other tasks): no shared
  // memory or data channels.
  bool whole_cluster = false;
};

class Session;
class Buffer;
class Executable;
struct PipelineState;
struct SessionState;
struct Stubs;

// Memory shared with the daemon (a sealed memfd mapped on both sides),
// registered in a session: Session::UploadFromRegion and
// Buffer::DownloadToRegion move bytes through it without a socket. Made by
// Session::CreateRegion; unregistered (and unmapped here) when destroyed.
class Region {
 public:
  Region() = default;
  ~Region();
  Region(Region&& other) noexcept;
  Region& operator=(Region&& other) noexcept;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  bool valid() const { return data_ != nullptr; }
  uint64_t handle() const { return handle_; }
  uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

  // Unregisters the region now. FAILED_PRECONDITION while a transfer or a
  // zero-copy buffer uses it; the object stays valid then.
  absl::Status Unregister();

 private:
  friend class Session;
  void Unmap();

  std::shared_ptr<SessionState> state_;
  uint64_t handle_ = 0;
  uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

// Called after each chunk of an upload or download with the bytes moved so
// far and the total (for progress displays).
using Progress = std::function<void(int64_t done, int64_t total)>;

class Client : public std::enable_shared_from_this<Client> {
 public:
  // Connects and checks that the daemon speaks this client's protocol.
  // UNAVAILABLE (naming the address) if nothing answers within the timeout;
  // FAILED_PRECONDITION on a protocol mismatch.
  static absl::StatusOr<std::shared_ptr<Client>> Connect(
      const ConnectOptions& options = {});

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& address() const { return address_; }
  // What the daemon said about itself at connect time.
  const ServerInfo& server_info() const { return info_; }

  absl::StatusOr<std::vector<Device>> Devices();
  absl::StatusOr<pjrt_client::Stats> Stats();
  absl::StatusOr<std::vector<SessionInfo>> Sessions();
  absl::Status Ping();
  // The tasks of the daemon's cluster, and whether it reaches each now
  // (waiting `timeout` per peer; zero means 2 seconds).
  absl::StatusOr<pjrt_client::ClusterStatus> ClusterStatus(
      absl::Duration timeout = absl::ZeroDuration());

  absl::StatusOr<std::unique_ptr<Session>> OpenSession(
      const SessionOptions& options = {});
  // A session opened earlier and kept (Session::Keep), by its id. The
  // returned object leaves the session open when it goes; NOT_FOUND if the
  // session is gone (closed, or its lease ran out).
  absl::StatusOr<std::unique_ptr<Session>> ResumeSession(uint64_t session_id);

  // The underlying channel (TLS and token applied), for tools that call
  // the daemon's services directly with the generated stubs.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  friend class Session;
  Client(std::string address, std::shared_ptr<grpc::Channel> channel);

  friend struct SessionState;
  bool shared_memory_ = true;
  bool execute_lanes_ = true;
  // The host data channels connect to; empty: no channels (a unix socket,
  // TLS, or turned off).
  std::string channel_host_;
  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<Stubs> stubs_;
  ServerInfo info_;
};

// Shared between a Session and its Buffers, so that a Buffer knows whether
// its session is still open.

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
  absl::StatusOr<Buffer> Upload(DType dtype, absl::Span<const int64_t> dims,
                                absl::Span<const uint8_t> data, int device_id,
                                const Progress& progress = nullptr);

  // Shared memory of `size` bytes registered with the daemon.
  // UNAVAILABLE when the daemon has shared memory off or is on another
  // host.
  absl::StatusOr<Region> CreateRegion(int64_t size,
                                      const std::string& name = "pjrt-region");
  // A buffer of region.data()[offset, offset + the array's bytes). The
  // daemon copies them before it replies; with `zero_copy` (host platform,
  // 64-byte aligned offset) the slice becomes the buffer itself and must
  // stay unchanged while the buffer lives.
  absl::StatusOr<Buffer> UploadFromRegion(const Region& region, int64_t offset,
                                          DType dtype,
                                          absl::Span<const int64_t> dims,
                                          int device_id,
                                          bool zero_copy = false);
  // Whether large uploads and downloads go through shared memory.
  bool uses_shared_memory() const;
  // Whether arrays that do not go through shared memory travel over data
  // channels (see ConnectOptions::data_channels): true until they turn out
  // not to work with this daemon.
  bool uses_data_channels() const;
  // Whether Execute calls go over execute lanes (see
  // ConnectOptions::execute_lanes): true until they turn out not to work
  // with this daemon.
  bool uses_execute_lanes() const;

  // Waits until every pipelined run (Executable::ExecutePipelined) sent so
  // far has run; returns the first error among them.
  absl::Status Synchronize();

  // Has the daemon free now the buffers and executables whose objects went
  // (which otherwise go with the next Execute, or within 0.1 s).
  void FlushReleases();

  // Takes ownership of a buffer of this session known by handle.
  absl::StatusOr<Buffer> Adopt(uint64_t handle);

  // Compiles a program: StableHLO (as jax.jit(f).lower(x).as_text() prints
  // it) or HLO text (as XLA or as_text(dialect="hlo") prints it); the
  // options' program_format says which, or leave it unset to detect it.
  // The daemon caches programs, so compiling one again is cheap. Errors keep
  // the daemon's code and message: INVALID_ARGUMENT with line, column and a
  // caret for bad text, UNIMPLEMENTED naming an unsupported op and its line.
  // `options` sets replicas, partitions, the device assignment, portability
  // and parameters that must not be donated.
  absl::StatusOr<Executable> Compile(const std::string& hlo_text,
                                     const CompileOptions& options = {});

  // Makes a tuple buffer of `elements` (all on one device), for a program
  // with one tuple parameter run with arguments_are_tupled. The tuple takes
  // ownership of the elements: deleting it deletes them.
  absl::StatusOr<Buffer> MakeTuple(std::vector<Buffer> elements);

  // Receive buffers for data from another task of the cluster (not ready
  // until it arrives) and one descriptor per buffer, to hand to that task's
  // Buffer::CopyToRemoteDevice. Zero timeout: the daemon's default.
  struct CrossHostReceive {
    std::vector<Buffer> buffers;
    std::vector<std::string> descriptors;
  };
  absl::StatusOr<CrossHostReceive> MakeCrossHostReceiveBuffers(
      const std::vector<ArrayShape>& shapes, int device_id,
      absl::Duration timeout = absl::ZeroDuration());

  absl::Status KeepAlive();

  // Leaves the session open on the daemon when this object goes: it lives
  // until its lease runs out or someone closes it, and ResumeSession(id())
  // reaches it again. FAILED_PRECONDITION for an attached session (those
  // end with their connection).
  absl::Status Keep();

  // Closes the session: the daemon frees every buffer it owns. Idempotent.
  absl::Status Close();

 private:
  friend class Client;
  explicit Session(std::shared_ptr<SessionState> state);
  absl::StatusOr<Buffer> UploadFromHandle(uint64_t region, int64_t offset,
                                          DType dtype,
                                          absl::Span<const int64_t> dims,
                                          int device_id, bool zero_copy);
  std::shared_ptr<SessionState> state_;
};

class Buffer {
 public:
  Buffer() = default;
  // Releases the buffer without waiting: the daemon deletes it when the
  // session's next Execute carries its handle, or within 0.1 s (use
  // Delete() to delete it now and see errors).
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool valid() const { return state_ != nullptr && info_.handle != 0; }
  uint64_t handle() const { return info_.handle; }
  // A tuple buffer holds no data itself; its elements do.
  bool is_tuple() const { return info_.is_tuple; }
  int tuple_size() const {
    return static_cast<int>(info_.tuple_elements.size());
  }
  // A view of element `i` of a tuple: usable like any buffer, but its
  // destructor leaves the element to the tuple that owns it.
  Buffer Element(int i) const;
  DType dtype() const { return info_.shape.dtype; }
  const std::vector<int64_t>& dims() const { return info_.shape.dims; }
  int device_id() const { return info_.device_id; }
  int64_t size_bytes() const { return info_.size_bytes; }
  // As returned when the buffer was created.
  const BufferInfo& info() const { return info_; }

  // Reads the whole array (waits until it is defined). Large arrays come
  // through shared memory when the daemon is local.
  absl::StatusOr<std::vector<uint8_t>> Download(
      const Progress& progress = nullptr) const;
  // Same, into `out`, which must be exactly size_bytes() long.
  absl::Status DownloadInto(absl::Span<uint8_t> out,
                            const Progress& progress = nullptr) const;

  // Waits until the array is defined and has the daemon copy it into
  // region.data() + offset.
  absl::Status DownloadToRegion(const Region& region, int64_t offset) const;

  absl::StatusOr<BufferInfo> Describe() const;
  // Zero timeout waits without a bound.
  absl::Status BlockUntilReady(
      absl::Duration timeout = absl::ZeroDuration()) const;
  absl::StatusOr<Buffer> CopyToDevice(int device_id) const;
  // Streams the buffer to the receive buffer named by `descriptor` (from
  // Session::MakeCrossHostReceiveBuffers on another task); returns once every
  // byte has arrived.
  absl::StatusOr<RemoteCopy> CopyToRemoteDevice(
      const std::string& descriptor) const;

  // Deletes the buffer on the daemon now; the object becomes invalid.
  absl::Status Delete();
  // Gives up ownership without deleting; returns the handle.
  uint64_t Release();

 private:
  friend class Session;
  friend class Executable;
  Buffer(std::shared_ptr<SessionState> state, BufferInfo info,
         bool owned = true)
      : state_(std::move(state)), info_(std::move(info)), owned_(owned) {}
  // Checks the buffer is valid and, for a result of a pipelined run, waits
  // until the daemon has run it (returning the run's error).
  absl::Status Sync() const;
  absl::Status DownloadToHandle(uint64_t region, int64_t offset) const;
  // The destructor's release (see ~Buffer).
  void Drop();

  std::shared_ptr<SessionState> state_;
  BufferInfo info_;
  // False for a view of a tuple's element.
  bool owned_ = true;
  // The pipelined run that makes the buffer, until it is known to have run;
  // -1 otherwise.
  mutable int64_t pending_sequence_ = -1;
};

struct ExecuteOptions {
  // Identifies one multi-device launch: the Execute calls of every device of
  // a sharded launch share it. 0 lets ExecuteReplicated choose one.
  int64_t launch_id = 0;
  // The program has one tuple parameter and the argument list is one tuple
  // buffer (Session::MakeTuple) instead of the tuple's elements.
  bool arguments_are_tupled = false;
  // A tuple root comes back as one tuple buffer instead of one buffer per
  // element.
  bool keep_tuple_result = false;
  // Execute returns only once the results are ready (one round trip for a
  // run whose results are read at once); errors of the run stay bound to
  // the results.
  bool wait_until_ready = false;
  // As wait_until_ready, and the reply carries the results' contents (those
  // that fit in 1 MiB together): their Download then costs no call.
  bool fetch_results = false;
};

// A compiled program of a session.
class Executable {
 public:
  Executable() = default;
  // Releases the executable without waiting, as ~Buffer.
  ~Executable();
  Executable(Executable&& other) noexcept;
  Executable& operator=(Executable&& other) noexcept;
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  bool valid() const {
    return state_ != nullptr && info_.executable_handle != 0;
  }
  uint64_t handle() const { return info_.executable_handle; }
  // The HloModule's name.
  const std::string& name() const { return info_.name; }
  const std::vector<ArrayShape>& parameter_shapes() const {
    return info_.parameter_shapes;
  }
  // One per result: a tuple root's elements, flattened in order.
  const std::vector<ArrayShape>& result_shapes() const {
    return info_.result_shapes;
  }
  bool result_is_tuple() const { return info_.result_is_tuple; }
  // Time the daemon spent compiling (or waiting for a compile) for this call.
  absl::Duration compile_time() const { return info_.compile_time; }
  // True when the daemon did not compile the program for this call.
  bool cache_hit() const { return info_.cache_hit; }
  // Hex SHA-256 of the program and options.
  const std::string& fingerprint() const { return info_.fingerprint; }
  // As returned by Compile.
  const CompileInfo& info() const { return info_; }

  int num_replicas() const { return info_.num_replicas; }
  int num_partitions() const { return info_.num_partitions; }
  bool portable() const { return info_.portable; }
  // The devices ExecuteReplicated takes one argument list for, in order.
  const std::vector<int>& addressable_device_ids() const {
    return info_.addressable_device_ids;
  }
  // Parameters whose arguments are donated: invalid after a run.
  const std::vector<int>& donated_parameters() const {
    return info_.donated_parameters;
  }

  // Enqueues one run on device `device_id` with one buffer per parameter
  // (all on that device) and returns the result buffers at once; they become
  // ready when the run finishes, and errors of the run are bound to them.
  // A single-device program runs on any device, a portable one on the device
  // given; of a program over several devices only the replica and partition
  // assigned to `device_id` runs (the other devices' calls join it through
  // options.launch_id). INVALID_ARGUMENT names the argument for wrong arity,
  // shape, dtype or device; NOT_FOUND for unknown handles.
  absl::StatusOr<std::vector<Buffer>> Execute(
      absl::Span<const Buffer* const> arguments, int device_id,
      const ExecuteOptions& options = {}) const;

  // Sends the run on the session's ordered execution stream and returns
  // the results at once, without waiting for any reply: a loop of
  // dependent steps (each feeding the next) costs no round trip per step.
  // Result handles are chosen here. An error, including one the daemon
  // finds in the request, is returned by the first call that reads a
  // result of that run or a later one (Download, BlockUntilReady, ...),
  // by Session::Synchronize, and by the next ExecutePipelined. Tuple
  // results come back as one buffer per element.
  absl::StatusOr<std::vector<Buffer>> ExecutePipelined(
      absl::Span<const Buffer* const> arguments, int device_id,
      const ExecuteOptions& options = {}) const;

  // Runs every replica and partition at once: one argument list per device
  // of addressable_device_ids(), one result list per device back. One
  // failing replica fails the whole launch, naming it.
  absl::StatusOr<std::vector<std::vector<Buffer>>> ExecuteReplicated(
      absl::Span<const std::vector<const Buffer*>> arguments,
      const ExecuteOptions& options = {}) const;

  // Drops the executable on the daemon now (runs already enqueued finish);
  // the object becomes invalid.
  absl::Status Delete();
  // Gives up ownership without deleting; returns the handle.
  uint64_t Release();

 private:
  friend class Session;
  Executable(std::shared_ptr<SessionState> state, CompileInfo info)
      : state_(std::move(state)), info_(std::move(info)) {}
  void Drop();

  std::shared_ptr<SessionState> state_;
  CompileInfo info_;
};

// Views a contiguous container's bytes: AsBytes(std::vector<float>{...}).
template <typename Container>
absl::Span<const uint8_t> AsBytes(const Container& c) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data()),
                                   c.size() * sizeof(*c.data()));
}

// grpc::Status to absl::Status, keeping the code and the daemon's message.
absl::Status ToAbslStatus(const grpc::Status& status);

}  // namespace pjrt_client

#endif  // PJRT_CLIENT_CPP_CLIENT_H_
