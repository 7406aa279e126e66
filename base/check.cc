#include "base/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pjrt::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": check failed: " << condition;
  header_size_ = message_.tellp();
}

CheckFailure::~CheckFailure() {
  std::string text = message_.str();
  // What the caller streamed follows the condition after ": ".
  if (static_cast<std::streamoff>(text.size()) > header_size_) {
    text.insert(static_cast<size_t>(header_size_), ": ");
  }
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace pjrt::internal
