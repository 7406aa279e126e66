// The host's window geometry (reduce-window, select-and-scatter): the
// operand elements it visits for each output against every window
// position checked one by one, windows far larger than their operand, and
// cancellation within one output's window.
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "base/cancellation.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/kernel_window.h"
#include "gtest/gtest.h"

namespace pjrt::compiler::host {
namespace {

WindowGeometry Make(std::vector<int64_t> dims,
                    std::vector<hlo::WindowDimension> window) {
  WindowGeometry g;
  g.in_dims = dims;
  g.in_strides = RowMajorStrides(dims);
  g.window = window;
  for (const hlo::WindowDimension& w : window) g.window_sizes.push_back(w.size);
  g.Prepare();
  return g;
}

// Every window position in row-major order, kept where it lands on an
// operand element: what the spans must visit.
std::vector<int64_t> Naive(const WindowGeometry& g,
                           const std::vector<int64_t>& out) {
  std::vector<int64_t> offsets;
  const int rank = static_cast<int>(g.in_dims.size());
  std::vector<int64_t> w(rank, 0);
  for (int64_t size : g.window_sizes) {
    if (size == 0) return offsets;
  }
  do {
    int64_t offset = 0;
    bool valid = true;
    for (int d = 0; d < rank; ++d) {
      const hlo::WindowDimension& wd = g.window[d];
      const int64_t p =
          out[d] * wd.stride + w[d] * wd.window_dilation - wd.padding_low;
      if (p < 0 || p % wd.base_dilation != 0 ||
          p / wd.base_dilation >= g.in_dims[d]) {
        valid = false;
        break;
      }
      offset += p / wd.base_dilation * g.in_strides[d];
    }
    if (valid) offsets.push_back(offset);
  } while (NextIndex(g.window_sizes, &w));
  return offsets;
}

TEST(WindowGeometry, VisitsExactlyThePositionsThatLandOnElements) {
  std::mt19937 rng(11);
  const auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int rank = pick(1, 2);
    std::vector<int64_t> dims;
    std::vector<hlo::WindowDimension> window(rank);
    std::vector<int64_t> out_dims;
    for (int d = 0; d < rank; ++d) {
      dims.push_back(pick(0, 6));
      hlo::WindowDimension& w = window[d];
      w.size = pick(0, 6);
      w.stride = pick(1, 3);
      w.padding_low = pick(-3, 5);
      w.padding_high = pick(-3, 5);
      w.base_dilation = pick(1, 5);
      w.window_dilation = pick(1, 4);
      const int64_t dilated =
          dims[d] == 0 ? 0 : (dims[d] - 1) * w.base_dilation + 1;
      const int64_t padded = dilated + w.padding_low + w.padding_high;
      const int64_t extent =
          w.size == 0 ? 0 : (w.size - 1) * w.window_dilation + 1;
      out_dims.push_back(padded >= extent && padded >= 0
                             ? (padded - extent) / w.stride + 1
                             : 0);
    }
    const WindowGeometry g = Make(dims, window);
    std::vector<int64_t> o(rank, 0);
    if (Product(out_dims) == 0) continue;
    do {
      std::vector<int64_t> got;
      g.ForEachElement(o, [&](int64_t at) { got.push_back(at); });
      ASSERT_EQ(got, Naive(g, o)) << "trial " << trial;
      ++checked;
    } while (NextIndex(out_dims, &o));
  }
  EXPECT_GT(checked, 10000);
}

TEST(WindowGeometry, AWindowOfTwoToThe54PositionsOverOneElementVisitsIt) {
  constexpr int64_t kHuge = int64_t{1} << 54;
  hlo::WindowDimension w;
  w.size = kHuge;
  w.stride = kHuge;
  w.padding_low = kHuge;
  w.padding_high = kHuge;
  const WindowGeometry g = Make({1}, {w});
  int visits = 0;
  g.ForEachElement({0}, [&](int64_t) { ++visits; });
  EXPECT_EQ(visits, 0);  // every position of the first window is padding
  g.ForEachElement({1}, [&](int64_t at) {
    EXPECT_EQ(at, 0);
    ++visits;
  });
  EXPECT_EQ(visits, 1);
}

TEST(WindowGeometry, LargeBaseDilationsFindTheirFewPositionsDirectly) {
  // Elements 2^30 apart, a window dilated by 3 over them: the positions
  // that land are 2^30 apart, found without walking the holes.
  hlo::WindowDimension w;
  w.base_dilation = int64_t{1} << 30;
  w.window_dilation = 3;
  w.size = int64_t{1} << 32;
  const WindowGeometry g = Make({4}, {w});
  std::vector<int64_t> got;
  g.ForEachElement({0}, [&](int64_t at) { got.push_back(at); });
  // Position w lands on element 3 w / 2^30 where 2^30 divides 3 w: w = 0,
  // 2^30, 2^31, ..., elements 0, 3, 6, ...; of the 4 elements, 0 and 3.
  EXPECT_EQ(got, (std::vector<int64_t>{0, 3}));
}

TEST(WindowGeometry, StopsWithinOneWindowOnceCancelled) {
  hlo::WindowDimension w;
  w.size = int64_t{1} << 24;
  const WindowGeometry g = Make({int64_t{1} << 24}, {w});
  Cancellation cancellation;
  cancellation.Cancel(absl::CancelledError("session closed"));
  int64_t visits = 0;
  g.ForEachElement(
      {0}, [&](int64_t) { ++visits; }, &cancellation);
  EXPECT_EQ(visits, 65536);
}

}  // namespace
}  // namespace pjrt::compiler::host
