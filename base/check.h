// PJRT_DCHECK: the executable form of a `REQUIRES:` comment.
//
//   // REQUIRES: capacity >= 1.
//   explicit Semaphore(int64_t capacity) { PJRT_DCHECK(capacity >= 1); }
//   PJRT_DCHECK(IsComplete()) << "event of " << name;
//
// In debug and sanitizer builds (PJRT_DCHECK_IS_ON, set by CMake for
// CMAKE_BUILD_TYPE=Debug and every PJRT_SANITIZER build) a false condition
// prints the file, the line, the condition and whatever was streamed, then
// aborts. In release builds the condition is compiled (so it stays valid)
// but never evaluated, and costs nothing.
//
// A DCHECK states what callers inside the process guarantee. It is never the
// answer to a client's input: bad input is an absl::Status, in every build.
#ifndef PJRT_BASE_CHECK_H_
#define PJRT_BASE_CHECK_H_

#include <sstream>

#ifndef PJRT_DCHECK_IS_ON
#define PJRT_DCHECK_IS_ON 0
#endif

namespace pjrt::internal {

// Collects the message of a failed check; its destructor reports and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;

  std::ostream& stream() { return message_; }

 private:
  std::ostringstream message_;
  std::streamoff header_size_ = 0;
};

// Swallows what a disabled check streams (never evaluated).
struct NullStream {
  template <typename T>
  NullStream& operator<<(const T&) {
    return *this;
  }
};

}  // namespace pjrt::internal

#if PJRT_DCHECK_IS_ON
#define PJRT_DCHECK(condition) \
  while (!(condition))         \
  ::pjrt::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
#else
#define PJRT_DCHECK(condition) \
  while (false && (condition)) ::pjrt::internal::NullStream()
#endif

#endif  // PJRT_BASE_CHECK_H_
