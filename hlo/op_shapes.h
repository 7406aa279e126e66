// Shape inference for the ops that carry computations, windows or dimension
// numbers: while, conditional, map, gather, scatter, sort, reduce-window,
// select-and-scatter, convolution and the random-number ops. Each follows
// XLA's operation semantics and answers the shape the instruction computes
// from its operands and attributes, or INVALID_ARGUMENT naming the
// attribute or computation that is wrong and what would be right (the
// verifier adds the instruction's position).
#ifndef PJRT_HLO_OP_SHAPES_H_
#define PJRT_HLO_OP_SHAPES_H_

#include "absl/status/statusor.h"
#include "hlo/ir.h"
#include "hlo/shape.h"

namespace pjrt::hlo {

absl::StatusOr<Shape> InferWhileShape(const Instruction& inst);
absl::StatusOr<Shape> InferConditionalShape(const Instruction& inst);
absl::StatusOr<Shape> InferMapShape(const Instruction& inst);
absl::StatusOr<Shape> InferGatherShape(const Instruction& inst);
absl::StatusOr<Shape> InferScatterShape(const Instruction& inst);
absl::StatusOr<Shape> InferSortShape(const Instruction& inst);
absl::StatusOr<Shape> InferReduceWindowShape(const Instruction& inst);
absl::StatusOr<Shape> InferSelectAndScatterShape(const Instruction& inst);
absl::StatusOr<Shape> InferConvolutionShape(const Instruction& inst);
absl::StatusOr<Shape> InferRngBitGeneratorShape(const Instruction& inst);
absl::StatusOr<Shape> InferRngShape(const Instruction& inst);
absl::StatusOr<Shape> InferTopKShape(const Instruction& inst);
// fft: FFT and IFFT keep the complex shape; RFFT takes f32/f64 and gives
// the half spectrum (last dimension n / 2 + 1) in c64/c128; IRFFT the
// inverse.
absl::StatusOr<Shape> InferFftShape(const Instruction& inst);
// triangular-solve: a [..., m, m] and b [..., m, n] (left_side=true) or
// [..., n, m] of one floating-point or complex type and the same batch
// dimensions; the result has b's shape. transpose_a is NO_TRANSPOSE
// (the default), TRANSPOSE or ADJOINT; left_side, lower and unit_diagonal
// are true or false (false by default).
absl::StatusOr<Shape> InferTriangularSolveShape(const Instruction& inst);
// cholesky: a [..., n, n] of a floating-point or complex type; the result
// has its shape. lower is true or false (false by default).
absl::StatusOr<Shape> InferCholeskyShape(const Instruction& inst);
// batch-norm-training (operand, scale, offset), batch-norm-inference
// (operand, scale, offset, mean, variance) and batch-norm-grad (operand,
// scale, mean, variance, grad_output): a floating-point operand, feature
// dimension feature_index, the per-feature operands [features] of its type
// (grad_output shaped as the operand), and epsilon. Training and grad give
// (operand's shape, [features], [features]); inference the operand's shape.
absl::StatusOr<Shape> InferBatchNormShape(const Instruction& inst);

// Dimensions of a window applied to `dims`: per dimension, the number of
// window positions over the (base-dilated, padded) operand. INVALID_ARGUMENT
// if the window's rank differs.
absl::StatusOr<std::vector<int64_t>> WindowOutputDimensions(
    const Instruction& inst, absl::Span<const int64_t> dims);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_OP_SHAPES_H_
