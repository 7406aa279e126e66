#include "hlo/shape.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "base/text.h"

namespace pjrt::hlo {

struct Shape::TupleData {
  std::vector<Shape> elements;
  int64_t leaves = 0;
  // This tuple and every shape in it, arrays and tuples (empty ones too).
  int64_t nodes = 1;
  int depth = 1;
};

namespace {

const std::vector<Shape>& NoElements() {
  static const std::vector<Shape>* empty = new std::vector<Shape>();
  return *empty;
}

// a * b, saturating at INT64_MAX. REQUIRES: a, b >= 0.
int64_t SaturatingMultiply(int64_t a, int64_t b) {
  PJRT_DCHECK(a >= 0 && b >= 0) << a << " * " << b;
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) {
    return std::numeric_limits<int64_t>::max();
  }
  return product;
}

}  // namespace

Shape::Shape(PrimitiveType type, std::vector<int64_t> dims)
    : type_(type), dims_(std::move(dims)) {}

Shape Shape::WithElementType(PrimitiveType type) const {
  return Shape(type, dims_);
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  auto data = std::make_shared<TupleData>();
  for (const Shape& e : elements) {
    int64_t leaves;
    if (__builtin_add_overflow(data->leaves, e.leaf_count(), &leaves)) {
      leaves = std::numeric_limits<int64_t>::max();
    }
    data->leaves = leaves;
    int64_t nodes;
    if (__builtin_add_overflow(data->nodes, e.node_count(), &nodes)) {
      nodes = std::numeric_limits<int64_t>::max();
    }
    data->nodes = nodes;
    data->depth = std::max(data->depth, e.tuple_depth() + 1);
  }
  data->elements = std::move(elements);
  Shape shape;
  shape.type_ = PrimitiveType::kTuple;
  shape.tuple_ = std::move(data);
  return shape;
}

const std::vector<Shape>& Shape::tuple_shapes() const {
  return tuple_ != nullptr ? tuple_->elements : NoElements();
}

int64_t Shape::leaf_count() const {
  if (!IsTuple()) return 1;
  return tuple_ != nullptr ? tuple_->leaves : 0;
}

int64_t Shape::node_count() const {
  if (!IsTuple()) return 1;
  return tuple_ != nullptr ? tuple_->nodes : 1;
}

int Shape::tuple_depth() const {
  if (!IsTuple()) return 0;
  return tuple_ != nullptr ? tuple_->depth : 1;
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.type_ != b.type_ || a.dims_ != b.dims_) return false;
  if (a.tuple_ == b.tuple_) return true;
  return a.tuple_shapes() == b.tuple_shapes();
}

int64_t Shape::ElementCount() const {
  int64_t count = 1;
  for (int64_t d : dims_)
    count = SaturatingMultiply(count, std::max<int64_t>(d, 0));
  return count;
}

int64_t Shape::ByteSize() const {
  if (!IsArray()) return 0;
  return PackedByteSize(type_, ElementCount());
}

int64_t Shape::UnpackedByteSize() const {
  if (!IsArray()) return 0;
  return SaturatingMultiply(ElementCount(), ByteWidth(type_));
}

std::string Shape::ToString() const {
  if (IsTuple()) {
    std::vector<std::string> parts;
    parts.reserve(tuple_shapes().size());
    for (const Shape& s : tuple_shapes()) parts.push_back(s.ToString());
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  return absl::StrCat(PrimitiveTypeName(type_), "[", absl::StrJoin(dims_, ","),
                      "]");
}

absl::Status CheckShapeLimits(const Shape& shape) {
  if (shape.IsTuple()) {
    if (shape.tuple_depth() > kMaxTupleDepth) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tuple shapes nest %d deep; at most %d levels are supported",
          shape.tuple_depth(), kMaxTupleDepth));
    }
    if (shape.leaf_count() > kMaxTupleLeaves) {
      return absl::InvalidArgumentError(
          absl::StrFormat("a tuple holds %d arrays; at most %d are supported",
                          shape.leaf_count(), kMaxTupleLeaves));
    }
    // Empty tuples hold no arrays, but a tuple of them still has to be
    // walked.
    if (shape.node_count() > kMaxTupleNodes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a tuple holds %d tuples and arrays in all; at most %d are "
          "supported",
          shape.node_count(), kMaxTupleNodes));
    }
    return absl::OkStatus();
  }
  const absl::Span<const int64_t> dims = shape.dimensions();
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d is too large; at most %d dimensions are supported",
        dims.size(), kMaxRank));
  }
  const auto shape_string = [&] { return Excerpt(shape.ToString(), 200); };
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("dimension %d of %s is %d; dimensions must be >= 0",
                          i, shape_string(), dims[i]));
    }
    if (dims[i] > kMaxArrayBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dimension %d of %s is %d; the largest supported is %d (2^56)", i,
          shape_string(), dims[i], kMaxArrayBytes));
    }
  }
  // Saturating, so the check holds however the product overflows.
  if (shape.IsArray() && shape.ByteSize() > kMaxArrayBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape %s is too large: %s bytes; the largest supported array has "
        "%d bytes (2^56)",
        shape_string(),
        shape.ByteSize() == std::numeric_limits<int64_t>::max()
            ? std::string("more than 2^63")
            : absl::StrCat(shape.ByteSize()),
        kMaxArrayBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> MakeArrayShape(PrimitiveType type,
                                     absl::Span<const int64_t> dims) {
  if (!IsArrayType(type)) {
    std::vector<std::string> names;
    for (PrimitiveType t : kArrayTypes) {
      names.emplace_back(PrimitiveTypeName(t));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown element type %d; expected one of %s",
                        static_cast<int>(type), absl::StrJoin(names, ", ")));
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d is too large; at most %d dimensions are supported",
        dims.size(), kMaxRank));
  }
  Shape shape(type, std::vector<int64_t>(dims.begin(), dims.end()));
  PJRT_RETURN_IF_ERROR(CheckShapeLimits(shape));
  return shape;
}

}  // namespace pjrt::hlo
