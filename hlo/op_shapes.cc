#include "hlo/op_shapes.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "hlo/op_attributes.h"

namespace pjrt::hlo {
namespace {

absl::Status Invalid(const Instruction& inst, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(inst.opcode_name(), ": ", message));
}

std::string List(absl::Span<const int64_t> v) {
  return absl::StrCat("{", absl::StrJoin(v, ","), "}");
}

bool Contains(absl::Span<const int64_t> v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

absl::Status ExpectCount(const Instruction& inst, int count) {
  if (inst.operand_count() != count) {
    return Invalid(inst, absl::StrFormat("takes %d operand(s), got %d", count,
                                         inst.operand_count()));
  }
  return absl::OkStatus();
}

absl::Status ExpectArray(const Instruction& inst, int i) {
  if (!inst.operand(i)->shape().IsArray()) {
    return Invalid(inst, absl::StrFormat("operand %d (%%%s) is %s; an array is "
                                         "needed",
                                         i, inst.operand(i)->name(),
                                         inst.operand(i)->shape().ToString()));
  }
  return absl::OkStatus();
}

// Exactly `count` operands, every one an array.
absl::Status ExpectArrays(const Instruction& inst, int count) {
  PJRT_RETURN_IF_ERROR(ExpectCount(inst, count));
  for (int i = 0; i < count; ++i) PJRT_RETURN_IF_ERROR(ExpectArray(inst, i));
  return absl::OkStatus();
}

// Called computation `index` (named `what` in messages).
absl::StatusOr<const Computation*> Callee(const Instruction& inst, size_t index,
                                          absl::string_view what) {
  if (inst.called_computations().size() <= index) {
    return Invalid(inst, absl::StrFormat("needs a %s computation", what));
  }
  return inst.called_computations()[index];
}

// `region` must take `params` and return `result`.
absl::Status CheckRegion(const Instruction& inst, const Computation& region,
                         absl::string_view role,
                         const std::vector<Shape>& params,
                         const Shape& result) {
  if (region.parameters().size() != params.size()) {
    std::vector<std::string> want;
    for (const Shape& s : params) want.push_back(s.ToString());
    return Invalid(
        inst, absl::StrFormat("the %s %s takes %d parameter(s); it must take "
                              "(%s)",
                              role, region.name(), region.parameters().size(),
                              absl::StrJoin(want, ", ")));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (region.parameters()[i]->shape() != params[i]) {
      return Invalid(
          inst, absl::StrFormat("parameter %d of the %s %s is %s; expected %s",
                                i, role, region.name(),
                                region.parameters()[i]->shape().ToString(),
                                params[i].ToString()));
    }
  }
  if (region.root()->shape() != result) {
    return Invalid(
        inst, absl::StrFormat("the %s %s returns %s; expected %s", role,
                              region.name(), region.root()->shape().ToString(),
                              result.ToString()));
  }
  return absl::OkStatus();
}

Shape Scalar(PrimitiveType type) { return Shape(type, {}); }

Shape TupleOrSingle(std::vector<Shape> shapes) {
  return shapes.size() == 1 ? shapes[0] : Shape::Tuple(std::move(shapes));
}

// Sorted, distinct, each in [0, bound).
absl::Status CheckDims(const Instruction& inst, absl::string_view name,
                       absl::Span<const int64_t> dims, int64_t bound,
                       bool sorted) {
  absl::flat_hash_set<int64_t> seen;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= bound) {
      return Invalid(inst, absl::StrFormat("%s=%s names dimension %d; it must "
                                           "be in [0, %d)",
                                           name, List(dims), dims[i], bound));
    }
    if (!seen.insert(dims[i]).second) {
      return Invalid(inst, absl::StrFormat("%s=%s names dimension %d twice",
                                           name, List(dims), dims[i]));
    }
    if (sorted && i > 0 && dims[i] < dims[i - 1]) {
      return Invalid(inst,
                     absl::StrFormat("%s=%s must be sorted", name, List(dims)));
    }
  }
  return absl::OkStatus();
}

// The dimensions of `indices` that index (every one but index_vector_dim),
// and the length of the index vector.
absl::Status IndexBatch(const Instruction& inst, const Shape& indices,
                        int64_t index_vector_dim, std::vector<int64_t>* batch,
                        int64_t* vector_size) {
  if (!IsSignedInteger(indices.element_type()) &&
      !IsUnsignedInteger(indices.element_type())) {
    return Invalid(inst, absl::StrFormat("indices must be integers, not %s",
                                         indices.ToString()));
  }
  if (index_vector_dim < 0 || index_vector_dim > indices.rank()) {
    return Invalid(
        inst,
        absl::StrFormat("index_vector_dim=%d must be in [0, %d] for "
                        "indices %s",
                        index_vector_dim, indices.rank(), indices.ToString()));
  }
  batch->clear();
  for (int i = 0; i < indices.rank(); ++i) {
    if (i != index_vector_dim) batch->push_back(i);
  }
  *vector_size = index_vector_dim == indices.rank()
                     ? 1
                     : indices.dimensions(index_vector_dim);
  return absl::OkStatus();
}

