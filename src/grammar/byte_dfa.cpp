// ByteDfa construction: the subset construction from regex.cpp's NFA, products, trimming, and the automata the
// schema compiler asks for by name (integer ranges and multiples, formats).

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "grammar/byte_dfa_build.h"

namespace hearth {
namespace {

Error too_large() {
  return make_error("the automaton is too large (over {} states); simplify the pattern or its bounds", kMaxDfaStates);
}

// Keeps the states reachable from 0 that reach an accepting state, renumbered in breadth-first order, with their
// distances to acceptance. `next` is [num_states, num_classes].
Result<ByteDfa> trim(const std::array<uint8_t, 256>& byte_class, int32_t num_classes, const std::vector<int32_t>& next,
                     const std::vector<uint8_t>& accept) {
  const auto n = static_cast<int32_t>(accept.size());
  std::vector<std::vector<int32_t>> incoming(static_cast<size_t>(n));
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < num_classes; ++c) {
      const int32_t t = next[s * num_classes + c];
      if (t >= 0) incoming[t].push_back(s);
    }
  }
  std::vector<int32_t> dist(static_cast<size_t>(n), INT32_MAX);
  std::vector<int32_t> queue;
  for (int32_t s = 0; s < n; ++s) {
    if (accept[s] != 0) {
      dist[s] = 0;
      queue.push_back(s);
    }
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    for (int32_t p : incoming[queue[i]]) {
      if (dist[p] != INT32_MAX) continue;
      dist[p] = dist[queue[i]] + 1;
      queue.push_back(p);
    }
  }
  if (n == 0 || dist[0] == INT32_MAX) return make_error("no string the grammar can write matches it");
  std::vector<int32_t> id(static_cast<size_t>(n), -1);
  std::vector<int32_t> order = {0};
  id[0] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (int32_t c = 0; c < num_classes; ++c) {
      const int32_t t = next[order[i] * num_classes + c];
      if (t < 0 || dist[t] == INT32_MAX || id[t] >= 0) continue;
      id[t] = static_cast<int32_t>(order.size());
      order.push_back(t);
    }
  }
  ByteDfa out;
  out.byte_class = byte_class;
  out.num_classes = num_classes;
  const auto m = static_cast<int32_t>(order.size());
  out.next.assign(static_cast<size_t>(m) * num_classes, -1);
  out.accept.resize(static_cast<size_t>(m));
  out.dist.resize(static_cast<size_t>(m));
  out.final.resize(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) {
    const int32_t s = order[i];
    bool leads_on = false;
    for (int32_t c = 0; c < num_classes; ++c) {
      const int32_t t = next[s * num_classes + c];
      if (t < 0 || id[t] < 0) continue;
      out.next[i * num_classes + c] = static_cast<int16_t>(id[t]);
      leads_on = true;
    }
    out.accept[i] = accept[s];
    out.dist[i] = dist[s];
    out.final[i] = accept[s] != 0 && !leads_on ? 1 : 0;
  }
  return out;
}

// Classes of bytes that every edge set treats alike, and one byte of each.
int32_t byte_classes(const std::vector<ByteSet>& sets, std::array<uint8_t, 256>& byte_class,
                     std::vector<uint8_t>& representative) {
  std::array<int32_t, 256> cls{};
  int32_t num = 1;
  for (const ByteSet& set : sets) {
    std::map<std::pair<int32_t, bool>, int32_t> split;
    for (int b = 0; b < 256; ++b) {
      auto [it, fresh] =
          split.try_emplace({cls[b], set.test(static_cast<size_t>(b))}, static_cast<int32_t>(split.size()));
      cls[b] = it->second;
    }
    num = static_cast<int32_t>(split.size());
  }
  representative.assign(static_cast<size_t>(num), 0);
  std::vector<uint8_t> seen(static_cast<size_t>(num), 0);
  for (int b = 0; b < 256; ++b) {
    byte_class[b] = static_cast<uint8_t>(cls[b]);
    if (seen[cls[b]] == 0) representative[cls[b]] = static_cast<uint8_t>(b);
    seen[cls[b]] = 1;
  }
  return num;
}

}  // namespace

