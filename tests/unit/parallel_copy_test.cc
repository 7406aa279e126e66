#include "base/parallel_copy.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pjrt {
namespace {

// Sizes around the threshold and the piece boundaries, odd ones included.
TEST(ParallelMemcpy, CopiesEveryByteOfEverySize) {
  for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{4095},
                       kParallelCopyMinBytes - 1, kParallelCopyMinBytes,
                       kParallelCopyMinBytes + 4097, int64_t{33} << 20}) {
    std::vector<uint8_t> src(static_cast<size_t>(size));
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    }
    // One guard byte each side must stay untouched.
    std::vector<uint8_t> dst(src.size() + 2, 0xAB);
    ParallelMemcpy(dst.data() + 1, src.data(), size);
    EXPECT_EQ(dst.front(), 0xAB) << size;
    EXPECT_EQ(dst.back(), 0xAB) << size;
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1)) << size;
  }
}

TEST(ParallelMemcpy, NegativeSizesCopyNothing) {
  uint8_t dst = 7, src = 9;
  ParallelMemcpy(&dst, &src, -5);
  EXPECT_EQ(dst, 7);
}

}  // namespace
}  // namespace pjrt
