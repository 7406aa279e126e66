// Logging: spdlog, plus formatting of abseil types that appear in messages
// (absl::string_view, absl::Status). Include this instead of spdlog.h.
#ifndef PJRT_BASE_LOG_H_
#define PJRT_BASE_LOG_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/fmt/fmt.h"
#include "spdlog/spdlog.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(
        fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(const absl::Status& s, Context& ctx) const {
    std::string text = s.ToString();
    return fmt::formatter<fmt::string_view>::format(
        fmt::string_view(text.data(), text.size()), ctx);
  }
};

#endif  // PJRT_BASE_LOG_H_
