// The daemon's metrics: histograms, the text exposition format, the
// per-client totals and their cap, and session usage.
#include "daemon/metrics.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "daemon/usage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pjrt::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Histogram, CountsEachObservationInItsBucketCumulatively) {
  Histogram histogram({1, 2, 4});
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) histogram.Observe(v);
  Histogram::Snapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(snapshot.count, 5u);
  EXPECT_DOUBLE_EQ(snapshot.sum, 16.0);
}

TEST(Exposition, WritesFamiliesSamplesAndEscapedLabels) {
  Exposition out;
  out.Family("pjrtd_things_total", "counter", "Things.\nMore.");
  out.Sample("pjrtd_things_total", {{"client", "a\"b\\c\nd"}}, 3);
  out.Gauge("pjrtd_ratio", "A ratio.", 0.25);
  const std::string text = out.Take();
  EXPECT_EQ(text,
            "# HELP pjrtd_things_total Things.\\nMore.\n"
            "# TYPE pjrtd_things_total counter\n"
            "pjrtd_things_total{client=\"a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP pjrtd_ratio A ratio.\n"
            "# TYPE pjrtd_ratio gauge\n"
            "pjrtd_ratio 0.25\n");
}

TEST(Exposition, WritesHistogramBucketsWithInfSumAndCount) {
  Histogram histogram({0.5});
  histogram.Observe(0.25);
  histogram.Observe(2);
  Exposition out;
  out.HistogramSamples("pjrtd_x_seconds", {{"device", "0"}}, histogram.Read());
  EXPECT_EQ(out.Take(),
            "pjrtd_x_seconds_bucket{device=\"0\",le=\"0.5\"} 1\n"
            "pjrtd_x_seconds_bucket{device=\"0\",le=\"+Inf\"} 2\n"
            "pjrtd_x_seconds_sum{device=\"0\"} 2.25\n"
            "pjrtd_x_seconds_count{device=\"0\"} 2\n");
}

TEST(DaemonMetrics, CountsRpcsByMethodAndCodeAndUnknownMethodsApart) {
  DaemonMetrics metrics(nullptr);
  metrics.RecordRpc("/pjrt.v1.Buffers/Upload", 0, absl::Milliseconds(2));
  metrics.RecordRpc("/pjrt.v1.Buffers/Upload", 5, absl::Milliseconds(1));
  metrics.RecordRpc("/made.up.Service/Method", 12, absl::Milliseconds(1));
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("pjrtd_rpcs_total{service=\"pjrt.v1.Buffers\","
                              "method=\"Upload\",code=\"OK\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pjrtd_rpcs_total{service=\"pjrt.v1.Buffers\","
                              "method=\"Upload\",code=\"NOT_FOUND\"} 1\n"));
  // A client's made-up method name never becomes a label.
  EXPECT_THAT(text, Not(HasSubstr("made.up")));
  EXPECT_THAT(text,
              HasSubstr("pjrtd_rpcs_total{service=\"unknown\","
                        "method=\"unknown\",code=\"UNIMPLEMENTED\"} 1\n"));
}

TEST(DaemonMetrics, RunsCollectorsAfterItsOwnFamilies) {
  DaemonMetrics metrics(nullptr);
  metrics.AddCollector(
      [](Exposition& out) { out.Gauge("pjrtd_sessions", "Sessions.", 7); });
  EXPECT_THAT(metrics.Render(), HasSubstr("\npjrtd_sessions 7\n"));
}

TEST(ClientUsageTable, NamesTheFirstClientsAndSumsTheRestAsOther) {
  ClientUsageTable table(2);
  auto a = table.For("a");
  auto b = table.For("b");
  auto c = table.For("c");
  auto d = table.For("d");
  EXPECT_EQ(table.For("a"), a);
  EXPECT_NE(a, b);
  EXPECT_EQ(c, d);  // both "other"
  EXPECT_NE(c, a);
  // A client may not pose as the shared series.
  EXPECT_EQ(table.For(ClientUsageTable::kOther), c);
  EXPECT_EQ(table.List().size(), 3u);
}

TEST(ClientUsageTable, CutsLongNamesAndNamesEmptyOnes) {
  ClientUsageTable table(4);
  table.For(std::string(1000, 'x'));
  table.For("");
  std::vector<std::string> names;
  for (const auto& [name, totals] : table.List()) names.push_back(name);
  EXPECT_THAT(
      names, ::testing::UnorderedElementsAre(
                 std::string(ClientUsageTable::kMaxNameBytes, 'x'), "unnamed"));
}

TEST(ClientUsageTable, KeepsNamesPrintableAscii) {
  ClientUsageTable table(4);
  table.For("caf\xc3\xa9\n\xff!");
  ASSERT_EQ(table.List().size(), 1u);
  EXPECT_EQ(table.List()[0].first, std::string("caf") + "????" + "!");
}

TEST(SessionUsage, AddsToItselfAndToItsClientName) {
  auto client = std::make_shared<UsageTotals>();
  SessionUsage usage({5, 6}, client);
  usage.RunFinished(1, absl::Milliseconds(250), true);
  usage.RunFinished(0, absl::Milliseconds(500), false);
  usage.Transferred(TransferDirection::kToDevice, 100);
  usage.Transferred(TransferDirection::kFromDevice, 40);
  EXPECT_DOUBLE_EQ(usage.totals().device_seconds.value(), 0.75);
  EXPECT_EQ(usage.totals().runs.value(), 2);
  EXPECT_EQ(usage.totals().failed_runs.value(), 1);
  EXPECT_EQ(client->bytes_to_device.value(), 100);
  EXPECT_EQ(client->bytes_from_device.value(), 40);
  EXPECT_DOUBLE_EQ(client->device_seconds.value(), 0.75);
  EXPECT_THAT(usage.device_seconds(),
              ::testing::ElementsAre(std::pair<int, double>(5, 0.5),
                                     std::pair<int, double>(6, 0.25)));
}

TEST(MetricsAddress, TakesIpv4Ipv6AndLocalhostOnly) {
  EXPECT_TRUE(ParseMetricsAddress("127.0.0.1:9464").ok());
  EXPECT_TRUE(ParseMetricsAddress("[::1]:0").ok());
  EXPECT_EQ(ParseMetricsAddress("localhost:9464")->host, "127.0.0.1");
  for (const char* bad : {"9464", "host.example:9464", "127.0.0.1:99999",
                          "127.0.0.1:", ":9464", "[::1:9464"}) {
    auto parsed = ParseMetricsAddress(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(bad));
  }
}

}  // namespace
}  // namespace pjrt::daemon
