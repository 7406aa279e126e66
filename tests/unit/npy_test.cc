#include "cli/npy.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace pjrt::cli {
namespace {

class NpyTest : public ::testing::Test {
 protected:
  NpyTest() {
    dir_ = std::filesystem::temp_directory_path() /
           ("npy_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~NpyTest() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  // Writes a .npy file by hand: version 1.0, `header` padded to 64 bytes.
  std::string WriteRaw(const std::string& name, std::string header,
                       const std::string& data) {
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::string path = Path(name);
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {static_cast<char>(header.size() & 0xff),
                   static_cast<char>(header.size() >> 8)};
    out.write(len, 2);
    out << header << data;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(NpyTest, WritesAndReadsBackEveryDtype) {
  const pjrt_client::DType dtypes[] = {
      pjrt_client::DType::kPred, pjrt_client::DType::kS8,
      pjrt_client::DType::kS16,  pjrt_client::DType::kS32,
      pjrt_client::DType::kS64,  pjrt_client::DType::kU8,
      pjrt_client::DType::kU16,  pjrt_client::DType::kU32,
      pjrt_client::DType::kU64,  pjrt_client::DType::kF16,
      pjrt_client::DType::kF32,  pjrt_client::DType::kF64};
  const int widths[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8};
  for (int t = 0; t < 12; ++t) {
    SCOPED_TRACE(NpyDescr(dtypes[t]));
    HostArray array;
    array.dtype = dtypes[t];
    array.dims = {2, 3};
    array.data.resize(6 * widths[t]);
    for (size_t i = 0; i < array.data.size(); ++i) {
      array.data[i] =
          dtypes[t] == pjrt_client::DType::kPred ? i % 2 : i * 37 + 1;
    }
    std::string path = Path("a.npy");
    ASSERT_TRUE(WriteNpy(path, array).ok());
    auto back = ReadNpy(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, array.dtype);
    EXPECT_EQ(back->dims, array.dims);
    EXPECT_EQ(back->data, array.data);
  }
}

TEST_F(NpyTest, DescrsAreNumpys) {
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kPred), "|b1");
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kS8), "|i1");
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kU8), "|u1");
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kS64), "<i8");
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kF16), "<f2");
  EXPECT_EQ(NpyDescr(pjrt_client::DType::kBF16), "<u2");
}

TEST_F(NpyTest, ScalarsAndVectorsKeepTheirRank) {
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{}, std::vector<int64_t>{4},
        std::vector<int64_t>{0, 3}}) {
    HostArray array;
    array.dtype = pjrt_client::DType::kF32;
    array.dims = dims;
    array.data.resize(array.element_count() * 4, 7);
    ASSERT_TRUE(WriteNpy(Path("s.npy"), array).ok());
    auto back = ReadNpy(Path("s.npy"));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dims, dims);
    EXPECT_EQ(back->data.size(), array.data.size());
  }
}

TEST_F(NpyTest, ReadsBigEndianAndFortranOrder) {
  // >i4, values 1 and 2.
  std::string be = WriteRaw(
      "be.npy", "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
      std::string("\0\0\0\1\0\0\0\2", 8));
  auto a = ReadNpy(be);
  ASSERT_TRUE(a.ok()) << a.status();
  int32_t values[2];
  std::memcpy(values, a->data.data(), 8);
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 2);

  // [[0, 1, 2], [3, 4, 5]] stored column-major: 0 3 1 4 2 5.
  std::string f = WriteRaw(
      "f.npy", "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }",
      std::string("\0\3\1\4\2\5", 6));
  auto b = ReadNpy(f);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data, std::vector<uint8_t>({0, 1, 2, 3, 4, 5}));
}

TEST_F(NpyTest, BadFilesAreInvalidArgumentNamingTheProblem) {
  std::string path = Path("text.npy");
  std::ofstream(path) << "not an array";
  auto a = ReadNpy(path);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("magic"), std::string::npos);

  auto c = ReadNpy(WriteRaw(
      "c.npy", "{'descr': '<c32', 'fortran_order': False, 'shape': (1,), }",
      std::string(32, '\0')));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'<c32' is not supported"),
            std::string::npos)
      << c.status();

  auto short_data = ReadNpy(WriteRaw(
      "short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
      std::string(8, '\0')));
  ASSERT_FALSE(short_data.ok());
  EXPECT_NE(short_data.status().message().find("needs 12 bytes"),
            std::string::npos)
      << short_data.status();

  auto missing = ReadNpy(Path("missing.npy"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  // A header that holds the keys but is not a dict.
  auto not_dict = ReadNpy(WriteRaw(
      "list.npy", "[['descr': '<f4', 'fortran_order': False, 'shape': (1,)]",
      std::string(4, '\0')));
  ASSERT_FALSE(not_dict.ok());
  EXPECT_NE(not_dict.status().message().find("its header is not a dict"),
            std::string::npos)
      << not_dict.status();
}

TEST_F(NpyTest, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(FloatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(FloatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(FloatToBfloat16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)),
            0x3f81);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  // The largest float rounds up to infinity, as in XLA.
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);
  uint16_t nan = FloatToBfloat16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(nan)));
  EXPECT_EQ(Bfloat16ToFloat(0x3fc0), 1.5f);
}

TEST_F(NpyTest, HalfDecodesExactly) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
}

TEST_F(NpyTest, ConvertsOnlyWhatNeedsNoGuessing) {
  HostArray f32;
  f32.dtype = pjrt_client::DType::kF32;
  f32.dims = {2};
  float values[2] = {1.0f, -0.5f};
  f32.data.assign(reinterpret_cast<uint8_t*>(values),
                  reinterpret_cast<uint8_t*>(values) + 8);
  auto bf16 = ConvertToDType(f32, pjrt_client::DType::kBF16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  uint16_t bits[2];
  std::memcpy(bits, bf16->data.data(), 4);
  EXPECT_EQ(bits[0], 0x3f80);
  EXPECT_EQ(bits[1], 0xbf00);

  HostArray u16;
  u16.dtype = pjrt_client::DType::kU16;
  u16.dims = {1};
  u16.data = {0x80, 0x3f};
  auto as_bits = ConvertToDType(u16, pjrt_client::DType::kBF16);
  ASSERT_TRUE(as_bits.ok());
  EXPECT_EQ(as_bits->data, u16.data);

  auto refused = ConvertToDType(f32, pjrt_client::DType::kF64);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "the file holds f32, the parameter is f64");
}

TEST_F(NpyTest, AShapeWhoseByteCountWrapsAroundIsRefused) {
  // 7777777777777777772 x 3 x 4 bytes is over 2^64: found by npy_fuzz.
  auto a = ReadNpy(WriteRaw("wrap.npy",
                            "{'descr': '<f4', 'fortran_order': False, 'shape': "
                            "(7777777777777777772, 3), }",
                            std::string(16, '\0')));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("too large"), std::string::npos)
      << a.status();
}

}  // namespace
}  // namespace pjrt::cli
