#include "cli/table.h"

#include <algorithm>
#include <cctype>
#include <iomanip>

namespace pjrt::cli {
namespace {

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  return std::isdigit(static_cast<unsigned char>(s[0])) ||
         (s[0] == '-' && s.size() > 1);
}

}  // namespace

void Table::Print(std::ostream& out) const {
  const size_t n = headers_.size();
  std::vector<size_t> width(n);
  std::vector<bool> numeric(n, true);
  for (size_t c = 0; c < n; ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < n; ++c) {
      width[c] = std::max(width[c], row[c].size());
      numeric[c] = numeric[c] && LooksNumeric(row[c]);
    }
  }
  const auto print_row = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < n; ++c) {
      if (c > 0) out << "  ";
      bool right = numeric[c] && !rows_.empty();
      out << (right ? std::right : std::left)
          << std::setw(c + 1 == n && !right ? 0 : static_cast<int>(width[c]))
          << row[c];
    }
    out << "\n";
  };
  print_row(headers_);
  for (const auto& row : rows_) print_row(row);
}

void PrintFields(
    std::ostream& out,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  for (const auto& [key, value] : fields) {
    out << std::left << std::setw(static_cast<int>(width + 2)) << (key + ":")
        << value << "\n";
  }
}

}  // namespace pjrt::cli
