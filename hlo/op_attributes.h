// Structured forms of the attributes that the parser keeps as raw text:
// windows, convolution dimension labels, gather and scatter dimension
// numbers, and the small enums of rng, fft and custom calls. The verifier
// checks them against the operands; the compilers read them.
//
// Each Parse* reads the attribute from the instruction's raw attributes and
// answers INVALID_ARGUMENT naming the attribute and the text that is wrong.
#ifndef PJRT_HLO_OP_ATTRIBUTES_H_
#define PJRT_HLO_OP_ATTRIBUTES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir.h"

namespace pjrt::hlo {

// One dimension of window={size=.. stride=.. pad=.. lhs_dilate=..
// rhs_dilate=.. rhs_reversal=..}. Absent fields take XLA's defaults.
struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t padding_low = 0;
  int64_t padding_high = 0;
  int64_t base_dilation = 1;    // lhs_dilate
  int64_t window_dilation = 1;  // rhs_dilate
  bool reversal = false;
};

// The window of `inst` for an operand of `rank` dimensions; with no window=
// attribute, a window of size 1 everywhere (what XLA prints for a rank-0
// window is nothing at all).
absl::StatusOr<std::vector<WindowDimension>> ParseWindow(
    const Instruction& inst, int rank);

// dim_labels=b01f_01io->b01f, as dimension numbers.
struct ConvolutionDimensions {
  int64_t input_batch = 0, input_feature = 0;
  std::vector<int64_t> input_spatial;
  int64_t kernel_input_feature = 0, kernel_output_feature = 0;
  std::vector<int64_t> kernel_spatial;
  int64_t output_batch = 0, output_feature = 0;
  std::vector<int64_t> output_spatial;
};
absl::StatusOr<ConvolutionDimensions> ParseConvolutionDimensions(
    const Instruction& inst);

struct GatherDimensions {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> slice_sizes;
};
absl::StatusOr<GatherDimensions> ParseGatherDimensions(const Instruction& inst);

struct ScatterDimensions {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  std::vector<int64_t> input_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
  int64_t index_vector_dim = 0;
};
absl::StatusOr<ScatterDimensions> ParseScatterDimensions(
    const Instruction& inst);

// An integer attribute (feature_group_count=2, k=5), or `default_value`
// when absent.
absl::StatusOr<int64_t> ParseIntAttribute(const Instruction& inst,
                                          absl::string_view name,
                                          int64_t default_value);
// A floating-point attribute (epsilon=0.001); INVALID_ARGUMENT naming it
// when absent or not a number.
absl::StatusOr<double> ParseRequiredFloatAttribute(const Instruction& inst,
                                                   absl::string_view name);
// A list attribute ({1,2,3}), or empty when absent.
absl::StatusOr<std::vector<int64_t>> ParseIntListAttribute(
    const Instruction& inst, absl::string_view name);
// A bare word attribute (algorithm=rng_philox, fft_type=RFFT), or
// `default_value` when absent.
std::string WordAttribute(const Instruction& inst, absl::string_view name,
                          absl::string_view default_value);
// A true/false attribute, `default_value` when absent.
absl::StatusOr<bool> ParseBoolAttribute(const Instruction& inst,
                                        absl::string_view name,
                                        bool default_value);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_OP_ATTRIBUTES_H_