Result<ByteDfa> nfa_to_dfa(const ByteNfa& nfa, int32_t start, int32_t accept) {
  std::vector<ByteSet> sets;
  {
    std::unordered_set<ByteSet> distinct;
    for (const auto& s : nfa.states) {
      for (const auto& [bytes, to] : s.edges) {
        if (distinct.insert(bytes).second) sets.push_back(bytes);
      }
    }
  }
  std::array<uint8_t, 256> byte_class{};
  std::vector<uint8_t> representative;
  const int32_t num_classes = byte_classes(sets, byte_class, representative);
  std::vector<uint8_t> mark(static_cast<size_t>(nfa.size()), 0);
  auto closure = [&](std::vector<int32_t> seeds) {
    std::vector<int32_t> out;
    while (!seeds.empty()) {
      const int32_t s = seeds.back();
      seeds.pop_back();
      if (mark[s] != 0) continue;
      mark[s] = 1;
      out.push_back(s);
      for (int32_t t : nfa.states[s].eps) seeds.push_back(t);
    }
    for (int32_t s : out) mark[s] = 0;
    std::sort(out.begin(), out.end());
    return out;
  };
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> subsets = {closure({start})};
  ids.emplace(subsets[0], 0);
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  for (size_t i = 0; i < subsets.size(); ++i) {
    accepting.push_back(std::binary_search(subsets[i].begin(), subsets[i].end(), accept) ? 1 : 0);
    for (int32_t c = 0; c < num_classes; ++c) {
      std::vector<int32_t> seeds;
      for (int32_t s : subsets[i]) {
        for (const auto& [bytes, to] : nfa.states[s].edges) {
          if (bytes.test(representative[c])) seeds.push_back(to);
        }
      }
      if (seeds.empty()) {
        next.push_back(-1);
        continue;
      }
      std::vector<int32_t> target = closure(std::move(seeds));
      auto [it, fresh] = ids.try_emplace(target, static_cast<int32_t>(subsets.size()));
      if (fresh) {
        if (static_cast<int32_t>(subsets.size()) >= kMaxDfaStates) return too_large();
        subsets.push_back(std::move(target));
      }
      next.push_back(it->second);
    }
  }
  return trim(byte_class, num_classes, next, accepting);
}

Result<ByteDfa> dfa_intersect(const ByteDfa& a, const ByteDfa& b, bool negate_b) {
  std::array<uint8_t, 256> byte_class{};
  std::vector<uint8_t> representative;
  std::map<std::pair<int32_t, int32_t>, int32_t> pair_class;
  for (int x = 0; x < 256; ++x) {
    auto [it, fresh] =
        pair_class.try_emplace({a.byte_class[x], b.byte_class[x]}, static_cast<int32_t>(pair_class.size()));
    byte_class[x] = static_cast<uint8_t>(it->second);
    if (fresh) representative.push_back(static_cast<uint8_t>(x));
  }
  const auto num_classes = static_cast<int32_t>(representative.size());
  std::unordered_map<int64_t, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> states = {{0, 0}};
  ids.emplace(0, 0);
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  for (size_t i = 0; i < states.size(); ++i) {
    const auto [sa, sb] = states[i];
    const bool b_accepts = sb >= 0 && b.accept[sb] != 0;
    accepting.push_back(a.accept[sa] != 0 && (negate_b ? !b_accepts : b_accepts) ? 1 : 0);
    for (int32_t c = 0; c < num_classes; ++c) {
      const int32_t ta = a.step(sa, representative[c]);
      const int32_t tb = sb < 0 ? -1 : b.step(sb, representative[c]);
      if (ta < 0 || (!negate_b && tb < 0)) {
        next.push_back(-1);
        continue;
      }
      const int64_t key = int64_t{ta} * (b.num_states() + 1) + (tb + 1);
      auto [it, fresh] = ids.try_emplace(key, static_cast<int32_t>(states.size()));
      if (fresh) {
        if (static_cast<int32_t>(states.size()) >= kMaxDfaStates) return too_large();
        states.emplace_back(ta, tb);
      }
      next.push_back(it->second);
    }
  }
  return trim(byte_class, num_classes, next, accepting);
}

