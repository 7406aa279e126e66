// Implementation notes.
//
// One Builder per HLO computation being written: the entry, each function
// (memoized: a function called from many places is one computation), and
// each region. A Builder maps MLIR value names to HLO instruction names and
// shapes; a region's builder falls back to its parent's values only through
// the captures computed before the region is built (FreeValues), which
// become the computation's parameters. Every emitted line remembers the op
// it came from, so that positions can be mapped back after the HLO parser
// has read the text.
#include "hlo/stablehlo.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "hlo/literal.h"
#include "hlo/minifloat.h"
#include "hlo/mlir_text.h"
#include "hlo/parser.h"
#include "hlo/stablehlo_internal.h"
#include "hlo/verifier.h"

namespace pjrt::hlo {

std::optional<ProgramFormat> ProgramFormatFromName(absl::string_view name) {
  if (name.empty() || name == "auto") return ProgramFormat::kAuto;
  if (name == "hlo") return ProgramFormat::kHlo;
  if (name == "stablehlo" || name == "mlir") return ProgramFormat::kStableHlo;
  return std::nullopt;
}

ProgramFormat DetectProgramFormat(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.substr(i, 2) == "/*") {
      const size_t end = text.find("*/", i + 2);
      i = end == absl::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  absl::string_view rest = text.substr(std::min(i, text.size()));
  for (absl::string_view lead :
       {"module", "func.func", "#", "\"builtin.module\"", "sdy.mesh", "{-#"}) {
    if (absl::StartsWith(rest, lead)) {
      if (lead == "module" && rest.size() > 6 &&
          (absl::ascii_isalnum(rest[6]) || rest[6] == '_')) {
        continue;
      }
      return ProgramFormat::kStableHlo;
    }
  }
  return ProgramFormat::kHlo;
}

namespace stablehlo_internal {

// Attributes that carry no meaning for running the program, or whose only
// meaning is a hint pjrtd does not need.
bool IsIgnorableAttribute(absl::string_view name) {
  if (name.find('.') != absl::string_view::npos) return true;  // mhlo.*, jax.*
  static const auto* const kNames =
      new absl::flat_hash_set<std::string>{"precision_config",
                                           "precision",
                                           "algorithm",
                                           "result_accuracy",
                                           "indices_are_sorted",
                                           "unique_indices",
                                           "backend_config",
                                           "api_version",
                                           "has_side_effect",
                                           "operand_layouts",
                                           "result_layouts",
                                           "output_operand_aliases",
                                           "known_expanding_dimensions",
                                           "known_nonexpanding_dimensions",
                                           "called_computations",
                                           "composite_attributes",
                                           "version",
                                           "largest"};
  return kNames->contains(name);
}

absl::Status Translator::CheckAttributesUsed(const Operation& op) {
  for (const auto& [key, value] : op.attributes) {
    if (used_.contains(&value) || IsIgnorableAttribute(key)) continue;
    return ErrorAt(
        value.position, absl::StatusCode::kUnimplemented,
        absl::StrFormat("%s: attribute %s is not supported", op.name, key));
  }
  return absl::OkStatus();
}

void Translator::CollectFree(const Region& region,
                             absl::flat_hash_set<std::string>* defined,
                             std::vector<std::string>* free,
                             absl::flat_hash_set<std::string>* seen,
                             int depth) {
  if (depth > kMaxDepth) return;
  for (const auto& a : region.arguments) defined->insert(a.name);
  for (const Operation& op : region.operations) {
    for (const auto& use : op.operands) {
      std::string name = use.name;
      if (!defined->contains(name) && absl::EndsWith(name, "#0") &&
          defined->contains(name.substr(0, name.size() - 2))) {
        continue;
      }
      if (!defined->contains(name) && seen->insert(name).second) {
        free->push_back(name);
      }
    }
    for (const Region& nested : op.regions) {
      CollectFree(nested, defined, free, seen, depth + 1);
    }
    for (const auto& r : op.results) defined->insert(r);
  }
}

std::vector<std::string> Translator::FreeValues(const Region& region) {
  absl::flat_hash_set<std::string> defined, seen;
  std::vector<std::string> free;
  CollectFree(region, &defined, &free, &seen, 0);
  return free;
}

std::string Translator::Finish(Builder* b) {
  computations_.push_back(std::move(b->computation));
  return computations_.back().name;
}

absl::Status Translator::Ops(Builder* b, const std::vector<Operation>& ops,
                             std::vector<Value>* returned) {
  if (b->depth > kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "regions and calls nest more than ", kMaxDepth, " levels deep"));
  }
  bool done = false;
  for (const Operation& op : ops) {
    if (done) return Invalid(op, "follows the region's return");
    if (op.name == "func.return") {
      PJRT_ASSIGN_OR_RETURN(*returned, Operands(b, op));
      done = true;
      continue;
    }
    PJRT_ASSIGN_OR_RETURN(bool quantized, Quantized(b, op));
    if (quantized) {
      PJRT_RETURN_IF_ERROR(QuantizedOp(b, op));
      continue;
    }
    PJRT_RETURN_IF_ERROR(Op(b, op));
    PJRT_RETURN_IF_ERROR(CheckAttributesUsed(op));
  }
  if (!done) {
    return absl::InvalidArgumentError(
        "a function or region ends without a return");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Translator::ClosedRegion(Builder* parent,
                                                     const Operation& op,
                                                     const Region& region,
                                                     absl::string_view what) {
  // A reduce written `applies stablehlo.add` gets its region from the
  // reader; every such region of one op and element type is the same
  // computation, built once.
  std::string shared_key;
  if (!region.arguments.empty() &&
      absl::StartsWith(region.arguments[0].name, "%__reduce_") &&
      !region.operations.empty()) {
    shared_key = region.operations[0].name;
    for (const auto& a : region.arguments) {
      absl::StrAppend(&shared_key, " ", a.type.ToString());
    }
    auto it = shared_regions_.find(shared_key);
    if (it != shared_regions_.end()) return it->second;
  }
  std::vector<std::string> free = FreeValues(region);
  for (const std::string& name : free) {
    if (name.rfind("%__", 0) == 0) continue;
    return Unsupported(op, absl::StrCat("its ", what, " region uses ", name,
                                        ", defined outside it; such a region "
                                        "may use only its arguments"));
  }
  Builder b;
  b.depth = parent->depth + 1;
  b.computation.name = NewName(absl::StrCat("region_", what));
  for (size_t i = 0; i < region.arguments.size(); ++i) {
    const auto& a = region.arguments[i];
    b.values[a.name] = Value{
        EmitParameter(&b, a.type, static_cast<int64_t>(i), a.position), a.type};
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, region.operations, &returned));
  if (returned.empty()) {
    return Invalid(op, absl::StrCat("its ", what, " region returns nothing"));
  }
  MarkRoot(&b, ReturnValue(&b, &op, returned, /*tuple=*/false));
  std::string name = Finish(&b);
  if (!shared_key.empty()) shared_regions_[shared_key] = name;
  return name;
}

absl::StatusOr<std::string> Translator::TupleRegion(
    Builder* parent, const Operation& op, const Region& region,
    absl::string_view what, const std::vector<Value>& captured,
    const std::vector<std::string>& capture_names,
    const std::vector<Shape>& argument_shapes, bool pass_captures_through) {
  Builder b;
  b.depth = parent->depth + 1;
  b.computation.name = NewName(absl::StrCat("region_", what));
  std::vector<Shape> shapes = argument_shapes;
  for (const Value& v : captured) shapes.push_back(v.shape);
  const Shape tuple = Shape::Tuple(shapes);
  Value param{EmitLine(&b, &op, tuple, "parameter", "0"), tuple};
  if (region.arguments.size() != argument_shapes.size()) {
    return Invalid(op, absl::StrFormat("its %s region takes %d argument(s); "
                                       "it must take %d",
                                       what, region.arguments.size(),
                                       argument_shapes.size()));
  }
  std::vector<Value> elements;
  for (size_t i = 0; i < shapes.size(); ++i) {
    elements.push_back(
        Value{EmitGte(&b, &op, param, static_cast<int>(i)), shapes[i]});
  }
  for (size_t i = 0; i < region.arguments.size(); ++i) {
    b.values[region.arguments[i].name] = elements[i];
  }
  for (size_t i = 0; i < capture_names.size(); ++i) {
    b.values[capture_names[i]] = elements[argument_shapes.size() + i];
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, region.operations, &returned));
  if (pass_captures_through) {
    for (size_t i = argument_shapes.size(); i < elements.size(); ++i) {
      returned.push_back(elements[i]);
    }
  }
  MarkRoot(&b, ReturnValue(&b, &op, returned, pass_captures_through));
  return Finish(&b);
}

