// hlo/verifier.h: every error the verifier can give, each from the smallest
// program that provokes it, with its status code and the words that say what
// is wrong (the programs are in verifier_cases.cc). A last test reads the
// verifier's sources (hlo/verifier.cc, verifier_internal.h and the
// verify_*.cc of each op family) and fails for any error call site that no
// case expects, so that a new check comes with its case.
#include "hlo/verifier.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "hlo/ir.h"
#include "hlo/literal.h"
#include "hlo/parser.h"
#include "hlo/shape.h"
#include "tests/unit/verifier_cases.h"

namespace pjrt::hlo {
namespace {

using verifier_cases::Case;
using verifier_cases::Cases;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

class VerifierErrorTest : public ::testing::TestWithParam<Case> {};

TEST_P(VerifierErrorTest, RefusesTheProgramSayingWhatIsWrong) {
  const Case& c = GetParam();
  auto module = ParseHloModule(c.hlo);
  ASSERT_TRUE(module.ok()) << "the case must reach the verifier: "
                           << module.status();
  absl::Status status = VerifyModule(**module, c.hlo);
  EXPECT_EQ(status.code(), c.code) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), c.message))
      << "expected \"" << c.message << "\" in: " << status;
}

INSTANTIATE_TEST_SUITE_P(EveryCheck, VerifierErrorTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Checks no text reaches: the parser gives no module without a computation,
// and gives every constant the declared shape. Modules built or rewritten in
// code still go through them.
constexpr char kNoComputations[] = "the module has no computations";
constexpr char kLiteralOfAnotherShape[] =
    "%c: the literal is f32[3] but the declared shape is f32[2]";

TEST(VerifierTest, ModuleWithoutComputationsIsRefused) {
  Module module("empty");
  absl::Status status = VerifyModule(module, "");
  EXPECT_EQ(status.code(), kInvalid) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), kNoComputations)) << status;
}

TEST(VerifierTest, ConstantWhoseLiteralIsOfAnotherShapeIsRefused) {
  const std::string text = R"(
HloModule m
ENTRY e {
  ROOT c = f32[2] constant({1, 2})
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(VerifyModule(**module, text).ok());
  (*module)->entry()->root()->mutable_attributes()->literal =
      Literal(Shape(PrimitiveType::kF32, {3}));
  absl::Status status = VerifyModule(**module, text);
  EXPECT_EQ(status.code(), kInvalid) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), kLiteralOfAnotherShape))
      << status;
}

// --- every call site has a case ---------------------------------------------

// An error call site in the verifier's source: its line, and the longest
// fixed run of text in its message (between the format's conversions).
struct CallSite {
  std::string file;
  int line;
  std::string key;
};

// `source` with its // comments blanked, so that lines keep their numbers.
std::string WithoutComments(const std::string& source) {
  std::string out = source;
  char quote = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (quote != 0) {
      if (out[i] == '\\') {
        ++i;
      } else if (out[i] == quote) {
        quote = 0;
      }
    } else if (out[i] == '"' || out[i] == '\'') {
      quote = out[i];
    } else if (out.compare(i, 2, "//") == 0) {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    }
  }
  return out;
}

// The runs of fixed text in a printf-style format: "%s takes %d operand(s)"
// gives "", " takes ", " operand(s)". "%%" is a '%'.
std::vector<std::string> FixedRuns(const std::string& format) {
  std::vector<std::string> runs(1);
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      runs.back() += format[i];
    } else if (i + 1 < format.size() && format[i + 1] == '%') {
      runs.back() += '%';
      ++i;
    } else {
      // Flags, width and precision, then the conversion's letter.
      while (i + 1 < format.size() &&
             !std::isalpha(static_cast<unsigned char>(format[i + 1]))) {
        ++i;
      }
      ++i;
      runs.emplace_back();
    }
  }
  return runs;
}

