#include "cli/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/text.h"
#include "client/cpp/pjrt_client/client.h"

namespace pjrt::cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct TypeInfo {
  pjrt_client::DType dtype;
  char kind;  // NumPy's kind letter: b, i, u, f
  int width;
};

constexpr TypeInfo kTypes[] = {
    {pjrt_client::DType::kPred, 'b', 1}, {pjrt_client::DType::kS8, 'i', 1},
    {pjrt_client::DType::kS16, 'i', 2},  {pjrt_client::DType::kS32, 'i', 4},
    {pjrt_client::DType::kS64, 'i', 8},  {pjrt_client::DType::kU8, 'u', 1},
    {pjrt_client::DType::kU16, 'u', 2},  {pjrt_client::DType::kU32, 'u', 4},
    {pjrt_client::DType::kU64, 'u', 8},  {pjrt_client::DType::kF16, 'f', 2},
    {pjrt_client::DType::kF32, 'f', 4},  {pjrt_client::DType::kF64, 'f', 8},
    {pjrt_client::DType::kC64, 'c', 8},  {pjrt_client::DType::kC128, 'c', 16},
};

// s4 and u4: packed two per byte on the wire, element 2i in the high nibble.
// Values of `bits` bits (4 or 2), one per byte, packed 8 / bits per byte
// with the first in the top bits, and back (sign-extended when is_signed).
std::vector<uint8_t> PackSubByte(const std::vector<uint8_t>& values, int bits) {
  const size_t per_byte = 8 / bits;
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1);
  std::vector<uint8_t> packed((values.size() + per_byte - 1) / per_byte, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const int shift = 8 - bits * static_cast<int>(i % per_byte + 1);
    packed[i / per_byte] |= static_cast<uint8_t>((values[i] & mask) << shift);
  }
  return packed;
}
std::vector<uint8_t> UnpackSubByte(const std::vector<uint8_t>& packed,
                                   int64_t count, int bits, bool is_signed) {
  const int64_t per_byte = 8 / bits;
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1);
  std::vector<uint8_t> values(count);
  for (int64_t i = 0; i < count; ++i) {
    const int shift = 8 - bits * static_cast<int>(i % per_byte + 1);
    uint8_t v = (packed[i / per_byte] >> shift) & mask;
    if (is_signed && (v >> (bits - 1))) v |= static_cast<uint8_t>(~mask);
    values[i] = v;
  }
  return values;
}

// Bits of a packed type's elements (s4, u4, f4e2m1fn: 4; s2, u2: 2), 0 for
// the others.
int PackedBits(pjrt_client::DType dtype) {
  switch (dtype) {
    case pjrt_client::DType::kS4:
    case pjrt_client::DType::kU4:
    case pjrt_client::DType::kF4E2M1FN:
      return 4;
    case pjrt_client::DType::kS2:
    case pjrt_client::DType::kU2:
      return 2;
    default:
      return 0;
  }
}

const TypeInfo* FindType(pjrt_client::DType dtype) {
  for (const TypeInfo& t : kTypes) {
    if (t.dtype == dtype) return &t;
  }
  return nullptr;
}

// The value of `key` in the header dict "{'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }", as written (quotes and parentheses kept).
std::optional<std::string> DictValue(absl::string_view header,
                                     absl::string_view key) {
  std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    quoted = absl::StrCat("\"", key, "\"");
    at = header.find(quoted);
    if (at == absl::string_view::npos) return std::nullopt;
  }
  absl::string_view rest = header.substr(at + quoted.size());
  rest = absl::StripLeadingAsciiWhitespace(rest);
  if (!absl::ConsumePrefix(&rest, ":")) return std::nullopt;
  rest = absl::StripLeadingAsciiWhitespace(rest);
  if (rest.empty()) return std::nullopt;
  size_t end;
  if (rest[0] == '\'' || rest[0] == '"') {
    end = rest.find(rest[0], 1);
    if (end == absl::string_view::npos) return std::nullopt;
    ++end;
  } else if (rest[0] == '(' || rest[0] == '[') {
    end = rest.find(rest[0] == '(' ? ')' : ']');
    if (end == absl::string_view::npos) return std::nullopt;
    ++end;
  } else {
    end = std::min(rest.find(','), rest.find('}'));
    if (end == absl::string_view::npos) end = rest.size();
  }
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