absl::StatusOr<std::string> Translator::FunctionComputation(
    const std::string& symbol, const Operation& at, int depth) {
  auto done = function_computations_.find(symbol);
  if (done != function_computations_.end()) return done->second;
  if (depth > kMaxDepth) {
    return Invalid(at, absl::StrCat("calls nest more than ", kMaxDepth,
                                    " functions deep"));
  }
  const mlir::Function* f = nullptr;
  for (const auto& candidate : module_.functions) {
    if (candidate.name == symbol) f = &candidate;
  }
  if (f == nullptr) {
    return Invalid(at, absl::StrCat("calls @", symbol,
                                    ", which the program does not define"));
  }
  if (!functions_in_progress_.insert(symbol).second) {
    return Unsupported(at, absl::StrCat("@", symbol,
                                        " calls itself; recursion is not "
                                        "supported"));
  }
  Builder b;
  b.depth = depth;
  b.computation.name = NewName(symbol);
  for (size_t i = 0; i < f->arguments.size(); ++i) {
    const auto& a = f->arguments[i];
    b.values[a.name] =
        Value{EmitParameter(&b, a.type, static_cast<int64_t>(i), a.position),
              a.type, a.quantization};
    quantized_values_ |= a.quantization.has_value();
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, f->body.operations, &returned));
  PJRT_RETURN_IF_ERROR(CheckReturned(*f, returned));
  MarkRoot(&b, ReturnValue(&b, nullptr, returned, /*tuple=*/false));
  functions_in_progress_.erase(symbol);
  std::string name = Finish(&b);
  function_computations_[symbol] = name;
  return name;
}

