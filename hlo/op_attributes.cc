#include "hlo/op_attributes.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "base/text.h"

namespace pjrt::hlo {
namespace {

absl::Status Bad(const Instruction& inst, absl::string_view name,
                 absl::string_view raw, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat("%s=%s of %s is not %s",
                                                    name, Excerpt(raw, 120),
                                                    inst.Describe(), expected));
}

absl::StatusOr<int64_t> ParseInt(const Instruction& inst,
                                 absl::string_view name, absl::string_view raw,
                                 absl::string_view word) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(word), &value)) {
    return Bad(inst, name, raw, "a list of integers");
  }
  return value;
}

// "{1,2,3}" or "{}" (spaces allowed).
absl::StatusOr<std::vector<int64_t>> ParseList(const Instruction& inst,
                                               absl::string_view name,
                                               absl::string_view raw) {
  absl::string_view body = absl::StripAsciiWhitespace(raw);
  if (!absl::ConsumePrefix(&body, "{") || !absl::ConsumeSuffix(&body, "}")) {
    return Bad(inst, name, raw, "a list like {0,1}");
  }
  std::vector<int64_t> values;
  if (absl::StripAsciiWhitespace(body).empty()) return values;
  for (absl::string_view word : absl::StrSplit(body, ',')) {
    PJRT_ASSIGN_OR_RETURN(int64_t v, ParseInt(inst, name, raw, word));
    values.push_back(v);
  }
  return values;
}

// "1x2x3" (or "1" for one dimension).
absl::StatusOr<std::vector<int64_t>> ParseByX(const Instruction& inst,
                                              absl::string_view field,
                                              absl::string_view raw,
                                              absl::string_view text) {
  std::vector<int64_t> values;
  for (absl::string_view word : absl::StrSplit(text, 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(word, &v)) {
      return Bad(inst, absl::StrCat("window ", field), raw,
                 "a list of integers separated by 'x'");
    }
    values.push_back(v);
  }
  return values;
}

}  // namespace

absl::StatusOr<std::vector<WindowDimension>> ParseWindow(
    const Instruction& inst, int rank) {
  std::vector<WindowDimension> window(rank);
  const std::string* raw = inst.attributes().FindRaw("window");
  if (raw == nullptr) return window;
  absl::string_view body = absl::StripAsciiWhitespace(*raw);
  if (!absl::ConsumePrefix(&body, "{") || !absl::ConsumeSuffix(&body, "}")) {
    return Bad(inst, "window", *raw, "{size=... stride=... pad=...}");
  }
  for (absl::string_view field :
       absl::StrSplit(body, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(field, absl::MaxSplits('=', 1));
    const auto check_rank = [&](size_t n) -> absl::Status {
      if (static_cast<int>(n) != rank) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "window %s of %s has %d dimension(s); the operand has rank %d",
            kv.first, inst.Describe(), n, rank));
      }
      return absl::OkStatus();
    };
    if (kv.first == "pad") {
      std::vector<absl::string_view> dims = absl::StrSplit(kv.second, 'x');
      PJRT_RETURN_IF_ERROR(check_rank(dims.size()));
      for (int i = 0; i < rank; ++i) {
        std::vector<absl::string_view> lh = absl::StrSplit(dims[i], '_');
        if (lh.size() != 2 ||
            !absl::SimpleAtoi(lh[0], &window[i].padding_low) ||
            !absl::SimpleAtoi(lh[1], &window[i].padding_high)) {
          return Bad(inst, "window pad", *raw, "low_high pairs like 0_1x2_2");
        }
      }
      continue;
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                          ParseByX(inst, kv.first, *raw, kv.second));
    PJRT_RETURN_IF_ERROR(check_rank(values.size()));
    for (int i = 0; i < rank; ++i) {
      if (kv.first == "size") {
        window[i].size = values[i];
      } else if (kv.first == "stride") {
        window[i].stride = values[i];
      } else if (kv.first == "lhs_dilate") {
        window[i].base_dilation = values[i];
      } else if (kv.first == "rhs_dilate") {
        window[i].window_dilation = values[i];
      } else if (kv.first == "rhs_reversal") {
        window[i].reversal = values[i] != 0;
      } else {
        return Bad(inst, "window", *raw,
                   "made of size, stride, pad, lhs_dilate, rhs_dilate and "
                   "rhs_reversal");
      }
    }
  }
  for (int i = 0; i < rank; ++i) {
    const WindowDimension& w = window[i];
    if (w.size < 0 || w.stride < 1 || w.base_dilation < 1 ||
        w.window_dilation < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "window dimension %d of %s has size %d, stride %d, lhs_dilate %d "
          "and rhs_dilate %d; sizes must be >= 0 and the others >= 1",
          i, inst.Describe(), w.size, w.stride, w.base_dilation,
          w.window_dilation));
    }
  }
  return window;
}

