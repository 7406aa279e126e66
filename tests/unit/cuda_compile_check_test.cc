// Every HLO program of the repository's tests compiles for CUDA through
// NVRTC, for sm_90 and sm_80, without a GPU, unless it uses an op or type
// the CUDA backend refuses by name (UNIMPLEMENTED: loops, sorting, rng,
// convolution, complex and 4-bit types come later). Anything
// else (NVRTC refusing generated source, an internal error) fails.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/cuda/backend.h"
#include "gtest/gtest.h"
#include "hlo/parser.h"
#include "tests/unit/test_programs.h"

namespace pjrt::compiler::cuda {
namespace {

using pjrt::testing::LoadTestProgram;
using pjrt::testing::TestPrograms;

void CheckEveryProgram(const std::string& arch, const DiskCache& cache) {
  int compiled = 0, refused = 0, not_verified = 0;
  for (const std::string& path : TestPrograms()) {
    std::unique_ptr<hlo::Module> module = LoadTestProgram(path);
    if (module == nullptr) {
      ++not_verified;  // the parser's corpus holds programs no backend takes
      continue;
    }
    auto c = CompileForCuda(*module, {}, arch, cache);
    if (c.ok()) {
      ++compiled;
      EXPECT_FALSE(c->cubin.cubin.empty()) << path;
    } else if (c.status().code() == absl::StatusCode::kUnimplemented) {
      ++refused;
      if (std::getenv("PJRT_SHOW_REFUSED") != nullptr) {
        std::cout << "refused " << path << ": " << c.status().message().substr(0, 100) << "\n";
      }
    } else {
      ADD_FAILURE() << path << " for " << arch << ": " << c.status();
    }
  }
  std::cout << arch << ": " << compiled << " programs compiled through NVRTC, " << refused
            << " refused by name, " << not_verified << " not valid programs\n";
  // 133 of the test programs use only what the CUDA backend runs (all but
  // fft and the tuple constant, with complex arrays moved and added).
  EXPECT_GE(compiled, 133) << arch;
}

TEST(CudaCompileCheck, EveryTestProgramCompilesForSm90) {
  CheckEveryProgram("sm_90", DiskCache(""));
}

TEST(CudaCompileCheck, EveryTestProgramCompilesForSm80) {
  CheckEveryProgram("sm_80", DiskCache(""));
}

TEST(CudaCompileCheck, TheSecondCompileComesFromThePersistentCache) {
  const std::string dir = absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                       "/pjrt-cubin-cache-", getpid());
  std::filesystem::remove_all(dir);
  const char* text = R"(
HloModule m
ENTRY e {
  a = f32[100] parameter(0)
  ROOT b = f32[100] exponential(a)
})";
  auto module = hlo::ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  const DiskCache cache(dir);
  auto cold = CompileForCuda(**module, {}, "sm_90", cache);
  ASSERT_TRUE(cold.ok()) << cold.status();
  EXPECT_FALSE(cold->from_cache);
  auto warm = CompileForCuda(**module, {}, "sm_90", DiskCache(dir));
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_TRUE(warm->from_cache);
  EXPECT_EQ(warm->cubin.cubin, cold->cubin.cubin);
  // Another architecture is another entry.
  auto other = CompileForCuda(**module, {}, "sm_80", cache);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->from_cache);
  // A corrupt entry is recompiled and rewritten, never loaded.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  auto again = CompileForCuda(**module, {}, "sm_90", cache);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->from_cache);
  EXPECT_EQ(again->cubin.cubin, cold->cubin.cubin);
  EXPECT_TRUE(CompileForCuda(**module, {}, "sm_90", cache)->from_cache);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pjrt::compiler::cuda