// operand_batching_dims / start_indices_batching_dims (and scatter's
// input_batching_dims / scatter_indices_batching_dims) pair up.
absl::Status CheckBatching(const Instruction& inst, const Shape& operand,
                           const Shape& indices, int64_t index_vector_dim,
                           absl::Span<const int64_t> operand_batching,
                           absl::Span<const int64_t> indices_batching,
                           absl::string_view operand_name,
                           absl::string_view indices_name) {
  PJRT_RETURN_IF_ERROR(CheckDims(inst, operand_name, operand_batching,
                                 operand.rank(), /*sorted=*/false));
  PJRT_RETURN_IF_ERROR(CheckDims(inst, indices_name, indices_batching,
                                 indices.rank(), /*sorted=*/false));
  if (operand_batching.size() != indices_batching.size()) {
    return Invalid(inst, absl::StrFormat("%s=%s and %s=%s must have the same "
                                         "length",
                                         operand_name, List(operand_batching),
                                         indices_name, List(indices_batching)));
  }
  for (size_t i = 0; i < operand_batching.size(); ++i) {
    if (indices_batching[i] == index_vector_dim) {
      return Invalid(inst, absl::StrFormat("%s=%s includes index_vector_dim %d",
                                           indices_name, List(indices_batching),
                                           index_vector_dim));
    }
    if (operand.dimensions(operand_batching[i]) !=
        indices.dimensions(indices_batching[i])) {
      return Invalid(
          inst, absl::StrFormat(
                    "batching dimension %d has size %d in the operand but %d "
                    "in the indices",
                    i, operand.dimensions(operand_batching[i]),
                    indices.dimensions(indices_batching[i])));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shape> InferWhileShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectCount(inst, 1));
  PJRT_ASSIGN_OR_RETURN(const Computation* cond, Callee(inst, 0, "condition"));
  PJRT_ASSIGN_OR_RETURN(const Computation* body, Callee(inst, 1, "body"));
  const Shape& state = inst.operand(0)->shape();
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *cond, "condition", {state},
                                   Scalar(PrimitiveType::kPred)));
  if (body->parameters().size() == 1 &&
      body->parameters()[0]->shape() == state &&
      body->root()->shape() != state) {
    return Invalid(
        inst, absl::StrFormat("the body %s changes the loop state from %s to "
                              "%s; it must return the shape it takes",
                              body->name(), state.ToString(),
                              body->root()->shape().ToString()));
  }
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *body, "body", {state}, state));
  return state;
}

absl::StatusOr<Shape> InferConditionalShape(const Instruction& inst) {
  if (inst.operand_count() < 1) {
    return Invalid(inst, "needs a predicate or branch index operand");
  }
  const Shape& selector = inst.operand(0)->shape();
  const size_t branches = inst.called_computations().size();
  if (selector == Scalar(PrimitiveType::kPred)) {
    if (branches != 2) {
      return Invalid(
          inst, absl::StrFormat("a pred[] selector needs true_computation and "
                                "false_computation; %d computation(s) given",
                                branches));
    }
  } else if (selector != Scalar(PrimitiveType::kS32)) {
    return Invalid(
        inst, absl::StrFormat("operand 0 selects the branch and must be pred[] "
                              "or s32[], not %s",
                              selector.ToString()));
  } else if (branches < 1) {
    return Invalid(inst, "an s32[] selector needs branch_computations={...}");
  }
  if (static_cast<size_t>(inst.operand_count()) != branches + 1) {
    return Invalid(
        inst, absl::StrFormat("%d branch(es) need %d operand(s) after the "
                              "selector; got %d",
                              branches, branches, inst.operand_count() - 1));
  }
  const Shape& result = inst.called_computations()[0]->root()->shape();
  for (size_t b = 0; b < branches; ++b) {
    const Computation& branch = *inst.called_computations()[b];
    PJRT_RETURN_IF_ERROR(
        CheckRegion(inst, branch, absl::StrFormat("branch %d", b),
                    {inst.operand(static_cast<int>(b) + 1)->shape()}, result));
  }
  return result;
}

absl::StatusOr<Shape> InferMapShape(const Instruction& inst) {
  if (inst.operand_count() < 1) return Invalid(inst, "needs an operand");
  PJRT_ASSIGN_OR_RETURN(const Computation* f, Callee(inst, 0, "to_apply"));
  std::vector<Shape> params;
  const Shape& first = inst.operand(0)->shape();
  for (int i = 0; i < inst.operand_count(); ++i) {
    PJRT_RETURN_IF_ERROR(ExpectArray(inst, i));
    const Shape& s = inst.operand(i)->shape();
    if (s.dimensions() != first.dimensions()) {
      return Invalid(inst, absl::StrFormat("operands must have the same "
                                           "dimensions; %s and %s differ",
                                           first.ToString(), s.ToString()));
    }
    params.push_back(Scalar(s.element_type()));
  }
  const Shape& root = f->root()->shape();
  if (!root.IsArray() || root.rank() != 0) {
    return Invalid(inst, absl::StrFormat("the computation %s must return a "
                                         "scalar, not %s",
                                         f->name(), root.ToString()));
  }
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *f, "computation", params, root));
  return first.WithElementType(root.element_type());
}

