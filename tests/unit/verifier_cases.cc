#include "tests/unit/verifier_cases.h"

#include "hlo/verifier.h"
#include "tests/unit/hlo_test_programs.h"

namespace pjrt::hlo::verifier_cases {
namespace {

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kUnimplemented = absl::StatusCode::kUnimplemented;

using ::pjrt::testing::CallChain;
using ::pjrt::testing::CallTree;

}  // namespace

const std::vector<Case>& Cases() {
  static const auto* const cases = new std::vector<Case>{
      // --- the call graph and cycles ---
      {"ComputationCallingItself", R"(
HloModule m
f {
  p = f32[] parameter(0)
  ROOT r = f32[] call(p), to_apply=f
}
ENTRY e {
  p = f32[] parameter(0)
  ROOT r = f32[] call(p), to_apply=f
})",
       kInvalid, "computation f calls itself: f -> f"},
      {"CallsNestedTooDeep", CallChain(kMaxCallDepth + 1), kInvalid,
       "%r: calls nest more than 64 computations deep (from the entry down "
       "to c64)"},
      {"TooManyInstructionsOnceInlined", CallTree(20), kInvalid,
       "holds more than 1048576 instructions once the computations it calls "
       "are inlined; pjrtd compiles at most 1048576"},
      {"InstructionDependingOnItself", R"(
HloModule m
ENTRY e {
  a = f32[] negate(b)
  ROOT b = f32[] negate(a)
})",
       kInvalid, "%a: depends on itself: %a uses %b uses %a"},

