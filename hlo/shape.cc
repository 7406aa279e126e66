#include "hlo/shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pjrt::hlo {

Shape::Shape(PrimitiveType type, std::vector<int64_t> dims)
    : type_(type), dims_(std::move(dims)) {}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape shape;
  shape.type_ = PrimitiveType::kTuple;
  shape.tuple_ = std::move(elements);
  return shape;
}

int64_t Shape::ElementCount() const {
  int64_t count = 1;
  for (int64_t d : dims_) count *= d;
  return count;
}

int64_t Shape::ByteSize() const {
  if (!IsArray()) return 0;
  return ElementCount() * ByteWidth(type_);
}

std::string Shape::ToString() const {
  if (IsTuple()) {
    std::vector<std::string> parts;
    parts.reserve(tuple_.size());
    for (const Shape& s : tuple_) parts.push_back(s.ToString());
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  return absl::StrCat(PrimitiveTypeName(type_), "[", absl::StrJoin(dims_, ","),
                      "]");
}

absl::StatusOr<Shape> MakeArrayShape(PrimitiveType type,
                                     absl::Span<const int64_t> dims) {
  if (!IsArrayType(type)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown element type %d; expected one of pred, s8, s16, s32, s64, "
        "u8, u16, u32, u64, f16, bf16, f32, f64",
        static_cast<int>(type)));
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d is too large; at most %d dimensions are supported",
        dims.size(), kMaxRank));
  }
  const auto shape_string = [&] {
    return absl::StrCat(PrimitiveTypeName(type), "[", absl::StrJoin(dims, ","),
                        "]");
  };
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dimension %d of %s is %d; dimensions must be >= 0", i,
          shape_string(), dims[i]));
    }
  }
  // Byte size must fit in int64; a zero dimension makes any shape empty.
  int64_t bytes = ByteWidth(type);
  bool empty = false;
  for (int64_t d : dims) empty |= d == 0;
  if (!empty) {
    for (int64_t d : dims) {
      if (bytes > std::numeric_limits<int64_t>::max() / d) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "shape %s is too large: its size in bytes overflows 64 bits",
            shape_string()));
      }
      bytes *= d;
    }
  }
  return Shape(type, std::vector<int64_t>(dims.begin(), dims.end()));
}

}  // namespace pjrt::hlo