absl::StatusOr<Shape> InferGatherShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 2));
  const Shape& operand = inst.operand(0)->shape();
  const Shape& indices = inst.operand(1)->shape();
  PJRT_ASSIGN_OR_RETURN(GatherDimensions d, ParseGatherDimensions(inst));
  std::vector<int64_t> batch;
  int64_t vector_size = 0;
  PJRT_RETURN_IF_ERROR(
      IndexBatch(inst, indices, d.index_vector_dim, &batch, &vector_size));
  if (static_cast<int64_t>(d.start_index_map.size()) != vector_size) {
    return Invalid(
        inst,
        absl::StrFormat("start_index_map=%s has %d entries but the index "
                        "vector (dimension %d of %s) has %d",
                        List(d.start_index_map), d.start_index_map.size(),
                        d.index_vector_dim, indices.ToString(), vector_size));
  }
  PJRT_RETURN_IF_ERROR(CheckDims(inst, "start_index_map", d.start_index_map,
                                 operand.rank(), /*sorted=*/false));
  PJRT_RETURN_IF_ERROR(CheckDims(inst, "collapsed_slice_dims",
                                 d.collapsed_slice_dims, operand.rank(),
                                 /*sorted=*/true));
  PJRT_RETURN_IF_ERROR(
      CheckBatching(inst, operand, indices, d.index_vector_dim,
                    d.operand_batching_dims, d.start_indices_batching_dims,
                    "operand_batching_dims", "start_indices_batching_dims"));
  if (d.slice_sizes.size() != static_cast<size_t>(operand.rank())) {
    return Invalid(
        inst, absl::StrFormat("slice_sizes=%s has %d entries; the operand %s "
                              "has rank %d",
                              List(d.slice_sizes), d.slice_sizes.size(),
                              operand.ToString(), operand.rank()));
  }
  for (int i = 0; i < operand.rank(); ++i) {
    if (d.slice_sizes[i] < 0 || d.slice_sizes[i] > operand.dimensions(i)) {
      return Invalid(
          inst, absl::StrFormat("slice_sizes[%d]=%d must be in [0, %d] (the "
                                "operand's dimension %d)",
                                i, d.slice_sizes[i], operand.dimensions(i), i));
    }
    const bool collapsed = Contains(d.collapsed_slice_dims, i);
    const bool batching = Contains(d.operand_batching_dims, i);
    if (collapsed && batching) {
      return Invalid(
          inst,
          absl::StrFormat("dimension %d is both collapsed and batching", i));
    }
    if ((collapsed || batching) && d.slice_sizes[i] > 1) {
      return Invalid(
          inst,
          absl::StrFormat("slice_sizes[%d]=%d but dimension %d is %s, so "
                          "its slice size must be 1",
                          i, d.slice_sizes[i], i,
                          collapsed ? "collapsed" : "a batching dimension"));
    }
    if (batching && Contains(d.start_index_map, i)) {
      return Invalid(inst, absl::StrFormat("start_index_map=%s names batching "
                                           "dimension %d",
                                           List(d.start_index_map), i));
    }
  }
  const int64_t offsets = operand.rank() -
                          static_cast<int64_t>(d.collapsed_slice_dims.size()) -
                          static_cast<int64_t>(d.operand_batching_dims.size());
  if (static_cast<int64_t>(d.offset_dims.size()) != offsets) {
    return Invalid(
        inst, absl::StrFormat("offset_dims=%s has %d entries; the operand's "
                              "rank %d less %d collapsed and %d batching "
                              "dimensions leaves %d",
                              List(d.offset_dims), d.offset_dims.size(),
                              operand.rank(), d.collapsed_slice_dims.size(),
                              d.operand_batching_dims.size(), offsets));
  }
  const int64_t out_rank = static_cast<int64_t>(batch.size()) + offsets;
  PJRT_RETURN_IF_ERROR(
      CheckDims(inst, "offset_dims", d.offset_dims, out_rank, /*sorted=*/true));
  std::vector<int64_t> window;
  for (int i = 0; i < operand.rank(); ++i) {
    if (!Contains(d.collapsed_slice_dims, i) &&
        !Contains(d.operand_batching_dims, i)) {
      window.push_back(d.slice_sizes[i]);
    }
  }
  std::vector<int64_t> dims;
  size_t next_window = 0, next_batch = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (Contains(d.offset_dims, i)) {
      dims.push_back(window[next_window++]);
    } else {
      dims.push_back(indices.dimensions(batch[next_batch++]));
    }
  }
  return Shape(operand.element_type(), dims);
}

