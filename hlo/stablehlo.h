// The StableHLO frontend: programs as JAX prints them
// (jax.jit(f).lower(x).as_text(), MLIR text with stablehlo, func and chlo
// ops) become the same verified Module the HLO parser produces, so every
// pass and backend runs them unchanged.
//
// The translation goes through HLO text: each StableHLO op becomes one or a
// few HLO instructions (regions become computations; values a while, if or
// case region uses from outside become explicit operands), the text is read
// by the HLO parser, and every instruction is then given back the line and
// column of the op it came from, and the op's loc(...) as its source
// location, so that the verifier's messages point into the user's program.
// `pjrt-hlo convert` prints the HLO text.
//
// Program formats: the Compile RPC, pjrtctl, pjrt-hlo and the clients take
// either; DetectProgramFormat tells them apart when the caller does not say.
#ifndef PJRT_HLO_STABLEHLO_H_
#define PJRT_HLO_STABLEHLO_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir.h"

namespace pjrt::hlo {

enum class ProgramFormat { kAuto, kHlo, kStableHlo };

// The format named `name` ("hlo", "stablehlo" or "mlir", "auto" or empty),
// or nullopt.
std::optional<ProgramFormat> ProgramFormatFromName(absl::string_view name);

// kStableHlo when the text's first word (after comments) is `module`,
// `func.func`, `#...` (an alias) or `"builtin.module"`, kHlo otherwise.
ProgramFormat DetectProgramFormat(absl::string_view text);

struct SourceOrigin {
  int line = 0;
  int column = 0;
  std::string location;  // "file.py:12:3" from the op's loc(...), or ""
};

struct StableHloTranslation {
  std::string hlo_text;
  // origins[i]: where line i + 1 of hlo_text came from in the StableHLO
  // program (line 0 for lines that came from nothing in particular).
  std::vector<SourceOrigin> origins;
};

// Translates a StableHLO program to HLO text. The entry is @main, or the
// last public function when there is no @main. Errors are INVALID_ARGUMENT
// (malformed text) or UNIMPLEMENTED (an op, attribute or type pjrtd does not
// run), both "line L, column C: ..." into `mlir_text`.
absl::StatusOr<StableHloTranslation> TranslateStableHlo(
    absl::string_view mlir_text);

// Parses and verifies a program in either format (kAuto: detected). For
// StableHLO the module's instructions carry the StableHLO positions, and
// every error points into `text`.
absl::StatusOr<std::unique_ptr<Module>> ParseAndVerifyProgram(
    absl::string_view text, ProgramFormat format);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_STABLEHLO_H_
