#include "hlo/dot_shapes.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "hlo/op_attributes.h"

namespace pjrt::hlo {
namespace {

bool Contains(absl::Span<const int64_t> v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string List(absl::Span<const int64_t> v) {
  return absl::StrCat("{", absl::StrJoin(v, ","), "}");
}

// Each of `dims` names a dimension of a `rank`-dimensional operand, once.
absl::Status CheckDimensionsIn(absl::Span<const int64_t> dims, int64_t rank,
                               absl::string_view what) {
  absl::flat_hash_set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s %d is out of range for rank %d", what, d, rank));
    }
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s %d is listed twice", what, d));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPairedSizes(const Shape& lhs, const Shape& rhs,
                              absl::Span<const int64_t> l,
                              absl::Span<const int64_t> r,
                              absl::string_view what) {
  for (size_t i = 0; i < l.size(); ++i) {
    if (lhs.dimensions(l[i]) != rhs.dimensions(r[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s dimension %d has size %d in lhs %s but %d in rhs %s", what, i,
          lhs.dimensions(l[i]), lhs.ToString(), rhs.dimensions(r[i]),
          rhs.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> DotResultDimensions(
    const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& d,
    absl::Span<const int64_t> rhs_excluded) {
  PJRT_RETURN_IF_ERROR(CheckDimensionsIn(d.lhs_batch_dimensions, lhs.rank(),
                                         "lhs batch dimension"));
  PJRT_RETURN_IF_ERROR(CheckDimensionsIn(d.rhs_batch_dimensions, rhs.rank(),
                                         "rhs batch dimension"));
  PJRT_RETURN_IF_ERROR(CheckDimensionsIn(
      d.lhs_contracting_dimensions, lhs.rank(), "lhs contracting dimension"));
  PJRT_RETURN_IF_ERROR(CheckDimensionsIn(
      d.rhs_contracting_dimensions, rhs.rank(), "rhs contracting dimension"));
  if (d.lhs_batch_dimensions.size() != d.rhs_batch_dimensions.size() ||
      d.lhs_contracting_dimensions.size() !=
          d.rhs_contracting_dimensions.size()) {
    return absl::InvalidArgumentError(
        "lhs and rhs must have as many batch dimensions, and as many "
        "contracting dimensions, as each other");
  }
  for (const auto& [side, batch, contracting] :
       {std::make_tuple("lhs", &d.lhs_batch_dimensions,
                        &d.lhs_contracting_dimensions),
        std::make_tuple("rhs", &d.rhs_batch_dimensions,
                        &d.rhs_contracting_dimensions)}) {
    for (int64_t b : *batch) {
      if (Contains(*contracting, b)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s dimension %d is both a batch and a contracting dimension", side,
            b));
      }
    }
  }
  PJRT_RETURN_IF_ERROR(CheckPairedSizes(lhs, rhs, d.lhs_batch_dimensions,
                                        d.rhs_batch_dimensions, "batch"));
  PJRT_RETURN_IF_ERROR(CheckPairedSizes(lhs, rhs, d.lhs_contracting_dimensions,
                                        d.rhs_contracting_dimensions,
                                        "contracting"));
  std::vector<int64_t> dims;
  for (int64_t b : d.lhs_batch_dimensions) dims.push_back(lhs.dimensions(b));
  for (int64_t i = 0; i < lhs.rank(); ++i) {
    if (!Contains(d.lhs_batch_dimensions, i) &&
        !Contains(d.lhs_contracting_dimensions, i)) {
      dims.push_back(lhs.dimensions(i));
    }
  }
  for (int64_t i = 0; i < rhs.rank(); ++i) {
    if (!Contains(d.rhs_batch_dimensions, i) &&
        !Contains(d.rhs_contracting_dimensions, i) &&
        !Contains(rhs_excluded, i)) {
      dims.push_back(rhs.dimensions(i));
    }
  }
  return dims;
}

absl::StatusOr<RaggedDot> AnalyzeRaggedDot(
    const Shape& lhs, const Shape& rhs, const Shape& group_sizes,
    const DotDimensionNumbers& dot, absl::Span<const int64_t> lhs_ragged,
    absl::Span<const int64_t> rhs_group) {
  RaggedDot r;
  r.dot = dot;
  r.rhs_group.assign(rhs_group.begin(), rhs_group.end());
  const PrimitiveType st = group_sizes.element_type();
  if (!IsSignedInteger(st) && !IsUnsignedInteger(st)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "group_sizes is %s; it must hold integers", group_sizes.ToString()));
  }
  if (lhs_ragged.size() != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "lhs ragged dimensions %s must be exactly one dimension of lhs %s",
        List(lhs_ragged), lhs.ToString()));
  }
  r.lhs_ragged = lhs_ragged[0];
  PJRT_RETURN_IF_ERROR(
      CheckDimensionsIn(lhs_ragged, lhs.rank(), "lhs ragged dimension"));
  PJRT_RETURN_IF_ERROR(
      CheckDimensionsIn(rhs_group, rhs.rank(), "rhs group dimension"));
  for (int64_t g : rhs_group) {
    if (Contains(dot.rhs_batch_dimensions, g) ||
        Contains(dot.rhs_contracting_dimensions, g)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "rhs group dimension %d is also a batch or contracting dimension",
          g));
    }
  }
  PJRT_ASSIGN_OR_RETURN(r.result_dimensions,
                        DotResultDimensions(lhs, rhs, dot, rhs_group));
  const auto& lb = dot.lhs_batch_dimensions;
  const auto& lc = dot.lhs_contracting_dimensions;
  r.prefix = lb;
  if (const auto at = std::find(lb.begin(), lb.end(), r.lhs_ragged);
      at != lb.end()) {
    r.mode = RaggedDot::Mode::kBatch;
    r.prefix.resize(at - lb.begin());
  } else if (const auto at = std::find(lc.begin(), lc.end(), r.lhs_ragged);
             at != lc.end()) {
    r.mode = RaggedDot::Mode::kContracting;
    r.prefix.insert(r.prefix.end(), lc.begin(), at);
  } else {
    r.mode = RaggedDot::Mode::kNonContracting;
    for (int64_t i = 0; i < r.lhs_ragged; ++i) {
      if (!Contains(lb, i) && !Contains(lc, i)) r.prefix.push_back(i);
    }
  }
  std::vector<int64_t> expected;
  for (int64_t d : r.prefix) expected.push_back(lhs.dimensions(d));
  const int64_t rank = group_sizes.rank();
  if (rank == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("group_sizes is %s; it needs a dimension of the groups",
                        group_sizes.ToString()));
  }
  r.groups = group_sizes.dimensions(rank - 1);
  expected.push_back(r.groups);
  if (rank != 1 && !std::equal(expected.begin(), expected.end(),
                               group_sizes.dimensions().begin(),
                               group_sizes.dimensions().end())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "group_sizes is %s; for lhs %s with ragged dimension %d it must be "
        "[%d] or [%s]",
        group_sizes.ToString(), lhs.ToString(), r.lhs_ragged, r.groups,
        absl::StrJoin(expected, ",")));
  }
  if (r.mode == RaggedDot::Mode::kNonContracting) {
    if (rhs_group.size() != 1 || rhs.dimensions(rhs_group[0]) != r.groups) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rhs group dimensions %s: a ragged non-contracting "
                          "lhs dimension needs "
                          "one rhs dimension of the %d groups; rhs is %s",
                          List(rhs_group), r.groups, rhs.ToString()));
    }
  } else if (!rhs_group.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rhs group dimensions %s must be none: the lhs ragged dimension %d is "
        "a "
        "%s dimension",
        List(rhs_group), r.lhs_ragged,
        r.mode == RaggedDot::Mode::kBatch ? "batch" : "contracting"));
  }
  if (r.mode == RaggedDot::Mode::kContracting) {
    r.result_dimensions.insert(r.result_dimensions.begin(), r.groups);
  }
  return r;
}