absl::StatusOr<Shape> InferScatterShape(const Instruction& inst) {
  if (inst.operand_count() < 3 || inst.operand_count() % 2 != 1) {
    return Invalid(
        inst, absl::StrFormat("takes N inputs, the indices and N updates; got "
                              "%d operands",
                              inst.operand_count()));
  }
  const int n = inst.operand_count() / 2;
  for (int i = 0; i < inst.operand_count(); ++i) {
    PJRT_RETURN_IF_ERROR(ExpectArray(inst, i));
  }
  const Shape& operand = inst.operand(0)->shape();
  const Shape& indices = inst.operand(n)->shape();
  const Shape& updates = inst.operand(n + 1)->shape();
  PJRT_ASSIGN_OR_RETURN(ScatterDimensions d, ParseScatterDimensions(inst));
  std::vector<int64_t> batch;
  int64_t vector_size = 0;
  PJRT_RETURN_IF_ERROR(
      IndexBatch(inst, indices, d.index_vector_dim, &batch, &vector_size));
  if (static_cast<int64_t>(d.scatter_dims_to_operand_dims.size()) !=
      vector_size) {
    return Invalid(
        inst,
        absl::StrFormat("scatter_dims_to_operand_dims=%s has %d entries "
                        "but the index vector (dimension %d of %s) has %d",
                        List(d.scatter_dims_to_operand_dims),
                        d.scatter_dims_to_operand_dims.size(),
                        d.index_vector_dim, indices.ToString(), vector_size));
  }
  PJRT_RETURN_IF_ERROR(CheckDims(inst, "scatter_dims_to_operand_dims",
                                 d.scatter_dims_to_operand_dims, operand.rank(),
                                 /*sorted=*/false));
  PJRT_RETURN_IF_ERROR(CheckDims(inst, "inserted_window_dims",
                                 d.inserted_window_dims, operand.rank(),
                                 /*sorted=*/true));
  PJRT_RETURN_IF_ERROR(
      CheckBatching(inst, operand, indices, d.index_vector_dim,
                    d.input_batching_dims, d.scatter_indices_batching_dims,
                    "input_batching_dims", "scatter_indices_batching_dims"));
  for (int64_t b : d.input_batching_dims) {
    if (Contains(d.inserted_window_dims, b) ||
        Contains(d.scatter_dims_to_operand_dims, b)) {
      return Invalid(
          inst, absl::StrFormat("input batching dimension %d is also inserted "
                                "or indexed",
                                b));
    }
  }
  PJRT_RETURN_IF_ERROR(CheckDims(inst, "update_window_dims",
                                 d.update_window_dims, updates.rank(),
                                 /*sorted=*/true));
  const int64_t window_rank =
      operand.rank() - static_cast<int64_t>(d.inserted_window_dims.size()) -
      static_cast<int64_t>(d.input_batching_dims.size());
  if (static_cast<int64_t>(d.update_window_dims.size()) != window_rank) {
    return Invalid(
        inst,
        absl::StrFormat("update_window_dims=%s has %d entries; the "
                        "operand's rank %d less %d inserted and %d "
                        "batching dimensions leaves %d",
                        List(d.update_window_dims), d.update_window_dims.size(),
                        operand.rank(), d.inserted_window_dims.size(),
                        d.input_batching_dims.size(), window_rank));
  }
  if (updates.rank() !=
      static_cast<int>(batch.size() + d.update_window_dims.size())) {
    return Invalid(
        inst, absl::StrFormat("updates %s must have rank %d (%d scatter and %d "
                              "window dimensions)",
                              updates.ToString(),
                              batch.size() + d.update_window_dims.size(),
                              batch.size(), d.update_window_dims.size()));
  }
  std::vector<int64_t> window_operand_dims;
  for (int i = 0; i < operand.rank(); ++i) {
    if (!Contains(d.inserted_window_dims, i) &&
        !Contains(d.input_batching_dims, i)) {
      window_operand_dims.push_back(i);
    }
  }
  size_t next_window = 0, next_batch = 0;
  for (int i = 0; i < updates.rank(); ++i) {
    if (Contains(d.update_window_dims, i)) {
      const int64_t od = window_operand_dims[next_window++];
      if (updates.dimensions(i) > operand.dimensions(od)) {
        return Invalid(
            inst, absl::StrFormat("update window dimension %d has size %d, "
                                  "more than the operand's dimension %d (%d)",
                                  i, updates.dimensions(i), od,
                                  operand.dimensions(od)));
      }
    } else if (updates.dimensions(i) !=
               indices.dimensions(batch[next_batch++])) {
      return Invalid(
          inst, absl::StrFormat("update scatter dimension %d has size %d but "
                                "the indices' matching dimension %d has %d",
                                i, updates.dimensions(i), batch[next_batch - 1],
                                indices.dimensions(batch[next_batch - 1])));
    }
  }
  std::vector<Shape> results, params;
  for (int i = 0; i < n; ++i) {
    const Shape& in = inst.operand(i)->shape();
    const Shape& up = inst.operand(n + 1 + i)->shape();
    if (in.dimensions() != operand.dimensions() ||
        up.dimensions() != updates.dimensions()) {
      return Invalid(inst, absl::StrFormat(
                               "input %d (%s) and update %d (%s) must have the "
                               "dimensions of input 0 (%s) and update 0 (%s)",
                               i, in.ToString(), i, up.ToString(),
                               operand.ToString(), updates.ToString()));
    }
    if (in.element_type() != up.element_type()) {
      return Invalid(inst, absl::StrFormat("input %d is %s but update %d is %s",
                                           i, in.ToString(), i, up.ToString()));
    }
    results.push_back(in);
  }
  for (int i = 0; i < 2 * n; ++i) {
    params.push_back(Scalar(results[i % n].element_type()));
  }
  std::vector<Shape> region_result(params.begin(), params.begin() + n);
  PJRT_ASSIGN_OR_RETURN(const Computation* f, Callee(inst, 0, "update"));
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *f, "update computation", params,
                                   TupleOrSingle(region_result)));
  return TupleOrSingle(results);
}

absl::StatusOr<Shape> InferSortShape(const Instruction& inst) {
  if (inst.operand_count() < 1) return Invalid(inst, "needs an operand");
  const Shape& first = inst.operand(0)->shape();
  std::vector<Shape> results, params;
  for (int i = 0; i < inst.operand_count(); ++i) {
    PJRT_RETURN_IF_ERROR(ExpectArray(inst, i));
    const Shape& s = inst.operand(i)->shape();
    if (s.dimensions() != first.dimensions()) {
      return Invalid(inst, absl::StrFormat("operands must have the same "
                                           "dimensions; %s and %s differ",
                                           first.ToString(), s.ToString()));
    }
    results.push_back(s);
    params.push_back(Scalar(s.element_type()));
    params.push_back(Scalar(s.element_type()));
  }
  const std::vector<int64_t>& dims = inst.attributes().dimensions;
  if (dims.size() != 1 || dims[0] < 0 || dims[0] >= std::max(first.rank(), 1)) {
    return Invalid(
        inst, absl::StrFormat("dimensions=%s must name one dimension of %s",
                              List(dims), first.ToString()));
  }
  PJRT_ASSIGN_OR_RETURN(const Computation* cmp, Callee(inst, 0, "comparator"));
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *cmp, "comparator", params,
                                   Scalar(PrimitiveType::kPred)));
  return TupleOrSingle(results);
}

