// Literal: a constant value of HLO: an array in row-major order (raw
// little-endian bytes of its element type; pred as one byte 0/1; f16 and
// bf16 as their 16-bit patterns), or a tuple of literals.
//
// Value type.
#ifndef PJRT_HLO_LITERAL_H_
#define PJRT_HLO_LITERAL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hlo/shape.h"

namespace pjrt::hlo {

class Literal {
 public:
  Literal() = default;
  // A zero-filled array of `shape` (any parsable array type), or a tuple of
  // such literals.
  explicit Literal(Shape shape);

  const Shape& shape() const { return shape_; }
  // Row-major bytes: shape().ElementCount() * ByteWidth(element type).
  const std::vector<uint8_t>& data() const { return data_; }
  std::vector<uint8_t>* mutable_data() { return &data_; }
  const std::vector<Literal>& tuple_elements() const { return tuple_; }
  std::vector<Literal>* mutable_tuple_elements() { return &tuple_; }

  // Element `i` (row-major) as T, which must match the element type's width.
  template <typename T>
  T Get(int64_t i) const {
    T value;
    std::memcpy(&value, data_.data() + i * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T>
  void Set(int64_t i, T value) {
    std::memcpy(data_.data() + i * sizeof(T), &value, sizeof(T));
  }

 private:
  Shape shape_;
  std::vector<uint8_t> data_;
  std::vector<Literal> tuple_;
};

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);

}  // namespace pjrt::hlo

#endif  // PJRT_HLO_LITERAL_H_
