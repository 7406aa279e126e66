// Tests of the HLO text parser (hlo/parser.h; the lexer's are in
// hlo_lexer_test.cc): the whole public corpus parses, the structure and
// literals come out right, and every kind of error points at the right place
// and says what is wrong.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "hlo/ir.h"
#include "hlo/lexer.h"
#include "hlo/literal.h"
#include "hlo/opcode.h"
#include "hlo/parser.h"

namespace pjrt::hlo {
namespace {

namespace fs = std::filesystem;

fs::path CorpusDir() {
  return fs::path(PJRT_SOURCE_DIR) / "tests" / "data" / "hlo-corpus";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::vector<fs::path> HloFilesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::unique_ptr<Module> ParseOrDie(absl::string_view text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? std::move(*module) : nullptr;
}

std::unique_ptr<Module> ParseCorpusFile(absl::string_view relative) {
  return ParseOrDie(ReadFile(CorpusDir() / std::string(relative)));
}

// Asserts that parsing fails with INVALID_ARGUMENT at line:column and that
// the message contains `phrase`.
void ExpectErrorAt(absl::string_view text, int line, int column,
                   absl::string_view phrase) {
  auto module = ParseHloModule(text);
  ASSERT_FALSE(module.ok())
      << "parsed, but expected an error containing \"" << phrase << "\"";
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(module.status().message());
  EXPECT_EQ(
      message.rfind(absl::StrFormat("line %d, column %d: ", line, column), 0),
      0u)
      << message;
  EXPECT_NE(message.find(std::string(phrase)), std::string::npos)
      << "missing \"" << phrase << "\" in:\n"
      << message;
}

const Instruction* FindIn(const Module& module, absl::string_view computation,
                          absl::string_view instruction) {
  const Computation* c = module.FindComputation(computation);
  if (c == nullptr) return nullptr;
  return c->FindInstruction(instruction);
}

// One constant, `root = <shape> constant(<value>)`, parsed.
absl::StatusOr<std::unique_ptr<Module>> ParseConstant(absl::string_view shape,
                                                      absl::string_view value) {
  return ParseHloModule(absl::StrCat("HloModule m\nENTRY e {\n  ROOT c = ",
                                     shape, " constant(", value, ")\n}\n"));
}

const Literal& RootLiteral(const Module& module) {
  return module.entry()->root()->attributes().literal;
}

// ---------------------------------------------------------------------------
// The corpus

TEST(HloParserCorpus, EveryXlaParserTestModuleParses) {
  std::vector<fs::path> files = HloFilesIn(CorpusDir() / "parser");
  EXPECT_EQ(files.size(), 165u);
  for (const fs::path& file : files) {
    auto module = ParseHloModule(ReadFile(file));
    EXPECT_TRUE(module.ok()) << file.filename() << ": " << module.status();
    if (!module.ok()) continue;
    EXPECT_NE((*module)->entry(), nullptr) << file.filename();
    for (const auto& computation : (*module)->computations()) {
      EXPECT_NE(computation->root(), nullptr) << file.filename();
    }
  }
}

TEST(HloParserCorpus, EveryFeatureProgramParses) {
  std::vector<fs::path> files = HloFilesIn(CorpusDir() / "programs");
  EXPECT_EQ(files.size(), 21u);
  for (const fs::path& file : files) {
    auto module = ParseHloModule(ReadFile(file));
    EXPECT_TRUE(module.ok()) << file.filename() << ": " << module.status();
  }
}

TEST(HloParserCorpus,
     MaxtextTrainStepParsesQuicklyWithThousandsOfInstructions) {
  const std::string text =
      ReadFile(CorpusDir() / "programs" /
               "jax_maxtext_train_step_before_optimization.hlo");
  ASSERT_GT(text.size(), 500000u);
  const auto start = std::chrono::steady_clock::now();
  auto module = ParseHloModule(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(module.ok()) << module.status();
  size_t instructions = 0;
  for (const auto& computation : (*module)->computations()) {
    instructions += computation->instructions().size();
  }
  EXPECT_GT(instructions, 1000u);
  ASSERT_NE((*module)->entry(), nullptr);
  EXPECT_TRUE((*module)->entry()->is_entry());
  EXPECT_GT((*module)->entry()->parameters().size(), 10u);
  EXPECT_GT((*module)->config().input_output_aliases.size(), 10u);
  // Generous, for sanitizer builds; a release build takes a small fraction.
  EXPECT_LT(seconds, 5.0);
  std::printf("maxtext: %zu instructions parsed in %.1f ms\n", instructions,
              seconds * 1e3);
}

// ---------------------------------------------------------------------------
// Structure

TEST(HloParser, AxpyEntryHasItsParametersInOrderAndAnAddRoot) {
  auto module =
      ParseCorpusFile("programs/01_axpy_entry_layout_percent_style.hlo");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->name(), "axpy_module");
  const Computation* entry = module->entry();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->name(), "axpy.v5");
  ASSERT_EQ(entry->parameters().size(), 3u);
  EXPECT_EQ(entry->parameters()[0]->name(), "alpha");
  EXPECT_EQ(entry->parameters()[1]->name(), "x");
  EXPECT_EQ(entry->parameters()[2]->name(), "y");
  EXPECT_EQ(entry->parameters()[1]->shape(),
            Shape(PrimitiveType::kF32, {2, 4}));
  const Instruction* root = entry->root();
  EXPECT_EQ(root->opcode(), Opcode::kAdd);
  EXPECT_EQ(root->name(), "add");
  ASSERT_EQ(root->operand_count(), 2);
  EXPECT_EQ(root->operand(0)->name(), "multiply");
  EXPECT_EQ(root->operand(1), entry->parameters()[2]);
  EXPECT_EQ(root->parent(), entry);
  EXPECT_EQ(root->line(), 11);
  EXPECT_EQ(root->column(), 8);
  EXPECT_EQ(root->Describe(), "%add (line 11)");
  ASSERT_TRUE(root->shape().layout().has_value());
  EXPECT_EQ(*root->shape().layout(), (std::vector<int64_t>{1, 0}));

  const Instruction* broadcast = entry->FindInstruction("broadcast");
  ASSERT_NE(broadcast, nullptr);
  EXPECT_TRUE(broadcast->attributes().has("dimensions"));
  EXPECT_TRUE(broadcast->attributes().dimensions.empty());

  const ModuleConfig& config = module->config();
  ASSERT_TRUE(config.entry_parameter_layouts.has_value());
  ASSERT_EQ(config.entry_parameter_layouts->size(), 3u);
  EXPECT_EQ((*config.entry_parameter_layouts)[1].layout(),
            (std::vector<int64_t>{1, 0}));
  ASSERT_TRUE(config.entry_result_layout.has_value());
  EXPECT_EQ(*config.entry_result_layout, Shape(PrimitiveType::kF32, {2, 4}));
  ASSERT_EQ(config.raw.size(), 1u);
  EXPECT_EQ(config.raw[0].first, "entry_computation_layout");
  EXPECT_EQ(config.raw[0].second,
            "{(f32[], f32[2,4]{1,0}, f32[2,4]{1,0})->f32[2,4]{1,0}}");
}

TEST(HloParser, RegionParametersAreListedByNumberNotByTextOrder) {
  auto module = ParseCorpusFile("parser/TupleReduce.hlo");
  ASSERT_NE(module, nullptr);
  const Computation* region = module->FindComputation("max_argmax");
  ASSERT_NE(region, nullptr);
  ASSERT_EQ(region->parameters().size(), 4u);
  // Written in the order 2, 0, 3, 1.
  EXPECT_EQ(region->instructions()[0]->name(), "value");
  EXPECT_EQ(region->parameters()[0]->name(), "prev_max");
  EXPECT_EQ(region->parameters()[1]->name(), "prev_argmax");
  EXPECT_EQ(region->parameters()[2]->name(), "value");
  EXPECT_EQ(region->parameters()[3]->name(), "index");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(region->parameters()[i]->attributes().parameter_number, i);
  }
  const Instruction* reduce = module->entry()->root();
  EXPECT_EQ(reduce->opcode(), Opcode::kReduce);
  ASSERT_EQ(reduce->called_computations().size(), 1u);
  EXPECT_EQ(reduce->called_computations()[0], region);
  EXPECT_EQ(reduce->attributes().dimensions, (std::vector<int64_t>{0}));
  EXPECT_EQ(reduce->shape(), Shape::Tuple({Shape(PrimitiveType::kF32, {}),
                                           Shape(PrimitiveType::kS32, {})}));
}

TEST(HloParser, OperandsMayReferToInstructionsDefinedLater) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  ROOT sum = f32[] add(a, b)
  a = f32[] parameter(0)
  b = f32[] constant(2)
})");
  ASSERT_NE(module, nullptr);
  const Instruction* root = module->entry()->root();
  EXPECT_EQ(root->name(), "sum");
  EXPECT_EQ(root->operand(0)->name(), "a");
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::kConstant);
}

