#include "client/cpp/pjrt_client/types.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pjrt_client {

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kPred:
      return "pred";
    case DType::kS8:
      return "s8";
    case DType::kS16:
      return "s16";
    case DType::kS32:
      return "s32";
    case DType::kS64:
      return "s64";
    case DType::kU8:
      return "u8";
    case DType::kU16:
      return "u16";
    case DType::kU32:
      return "u32";
    case DType::kU64:
      return "u64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kC64:
      return "c64";
    case DType::kC128:
      return "c128";
    case DType::kF8E4M3FN:
      return "f8e4m3fn";
    case DType::kF8E5M2:
      return "f8e5m2";
    case DType::kS4:
      return "s4";
    case DType::kS2:
      return "s2";
    case DType::kU2:
      return "u2";
    case DType::kU4:
      return "u4";
    case DType::kF8E4M3:
      return "f8e4m3";
    case DType::kF8E3M4:
      return "f8e3m4";
    case DType::kF8E4M3FNUZ:
      return "f8e4m3fnuz";
    case DType::kF8E5M2FNUZ:
      return "f8e5m2fnuz";
    case DType::kF8E4M3B11FNUZ:
      return "f8e4m3b11fnuz";
    case DType::kF4E2M1FN:
      return "f4e2m1fn";
    case DType::kF8E8M0FNU:
      return "f8e8m0fnu";
    case DType::kF6E2M3FN:
      return "f6e2m3fn";
    case DType::kF6E3M2FN:
      return "f6e3m2fn";
    default:
      return absl::StrFormat("dtype#%d", static_cast<int>(dtype));
  }
}

bool IsMiniFloat(DType dtype) {
  switch (dtype) {
    case DType::kF8E4M3FN:
    case DType::kF8E5M2:
    case DType::kF8E4M3:
    case DType::kF8E3M4:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2FNUZ:
    case DType::kF8E4M3B11FNUZ:
    case DType::kF4E2M1FN:
    case DType::kF8E8M0FNU:
    case DType::kF6E2M3FN:
    case DType::kF6E3M2FN:
      return true;
    default:
      return false;
  }
}

int DTypeByteWidth(DType dtype) {
  if (IsMiniFloat(dtype)) return 1;
  switch (dtype) {
    case DType::kPred:
    case DType::kS8:
    case DType::kU8:
    case DType::kS4:  // packed two per byte: see DTypeBytes
    case DType::kU4:
    case DType::kS2:  // four per byte
    case DType::kU2:
      return 1;
    case DType::kS16:
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kS32:
    case DType::kU32:
    case DType::kF32:
      return 4;
    case DType::kS64:
    case DType::kU64:
    case DType::kF64:
    case DType::kC64:
      return 8;
    case DType::kC128:
      return 16;
    default:
      return 0;
  }
}

int64_t DTypeBytes(DType dtype, int64_t count) {
  if (dtype == DType::kS4 || dtype == DType::kU4 || dtype == DType::kF4E2M1FN)
    return (count + 1) / 2;
  if (dtype == DType::kS2 || dtype == DType::kU2) return (count + 3) / 4;
  return count * DTypeByteWidth(dtype);
}

std::string ShapeToString(const ArrayShape& shape) {
  return absl::StrCat(DTypeName(shape.dtype), "[",
                      absl::StrJoin(shape.dims, ","), "]");
}

}  // namespace pjrt_client
