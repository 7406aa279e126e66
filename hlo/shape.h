// Shape: an array (element type and dimensions, row-major) or a tuple of
// shapes. Value type; cheap to copy for the ranks seen in practice.
#ifndef PJRT_HLO_SHAPE_H_
#define PJRT_HLO_SHAPE_H_

#include <cstdint>
#include <optional>
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

  // An array of any parsable element type (or a token/opaque scalar).
  // Dimensions are not validated; use MakeArrayShape for input that comes
  // from a client.
  Shape(PrimitiveType type, std::vector<int64_t> dims);

  static Shape Tuple(std::vector<Shape> elements);

  // True for arrays of a type pjrtd computes with.
  bool IsArray() const { return IsArrayType(type_); }
  bool IsTuple() const { return type_ == PrimitiveType::kTuple; }
  bool IsToken() const { return type_ == PrimitiveType::kToken; }

  PrimitiveType element_type() const { return type_; }
  absl::Span<const int64_t> dimensions() const { return dims_; }
  int64_t dimensions(int i) const { return dims_[i]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<Shape>& tuple_shapes() const { return tuple_; }
  std::vector<Shape>* mutable_tuple_shapes() { return &tuple_; }

  // Layout as written in HLO text (minor-to-major dimension order), if any.
  // Layouts do not take part in equality: pjrtd's arrays are row-major, and
  // a layout only matters at a program's inputs and outputs.
  const std::optional<std::vector<int64_t>>& layout() const { return layout_; }
  void set_layout(std::vector<int64_t> minor_to_major) {
    layout_ = std::move(minor_to_major);
  }
  // Dimensions written as dynamic ("<=N" or "?"); empty when none were.
  const std::vector<bool>& dynamic_dimensions() const { return dynamic_; }
  void set_dynamic_dimensions(std::vector<bool> dynamic) {
    dynamic_ = std::move(dynamic);
  }

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
  std::optional<std::vector<int64_t>> layout_;
  std::vector<bool> dynamic_;
};

// Validates an array shape that comes from outside: a known array type, rank
// at most kMaxRank, no negative dimension, and a byte size that fits in
// int64. Errors are INVALID_ARGUMENT naming the offending value.
absl::StatusOr<Shape> MakeArrayShape(PrimitiveType type,
                                     absl::Span<const int64_t> dims);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_SHAPE_H_