absl::StatusOr<ConvolutionDimensions> ParseConvolutionDimensions(
    const Instruction& inst) {
  const std::string* raw = inst.attributes().FindRaw("dim_labels");
  if (raw == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s needs dim_labels= (like b01f_01io->b01f)", inst.Describe()));
  }
  std::vector<std::string> parts =
      absl::StrSplit(absl::StrReplaceAll(*raw, {{" ", ""}, {"->", "_"}}), '_');
  if (parts.size() != 3 || parts[0].size() != parts[1].size() ||
      parts[0].size() != parts[2].size() || parts[0].size() < 2) {
    return Bad(inst, "dim_labels", *raw,
               "three labelings of one rank like b01f_01io->b01f");
  }
  const int rank = static_cast<int>(parts[0].size());
  const int spatial = rank - 2;
  ConvolutionDimensions d;
  d.input_spatial.assign(spatial, -1);
  d.kernel_spatial.assign(spatial, -1);
  d.output_spatial.assign(spatial, -1);
  // Each labeling names its two special dimensions once and the spatial
  // dimensions 0..rank-3 once each.
  const auto read = [&](const std::string& labels, char a, char b, int64_t* pa,
                        int64_t* pb, std::vector<int64_t>* sp) -> absl::Status {
    *pa = *pb = -1;
    for (int i = 0; i < rank; ++i) {
      const char c = labels[i];
      int64_t* target = nullptr;
      if (c == a) {
        target = pa;
      } else if (c == b) {
        target = pb;
      } else if (c >= '0' && c <= '9' && c - '0' < spatial) {
        target = &(*sp)[c - '0'];
      }
      if (target == nullptr || *target != -1) {
        return Bad(inst, "dim_labels", *raw,
                   absl::StrFormat("a labeling where %c, %c and 0..%d each "
                                   "appear once in \"%s\"",
                                   a, b, spatial - 1, labels));
      }
      *target = i;
    }
    return absl::OkStatus();
  };
  PJRT_RETURN_IF_ERROR(read(parts[0], 'b', 'f', &d.input_batch,
                            &d.input_feature, &d.input_spatial));
  PJRT_RETURN_IF_ERROR(read(parts[1], 'i', 'o', &d.kernel_input_feature,
                            &d.kernel_output_feature, &d.kernel_spatial));
  PJRT_RETURN_IF_ERROR(read(parts[2], 'b', 'f', &d.output_batch,
                            &d.output_feature, &d.output_spatial));
  return d;
}

absl::StatusOr<int64_t> ParseIntAttribute(const Instruction& inst,
                                          absl::string_view name,
                                          int64_t default_value) {
  const std::string* raw = inst.attributes().FindRaw(name);
  if (raw == nullptr) return default_value;
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*raw), &value)) {
    return Bad(inst, name, *raw, "an integer");
  }
  return value;
}

absl::StatusOr<double> ParseRequiredFloatAttribute(const Instruction& inst,
                                                   absl::string_view name) {
  const std::string* raw = inst.attributes().FindRaw(name);
  if (raw == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s needs the attribute %s", inst.opcode_name(), name));
  }
  double value = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*raw), &value)) {
    return Bad(inst, name, *raw, "a number");
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> ParseIntListAttribute(
    const Instruction& inst, absl::string_view name) {
  const std::string* raw = inst.attributes().FindRaw(name);
  if (raw == nullptr) return std::vector<int64_t>();
  return ParseList(inst, name, *raw);
}

std::string WordAttribute(const Instruction& inst, absl::string_view name,
                          absl::string_view default_value) {
  const std::string* raw = inst.attributes().FindRaw(name);
  if (raw == nullptr) return std::string(default_value);
  return std::string(absl::StripAsciiWhitespace(*raw));
}

absl::StatusOr<bool> ParseBoolAttribute(const Instruction& inst,
                                        absl::string_view name,
                                        bool default_value) {
  const std::string* raw = inst.attributes().FindRaw(name);
  if (raw == nullptr) return default_value;
  absl::string_view word = absl::StripAsciiWhitespace(*raw);
  if (word == "true") return true;
  if (word == "false") return false;
  return Bad(inst, name, *raw, "true or false");
}

namespace {

// index_vector_dim=, which gather and scatter must have.
absl::StatusOr<int64_t> IndexVectorDim(const Instruction& inst) {
  if (inst.attributes().FindRaw("index_vector_dim") == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s needs index_vector_dim=", inst.Describe()));
  }
  return ParseIntAttribute(inst, "index_vector_dim", 0);
}

// Parses each named integer-list attribute into its field, in order.
absl::Status ParseIntLists(
    const Instruction& inst,
    std::initializer_list<std::pair<const char*, std::vector<int64_t>*>>
        fields) {
  for (const auto& [name, field] : fields) {
    PJRT_ASSIGN_OR_RETURN(*field, ParseIntListAttribute(inst, name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GatherDimensions> ParseGatherDimensions(
    const Instruction& inst) {
  GatherDimensions d;
  PJRT_RETURN_IF_ERROR(ParseIntLists(
      inst, {{"offset_dims", &d.offset_dims},
             {"collapsed_slice_dims", &d.collapsed_slice_dims},
             {"start_index_map", &d.start_index_map},
             {"operand_batching_dims", &d.operand_batching_dims},
             {"start_indices_batching_dims", &d.start_indices_batching_dims},
             {"slice_sizes", &d.slice_sizes}}));
  PJRT_ASSIGN_OR_RETURN(d.index_vector_dim, IndexVectorDim(inst));
  return d;
}

absl::StatusOr<ScatterDimensions> ParseScatterDimensions(
    const Instruction& inst) {
  ScatterDimensions d;
  PJRT_RETURN_IF_ERROR(ParseIntLists(
      inst,
      {{"update_window_dims", &d.update_window_dims},
       {"inserted_window_dims", &d.inserted_window_dims},
       {"scatter_dims_to_operand_dims", &d.scatter_dims_to_operand_dims},
       {"input_batching_dims", &d.input_batching_dims},
       {"scatter_indices_batching_dims", &d.scatter_indices_batching_dims}}));
  PJRT_ASSIGN_OR_RETURN(d.index_vector_dim, IndexVectorDim(inst));
  return d;
}

}  // namespace pjrt::hlo
