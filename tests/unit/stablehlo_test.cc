// The StableHLO frontend: format detection, both syntaxes, regions and the
// values they capture, literals, CHLO decompositions, module attributes, and
// errors that point into the StableHLO text.
#include "hlo/stablehlo.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/literal.h"
#include "hlo/mlir_text.h"
#include "tests/unit/hlo_run_test.h"

namespace pjrt::runtime::testing {
namespace {

using hlo::PrimitiveType;
using hlo::ProgramFormat;

TEST(StableHloFormatTest, DetectsTheFormatFromTheFirstWord) {
  EXPECT_EQ(hlo::DetectProgramFormat("module @m {\n}"),
            ProgramFormat::kStableHlo);
  EXPECT_EQ(hlo::DetectProgramFormat("// c\n  func.func @main() {"),
            ProgramFormat::kStableHlo);
  EXPECT_EQ(hlo::DetectProgramFormat("#loc = loc(unknown)\nmodule {}"),
            ProgramFormat::kStableHlo);
  EXPECT_EQ(hlo::DetectProgramFormat("HloModule m\nENTRY e {}"),
            ProgramFormat::kHlo);
  EXPECT_EQ(hlo::DetectProgramFormat("module_x"), ProgramFormat::kHlo);
  EXPECT_EQ(hlo::ProgramFormatFromName("mlir"), ProgramFormat::kStableHlo);
  EXPECT_EQ(hlo::ProgramFormatFromName(""), ProgramFormat::kAuto);
  EXPECT_FALSE(hlo::ProgramFormatFromName("onnx").has_value());
}

class StableHloRunTest : public HloRunTest {
 protected:
  // Runs `text` with f32 arguments; returns every result as floats.
  std::vector<std::vector<float>> RunF32(
      const std::string& text, const std::vector<std::vector<float>>& args) {
    std::vector<std::shared_ptr<Buffer>> buffers;
    for (const auto& a : args) {
      buffers.push_back(
          Put<float>(PrimitiveType::kF32, {static_cast<int64_t>(a.size())}, a));
    }
    auto out = Run(text, buffers);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::vector<float>> values;
    if (!out.ok()) return values;
    for (auto& b : *out) values.push_back(Read<float>(*b));
    return values;
  }
};

constexpr char kPretty[] = R"(module @jit_f {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %3 = stablehlo.compare  GT, %0, %2,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %4 = stablehlo.select %3, %0, %2 : tensor<4xi1>, tensor<4xf32>
    return %4, %1 : tensor<4xf32>, tensor<f32>
  }
}
)";

constexpr char kGeneric[] = R"("builtin.module"() ({
})";

constexpr char kGenericOps[] =
    R"(func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %cst = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %1 = "stablehlo.reduce"(%0, %cst) <{dimensions = array<i64: 0>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%s) : (tensor<f32>) -> ()
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %2 = "stablehlo.broadcast_in_dim"(%cst) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4xf32>
  %3 = "stablehlo.compare"(%0, %2) <{comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %4 = "stablehlo.select"(%3, %0, %2) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%4, %1) : (tensor<4xf32>, tensor<f32>) -> ()
}
)";

TEST_F(StableHloRunTest, PrettyAndGenericSyntaxRunAlike) {
  const std::vector<std::vector<float>> args = {{1, -5, 3, 0.5f},
                                                {2, 1, -4, 0.25f}};
  auto pretty = RunF32(kPretty, args);
  auto generic = RunF32(kGenericOps, args);
  ASSERT_EQ(pretty.size(), 2);
  EXPECT_EQ(pretty[0], std::vector<float>({3, 0, 0, 0.75f}));
  EXPECT_EQ(pretty[1], std::vector<float>({-1.25f}));
  EXPECT_EQ(generic, pretty);
  // A generic builtin.module wrapper is named as what it is.
  auto wrapped =
      hlo::ParseAndVerifyProgram(kGeneric, ProgramFormat::kStableHlo);
  EXPECT_EQ(wrapped.status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(StableHloRunTest, LoopsAndBranchesCaptureOuterValues) {
  // sum += step while i < 5; step and the bound come from outside the
  // regions. Then case picks a branch that uses an outer value too.
  const std::string program =
      R"(func.func @main(%arg0: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %step = stablehlo.constant dense<2.500000e-01> : tensor<1xf32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %five = stablehlo.constant dense<5> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %sum = %arg0) : tensor<i32>, tensor<1xf32>
   cond {
    %c = stablehlo.compare  LT, %i, %five : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %n = stablehlo.add %i, %one : tensor<i32>
    %s = stablehlo.add %sum, %step : tensor<1xf32>
    stablehlo.return %n, %s : tensor<i32>, tensor<1xf32>
  }
  %b = "stablehlo.case"(%one) ({
    stablehlo.return %arg0 : tensor<1xf32>
  }, {
    %t = stablehlo.multiply %r#1, %step : tensor<1xf32>
    stablehlo.return %t : tensor<1xf32>
  }) : (tensor<i32>) -> tensor<1xf32>
  return %r#1, %b : tensor<1xf32>, tensor<1xf32>
}
)";
  auto out = RunF32(program, {{10}});
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out[0], std::vector<float>({11.25f}));
  EXPECT_EQ(out[1], std::vector<float>({11.25f * 0.25f}));
}