absl::StatusOr<std::vector<int64_t>> WindowOutputDimensions(
    const Instruction& inst, absl::Span<const int64_t> dims) {
  PJRT_ASSIGN_OR_RETURN(std::vector<WindowDimension> window,
                        ParseWindow(inst, static_cast<int>(dims.size())));
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDimension& w = window[i];
    // 128-bit: every field comes from the client.
    using Wide = __int128;
    const Wide dilated =
        dims[i] == 0 ? 0 : Wide{dims[i] - 1} * w.base_dilation + 1;
    const Wide padded = dilated + w.padding_low + w.padding_high;
    const Wide extent =
        w.size == 0 ? 0 : Wide{w.size - 1} * w.window_dilation + 1;
    Wide count = 0;
    if (padded >= extent) count = (padded - extent) / w.stride + 1;
    // Bounds that keep a kernel's window arithmetic within 64 bits: every
    // field, the padded operand and the dilated window at most 2^56 in
    // magnitude; a base dilation below 2^31 where it spreads elements
    // apart.
    constexpr Wide kMaxField = Wide{1} << 56;
    const auto small = [&](Wide v) {
      return v <= kMaxField && -v <= kMaxField;
    };
    const bool in_bounds = small(w.size) && small(w.stride) &&
                           small(w.base_dilation) && small(w.window_dilation) &&
                           small(w.padding_low) && small(w.padding_high) &&
                           small(padded) && small(extent) &&
                           (dims[i] <= 1 || w.base_dilation <= INT32_MAX);
    if (!in_bounds) {
      return Invalid(
          inst,
          absl::StrFormat(
              "window dimension %zu (size %d, stride %d, pad %d_%d, "
              "dilations %d and %d) over %d elements is out of bounds: its "
              "fields, the padded operand and the dilated window must be at "
              "most 2^56, and a base dilation at most %d",
              i, w.size, w.stride, w.padding_low, w.padding_high,
              w.base_dilation, w.window_dilation, dims[i], INT32_MAX));
    }
    if (padded < 0 || count > kMaxArrayBytes) {
      return Invalid(
          inst,
          absl::StrFormat("window dimension %zu (size %d, stride %d, pad "
                          "%d_%d, dilations %d and %d) over %d elements "
                          "gives no valid shape",
                          i, w.size, w.stride, w.padding_low, w.padding_high,
                          w.base_dilation, w.window_dilation, dims[i]));
    }
    out.push_back(static_cast<int64_t>(count));
  }
  return out;
}

absl::StatusOr<Shape> InferReduceWindowShape(const Instruction& inst) {
  if (inst.operand_count() < 2 || inst.operand_count() % 2 != 0) {
    return Invalid(
        inst, absl::StrFormat("takes N inputs and N initial values; got %d "
                              "operands",
                              inst.operand_count()));
  }
  const int n = inst.operand_count() / 2;
  const Shape& first = inst.operand(0)->shape();
  std::vector<Shape> params;
  for (int i = 0; i < 2 * n; ++i) PJRT_RETURN_IF_ERROR(ExpectArray(inst, i));
  for (int i = 0; i < n; ++i) {
    const Shape& in = inst.operand(i)->shape();
    const Shape& init = inst.operand(n + i)->shape();
    if (in.dimensions() != first.dimensions()) {
      return Invalid(inst, absl::StrFormat("inputs must have the same "
                                           "dimensions; %s and %s differ",
                                           first.ToString(), in.ToString()));
    }
    if (init != Scalar(in.element_type())) {
      return Invalid(inst,
                     absl::StrFormat("initial value %d must be %s, not %s", i,
                                     Scalar(in.element_type()).ToString(),
                                     init.ToString()));
    }
    params.push_back(Scalar(in.element_type()));
  }
  std::vector<Shape> region_params = params;
  region_params.insert(region_params.end(), params.begin(), params.end());
  PJRT_ASSIGN_OR_RETURN(const Computation* f, Callee(inst, 0, "reducer"));
  PJRT_RETURN_IF_ERROR(
      CheckRegion(inst, *f, "reducer", region_params, TupleOrSingle(params)));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        WindowOutputDimensions(inst, first.dimensions()));
  std::vector<Shape> results;
  for (int i = 0; i < n; ++i) {
    results.push_back(Shape(inst.operand(i)->shape().element_type(), dims));
  }
  return TupleOrSingle(results);
}

absl::StatusOr<Shape> InferSelectAndScatterShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 3));
  const Shape& operand = inst.operand(0)->shape();
  const Shape& source = inst.operand(1)->shape();
  const Shape& init = inst.operand(2)->shape();
  const Shape scalar = Scalar(operand.element_type());
  if (init != Scalar(source.element_type())) {
    return Invalid(inst,
                   absl::StrFormat("the initial value must be %s, not %s",
                                   Scalar(source.element_type()).ToString(),
                                   init.ToString()));
  }
  PJRT_ASSIGN_OR_RETURN(const Computation* select, Callee(inst, 0, "select"));
  PJRT_ASSIGN_OR_RETURN(const Computation* scatter, Callee(inst, 1, "scatter"));
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *select, "select", {scalar, scalar},
                                   Scalar(PrimitiveType::kPred)));
  const Shape source_scalar = Scalar(source.element_type());
  PJRT_RETURN_IF_ERROR(CheckRegion(inst, *scatter, "scatter",
                                   {source_scalar, source_scalar},
                                   source_scalar));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> windows,
                        WindowOutputDimensions(inst, operand.dimensions()));
  PJRT_ASSIGN_OR_RETURN(std::vector<WindowDimension> window,
                        ParseWindow(inst, operand.rank()));
  for (const WindowDimension& w : window) {
    if (w.base_dilation != 1 || w.window_dilation != 1) {
      return Invalid(inst,
                     "the window of select-and-scatter cannot be "
                     "dilated");
    }
  }
  if (source.dimensions() != absl::MakeConstSpan(windows)) {
    return Invalid(
        inst,
        absl::StrFormat("the source is %s but the window over %s has "
                        "dimensions %s",
                        source.ToString(), operand.ToString(), List(windows)));
  }
  return operand.WithElementType(source.element_type());
}

