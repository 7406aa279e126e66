// Opcode: the HLO operations pjrtd knows by name. Any other name in HLO text
// parses as kOther (the instruction keeps the spelling); the compiler answers
// UNIMPLEMENTED for it, naming the op and its line.
#ifndef PJRT_HLO_OPCODE_H_
#define PJRT_HLO_OPCODE_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pjrt::hlo {

// X(enumerator, "hlo-name", family): the one table of opcodes. The family
// (OpFamily below) is what the parser and the verifier know of an op
// without naming it: which ops print without their shape, and which part
// of the verifier checks it.
#define PJRT_HLO_OPCODES(X)                                           \
  X(kParameter, "parameter", kDataMovement)                           \
  X(kConstant, "constant", kDataMovement)                             \
  X(kIota, "iota", kDataMovement)                                     \
  X(kBroadcast, "broadcast", kDataMovement)                           \
  X(kReshape, "reshape", kDataMovement)                               \
  X(kBitcast, "bitcast", kDataMovement)                               \
  X(kTranspose, "transpose", kDataMovement)                           \
  X(kConvert, "convert", kElementwise)                                \
  X(kBitcastConvert, "bitcast-convert", kElementwise)                 \
  X(kCopy, "copy", kUnary)                                            \
  X(kTuple, "tuple", kStructure)                                      \
  X(kGetTupleElement, "get-tuple-element", kStructure)                \
  X(kCall, "call", kStructure)                                        \
  X(kSelect, "select", kElementwise)                                  \
  X(kClamp, "clamp", kElementwise)                                    \
  X(kCompare, "compare", kElementwise)                                \
  X(kAbs, "abs", kUnary)                                              \
  X(kNegate, "negate", kUnary)                                        \
  X(kSign, "sign", kUnary)                                            \
  X(kExp, "exponential", kUnary)                                      \
  X(kExpm1, "exponential-minus-one", kUnary)                          \
  X(kLog, "log", kUnary)                                              \
  X(kLog1p, "log-plus-one", kUnary)                                   \
  X(kSqrt, "sqrt", kUnary)                                            \
  X(kRsqrt, "rsqrt", kUnary)                                          \
  X(kCbrt, "cbrt", kUnary)                                            \
  X(kTanh, "tanh", kUnary)                                            \
  X(kLogistic, "logistic", kUnary)                                    \
  X(kSin, "sine", kUnary)                                             \
  X(kCos, "cosine", kUnary)                                           \
  X(kTan, "tan", kUnary)                                              \
  X(kErf, "erf", kUnary)                                              \
  X(kFloor, "floor", kUnary)                                          \
  X(kCeil, "ceil", kUnary)                                            \
  X(kRoundNearestAfz, "round-nearest-afz", kUnary)                    \
  X(kRoundNearestEven, "round-nearest-even", kUnary)                  \
  X(kIsFinite, "is-finite", kElementwise)                             \
  X(kNot, "not", kUnary)                                              \
  X(kPopcnt, "popcnt", kUnary)                                        \
  X(kClz, "count-leading-zeros", kUnary)                              \
  X(kAdd, "add", kBinary)                                             \
  X(kSubtract, "subtract", kBinary)                                   \
  X(kMultiply, "multiply", kBinary)                                   \
  X(kDivide, "divide", kBinary)                                       \
  X(kRemainder, "remainder", kBinary)                                 \
  X(kPower, "power", kBinary)                                         \
  X(kMaximum, "maximum", kBinary)                                     \
  X(kMinimum, "minimum", kBinary)                                     \
  X(kAtan2, "atan2", kBinary)                                         \
  X(kAnd, "and", kBinary)                                             \
  X(kOr, "or", kBinary)                                               \
  X(kXor, "xor", kBinary)                                             \
  X(kShiftLeft, "shift-left", kBinary)                                \
  X(kShiftRightLogical, "shift-right-logical", kBinary)               \
  X(kShiftRightArithmetic, "shift-right-arithmetic", kBinary)         \
  X(kDot, "dot", kCompute)                                            \
  X(kReduce, "reduce", kCompute)                                      \
  X(kSlice, "slice", kDataMovement)                                   \
  X(kConcatenate, "concatenate", kDataMovement)                       \
  X(kPad, "pad", kDataMovement)                                       \
  X(kReverse, "reverse", kDataMovement)                               \
  X(kDynamicSlice, "dynamic-slice", kDataMovement)                    \
  X(kDynamicUpdateSlice, "dynamic-update-slice", kDataMovement)       \
  X(kReducePrecision, "reduce-precision", kUnary)                     \
  X(kOptimizationBarrier, "opt-barrier", kStructure)                  \
  X(kCustomCall, "custom-call", kStructure)                           \
  X(kReplicaId, "replica-id", kCollective)                            \
  X(kPartitionId, "partition-id", kCollective)                        \
  X(kAllReduce, "all-reduce", kCollective)                            \
  X(kAllGather, "all-gather", kCollective)                            \
  X(kReduceScatter, "reduce-scatter", kCollective)                    \
  X(kCollectivePermute, "collective-permute", kCollective)            \
  X(kAllToAll, "all-to-all", kCollective)                             \
  X(kRaggedAllToAll, "ragged-all-to-all", kCollective)                \
  X(kWhile, "while", kStructure)                                      \
  X(kConditional, "conditional", kStructure)                          \
  X(kGather, "gather", kDataMovement)                                 \
  X(kScatter, "scatter", kDataMovement)                               \
  X(kSort, "sort", kCompute)                                          \
  X(kConvolution, "convolution", kCompute)                            \
  X(kReduceWindow, "reduce-window", kCompute)                         \
  X(kSelectAndScatter, "select-and-scatter", kCompute)                \
  X(kRngBitGenerator, "rng-bit-generator", kCompute)                  \
  X(kFusion, "fusion", kStructure)                                    \
  X(kMap, "map", kElementwise)                                        \
  X(kAfterAll, "after-all", kStructure)                               \
  X(kAddDependency, "add-dependency", kStructure)                     \
  X(kDomain, "domain", kStructure)                                    \
  X(kTopK, "topk", kCompute)                                          \
  X(kRng, "rng", kCompute)                                            \
  X(kRngGetAndUpdateState, "rng-get-and-update-state", kCompute)      \
  X(kFft, "fft", kCompute)                                            \
  X(kReal, "real", kElementwise)                                      \
  X(kImag, "imag", kElementwise)                                      \
  X(kComplex, "complex", kElementwise)                                \
  X(kAsyncStart, "async-start", kStructure)                           \
  X(kAsyncUpdate, "async-update", kStructure)                         \
  X(kAsyncDone, "async-done", kStructure)                             \
  X(kAllReduceStart, "all-reduce-start", kCollective)                 \
  X(kAllReduceDone, "all-reduce-done", kCollective)                   \
  X(kAllGatherStart, "all-gather-start", kCollective)                 \
  X(kAllGatherDone, "all-gather-done", kCollective)                   \
  X(kCollectivePermuteStart, "collective-permute-start", kCollective) \
  X(kCollectivePermuteDone, "collective-permute-done", kCollective)   \
  X(kCollectiveBroadcast, "collective-broadcast", kCollective)        \
  X(kCopyStart, "copy-start", kDataMovement)                          \
  X(kCopyDone, "copy-done", kDataMovement)                            \
  X(kGetDimensionSize, "get-dimension-size", kDataMovement)           \
  X(kTriangularSolve, "triangular-solve", kCompute)                   \
  X(kCholesky, "cholesky", kCompute)                                  \
  X(kBatchNormTraining, "batch-norm-training", kCompute)              \
  X(kBatchNormInference, "batch-norm-inference", kCompute)            \
  X(kBatchNormGrad, "batch-norm-grad", kCompute)                      \
  X(kRaggedDot, "ragged-dot", kCompute)