TEST_F(StableHloRunTest, LiteralsOfEveryForm) {
  const std::string program =
      R"(func.func @main() -> (tensor<4xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<2xbf16>, tensor<2xi8>, tensor<2xcomplex<f32>>, tensor<2xi1>) {
  %hex = stablehlo.constant dense<"0x0000803F000000400000404000008040"> : tensor<4xf32>
  %splat = stablehlo.constant dense<1.500000e+00> : tensor<2x2xf32>
  %special = stablehlo.constant dense<[0x7F800000, 0xFF800000, -0.000000e+00]> : tensor<3xf32>
  %bf = stablehlo.constant dense<[1.000000e+00, -2.500000e-01]> : tensor<2xbf16>
  %i8 = stablehlo.constant dense<[-128, 127]> : tensor<2xi8>
  %c = stablehlo.constant dense<[(1.000000e+00,-2.000000e+00), (0.5, 4)]> : tensor<2xcomplex<f32>>
  %p = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  return %hex, %splat, %special, %bf, %i8, %c, %p : tensor<4xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<2xbf16>, tensor<2xi8>, tensor<2xcomplex<f32>>, tensor<2xi1>
}
)";
  auto out = Run(program, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 7);
  EXPECT_EQ(Read<float>(*(*out)[0]), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(Read<float>(*(*out)[1]),
            std::vector<float>({1.5f, 1.5f, 1.5f, 1.5f}));
  auto special = Read<float>(*(*out)[2]);
  EXPECT_TRUE(std::isinf(special[0]) && special[0] > 0);
  EXPECT_TRUE(std::isinf(special[1]) && special[1] < 0);
  EXPECT_TRUE(special[2] == 0 && std::signbit(special[2]));
  auto bf = Read<uint16_t>(*(*out)[3]);
  EXPECT_EQ(hlo::Bfloat16ToFloat(bf[0]), 1.0f);
  EXPECT_EQ(hlo::Bfloat16ToFloat(bf[1]), -0.25f);
  EXPECT_EQ(Read<int8_t>(*(*out)[4]), std::vector<int8_t>({-128, 127}));
  EXPECT_EQ(Read<float>(*(*out)[5]), std::vector<float>({1, -2, 0.5f, 4}));
  EXPECT_EQ(Read<uint8_t>(*(*out)[6]), std::vector<uint8_t>({1, 0}));
}

TEST_F(StableHloRunTest, ChloOpsFollowTheirDecompositions) {
  const std::vector<float> x = {-0.75f, -0.2f, 0.1f, 0.6f};
  std::string program = "func.func @main(%x: tensor<4xf32>) -> (";
  const std::vector<std::string> ops = {"sinh",  "cosh",    "atan",
                                        "asin",  "acos",    "asinh",
                                        "atanh", "erf_inv", "square"};
  for (size_t i = 0; i < ops.size(); ++i) {
    absl::StrAppend(&program, i ? ", " : "", "tensor<4xf32>");
  }
  absl::StrAppend(&program, ") {\n");
  std::string names, types;
  for (size_t i = 0; i < ops.size(); ++i) {
    absl::StrAppend(&program, "  %", i, " = chlo.", ops[i],
                    " %x : tensor<4xf32> -> tensor<4xf32>\n");
    absl::StrAppend(&names, i ? ", " : "", "%", i);
    absl::StrAppend(&types, i ? ", " : "", "tensor<4xf32>");
  }
  absl::StrAppend(&program, "  return ", names, " : ", types, "\n}\n");
  auto out = RunF32(program, {x});
  ASSERT_EQ(out.size(), ops.size());
  // erfinv(erf(v)) == v: the inverse checked through std::erf.
  const auto erfinv_check = [](float y) {
    return static_cast<float>(std::erf(y));
  };
  for (size_t k = 0; k < x.size(); ++k) {
    const double v = x[k];
    const double expected[] = {
        std::sinh(v), std::cosh(v),  std::atan(v),  std::asin(v),
        std::acos(v), std::asinh(v), std::atanh(v), 0,
        v * v};
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i] == "erf_inv") {
        EXPECT_NEAR(erfinv_check(out[i][k]), v, 2e-6) << "erf_inv(" << v << ")";
        continue;
      }
      EXPECT_NEAR(out[i][k], expected[i], 2e-6 * (1 + std::abs(expected[i])))
          << ops[i] << "(" << v << ")";
    }
  }
}

