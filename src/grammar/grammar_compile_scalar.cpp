// Strings and numbers that need an automaton: `pattern`, `format` and lengths together; integer bounds exactly;
// number bounds approximately (grammar.h says how); `multipleOf` on integers.

#include <cmath>
#include <functional>

#include "grammar/grammar_compiler.h"

namespace hearth {
namespace {

using nlohmann::json;
using Kind = GrammarNodeKind;

constexpr int64_t kMaxMagnitude = 999'999'999'999'999;  // 15 digits, as the number grammar writes them
constexpr int32_t kMaxLengthWithPattern = 1000;
constexpr int64_t kMaxMultipleOf = 1000;

// The bounds of minimum/maximum/exclusive* (2020-12 numbers, or draft-4 booleans beside minimum/maximum), within
// +-kMaxMagnitude: lo/hi the least and greatest integers they allow; ceil_low/floor_high the lower bound rounded up
// and the upper rounded down, inclusive or not (what a fraction's integer part is measured against).
struct Bounds {
  int64_t lo = -kMaxMagnitude;
  int64_t hi = kMaxMagnitude;
  int64_t ceil_low = -kMaxMagnitude;
  int64_t floor_high = kMaxMagnitude;
};

Result<Bounds> read_bounds(const json& schema, const SchemaPath& path) {
  Bounds b;
  auto number = [&](const char* key, double* out) -> Result<bool> {
    auto it = schema.find(key);
    if (it == schema.end() || it->is_boolean()) return false;
    if (!it->is_number()) return make_error("'{}.{}' must be a number", path.str(), key);
    *out = std::clamp(it->get<double>(), -2.0 * kMaxMagnitude, 2.0 * kMaxMagnitude);
    return true;
  };
  auto draft4 = [&](const char* key) { return schema.contains(key) && schema[key] == json(true); };
  auto low = [&](double v, bool exclusive) {
    b.lo = std::max(b.lo, exclusive ? static_cast<int64_t>(std::floor(v)) + 1 : static_cast<int64_t>(std::ceil(v)));
    b.ceil_low = std::max(b.ceil_low, static_cast<int64_t>(std::ceil(v)));
  };
  auto high = [&](double v, bool exclusive) {
    b.hi = std::min(b.hi, exclusive ? static_cast<int64_t>(std::ceil(v)) - 1 : static_cast<int64_t>(std::floor(v)));
    b.floor_high = std::min(b.floor_high, static_cast<int64_t>(std::floor(v)));
  };
  double v = 0;
  auto has = number("minimum", &v);
  if (!has) return has.error();
  if (*has) low(v, draft4("exclusiveMinimum"));
  has = number("maximum", &v);
  if (!has) return has.error();
  if (*has) high(v, draft4("exclusiveMaximum"));
  has = number("exclusiveMinimum", &v);
  if (!has) return has.error();
  if (*has) low(v, true);
  has = number("exclusiveMaximum", &v);
  if (!has) return has.error();
  if (*has) high(v, true);
  return b;
}

bool has_bounds(const json& schema) {
  return schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
         schema.contains("exclusiveMaximum");
}

// multipleOf as a whole divisor in 1..kMaxMultipleOf (1: none); others are refused naming the limit.
Result<int32_t> read_multiple_of(const json& schema, const SchemaPath& path) {
  auto it = schema.find("multipleOf");
  if (it == schema.end()) return 1;
  if (!it->is_number() || it->get<double>() <= 0) return make_error("'{}.multipleOf' must be above 0", path.str());
  const double m = it->get<double>();
  if (m != std::floor(m) || m > kMaxMultipleOf) {
    return make_error("'{}.multipleOf' {} is not supported: only whole numbers 1..{}", path.str(), it->dump(),
                      kMaxMultipleOf);
  }
  return static_cast<int32_t>(m);
}

}  // namespace

Result<int32_t> GrammarCompiler::dfa_node(const std::string& key, const SchemaPath& path,
                                          const std::function<Result<ByteDfa>()>& build) {
  auto [it, fresh] = dfa_memo_.try_emplace(key, static_cast<int32_t>(g.dfas_.size()));
  if (fresh) {
    auto dfa = build();
    if (!dfa) {
      dfa_memo_.erase(it);
      return make_error("'{}': {}", path.str(), dfa.error().message);
    }
    dfa_states_ += dfa->num_states();
    if (dfa_states_ > kMaxGrammarDfaStates) {
      return make_error("the schema at '{}' is too large: at most {} automaton states in all are supported", path.str(),
                        kMaxGrammarDfaStates);
    }
    g.dfas_.push_back(std::move(dfa).value());
  }
  GrammarNode n;
  n.kind = Kind::kDfa;
  n.dfa = it->second;
  return add(std::move(n));
}

Result<int32_t> GrammarCompiler::compile_string(const json& schema, const SchemaPath& path) {
  auto lo = read_count(schema, "minLength", path, 0);
  if (!lo) return lo.error();
  auto hi = read_count(schema, "maxLength", path, -1);
  if (!hi) return hi.error();
  if (*hi >= 0 && *hi < *lo) return make_error("'{}': maxLength {} is below minLength {}", path.str(), *hi, *lo);
  std::string pattern;
  std::string_view format;
  if (auto p = schema.find("pattern"); p != schema.end()) {
    if (!p->is_string()) return make_error("'{}.pattern' must be a string", path.str());
    pattern = p->get<std::string>();
  }
  if (auto f = schema.find("format"); f != schema.end()) {
    if (!f->is_string()) return make_error("'{}.format' must be a string", path.str());
    format = format_regex(f->get_ref<const std::string&>());
    if (format.empty()) {
      return make_error("'{}.format' \"{}\" is not supported; supported: date, time, date-time, uuid, email, ipv4",
                        path.str(), f->get<std::string>());
    }
  }
  if (pattern.empty() && format.empty()) {
    GrammarNode n;
    n.kind = Kind::kString;
    n.min_len = *lo;
    n.max_len = *hi;
    return add(std::move(n));
  }
  if (*lo > kMaxLengthWithPattern || *hi > kMaxLengthWithPattern) {
    return make_error("'{}': minLength/maxLength above {} beside pattern or format is not supported", path.str(),
                      kMaxLengthWithPattern);
  }
  // The automaton spells the string's quotes: JSON's '"', or Gemma 4's <|"|> (grammar.h).
  const std::string_view quote = syntax == GrammarSyntax::kGemma4 ? std::string_view("<|\"|>") : "\"";
  const std::string key = fmt::format("s{}\n{}\n{}\n{}\n{}", quote, *lo, *hi, format, pattern);
  return dfa_node(key, path, [&]() -> Result<ByteDfa> {
    std::optional<ByteDfa> dfa;
    auto meet = [&](Result<ByteDfa> next) -> Result<void> {
      if (!next) return next.error();
      if (!dfa) {
        dfa = std::move(next).value();
        return {};
      }
      auto both = dfa_intersect(*dfa, *next);
      if (!both) return both.error();
      dfa = std::move(both).value();
      return {};
    };
    if (!pattern.empty()) HEARTH_TRY(meet(compile_string_pattern(pattern, quote)));
    if (!format.empty()) HEARTH_TRY(meet(compile_string_pattern(format, quote)));
    if (*lo > 0 || *hi >= 0) {
      const std::string lengths = *hi >= 0 ? fmt::format(".{{{},{}}}", *lo, *hi) : fmt::format(".{{{},}}", *lo);
      HEARTH_TRY(meet(compile_string_pattern(lengths, quote)));
    }
    return std::move(*dfa);
  });
}

Result<int32_t> GrammarCompiler::compile_integer(const json& schema, const SchemaPath& path) {
  auto multiple = read_multiple_of(schema, path);
  if (!multiple) return multiple.error();
  if (!has_bounds(schema) && *multiple == 1) return simple(Kind::kInteger);
  auto bounds = read_bounds(schema, path);
  if (!bounds) return bounds.error();
  const int64_t lo = bounds->lo;
  const int64_t hi = bounds->hi;
  if (lo > hi) return make_error("'{}': no integer within {} lies between its bounds", path.str(), kMaxMagnitude);
  const std::string key = fmt::format("i{}\n{}\n{}", lo, hi, *multiple);
  return dfa_node(key, path, [&]() -> Result<ByteDfa> {
    auto range = compile_raw_pattern(integer_range_regex(lo, hi));
    if (!range || *multiple == 1) return range;
    return dfa_intersect(*range, integer_multiple_dfa(*multiple));
  });
}

Result<int32_t> GrammarCompiler::compile_number(const json& schema, const SchemaPath& path) {
  auto multiple = read_multiple_of(schema, path);
  if (!multiple) return multiple.error();
  if (*multiple > 1) return compile_integer(schema, path);  // whole multiples are integers
  if (!has_bounds(schema)) return simple(Kind::kNumber);
  auto bounds = read_bounds(schema, path);
  if (!bounds) return bounds.error();
  const Bounds b = *bounds;
  // Integers in [lo, hi]; then fractions that end in a non-zero digit: i.f in (i, i + 1) for
  // ceil_low <= i <= floor_high - 1, and -i.f in (-(i + 1), -i) for -floor_high <= i <= -ceil_low - 1.
  std::vector<std::string> parts;
  if (b.lo <= b.hi) parts.push_back(integer_range_regex(b.lo, b.hi));
  constexpr std::string_view kFraction = "\\.[0-9]{0,14}[1-9]";
  const int64_t up_from = std::max<int64_t>(b.ceil_low, 0);
  const int64_t up_to = b.floor_high - 1;
  if (up_from <= up_to) parts.push_back(fmt::format("(?:{}){}", integer_range_regex(up_from, up_to), kFraction));
  const int64_t down_from = std::max<int64_t>(-b.floor_high, 0);
  const int64_t down_to = -b.ceil_low - 1;
  if (down_from <= down_to) {
    parts.push_back(fmt::format("-(?:{}){}", integer_range_regex(down_from, down_to), kFraction));
  }
  if (parts.empty()) return make_error("'{}': no number lies between its bounds", path.str());
  std::string regex;
  for (const std::string& p : parts) regex += (regex.empty() ? "" : "|") + p;
  const std::string key = "n" + regex;
  return dfa_node(key, path, [&]() { return compile_raw_pattern(regex); });
}

}  // namespace hearth
