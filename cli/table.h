// Table: aligned text columns for pjrtctl's human-readable output.
#ifndef PJRT_CLI_TABLE_H_
#define PJRT_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

#include "base/check.h"

namespace pjrt::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers)
      : headers_(std::move(headers)) {}

  // REQUIRES: as many cells as headers.
  void AddRow(std::vector<std::string> cells) {
    PJRT_DCHECK(cells.size() == headers_.size())
        << cells.size() << " cells for " << headers_.size() << " headers";
    rows_.push_back(std::move(cells));
  }

  // Columns whose cells all look numeric are right-aligned.
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Key/value lines: "platform:   host".
void PrintFields(
    std::ostream& out,
    const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_TABLE_H_
