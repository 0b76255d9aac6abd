#include "bench_client/prometheus.h"

#include <cstdlib>
#include <limits>

namespace hearth::bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_value(std::string_view s) {
  s = trim(s);
  const std::string_view token = s.substr(0, s.find_first_of(" \t"));  // drop an optional timestamp
  if (token == "+Inf") return std::numeric_limits<double>::infinity();
  if (token == "-Inf") return -std::numeric_limits<double>::infinity();
  if (token == "NaN") return std::numeric_limits<double>::quiet_NaN();
  const std::string owned(token);
  char* end = nullptr;
  const double v = std::strtod(owned.c_str(), &end);
  if (owned.empty() || end != owned.c_str() + owned.size()) return std::nullopt;
  return v;
}

// Finds the '}' closing a label set, skipping quoted label values (which may hold '}' or escaped quotes).
size_t closing_brace(std::string_view line, size_t open) {
  bool quoted = false;
  for (size_t i = open + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '\\') {
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && c == '}') {
      return i;
    }
  }
  return std::string_view::npos;
}

// For parse(text, model): false when `labels` start with another model's label; strips this model's.
bool keep_for_model(std::string& labels, std::string_view model) {
  constexpr std::string_view kKey = "model=\"";
  if (model.empty() || !labels.starts_with(kKey)) return true;
  const size_t end = labels.find('"', kKey.size());
  if (end == std::string::npos || std::string_view(labels).substr(kKey.size(), end - kKey.size()) != model) {
    return false;
  }
  labels.erase(0, end + 1 < labels.size() && labels[end + 1] == ',' ? end + 2 : end + 1);
  return true;
}

}  // namespace

PromSamples PromSamples::parse(std::string_view text, std::string_view model) {
  PromSamples out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    if (line.empty() || line.front() == '#') continue;
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos || name_end == 0) continue;
    std::string name(line.substr(0, name_end));
    std::string labels;
    std::string_view rest = line.substr(name_end);
    if (rest.front() == '{') {
      const size_t close = closing_brace(line, name_end);
      if (close == std::string_view::npos) continue;
      labels = std::string(line.substr(name_end + 1, close - name_end - 1));
      rest = line.substr(close + 1);
    }
    const auto value = parse_value(rest);
    if (!value || !keep_for_model(labels, model)) continue;
    out.samples_[{std::move(name), std::move(labels)}] = *value;
  }
  return out;
}

std::optional<double> PromSamples::get(const std::string& name, const std::string& labels) const {
  auto it = samples_.find({name, labels});
  if (it == samples_.end()) return std::nullopt;
  return it->second;
}

std::optional<double> PromSamples::sum(const std::string& name) const {
  std::optional<double> total;
  for (auto it = samples_.lower_bound({name, ""}); it != samples_.end() && it->first.first == name; ++it) {
    total = total.value_or(0) + it->second;
  }
  return total;
}

}  // namespace hearth::bench