// Reverses the byte order of each `width`-byte element.
void SwapBytes(std::vector<uint8_t>& data, int width) {
  for (size_t i = 0; i + width <= data.size(); i += width) {
    std::reverse(data.begin() + i, data.begin() + i + width);
  }
}

// Fortran (column-major) order to C (row-major) order.
std::vector<uint8_t> FortranToC(const std::vector<uint8_t>& in,
                                const std::vector<int64_t>& dims, int width) {
  std::vector<uint8_t> out(in.size());
  const int rank = static_cast<int>(dims.size());
  int64_t count = static_cast<int64_t>(in.size()) / width;
  std::vector<int64_t> index(rank, 0);
  for (int64_t c = 0; c < count; ++c) {
    // `index` is the row-major position c; find its column-major offset.
    int64_t f = 0, stride = 1;
    for (int d = 0; d < rank; ++d) {
      f += index[d] * stride;
      stride *= dims[d];
    }
    std::memcpy(out.data() + c * width, in.data() + f * width, width);
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

int64_t HostArray::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string NpyDescr(pjrt_client::DType dtype) {
  if (dtype == pjrt_client::DType::kBF16) return "<u2";
  if (pjrt_client::IsMiniFloat(dtype) || dtype == pjrt_client::DType::kU4 ||
      dtype == pjrt_client::DType::kU2) {
    return "|u1";
  }
  if (dtype == pjrt_client::DType::kS4 || dtype == pjrt_client::DType::kS2) {
    return "|i1";
  }
  const TypeInfo* t = FindType(dtype);
  if (t == nullptr) return "";
  return absl::StrFormat("%c%c%d", t->width == 1 ? '|' : '<', t->kind,
                         t->width);
}

absl::StatusOr<HostArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open %s: %s", path, std::strerror(errno)));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  return ParseNpy(bytes, path);
}

absl::StatusOr<HostArray> ParseNpy(absl::string_view bytes,
                                   absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not a usable .npy file: %s", name, why));
  };
  if (bytes.size() < kMagicSize + 4 ||
      bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return bad(
        "it does not start with the .npy magic \\x93NUMPY (save it "
        "with numpy.save)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) |
                 (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("its header is cut off");
    header_len = 0;
    for (int i = 0; i < 4; ++i) {
      header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                    << (8 * i);
    }
    header_start = 12;
  } else {
    return bad(
        absl::StrFormat("format version %d is unknown (1 to 3 are "
                        "read)",
                        major));
  }
  if (bytes.size() < header_start + header_len) {
    return bad("its header is cut off");
  }
  absl::string_view header(bytes.data() + header_start, header_len);
  const absl::string_view dict = absl::StripAsciiWhitespace(header);
  if (!absl::StartsWith(dict, "{") || !absl::EndsWith(dict, "}")) {
    return bad(absl::StrFormat("its header is not a dict {...}: %s",
                               EscapeForLog(dict, 200)));
  }

  auto descr = DictValue(header, "descr");
  auto fortran = DictValue(header, "fortran_order");
  auto shape = DictValue(header, "shape");
  if (!descr || !fortran || !shape) {
    return bad(
        absl::StrFormat("its header lacks descr, fortran_order or "
                        "shape: %s",
                        EscapeForLog(dict, 200)));
  }
  if (descr->size() < 2 || (*descr)[0] != (*descr)[descr->size() - 1] ||
      ((*descr)[0] != '\'' && (*descr)[0] != '"')) {
    return bad(
        absl::StrFormat("dtype %s is a structured dtype; only plain "
                        "numeric and bool arrays are read",
                        *descr));
  }
  std::string d = descr->substr(1, descr->size() - 2);
  char order = '<';
  if (!d.empty() &&
      (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    order = d[0];
    d = d.substr(1);
  }
  if (d == "?") d = "b1";
  const TypeInfo* type = nullptr;
  int width = 0;
  if (d.size() >= 2 && absl::SimpleAtoi(d.substr(1), &width)) {
    for (const TypeInfo& t : kTypes) {
      if (t.kind == d[0] && t.width == width) type = &t;
    }
  }
  if (type == nullptr) {
    return bad(absl::StrFormat(
        "dtype '%s' is not supported; use bool, int8..int64, uint8..uint64, "
        "float16, float32, float64, complex64 or complex128 (bf16 as uint16 "
        "bit patterns or float32; f8 as uint8 codes; s4 and u4 as int8 and "
        "uint8 values)",
        descr->substr(1, descr->size() - 2)));
  }

  HostArray array;
  array.dtype = type->dtype;
  absl::string_view dims_text = *shape;
  if (!absl::ConsumePrefix(&dims_text, "(") ||
      !absl::ConsumeSuffix(&dims_text, ")")) {
    return bad(absl::StrFormat("shape %s is not a tuple", *shape));
  }
  for (absl::string_view part : absl::StrSplit(dims_text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    absl::ConsumeSuffix(&part, "L");  // Python 2 longs
    int64_t dim;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return bad(
          absl::StrFormat("shape %s has a bad dimension '%s'", *shape, part));
    }
    array.dims.push_back(dim);
  }
  // The shape's byte count, refused before it can wrap around.
  int64_t want_bytes = type->width;
  for (int64_t dim : array.dims) {
    if (__builtin_mul_overflow(want_bytes, dim, &want_bytes)) {
      return bad(
          absl::StrFormat("shape %s is too large (over 2^63 bytes)", *shape));
    }
  }
  const size_t data_start = header_start + header_len;
  const size_t want = static_cast<size_t>(want_bytes);
  if (bytes.size() - data_start < want) {
    return bad(absl::StrFormat(
        "%s needs %d bytes of data; the file has %d",
        descr->substr(1, descr->size() - 2) + absl::StrCat(*shape), want,
        bytes.size() - data_start));
  }
  array.data.assign(bytes.begin() + data_start,
                    bytes.begin() + data_start + want);
  // Complex values swap each part.
  const int unit = type->kind == 'c' ? type->width / 2 : type->width;
  if (order == '>' && unit > 1) SwapBytes(array.data, unit);
  if (*fortran == "True" && array.dims.size() > 1) {
    array.data = FortranToC(array.data, array.dims, type->width);
  }
  if (type->dtype == pjrt_client::DType::kPred) {
    for (uint8_t& b : array.data) b = b != 0;
  }
  return array;
}

absl::Status WriteNpy(const std::string& path, const HostArray& packed) {
  HostArray array = packed;
  if (const int bits = PackedBits(array.dtype); bits != 0) {
    // f4e2m1fn: its codes, one per byte, as u4's values are.
    array.data = UnpackSubByte(array.data, array.element_count(), bits,
                               array.dtype == pjrt_client::DType::kS4 ||
                                   array.dtype == pjrt_client::DType::kS2);
  }
  std::string descr = NpyDescr(array.dtype);
  if (descr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot write %s: dtype %d has no .npy equivalent",
                        path, static_cast<int>(array.dtype)));
  }
  std::string shape = "(";
  for (int64_t d : array.dims) absl::StrAppend(&shape, d, ", ");
  if (array.dims.size() > 1) shape.resize(shape.size() - 2);   // "(2, 3)"
  if (array.dims.size() == 1) shape.resize(shape.size() - 1);  // "(2,)"
  shape += ")";
  std::string header = absl::StrFormat(
      "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  // Magic (6) + version (2) + length (2) + header + '\n', padded with spaces
  // to a multiple of 64 bytes, as NumPy writes it.
  size_t total = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    // The code by what went wrong: a missing folder is NOT_FOUND, not
    // PERMISSION_DENIED.
    const int error = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        absl::StrFormat("cannot write %s: %s", path, std::strerror(error)));
  }
  out.write(kMagic, kMagicSize);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char length[2] = {static_cast<char>(header.size() & 0xff),
                          static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(array.data.data()),
            static_cast<std::streamsize>(array.data.size()));
  out.close();
  if (!out) {
    return absl::DataLossError(
        absl::StrFormat("writing %s failed: %s", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

uint16_t FloatToBfloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040);  // quiet
  }
  // Round to nearest, ties to even, on the 16 bits that are dropped.
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = (bits >> 15) & 1;
  const int exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

absl::StatusOr<HostArray> ConvertToDType(HostArray array,
                                         pjrt_client::DType want) {
  if (array.dtype == want) return array;
  if (want == pjrt_client::DType::kBF16 &&
      array.dtype == pjrt_client::DType::kU16) {
    array.dtype = pjrt_client::DType::kBF16;  // bit patterns
    return array;
  }
  if (want == pjrt_client::DType::kBF16 &&
      array.dtype == pjrt_client::DType::kF32) {
    HostArray out;
    out.dtype = pjrt_client::DType::kBF16;
    out.dims = array.dims;
    const int64_t n = array.element_count();
    out.data.resize(n * 2);
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, array.data.data() + 4 * i, 4);
      uint16_t b = FloatToBfloat16(f);
      std::memcpy(out.data.data() + 2 * i, &b, 2);
    }
    return out;
  }
  if (pjrt_client::IsMiniFloat(want) &&
      array.dtype == pjrt_client::DType::kU8) {
    // Codes: the 4- and 6-bit floats' fill only their low bits.
    const int bits = want == pjrt_client::DType::kF4E2M1FN ? 4
                     : want == pjrt_client::DType::kF6E2M3FN ||
                             want == pjrt_client::DType::kF6E3M2FN
                         ? 6
                         : 8;
    for (size_t i = 0; i < array.data.size(); ++i) {
      if (bits < 8 && array.data[i] >> bits != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "element %d of the file is %d, not a %s code (0..%d)", i,
            array.data[i], pjrt_client::DTypeName(want), (1 << bits) - 1));
      }
    }
    array.dtype = want;
    if (bits == 4) array.data = PackSubByte(array.data, 4);
    return array;
  }
  const bool want_signed =
      want == pjrt_client::DType::kS4 || want == pjrt_client::DType::kS2;
  const int int_bits =
      want == pjrt_client::DType::kF4E2M1FN ? 0 : PackedBits(want);
  if (int_bits != 0 && array.dtype == (want_signed ? pjrt_client::DType::kS8
                                                   : pjrt_client::DType::kU8)) {
    const int low = want_signed ? -(1 << (int_bits - 1)) : 0;
    const int high =
        want_signed ? (1 << (int_bits - 1)) - 1 : (1 << int_bits) - 1;
    for (size_t i = 0; i < array.data.size(); ++i) {
      const int v =
          want_signed ? static_cast<int8_t>(array.data[i]) : array.data[i];
      if (v < low || v > high) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "element %d of the file is %d, outside the range of %s (%d..%d)", i,
            v, pjrt_client::DTypeName(want), low, high));
      }
    }
    array.dtype = want;
    array.data = PackSubByte(array.data, int_bits);
    return array;
  }
  std::string hint;
  if (want == pjrt_client::DType::kBF16) {
    hint = "; give bf16 values as uint16 bit patterns or as float32";
  } else if (pjrt_client::IsMiniFloat(want)) {
    hint = absl::StrCat("; give ", pjrt_client::DTypeName(want),
                        " values as their uint8 codes");
  } else if (int_bits != 0) {
    hint = "; give s4 and s2 values as int8, u4 and u2 values as uint8";
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "the file holds %s, the parameter is %s%s",
      pjrt_client::DTypeName(array.dtype), pjrt_client::DTypeName(want), hint));
}

}  // namespace pjrt::cli