// !quant.uniform types read into the storage type's shape and their
// Quantization: per tensor with the storage type's full range and a zero
// point of 0 by default, per axis with a range of its own.
TEST(StableHloModuleTest, QuantizedTypesKeepTheirScalesAndZeroPoints) {
  const std::string text = R"(
func.func @main(%a: tensor<2x3x!quant.uniform<u8:f32, 2.5e-1>>) -> tensor<2x3xf32> {
  %q = "stablehlo.uniform_quantize"(%a) : (tensor<2x3x!quant.uniform<u8:f32, 2.5e-1>>)
      -> tensor<2x3x!quant.uniform<i8<-127:127>:bf16:1, {0.5:-3, 2.0, 1e-3:127}>>
  %d = "stablehlo.uniform_dequantize"(%q)
      : (tensor<2x3x!quant.uniform<i8<-127:127>:bf16:1, {0.5:-3, 2.0, 1e-3:127}>>)
      -> tensor<2x3xbf16>
  %f = stablehlo.convert %d : (tensor<2x3xbf16>) -> tensor<2x3xf32>
  return %f : tensor<2x3xf32>
})";
  absl::StatusOr<hlo::mlir::Module> module = hlo::mlir::ParseMlirModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  const hlo::mlir::Function& f = module->functions[0];
  ASSERT_TRUE(f.arguments[0].quantization.has_value());
  const hlo::mlir::Quantization& a = *f.arguments[0].quantization;
  EXPECT_EQ(f.arguments[0].type.ToString(), "u8[2,3]");
  EXPECT_EQ(a.storage, PrimitiveType::kU8);
  EXPECT_EQ(a.expressed, PrimitiveType::kF32);
  EXPECT_EQ(a.storage_min, 0);
  EXPECT_EQ(a.storage_max, 255);
  EXPECT_EQ(a.dimension, -1);
  EXPECT_EQ(a.scales, (std::vector<double>{0.25}));
  EXPECT_EQ(a.zero_points, (std::vector<int64_t>{0}));
  const hlo::mlir::Operation& quantize = f.body.operations[0];
  ASSERT_EQ(quantize.result_quantizations.size(), 1u);
  const hlo::mlir::Quantization& q = *quantize.result_quantizations[0];
  EXPECT_EQ(quantize.result_types[0].ToString(), "s8[2,3]");
  EXPECT_EQ(q.expressed, PrimitiveType::kBf16);
  EXPECT_EQ(q.storage_min, -127);
  EXPECT_EQ(q.storage_max, 127);
  EXPECT_EQ(q.dimension, 1);
  EXPECT_EQ(q.scales, (std::vector<double>{0.5, 2.0, 1e-3}));
  EXPECT_EQ(q.zero_points, (std::vector<int64_t>{-3, 0, 127}));
  // The operand's type was not quantized-free: its quantization is kept
  // per operand; the convert has none.
  ASSERT_EQ(quantize.operand_quantizations.size(), 1u);
  EXPECT_TRUE(quantize.operand_quantizations[0].has_value());
  EXPECT_TRUE(f.body.operations[2].operand_quantizations.empty());
  EXPECT_TRUE(f.body.operations[2].result_quantizations.empty());
}