TEST(HloParser, PercentAndBareNamesReferToTheSameInstruction) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY %e {
  %p = f32[] parameter(0)
  ROOT n = f32[] negate(p), metadata={op_name="x"}
}
other {
  q = f32[] parameter(0)
  ROOT m = f32[] multiply(%q, q)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->name(), "e");
  const Instruction* root = module->entry()->root();
  EXPECT_EQ(root->operand(0), module->entry()->FindInstruction("p"));
  const Instruction* m = FindIn(*module, "other", "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->operand(0), m->operand(1));
}

TEST(HloParser, WithoutEntryTheLastComputationIsTheEntry) {
  auto module =
      ParseCorpusFile("programs/19_jax_scan_nested_while_no_entry_kw.hlo");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->name(), "main.43");
  EXPECT_TRUE(module->entry()->is_entry());
  EXPECT_FALSE(module->FindComputation("outer_body")->is_entry());
  EXPECT_EQ(module->computations().size(), 5u);
}

TEST(HloParser, WithoutRootTheLastInstructionIsTheRoot) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  p = f32[] parameter(0)
  n = f32[] negate(p)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->name(), "n");
}

TEST(HloParser, RootMayBeWrittenBeforeOtherInstructions) {
  auto module = ParseCorpusFile("parser/SendRecv.hlo");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->name(), "recv-done");
  EXPECT_EQ(module->entry()->instructions().back()->name(), "send-done");
}

TEST(HloParser, EachComputationHasItsOwnNameScope) {
  auto module =
      ParseCorpusFile("programs/19_jax_scan_nested_while_no_entry_kw.hlo");
  ASSERT_NE(module, nullptr);
  const Instruction* a = FindIn(*module, "outer_body", "get-tuple-element.46");
  const Instruction* b =
      FindIn(*module, "wide.region_0.7", "get-tuple-element.46");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(a->operand(0)->parent(), a->parent());
}

TEST(HloParser, UnknownOpcodesParseAsOtherKeepingTheirSpelling) {
  auto module = ParseCorpusFile("parser/AsyncOpsWithSyntaxSugar.hlo");
  ASSERT_NE(module, nullptr);
  const Instruction* start = module->entry()->FindInstruction("async-start");
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->opcode(), Opcode::kOther);
  EXPECT_EQ(start->opcode_name(), "custom-call-start");
  EXPECT_EQ(start->attributes().custom_call_target, "foo");
  // ((f32[10]), f32[20], s32[]) as written.
  ASSERT_TRUE(start->shape().IsTuple());
  EXPECT_TRUE(start->shape().tuple_shapes()[0].IsTuple());
  EXPECT_EQ(module->entry()->root()->opcode_name(), "custom-call-done");

  auto fft = ParseCorpusFile("parser/Fft.hlo");
  ASSERT_NE(fft, nullptr);
  EXPECT_EQ(fft->entry()->root()->opcode(), Opcode::kFft);
  EXPECT_EQ(fft->entry()->root()->opcode_name(), "fft");
}

