#pragma once
// A small reader for the Prometheus text exposition format (what /metrics serves): one sample per line,
// `name{label="value",...} number [timestamp]`, with # HELP / # TYPE comments. Enough to take counters and
// gauges before and after a benchmark; it does not validate types.

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hearth::bench {

class PromSamples {
 public:
  // Parses `text`; lines that do not parse are skipped (a scrape of a foreign server never fails the bench). With
  // `model`, a Hearth server of several models is read as that model alone: samples whose first label is
  // model="MODEL" lose that label, samples of another model are skipped, unlabelled ones stay.
  static PromSamples parse(std::string_view text, std::string_view model = {});

  // The sample of `name` whose labels are exactly `labels` (e.g. `state="used"`, in the order the
  // server wrote them, without braces; empty for an unlabelled sample).
  [[nodiscard]] std::optional<double> get(const std::string& name, const std::string& labels = "") const;

  // The sum of every sample of `name`, whatever its labels; nullopt when there is none.
  [[nodiscard]] std::optional<double> sum(const std::string& name) const;

  [[nodiscard]] size_t size() const { return samples_.size(); }
  [[nodiscard]] bool empty() const { return samples_.empty(); }

 private:
  std::map<std::pair<std::string, std::string>, double> samples_;  // (name, labels) -> value
};

}  // namespace hearth::bench
