#include "runtime/tracked_device_buffer.h"

#include <atomic>
#include <utility>

#include "base/check.h"

namespace pjrt::runtime {

TrackedDeviceBuffer::TrackedDeviceBuffer(
    device::LocalDeviceState* device, DeviceMemory memory,
    std::vector<std::shared_ptr<BufferSequencingEvent>> definition_events)
    : device_(device),
      memory_(std::move(memory)),
      definition_events_(std::move(definition_events)) {}

TrackedDeviceBuffer::~TrackedDeviceBuffer() {
  if (!memory_.owns_memory()) return;
  if (device_->allocation_model() != device::AllocationModel::kAsynchronous) {
    return;  // memory_ frees now
  }
  // Asynchronous model: the free waits for every event that touches the
  // memory.
  std::vector<std::shared_ptr<BufferSequencingEvent>> events;
  for (const auto& e : definition_events_) {
    if (!e->IsComplete()) events.push_back(e);
  }
  for (const auto& u : usage_events_) {
    if (!u.event->IsComplete()) events.push_back(u.event);
  }
  if (events.empty()) return;
  struct PendingFree {
    explicit PendingFree(DeviceMemory m, int n)
        : memory(std::move(m)), remaining(n) {}
    DeviceMemory memory;
    std::atomic<int> remaining;
  };
  auto pending = std::make_shared<PendingFree>(std::move(memory_),
                                               static_cast<int>(events.size()));
  for (const auto& e : events) {
    e->AddCallback([pending](absl::Status) {
      if (pending->remaining.fetch_sub(1) == 1) pending->memory.Reset();
    });
  }
}

void TrackedDeviceBuffer::AddUsageEvent(
    device::Stream* stream, std::shared_ptr<BufferSequencingEvent> event,
    bool reference_held) {
  PJRT_DCHECK(in_use_) << "a use recorded after LockUseAndTransferUsageEvents";
  // Keep one entry per stream: the use recorded last on a stream covers the
  // earlier ones. Uses are reported in the order their holds end, not the
  // order they were recorded: a racing reader may report an older event
  // after a newer one, which must not replace it.
  for (UsageEvent& existing : usage_events_) {
    if (existing.stream == stream) {
      if (event->sequence_number() > existing.event->sequence_number()) {
        existing.event = std::move(event);
        existing.reference_held = reference_held;
      }
      return;
    }
  }
  usage_events_.push_back(UsageEvent{stream, std::move(event), reference_held});
}

std::vector<TrackedDeviceBuffer::UsageEvent>
TrackedDeviceBuffer::LockUseAndTransferUsageEvents() {
  in_use_ = false;
  return usage_events_;
}

DeviceMemory TrackedDeviceBuffer::TakeMemory() { return std::move(memory_); }

}  // namespace pjrt::runtime