TEST(HloParser, CalledComputationsComeInTheDocumentedOrder) {
  auto whiles = ParseCorpusFile("programs/05_while_scalar_s32.hlo");
  ASSERT_NE(whiles, nullptr);
  const Instruction* loop = whiles->entry()->root();
  ASSERT_EQ(loop->called_computations().size(), 2u);
  EXPECT_EQ(loop->called_computations()[0]->name(), "condition.v3");
  EXPECT_EQ(loop->called_computations()[1]->name(), "body.v3");

  auto sas = ParseCorpusFile("programs/14_select_and_scatter.hlo");
  ASSERT_NE(sas, nullptr);
  const Instruction* select_and_scatter = sas->entry()->root();
  ASSERT_EQ(select_and_scatter->called_computations().size(), 2u);
  EXPECT_EQ(select_and_scatter->called_computations()[0]->name(), "ge_F32.v3");
  EXPECT_EQ(select_and_scatter->called_computations()[1]->name(), "add_F32.v3");

  auto indexed =
      ParseCorpusFile("programs/11_conditional_indexed_branches.hlo");
  ASSERT_NE(indexed, nullptr);
  const auto& branches = indexed->entry()->root()->called_computations();
  ASSERT_EQ(branches.size(), 3u);
  EXPECT_EQ(branches[0]->name(), "Negate");
  EXPECT_EQ(branches[1]->name(), "Identity");
  EXPECT_EQ(branches[2]->name(), "Floor");

  auto predicated = ParseCorpusFile("parser/PredicatedConditional.hlo");
  ASSERT_NE(predicated, nullptr);
  const auto& pair = predicated->entry()->root()->called_computations();
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(pair[0]->name(), "Negate");
  EXPECT_EQ(pair[1]->name(), "Identity");

  // Written body first: still condition, then body.
  auto reversed = ParseOrDie(R"(HloModule m
c { p = s32[] parameter(0)
    ROOT k = pred[] constant(false) }
b { ROOT p = s32[] parameter(0) }
ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), body=b, condition=c
})");
  ASSERT_NE(reversed, nullptr);
  const auto& called = reversed->entry()->root()->called_computations();
  ASSERT_EQ(called.size(), 2u);
  EXPECT_EQ(called[0]->name(), "c");
  EXPECT_EQ(called[1]->name(), "b");
}

TEST(HloParser, CalledComputationsMayBeDefinedAfterTheirCaller) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->name(), "e");
  EXPECT_EQ(module->entry()->root()->called_computations()[0]->name(), "add");
}

TEST(HloParser, NestedInstructionsGetFreshNamesAndInferredShapes) {
  auto module = ParseCorpusFile("parser/AmbiguousNames.hlo");
  ASSERT_NE(module, nullptr);
  const Computation* entry = module->entry();
  // add = add(f32[10] parameter(0), f32[10] parameter(1))
  // ROOT add2 = add(add, add(add, add))
  ASSERT_EQ(entry->parameters().size(), 2u);
  const Instruction* add = entry->FindInstruction("add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->shape(), Shape(PrimitiveType::kF32, {10}));
  EXPECT_EQ(add->operand(0), entry->parameters()[0]);
  const Instruction* root = entry->root();
  EXPECT_EQ(root->name(), "add2");
  EXPECT_EQ(root->shape(), Shape(PrimitiveType::kF32, {10}));
  EXPECT_EQ(root->operand(0), add);
  const Instruction* inner = root->operand(1);
  EXPECT_NE(inner, add);
  EXPECT_EQ(inner->opcode(), Opcode::kAdd);
  EXPECT_EQ(inner->operand(0), add);
  EXPECT_EQ(entry->FindInstruction(inner->name()), inner);

  auto gte = ParseCorpusFile("parser/TupleShapeInsideAnonymousInstr.hlo");
  ASSERT_NE(gte, nullptr);
  EXPECT_EQ(gte->entry()->root()->shape(), Shape(PrimitiveType::kF32, {10}));
  EXPECT_EQ(gte->entry()->root()->attributes().tuple_index, 0);
}

TEST(HloParser, ComputationAttributesAfterTheBodyAreSkipped) {
  auto module =
      ParseCorpusFile("parser/HloComputationWithParallelThreadName.hlo");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->name(), "async-done");
}

TEST(HloParser, HeaderAttributesAreParsedOrKeptRaw) {
  auto module = ParseOrDie(R"(HloModule m, replica_count=4, num_partitions=2,
  input_output_alias={ {0}: (1, {}, may-alias), {1}: (0, {2}, must-alias), {2, 1}: (3, {}) },
  some_future_attribute={a=[1,2], b="}"}, is_scheduled=true

ENTRY e {
  ROOT p = f32[] parameter(0)
})");
  ASSERT_NE(module, nullptr);
  const ModuleConfig& config = module->config();
  EXPECT_EQ(config.replica_count, 4);
  EXPECT_EQ(config.num_partitions, 2);
  ASSERT_EQ(config.input_output_aliases.size(), 3u);
  EXPECT_EQ(config.input_output_aliases[0].output_index,
            (std::vector<int64_t>{0}));
  EXPECT_EQ(config.input_output_aliases[0].parameter_number, 1);
  EXPECT_FALSE(config.input_output_aliases[0].must_alias);
  EXPECT_EQ(config.input_output_aliases[1].parameter_index,
            (std::vector<int64_t>{2}));
  EXPECT_TRUE(config.input_output_aliases[1].must_alias);
  EXPECT_EQ(config.input_output_aliases[2].output_index,
            (std::vector<int64_t>{2, 1}));
  EXPECT_FALSE(config.input_output_aliases[2].must_alias);
  ASSERT_EQ(config.raw.size(), 5u);
  EXPECT_EQ(config.raw[3].first, "some_future_attribute");
  EXPECT_EQ(config.raw[3].second, "{a=[1,2], b=\"}\"}");
  EXPECT_EQ(config.raw[4].second, "true");
  EXPECT_FALSE(config.entry_parameter_layouts.has_value());
}

TEST(HloParser, ShapesKeepLayoutsAndDynamicDimensions) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  a = f32[2,3]{0,1:T(8,128)(2,1)S(1)} parameter(0)
  b = f32[<=10,4]{1,0} parameter(1)
  c = s32[?] parameter(2)
  t = token[] after-all()
  ROOT r = ((f32[10]{0}), f32[20]{0}, s32[], ()) custom-call(a, b, c, t), custom_call_target="x"
})");
  ASSERT_NE(module, nullptr);
  const Computation* entry = module->entry();
  const Shape& a = entry->parameters()[0]->shape();
  EXPECT_EQ(a, Shape(PrimitiveType::kF32, {2, 3}));
  EXPECT_EQ(a.layout(), (std::vector<int64_t>{0, 1}));
  const Shape& b = entry->parameters()[1]->shape();
  EXPECT_EQ(b.dimensions(0), 10);
  EXPECT_EQ(b.dynamic_dimensions(), (std::vector<bool>{true, false}));
  EXPECT_EQ(entry->parameters()[2]->shape().dynamic_dimensions(),
            (std::vector<bool>{true}));
  EXPECT_TRUE(entry->FindInstruction("t")->shape().IsToken());
  const Shape& r = entry->root()->shape();
  ASSERT_EQ(r.tuple_shapes().size(), 4u);
  EXPECT_EQ(r.tuple_shapes()[3], Shape::Tuple({}));
}