absl::StatusOr<StableHloTranslation> Translator::Run() {
  // The entry: @main, else the last public function.
  const mlir::Function* entry = nullptr;
  for (const auto& f : module_.functions) {
    if (f.name == "main") entry = &f;
  }
  if (entry == nullptr) {
    for (const auto& f : module_.functions) {
      if (f.visibility == "public") entry = &f;
    }
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        "the program has no public function to run: name the entry @main");
  }
  Builder b;
  b.computation.name = "main";
  b.computation.entry = true;
  function_computations_[entry->name] = "main";
  functions_in_progress_.insert(entry->name);
  next_id_ = 0;
  for (size_t i = 0; i < entry->arguments.size(); ++i) {
    const auto& a = entry->arguments[i];
    const std::string name = absl::StrCat("Arg_", i, ".", next_id_++);
    b.computation.lines.push_back(
        Line{absl::StrCat("  %", name, " = ", a.type.ToString(), " parameter(",
                          i, ")"),
             nullptr, a.position});
    b.values[a.name] = Value{name, a.type, a.quantization};
    quantized_values_ |= a.quantization.has_value();
  }
  std::vector<Value> returned;
  PJRT_RETURN_IF_ERROR(Ops(&b, entry->body.operations, &returned));
  PJRT_RETURN_IF_ERROR(CheckReturned(*entry, returned));
  MarkRoot(&b, ReturnValue(&b, nullptr, returned, /*tuple=*/false));
  Finish(&b);

  // Module header: name, replicas, partitions, donations.
  std::string header = absl::StrCat(
      "HloModule ",
      SanitizeName(module_.name.empty() ? entry->name : module_.name));
  for (const auto& [key, attr] : module_.attributes) {
    int64_t v = 0;
    if (attr.kind != AttrKind::kInt || !absl::SimpleAtoi(attr.text, &v))
      continue;
    if (key == "mhlo.num_replicas")
      absl::StrAppend(&header, ", replica_count=", v);
    if (key == "mhlo.num_partitions") {
      absl::StrAppend(&header, ", num_partitions=", v);
    }
  }
  std::vector<std::string> aliases;
  for (size_t i = 0; i < entry->arguments.size(); ++i) {
    const Attribute* alias = mlir::FindAttribute(entry->arguments[i].attributes,
                                                 "tf.aliasing_output");
    if (alias == nullptr) continue;
    int64_t output = 0;
    if (alias->kind != AttrKind::kInt ||
        !absl::SimpleAtoi(alias->text, &output) || output < 0 ||
        output >= static_cast<int64_t>(entry->result_types.size())) {
      return ErrorAt(alias->position, absl::StatusCode::kInvalidArgument,
                     absl::StrFormat("tf.aliasing_output of argument %d names "
                                     "result %s; @%s has %d result(s)",
                                     i, alias->text, entry->name,
                                     entry->result_types.size()));
    }
    aliases.push_back(absl::StrFormat(
        "%s: (%d, {}, may-alias)",
        entry->result_types.size() == 1 ? "{}" : absl::StrCat("{", output, "}"),
        i));
  }
  if (!aliases.empty()) {
    absl::StrAppend(&header, ", input_output_alias={ ",
                    absl::StrJoin(aliases, ", "), " }");
  }

  StableHloTranslation out;
  mlir::LocationResolver locations(module_);
  out.hlo_text = header + "\n";
  out.origins.push_back(SourceOrigin{1, 1, ""});
  const auto add_line = [&](const std::string& text, const Line* line) {
    absl::StrAppend(&out.hlo_text, text, "\n");
    SourceOrigin origin;
    if (line != nullptr) {
      origin.line = line->position.line;
      origin.column = line->position.column;
      if (line->origin != nullptr && !line->origin->location.empty()) {
        origin.location = locations.Resolve(line->origin->location);
      }
    }
    out.origins.push_back(std::move(origin));
  };
  // Callees first; the entry (finished last) last.
  for (const Computation& c : computations_) {
    add_line("", nullptr);
    add_line(absl::StrCat(c.entry ? "ENTRY " : "", "%", c.name, " {"), nullptr);
    for (const Line& line : c.lines) add_line(line.text, &line);
    add_line("}", nullptr);
  }
  return out;
}

}  // namespace stablehlo_internal

