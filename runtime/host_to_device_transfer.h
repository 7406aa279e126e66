// HostToDeviceTransfer: fills a new buffer from the host in pieces, in
// order, as they arrive (the daemon's chunked uploads).
//
// The buffer exists from the start, so the memory is allocated (or refused)
// up front, but it is not defined until Finish(). Destroying the transfer
// unfinished, or calling Abort, binds an error to the buffer and deletes it,
// so readers that were waiting get the error and the memory returns.
//
// Not thread-safe: one producer drives it.
#ifndef PJRT_RUNTIME_HOST_TO_DEVICE_TRANSFER_H_
#define PJRT_RUNTIME_HOST_TO_DEVICE_TRANSFER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "runtime/buffer.h"

namespace pjrt::runtime {

class HostToDeviceTransfer {
 public:
  // Use Client::CreateHostToDeviceTransfer.
  HostToDeviceTransfer(std::shared_ptr<Buffer> buffer,
                       std::shared_ptr<TrackedDeviceBuffer> tracked,
                       std::shared_ptr<BufferSequencingEvent> definition);
  ~HostToDeviceTransfer();
  HostToDeviceTransfer(const HostToDeviceTransfer&) = delete;
  HostToDeviceTransfer& operator=(const HostToDeviceTransfer&) = delete;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  int64_t bytes_received() const { return received_; }
  int64_t bytes_expected() const { return buffer_->size_bytes(); }

  // Appends `size` bytes; `data` may be reused when this returns.
  // INVALID_ARGUMENT (and the transfer is aborted) if they go past the end.
  absl::Status Append(const void* data, int64_t size);

  // Marks the buffer defined once the appended data has landed.
  // INVALID_ARGUMENT (and aborts) unless exactly bytes_expected() bytes were
  // appended.
  absl::Status Finish();

  // Binds `status` to the buffer and deletes it. No-op once finished.
  void Abort(absl::Status status);

  // Binds `status` to the buffer but leaves it alive, so that whoever reads
  // it later gets the error (cross-host receives). No-op once finished.
  void Fail(absl::Status status);

 private:
  void End(absl::Status status, bool delete_buffer);

  // True when chunks may be written straight into device memory from this
  // thread (host platform, synchronous model: nothing else can be using
  // freshly allocated memory).
  bool direct_;
  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<TrackedDeviceBuffer> tracked_;
  std::shared_ptr<BufferSequencingEvent> definition_;
  int64_t received_ = 0;
  bool stream_ordered_ = false;
  bool done_ = false;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_HOST_TO_DEVICE_TRANSFER_H_