TEST(StableHloModuleTest, HonoursAliasingReplicasAndPartitions) {
  auto module = hlo::ParseAndVerifyProgram(
      R"(module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 1 : i32, mhlo.sharding = "{replicated}"}, %arg1: tensor<4xf32>) -> (tensor<4xf32> {jax.result_info = "[0]"}, tensor<4xf32> {jax.result_info = "[1]"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
    return %1, %arg1 : tensor<4xf32>, tensor<4xf32>
  }
}
)",
      ProgramFormat::kAuto);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->name(), "jit_step");
  EXPECT_EQ((*module)->config().replica_count, 2);
  EXPECT_EQ((*module)->config().num_partitions, 1);
  ASSERT_EQ((*module)->config().input_output_aliases.size(), 1);
  const auto& alias = (*module)->config().input_output_aliases[0];
  EXPECT_EQ(alias.parameter_number, 0);
  EXPECT_EQ(alias.output_index, std::vector<int64_t>({1}));
}

// The error for `text`, which must not compile.
absl::Status ErrorOf(const std::string& text) {
  auto module = hlo::ParseAndVerifyProgram(text, ProgramFormat::kStableHlo);
  EXPECT_FALSE(module.ok());
  return module.ok() ? absl::OkStatus() : module.status();
}

TEST(StableHloErrorTest, UnknownOpsAndAttributesAreNamedWithLineAndColumn) {
  absl::Status op = ErrorOf(
      "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
      "  %0 = stablehlo.frobnicate %x : tensor<2xf32>\n"
      "  return %0 : tensor<2xf32>\n"
      "}\n");
  EXPECT_EQ(op.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(
      absl::StrContains(op.message(), "line 2, column 8: stablehlo.frobnicate"))
      << op;
  EXPECT_TRUE(absl::StrContains(op.message(), "\n       ^")) << op;

  absl::Status attribute = ErrorOf(
      "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
      "  %0 = stablehlo.negate %x {shiny = 3 : i32} : tensor<2xf32>\n"
      "  return %0 : tensor<2xf32>\n"
      "}\n");
  EXPECT_EQ(attribute.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(attribute.message(), "attribute shiny"))
      << attribute;
  EXPECT_TRUE(absl::StrContains(attribute.message(), "line 2")) << attribute;

  absl::Status undefined = ErrorOf(
      "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
      "  return %y : tensor<2xf32>\n"
      "}\n");
  EXPECT_EQ(undefined.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(undefined.message(), "undefined value %y"))
      << undefined;

  absl::Status dynamic = ErrorOf(
      "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
      "  return %x : tensor<?xf32>\n"
      "}\n");
  EXPECT_EQ(dynamic.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(dynamic.message(), "dynamic dimensions"))
      << dynamic;
}

TEST(StableHloErrorTest, VerifierErrorsPointAtTheOpAndItsSourceLocation) {
  // The declared result type is wrong: the verifier says so at the op's line
  // and names the Python line that loc(...) gives.
  absl::Status status = ErrorOf(
      "module @m {\n"
      "  func.func @main(%x: tensor<2xf32>) -> tensor<3xf32> {\n"
      "    %0 = stablehlo.negate %x : (tensor<2xf32>) -> tensor<3xf32> "
      "loc(#loc3)\n"
      "    return %0 : tensor<3xf32>\n"
      "  }\n"
      "}\n"
      "#loc1 = loc(\"model.py\":12:3)\n"
      "#loc2 = loc(\"jit(f)/neg\"(#loc1))\n"
      "#loc3 = loc(callsite(#loc2 at \"outer.py\":40:1))\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "line 3, column 10"))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "(at model.py:12:3)"))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "stablehlo.negate %x"))
      << status;
}

TEST(StableHloErrorTest, NestingIsCappedWithoutRecursingPastTheLimit) {
  std::string deep =
      "func.func @main() -> tensor<f32> {\n  %0 = stablehlo.constant {a = ";
  for (int i = 0; i < 100000; ++i) deep += "[";
  deep += "\n";
  absl::Status status = ErrorOf(deep);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "nesting deeper than"))
      << status;

  std::string types = "func.func @main(%x: ";
  for (int i = 0; i < 100000; ++i) types += "tuple<";
  status = ErrorOf(types);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(StableHloErrorTest, SizesFromTheTextAreCheckedBeforeAnythingIsAllocated) {
  // A splat attribute of 2^40 values.
  absl::Status splat = ErrorOf(
      "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %0 = \"stablehlo.transpose\"(%x) {permutation = dense<0> : "
      "tensor<1099511627776xi64>} : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %0 : tensor<4xf32>\n"
      "}\n");
  EXPECT_EQ(splat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(splat.message(), "at most")) << splat;
  // A constant with no elements but a huge dimension is a broadcast of a
  // scalar, not 2^40 braces.
  auto empty = hlo::TranslateStableHlo(
      "func.func @main() -> tensor<1099511627776x0xf32> {\n"
      "  %0 = stablehlo.constant dense<> : tensor<1099511627776x0xf32>\n"
      "  return %0 : tensor<1099511627776x0xf32>\n"
      "}\n");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_LT(empty->hlo_text.size(), 1000);
  // A shape past the limits is refused where it is written.
  absl::Status huge = ErrorOf(
      "func.func @main(%x: tensor<72057594037927937xf32>) -> tensor<f32> {\n");
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
}

TEST(StableHloErrorTest, ResultCountsThatDisagreeAreErrorsNotCrashes) {
  for (const char* text : {
           // A loop of one variable said to define three results.
           "func.func @main(%x: tensor<i32>) -> tensor<i32> {\n"
           "  %r:3 = stablehlo.while(%a = %x) : tensor<i32>\n"
           "   cond {\n"
           "    %c = stablehlo.compare LT, %a, %a : (tensor<i32>, "
           "tensor<i32>) -> tensor<i1>\n"
           "    stablehlo.return %c : tensor<i1>\n"
           "  } do {\n"
           "    stablehlo.return %a : tensor<i32>\n"
           "  }\n"
           "  return %x : tensor<i32>\n"
           "}\n",
           // Three results, two types.
           "func.func @main(%x: tensor<i32>) -> tensor<i32> {\n"
           "  %r:3 = \"stablehlo.custom_call\"(%x) {call_target_name = "
           "\"Sharding\"} : (tensor<i32>) -> (tensor<i32>, tensor<i32>)\n"
           "  return %x : tensor<i32>\n"
           "}\n",
           // A reshape without operands.
           "func.func @main(%x: tensor<i32>) -> tensor<i32> {\n"
           "  %r = \"stablehlo.dynamic_reshape\"() : () -> tensor<i32>\n"
           "  return %x : tensor<i32>\n"
           "}\n",
           // A sort said to define more results than it has operands.
           "func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> {\n"
           "  %r:2 = \"stablehlo.sort\"(%x) ({\n"
           "  ^bb0(%p: tensor<i32>, %q: tensor<i32>):\n"
           "    %c = stablehlo.compare LT, %p, %q : (tensor<i32>, "
           "tensor<i32>) -> tensor<i1>\n"
           "    stablehlo.return %c : tensor<i1>\n"
           "  }) : (tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>)\n"
           "  return %x : tensor<2xi32>\n"
           "}\n",
       }) {
    absl::Status status = ErrorOf(text);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "line 2")) << status;
  }
}