absl::StatusOr<RaggedDot> AnalyzeRaggedDot(const Instruction& inst) {
  const auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat(inst.opcode_name(), ": ", s.message()));
  };
  if (inst.operand_count() != 3) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("takes lhs, rhs and group_sizes, got %d operand(s)",
                        inst.operand_count())));
  }
  for (int i = 0; i < 3; ++i) {
    if (!inst.operand(i)->shape().IsArray()) {
      return fail(absl::InvalidArgumentError(absl::StrFormat(
          "operand %d (%%%s) is %s; an array is needed", i,
          inst.operand(i)->name(), inst.operand(i)->shape().ToString())));
    }
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> ragged,
                        ParseIntListAttribute(inst, "lhs_ragged_dims"));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group,
                        ParseIntListAttribute(inst, "rhs_group_dims"));
  absl::StatusOr<RaggedDot> r =
      AnalyzeRaggedDot(inst.operand(0)->shape(), inst.operand(1)->shape(),
                       inst.operand(2)->shape(),
                       inst.attributes().dot_dimension_numbers, ragged, group);
  if (!r.ok()) return fail(r.status());
  return r;
}

bool IsPlainRaggedDot(const Instruction& inst) {
  if (inst.opcode() != Opcode::kRaggedDot) return false;
  absl::StatusOr<RaggedDot> r = AnalyzeRaggedDot(inst);
  if (!r.ok() || !r->dot.lhs_batch_dimensions.empty() || !r->prefix.empty() ||
      r->dot.lhs_contracting_dimensions.size() != 1) {
    return false;
  }
  const Shape& lhs = inst.operand(0)->shape();
  const Shape& rhs = inst.operand(1)->shape();
  const PrimitiveType t = inst.shape().element_type();
  if ((t != PrimitiveType::kF32 && t != PrimitiveType::kF64) ||
      lhs.element_type() != t || rhs.element_type() != t ||
      inst.operand(2)->shape().rank() != 1 || lhs.rank() != 2) {
    return false;
  }
  switch (r->mode) {
    case RaggedDot::Mode::kNonContracting:
      return rhs.rank() == 3 && r->rhs_group.size() == 1 &&
             r->rhs_group[0] != 2;
    case RaggedDot::Mode::kContracting:
      return rhs.rank() == 2 && r->rhs_group.empty();
    case RaggedDot::Mode::kBatch:
      return false;
  }
  return false;
}

