// EventPool: recycles a device's events. Creating an event can be expensive
// (cudaEventCreate); every transfer and execution records at least one.
//
// Allocate() hands out a shared_ptr whose deleter resets the event and puts
// it back in the pool. The pool's state is shared with those deleters, so
// events may outlive the EventPool object.
//
// Thread-safe.
#ifndef PJRT_DEVICE_EVENT_POOL_H_
#define PJRT_DEVICE_EVENT_POOL_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "device/event.h"

namespace pjrt::device {

class EventPool {
 public:
  explicit EventPool(std::function<std::unique_ptr<Event>()> factory);

  // A pending event, new or recycled.
  std::shared_ptr<Event> Allocate();

  // Events created so far (recycled ones are not counted again).
  int64_t created() const;
  // Events handed out so far.
  int64_t allocated() const;

 private:
  struct State {
    std::function<std::unique_ptr<Event>()> factory;
    Mutex mu;
    std::vector<std::unique_ptr<Event>> free ABSL_GUARDED_BY(mu);
    int64_t created ABSL_GUARDED_BY(mu) = 0;
    int64_t allocated ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<State> state_;
};

}  // namespace pjrt::device

#endif  // PJRT_DEVICE_EVENT_POOL_H_
