// HLO text's custom calls to the linear-algebra libraries that JAX lowers
// jnp.linalg to (lapack_sgetrf_ffi, cusolver_gesvdj_ffi, ...: the targets
// the StableHLO translator computes, Translator::IsLibraryCall). Each one
// is written as a StableHLO program of that one custom call, with the
// instruction's operand and result types and its backend_config dictionary
// ({uplo = 76 : ui8}, as XLA prints a typed FFI call's attributes), and
// translated; the instruction becomes a call of the translation's
// computations, so both program formats run the same HLO for it.
#include "hlo/passes_internal.h"
#include "hlo/stablehlo_internal.h"
#include "hlo/verifier.h"

namespace pjrt::hlo::stablehlo_internal {
namespace {

// Whether `text` is one dictionary, {...}, whose first brace closes at its
// end (braces in quoted strings aside): nothing of it can end the program
// it is written into.
bool OneDictionary(absl::string_view text) {
  if (text.empty() || text.front() != '{') return false;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1 == text.size();
    }
  }
  return false;
}

// The backend_config's dictionary, from the raw attribute (written bare or
// as a string); "" where there is none or it is empty.
absl::StatusOr<std::string> ConfigDictionary(const Instruction& inst) {
  for (const auto& [name, value] : inst.attributes().raw) {
    if (name != "backend_config") continue;
    std::string text(absl::StripAsciiWhitespace(value));
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
      std::string unquoted;
      if (!absl::CUnescape(text.substr(1, text.size() - 2), &unquoted)) {
        return absl::InvalidArgumentError(
            absl::StrCat("backend_config ", value, " is not a valid string"));
      }
      text = std::string(absl::StripAsciiWhitespace(unquoted));
    }
    if (text.empty()) return text;
    if (!OneDictionary(text)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend_config ", value,
          " is not one dictionary of attributes, like {uplo = 76 : ui8}"));
    }
    return text;
  }
  return std::string();
}

// The one-call StableHLO program computing `inst`, with its backend config
// `config`.
std::string OneCallProgram(const Instruction& inst, const std::string& config) {
  std::vector<std::string> args, arg_types, results, result_types;
  for (int i = 0; i < inst.operand_count(); ++i) {
    args.push_back(absl::StrCat("%arg", i));
    arg_types.push_back(mlir::MlirTypeString(inst.operand(i)->shape()));
  }
  const Shape& shape = inst.shape();
  if (shape.IsTuple()) {
    for (size_t i = 0; i < shape.tuple_shapes().size(); ++i) {
      results.push_back(absl::StrCat("%0#", i));
      result_types.push_back(mlir::MlirTypeString(shape.tuple_shapes()[i]));
    }
  } else {
    results.push_back("%0");
    result_types.push_back(mlir::MlirTypeString(shape));
  }
  std::vector<std::string> params;
  for (size_t i = 0; i < args.size(); ++i) {
    params.push_back(absl::StrCat(args[i], ": ", arg_types[i]));
  }
  const std::string joined_results = absl::StrJoin(result_types, ", ");
  return absl::StrCat(
      "module @library_call {\n  func.func public @main(",
      absl::StrJoin(params, ", "), ") -> (", joined_results, ") {\n    %0",
      shape.IsTuple() ? absl::StrCat(":", results.size()) : "",
      " = stablehlo.custom_call @", inst.attributes().custom_call_target, "(",
      absl::StrJoin(args, ", "), ") {api_version = 4 : i32",
      config.empty() ? "" : absl::StrCat(", mhlo.backend_config = ", config),
      "} : (", absl::StrJoin(arg_types, ", "), ") -> (", joined_results,
      ")\n    return ", absl::StrJoin(results, ", "), " : ", joined_results,
      "\n  }\n}\n");
}

// A translation error's message without its position, source line and
// caret, which are the generated program's.
std::string Reason(absl::string_view message) {
  absl::string_view first = message.substr(0, message.find('\n'));
  if (absl::ConsumePrefix(&first, "line ")) {
    const size_t colon = first.find(": ");
    if (colon != absl::string_view::npos) first.remove_prefix(colon + 2);
  }
  absl::ConsumePrefix(&first, "stablehlo.custom_call: ");
  return std::string(first);
}

}  // namespace

bool Translator::IsLibraryCall(absl::string_view target) {
  return IsLapackTarget(target) || IsLapackQrTarget(target) ||
         IsLapackEighTarget(target) || IsSvdTarget(target) ||
         IsTridiagonalTarget(target);
}

absl::Status ExpandLibraryCalls(Module* module, absl::string_view text) {
  std::vector<std::pair<hlo::Computation*, Instruction*>> calls;
  for (const auto& c : module->computations()) {
    for (const auto& inst : c->instructions()) {
      if (inst->opcode() == Opcode::kCustomCall &&
          Translator::IsLibraryCall(inst->attributes().custom_call_target)) {
        calls.emplace_back(c.get(), inst.get());
      }
    }
  }
  // Calls alike (target, types and config) share their computations; what
  // all the translations add is counted against the verifier's limit.
  absl::flat_hash_map<std::string, hlo::Computation*> translated;
  int64_t added = 0;
  for (const auto& [c, inst] : calls) {
    const auto refuse = [&, inst = inst](const absl::Status& status) {
      return absl::Status(
          status.code(), FormatErrorAt(text, inst->line(), inst->column(),
                                       absl::StrCat("%", inst->name(), ": ",
                                                    Reason(status.message()))));
    };
    absl::StatusOr<std::string> config = ConfigDictionary(*inst);
    if (!config.ok()) return refuse(config.status());
    const std::string program = OneCallProgram(*inst, *config);
    hlo::Computation*& entry = translated[program];
    if (entry == nullptr) {
      absl::StatusOr<StableHloTranslation> translation =
          TranslateStableHlo(program);
      if (!translation.ok()) return refuse(translation.status());
      absl::StatusOr<std::unique_ptr<Module>> library =
          ParseHloModule(translation->hlo_text);
      if (!library.ok()) return refuse(library.status());
      entry = (*library)->entry();
      if (entry->root()->shape() != inst->shape()) {
        return refuse(absl::InvalidArgumentError(absl::StrFormat(
            "%s gives %s, not %s", inst->attributes().custom_call_target,
            entry->root()->shape().ToString(), inst->shape().ToString())));
      }
      for (std::unique_ptr<hlo::Computation>& computation :
           (*library)->TakeComputations()) {
        added += static_cast<int64_t>(computation->instructions().size());
        // Named after the call, and placed at it for messages.
        std::string name = absl::StrCat(inst->name(), ".", computation->name());
        while (module->FindComputation(name) != nullptr) name += "_";
        computation->set_name(std::move(name));
        computation->set_is_entry(false);
        computation->set_line(inst->line());
        for (const auto& made : computation->instructions()) {
          made->set_position(inst->line(), inst->column());
          made->set_source_location(inst->source_location());
        }
        module->AddComputation(std::move(computation));
      }
      if (added > kMaxInlinedInstructions) {
        return refuse(absl::InvalidArgumentError(absl::StrFormat(
            "the program's library calls make more than %d instructions",
            kMaxInlinedInstructions)));
      }
    }
    Instruction* call = passes_internal::Add(
        c, *inst, ".library", Opcode::kCall, "call", inst->shape(),
        std::vector<Instruction*>(inst->operands().begin(),
                                  inst->operands().end()));
    call->AddCalledComputation(entry);
    c->ReplaceUses(inst, call);
    c->RemoveInstruction(inst);
  }
  return absl::OkStatus();
}

}  // namespace pjrt::hlo::stablehlo_internal
