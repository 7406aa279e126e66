// The runtime runs programs through compiler::Backend and Program only: no
// file of runtime/ includes a backend's own headers.
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace {

TEST(Layering, TheRuntimeIncludesNoBackendHeaders) {
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(PJRT_SOURCE_DIR) / "runtime")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      for (const char* backend : {"compiler/host/", "compiler/cuda/"}) {
        EXPECT_EQ(line.find(std::string("#include \"") + backend), std::string::npos)
            << e.path().filename().string() << ":" << n << ": " << line;
      }
    }
  }
  EXPECT_GE(files, 10);
}

}  // namespace