absl::StatusOr<StableHloTranslation> TranslateStableHlo(
    absl::string_view mlir_text) {
  PJRT_ASSIGN_OR_RETURN(mlir::Module module, mlir::ParseMlirModule(mlir_text));
  stablehlo_internal::Translator translator(module, mlir_text);
  return translator.Run();
}

absl::StatusOr<std::unique_ptr<Module>> ParseAndVerifyProgram(
    absl::string_view text, ProgramFormat format) {
  if (format == ProgramFormat::kAuto) format = DetectProgramFormat(text);
  if (format == ProgramFormat::kHlo) {
    PJRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, ParseHloModule(text));
    PJRT_RETURN_IF_ERROR(
        stablehlo_internal::ExpandLibraryCalls(module.get(), text));
    PJRT_RETURN_IF_ERROR(VerifyModule(*module, text));
    return module;
  }
  PJRT_ASSIGN_OR_RETURN(StableHloTranslation translation,
                        TranslateStableHlo(text));
  const auto origin_of = [&](int hlo_line) -> const SourceOrigin* {
    if (hlo_line < 1 ||
        hlo_line > static_cast<int>(translation.origins.size())) {
      return nullptr;
    }
    return &translation.origins[hlo_line - 1];
  };
  absl::StatusOr<std::unique_ptr<Module>> parsed =
      ParseHloModule(translation.hlo_text);
  if (!parsed.ok()) {
    // A message about the generated text: point at the op it came from.
    const absl::string_view message = parsed.status().message();
    int line = 0;
    absl::string_view what = message;
    if (absl::ConsumePrefix(&what, "line ")) {
      const size_t comma = what.find(',');
      const size_t colon = what.find(": ");
      if (comma != absl::string_view::npos &&
          colon != absl::string_view::npos &&
          absl::SimpleAtoi(what.substr(0, comma), &line)) {
        what = what.substr(colon + 2);
        what = what.substr(0, what.find('\n'));
      }
    }
    const SourceOrigin* origin = origin_of(line);
    if (origin == nullptr || origin->line == 0) return parsed.status();
    std::string text_message(what);
    if (!origin->location.empty())
      absl::StrAppend(&text_message, " (at ", origin->location, ")");
    return absl::Status(
        parsed.status().code(),
        FormatErrorAt(text, origin->line, origin->column, text_message));
  }
  std::unique_ptr<Module> module = *std::move(parsed);
  for (const auto& c : module->computations()) {
    for (const auto& inst : c->instructions()) {
      const SourceOrigin* origin = origin_of(inst->line());
      if (origin == nullptr || origin->line == 0) {
        inst->set_position(0, 0);
        continue;
      }
      inst->set_position(origin->line, origin->column);
      inst->set_source_location(origin->location);
    }
  }
  PJRT_RETURN_IF_ERROR(VerifyModule(*module, text));
  return module;
}

}  // namespace pjrt::hlo