absl::StatusOr<Shape> InferConvolutionShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 2));
  const Shape& lhs = inst.operand(0)->shape();
  const Shape& rhs = inst.operand(1)->shape();
  PJRT_ASSIGN_OR_RETURN(ConvolutionDimensions d,
                        ParseConvolutionDimensions(inst));
  const int rank = static_cast<int>(d.input_spatial.size()) + 2;
  if (lhs.rank() != rank || rhs.rank() != rank) {
    return Invalid(inst, absl::StrFormat(
                             "dim_labels describe rank %d, but the input is %s "
                             "and the kernel %s",
                             rank, lhs.ToString(), rhs.ToString()));
  }
  PJRT_ASSIGN_OR_RETURN(int64_t groups,
                        ParseIntAttribute(inst, "feature_group_count", 1));
  PJRT_ASSIGN_OR_RETURN(int64_t batch_groups,
                        ParseIntAttribute(inst, "batch_group_count", 1));
  if (groups < 1 || batch_groups < 1 || (groups > 1 && batch_groups > 1)) {
    return Invalid(inst, absl::StrFormat(
                             "feature_group_count=%d and batch_group_count=%d: "
                             "each must be >= 1, and at most one above 1",
                             groups, batch_groups));
  }
  const int64_t in_features = lhs.dimensions(d.input_feature);
  const int64_t kernel_in = rhs.dimensions(d.kernel_input_feature);
  const int64_t kernel_out = rhs.dimensions(d.kernel_output_feature);
  const int64_t batch = lhs.dimensions(d.input_batch);
  if (in_features % groups != 0 || kernel_in * groups != in_features) {
    return Invalid(
        inst,
        absl::StrFormat("the input has %d features and "
                        "feature_group_count=%d, so the kernel's input "
                        "feature dimension must be %d; it is %d",
                        in_features, groups,
                        in_features % groups == 0 ? in_features / groups : -1,
                        kernel_in));
  }
  if (kernel_out % groups != 0 || kernel_out % batch_groups != 0 ||
      batch % batch_groups != 0) {
    return Invalid(
        inst, absl::StrFormat("the kernel's %d output features and the input's "
                              "batch of %d must divide by the group counts "
                              "(%d, %d)",
                              kernel_out, batch, groups, batch_groups));
  }
  std::vector<int64_t> spatial;
  for (int64_t s : d.input_spatial) spatial.push_back(lhs.dimensions(s));
  PJRT_ASSIGN_OR_RETURN(std::vector<WindowDimension> window,
                        ParseWindow(inst, rank - 2));
  for (int i = 0; i < rank - 2; ++i) {
    if (window[i].size != rhs.dimensions(d.kernel_spatial[i])) {
      return Invalid(
          inst, absl::StrFormat("window size %d in spatial dimension %d does "
                                "not match the kernel's %d",
                                window[i].size, i,
                                rhs.dimensions(d.kernel_spatial[i])));
    }
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> out_spatial,
                        WindowOutputDimensions(inst, spatial));
  std::vector<int64_t> dims(rank);
  dims[d.output_batch] = batch / batch_groups;
  dims[d.output_feature] = kernel_out;
  for (int i = 0; i < rank - 2; ++i) dims[d.output_spatial[i]] = out_spatial[i];
  const PrimitiveType type =
      inst.shape().IsArray() ? inst.shape().element_type() : lhs.element_type();
  return Shape(type, dims);
}

absl::StatusOr<Shape> InferRngBitGeneratorShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectCount(inst, 1));
  const Shape& state = inst.operand(0)->shape();
  const std::string algorithm = WordAttribute(inst, "algorithm", "rng_default");
  if (algorithm != "rng_default" && algorithm != "rng_three_fry" &&
      algorithm != "rng_philox") {
    return Invalid(inst,
                   absl::StrFormat("algorithm=%s is not one of rng_default, "
                                   "rng_three_fry, rng_philox",
                                   algorithm));
  }
  const int64_t want = algorithm == "rng_three_fry" ? 2 : -1;
  if (state.element_type() != PrimitiveType::kU64 || state.rank() != 1 ||
      (want > 0 && state.dimensions(0) != want) ||
      (want < 0 && state.dimensions(0) != 2 && state.dimensions(0) != 3)) {
    return Invalid(inst, absl::StrFormat("the state is %s; %s needs u64[%s]",
                                         state.ToString(), algorithm,
                                         want > 0 ? "2" : "2] or u64[3"));
  }
  const Shape& out = inst.shape();
  if (!out.IsTuple() || out.tuple_shapes().size() != 2 ||
      !out.tuple_shapes()[1].IsArray() ||
      (!IsUnsignedInteger(out.tuple_shapes()[1].element_type()) &&
       !IsSignedInteger(out.tuple_shapes()[1].element_type()))) {
    return Invalid(inst,
                   absl::StrFormat("produces (new state, integer array); %s is "
                                   "declared",
                                   out.ToString()));
  }
  return Shape::Tuple({state, out.tuple_shapes()[1]});
}

