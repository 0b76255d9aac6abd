#include "util/units.h"

#include <cctype>
#include <cmath>
#include <iterator>

namespace hearth {

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : v < 100 ? 1 : 0, kUnits[unit]);
}

std::string format_thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

Result<int64_t> parse_bytes(std::string_view text) {
  const std::string s(text);
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(s, &pos);
  } catch (...) {
    return make_error("'{}' is not a size: expected a number with an optional unit (B, KiB, MiB, GiB)", text);
  }
  std::string unit;
  for (char c : s.substr(pos)) {
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kib" || unit == "kb") scale = 1024.0;
  if (unit == "m" || unit == "mib" || unit == "mb") scale = 1024.0 * 1024;
  if (unit == "g" || unit == "gib" || unit == "gb") scale = 1024.0 * 1024 * 1024;
  if (unit == "t" || unit == "tib" || unit == "tb") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0) return make_error("'{}' is not a size: unknown unit '{}' (B, KiB, MiB, GiB, TiB)", text, unit);
  if (!(value > 0) || !std::isfinite(value) || value * scale > 9.0e18) {
    return make_error("'{}' is not a positive size", text);
  }
  return static_cast<int64_t>(value * scale);
}

}  // namespace hearth
