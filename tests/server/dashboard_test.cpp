// The dashboard's server side without a socket: StatsHistory (series, throughput, TTFT percentiles and buckets,
// warnings by salt, bounds), the page's Content-Security-Policy and base64. The page itself, /v1/stats and
// /v1/cache through a real server and browser: e2e/dashboard.test.mjs.
#include <gtest/gtest.h>

#include "server/observe/dashboard_page.h"
#include "server/observe/stats_history.h"

namespace hearth::server {
namespace {

EngineStats stats_with(uint64_t queried, uint64_t hit, uint64_t prefill, uint64_t decode) {
  EngineStats s;
  s.num_cache_query_tokens = queried;
  s.num_cache_hit_tokens = hit;
  s.num_prefill_tokens = prefill;
  s.num_decode_tokens = decode;
  return s;
}

TEST(StatsHistory, SeriesHasOnePointPerSampleIntervalWithItsHitRateAndRates) {
  StatsHistory h;
  h.add_sample(10, stats_with(0, 0, 0, 0));
  h.add_sample(11, stats_with(100, 75, 25, 40));
  h.add_sample(12, stats_with(100, 75, 25, 60));  // nothing queried in this second
  const auto j = h.to_json(12.5, stats_with(100, 75, 25, 60), "");
  ASSERT_EQ(j["series"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["series"][0]["t"].get<double>(), -1.5);
  EXPECT_DOUBLE_EQ(j["series"][0]["hit_rate"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["series"][0]["prefill_tps"].get<double>(), 25);
  EXPECT_DOUBLE_EQ(j["series"][0]["decode_tps"].get<double>(), 40);
  EXPECT_TRUE(j["series"][1]["hit_rate"].is_null());
  EXPECT_DOUBLE_EQ(j["series"][1]["decode_tps"].get<double>(), 20);
}

TEST(StatsHistory, ThroughputIsOverTheLastTenSecondsFromTheNewestOldEnoughSample) {
  StatsHistory h;
  h.add_sample(0, stats_with(0, 0, 0, 0));
  h.add_sample(5, stats_with(0, 0, 500, 100));
  h.add_sample(15, stats_with(0, 0, 900, 300));
  // At 20: the sample at 5 is the newest at least 10 s old.
  const auto j = h.to_json(20, stats_with(0, 0, 2000, 600), "");
  EXPECT_DOUBLE_EQ(j["throughput"]["window_s"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(j["throughput"]["prefill_tokens_per_s"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["throughput"]["decode_tokens_per_s"].get<double>(), 500.0 / 15);
}

TEST(StatsHistory, NoSamplesMeansZeroThroughputAndNoSeries) {
  const auto j = StatsHistory{}.to_json(3, stats_with(10, 5, 10, 10), "");
  EXPECT_TRUE(j["series"].empty());
  EXPECT_DOUBLE_EQ(j["throughput"]["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(j["ttft"]["count"], 0);
  EXPECT_TRUE(j["ttft"]["p50_ms"].is_null());
  EXPECT_TRUE(j["ttft"]["p95_ms"].is_null());
}

TEST(StatsHistory, TtftPercentilesAreNearestRankAndBucketsCountEachRequestOnce) {
  StatsHistory h;
  for (int i = 1; i <= 20; ++i) h.record_ttft(100, i / 1000.0);  // 1..20 ms
  h.record_ttft(100, 30.0);                                      // 30 s: beyond every bound
  const auto j = h.to_json(100, {}, "");
  EXPECT_EQ(j["ttft"]["count"], 21);
  EXPECT_DOUBLE_EQ(j["ttft"]["p50_ms"].get<double>(), 11);  // rank ceil(10.5) = 11
  EXPECT_DOUBLE_EQ(j["ttft"]["p95_ms"].get<double>(), 20);  // rank ceil(19.95) = 20
  const auto& buckets = j["ttft"]["buckets"];
  ASSERT_EQ(buckets.size(), std::size(StatsHistory::kTtftBoundsMs) + 1);
  EXPECT_EQ(buckets[0]["le_ms"], 5);
  EXPECT_EQ(buckets[0]["count"], 5);   // 1..5 ms
  EXPECT_EQ(buckets[1]["count"], 5);   // 6..10
  EXPECT_EQ(buckets[2]["count"], 10);  // 11..20 (<= 25)
  EXPECT_TRUE(buckets.back()["le_ms"].is_null());
  EXPECT_EQ(buckets.back()["count"], 1);
}

TEST(StatsHistory, OnlyTheLastFiveMinutesAreKept) {
  StatsHistory h;
  h.record_ttft(0, 0.001);
  h.add_sample(0, {});
  for (int t = 1; t <= 400; ++t) h.add_sample(t, {});
  h.record_ttft(400, 0.002);
  const auto j = h.to_json(400, {}, "");
  EXPECT_EQ(j["ttft"]["count"], 1);
  EXPECT_DOUBLE_EQ(j["ttft"]["p50_ms"].get<double>(), 2);
  EXPECT_EQ(j["series"].size(), 300u);  // samples 100..400
  EXPECT_DOUBLE_EQ(j["series"][0]["t"].get<double>(), -299);
}

TEST(StatsHistory, TtftWindowHoldsAtMostItsBound) {
  StatsHistory h;
  for (size_t i = 0; i < StatsHistory::kMaxTtfts + 100; ++i) h.record_ttft(1, 0.001);
  EXPECT_EQ(h.to_json(1, {}, "")["ttft"]["count"], StatsHistory::kMaxTtfts);
}

TEST(StatsHistory, WarningsAreListedOnlyForTheirSaltNewestFirst) {
  StatsHistory h;
  h.record_warning({1, "", {5, 9, 80, 4}, "10:01"});
  h.record_warning({2, "tenant-a", {5, 9, 70, 4}, "secret"});
  h.record_warning({3, "", {6, 10, 90, 5}, "10:02"});
  const auto plain = h.to_json(4, {}, "")["volatile_warnings"];
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0]["text"], "10:02");
  EXPECT_DOUBLE_EQ(plain[0]["age_s"].get<double>(), 1);
  EXPECT_EQ(plain[0]["tokens_lost"], 90);
  EXPECT_EQ(plain[1]["text"], "10:01");
  const auto salted = h.to_json(4, {}, "tenant-a")["volatile_warnings"];
  ASSERT_EQ(salted.size(), 1u);
  EXPECT_EQ(salted[0]["text"], "secret");
  EXPECT_TRUE(h.to_json(4, {}, "tenant-b")["volatile_warnings"].empty());
  for (int i = 0; i < 40; ++i) h.record_warning({5, "", {}, "x"});
  EXPECT_EQ(h.to_json(6, {}, "")["volatile_warnings"].size(), StatsHistory::kMaxWarnings);
}

TEST(DashboardPage, Base64FollowsRfc4648) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
}

TEST(DashboardPage, CspAllowsExactlyThePagesOwnScriptAndStyleAndNoOtherOrigin) {
  // sha256("") = 47DEQpj8…, sha256("a") = ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs= (base64 of the digest).
  const std::string csp = dashboard_csp("<html><style></style><script>a</script></html>");
  EXPECT_EQ(csp,
            "default-src 'none'; script-src 'sha256-ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs='; "
            "style-src 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='; connect-src 'self'; img-src 'self' "
            "data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
}

TEST(DashboardPage, TheEmbeddedPageIsTheSourceFileAndNamesNoOtherOrigin) {
  const std::string_view html = dashboard_html();
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(html.find("/v1/stats"), std::string_view::npos);
  EXPECT_EQ(html.find("http://", html.find("<script>")), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string_view::npos);
  EXPECT_EQ(html.find("innerHTML"), std::string_view::npos);  // text reaches the DOM as textContent only
  EXPECT_FALSE(dashboard_csp(html).empty());
}

}  // namespace
}  // namespace hearth::server
