// Buffer: an array on one device, and HostToDeviceTransfer, the incremental
// way to fill a new one from the host.
//
// A Buffer's contents are defined when its definition event completes. If
// the producer failed, the event carries the error, and every reader of the
// buffer gets it. Delete() releases the buffer's memory at once from the
// buffer's point of view; operations already using the memory keep it alive
// until they finish.
//
// Thread-safe.
#ifndef PJRT_RUNTIME_BUFFER_H_
#define PJRT_RUNTIME_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "device/host/host_event.h"
#include "hlo/shape.h"
#include "runtime/device_memory.h"

namespace pjrt::runtime {

class Client;
class Device;

class Buffer {
 public:
  Buffer(Client* client, hlo::Shape shape, Device* device,
         std::shared_ptr<DeviceMemory> memory,
         std::shared_ptr<device::HostEvent> definition_event);
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const hlo::Shape& shape() const { return shape_; }
  Device* device() const { return device_; }
  int64_t size_bytes() const { return shape_.ByteSize(); }

  // True once the contents are defined or the producer failed.
  bool IsReady() const;

  // The producer's status once ready: OK, or the error bound to the buffer.
  // REQUIRES: IsReady().
  absl::Status ReadyStatus() const;

  // Waits until ready and returns the producer's status; DEADLINE_EXCEEDED
  // after `timeout`; FAILED_PRECONDITION if the buffer was deleted.
  absl::Status BlockHostUntilReady(
      absl::Duration timeout = absl::InfiniteDuration());

  // Copies bytes [offset, offset + size) of the contents to `dst`, after
  // waiting for them to be defined. INVALID_ARGUMENT if the range is out of
  // bounds; FAILED_PRECONDITION if deleted; the bound error if the producer
  // failed.
  absl::Status CopyRawToHost(void* dst, int64_t offset, int64_t size);

  // Copies the buffer to `dst_device` (which may be its own device).
  absl::StatusOr<std::shared_ptr<Buffer>> CopyToDevice(Device* dst_device);

  // Releases the buffer's memory. Idempotent.
  void Delete();
  bool IsDeleted() const;

  // "f32[2,3] on host:0".
  std::string DebugString() const;

 private:
  // The memory and definition event, or FAILED_PRECONDITION if deleted.
  absl::StatusOr<std::shared_ptr<DeviceMemory>> AcquireMemory() const;

  Client* const client_;
  const hlo::Shape shape_;
  Device* const device_;
  const std::shared_ptr<device::HostEvent> definition_event_;
  mutable absl::Mutex mu_;
  std::shared_ptr<DeviceMemory> memory_ ABSL_GUARDED_BY(mu_);
};

// Fills a new buffer from the host, in order, one piece at a time. The buffer
// is not ready until Finish(); destroying the transfer unfinished (or calling
// Abort) binds an error to the buffer and frees its memory.
//
// Not thread-safe: one producer drives it.
class HostToDeviceTransfer {
 public:
  HostToDeviceTransfer(std::shared_ptr<Buffer> buffer,
                       std::shared_ptr<DeviceMemory> memory,
                       std::shared_ptr<device::HostEvent> definition_event);
  ~HostToDeviceTransfer();
  HostToDeviceTransfer(const HostToDeviceTransfer&) = delete;
  HostToDeviceTransfer& operator=(const HostToDeviceTransfer&) = delete;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  int64_t bytes_received() const { return received_; }
  int64_t bytes_expected() const { return buffer_->size_bytes(); }

  // Appends `size` bytes. INVALID_ARGUMENT if they go past the end of the
  // array (the transfer is then aborted).
  absl::Status Append(const void* data, int64_t size);

  // Marks the buffer defined. INVALID_ARGUMENT (and aborts) unless exactly
  // bytes_expected() bytes were appended.
  absl::Status Finish();

  // Binds `status` to the buffer and frees its memory. No-op once finished.
  void Abort(absl::Status status);

 private:
  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<DeviceMemory> memory_;
  std::shared_ptr<device::HostEvent> definition_event_;
  int64_t received_ = 0;
  bool done_ = false;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_BUFFER_H_