TEST(StableHloErrorTest, LocationAliasesThatNameEachOtherResolveOnce) {
  // Forty aliases, each naming the next twice and the last naming the
  // first: a naive walk visits 2^40 of them.
  std::string text =
      "func.func @main(%x: tensor<2xf32>) -> tensor<3xf32> {\n"
      "  %0 = stablehlo.negate %x : (tensor<2xf32>) -> tensor<3xf32> "
      "loc(#l0)\n"
      "  return %0 : tensor<3xf32>\n"
      "}\n";
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&text, "#l", i, " = loc(fused[#l", (i + 1) % 40, ", #l",
                    (i + 1) % 40, "])\n");
  }
  absl::Status status = ErrorOf(text);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "line 2")) << status;
}

TEST(StableHloErrorTest, RecursionAndMissingFunctionsAreRefused) {
  absl::Status recursion = ErrorOf(
      "func.func private @f(%x: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = func.call @f(%x) : (tensor<f32>) -> tensor<f32>\n"
      "  return %0 : tensor<f32>\n"
      "}\n"
      "func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = func.call @f(%x) : (tensor<f32>) -> tensor<f32>\n"
      "  return %0 : tensor<f32>\n"
      "}\n");
  EXPECT_EQ(recursion.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(recursion.message(), "@f calls itself"))
      << recursion;

  absl::Status missing = ErrorOf(
      "func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = func.call @nowhere(%x) : (tensor<f32>) -> tensor<f32>\n"
      "  return %0 : tensor<f32>\n"
      "}\n");
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(missing.message(), "@nowhere")) << missing;
}

}  // namespace
}  // namespace pjrt::runtime::testing
