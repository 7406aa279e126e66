// Opcode: the HLO operations pjrtd knows by name. Any other name in HLO text
// parses as kOther (the instruction keeps the spelling); the compiler answers
// UNIMPLEMENTED for it, naming the op and its line.
#ifndef PJRT_HLO_OPCODE_H_
#define PJRT_HLO_OPCODE_H_

#include "absl/strings/string_view.h"

namespace pjrt::hlo {

// X(enumerator, "hlo-name")
#define PJRT_HLO_OPCODES(X)                              \
  X(kParameter, "parameter")                             \
  X(kConstant, "constant")                               \
  X(kIota, "iota")                                       \
  X(kBroadcast, "broadcast")                             \
  X(kReshape, "reshape")                                 \
  X(kBitcast, "bitcast")                                 \
  X(kTranspose, "transpose")                             \
  X(kConvert, "convert")                                 \
  X(kBitcastConvert, "bitcast-convert")                  \
  X(kCopy, "copy")                                       \
  X(kTuple, "tuple")                                     \
  X(kGetTupleElement, "get-tuple-element")               \
  X(kCall, "call")                                       \
  X(kSelect, "select")                                   \
  X(kClamp, "clamp")                                     \
  X(kCompare, "compare")                                 \
  X(kAbs, "abs")                                         \
  X(kNegate, "negate")                                   \
  X(kSign, "sign")                                       \
  X(kExp, "exponential")                                 \
  X(kExpm1, "exponential-minus-one")                     \
  X(kLog, "log")                                         \
  X(kLog1p, "log-plus-one")                              \
  X(kSqrt, "sqrt")                                       \
  X(kRsqrt, "rsqrt")                                     \
  X(kCbrt, "cbrt")                                       \
  X(kTanh, "tanh")                                       \
  X(kLogistic, "logistic")                               \
  X(kSin, "sine")                                        \
  X(kCos, "cosine")                                      \
  X(kTan, "tan")                                         \
  X(kErf, "erf")                                         \
  X(kFloor, "floor")                                     \
  X(kCeil, "ceil")                                       \
  X(kRoundNearestAfz, "round-nearest-afz")               \
  X(kRoundNearestEven, "round-nearest-even")             \
  X(kIsFinite, "is-finite")                              \
  X(kNot, "not")                                         \
  X(kPopcnt, "popcnt")                                   \
  X(kClz, "count-leading-zeros")                         \
  X(kAdd, "add")                                         \
  X(kSubtract, "subtract")                               \
  X(kMultiply, "multiply")                               \
  X(kDivide, "divide")                                   \
  X(kRemainder, "remainder")                             \
  X(kPower, "power")                                     \
  X(kMaximum, "maximum")                                 \
  X(kMinimum, "minimum")                                 \
  X(kAtan2, "atan2")                                     \
  X(kAnd, "and")                                         \
  X(kOr, "or")                                           \
  X(kXor, "xor")                                         \
  X(kShiftLeft, "shift-left")                            \
  X(kShiftRightLogical, "shift-right-logical")           \
  X(kShiftRightArithmetic, "shift-right-arithmetic")     \
  X(kDot, "dot")                                         \
  X(kReduce, "reduce")                                   \
  X(kSlice, "slice")                                     \
  X(kConcatenate, "concatenate")                         \
  X(kPad, "pad")                                         \
  X(kReverse, "reverse")                                 \
  X(kDynamicSlice, "dynamic-slice")                      \
  X(kDynamicUpdateSlice, "dynamic-update-slice")         \
  X(kReducePrecision, "reduce-precision")                \
  X(kOptimizationBarrier, "opt-barrier")                 \
  X(kCustomCall, "custom-call")                          \
  X(kReplicaId, "replica-id")                            \
  X(kPartitionId, "partition-id")                        \
  X(kAllReduce, "all-reduce")                            \
  X(kAllGather, "all-gather")                            \
  X(kReduceScatter, "reduce-scatter")                    \
  X(kCollectivePermute, "collective-permute")            \
  X(kAllToAll, "all-to-all")                             \
  X(kWhile, "while")                                     \
  X(kConditional, "conditional")                         \
  X(kGather, "gather")                                   \
  X(kScatter, "scatter")                                 \
  X(kSort, "sort")                                       \
  X(kConvolution, "convolution")                         \
  X(kReduceWindow, "reduce-window")                      \
  X(kSelectAndScatter, "select-and-scatter")             \
  X(kRngBitGenerator, "rng-bit-generator")               \
  X(kFusion, "fusion")                                   \
  X(kMap, "map")                                         \
  X(kAfterAll, "after-all")                              \
  X(kAddDependency, "add-dependency")                    \
  X(kTopK, "topk")                                       \
  X(kRng, "rng")                                         \
  X(kRngGetAndUpdateState, "rng-get-and-update-state")   \
  X(kFft, "fft")                                         \
  X(kReal, "real")                                       \
  X(kImag, "imag")                                       \
  X(kComplex, "complex")                                 \
  X(kAsyncStart, "async-start")                          \
  X(kAsyncUpdate, "async-update")                        \
  X(kAsyncDone, "async-done")                            \
  X(kAllReduceStart, "all-reduce-start")                 \
  X(kAllReduceDone, "all-reduce-done")                   \
  X(kAllGatherStart, "all-gather-start")                 \
  X(kAllGatherDone, "all-gather-done")                   \
  X(kCollectivePermuteStart, "collective-permute-start") \
  X(kCollectivePermuteDone, "collective-permute-done")   \
  X(kCopyStart, "copy-start")                            \
  X(kCopyDone, "copy-done")

enum class Opcode {
#define PJRT_HLO_OPCODE_ENUM(e, name) e,
  PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_ENUM)
#undef PJRT_HLO_OPCODE_ENUM
  // Any op not listed above; Instruction::opcode_name() has its spelling.
  kOther,
};

// The HLO spelling ("get-tuple-element"); "other" for kOther.
absl::string_view OpcodeName(Opcode opcode);

// The opcode spelled `name`, or kOther.
Opcode OpcodeFromName(absl::string_view name);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_OPCODE_H_
