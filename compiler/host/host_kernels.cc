#include "compiler/host/host_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/log.h"
#include "compiler/host/expression.h"

// The built-in level's products (expression.cc holds its element-wise
// kernels).
#define PJRT_HOST_ISA isa_builtin
#include "compiler/host/gemm_kernels.inc"

namespace pjrt::compiler::host {
namespace isa_builtin {
void EvaluateBlock(const Expression& expr, absl::Span<const void* const> inputs,
                   int64_t n, absl::Span<const void*> outputs,
                   BlockScratch& scratch);
void StorageToCompute(hlo::PrimitiveType type, const void* src, void* dst,
                      int64_t n);
void ComputeToStorage(hlo::PrimitiveType type, const void* src, void* dst,
                      int64_t n);
}  // namespace isa_builtin

namespace {

struct Selection {
  const HostKernelTable* table = nullptr;
  std::string description;
  bool fell_back = false;  // the wanted level's module did not load
};

#if PJRT_HOST_MODULES
// The folder of the running executable ("" when /proc cannot say).
std::string ExecutableDir() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return "";
  std::string exe(path.data(), static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

// Where the modules may be: PJRT_HOST_MODULE_DIR, else beside the
// executable as installed (PJRT_HOST_MODULE_RELDIR from its folder) and as
// built (../lib/pjrtd from build/bin).
std::vector<std::string> ModuleDirs() {
  if (const char* dir = std::getenv("PJRT_HOST_MODULE_DIR");
      dir != nullptr && *dir != '\0') {
    return {dir};
  }
  const std::string exe_dir = ExecutableDir();
  if (exe_dir.empty()) return {};
  std::vector<std::string> dirs = {
      absl::StrCat(exe_dir, "/", PJRT_HOST_MODULE_RELDIR)};
  const std::string built = absl::StrCat(exe_dir, "/../lib/pjrtd");
  if (built != dirs.front()) dirs.push_back(built);
  return dirs;
}

const HostKernelTable* LoadModule(HostIsa isa, std::string* why) {
  const std::string file =
      absl::StrCat("libpjrt_host_", HostIsaName(isa), ".so");
  std::string errors;
  const std::vector<std::string> dirs = ModuleDirs();
  for (const std::string& dir : dirs) {
    const std::string path = absl::StrCat(dir, "/", file);
    if (access(path.c_str(), R_OK) != 0) continue;
    // Never closed: its kernels run until the process ends.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      absl::StrAppend(&errors, "; ", dlerror());
      continue;
    }
    using TableFn = const HostKernelTable* (*)();
    auto fn = reinterpret_cast<TableFn>(dlsym(handle, kHostKernelsSymbol));
    const HostKernelTable* table = fn == nullptr ? nullptr : fn();
    if (table == nullptr || table->abi != kHostKernelAbi ||
        table->table_size != sizeof(HostKernelTable) ||
        table->expression_size != sizeof(Expression) ||
        table->scratch_size != sizeof(BlockScratch)) {
      absl::StrAppend(&errors, "; ", path,
                      " is from another build of pjrtd (its kernel table "
                      "does not match)");
      continue;
    }
    *why = absl::StrCat("module ", path);
    return table;
  }
  *why = errors.empty()
             ? absl::StrCat(file, " not in ", absl::StrJoin(dirs, " or "))
             : errors.substr(2);
  return nullptr;
}

#endif  // PJRT_HOST_MODULES

Selection Select() {
  Selection s;
#if PJRT_HOST_MODULES
  const HostIsa cpu = CpuHostIsa();
  HostIsa want = cpu;
  std::string note;
  if (const char* asked = std::getenv("PJRT_HOST_ISA");
      asked != nullptr && *asked != '\0') {
    absl::string_view level = asked;
    absl::ConsumePrefix(&level, "x86-64-");
    if (level == "v2" || level == "v3" || level == "v4") {
      want = static_cast<HostIsa>(level[1] - '0');
      note = absl::StrCat("; PJRT_HOST_ISA=", asked);
    } else {
      note = absl::StrCat("; PJRT_HOST_ISA=", asked,
                          " is not a level (x86-64-v2, x86-64-v3 or "
                          "x86-64-v4), ignored");
    }
    if (want > cpu) {
      note = absl::StrCat("; PJRT_HOST_ISA=", asked,
                          " asks for more than this CPU has (",
                          HostIsaName(cpu), ")");
      want = cpu;
    }
  }
  // The best module that loads, down to the built-in level.
  std::string passed_over;
  for (int level = static_cast<int>(want);
       level > static_cast<int>(HostIsa::kV2); --level) {
    std::string why;
    const HostKernelTable* table =
        LoadModule(static_cast<HostIsa>(level), &why);
    if (table != nullptr) {
      s.table = table;
      s.fell_back = level != static_cast<int>(want);
      s.description =
          absl::StrCat(table->isa, " (", why, passed_over, note, ")");
      return s;
    }
    absl::StrAppend(&passed_over, "; ", why);
  }
  s.table = &BuiltinHostKernels();
  s.fell_back = want != HostIsa::kV2;
  s.description = absl::StrCat(
      s.table->isa, " (built in", passed_over,
      s.fell_back ? " (PJRT_HOST_MODULE_DIR names the modules' folder)" : "",
      note, ")");
#else
  s.table = &BuiltinHostKernels();
  s.description = absl::StrCat(
      s.table->isa, PJRT_HOST_BUILTIN_NATIVE
                        ? " (built for this machine)"
                        : " (built in; a sanitizer build has no modules)");
#endif
  return s;
}

const Selection& Selected() {
  static const Selection selection = [] {
    Selection s = Select();
    if (s.fell_back) spdlog::warn("host kernels: {}", s.description);
    return s;
  }();
  return selection;
}

}  // namespace

const char* HostIsaName(HostIsa isa) {
  switch (isa) {
    case HostIsa::kV4:
      return "x86-64-v4";
    case HostIsa::kV3:
      return "x86-64-v3";
    case HostIsa::kV2:
      break;
  }
  return "x86-64-v2";
}

HostIsa CpuHostIsa() {
  // libgcc's checks include the operating system's support (XSAVE state) for
  // the AVX and AVX-512 registers.
  __builtin_cpu_init();
  const bool v3 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") &&
                  __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  return v4 ? HostIsa::kV4 : v3 ? HostIsa::kV3 : HostIsa::kV2;
}

const HostKernelTable& BuiltinHostKernels() {
  static const HostKernelTable table = {
    kHostKernelAbi,
    sizeof(HostKernelTable),
    sizeof(Expression),
    sizeof(BlockScratch),
#if PJRT_HOST_BUILTIN_NATIVE
    "native",
#else
    "x86-64-v2",
#endif
    &isa_builtin::EvaluateBlock,
    &isa_builtin::StorageToCompute,
    &isa_builtin::ComputeToStorage,
    &isa_builtin::Gemm,
  };
  return table;
}

const HostKernelTable* LoadHostKernelModule(HostIsa isa, std::string* why) {
#if PJRT_HOST_MODULES
  // dlopen hands out the same handle for a module loaded before.
  return LoadModule(isa, why);
#else
  *why = absl::StrCat("this build (native or sanitized) has no module for ",
                      HostIsaName(isa));
  return nullptr;
#endif
}

bool HostKernelModulesBuilt() { return PJRT_HOST_MODULES != 0; }

const HostKernelTable& HostKernels() { return *Selected().table; }

std::string HostKernelsDescription() { return Selected().description; }

}  // namespace pjrt::compiler::host
