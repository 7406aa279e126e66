// Shapes of dot and ragged-dot: which dimensions of the operands the
// dimension numbers pair, contract or keep, and the result's dimensions.
// Shared by the verifier, the StableHLO translator (whose messages name
// its own op) and the rewrite that expands ragged-dot (hlo/passes.h).
#ifndef PJRT_HLO_DOT_SHAPES_H_
#define PJRT_HLO_DOT_SHAPES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir.h"
#include "hlo/shape.h"

namespace pjrt::hlo {

// The result dimensions of a dot of `lhs` and `rhs` under `d`: the batch
// dimensions (in d's order), then lhs's other free dimensions, then rhs's,
// each in order; rhs dimensions in `rhs_excluded` are not free (a
// ragged-dot's group dimension). INVALID_ARGUMENT, with a message that
// names the dimension that is wrong, when a dimension is out of range,
// listed twice or both batch and contracting, or when paired dimensions
// differ in size.
absl::StatusOr<std::vector<int64_t>> DotResultDimensions(
    const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& d,
    absl::Span<const int64_t> rhs_excluded = {});

// ragged-dot(lhs, rhs, group_sizes): a dot whose one lhs "ragged"
// dimension is cut into consecutive groups, group_sizes[..., i] elements
// long. Where the ragged dimension is
//  - free in lhs (kNonContracting): rhs has one group dimension of the g
//    groups, and each lhs row multiplies its group's rhs; rows past the
//    last group give zeros. The result is the dot's, without rhs's group
//    dimension.
//  - contracting (kContracting): each group contracts its own slice of
//    the dimension: a result [g, dot's result...].
//  - batch (kBatch): batches past the last group give zeros.
// group_sizes is [g], the same groups everywhere, or [prefix..., g] with
// its own groups for every index of the `prefix` lhs dimensions: the batch
// dimensions (those before the ragged one, in the batch lists' order, when
// it is a batch dimension), then the contracting dimensions listed before
// the ragged one (kContracting) or the free dimensions before it
// (kNonContracting).
struct RaggedDot {
  enum class Mode { kNonContracting, kContracting, kBatch };
  DotDimensionNumbers dot;
  int64_t lhs_ragged = 0;
  std::vector<int64_t> rhs_group;  // one dimension, or none
  Mode mode = Mode::kNonContracting;
  std::vector<int64_t> prefix;  // lhs dimensions, in group_sizes' order
  int64_t groups = 0;
  std::vector<int64_t> result_dimensions;
};

// Checks a ragged-dot's operands against its dimension numbers and fills
// in the rest. INVALID_ARGUMENT names what is wrong and what is expected.
absl::StatusOr<RaggedDot> AnalyzeRaggedDot(const Shape& lhs, const Shape& rhs,
                                           const Shape& group_sizes,
                                           const DotDimensionNumbers& dot,
                                           absl::Span<const int64_t> lhs_ragged,
                                           absl::Span<const int64_t> rhs_group);

// The instruction's: its dot dimensions with lhs_ragged_dims= and
// rhs_group_dims=.
absl::StatusOr<RaggedDot> AnalyzeRaggedDot(const Instruction& inst);

// The shape a ragged-dot instruction computes, in its own (numeric)
// element type.
absl::StatusOr<Shape> InferRaggedDotShape(const Instruction& inst);

// True for a ragged-dot that is one matrix product per group: no batch
// dimensions, one vector of group sizes, a 2-D lhs, and either a ragged
// free dimension of the lhs against a 3-D rhs whose group dimension is not
// its last, or a ragged contracting dimension against a 2-D rhs; operands
// and result all f32 or all f64. Each group's operands are then 2-D
// matrices with a unit stride, as a GEMM takes them (the host's kernel for
// it, compiler/host/kernel_ragged_dot.cc).
bool IsPlainRaggedDot(const Instruction& inst);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_DOT_SHAPES_H_
