// TrackedDeviceBuffer: the device memory of one buffer together with the
// events that order its uses: definition events (when the contents become
// valid) and usage events (every stream that read it, and whether that read
// holds a reference to the memory until it finishes).
//
// Freeing follows the device's allocation model (device/local_device_state.h):
// under the asynchronous model the destructor defers the free until every
// usage and definition event has completed; under the other two, whoever
// uses the memory keeps this object alive (or orders itself before the
// compute stream) and the destructor frees at once.
//
// Thread-compatible; Buffer serialises access with its own mutex.
#ifndef PJRT_RUNTIME_TRACKED_DEVICE_BUFFER_H_
#define PJRT_RUNTIME_TRACKED_DEVICE_BUFFER_H_

#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "device/local_device_state.h"
#include "runtime/buffer_sequencing_event.h"
#include "runtime/device_memory.h"

namespace pjrt::runtime {

class TrackedDeviceBuffer {
 public:
  struct UsageEvent {
    device::Stream* stream = nullptr;
    std::shared_ptr<BufferSequencingEvent> event;
    // The use keeps a reference to the memory until it completes.
    bool reference_held = false;
  };

  TrackedDeviceBuffer(
      device::LocalDeviceState* device, DeviceMemory memory,
      std::vector<std::shared_ptr<BufferSequencingEvent>> definition_events);
  ~TrackedDeviceBuffer();
  TrackedDeviceBuffer(const TrackedDeviceBuffer&) = delete;
  TrackedDeviceBuffer& operator=(const TrackedDeviceBuffer&) = delete;

  device::LocalDeviceState* device() const { return device_; }
  void* data() const { return memory_.data(); }
  int64_t size() const { return memory_.size(); }

  absl::Span<const std::shared_ptr<BufferSequencingEvent>> definition_events()
      const {
    return definition_events_;
  }
  absl::Span<const UsageEvent> usage_events() const { return usage_events_; }

  // Records that `stream` used the memory up to `event`. REQUIRES: not
  // after LockUseAndTransferUsageEvents.
  void AddUsageEvent(device::Stream* stream,
                     std::shared_ptr<BufferSequencingEvent> event,
                     bool reference_held);

  // Returns the usage events and refuses any more (the buffer is being
  // deleted or donated).
  std::vector<UsageEvent> LockUseAndTransferUsageEvents();

  // Gives the memory to a new owner (donation): this object no longer frees
  // it.
  DeviceMemory TakeMemory();

 private:
  device::LocalDeviceState* const device_;
  DeviceMemory memory_;
  std::vector<std::shared_ptr<BufferSequencingEvent>> definition_events_;
  std::vector<UsageEvent> usage_events_;
  bool in_use_ = true;
};

}  // namespace pjrt::runtime

#endif  // PJRT_RUNTIME_TRACKED_DEVICE_BUFFER_H_
