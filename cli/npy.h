// .npy files (NumPy's array format, versions 1.0 to 3.0) for `pjrtctl run`:
// reading inputs and writing results, for every dtype pjrtd computes with.
//
//   pred '|b1', s8 '|i1', s16 '<i2', s32 '<i4', s64 '<i8', u8 '|u1',
//   u16 '<u2', u32 '<u4', u64 '<u8', f16 '<f2', f32 '<f4', f64 '<f8'.
//
// c64 '<c8', c128 '<c16'.
//
// bf16 has no NumPy type: a bf16 parameter takes uint16 bit patterns ('<u2')
// or float32 values ('<f4', rounded to nearest even), and bf16 results are
// written as uint16 bit patterns ('<u2'). Likewise the f8 types take
// and give their uint8 codes ('|u1'), s4 int8 values ('|i1', -8..7) and u4
// uint8 values ('|u1', 0..15); the wire packs s4 and u4 two per byte.
// Big-endian and Fortran-order files are read too (converted to the wire's
// little-endian row-major layout).
#ifndef PJRT_CLI_NPY_H_
#define PJRT_CLI_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/cpp/pjrt_client/types.h"

namespace pjrt::cli {

// An array as pjrtd's wire carries it: row-major, little-endian, pred as
// one byte (0 or 1) per element.
struct HostArray {
  pjrt_client::DType dtype = pjrt_client::DType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;

  int64_t element_count() const;
};

// Reads `path`. INVALID_ARGUMENT (naming the file) for a file that is not a
// .npy array of a supported dtype, or whose data is short; NOT_FOUND if the
// file cannot be opened.
absl::StatusOr<HostArray> ReadNpy(const std::string& path);

// The same for a file's contents already in memory; `name` names it in
// errors.
absl::StatusOr<HostArray> ParseNpy(absl::string_view bytes,
                                   absl::string_view name);

// Writes `array` to `path` (version 1.0, little-endian, C order). bf16 is
// written as its uint16 bit patterns.
absl::Status WriteNpy(const std::string& path, const HostArray& array);

// The NumPy descr an array of `dtype` is written with ("<f4"; "<u2" for
// bf16).
std::string NpyDescr(pjrt_client::DType dtype);

// Makes `array` an array of `want`, if that needs no guessing: unchanged when
// the dtypes are equal; for bf16, uint16 arrays are taken as bit patterns
// and float32 arrays are rounded to nearest even. Otherwise
// INVALID_ARGUMENT naming both dtypes.
absl::StatusOr<HostArray> ConvertToDType(HostArray array,
                                         pjrt_client::DType want);

// float32 -> bfloat16 bits, rounding to nearest even; NaN stays a (quiet)
// NaN of the same sign.
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);
// IEEE half bits -> float (exact).
float HalfToFloat(uint16_t bits);

}  // namespace pjrt::cli

#endif  // PJRT_CLI_NPY_H_