namespace {

int64_t pow10(int32_t k) {
  int64_t p = 1;
  while (k-- > 0) p *= 10;
  return p;
}

// [a, b] of numbers with `digits` digits: a prefix of fixed digits, a digit range, then free digits, block by block.
void same_length_blocks(int64_t a, int64_t b, int32_t digits, std::vector<std::string>& out) {
  int64_t start = a;
  while (start <= b) {
    int32_t k = 0;
    while (k + 1 < digits && start % pow10(k + 1) == 0 && start + pow10(k + 1) - 1 <= b) ++k;
    const int64_t block = pow10(k);
    const auto d = static_cast<int32_t>((start / block) % 10);
    int32_t m = 1;
    while (d + m <= 9 && start + (m + 1) * block - 1 <= b) ++m;
    std::string part = start >= block * 10 ? std::to_string(start / (block * 10)) : std::string();
    part += m == 1 ? std::to_string(d) : fmt::format("[{}-{}]", d, d + m - 1);
    if (k > 0) part += fmt::format("[0-9]{{{}}}", k);
    out.push_back(std::move(part));
    start += m * block;
  }
}

void non_negative_range(int64_t a, int64_t b, std::vector<std::string>& out) {
  for (int32_t digits = 1; digits <= 16; ++digits) {
    const int64_t lo = std::max(a, digits == 1 ? int64_t{0} : pow10(digits - 1));
    const int64_t hi = std::min(b, pow10(digits) - 1);
    if (lo <= hi) same_length_blocks(lo, hi, digits, out);
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += '|';
    out += p;
  }
  return out;
}

}  // namespace

std::string integer_range_regex(int64_t lo, int64_t hi) {
  std::vector<std::string> alternatives;
  if (lo < 0) {
    std::vector<std::string> negative;
    non_negative_range(hi < 0 ? -hi : 1, -lo, negative);
    alternatives.push_back("-(?:" + join(negative) + ")");
  }
  if (hi >= 0) non_negative_range(std::max<int64_t>(lo, 0), hi, alternatives);
  return join(alternatives);
}

ByteDfa integer_multiple_dfa(int32_t divisor) {
  // Classes: ten digits, '-', everything else. States: 0 start, 1 after '-', 2 "0", 3 + r: remainder r so far.
  ByteDfa raw;
  raw.byte_class.fill(11);
  for (int d = 0; d < 10; ++d) raw.byte_class['0' + d] = static_cast<uint8_t>(d);
  raw.byte_class['-'] = 10;
  raw.num_classes = 12;
  const int32_t n = 3 + divisor;
  std::vector<int32_t> next(static_cast<size_t>(n) * 12, -1);
  std::vector<uint8_t> accept(static_cast<size_t>(n), 0);
  next[0 * 12 + 10] = 1;
  next[0 * 12 + 0] = 2;
  accept[2] = 1;
  accept[3] = 1;
  for (int d = 1; d < 10; ++d) {
    next[0 * 12 + d] = 3 + d % divisor;
    next[1 * 12 + d] = 3 + d % divisor;
  }
  for (int32_t r = 0; r < divisor; ++r) {
    for (int d = 0; d < 10; ++d) next[(3 + r) * 12 + d] = 3 + (r * 10 + d) % divisor;
  }
  auto out = trim(raw.byte_class, raw.num_classes, next, accept);
  HEARTH_CHECK(out.ok(), "the multiple-of automaton accepts 0");
  return std::move(out).value();
}

std::string_view format_regex(std::string_view format) {
  // Days by month, February to the 28th (every year has it); times with an offset, as RFC 3339 full-time requires.
#define HEARTH_DATE                                                                                  \
  "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|" \
  "02-(?:0[1-9]|1[0-9]|2[0-8]))"
#define HEARTH_TIME \
  "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
  if (format == "date") return HEARTH_DATE;
  if (format == "time") return HEARTH_TIME;
  if (format == "date-time") return HEARTH_DATE "T" HEARTH_TIME;
#undef HEARTH_DATE
#undef HEARTH_TIME
  if (format == "uuid") return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  if (format == "email") {
    return "[A-Za-z0-9_+-]+(?:\\.[A-Za-z0-9_+-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+"
           "[A-Za-z]{2,63}";
  }
  if (format == "ipv4")
    return "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  return {};
}

}  // namespace hearth