// ---------------------------------------------------------------------------
// Attributes

TEST(HloParserAttributes, SpecialFormsAreParsed) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  p = f32[4,6] parameter(0)
  s = f32[2,2] slice(p), slice={[0:4:2], [1:3]}
  z = f32[] constant(0)
  pad = f32[7,9] pad(p, z), padding=0_-1_2x1_2
  d = f32[4,4] dot(p, p), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_contracting_dims={1}, rhs_batch_dims={}
  c = pred[4,6] compare(p, p), direction=LE, type=TOTALORDER
  i = s32[4] iota(), iota_dimension=0
  ds = f32[2,2] dynamic-slice(p, i, i), dynamic_slice_sizes={2,2}
  rp = f32[4,6] reduce-precision(p), exponent_bits=5, mantissa_bits=10
  cc = f32[4] custom-call(p), custom_call_target="foo\"bar", backend_config={"key": [1, {"x": "}"}]}
  conv = f32[1,2,1] convolution(p, p), window={size=3x3 stride=2x2 pad=1_1x0_-1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, feature_group_count=1
  ROOT t = (f32[2,2], f32[7,9]) tuple(s, pad), sharding={{maximal device=0}, {replicated}}
})");
  ASSERT_NE(module, nullptr);
  const Computation* e = module->entry();
  const auto& slice = e->FindInstruction("s")->attributes().slice;
  ASSERT_EQ(slice.size(), 2u);
  EXPECT_EQ(slice[0].start, 0);
  EXPECT_EQ(slice[0].limit, 4);
  EXPECT_EQ(slice[0].stride, 2);
  EXPECT_EQ(slice[1].start, 1);
  EXPECT_EQ(slice[1].limit, 3);
  EXPECT_EQ(slice[1].stride, 1);

  const auto& padding = e->FindInstruction("pad")->attributes().padding;
  ASSERT_EQ(padding.size(), 2u);
  EXPECT_EQ(padding[0].low, 0);
  EXPECT_EQ(padding[0].high, -1);
  EXPECT_EQ(padding[0].interior, 2);
  EXPECT_EQ(padding[1].low, 1);
  EXPECT_EQ(padding[1].high, 2);
  EXPECT_EQ(padding[1].interior, 0);

  const auto& dot = e->FindInstruction("d")->attributes().dot_dimension_numbers;
  EXPECT_TRUE(dot.lhs_batch_dimensions.empty());
  EXPECT_EQ(dot.lhs_contracting_dimensions, (std::vector<int64_t>{1}));
  EXPECT_EQ(dot.rhs_contracting_dimensions, (std::vector<int64_t>{1}));

  const Attributes& compare = e->FindInstruction("c")->attributes();
  EXPECT_EQ(compare.comparison_direction, ComparisonDirection::kLe);
  EXPECT_EQ(compare.comparison_type, ComparisonType::kTotalOrder);
  EXPECT_EQ(e->FindInstruction("i")->attributes().iota_dimension, 0);
  EXPECT_EQ(e->FindInstruction("ds")->attributes().dynamic_slice_sizes,
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(e->FindInstruction("rp")->attributes().exponent_bits, 5);
  EXPECT_EQ(e->FindInstruction("rp")->attributes().mantissa_bits, 10);

  const Attributes& cc = e->FindInstruction("cc")->attributes();
  EXPECT_EQ(cc.custom_call_target, "foo\"bar");
  ASSERT_NE(cc.FindRaw("backend_config"), nullptr);
  EXPECT_EQ(*cc.FindRaw("backend_config"), R"({"key": [1, {"x": "}"}]})");
  EXPECT_EQ(*cc.FindRaw("custom_call_target"), R"("foo\"bar")");

  const Attributes& conv = e->FindInstruction("conv")->attributes();
  EXPECT_EQ(*conv.FindRaw("window"),
            "{size=3x3 stride=2x2 pad=1_1x0_-1 rhs_dilate=1x2}");
  EXPECT_EQ(*conv.FindRaw("dim_labels"), "b01f_01io->b01f");
  EXPECT_EQ(*conv.FindRaw("feature_group_count"), "1");
  EXPECT_EQ(conv.present, (std::vector<std::string>{"window", "dim_labels",
                                                    "feature_group_count"}));
  EXPECT_TRUE(conv.has("dim_labels"));
  EXPECT_FALSE(conv.has("dimensions"));
  EXPECT_EQ(conv.FindRaw("dimensions"), nullptr);
  EXPECT_EQ(*e->root()->attributes().FindRaw("sharding"),
            "{{maximal device=0}, {replicated}}");
}