absl::StatusOr<Shape> InferRngShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectCount(inst, 2));
  const std::string distribution = WordAttribute(inst, "distribution", "");
  const Shape& a = inst.operand(0)->shape();
  const Shape& b = inst.operand(1)->shape();
  const Shape& out = inst.shape();
  if (distribution != "rng_uniform" && distribution != "rng_normal") {
    return Invalid(inst,
                   absl::StrFormat("distribution=%s is not rng_uniform or "
                                   "rng_normal",
                                   distribution));
  }
  if (!out.IsArray() || a != Scalar(out.element_type()) ||
      b != Scalar(out.element_type()) ||
      (distribution == "rng_normal" && !IsFloatingPoint(out.element_type())) ||
      out.element_type() == PrimitiveType::kPred) {
    return Invalid(inst, absl::StrFormat(
                             "%s of %s needs two %s scalars (%s) and a numeric "
                             "array (floating-point for rng_normal)",
                             distribution, out.ToString(),
                             PrimitiveTypeName(out.element_type()),
                             absl::StrCat(a.ToString(), ", ", b.ToString())));
  }
  return out;
}

absl::StatusOr<Shape> InferTopKShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 1));
  const Shape& in = inst.operand(0)->shape();
  if (in.rank() < 1) return Invalid(inst, "needs an operand of rank >= 1");
  int64_t k = 0;
  if (inst.opcode() == Opcode::kTopK) {
    PJRT_ASSIGN_OR_RETURN(k, ParseIntAttribute(inst, "k", -1));
  } else if (inst.shape().IsTuple() &&
             inst.shape().tuple_shapes().size() == 2 &&
             inst.shape().tuple_shapes()[0].rank() == in.rank()) {
    k = inst.shape().tuple_shapes()[0].dimensions(in.rank() - 1);
  }
  if (k < 0 || k > in.dimensions(in.rank() - 1)) {
    return Invalid(
        inst, absl::StrFormat("k=%d must be in [0, %d] (the last dimension of "
                              "%s)",
                              k, in.dimensions(in.rank() - 1), in.ToString()));
  }
  std::vector<int64_t> dims(in.dimensions().begin(), in.dimensions().end());
  dims.back() = k;
  return Shape::Tuple(
      {Shape(in.element_type(), dims), Shape(PrimitiveType::kS32, dims)});
}

absl::StatusOr<Shape> InferFftShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectCount(inst, 1));
  const Shape& in = inst.operand(0)->shape();
  const std::string type = WordAttribute(inst, "fft_type", "");
  if (type != "FFT" && type != "IFFT" && type != "RFFT" && type != "IRFFT") {
    return Invalid(inst,
                   absl::StrFormat("fft_type=%s is not one of FFT, IFFT, RFFT, "
                                   "IRFFT",
                                   type.empty() ? "(missing)" : type));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> length,
                        ParseIntListAttribute(inst, "fft_length"));
  const int l = static_cast<int>(length.size());
  if (l < 1 || l > 3 || l > in.rank()) {
    return Invalid(inst,
                   absl::StrFormat("fft_length={%s} must name 1 to 3 trailing "
                                   "dimensions of the operand %s",
                                   absl::StrJoin(length, ","), in.ToString()));
  }
  const PrimitiveType t = in.element_type();
  const bool real_in = type == "RFFT";
  if (real_in ? (t != PrimitiveType::kF32 && t != PrimitiveType::kF64)
              : !IsComplex(t)) {
    return Invalid(
        inst, absl::StrFormat("fft_type=%s needs a %s operand, not %s", type,
                              real_in ? "f32 or f64" : "c64 or c128",
                              PrimitiveTypeName(t)));
  }
  const bool wide = t == PrimitiveType::kF64 || t == PrimitiveType::kC128;
  PrimitiveType out_type = t;
  if (type == "RFFT")
    out_type = wide ? PrimitiveType::kC128 : PrimitiveType::kC64;
  if (type == "IRFFT")
    out_type = wide ? PrimitiveType::kF64 : PrimitiveType::kF32;
  std::vector<int64_t> dims(in.dimensions().begin(), in.dimensions().end());
  const int first = in.rank() - l;
  for (int i = 0; i < l; ++i) {
    const int64_t n = length[i];
    // The operand's trailing dimensions: the lengths, except the last of
    // IRFFT (the half spectrum: n / 2 + 1).
    const int64_t want = type == "IRFFT" && i == l - 1 ? (n / 2 + 1) : n;
    if (n < 1) {
      return Invalid(inst,
                     absl::StrFormat("fft_length={%s}: every length must be at "
                                     "least 1",
                                     absl::StrJoin(length, ",")));
    }
    if (dims[first + i] != want) {
      return Invalid(
          inst, absl::StrFormat("fft_length={%s} does not fit the operand %s: "
                                "dimension %d should be %d",
                                absl::StrJoin(length, ","), in.ToString(),
                                first + i, want));
    }
  }
  if (type == "RFFT") dims.back() = length.back() / 2 + 1;
  if (type == "IRFFT") dims.back() = length.back();
  return Shape(out_type, dims);
}

