#include "device/event_pool.h"

#include <utility>

namespace pjrt::device {

EventPool::EventPool(std::function<std::unique_ptr<Event>()> factory)
    : state_(std::make_shared<State>()) {
  state_->factory = std::move(factory);
}

std::shared_ptr<Event> EventPool::Allocate() {
  std::unique_ptr<Event> event;
  {
    MutexLock lock(&state_->mu);
    state_->allocated++;
    if (!state_->free.empty()) {
      event = std::move(state_->free.back());
      state_->free.pop_back();
    } else {
      state_->created++;
    }
  }
  if (event == nullptr) event = state_->factory();
  std::shared_ptr<State> state = state_;
  return std::shared_ptr<Event>(event.release(), [state](Event* e) {
    e->Reset();
    MutexLock lock(&state->mu);
    state->free.emplace_back(e);
  });
}

int64_t EventPool::created() const {
  MutexLock lock(&state_->mu);
  return state_->created;
}

int64_t EventPool::allocated() const {
  MutexLock lock(&state_->mu);
  return state_->allocated;
}

}  // namespace pjrt::device