TEST(HloParserAttributes, CollectiveAttributesAreParsed) {
  auto module = ParseOrDie(R"(HloModule m, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[8] parameter(0)
  ar = f32[8] all-reduce(p), channel_id=7, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  cp = f32[8] collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT s = f32[8] sort(p), dimensions={0}, is_stable=true, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  const Attributes& ar = module->entry()->FindInstruction("ar")->attributes();
  EXPECT_EQ(ar.channel_id, 7);
  EXPECT_EQ(ar.replica_groups,
            (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(ar.use_global_device_ids);
  const Attributes& cp = module->entry()->FindInstruction("cp")->attributes();
  EXPECT_FALSE(cp.channel_id.has_value());
  EXPECT_EQ(cp.source_target_pairs,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_TRUE(module->entry()->root()->attributes().is_stable);
}

std::vector<std::vector<int64_t>> ReplicaGroupsOf(absl::string_view groups) {
  auto module = ParseOrDie(
      absl::StrCat("HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n"
                   "  ROOT a = f32[8] all-gather(p), replica_groups=",
                   groups, ", dimensions={0}\n}\n"));
  if (module == nullptr) return {};
  return module->entry()->root()->attributes().replica_groups;
}

TEST(HloParserAttributes, IotaReplicaGroupsExpandToExplicitGroups) {
  EXPECT_EQ(ReplicaGroupsOf("[2,10]<=[20]"),
            (std::vector<std::vector<int64_t>>{
                {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
                {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}));
  // iota(8) as [2,4], transposed to [4,2], cut into 4 groups of 2.
  EXPECT_EQ(
      ReplicaGroupsOf("[4,2]<=[2,4]T(1,0)"),
      (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(ReplicaGroupsOf("[3,10]<=[6,5]T(1,0)")[0],
            (std::vector<int64_t>{0, 5, 10, 15, 20, 25, 1, 6, 11, 16}));
  EXPECT_EQ(ReplicaGroupsOf("[1,8]<=[2,2,2]T(2,1,0)"),
            (std::vector<std::vector<int64_t>>{{0, 4, 2, 6, 1, 5, 3, 7}}));
  EXPECT_EQ(ReplicaGroupsOf("{}"), (std::vector<std::vector<int64_t>>{}));
}

TEST(HloParserAttributes, IotaReplicaGroupsThatDoNotCoverTheIdsAreRejected) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT a = f32[8] all-gather(p), replica_groups=[2,3]<=[8], dimensions={0}
})",
                4, 49, "2 groups of 3 do not cover the 8 ids");
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT a = f32[8] all-gather(p), replica_groups=[2,4]<=[2,4]T(0,0), dimensions={0}
})",
                4, 49, "T(0,0) is not a permutation");
}

TEST(HloParserAttributes, UnknownAttributesAreKeptRawUntilTheNextInstruction) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  p = f32[1,2,1] parameter(0)
  c = f32[1,2,1] convolution(p, p), dim_labels=b0f_0io->b0f
  ROOT r = f32[1,2,1] custom-call(c), custom_call_target="t", dim_labels=?b01f_0?1io->b01?f
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(*module->entry()->FindInstruction("c")->attributes().FindRaw(
                "dim_labels"),
            "b0f_0io->b0f");
  EXPECT_EQ(*module->entry()->root()->attributes().FindRaw("dim_labels"),
            "?b01f_0?1io->b01?f");
}

// ---------------------------------------------------------------------------
// Literals

TEST(HloParserLiteral, NonFiniteValuesAndNegativeZeroKeepTheirBits) {
  auto module = ParseConstant("f32[6]", "{nan, -nan, inf, -inf, -0, 0}");
  ASSERT_TRUE(module.ok()) << module.status();
  const Literal& literal = RootLiteral(**module);
  EXPECT_TRUE(std::isnan(literal.Get<float>(0)));
  EXPECT_FALSE(std::signbit(literal.Get<float>(0)));
  EXPECT_TRUE(std::isnan(literal.Get<float>(1)));
  EXPECT_TRUE(std::signbit(literal.Get<float>(1)));
  EXPECT_EQ(literal.Get<float>(2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(literal.Get<float>(3), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(std::bit_cast<uint32_t>(literal.Get<float>(4)), 0x80000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(literal.Get<float>(5)), 0u);

  auto half = ParseConstant("f16[3]", "{nan, -inf, -0}");
  ASSERT_TRUE(half.ok()) << half.status();
  const Literal& h = RootLiteral(**half);
  EXPECT_EQ(h.Get<uint16_t>(0) & 0x7c00u, 0x7c00u);
  EXPECT_NE(h.Get<uint16_t>(0) & 0x3ffu, 0u);
  EXPECT_EQ(h.Get<uint16_t>(1), 0xfc00u);
  EXPECT_EQ(h.Get<uint16_t>(2), 0x8000u);
}

TEST(HloParserLiteral, HalfAndBfloat16RoundToNearestEven) {
  auto module = ParseConstant("(bf16[4], f16[4])",
                              "({0.1, 1.00390625, 1.01171875, -2.366e+38}, "
                              "{0.1, 1.00048828125, 1.00146484375, 65519})");
  ASSERT_TRUE(module.ok()) << module.status();
  const Literal& bf16 = RootLiteral(**module).tuple_elements()[0];
  EXPECT_EQ(bf16.Get<uint16_t>(0), 0x3dcdu);  // 0.1 rounds up
  EXPECT_EQ(bf16.Get<uint16_t>(1), 0x3f80u);  // tie: to even (down)
  EXPECT_EQ(bf16.Get<uint16_t>(2), 0x3f82u);  // tie: to even (up)
  EXPECT_EQ(bf16.Get<uint16_t>(3), FloatToBfloat16(-2.366e+38f));
  const Literal& f16 = RootLiteral(**module).tuple_elements()[1];
  EXPECT_EQ(f16.Get<uint16_t>(0), 0x2e66u);
  EXPECT_EQ(f16.Get<uint16_t>(1), 0x3c00u);  // tie: to even (down)
  EXPECT_EQ(f16.Get<uint16_t>(2), 0x3c02u);  // tie: to even (up)
  EXPECT_EQ(f16.Get<uint16_t>(3), 0x7bffu);  // rounds to the largest half
}

TEST(HloParserLiteral, HalfConversionsRoundTripAndHandleSubnormals) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00u);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000u);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00u);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);  // tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002u);  // tie to even
  EXPECT_EQ(HalfToFloat(0x0001u), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x3555u), 0.333251953125f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
  EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(3.0f)), 3.0f);
  for (uint32_t bits = 0; bits < 0x7c00u; bits += 7) {
    const uint16_t h = static_cast<uint16_t>(bits);
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)), h);
  }
}

TEST(HloParserLiteral, OutOfRangeFloatsAreRejected) {
  auto f16 = ParseConstant("f16[]", "65520");
  ASSERT_FALSE(f16.ok());
  EXPECT_NE(f16.status().message().find("value 65520 is out of range for f16"),
            absl::string_view::npos)
      << f16.status();
  EXPECT_FALSE(ParseConstant("bf16[]", "1e100").ok());
  EXPECT_FALSE(ParseConstant("f32[]", "3.5e+38").ok());
  EXPECT_FALSE(ParseConstant("f64[]", "1e999").ok());
  EXPECT_TRUE(ParseConstant("bf16[]", "3.39e+38").ok());
  EXPECT_TRUE(ParseConstant("f16[]", "-65504").ok());
}

