// Shape: an array (element type and dimensions, row-major) or a tuple of
// shapes. Value type; cheap to copy for the ranks seen in practice. A tuple's
// elements are shared, immutable, between copies: copying a tuple shape, or
// making a tuple of tuples, costs one pointer per element whatever the
// tuple's size, so a client cannot grow the daemon's memory by nesting.
//
// Limits. Every shape that comes from a client (HLO text, uploads,
// descriptors, MakeTuple) is checked with CheckShapeLimits before anything is
// compiled or allocated for it, so that element counts, byte sizes, strides
// and offsets computed from it cannot overflow int64.
#ifndef PJRT_HLO_SHAPE_H_
#define PJRT_HLO_SHAPE_H_

#include <cstdint>
#include <memory>
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
// Largest dimension size, element count and byte size of an array (2^56
// bytes = 64 PiB, far beyond any device). Sums and products of a few such
// values still fit in int64.
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 56;
// Deepest nesting of tuples, and most arrays (leaves) in one tuple.
inline constexpr int kMaxTupleDepth = 32;
inline constexpr int64_t kMaxTupleLeaves = 16384;
// Most tuples and arrays in one tuple, itself included (a tree of
// kMaxTupleLeaves arrays has fewer).
inline constexpr int64_t kMaxTupleNodes = 2 * kMaxTupleLeaves;

class Shape {
 public:
  // An invalid shape (element type kInvalid).
  Shape() = default;

  // An array of any parsable element type (or a token/opaque scalar).
  // Dimensions are not validated; use MakeArrayShape for input that comes
  // from a client.
  Shape(PrimitiveType type, std::vector<int64_t> dims);

  // A tuple of `elements`. Does not check limits (see CheckShapeLimits).
  static Shape Tuple(std::vector<Shape> elements);

  // An array with this array shape's dimensions and element type `type`
  // (no layout, no dynamic markers): a compare's pred result, a reduction's
  // accumulator.
  Shape WithElementType(PrimitiveType type) const;

  // True for arrays of a type pjrtd computes with.
  bool IsArray() const { return IsArrayType(type_); }
  bool IsTuple() const { return type_ == PrimitiveType::kTuple; }
  bool IsToken() const { return type_ == PrimitiveType::kToken; }

  PrimitiveType element_type() const { return type_; }
  absl::Span<const int64_t> dimensions() const { return dims_; }
  int64_t dimensions(int i) const { return dims_[i]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<Shape>& tuple_shapes() const;
  // Arrays in the shape: 1 for an array, the sum over the elements for a
  // tuple (saturating at INT64_MAX). O(1).
  int64_t leaf_count() const;
  // 0 for an array, 1 + the deepest element's for a tuple. O(1).
  int tuple_depth() const;
  // Shapes in the tree, this one included: 1 for an array, 1 + the sum over
  // the elements for a tuple (saturating). O(1).
  int64_t node_count() const;
  // Identifies a tuple's shared elements: equal for copies of one tuple
  // shape (null for arrays). For memoizing walks over shapes.
  const void* tuple_identity() const { return tuple_.get(); }

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

  // Number of elements of an array shape (1 for a scalar), saturating at
  // INT64_MAX.
  int64_t ElementCount() const;
  // Bytes of an array shape's dense row-major data in a buffer and on the
  // wire (s4 and u4 packed two per byte; saturating); 0 for a tuple.
  int64_t ByteSize() const;
  // Bytes with one byte per element of a sub-byte type (s4, u4), as
  // compilers hold such arrays between the program's edges; ByteSize()
  // otherwise.
  int64_t UnpackedByteSize() const;

  // HLO spelling: "f32[2,3]", "pred[]", "(f32[2], s32[])".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  struct TupleData;

  PrimitiveType type_ = PrimitiveType::kInvalid;
  std::vector<int64_t> dims_;
  // Tuples only; shared by copies, never modified once built.
  std::shared_ptr<const TupleData> tuple_;
  std::optional<std::vector<int64_t>> layout_;
  std::vector<bool> dynamic_;
};

// OK if `shape` is within the limits above: an array of rank at most
// kMaxRank whose dimensions are >= 0 and whose dimension sizes, element
// count and byte size are at most kMaxArrayBytes (token and opaque scalars
// pass); a tuple at most kMaxTupleDepth deep with at most kMaxTupleLeaves
// arrays and kMaxTupleNodes shapes in all (empty tuples count there). Tuple
// elements are assumed checked (shapes are built bottom-up). INVALID_ARGUMENT
// naming the shape, the value and the limit otherwise.
absl::Status CheckShapeLimits(const Shape& shape);

// Validates an array shape that comes from outside: a known array type and
// CheckShapeLimits. Errors are INVALID_ARGUMENT naming the offending value.
absl::StatusOr<Shape> MakeArrayShape(PrimitiveType type,
                                     absl::Span<const int64_t> dims);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_SHAPE_H_
