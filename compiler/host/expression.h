// Expression: the element-wise core of a fused loop. A small DAG of scalar
// operations evaluated over a block of elements at a time: every node
// produces a block in the compute representation of its type (f16, bf16 and
// f8 as float, rounded after every op; s4 and u4 as one byte, wrapped to 4
// bits after every op; pred as one byte 0/1; c64 and c128 as std::complex;
// the rest native).
//
// Inputs are blocks the caller prepares (loaded from buffers, broadcast,
// iota); outputs are blocks of chosen nodes. Evaluating a block of ~1024
// elements keeps every intermediate in the L1 cache, so a chain of
// element-wise ops costs one pass over memory.
//
// Semantics follow XLA (integer division by zero, shifts past the bit width,
// saturating float-to-integer converts, NaN propagation in maximum/minimum,
// total-order comparisons...).
#ifndef PJRT_COMPILER_HOST_EXPRESSION_H_
#define PJRT_COMPILER_HOST_EXPRESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "hlo/ir.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

enum class ExprOp : uint8_t {
  kInput,
  kSplat,
  // Unary.
  kAbs,
  kNegate,
  kSign,
  kExp,
  kExpm1,
  kLog,
  kLog1p,
  kSqrt,
  kRsqrt,
  kCbrt,
  kTanh,
  kLogistic,
  kSin,
  kCos,
  kTan,
  kErf,
  kFloor,
  kCeil,
  kRoundAfz,
  kRoundEven,
  kIsFinite,
  kNot,
  kPopcnt,
  kClz,
  kReducePrecision,
  kConvert,
  kBitcastConvert,
  kReal,
  kImag,
  // Binary.
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kRemainder,
  kPower,
  kMaximum,
  kMinimum,
  kAtan2,
  kAnd,
  kOr,
  kXor,
  kShiftLeft,
  kShiftRightLogical,
  kShiftRightArithmetic,
  kCompare,
  kComplex,
  // Ternary.
  kSelect,
  kClamp,
};

struct ExprNode {
  ExprOp op = ExprOp::kInput;
  // Type of the node's value.
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  // Operand nodes (earlier in the list).
  int operands[3] = {-1, -1, -1};
  // kInput: which input block.
  int input = -1;
  // kSplat: the value, as the compute representation's bytes (16 for c128).
  uint64_t splat_bits[2] = {0, 0};
  // kCompare.
  hlo::ComparisonDirection direction = hlo::ComparisonDirection::kEq;
  bool total_order = false;
  // kReducePrecision.
  int exponent_bits = 0;
  int mantissa_bits = 0;
};

// A number that names one version of one Expression's contents, for
// BlockScratch to know whose splats it holds. Addresses will not do: a
// program's expression is freed with the program, and the next one built may
// land at the same address with other constants. Copies (and moves, which
// copy) draw a new number; so does every change (Renew).
class ExpressionId {
 public:
  ExpressionId() : value_(Next()) {}
  ExpressionId(const ExpressionId&) : value_(Next()) {}
  ExpressionId& operator=(const ExpressionId&) {
    value_ = Next();
    return *this;
  }
  void Renew() { value_ = Next(); }
  uint64_t value() const { return value_; }

 private:
  static uint64_t Next();
  uint64_t value_;
};

class Expression {
 public:
  // Appends a node and returns its index.
  int Add(const ExprNode& node);
  int AddInput(int input, hlo::PrimitiveType type);
  // A splat of `value` converted to `type` (exact for integers that fit).
  int AddSplatFromDouble(hlo::PrimitiveType type, double value);
  // A splat from a literal element's raw storage bytes.
  int AddSplatFromStorage(hlo::PrimitiveType type, const void* storage);

  const std::vector<ExprNode>& nodes() const { return nodes_; }
  const ExprNode& node(int i) const { return nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }

  void AddOutput(int node) {
    outputs_.push_back(node);
    id_.Renew();
  }
  const std::vector<int>& outputs() const { return outputs_; }
  int num_inputs() const { return num_inputs_; }
  // Rough cost of one element in cycles, for parallel chunking.
  double CyclesPerElement() const;

  // Assigns block slots so that a value's slot is reused once its last user
  // has run: the working set of a block stays a few slots, in the L1 cache.
  // Splats keep their own slots (they are filled once per loop). Call after
  // the last AddOutput; until then each node has a slot of its own.
  void Finalize();
  // The scratch slot of node i (-1 for inputs).
  int slot(int i) const { return slots_.empty() ? i : slots_[i]; }

  // Unique to these contents: no other expression, live or freed, and no
  // earlier state of this one has it.
  uint64_t id() const { return id_.value(); }

 private:
  ExpressionId id_;
  std::vector<ExprNode> nodes_;
  std::vector<int> outputs_;
  std::vector<int> slots_;
  int num_inputs_ = 0;
};

// Largest block EvaluateBlock accepts.
inline constexpr int64_t kBlockElements = 1024;
// uint64_t words that hold a block of any type's compute representation
// (16 bytes per element for c128).
inline constexpr int64_t kBlockWords = kBlockElements * 2;
// A value of any type in its compute representation (16 bytes for c128).
struct alignas(16) ScalarBits {
  uint64_t words[2] = {0, 0};
};

// Per-thread working memory for EvaluateBlock. It remembers which
// expression's splats it holds, so that evaluating block after block of one
// loop fills them once.
class BlockScratch {
 public:
  // A block-sized slot for node `i` (kMaxComputeWidth bytes per element).
  // Inline: every kernel module (host_kernels.h) keeps its own copy.
  void* Slot(int i) {
    if (static_cast<int>(slots_.size()) <= i) slots_.resize(i + 1);
    if (slots_[i].empty()) slots_[i].resize(kBlockWords);
    return slots_[i].data();
  }

  // Whose splats the slots hold (Expression::id(); ids start at 1), filled
  // for how many elements: for the kernels (each level's) to keep.
  uint64_t splats_of = 0;
  int64_t splats_filled = 0;

 private:
  std::vector<std::vector<uint64_t>> slots_;
};

// Evaluates `expr` over `n` <= kBlockElements elements. inputs[i] holds n
// values of input i in the compute representation of its type. On return,
// outputs[j] points at the n values of output j (in `scratch` or an input),
// valid until the next call with the same scratch.
void EvaluateBlock(const Expression& expr, absl::Span<const void* const> inputs,
                   int64_t n, absl::Span<const void*> outputs,
                   BlockScratch& scratch);

// Converts n values between the storage and compute representations (they
// differ only for f16, bf16 and the f8 types; otherwise these copy).
void StorageToCompute(hlo::PrimitiveType type, const void* src, void* dst,
                      int64_t n);
void ComputeToStorage(hlo::PrimitiveType type, const void* src, void* dst,
                      int64_t n);

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_EXPRESSION_H_