TEST(HloParserLiteral, IntegersAboveTheS64RangeAreU64BitPatterns) {
  auto module = ParseConstant("u64[2]", "{18446744073709551615, 0}");
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(RootLiteral(**module).Get<uint64_t>(0), 18446744073709551615u);

  auto s64 =
      ParseConstant("s64[2]", "{18446744073709551615, -9223372036854775808}");
  ASSERT_TRUE(s64.ok()) << s64.status();
  EXPECT_EQ(RootLiteral(**s64).Get<int64_t>(0), -1);
  EXPECT_EQ(RootLiteral(**s64).Get<int64_t>(1),
            std::numeric_limits<int64_t>::min());

  auto too_big = ParseConstant("u64[]", "18446744073709551616");
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find(
                "integer 18446744073709551616 does not fit in 64 bits"),
            absl::string_view::npos)
      << too_big.status();
}

TEST(HloParserLiteral, IntegersOutsideTheElementTypeAreRejectedNamingThem) {
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT c = s8[2] constant({1, 128})\n}", 3, 31,
      "value 128 is out of range for s8");
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = u8[] constant(-1)\n}", 3,
                26, "negative value -1 for unsigned type u8");
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = u4[] constant(16)\n}", 3,
                26, "value 16 is out of range for u4");
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = s32[] constant(1.5)\n}", 3,
                27, "expected an integer s32 value");
  auto extremes = ParseConstant("(s8[2], u32[1], s4[2])",
                                "({-128, 127}, {4294967295}, {-8, 7})");
  ASSERT_TRUE(extremes.ok()) << extremes.status();
  const Literal& s8 = RootLiteral(**extremes).tuple_elements()[0];
  EXPECT_EQ(s8.Get<int8_t>(0), -128);
  EXPECT_EQ(s8.Get<int8_t>(1), 127);
  EXPECT_EQ(RootLiteral(**extremes).tuple_elements()[1].Get<uint32_t>(0),
            4294967295u);
  EXPECT_EQ(RootLiteral(**extremes).tuple_elements()[2].Get<int8_t>(0), -8);
}

TEST(HloParserLiteral, PredAcceptsTrueFalseZeroAndOne) {
  auto module = ParseConstant("pred[4]", "{true, false, 1, 0}");
  ASSERT_TRUE(module.ok()) << module.status();
  const Literal& literal = RootLiteral(**module);
  EXPECT_EQ(literal.data(), (std::vector<uint8_t>{1, 0, 1, 0}));
  auto scalar = ParseConstant("pred[]", "true");
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(RootLiteral(**scalar).Get<uint8_t>(0), 1);
  EXPECT_FALSE(ParseConstant("pred[]", "2").ok());
}

TEST(HloParserLiteral, RankFourLiteralWithIndexCommentsIsRowMajor) {
  auto module =
      ParseCorpusFile("programs/02_literal_rank4_with_index_comments.hlo");
  ASSERT_NE(module, nullptr);
  const Literal& literal = RootLiteral(*module);
  EXPECT_EQ(literal.shape(), Shape(PrimitiveType::kF32, {3, 2, 1, 1}));
  ASSERT_EQ(literal.data().size(), 6u * 4);
  const float expected[] = {-1, 4.1f, 2, 4.1f, 5, 4.4f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(literal.Get<float>(i), expected[i]);
}

TEST(HloParserLiteral, EmptyArraysAndTuplesParse) {
  auto empty = ParseConstant("f32[2,0,4,3]", "{ { /*i0=0*/ }, { /*i0=1*/ } }");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(RootLiteral(**empty).data().empty());

  auto tuple = ParseCorpusFile("parser/TupleConstant.hlo");
  ASSERT_NE(tuple, nullptr);
  const Literal& literal = RootLiteral(*tuple);
  ASSERT_EQ(literal.tuple_elements().size(), 2u);
  EXPECT_EQ(literal.tuple_elements()[0].Get<float>(1), 2.0f);
  EXPECT_EQ(literal.tuple_elements()[1].Get<float>(1), 42.0f);
}

TEST(HloParserLiteral, ParseOnlyTypesParse) {
  auto c64 = ParseConstant("c64[2]", "{(1, 2), (-inf, nan)}");
  ASSERT_TRUE(c64.ok()) << c64.status();
  const Literal& literal = RootLiteral(**c64);
  ASSERT_EQ(literal.data().size(), 16u);
  EXPECT_EQ(literal.Get<float>(0), 1.0f);
  EXPECT_EQ(literal.Get<float>(1), 2.0f);
  EXPECT_EQ(literal.Get<float>(2), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(literal.Get<float>(3)));

  // f8e4m3fn and f8e5m2 values are stored as their codes; a finite value
  // beyond the format's range is refused.
  auto f8 = ParseConstant("f8e4m3fn[3]", "{nan, 7, -nan}");
  ASSERT_TRUE(f8.ok()) << f8.status();
  ASSERT_EQ(RootLiteral(**f8).data().size(), 3u);
  EXPECT_EQ(RootLiteral(**f8).Get<uint8_t>(0), 0x7F);
  EXPECT_EQ(RootLiteral(**f8).Get<uint8_t>(1), 0x4E);  // 1.75 * 2^2
  EXPECT_EQ(RootLiteral(**f8).Get<uint8_t>(2), 0xFF);
  EXPECT_FALSE(ParseConstant("f8e4m3fn[1]", "{500}").ok());
  EXPECT_FALSE(ParseConstant("f8e5m2[2]", "{1}").ok());
  // fnuz: one unsigned zero, NaN is 0x80; the bias is 8 (e4m3).
  auto fnuz = ParseConstant("f8e4m3fnuz[4]", "{1, -2, -0, nan}");
  ASSERT_TRUE(fnuz.ok()) << fnuz.status();
  EXPECT_EQ(RootLiteral(**fnuz).Get<uint8_t>(0), 0x40);
  EXPECT_EQ(RootLiteral(**fnuz).Get<uint8_t>(1), 0xC8);
  EXPECT_EQ(RootLiteral(**fnuz).Get<uint8_t>(2), 0x00);
  EXPECT_EQ(RootLiteral(**fnuz).Get<uint8_t>(3), 0x80);
  EXPECT_FALSE(ParseConstant("f8e4m3b11fnuz[1]", "{31}").ok());  // max 30
  // The microscaling types: f4e2m1fn (sign in bit 3) rounds within its
  // range and refuses what lies past its largest value, 6; f8e8m0fnu holds
  // powers of two and has no negative values.
  auto f4 = ParseConstant("f4e2m1fn[4]", "{1, -2, 6.4, 0.2}");
  ASSERT_TRUE(f4.ok()) << f4.status();
  EXPECT_EQ(RootLiteral(**f4).Get<uint8_t>(0), 0x2);
  EXPECT_EQ(RootLiteral(**f4).Get<uint8_t>(1), 0xC);
  EXPECT_EQ(RootLiteral(**f4).Get<uint8_t>(2), 0x7);
  EXPECT_EQ(RootLiteral(**f4).Get<uint8_t>(3), 0x0);
  EXPECT_FALSE(ParseConstant("f4e2m1fn[1]", "{7}").ok());
  EXPECT_FALSE(ParseConstant("f6e2m3fn[1]", "{-7.75}").ok());
  auto no_nan = ParseConstant("f6e3m2fn[1]", "{nan}");
  ASSERT_FALSE(no_nan.ok());
  EXPECT_NE(no_nan.status().message().find("f6e3m2fn has no infinity or NaN"),
            std::string::npos)
      << no_nan.status();
  auto e8m0 = ParseConstant("f8e8m0fnu[3]", "{1, 0.25, 3}");
  ASSERT_TRUE(e8m0.ok()) << e8m0.status();
  EXPECT_EQ(RootLiteral(**e8m0).Get<uint8_t>(0), 127);
  EXPECT_EQ(RootLiteral(**e8m0).Get<uint8_t>(1), 125);
  EXPECT_EQ(RootLiteral(**e8m0).Get<uint8_t>(2), 128);  // 3: tie, to even
  EXPECT_FALSE(ParseConstant("f8e8m0fnu[1]", "{-1}").ok());
}

TEST(HloParserLiteral, ElementCountMismatchIsAnError) {
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}",
                3, 33, "dimension 0 of constant %c has 2 elements");
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT c = f32[2,2] constant({{1, 2}, {3, 4, "
      "5}})\n}",
      3, 46, "too many elements in dimension 1");
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant(1)\n}", 3,
                28, "expected '{' to start dimension 0");
  ExpectErrorAt("HloModule m\nENTRY e {\n  ROOT c = f32[] constant({1})\n}", 3,
                27, "found '{'");
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT c = (f32[], s32[]) constant((1))\n}", 3,
      38, "which has 2 elements");
}

