// docs/ops.md against the verifier: every op the verifier knows is listed
// once, "supported" exactly when hlo::IsSupportedOpcode says so, and every
// element type "supported" exactly when hlo::IsArrayType says so.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "hlo/opcode.h"
#include "hlo/primitive_type.h"
#include "hlo/verifier.h"

namespace pjrt::hlo {
namespace {

// Name -> status ("supported", "not yet") for the rows of the table under
// `heading`.
std::map<std::string, std::string> ReadTable(const std::string& heading) {
  std::ifstream in(std::filesystem::path(PJRT_SOURCE_DIR) / "docs" / "ops.md");
  EXPECT_TRUE(in.good());
  std::map<std::string, std::string> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == heading;
    if (!inside || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    EXPECT_GE(cells.size(), 4u) << line;
    const std::string status(absl::StripAsciiWhitespace(cells[2]));
    std::vector<std::string> names = absl::StrSplit(cells[1], '`');
    for (size_t i = 1; i < names.size(); i += 2) {
      EXPECT_TRUE(rows.emplace(names[i], status).second)
          << names[i] << " is listed twice";
    }
  }
  return rows;
}

TEST(OpsDoc, ListsEveryOpWithTheVerifiersStatus) {
  const auto rows = ReadTable("## Ops");
  int checked = 0;
  for (int i = 0; i < static_cast<int>(Opcode::kOther); ++i) {
    const auto op = static_cast<Opcode>(i);
    const std::string name(OpcodeName(op));
    auto it = rows.find(name);
    ASSERT_NE(it, rows.end()) << name << " is missing from docs/ops.md";
    EXPECT_EQ(it->second, IsSupportedOpcode(op) ? "supported" : "not yet")
        << name;
    ++checked;
  }
  EXPECT_EQ(static_cast<size_t>(checked), rows.size())
      << "docs/ops.md lists ops the verifier does not know";
}

TEST(OpsDoc, ListsEveryElementTypeWithItsStatus) {
  const auto rows = ReadTable("## Element types");
  for (const auto& [name, status] : rows) {
    if (name == "token" || name.find('*') != std::string::npos) continue;
    auto type = ParseAnyPrimitiveType(name);
    ASSERT_TRUE(type.has_value()) << name;
    EXPECT_EQ(status, IsArrayType(*type) ? "supported" : "not yet") << name;
  }
  for (const char* name : {"pred", "s8", "s16", "s32", "s64", "u8", "u16",
                           "u32", "u64", "f16", "bf16", "f32", "f64", "c64",
                           "c128", "s4", "u4", "f8e4m3fn", "f8e5m2"}) {
    EXPECT_TRUE(rows.contains(name)) << name;
  }
}

}  // namespace
}  // namespace pjrt::hlo