namespace {

// Operand `i` of a linear-algebra op: an array of rank >= 2 of a
// floating-point or complex type whose last two dimensions are square
// (when `square`).
absl::Status ExpectMatrices(const Instruction& inst, int i, const char* what,
                            bool square) {
  const Shape& s = inst.operand(i)->shape();
  const PrimitiveType t = s.element_type();
  if (!IsFloatingPoint(t) && !IsComplex(t)) {
    return Invalid(inst, absl::StrFormat("%s %s must be of a floating-point "
                                         "or complex type",
                                         what, s.ToString()));
  }
  if (s.rank() < 2) {
    return Invalid(inst, absl::StrFormat("%s %s must have rank 2 or more "
                                         "(matrices in its last two "
                                         "dimensions)",
                                         what, s.ToString()));
  }
  if (square && s.dimensions(s.rank() - 1) != s.dimensions(s.rank() - 2)) {
    return Invalid(inst, absl::StrFormat("%s %s must be square in its last "
                                         "two dimensions",
                                         what, s.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shape> InferTriangularSolveShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 2));
  for (const char* flag : {"left_side", "lower", "unit_diagonal"}) {
    PJRT_RETURN_IF_ERROR(ParseBoolAttribute(inst, flag, false).status());
  }
  const std::string transpose =
      WordAttribute(inst, "transpose_a", "NO_TRANSPOSE");
  if (transpose != "NO_TRANSPOSE" && transpose != "TRANSPOSE" &&
      transpose != "ADJOINT") {
    return Invalid(inst, absl::StrFormat("transpose_a=%s is not one of "
                                         "NO_TRANSPOSE, TRANSPOSE, ADJOINT",
                                         transpose));
  }
  PJRT_RETURN_IF_ERROR(ExpectMatrices(inst, 0, "a", true));
  PJRT_RETURN_IF_ERROR(ExpectMatrices(inst, 1, "b", false));
  const Shape& a = inst.operand(0)->shape();
  const Shape& b = inst.operand(1)->shape();
  if (a.element_type() != b.element_type()) {
    return Invalid(inst, absl::StrFormat("a %s and b %s must have one "
                                         "element type",
                                         a.ToString(), b.ToString()));
  }
  const int r = a.rank();
  if (b.rank() != r) {
    return Invalid(inst, absl::StrFormat("a %s and b %s must have one rank",
                                         a.ToString(), b.ToString()));
  }
  for (int d = 0; d < r - 2; ++d) {
    if (a.dimensions(d) != b.dimensions(d)) {
      return Invalid(inst, absl::StrFormat("batch dimension %d is %d in a %s "
                                           "but %d in b %s",
                                           d, a.dimensions(d), a.ToString(),
                                           b.dimensions(d), b.ToString()));
    }
  }
  PJRT_ASSIGN_OR_RETURN(const bool left,
                        ParseBoolAttribute(inst, "left_side", false));
  const int64_t want = b.dimensions(left ? r - 2 : r - 1);
  if (a.dimensions(r - 1) != want) {
    return Invalid(inst, absl::StrFormat(
                             "a %s is %d x %d, but b %s has %d %s (with "
                             "left_side=%s, op(a) %s x)",
                             a.ToString(), a.dimensions(r - 1),
                             a.dimensions(r - 1), b.ToString(), want,
                             left ? "rows" : "columns", left ? "true" : "false",
                             left ? "multiplies" : "is multiplied by"));
  }
  return b;
}

absl::StatusOr<Shape> InferCholeskyShape(const Instruction& inst) {
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, 1));
  PJRT_RETURN_IF_ERROR(ParseBoolAttribute(inst, "lower", false).status());
  PJRT_RETURN_IF_ERROR(ExpectMatrices(inst, 0, "a", true));
  return inst.operand(0)->shape();
}

absl::StatusOr<Shape> InferBatchNormShape(const Instruction& inst) {
  const bool training = inst.opcode() == Opcode::kBatchNormTraining;
  const bool grad = inst.opcode() == Opcode::kBatchNormGrad;
  PJRT_RETURN_IF_ERROR(ExpectArrays(inst, training ? 3 : 5));
  PJRT_RETURN_IF_ERROR(ParseRequiredFloatAttribute(inst, "epsilon").status());
  if (inst.attributes().FindRaw("feature_index") == nullptr) {
    return Invalid(inst, "needs the attribute feature_index");
  }
  PJRT_ASSIGN_OR_RETURN(const int64_t feature,
                        ParseIntAttribute(inst, "feature_index", 0));
  const Shape& x = inst.operand(0)->shape();
  if (!IsFloatingPoint(x.element_type())) {
    return Invalid(inst, absl::StrFormat("normalizes a floating-point array, "
                                         "not %s",
                                         x.ToString()));
  }
  if (feature < 0 || feature >= x.rank()) {
    return Invalid(inst, absl::StrFormat("feature_index=%d is not a dimension "
                                         "of the operand %s",
                                         feature, x.ToString()));
  }
  const Shape per_feature(x.element_type(), {x.dimensions(feature)});
  for (int i = 1; i < inst.operand_count(); ++i) {
    const Shape& want = grad && i == 4 ? x : per_feature;
    const Shape& got = inst.operand(i)->shape();
    if (got.element_type() != want.element_type() ||
        !std::equal(got.dimensions().begin(), got.dimensions().end(),
                    want.dimensions().begin(), want.dimensions().end())) {
      return Invalid(
          inst, absl::StrFormat("operand %d (%%%s) is %s; with the operand %s "
                                "and feature_index=%d it must be %s",
                                i, inst.operand(i)->name(), got.ToString(),
                                x.ToString(), feature, want.ToString()));
    }
  }
  if (inst.opcode() == Opcode::kBatchNormInference) return x;
  return Shape::Tuple({x, per_feature, per_feature});
}

}  // namespace pjrt::hlo
