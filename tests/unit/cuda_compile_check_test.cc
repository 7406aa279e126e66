// Every HLO program of the repository's tests compiles for CUDA through
// NVRTC, for sm_90 and sm_80, without a GPU. The programs under tests/data
// may be refused by name (UNIMPLEMENTED: the parser's corpus holds a
// tuple constant no backend compiles); anything else (NVRTC refusing
// generated source, an internal error) fails. With PJRT_RECORDED_PROGRAMS
// naming a folder, every program the Python suites compiled on the host
// platform must compile: none may be refused (make test-cuda-programs
// records and checks them), and cuDNN must accept the description of each
// convolution the backend gives it.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/cuda/backend.h"
#include "compiler/cuda/cudnn_conv.h"
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
        std::cout << "refused " << path << ": "
                  << c.status().message().substr(0, 100) << "\n";
      }
    } else {
      ADD_FAILURE() << path << " for " << arch << ": " << c.status();
    }
  }
  std::cout << arch << ": " << compiled << " programs compiled through NVRTC, "
            << refused << " refused by name, " << not_verified
            << " not valid programs\n";
  // 137 of the test programs use only what the CUDA backend runs (all but
  // the tuple constant, which no backend compiles).
  EXPECT_GE(compiled, 137) << arch;
}

TEST(CudaCompileCheck, EveryTestProgramCompilesForSm90) {
  CheckEveryProgram("sm_90", DiskCache(""));
}

TEST(CudaCompileCheck, EveryTestProgramCompilesForSm80) {
  CheckEveryProgram("sm_80", DiskCache(""));
}

TEST(CudaCompileCheck, TheSecondCompileComesFromThePersistentCache) {
  const std::string dir =
      absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
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

// The programs the Python suites compiled (tests/python/conftest.py writes
// them), for both architectures, on every core. Each must compile: the
// CUDA backend runs whatever the host platform runs, so any refusal fails
// the test.
TEST(CudaCompileCheck, EveryProgramThePythonSuitesCompiledCompiles) {
  const char* folder = std::getenv("PJRT_RECORDED_PROGRAMS");
  if (folder == nullptr) {
    GTEST_SKIP() << "PJRT_RECORDED_PROGRAMS is not set (make "
                    "test-cuda-programs sets it)";
  }
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (e.path().extension() == ".hlo") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  ASSERT_FALSE(paths.empty()) << "no .hlo files in " << folder;
  const char* archs[] = {"sm_90", "sm_80"};
  std::atomic<size_t> next{0};
  std::mutex mu;
  int compiled = 0, cudnn = 0;
  std::vector<std::string> failures;
  const auto work = [&] {
    const DiskCache no_cache("");
    for (size_t job = next++; job < paths.size() * 2; job = next++) {
      const std::string& path = paths[job / 2];
      const char* arch = archs[job % 2];
      std::unique_ptr<hlo::Module> module = LoadTestProgram(path);
      if (module == nullptr) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(
            path + ": the host platform ran it, but it does not verify here");
        continue;
      }
      auto c = CompileForCuda(*module, {}, arch, no_cache);
      std::lock_guard<std::mutex> lock(mu);
      if (c.ok()) {
        ++compiled;
        // cuDNN accepts the description of every convolution given to it.
        ForEachLaunch(c->generated.launches, [&](const Launch& launch) {
          if (launch.cudnn == nullptr || job % 2 != 0) return;
          ++cudnn;
          absl::Status s = CheckCudnnDescribes(*launch.cudnn);
          if (!s.ok()) {
            failures.push_back(absl::StrCat(path, ": cuDNN refuses ",
                                            launch.cudnn->ToString(), ": ",
                                            s.ToString()));
          }
        });
      } else {
        failures.push_back(
            absl::StrCat(path, " for ", arch, ": ", c.status().ToString()));
      }
    }
  };
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  std::cout << paths.size()
            << " recorded programs, for sm_90 and sm_80: " << compiled
            << " compiled through NVRTC; " << cudnn
            << " convolutions described to cuDNN\n";
  EXPECT_EQ(compiled, static_cast<int>(paths.size() * 2));
}

}  // namespace
}  // namespace pjrt::compiler::cuda
