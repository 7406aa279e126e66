// Shape: an array (element type and dimensions, row-major) or a tuple of
// shapes. Value type; cheap to copy for the ranks seen in practice.
#ifndef PJRT_HLO_SHAPE_H_
#define PJRT_HLO_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/primitive_type.h"

namespace pjrt::hlo {

// Largest rank accepted from a client.
inline constexpr int kMaxRank = 64;

class Shape {
 public:
  // An invalid shape (element type kInvalid).
  Shape() = default;

  // REQUIRES: IsArrayType(type). Dimensions are not validated; use
  // MakeArrayShape for input that comes from outside.
  Shape(PrimitiveType type, std::vector<int64_t> dims);

  static Shape Tuple(std::vector<Shape> elements);

  bool IsArray() const { return IsArrayType(type_); }
  bool IsTuple() const { return type_ == PrimitiveType::kTuple; }

  PrimitiveType element_type() const { return type_; }
  absl::Span<const int64_t> dimensions() const { return dims_; }
  int64_t dimensions(int i) const { return dims_[i]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<Shape>& tuple_shapes() const { return tuple_; }

  // Number of elements of an array shape (1 for a scalar).
  int64_t ElementCount() const;
  // Bytes of an array shape's dense row-major data; 0 for a tuple.
  int64_t ByteSize() const;

  // HLO spelling: "f32[2,3]", "pred[]", "(f32[2], s32[])".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.type_ == b.type_ && a.dims_ == b.dims_ && a.tuple_ == b.tuple_;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  PrimitiveType type_ = PrimitiveType::kInvalid;
  std::vector<int64_t> dims_;
  std::vector<Shape> tuple_;
};

// Validates an array shape that comes from outside: a known array type, rank
// at most kMaxRank, no negative dimension, and a byte size that fits in
// int64. Errors are INVALID_ARGUMENT naming the offending value.
absl::StatusOr<Shape> MakeArrayShape(PrimitiveType type,
                                     absl::Span<const int64_t> dims);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_SHAPE_H_
