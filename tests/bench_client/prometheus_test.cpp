// The Prometheus text reader: labelled and plain samples, comments, timestamps, special values, bad lines.

#include <gtest/gtest.h>

#include <cmath>

#include "bench_client/prometheus.h"

namespace hearth::bench {
namespace {

constexpr const char* kText = R"(# HELP hearth_kv_blocks KV blocks by state.
# TYPE hearth_kv_blocks gauge
hearth_kv_blocks{state="used"} 12
hearth_kv_blocks{state="pinned"} 3
hearth_kv_blocks{state="free"} 100
hearth_kv_blocks_total 115
hearth_kv_evictions_total 7 1712345678000
hearth_time_to_first_token_seconds_bucket{le="0.5"} 4
hearth_time_to_first_token_seconds_bucket{le="+Inf"} 9
weird{path="a}b\"c",code="500"} 2.5e3
nan_metric NaN
this line is not a sample
broken{state="x" 5
)";

TEST(PromSamples, ReadsLabelledAndPlainSamples) {
  const PromSamples s = PromSamples::parse(kText);
  EXPECT_EQ(s.get("hearth_kv_blocks", "state=\"used\""), 12);
  EXPECT_EQ(s.get("hearth_kv_blocks", "state=\"pinned\""), 3);
  EXPECT_EQ(s.get("hearth_kv_blocks_total"), 115);
  EXPECT_EQ(s.get("hearth_kv_evictions_total"), 7);  // the timestamp is not the value
  EXPECT_EQ(s.get("hearth_time_to_first_token_seconds_bucket", "le=\"+Inf\""), 9);
  EXPECT_EQ(s.get("weird", "path=\"a}b\\\"c\",code=\"500\""), 2500);  // '}' and '\"' inside a quoted label
  EXPECT_TRUE(std::isnan(*s.get("nan_metric")));
  EXPECT_FALSE(s.get("hearth_kv_blocks").has_value());  // no unlabelled sample of that name
  EXPECT_FALSE(s.get("missing").has_value());
}

TEST(PromSamples, SumsOverLabelsAndSkipsBadLines) {
  const PromSamples s = PromSamples::parse(kText);
  EXPECT_EQ(s.sum("hearth_kv_blocks"), 115);
  EXPECT_FALSE(s.sum("missing").has_value());
  EXPECT_FALSE(s.get("this").has_value());
  EXPECT_FALSE(s.get("broken", "state=\"x\"").has_value());
  EXPECT_EQ(s.size(), 9u);
}

TEST(PromSamples, AModelIsReadAloneFromAServerOfSeveral) {
  const std::string text =
      "hearth_memory_budget_bytes 100\n"
      "hearth_kv_blocks_total{model=\"a\"} 8\n"
      "hearth_kv_blocks_total{model=\"b\"} 16\n"
      "hearth_kv_blocks{model=\"a\",state=\"used\"} 3\n"
      "hearth_kv_blocks{model=\"ab\",state=\"used\"} 5\n";
  const PromSamples a = PromSamples::parse(text, "a");
  EXPECT_EQ(a.get("hearth_kv_blocks_total"), 8);
  EXPECT_EQ(a.get("hearth_kv_blocks", "state=\"used\""), 3);
  EXPECT_EQ(a.get("hearth_memory_budget_bytes"), 100);
  EXPECT_EQ(a.size(), 3u);
  const PromSamples all = PromSamples::parse(text);
  EXPECT_EQ(all.get("hearth_kv_blocks_total", "model=\"b\""), 16);
  EXPECT_EQ(all.size(), 5u);
}

TEST(PromSamples, EmptyAndGarbageTextGiveNoSamples) {
  EXPECT_TRUE(PromSamples::parse("").empty());
  EXPECT_TRUE(PromSamples::parse("<html>not metrics</html>\n").empty());
}

}  // namespace
}  // namespace hearth::bench