// Every call of Invalid, Unimplemented, absl::InvalidArgumentError and
// absl::UnimplementedError in `source`. The key is taken from the string
// literals between the call's parentheses, adjacent ones joined ("a " "b"
// is "a b"). A call with no literal gets an empty key.
std::vector<CallSite> ErrorCallSites(const std::string& source) {
  const std::string code = WithoutComments(source);
  const std::regex call(
      R"(\b(Invalid|Unimplemented|InvalidArgumentError|UnimplementedError)\()");
  std::vector<CallSite> sites;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), call);
       it != std::sregex_iterator(); ++it) {
    const size_t open = it->position() + it->length() - 1;
    // The declarations: `Invalid(const Instruction& inst, ...)`.
    if (code.compare(open + 1, 6, "const ") == 0) continue;
    std::vector<std::string> literals;
    bool adjacent = false;  // only blanks since the last literal ended
    int depth = 0;
    for (size_t i = open; i < code.size(); ++i) {
      const char ch = code[i];
      if (ch == '"') {
        std::string literal;
        for (++i; i < code.size() && code[i] != '"'; ++i) {
          if (code[i] == '\\') ++i;
          literal += code[i];
        }
        if (adjacent) {
          literals.back() += literal;
        } else {
          literals.push_back(literal);
        }
        adjacent = true;
        continue;
      }
      if (!std::isspace(static_cast<unsigned char>(ch))) adjacent = false;
      if (ch == '(') ++depth;
      if (ch == ')' && --depth == 0) break;
    }
    std::string key;
    for (const std::string& literal : literals) {
      for (const std::string& run : FixedRuns(literal)) {
        if (run.size() > key.size()) key = run;
      }
    }
    const int line = 1 + static_cast<int>(std::count(
                             code.begin(), code.begin() + open, '\n'));
    sites.push_back({"", line, key});
  }
  return sites;
}

// Call sites no program reaches, by key, and why. The test fails when one
// of them is gone from the verifier, so the list stays true. (The switch's
// `case Opcode::kOther` is unreachable too, IsSupportedOpcode having refused
// kOther before it, but its text is that of the check that does refuse it.)
struct Unreachable {
  const char* key;
  const char* why;
};
constexpr std::array<Unreachable, 0> kUnreachable{};

// The verifier's sources: the module-wide checks, the shared class, and one
// file per op family (hlo/opcode.h).
std::vector<std::string> VerifierSources() {
  std::vector<std::string> files = {"hlo/verifier.cc",
                                    "hlo/verifier_internal.h"};
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(PJRT_SOURCE_DIR) / "hlo")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("verify_", 0) == 0) files.push_back("hlo/" + name);
  }
  return files;
}

TEST(VerifierTest, EveryErrorCallSiteHasACase) {
  std::vector<CallSite> sites;
  const std::vector<std::string> files = VerifierSources();
  // verifier.cc, the header and five families.
  EXPECT_GE(files.size(), 7u);
  for (const std::string& name : files) {
    const std::filesystem::path path =
        std::filesystem::path(PJRT_SOURCE_DIR) / name;
    std::ifstream file(path);
    ASSERT_TRUE(file.good()) << "cannot read " << path;
    std::stringstream source;
    source << file.rdbuf();
    for (CallSite& site : ErrorCallSites(source.str())) {
      site.file = name;
      sites.push_back(std::move(site));
    }
  }
  // About a hundred today; far fewer means the scan is broken.
  EXPECT_GT(sites.size(), 90u);

  std::vector<std::string> expected = {kNoComputations, kLiteralOfAnotherShape};
  for (const Case& c : Cases()) expected.push_back(c.message);
  for (const CallSite& site : sites) {
    if (site.key.empty()) {
      ADD_FAILURE() << site.file << ":" << site.line
                    << ": the message is not built from a string literal; "
                       "give the call site a case and teach this test to "
                       "recognise it";
      continue;
    }
    const bool unreachable =
        std::any_of(std::begin(kUnreachable), std::end(kUnreachable),
                    [&](const Unreachable& u) { return site.key == u.key; });
    const bool covered = std::any_of(
        expected.begin(), expected.end(),
        [&](const std::string& m) { return absl::StrContains(m, site.key); });
    EXPECT_TRUE(covered || unreachable)
        << site.file << ":" << site.line << ": no case expects \"" << site.key
        << "\"; add a program that provokes this error to Cases()";
  }
  for (const Unreachable& u : kUnreachable) {
    EXPECT_TRUE(
        std::any_of(sites.begin(), sites.end(),
                    [&](const CallSite& site) { return site.key == u.key; }))
        << "\"" << u.key << "\" is no longer in the verifier; remove it "
        << "from kUnreachable (" << u.why << ")";
  }
}

}  // namespace
}  // namespace pjrt::hlo