absl::StatusOr<Shape> InferRaggedDotShape(const Instruction& inst) {
  PJRT_ASSIGN_OR_RETURN(const RaggedDot r, AnalyzeRaggedDot(inst));
  for (int i = 0; i < 2; ++i) {
    if (inst.operand(i)->shape().element_type() == PrimitiveType::kPred) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: needs numeric lhs and rhs, not pred", inst.opcode_name()));
    }
  }
  const PrimitiveType t = inst.shape().IsArray() ? inst.shape().element_type()
                                                 : PrimitiveType::kPred;
  if (t == PrimitiveType::kPred) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: produces a numeric array, not %s",
                        inst.opcode_name(), inst.shape().ToString()));
  }
  // The expansion's largest intermediate (hlo/passes.h): every row against
  // every group's rhs, or a copy of lhs per group.
  std::vector<int64_t> widest;
  if (r.mode == RaggedDot::Mode::kNonContracting) {
    widest = r.result_dimensions;
    widest.push_back(r.groups);
  } else if (r.mode == RaggedDot::Mode::kContracting) {
    const Shape& lhs = inst.operand(0)->shape();
    widest.assign(lhs.dimensions().begin(), lhs.dimensions().end());
    widest.push_back(r.groups);
  }
  if (absl::Status fits = CheckShapeLimits(Shape(t, widest)); !fits.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        inst.opcode_name(),
        ": computing it takes a product per group: ", fits.message()));
  }
  return Shape(t, r.result_dimensions);
}

}  // namespace pjrt::hlo