TEST(HloParserLiteral, ElidedConstantsAreRejectedWithHowToPrintThem) {
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT big = f32[1000] constant({...})\n}", 3,
      33, "was elided by the printer");
  auto module = ParseHloModule(
      "HloModule m\nENTRY e {\n  ROOT big = f32[1000] constant({...})\n}");
  ASSERT_FALSE(module.ok());
  const std::string message(module.status().message());
  EXPECT_NE(message.find("HloPrintOptions().set_print_large_constants(true)"),
            std::string::npos);
  EXPECT_NE(message.find("lowered.compiler_ir('hlo').as_hlo_text(True)"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Errors

TEST(HloParserErrors, FormatErrorAtPointsACaretAtTheColumn) {
  EXPECT_EQ(FormatErrorAt("first\n  second line\nthird", 2, 3, "bad"),
            "line 2, column 3: bad\n  second line\n  ^");
  EXPECT_EQ(FormatErrorAt("a\n\tb", 2, 2, "tab"),
            "line 2, column 2: tab\n\tb\n\t^");
  EXPECT_EQ(FormatErrorAt("a", 5, 1, "past the end"),
            "line 5, column 1: past the end\n\n^");
}

TEST(HloParserErrors, SyntaxErrorSaysWhatWasExpectedAndFound) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  ROOT add = f32[] add(a, a}
})",
                4, 28,
                "expected ',' or ')' after operand 2 of %add, found '}'");
  ExpectErrorAt("HloModule m\nENTRY e {\n  a = f32[] parameter(0\n}", 4, 1,
                "expected ')' after the parameter number of %a");
  ExpectErrorAt("module m", 1, 1, "expected 'HloModule'");
  ExpectErrorAt("HloModule m\nENTRY e {\n  a = f32[2 parameter(0)\n}", 3, 13,
                "expected ',' or ']' in the dimensions");
  ExpectErrorAt("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n", 4, 1,
                "expected '}' to end computation %e, found end of input");
  ExpectErrorAt("HloModule m\n", 2, 1, "the module has no computations");
  ExpectErrorAt("HloModule m\nENTRY e {\n}\n", 3, 1,
                "computation %e has no instructions");
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0), sharding={[}\n}",
      3, 43, "expected ']' to close '['");
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = pred[] "
      "compare(p, p), direction=GQ\n}",
      4, 44, "expected EQ, NE, LT, LE, GT or GE for direction=");
}

TEST(HloParserErrors, UndefinedOperandIsReportedWhereItIsUsed) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  ROOT add = f32[] add(a, %missing)
})",
                4, 27,
                "operand 2 of %add is %missing, which is not defined in "
                "computation %e");
}

TEST(HloParserErrors, UnknownComputationIsReportedWhereItIsNamed) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=%nowhere
}
)",
                5, 57, "unknown computation %nowhere in to_apply= of %r");
}

TEST(HloParserErrors, DuplicateNamesAreErrors) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  %a = f32[] negate(a)
})",
                4, 3,
                "duplicate instruction name %a in computation %e; it is "
                "already defined at line 3");
  ExpectErrorAt(R"(HloModule m
c {
  ROOT a = f32[] parameter(0)
}
%c {
  ROOT a = f32[] parameter(0)
})",
                5, 1, "duplicate computation name %c");
  ExpectErrorAt(R"(HloModule m
ENTRY a {
  ROOT a = f32[] parameter(0)
}
ENTRY b {
  ROOT b = f32[] parameter(0)
})",
                5, 1, "a second ENTRY computation %b");
}

TEST(HloParserErrors, ParameterGapNamesTheMissingNumber) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(2)
  ROOT t = (f32[], f32[]) tuple(a, b)
})",
                4, 3,
                "parameter 1 is missing: the computation %e has parameters 0 "
                "and 2");
}

TEST(HloParserErrors, DuplicateParameterNumberIsAnError) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(0)
  ROOT t = (f32[], f32[]) tuple(a, b)
})",
                4, 3, "duplicate parameter number 0 in computation %e: %a");
}