enum class Opcode {
#define PJRT_HLO_OPCODE_ENUM(e, name, family) e,
  PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_ENUM)
#undef PJRT_HLO_OPCODE_ENUM
  // Any op not listed above; Instruction::opcode_name() has its spelling.
  kOther,
};

enum class OpFamily {
  // Element-wise with one operand whose shape the result keeps (as XLA's
  // printer sees it: it leaves the result shape out).
  kUnary,
  // Element-wise with two operands of the result's shape.
  kBinary,
  // The other element-wise ops: select, clamp, compare, is-finite, real,
  // imag, complex, convert, bitcast-convert, map.
  kElementwise,
  // Values made or moved without arithmetic: parameters, constants, iota,
  // reshapes, slices, pads, gathers and scatters, copies.
  kDataMovement,
  // Dots, reductions, windows, convolutions, fft, sort, top-k, random bits,
  // batch norms.
  kCompute,
  // Collectives across replicas and partitions, and their ids.
  kCollective,
  // Tuples, calls, control flow, fusions, tokens, custom calls and async
  // wrappers; and kOther.
  kStructure,
};

// Every opcode of the table, in its order (not kOther).
absl::Span<const Opcode> AllOpcodes();

// The family of an opcode (kStructure for kOther).
OpFamily FamilyOf(Opcode opcode);

// The HLO spelling ("get-tuple-element"); "other" for kOther.
absl::string_view OpcodeName(Opcode opcode);

// The opcode spelled `name`, or kOther.
Opcode OpcodeFromName(absl::string_view name);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_OPCODE_H_
