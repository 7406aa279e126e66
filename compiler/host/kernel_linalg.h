// Linear algebra kernels: triangular-solve and cholesky (kernel_linalg.cc),
// one matrix of the batch at a time. Their descriptions are public, so that
// the CUDA backend generates the same computation.
#ifndef PJRT_COMPILER_HOST_KERNEL_LINALG_H_
#define PJRT_COMPILER_HOST_KERNEL_LINALG_H_

#include <cstdint>

#include "compiler/host/kernel.h"
#include "hlo/primitive_type.h"

namespace pjrt::compiler::host {

// triangular-solve: for each of `batch` matrices a (m x m) and right-hand
// sides b (m x n when left_side, n x m otherwise), the x with op(a) x = b
// (left_side) or x op(a) = b. Each of the n right-hand sides (a column of b
// when left_side, a row otherwise) is a system M y = r of m unknowns,
// solved by substitution: y_i = (r_i - sum over the earlier j of M_ij y_j)
// / M_ii, "earlier" being j < i in increasing i when M is lower
// triangular, j > i in decreasing i when it is upper. M_ij reads a's
// element (i, j), or (j, i) when `transposed`, conjugated when
// `conjugate`; only a's `lower` (or upper) triangle is read, and M_ii is 1
// when `unit_diagonal`. Sums run in the element type, over increasing j.
class TriangularSolveKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  int a = -1, b = -1, output = -1;
  int64_t batch = 1, m = 0, n = 0;
  bool left_side = false, unit_diagonal = false;
  // M's element (i, j) is a's (j, i); and conjugated.
  bool transposed = false, conjugate = false;
  // M is lower triangular.
  bool m_lower = false;
  // Right-hand side k's element i is at k * rhs_step + i * rhs_stride of
  // b's matrix.
  int64_t rhs_step = 0, rhs_stride = 0;
};

// cholesky: for each of `batch` matrices a (n x n), the lower triangular L
// with L L^H = a read from a's lower triangle (`lower`), or the upper
// triangular U = L^H with U^H U = a read from its upper triangle; the other
// triangle of the result is zero. Column by column: L_jj = sqrt(a_jj - sum
// over k < j of |L_jk|^2), then L_ij = (a_ij - sum over k < j of L_ik
// conj(L_jk)) / L_jj for i > j, sums in the element type in increasing k.
// A matrix that is not positive definite gives NaNs (the square root of a
// negative pivot) in its columns from there on.
class CholeskyKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  int a = -1, output = -1;
  int64_t batch = 1, n = 0;
  bool lower = false;
};

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_LINALG_H_