TEST(HloParserErrors, SignatureMustMatchTheParameters) {
  ExpectErrorAt(R"(HloModule m
ENTRY %e (a: f32[], b: f32[]) -> f32[] {
  ROOT a = f32[] parameter(0)
})",
                2, 7,
                "the signature of computation %e declares 2 parameters, but "
                "the body has 1");
  ExpectErrorAt(R"(HloModule m
ENTRY %e (a: f32[2]) -> f32[2] {
  ROOT a = f32[3]{0} parameter(0)
})",
                3, 8,
                "parameter 0 (%a) has shape f32[3], but the signature of %e "
                "declares f32[2]");
  // Layouts do not count.
  EXPECT_TRUE(ParseHloModule(R"(HloModule m
ENTRY %e (a: f32[2,3]) -> f32[2,3] {
  ROOT a = f32[2,3]{0,1} parameter(0)
})")
                  .ok());
}

TEST(HloParserErrors, UnterminatedStringsAndCommentsAreReportedWhereTheyStart) {
  ExpectErrorAt(
      "HloModule m\nENTRY e {\n  ROOT c = f32[] custom-call(), "
      "custom_call_target=\"abc\n}\n",
      3, 52, "unterminated string");
  ExpectErrorAt("HloModule m\n/* a comment\nENTRY e {\n", 2, 1,
                "unterminated comment");
}

TEST(HloParserErrors, DeepNestingIsAnErrorNotACrash) {
  const std::string shape =
      std::string(5000, '(') + "f32[]" + std::string(5000, ')');
  ExpectErrorAt(absl::StrCat("HloModule m\nENTRY e {\n  ROOT p = ", shape,
                             " parameter(0)\n}"),
                3, 523, "nesting is deeper than 512 levels");
  std::string nested = "f32[] parameter(0)";
  for (int i = 0; i < 2000; ++i) nested = absl::StrCat("negate(", nested, ")");
  auto module = ParseHloModule(
      absl::StrCat("HloModule m\nENTRY e {\n  ROOT r = f32[] ", nested, "\n}"));
  ASSERT_FALSE(module.ok());
  EXPECT_NE(module.status().message().find("nesting is deeper"),
            absl::string_view::npos);
  // Deep but legal nesting in a raw attribute value is fine.
  auto raw = ParseHloModule(
      absl::StrCat("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), x=",
                   std::string(2000, '{'), std::string(2000, '}'), "\n}"));
  EXPECT_TRUE(raw.ok()) << raw.status();
}

TEST(HloParserErrors, ShapelessInstructionsThatCannotBeInferredAreErrors) {
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = convert(p)
})",
                4, 8, "%c (convert) has no shape");
}

TEST(OpcodeTable, EveryOpcodeRoundTripsItsNameAndHasOneFamily) {
  EXPECT_GT(AllOpcodes().size(), 100u);
  std::set<std::string> names;
  for (Opcode opcode : AllOpcodes()) {
    const std::string name(OpcodeName(opcode));
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    EXPECT_EQ(OpcodeFromName(name), opcode) << name;
  }
  EXPECT_EQ(OpcodeFromName("no-such-op"), Opcode::kOther);
  EXPECT_EQ(FamilyOf(Opcode::kOther), OpFamily::kStructure);
  EXPECT_EQ(FamilyOf(Opcode::kExp), OpFamily::kUnary);
  EXPECT_EQ(FamilyOf(Opcode::kAtan2), OpFamily::kBinary);
  EXPECT_EQ(FamilyOf(Opcode::kConvert), OpFamily::kElementwise);
  EXPECT_EQ(FamilyOf(Opcode::kGather), OpFamily::kDataMovement);
  EXPECT_EQ(FamilyOf(Opcode::kSort), OpFamily::kCompute);
  EXPECT_EQ(FamilyOf(Opcode::kAllGatherDone), OpFamily::kCollective);
  EXPECT_EQ(FamilyOf(Opcode::kWhile), OpFamily::kStructure);
}

// The table's families decide which ops the printer may leave the shape of
// out: every unary and binary op takes its operand's, and no op of the
// other families does except the four the parser names.
TEST(OpcodeTable, TheShapeOfEveryUnaryAndBinaryOpMayBeLeftOut) {
  for (Opcode opcode : AllOpcodes()) {
    const OpFamily family = FamilyOf(opcode);
    const std::string name(OpcodeName(opcode));
    std::string call;
    if (family == OpFamily::kUnary) {
      call = opcode == Opcode::kReducePrecision
                 ? "reduce-precision(p), exponent_bits=5, mantissa_bits=10"
                 : name + "(p)";
    } else if (family == OpFamily::kBinary) {
      call = name + "(p, p)";
    } else {
      continue;
    }
    SCOPED_TRACE(name);
    auto module = ParseHloModule(absl::StrCat(
        "HloModule m\nENTRY e {\n  p = s32[2,3] parameter(0)\n  ROOT r = ",
        call, "\n}"));
    ASSERT_TRUE(module.ok()) << module.status();
    EXPECT_EQ((*module)->entry()->root()->shape().ToString(), "s32[2,3]");
  }
  ExpectErrorAt(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = bitcast-convert(p)
})",
                4, 8, "%c (bitcast-convert) has no shape");
}

TEST(HloParserErrors, TruncatedOrCorruptedTextNeverCrashes) {
  const std::vector<std::string> files = {
      "parser/AxpyParam.hlo",
      "parser/OriginalValueRecoveryTable.hlo",
      "parser/ParamReplication.hlo",
      "programs/14_select_and_scatter.hlo",
      "parser/AllGatherWithSubgroupsIotaList.hlo",
      "parser/TupleConstant.hlo",
      "parser/CustomCallWithLiteralTuple.hlo",
      "parser/SimpleNesting.hlo"};
  std::mt19937 random(42);
  for (const std::string& name : files) {
    const std::string text = ReadFile(CorpusDir() / name);
    for (size_t cut = 0; cut < text.size(); ++cut) {
      (void)ParseHloModule(absl::string_view(text).substr(0, cut));
    }
    for (int trial = 0; trial < 300; ++trial) {
      std::string corrupted = text;
      const int edits = 1 + static_cast<int>(random() % 4);
      for (int i = 0; i < edits; ++i) {
        const size_t at = random() % corrupted.size();
        static constexpr char kChars[] = "{}[](),=:%-_x0123456789.\"/* \n<?";
        corrupted[at] = kChars[random() % (sizeof(kChars) - 1)];
      }
      (void)ParseHloModule(corrupted);
    }
  }
}

}  // namespace
}  // namespace pjrt::hlo