      // --- ops, element types and shapes every instruction must have ---
      {"UnknownOp", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] frobnicate(p)
})",
       kUnimplemented, "%r: op 'frobnicate' is not supported by pjrtd"},
      // The message shows f32[<=4] as "f32[4]", so only the fixed text is
      // asserted.
      {"DynamicDimension", R"(
HloModule m
ENTRY e {
  ROOT p = f32[<=4] parameter(0)
})",
       kUnimplemented,
       " has dynamic dimensions (<=N or ?), which pjrtd does not support"},
      {"UnsupportedElementType", R"(
HloModule m
ENTRY e {
  ROOT p = opaque[] parameter(0)
})",
       kUnimplemented,
       "%p: element type opaque is not supported by pjrtd (supported: pred, "
       "s2, s4, s8, s16, s32, s64, u2, u4, u8, u16, u32, u64, f8e4m3fn, "
       "f8e5m2, f8e4m3, f8e3m4, f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz, "
       "f8e8m0fnu, f6e2m3fn, f6e3m2fn, f4e2m1fn, f16, bf16, f32, f64, c64, "
       "c128)"},
      {"WrongOperandCount", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p, p)
})",
       kInvalid, "%n: negate takes 1 operand(s), got 2"},
      {"DeclaredShapeDiffersFromInferred", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT n = f32[3] negate(p)
})",
       kInvalid,
       "%n: declared shape f32[3] does not match the shape f32[2] that negate "
       "computes from its operands (f32[2])"},
      {"TupleOperandWhereAnArrayIsNeeded", R"(
HloModule m
ENTRY e {
  p = (f32[2]) parameter(0)
  ROOT n = f32[2] negate(p)
})",
       kInvalid, "%n: operand 0 (%p) is (f32[2]); negate needs an array"},
      {"DimensionOutOfRange", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] reverse(p), dimensions={1}
})",
       kInvalid, "%r: dimension 1 is out of range for rank 1"},
      {"DimensionListedTwice", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] reverse(p), dimensions={0,0}
})",
       kInvalid, "%r: dimension 0 is listed twice"},

      // --- elementwise ---
      {"ElementwiseOperandsOfDifferentShapes", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  q = f32[3] parameter(1)
  ROOT r = f32[2] add(p, q)
})",
       kInvalid,
       "%r: operands must have the same shape; operand 0 is f32[2] but "
       "operand 1 is f32[3]"},
      {"ElementwiseOfTheWrongType", R"(
HloModule m
ENTRY e {
  p = pred[2] parameter(0)
  ROOT r = pred[2] add(p, p)
})",
       kInvalid, "%r: add needs numeric operands, not pred"},
      {"AbsOfPred", R"(
HloModule m
ENTRY e {
  x = pred[2] parameter(0)
  ROOT a = pred[2] abs(x)
})",
       kInvalid, "%a: abs needs numeric operands, not pred"},
      {"RealOfIntegers", R"(
HloModule m
ENTRY e {
  x = s32[2] parameter(0)
  ROOT r = s32[2] real(x)
})",
       kInvalid, "%r: real needs floating-point or complex operands, not s32"},
      {"ComplexOfIntegers", R"(
HloModule m
ENTRY e {
  x = s32[2] parameter(0)
  ROOT c = c64[2] complex(x, x)
})",
       kInvalid, "%c: complex needs f32 or f64 operands, not s32"},
      {"ReducePrecisionWithoutExponentBits", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT r = f32[2] reduce-precision(x), exponent_bits=0, mantissa_bits=3
})",
       kInvalid,
       "%r: exponent_bits=0 and mantissa_bits=3 are invalid (need >= 1 and "
       ">= 0, and 32-bit integers)"},
      {"IsFiniteOfIntegers", R"(
HloModule m
ENTRY e {
  x = s32[2] parameter(0)
  ROOT r = pred[2] is-finite(x)
})",
       kInvalid, "%r: is-finite needs a floating-point operand, not s32[2]"},
      {"SelectOnANonPredicate", R"(
HloModule m
ENTRY e {
  p = s32[2] parameter(0)
  x = f32[2] parameter(1)
  ROOT s = f32[2] select(p, x, x)
})",
       kInvalid,
       "%s: the predicate must be pred with the dimensions of the other "
       "operands (or a scalar), got s32[2]"},
      {"SelectBetweenDifferentShapes", R"(
HloModule m
ENTRY e {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  y = f32[3] parameter(2)
  ROOT s = f32[2] select(p, x, y)
})",
       kInvalid,
       "%s: on_true (f32[2]) and on_false (f32[3]) must have the "
       "same shape"},
      {"ClampWithABoundOfAnotherType", R"(
HloModule m
ENTRY e {
  lo = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] clamp(lo, x, x)
})",
       kInvalid,
       "%c: bound s32[] must be a scalar or have the shape of f32[2]"},
      {"ClampOfPred", R"(
HloModule m
ENTRY e {
  x = pred[2] parameter(0)
  ROOT c = pred[2] clamp(x, x, x)
})",
       kInvalid, "%c: clamp needs real numeric operands, not pred"},
      {"CompareOfDifferentShapes", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[3] parameter(1)
  ROOT c = pred[2] compare(x, y), direction=LT
})",
       kInvalid,
       "%c: operands must have the same shape; got f32[2] and f32[3]"},
      {"CompareWithoutDirection", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = pred[2] compare(x, x)
})",
       kInvalid, "%c: compare needs direction=EQ|NE|LT|LE|GT|GE"},
      {"CompareComplexForOrder", R"(
HloModule m
ENTRY e {
  x = c64[2] parameter(0)
  ROOT c = pred[2] compare(x, x), direction=LT
})",
       kInvalid,
       "%c: c64 operands compare with EQ or NE only, not direction=LT"},
      {"CompareIntegersInTotalOrder", R"(
HloModule m
ENTRY e {
  x = s32[2] parameter(0)
  ROOT c = pred[2] compare(x, x), direction=LT, type=TOTALORDER
})",
       kInvalid, "%c: type=TOTALORDER needs floating-point operands, not s32"},

      // --- constants, iota, conversions, layout changes ---
      {"IotaOfAScalar", R"(
HloModule m
ENTRY e {
  ROOT i = s32[] iota(), iota_dimension=0
})",
       kInvalid, "%i: iota needs an array shape of rank >= 1"},
      {"IotaDimensionOutOfRange", R"(
HloModule m
ENTRY e {
  ROOT i = s32[4] iota(), iota_dimension=1
})",
       kInvalid, "%i: iota_dimension 1 is out of range for s32[4]"},
      {"IotaOfPred", R"(
HloModule m
ENTRY e {
  ROOT i = pred[4] iota(), iota_dimension=0
})",
       kInvalid, "%i: iota of pred is not defined"},
      {"BroadcastChangingTheType", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT b = s32[2,3] broadcast(p), dimensions={0}
})",
       kInvalid, "%b: broadcast of f32[2] cannot produce s32[2,3]"},
      {"BroadcastWithTooFewDimensions", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT b = f32[2,3] broadcast(p), dimensions={}
})",
       kInvalid,
       "%b: dimensions={} has 0 entries but the operand f32[2] has rank 1"},
      {"BroadcastChangingASize", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT b = f32[2,3] broadcast(p), dimensions={1}
})",
       kInvalid,
       "%b: operand dimension 0 (size 2) maps to output dimension 1 of size "
       "3; sizes must match exactly"},
      {"ReshapeChangingTheElementCount", R"(
HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT r = f32[5] reshape(p)
})",
       kInvalid, "%r: reshape of f32[2,3] (6 elements) cannot produce f32[5]"},
      {"TransposeWithTooFewDimensions", R"(
HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(p), dimensions={0}
})",
       kInvalid,
       "%t: dimensions={0} is not a permutation of the 2 dimensions of "
       "f32[2,3]"},
      {"ConvertChangingDimensions", R"(
HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT c = s32[3,2] convert(p)
})",
       kInvalid, "%c: convert of f32[2,3] cannot produce s32[3,2]"},
      {"BitcastConvertOfPredAcrossWidths", R"(
HloModule m
ENTRY e {
  p = pred[8] parameter(0)
  ROOT c = s64[] bitcast-convert(p)
})",
       kUnimplemented,
       "%c: bitcast-convert of pred to s64 is not supported (pred only "
       "converts to and from a type of its own width)"},
      {"BitcastConvertOfASixBitFloatToAByte", R"(
HloModule m
ENTRY e {
  p = f6e2m3fn[8] parameter(0)
  ROOT c = u8[8] bitcast-convert(p)
})",
       kInvalid,
       "%c: bitcast-convert of f6e2m3fn to u8: a 6-bit float bitcasts only "
       "to another 6-bit float (f6e2m3fn, f6e3m2fn)"},
      {"BitcastConvertToAWiderTypeWithoutTheRatio", R"(
HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  ROOT c = s64[3] bitcast-convert(p)
})",
       kInvalid,
       "%c: bitcast-convert of f32[3] to the wider s64 needs a last dimension "
       "of 2 (the width ratio)"},
      {"BitcastConvertToANarrowerTypeWithoutTheRatio", R"(
HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  ROOT c = u8[3] bitcast-convert(p)
})",
       kInvalid, "%c: bitcast-convert of f32[3] gives u8[3,4], not u8[3]"},
      {"BitcastConvertChangingDimensions", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = s32[3] bitcast-convert(p)
})",
       kInvalid, "%c: bitcast-convert of f32[2] gives s32[2], not s32[3]"},

      // --- custom calls, tuples, calls ---
      {"UnknownCustomCallTarget", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="foo"
})",
       kUnimplemented,
       "%c: custom-call target \"foo\" is not supported; pjrtd runs TopK, the "
       "LAPACK and cuSOLVER calls JAX's jnp.linalg lowers to "
       "(docs/stablehlo.md), and Sharding, SPMDFullToShardShape, "
       "SPMDShardToFullShape, "
       "annotate_device_placement, MoveToHost and MoveToDevice (as "
       "identity)"},
      {"IdentityCustomCallChangingTheShape", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="Sharding"
})",
       kUnimplemented,
       "%c: custom-call Sharding changes the shape from f32[2] to f32[4]; "
       "partitioned programs are not supported here"},
      {"GetTupleElementOfAnArray", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT g = f32[2] get-tuple-element(p), index=0
})",
       kInvalid, "%g: get-tuple-element needs a tuple operand, got f32[2]"},
      {"GetTupleElementIndexOutOfRange", R"(
HloModule m
ENTRY e {
  p = (f32[2]) parameter(0)
  ROOT g = f32[2] get-tuple-element(p), index=1
})",
       kInvalid, "%g: index=1 is out of range for (f32[2])"},
      {"CallWithoutAComputation", R"(
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] call(p)
})",
       kInvalid, "%c: call needs exactly one computation (to_apply=)"},
      {"CallWithTooManyArguments", R"(
HloModule m
f {
  ROOT p = f32[4] parameter(0)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] call(x, x), to_apply=f
})",
       kInvalid, "%c: computation f takes 1 parameter(s) but 2 are passed"},
      {"CallWithAnArgumentOfAnotherShape", R"(
HloModule m
f {
  ROOT p = f32[4] parameter(0)
}
ENTRY e {
  x = f32[5] parameter(0)
  ROOT c = f32[4] call(x), to_apply=f
})",
       kInvalid, "%c: argument 0 is f32[5] but parameter 0 of f is f32[4]"},
      {"FusionWithoutAComputation", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT f = f32[4] fusion(x), kind=kLoop
})",
       kInvalid, "%f: fusion needs exactly one computation (calls=)"},

      // --- dot ---
      {"DotOfPred", R"(
HloModule m
ENTRY e {
  x = pred[4] parameter(0)
  ROOT d = pred[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})",
       kInvalid, "%d: dot needs numeric operands, not pred"},
      {"DotBatchDimensionOutOfRange", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT d = f32[] dot(x, x), lhs_batch_dims={1}, rhs_batch_dims={0}
})",
       kInvalid, "%d: lhs batch dimension 1 is out of range for rank 1"},
      {"DotWithUnpairedContractingDimensions", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT d = f32[] dot(x, x), lhs_contracting_dims={0}
})",
       kInvalid,
       "%d: lhs and rhs must have as many batch dimensions, and as many "
       "contracting dimensions, as each other"},
      {"DotBatchDimensionsOfDifferentSizes", R"(
HloModule m
ENTRY e {
  x = f32[2,4] parameter(0)
  y = f32[3,4] parameter(1)
  ROOT d = f32[2] dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
})",
       kInvalid,
       "%d: batch dimension 0 has size 2 in lhs f32[2,4] but 3 in rhs "
       "f32[3,4]"},
      {"DotContractingDimensionsOfDifferentSizes", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[5] parameter(1)
  ROOT d = f32[] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})",
       kInvalid,
       "%d: contracting dimension 0 has size 4 in lhs f32[4] but 5 in rhs "
       "f32[5]"},
      {"DotProducingPred", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT d = pred[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})",
       kInvalid, "%d: dot produces a numeric array, not pred[]"},
      {"DotDimensionBothBatchAndContracting", R"(
HloModule m
ENTRY e {
  x = f32[4,2] parameter(0)
  ROOT d = f32[4] dot(x, x), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={0}, rhs_contracting_dims={0}
})",
       kInvalid,
       "%d: lhs dimension 0 is both a batch and a contracting dimension"},

      // --- ragged-dot ---
      {"RaggedDotWithTwoRaggedDimensions", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  r = f32[2,3,5] parameter(1)
  s = s32[2] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0,1}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: lhs ragged dimensions {0,1} must be exactly one "
       "dimension of lhs f32[4,3]"},
      {"RaggedDotGroupSizesOfWrongPrefix", R"(
HloModule m
ENTRY e {
  l = f32[2,4,3] parameter(0)
  r = f32[2,3,5] parameter(1)
  s = s32[4,2] parameter(2)
  ROOT d = f32[2,4,5] ragged-dot(l, r, s), lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: group_sizes is s32[4,2]; for lhs f32[2,4,3] with "
       "ragged dimension 1 it must be [2] or [2,2]"},
      {"RaggedDotGroupDimensionOfOtherSize", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  r = f32[2,3,5] parameter(1)
  s = s32[3] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: rhs group dimensions {0}: a ragged non-contracting "
       "lhs dimension needs one rhs dimension of the 3 groups; rhs is "
       "f32[2,3,5]"},
      {"RaggedDotGroupDimensionThatContracts", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  r = f32[3,5] parameter(1)
  s = s32[3] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={0}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: rhs group dimension 0 is also a batch or "
       "contracting dimension"},
      {"RaggedDotWithFloatGroupSizes", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  r = f32[2,3,5] parameter(1)
  s = f32[2] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: group_sizes is f32[2]; it must hold integers"},
      {"RaggedDotOfTheWrongShape", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  r = f32[3,5] parameter(1)
  s = s32[2] parameter(2)
  ROOT d = f32[4,5] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}
})",
       kInvalid, "f32[2,4,5]"},
      {"RaggedDotWhoseProductPerGroupIsTooLarge", R"(
HloModule m
ENTRY e {
  l = f32[1048576,1] parameter(0)
  r = f32[1048576,1,1048576] parameter(1)
  s = s32[1048576] parameter(2)
  ROOT d = f32[1048576,1048576] ragged-dot(l, r, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: computing it takes a product per group: shape "
       "f32[1048576,1048576,1048576] is too large"},
      {"RaggedDotOfTwoOperands", R"(
HloModule m
ENTRY e {
  l = f32[4,3] parameter(0)
  ROOT d = f32[4,4] ragged-dot(l, l), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}
})",
       kInvalid,
       "%d: ragged-dot: takes lhs, rhs and group_sizes, got 2 operand(s)"},

      // --- reduce ---
      {"ReduceWithoutAnInitialValue", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[] reduce(x), dimensions={0}, to_apply=add
})",
       kInvalid,
       "%r: reduce takes N inputs and N initial values; got 1 operands"},
      {"ReduceOfInputsWithDifferentDimensions", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT s = (f32[], f32[]) tuple(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[5] parameter(1)
  z = f32[] parameter(2)
  ROOT r = (f32[], f32[]) reduce(x, y, z, z), dimensions={0}, to_apply=add
})",
       kInvalid,
       "%r: inputs must have the same dimensions; input 0 is f32[4] but "
       "input 1 is f32[5]"},
      {"ReduceWithAnInitialValueOfAnotherType", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
})",
       kInvalid, "%r: initial value 0 must be a f32 scalar, got s32[]"},
      {"ReduceWithoutAComputation", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}
})",
       kInvalid, "%r: reduce needs a computation (to_apply=)"},
      {"ReducerWithTooFewParameters", R"(
HloModule m
neg {
  a = f32[] parameter(0)
  ROOT s = f32[] negate(a)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=neg
})",
       kInvalid,
       "%r: the reducer neg takes 1 parameter(s); a reduce of 1 input(s) "
       "needs 2"},
      {"ReducerWithParametersOfAnotherType", R"(
HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
})",
       kInvalid, "%r: parameter 0 of the reducer add is s32[]; expected f32[]"},
      {"ReducerReturningAnotherType", R"(
HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=less
})",
       kInvalid, "%r: the reducer less returns pred[]; expected f32[]"},

      // --- slicing, concatenation, padding ---
      {"SliceWithTooFewRanges", R"(
HloModule m
ENTRY e {
  x = f32[4,4] parameter(0)
  ROOT s = f32[2] slice(x), slice={[0:2]}
})",
       kInvalid, "%s: slice has 1 ranges but the operand f32[4,4] has rank 2"},
      {"SliceRangePastTheEnd", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT s = f32[2] slice(x), slice={[3:5]}
})",
       kInvalid,
       "%s: slice range [3:5:1] is invalid for dimension 0 of size 4"},
      {"ConcatenateOfNothing", R"(
HloModule m
ENTRY e {
  ROOT c = f32[2] concatenate(), dimensions={0}
})",
       kInvalid, "%c: concatenate needs at least one operand"},
      {"ConcatenateWithoutADimension", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = f32[4] concatenate(x, x)
})",
       kInvalid, "%c: concatenate needs dimensions={d} (one dimension), got 0"},
      {"ConcatenateAlongAMissingDimension", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = f32[4] concatenate(x, x), dimensions={1}
})",
       kInvalid, "%c: dimension 1 is out of range for f32[2]"},
      {"ConcatenateOfMismatchedOperands", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  y = s32[2] parameter(1)
  ROOT c = f32[4] concatenate(x, y), dimensions={0}
})",
       kInvalid,
       "%c: operand 1 (s32[2]) does not fit operand 0 (f32[2]) for "
       "concatenation along dimension 0"},
      // Each operand is within the 2^56-byte limit; their concatenation is
      // not.
      {"ConcatenateBeyondTheLargestDimension", R"(
HloModule m
ENTRY e {
  x = pred[72057594037927936] parameter(0)
  y = pred[1] parameter(1)
  ROOT c = pred[1] concatenate(x, y), dimensions={0}
})",
       kInvalid,
       "%c: concatenating along dimension 0 gives a dimension larger than "
       "72057594037927936"},
      {"PadWithAValueOfAnotherType", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  v = s32[] parameter(1)
  ROOT p = f32[4] pad(x, v), padding=1_1
})",
       kInvalid, "%p: the padding value must be a f32 scalar, got s32[]"},
      {"PadWithTooManyEntries", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  v = f32[] parameter(1)
  ROOT p = f32[4] pad(x, v), padding=1_1x1_1
})",
       kInvalid, "%p: padding has 2 entries but the operand f32[2] has rank 1"},
      {"PadToANegativeSize", R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  v = f32[] parameter(1)
  ROOT p = f32[4] pad(x, v), padding=-2_-2
})",
       kInvalid,
       "%p: padding -2_-2_0 of dimension 0 (size 2) is invalid: interior must "
       "be >= 0, the padded size >= 0, and each of them at most "
       "72057594037927936 (2^56) in magnitude"},
      {"DynamicSliceWithoutStartIndices", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT d = f32[2] dynamic-slice(x), dynamic_slice_sizes={2}
})",
       kInvalid,
       "%d: dynamic-slice needs 1 start indices (one scalar per dimension), "
       "got 0"},
      {"DynamicSliceWithAFloatStartIndex", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  i = f32[] parameter(1)
  ROOT d = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}
})",
       kInvalid, "%d: start index 0 must be an integer scalar, got f32[]"},
      {"DynamicSliceWithTooManySizes", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  i = s32[] parameter(1)
  ROOT d = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2,2}
})",
       kInvalid, "%d: dynamic_slice_sizes has 2 entries for rank 1"},
      {"DynamicSliceLargerThanTheOperand", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  i = s32[] parameter(1)
  ROOT d = f32[5] dynamic-slice(x, i), dynamic_slice_sizes={5}
})",
       kInvalid, "%d: slice size 5 is invalid for dimension 0 of size 4"},
      {"DynamicUpdateSliceWithoutAnUpdate", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT d = f32[4] dynamic-update-slice(x)
})",
       kInvalid, "%d: dynamic-update-slice needs an operand and an update"},
      {"DynamicUpdateSliceLargerThanTheOperand", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  u = f32[5] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[4] dynamic-update-slice(x, u, i)
})",
       kInvalid, "%d: the update f32[5] does not fit in the operand f32[4]"},

      // --- tokens and asynchronous pairs ---
      {"AfterAllOfAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT t = token[] after-all(x)
})",
       kInvalid, "%t: operand 0 is f32[4]; after-all takes tokens"},
      {"AddDependencyOnAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] add-dependency(x, x)
})",
       kInvalid, "%a: operand 1 is f32[4]; add-dependency takes a token there"},
      {"CopyDoneOfAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] copy-done(x)
})",
       kInvalid,
       "%c: copy-done takes a copy-start's (dest, src, context), not f32[4]"},
      {"AsyncStartWithoutAComputation", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = ((f32[4]), f32[4], u32[]) async-start(x)
})",
       kInvalid, "%a: async-start needs one computation (calls=)"},
      {"AsyncStartOfTheWrongShape", R"(
HloModule m
f {
  ROOT p = f32[4] parameter(0)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = ((f32[4]), f32[5], u32[]) async-start(x), calls=f
})",
       kInvalid,
       "%a: async-start of f must produce ((f32[4]), f32[4], context...), not "
       "((f32[4]), f32[5], u32[])"},
      {"AsyncDoneOfAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] async-done(x)
})",
       kInvalid, "%a: async-done takes an async-start or async-update, not %x"},

      // --- collectives ---
      {"AllReduceOfNothing", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  ROOT a = f32[4] all-reduce(), to_apply=add
})",
       kInvalid, "%a: all-reduce needs an operand"},
      {"GlobalDeviceIdsWithoutAChannel", R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] all-reduce(x), to_apply=add, use_global_device_ids=true
})",
       kInvalid, "%a: use_global_device_ids=true needs a channel_id"},
      {"AllReduceWithoutAComputation", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] all-reduce(x)
})",
       kInvalid, "%a: all-reduce needs a computation (to_apply=)"},
      {"AllGatherOfSeveralOperands", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = (f32[8], f32[8]) all-gather(x, x), dimensions={0}
})",
       kUnimplemented, "%a: all-gather of several operands is not supported"},
      {"CollectivePermuteStartChangingTheShape", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = (f32[4], f32[5]) collective-permute-start(x), source_target_pairs={{0,0}}
})",
       kInvalid,
       "%a: collective-permute-start of f32[4] produces f32[4], not f32[5]"},
      {"CombinedCollectivePermuteStartOfTheWrongShape", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = s32[2] parameter(1)
  ROOT a = ((f32[4], s32[2]), (f32[4], s32[3])) collective-permute-start(x, y), source_target_pairs={{0,0}}
})",
       kInvalid,
       "%a: declared shape ((f32[4], s32[2]), (f32[4], s32[3])) does not "
       "match the shape ((f32[4], s32[2]), (f32[4], s32[2])) that "
       "collective-permute-start computes"},
      {"AllToAllInTupleFormOfSeveralShapes", R"(
HloModule m, replica_count=2
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[5] parameter(1)
  ROOT a = (f32[4], f32[5]) all-to-all(x, y)
})",
       kUnimplemented,
       "%a: all-to-all's tuple form with operands of several shapes (f32[4], "
       "then f32[5]) is not supported"},
      {"AllToAllInTupleFormWithGroupsOfAnotherSize", R"(
HloModule m, replica_count=4
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = (f32[4], f32[4]) all-to-all(x, x), replica_groups={{0,1,2},{3}}
})",
       kInvalid,
       "%a: all-to-all of 2 operands needs groups of 2; {0,1,2} has 3"},
      {"AllToAllInTupleFormOverAllReplicas", R"(
HloModule m, replica_count=3
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = (f32[4], f32[4]) all-to-all(x, x)
})",
       kInvalid,
       "%a: all-to-all of 2 operands over one group of all 3 replicas needs 3 "
       "operands"},
      // --- ragged-all-to-all ---
      {"RaggedAllToAllOfRowsThatDiffer", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[8,2] parameter(0)
  p1 = f32[6,3] parameter(1)
  p2 = s32[4] parameter(2)
  p3 = s32[4] parameter(3)
  p4 = s32[4] parameter(4)
  p5 = s32[4] parameter(5)
  ROOT r = f32[6,3] ragged-all-to-all(p0, p1, p2, p3, p4, p5)
})",
       kInvalid,
       "%r: ragged-all-to-all writes rows of its input into rows of its "
       "output: they need one element type and the same dimensions after "
       "the first; the input is f32[8,2], the output f32[6,3]"},
      {"RaggedAllToAllWithFloatOffsets", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[8,2] parameter(0)
  p1 = f32[6,2] parameter(1)
  p2 = f32[4] parameter(2)
  p3 = s32[4] parameter(3)
  p4 = s32[4] parameter(4)
  p5 = s32[4] parameter(5)
  ROOT r = f32[6,2] ragged-all-to-all(p0, p1, p2, p3, p4, p5)
})",
       kInvalid,
       "%r: operand 2 (%p2) is f32[4]; input_offsets, send_sizes, "
       "output_offsets and recv_sizes are s32 or s64 vectors of one length "
       "(operand 2 is f32[4])"},
      {"RaggedAllToAllWithGroupsOfTwoSizes", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[8,2] parameter(0)
  p1 = f32[6,2] parameter(1)
  p2 = s32[4] parameter(2)
  p3 = s32[4] parameter(3)
  p4 = s32[4] parameter(4)
  p5 = s32[4] parameter(5)
  ROOT r = f32[6,2] ragged-all-to-all(p0, p1, p2, p3, p4, p5), replica_groups={{0,1},{2}}
})",
       kInvalid,
       "%r: ragged-all-to-all's groups must be of one size; {0,1} has 2 "
       "members, {2} 1"},
      {"RaggedAllToAllWithUpdatesTheGroupCannotShare", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[8,2] parameter(0)
  p1 = f32[6,2] parameter(1)
  p2 = s32[6] parameter(2)
  p3 = s32[6] parameter(3)
  p4 = s32[6] parameter(4)
  p5 = s32[6] parameter(5)
  ROOT r = f32[6,2] ragged-all-to-all(p0, p1, p2, p3, p4, p5)
})",
       kInvalid,
       "%r: ragged-all-to-all over groups of 4 needs offsets and sizes with "
       "a multiple of 4 entries (the same number of updates to each "
       "member); they have 6"},
      {"RaggedAllToAllExchangingTooMuch", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[134217728,67108864] parameter(0)
  p1 = f32[1,67108864] parameter(1)
  p2 = s32[4] parameter(2)
  p3 = s32[4] parameter(3)
  p4 = s32[4] parameter(4)
  p5 = s32[4] parameter(5)
  ROOT r = f32[1,67108864] ragged-all-to-all(p0, p1, p2, p3, p4, p5)
})",
       kInvalid,
       "%r: ragged-all-to-all exchanges each of its updates as a copy of the "
       "input: shape f32[4,134217728,67108864] is too large"},
      {"RaggedAllToAllWithGlobalIdsButNoChannel", R"(
HloModule m, replica_count=4
ENTRY e {
  p0 = f32[8,2] parameter(0)
  p1 = f32[6,2] parameter(1)
  p2 = s32[4] parameter(2)
  p3 = s32[4] parameter(3)
  p4 = s32[4] parameter(4)
  p5 = s32[4] parameter(5)
  ROOT r = f32[6,2] ragged-all-to-all(p0, p1, p2, p3, p4, p5), use_global_device_ids=true
})",
       kInvalid, "%r: use_global_device_ids=true needs a channel_id"},
      {"CollectiveBroadcastOfNothing", R"(
HloModule m
ENTRY e {
  ROOT a = () collective-broadcast(), replica_groups={{0}}
})",
       kInvalid, "%a: collective-broadcast needs an operand"},
      {"CollectiveBroadcastWithoutGroups", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] collective-broadcast(x)
})",
       kInvalid, "%a: collective-broadcast needs replica_groups"},
      {"CollectiveBroadcastWithAnEmptyGroup", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] collective-broadcast(x), replica_groups={{0},{}}
})",
       kInvalid, "%a: collective-broadcast's groups may not be empty"},
      {"GetDimensionSizeWithoutADimension", R"(
HloModule m
ENTRY e {
  x = f32[4,5] parameter(0)
  ROOT a = s32[] get-dimension-size(x)
})",
       kInvalid,
       "%a: get-dimension-size needs dimensions={d}, one dimension of "
       "f32[4,5]"},
      {"GetDimensionSizePastAnInt32", R"(
HloModule m
ENTRY e {
  x = u8[3000000000] parameter(0)
  ROOT a = s32[] get-dimension-size(x), dimensions={0}
})",
       kInvalid,
       "%a: dimension 0 of u8[3000000000] is 3000000000, more than its s32 "
       "result holds"},
      {"CollectiveBroadcastOfTooManyPermutes", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) collective-broadcast(x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x), replica_groups=[1,1024]<=[1024]
})",
       kUnimplemented,
       "%a: collective-broadcast of 17 operands over a group of 1024 "
       "processes takes 17408 permutes; at most 16384 are supported"},
      {"CollectiveBroadcastOverAHugeGroup", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] collective-broadcast(x), replica_groups=[1,1025]<=[1025]
})",
       kUnimplemented,
       "%a: collective-broadcast over a group of 1025 processes; at most 1024 "
       "are supported"},
      {"AllGatherWithoutADimension", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[8] all-gather(x)
})",
       kInvalid,
       "%a: all-gather needs dimensions={d} with d a dimension of f32[4]"},
      {"AllGatherToASizeThatIsNotAMultiple", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[6] all-gather(x), dimensions={0}
})",
       kInvalid,
       "%a: all-gather of f32[4] along dimension 0 cannot produce f32[6]"},
      {"ReduceScatterWithoutAComputation", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[2] reduce-scatter(x), dimensions={0}
})",
       kInvalid, "%a: reduce-scatter needs a computation (to_apply=)"},
      {"AllGatherStartNotATuple", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[8] all-gather-start(x), dimensions={0}
})",
       kInvalid,
       "%a: all-gather-start of one operand produces (operand, result, "
       "context...); f32[8] is declared"},
      {"AllGatherDoneOfAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] all-gather-done(x)
})",
       kInvalid,
       "%a: all-gather-done takes the result of an all-gather-start, not %x "
       "(parameter)"},
      {"AllReduceDoneOfAnArray", R"(
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] all-reduce-done(x)
})",
       kInvalid,
       "%a: all-reduce-done takes the result of an all-reduce-start, not %x "
       "(parameter)"},
  };
  return *cases;
}

}  // namespace pjrt::hlo::verifier_cases
