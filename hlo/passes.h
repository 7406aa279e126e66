// Backend-neutral rewrites of a verified module into simpler HLO, run once
// before any backend compiles it, so that every platform has fewer
// primitives to emit. Each rewrite keeps the module's results bit for bit
// where XLA's own rewrite does, and leaves a module the verifier accepts.
//
//  - A convolution whose window is 1 everywhere (no padding, stride,
//    dilation or reversal) and without feature or batch groups is a dot:
//    contract the input feature dimension with the kernel's input feature
//    dimension, then transpose into the output's dimension labels. (XLA's
//    ConvolutionToDot-style rewrite; a 1x1 convolution is a GEMM.)
//  - batch-norm-training, batch-norm-inference and batch-norm-grad become
//    the StableHLO spec's decompositions: per-feature reduces, broadcasts
//    and element-wise ops in the operand's type (a tuple of the results
//    where the op had one). No backend has a batch norm kernel.
//  - ragged-dot becomes a dot with masks (hlo/passes_ragged.cc): each
//    group's [start, end) along the ragged dimension is a running sum of
//    group_sizes; a ragged non-contracting dimension multiplies every row
//    by every group's rhs and keeps its own group's product, a ragged
//    contracting one zeroes what lies outside each group in a copy of lhs
//    per group, a ragged batch one zeroes the batches past the last group.
//    A mixture of experts' ragged-dots (2-D lhs, no batch, many rows per
//    group; free or contracting) become instead a counted loop over tiles
//    of rows, each multiplied with its group's operand only. A backend
//    that runs such a ragged-dot as a product per group (the host, for
//    f32 and f64: SimplifyOptions) keeps it.
//  - ragged-all-to-all becomes an all-to-all of every update's rows (from
//    its input offset on: a gather), one of where the sender puts them and
//    how many (the output offsets and send sizes), and a scatter of the
//    rows that arrive into the output (rows past each update's size go
//    out of bounds, which a scatter skips).
//  - A tuple constant becomes a tuple of array constants.
//  - get-dimension-size becomes its s32 constant (shapes are static).
//  - A combined collective-permute (several operands, a tuple result)
//    becomes one collective-permute per operand, with the same pairs and
//    channel, and a tuple of their results.
//  - collective-broadcast becomes, for each place k in the longest group,
//    a collective-permute from every group's first member to its k-th,
//    with a second one of a pred that marks where values arrived.
//  - all-to-all's tuple form (no dimensions=, one operand per group
//    member) becomes its array form over the operands stacked along a new
//    leading dimension, then sliced apart.
#ifndef PJRT_HLO_PASSES_H_
#define PJRT_HLO_PASSES_H_

#include "absl/status/statusor.h"
#include "hlo/ir.h"

namespace pjrt::hlo {

// What a backend computes itself that the rewrites would otherwise turn
// into other ops.
struct SimplifyOptions {
  // Ragged-dots that IsPlainRaggedDot (hlo/dot_shapes.h) accepts stay
  // (the host platform's kernel runs them as a product per group).
  bool keep_plain_ragged_dots = false;
};

// Runs every rewrite over every computation of `module`; returns how many
// instructions were rewritten.
absl::StatusOr<int> SimplifyModule(Module* module,
                                   const SimplifyOptions& options = {});

// The rewrites, one by one (each returns how many it made).
absl::StatusOr<int> RewriteUnitConvolutionsAsDots(Module* module);
absl::StatusOr<int> ExpandBatchNorms(Module* module);
absl::StatusOr<int> ExpandRaggedDots(Module* module,
                                     bool keep_plain_ragged_dots = false);
absl::StatusOr<int> ExpandRaggedAllToAlls(Module* module);
absl::StatusOr<int> SplitTupleConstants(Module* module);
absl::StatusOr<int> FoldDimensionSizes(Module* module);
absl::StatusOr<int> SplitCombinedCollectives(Module* module);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_PASSES_H_
