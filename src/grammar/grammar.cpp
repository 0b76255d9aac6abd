#include "grammar/grammar.h"

#include <algorithm>
#include <bit>

namespace hearth {
namespace {

using nlohmann::json;
using Kind = GrammarNodeKind;

constexpr int32_t kMaxDigits = 15;
constexpr int32_t kMaxExponentDigits = 2;  // 15 digits and e99 stay far inside a double
constexpr std::string_view kGemma4Quote = "<|\"|>";

// Object phases.
enum : uint8_t { kObjOpen, kObjFirst, kObjKey, kObjColon, kObjAfterValue, kObjKeyStart };
// Array phases.
enum : uint8_t { kArrOpen, kArrFirst, kArrAfterItem };
// String phases (kStrLt and kStrClose: Gemma 4's, a '<' read in the text, then the rest of the closing <|"|>).
enum : uint8_t { kStrOpen, kStrBody, kStrEscape, kStrUtf8, kStrLt, kStrClose };
// Number phases; kNumZero, kNumInt, kNumFrac and kNumExp are complete.
enum : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp };
// Branches phases.
enum : uint8_t { kBrPrefix, kBrSuffix };

bool is_digit(uint8_t b) {
  return b >= '0' && b <= '9';
}

uint64_t all_bits(size_t n) {
  return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

bool number_complete(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExp;
}

// The first byte of a UTF-8 continuation after `lead` (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool first_continuation_ok(uint8_t lead, uint8_t b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

GrammarState Grammar::start() const {
  GrammarState s;
  s.num_paths = 1;
  const bool pushed = push(s.paths[0], root_);
  HEARTH_CHECK(pushed, "the grammar root cannot be pushed");
  return s;
}

bool Grammar::push(GrammarStack& s, int32_t node) const {
  if (s.depth == kMaxGrammarDepth) return false;
  GrammarFrame& f = s.frames[s.depth++];
  f = GrammarFrame{};
  f.node = static_cast<uint16_t>(node);
  const GrammarNode& n = nodes_[node];
  if (n.kind == Kind::kLiterals) f.cand = all_bits(n.literals.size());
  if (n.kind == Kind::kBranches) f.cand = all_bits(n.prefixes.size());
  return true;
}

bool Grammar::advance_path(GrammarState& state, int32_t i, uint8_t byte) const {
  GrammarStack& s = state.paths[i];
  while (s.depth > 0) {
    const GrammarFrame& f = s.frames[s.depth - 1];
    const GrammarNode& n = nodes_[f.node];
    if (n.kind == Kind::kUnion) {  // becomes the first alternative that takes the byte; the others fork
      int32_t first = -1;
      for (int32_t alt : n.alternatives) {
        if (!starts_with_byte(alt, byte)) continue;
        if (first < 0) {
          first = alt;
          continue;
        }
        if (state.num_paths == kMaxGrammarPaths) break;
        GrammarStack& fork = state.paths[state.num_paths];
        fork.copy_from(s);
        --fork.depth;
        if (push(fork, alt)) ++state.num_paths;
      }
      if (first < 0) return false;
      --s.depth;
      if (!push(s, first)) return false;
      continue;
    }
    switch (step(s, byte)) {
      case Step::kConsumed:
        return true;
      case Step::kRejected:
        return false;
      case Step::kPopRetry:
        break;
    }
  }
  return false;
}

bool Grammar::advance(GrammarState& s, uint8_t byte) const {
  // Forks land at the end and take the same byte in this loop; then the survivors move down in order.
  std::array<bool, kMaxGrammarPaths> alive{};
  for (int32_t i = 0; i < s.num_paths; ++i) alive[i] = advance_path(s, i, byte);
  int32_t kept = 0;
  for (int32_t i = 0; i < s.num_paths; ++i) {
    if (!alive[i]) continue;
    if (kept != i) s.paths[kept].copy_from(s.paths[i]);
    ++kept;
  }
  s.num_paths = kept;
  return kept > 0;
}

bool Grammar::advance(GrammarState& s, std::string_view bytes) const {
  for (char c : bytes) {
    if (!advance(s, static_cast<uint8_t>(c))) return false;
  }
  return true;
}

int32_t Grammar::dfa_shortcut(const GrammarState& state) const {
  if (state.num_paths == 0 || state.paths[0].depth == 0) return -1;
  const GrammarStack& p = state.paths[0];
  const GrammarFrame& f = p.frames[p.depth - 1];
  const GrammarNode& n = nodes_[f.node];
  if (n.kind != Kind::kDfa) return -1;
  const ByteDfa& d = dfas_[n.dfa];
  if (d.accept[f.count] != 0) return -1;  // the ordinary order closes what holds it
  int32_t best = -1;
  for (int b = 0; b < 256; ++b) {
    const int32_t t = d.step(f.count, static_cast<uint8_t>(b));
    if (t >= 0 && d.dist[t] < d.dist[f.count] && (best < 0 || d.dist[t] < d.dist[d.step(f.count, best)])) best = b;
  }
  if (best < 0) return -1;
  GrammarState next;
  next.copy_from(state);
  return advance(next, static_cast<uint8_t>(best)) ? best : -1;
}

std::optional<std::string> Grammar::quick_completion(const GrammarState& state, size_t max_bytes) const {
  // Closers first, then what separates and what is shortest to write, then the bytes keys are mostly made of;
  // every other byte after them, so any key or literal the grammar spells out is still found. Inside an automaton
  // (a pattern, a format) the byte that brings acceptance nearest comes first.
  static constexpr std::string_view kPreferred =
      "\"}]:,0abcdefghijklmnopqrstuvwxyz_123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-. ";
  // Gemma 4 closes a string with <|"|>, and takes '"' as text.
  static constexpr std::string_view kPreferredGemma4 =
      "<|\">}]:,0abcdefghijklmnopqrstuvwxyz_123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-. ";
  static const auto make_order = [](std::string_view preferred) {
    std::array<uint8_t, 256> order{};
    std::array<bool, 256> used{};
    size_t n = 0;
    for (char c : preferred) {
      order[n++] = static_cast<uint8_t>(c);
      used[static_cast<uint8_t>(c)] = true;
    }
    for (int b = 0; b < 256; ++b) {
      if (!used[b]) order[n++] = static_cast<uint8_t>(b);
    }
    return order;
  };
  static const std::array<uint8_t, 256> kJsonOrder = make_order(kPreferred);
  static const std::array<uint8_t, 256> kGemma4Order = make_order(kPreferredGemma4);
  const std::array<uint8_t, 256>& kOrder = syntax_ == GrammarSyntax::kGemma4 ? kGemma4Order : kJsonOrder;
  std::string out;
  GrammarState s;
  s.copy_from(state);
  GrammarState next;
  while (!is_terminal(s) && !can_end(s)) {
    if (out.size() == max_bytes) return std::nullopt;
    // A Gemma 4 string takes every byte of its closer as text too, so no byte order finds it: write it out.
    if (const std::string_view closer = gemma4_string_closer(s); !closer.empty()) {
      const bool closed = advance(s, closer[0]);
      HEARTH_CHECK(closed, "a Gemma 4 string refused its own closer");
      out.push_back(closer[0]);
      continue;
    }
    bool stepped = false;
    if (const int32_t shortcut = dfa_shortcut(s); shortcut >= 0) {
      if (!advance(s, static_cast<uint8_t>(shortcut))) return std::nullopt;
      out.push_back(static_cast<char>(shortcut));
      continue;
    }
    for (uint8_t byte : kOrder) {
      next.copy_from(s);
      if (advance(next, byte)) {
        s.copy_from(next);
        out.push_back(static_cast<char>(byte));
        stepped = true;
        break;
      }
    }
    if (!stepped) return std::nullopt;
  }
  return out;
}

std::string_view Grammar::gemma4_string_closer(const GrammarState& state) const {
  // Path 0, as dfa_shortcut: its bytes keep it path 0 (forks land at the end), so the closer is written whole.
  if (syntax_ != GrammarSyntax::kGemma4 || state.num_paths == 0 || state.paths[0].depth == 0) return {};
  const GrammarStack& s = state.paths[0];
  const GrammarFrame& f = s.frames[s.depth - 1];
  const GrammarNode& n = nodes_[f.node];
  if (n.kind != Kind::kString) return {};
  const bool short_of_min = f.count < n.min_len;
  switch (f.phase) {
    case kStrBody:
      return short_of_min ? "a" : kGemma4Quote;
    case kStrLt:  // short of minLength the '<' is text; "a" after it needs room for two, a second '<' for one
      if (!short_of_min) return kGemma4Quote.substr(1);
      return n.max_len >= 0 && f.count + 2 > n.max_len ? "<" : "a";
    case kStrClose:
      return kGemma4Quote.substr(f.pos);
    default:
      return {};
  }
}

bool Grammar::can_end(const GrammarState& s) const {
  for (int32_t i = 0; i < s.num_paths; ++i) {
    if (can_end(s.paths[i])) return true;
  }
  return false;
}

bool Grammar::can_end(const GrammarStack& s) const {
  if (s.depth == 0) return true;
  if (s.depth > 1) return false;
  const GrammarFrame& f = s.frames[0];
  const GrammarNode& n = nodes_[f.node];
  if (n.kind == Kind::kNumber || n.kind == Kind::kInteger) return number_complete(f.phase);
  if (n.kind == Kind::kDfa) return dfas_[n.dfa].accept[f.count] != 0;
  if (n.kind == Kind::kLiterals) {
    for (uint64_t c = f.cand; c; c &= c - 1) {
      if (n.literals[std::countr_zero(c)].size() == f.pos) return true;
    }
  }
  return false;
}

bool Grammar::in_plain_string(const GrammarState& state, int32_t* room) const {
  // Every reading must be inside plain text: then a plain token is accepted by the reading with the most room.
  // Gemma 4's strings end at "<|", which a plain byte sequence may hold: never plain.
  if (state.num_paths == 0 || syntax_ != GrammarSyntax::kJson) return false;
  int32_t most = 0;
  for (int32_t i = 0; i < state.num_paths; ++i) {
    const GrammarStack& s = state.paths[i];
    if (s.depth == 0) return false;
    const GrammarFrame& f = s.frames[s.depth - 1];
    const GrammarNode& n = nodes_[f.node];
    if (n.kind != Kind::kString || f.phase != kStrBody) return false;
    const int32_t r = n.max_len < 0 ? -1 : n.max_len - f.count;
    most = most < 0 || r < 0 ? -1 : std::max(most, r);
  }
  *room = most;
  return true;
}

// One byte against the top frame. kPopRetry: the frame changed the stack (popped a complete value, pushed a child
// or became one of its alternatives) and the byte goes to the new top.
Grammar::Step Grammar::step(GrammarStack& s, uint8_t b) const {
  GrammarFrame& f = s.frames[s.depth - 1];
  const GrammarNode& n = nodes_[f.node];
  auto pop = [&] { --s.depth; };
  auto push_or_reject = [&](int32_t node) { return push(s, node) ? Step::kPopRetry : Step::kRejected; };
  switch (n.kind) {
    case Kind::kObject: {
      const uint64_t keys_all = all_bits(n.keys.size());
      const bool gemma4 = syntax_ == GrammarSyntax::kGemma4;
      // JSON: `b` is a key's opening quote. Gemma 4: `b` is a listed key's first byte, or a free key's <|"|> begins.
      auto begin_key = [&]() -> Step {
        if (!gemma4 && b != '"') return Step::kRejected;
        if (n.free_keys) {
          f.phase = kObjColon;
          if (!push(s, n.free_key)) return Step::kRejected;
          if (gemma4) return Step::kPopRetry;  // the key string reads its own <|"|>
          GrammarFrame& key = s.frames[s.depth - 1];
          if (nodes_[n.free_key].kind == Kind::kDfa) {  // propertyNames with a pattern: the quote is its first byte
            key.count = dfas_[nodes_[n.free_key].dfa].step(0, '"');
            return key.count >= 0 ? Step::kConsumed : Step::kRejected;
          }
          key.phase = kStrBody;  // the opening quote is this byte
          return Step::kConsumed;
        }
        f.cand = keys_all & ~f.seen;
        if (f.cand == 0) return Step::kRejected;
        f.pos = gemma4 ? 0 : 1;
        f.phase = kObjKey;
        return gemma4 ? Step::kPopRetry : Step::kConsumed;
      };
      switch (f.phase) {
        case kObjOpen:
          if (b != '{') return Step::kRejected;
          f.phase = kObjFirst;
          return Step::kConsumed;
        case kObjFirst:
        case kObjAfterValue:
          if (b == '}') {
            if ((n.required & ~f.seen) != 0) return Step::kRejected;
            pop();
            return Step::kConsumed;
          }
          if (f.phase == kObjFirst) return begin_key();
          if (b != ',') return Step::kRejected;
          if (!n.free_keys && (keys_all & ~f.seen) == 0) return Step::kRejected;
          f.phase = kObjKeyStart;
          return Step::kConsumed;
        case kObjKeyStart:
          return begin_key();
        case kObjKey: {
          uint64_t next = 0;
          for (uint64_t c = f.cand; c; c &= c - 1) {
            const int i = std::countr_zero(c);
            if (n.keys[i].size() > f.pos && static_cast<uint8_t>(n.keys[i][f.pos]) == b) next |= uint64_t{1} << i;
          }
          if (next == 0) return Step::kRejected;
          f.cand = next;
          ++f.pos;
          for (uint64_t c = next; c; c &= c - 1) {
            const int i = std::countr_zero(c);
            if (n.keys[i].size() == f.pos) {  // the closing quote (Gemma 4: the ':'): keys are distinct
              f.extra = static_cast<uint8_t>(i);
              f.seen |= uint64_t{1} << i;
              f.phase = kObjColon;
              if (gemma4) {  // the key held its ':'
                f.phase = kObjAfterValue;
                return push(s, n.key_nodes[i]) ? Step::kConsumed : Step::kRejected;
              }
            }
          }
          return Step::kConsumed;
        }
        case kObjColon: {
          if (b != ':') return Step::kRejected;
          f.phase = kObjAfterValue;
          const int32_t value = n.free_keys ? n.free_value : n.key_nodes[f.extra];
          return push(s, value) ? Step::kConsumed : Step::kRejected;
        }
        default:
          return Step::kRejected;
      }
    }
    case Kind::kArray:
      switch (f.phase) {
        case kArrOpen:
          if (b != '[') return Step::kRejected;
          f.phase = kArrFirst;
          return Step::kConsumed;
        case kArrFirst:
          if (b == ']') {
            if (n.min_items > 0) return Step::kRejected;
            pop();
            return Step::kConsumed;
          }
          if (n.max_items == 0) return Step::kRejected;
          f.count = 1;
          f.phase = kArrAfterItem;
          return push_or_reject(n.items);
        case kArrAfterItem:
          if (b == ']') {
            if (f.count < n.min_items) return Step::kRejected;
            pop();
            return Step::kConsumed;
          }
          if (b != ',' || (n.max_items >= 0 && f.count >= n.max_items)) return Step::kRejected;
          ++f.count;
          return push(s, n.items) ? Step::kConsumed : Step::kRejected;
        default:
          return Step::kRejected;
      }
    case Kind::kString:
      return step_string(s, f, n, b);
    case Kind::kNumber:
    case Kind::kInteger:
      return step_number(s, f, n.kind == Kind::kInteger, b);
    case Kind::kLiterals: {
      uint64_t next = 0;
      bool complete = false;
      for (uint64_t c = f.cand; c; c &= c - 1) {
        const int i = std::countr_zero(c);
        const std::string& lit = n.literals[i];
        if (lit.size() == f.pos) complete = true;
        if (lit.size() > f.pos && static_cast<uint8_t>(lit[f.pos]) == b) next |= uint64_t{1} << i;
      }
      if (next == 0) {
        if (!complete) return Step::kRejected;
        pop();
        return Step::kPopRetry;
      }
      f.cand = next;
      ++f.pos;
      bool longer = false;
      for (uint64_t c = next; c; c &= c - 1) longer |= n.literals[std::countr_zero(c)].size() > f.pos;
      if (!longer) pop();
      return Step::kConsumed;
    }
    case Kind::kUnion:  // advance_path resolves unions before stepping
      return Step::kRejected;
    case Kind::kDfa: {
      const ByteDfa& d = dfas_[n.dfa];
      const int32_t t = d.step(f.count, b);
      if (t < 0) {
        if (d.accept[f.count] == 0) return Step::kRejected;
        pop();
        return Step::kPopRetry;
      }
      f.count = t;
      if (d.final[t] != 0) pop();
      return Step::kConsumed;
    }
    case Kind::kBranches:
      if (f.phase == kBrPrefix) {
        uint64_t next = 0;
        for (uint64_t c = f.cand; c; c &= c - 1) {
          const int i = std::countr_zero(c);
          const std::string& p = n.prefixes[i];
          if (p.size() > f.pos && static_cast<uint8_t>(p[f.pos]) == b) next |= uint64_t{1} << i;
        }
        if (next == 0) return Step::kRejected;
        f.cand = next;
        ++f.pos;
        for (uint64_t c = next; c; c &= c - 1) {
          const int i = std::countr_zero(c);
          if (n.prefixes[i].size() != f.pos) continue;
          f.extra = static_cast<uint8_t>(i);
          f.phase = kBrSuffix;
          f.pos = 0;
          return push(s, n.branch_nodes[i]) ? Step::kConsumed : Step::kRejected;
        }
        return Step::kConsumed;
      } else {
        const std::string& suffix = n.suffixes[f.extra];
        if (static_cast<uint8_t>(suffix[f.pos]) != b) return Step::kRejected;
        if (++f.pos == suffix.size()) pop();
        return Step::kConsumed;
      }
  }
  return Step::kRejected;
}

void Grammar::finalize() {
  first_bytes_.assign(nodes_.size(), {});
  std::vector<uint8_t> done(nodes_.size(), 0);  // 0 new, 1 in progress, 2 done
  auto set = [](std::array<uint64_t, 4>& bits, uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); };
  auto visit = [&](auto& self, int32_t id) -> void {
    if (done[id] != 0) return;  // a union reached again through itself starts with nothing new
    done[id] = 1;
    const GrammarNode& n = nodes_[id];
    std::array<uint64_t, 4>& bits = first_bytes_[id];
    switch (n.kind) {
      case Kind::kObject:
        set(bits, '{');
        break;
      case Kind::kArray:
        set(bits, '[');
        break;
      case Kind::kString:
        set(bits, syntax_ == GrammarSyntax::kGemma4 ? '<' : '"');
        break;
      case Kind::kNumber:
      case Kind::kInteger:
        set(bits, '-');
        for (uint8_t d = '0'; d <= '9'; ++d) set(bits, d);
        break;
      case Kind::kLiterals:
        for (const std::string& lit : n.literals) set(bits, static_cast<uint8_t>(lit[0]));
        break;
      case Kind::kBranches:
        for (const std::string& p : n.prefixes) {
          if (!p.empty()) set(bits, static_cast<uint8_t>(p[0]));
        }
        break;
      case Kind::kDfa: {
        const ByteDfa& d = dfas_[n.dfa];
        for (int b = 0; b < 256; ++b) {
          if (d.step(0, static_cast<uint8_t>(b)) >= 0) set(bits, static_cast<uint8_t>(b));
        }
        break;
      }
      case Kind::kUnion:
        for (int32_t alt : n.alternatives) {
          self(self, alt);
          for (int w = 0; w < 4; ++w) bits[w] |= first_bytes_[alt][w];
        }
        break;
    }
    done[id] = 2;
  };
  for (int32_t i = 0; i < static_cast<int32_t>(nodes_.size()); ++i) visit(visit, i);
}

Grammar::Step Grammar::step_string(GrammarStack& s, GrammarFrame& f, const GrammarNode& n, uint8_t b) const {
  if (syntax_ == GrammarSyntax::kGemma4) return step_gemma4_string(s, f, n, b);
  const bool room = n.max_len < 0 || f.count < n.max_len;
  switch (f.phase) {
    case kStrOpen:
      if (b != '"') return Step::kRejected;
      f.phase = kStrBody;
      return Step::kConsumed;
    case kStrBody:
      if (b == '"') {
        if (f.count < n.min_len) return Step::kRejected;
        --s.depth;
        return Step::kConsumed;
      }
      if (b < 0x20 || !room) return Step::kRejected;
      if (b == '\\') {
        ++f.count;
        f.phase = kStrEscape;
        return Step::kConsumed;
      }
      if (b < 0x80) {
        ++f.count;
        return Step::kConsumed;
      }
      if (b < 0xC2 || b > 0xF4) return Step::kRejected;
      ++f.count;
      f.extra = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
      f.seen = b;
      f.phase = kStrUtf8;
      return Step::kConsumed;
    case kStrEscape:
      if (std::string_view("\"\\/bfnrt").find(static_cast<char>(b)) == std::string_view::npos) {
        return Step::kRejected;
      }
      f.phase = kStrBody;
      return Step::kConsumed;
    case kStrUtf8:
      return step_utf8(f, b);
    default:
      return Step::kRejected;
  }
}

Grammar::Step Grammar::step_utf8(GrammarFrame& f, uint8_t b) const {
  if (f.seen != 0 ? !first_continuation_ok(static_cast<uint8_t>(f.seen), b) : (b < 0x80 || b > 0xBF)) {
    return Step::kRejected;
  }
  f.seen = 0;
  if (--f.extra == 0) f.phase = kStrBody;
  return Step::kConsumed;
}

// <|"|>text<|"|>: the text is any UTF-8 without "<|" (its first "<|" closes the string) and without control
// characters but newline and tab. A '<' counts as a code point once the byte after it shows it is text.
Grammar::Step Grammar::step_gemma4_string(GrammarStack& s, GrammarFrame& f, const GrammarNode& n, uint8_t b) const {
  const bool room = n.max_len < 0 || f.count < n.max_len;
  switch (f.phase) {
    case kStrOpen:
    case kStrClose:
      if (static_cast<uint8_t>(kGemma4Quote[f.pos]) != b) return Step::kRejected;
      if (++f.pos < kGemma4Quote.size()) return Step::kConsumed;
      if (f.phase == kStrClose) {
        --s.depth;
      } else {
        f.phase = kStrBody;
      }
      return Step::kConsumed;
    case kStrBody:
      if (b == '<') {
        f.phase = kStrLt;
        return Step::kConsumed;
      }
      if ((b < 0x20 && b != '\n' && b != '\t') || !room) return Step::kRejected;
      ++f.count;
      if (b < 0x80) return Step::kConsumed;
      if (b < 0xC2 || b > 0xF4) return Step::kRejected;
      f.extra = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
      f.seen = b;
      f.phase = kStrUtf8;
      return Step::kConsumed;
    case kStrLt:
      if (b == '|') {
        if (f.count < n.min_len) return Step::kRejected;
        f.phase = kStrClose;
        f.pos = 2;
        return Step::kConsumed;
      }
      if (!room) return Step::kRejected;
      ++f.count;  // the '<' was text; `b` is read as text
      f.phase = kStrBody;
      return Step::kPopRetry;
    case kStrUtf8:
      return step_utf8(f, b);
    default:
      return Step::kRejected;
  }
}

Grammar::Step Grammar::step_number(GrammarStack& s, GrammarFrame& f, bool integer, uint8_t b) const {
  auto digit_into = [&](uint8_t phase, int32_t max_digits) {
    if (f.phase != phase) {
      f.phase = phase;
      f.pos = 0;
    }
    if (f.pos >= max_digits) return Step::kRejected;
    ++f.pos;
    return Step::kConsumed;
  };
  auto end_here = [&] {
    if (!number_complete(f.phase)) return Step::kRejected;
    --s.depth;
    return Step::kPopRetry;
  };
  switch (f.phase) {
    case kNumStart:
    case kNumMinus:
      if (b == '-' && f.phase == kNumStart) {
        f.phase = kNumMinus;
        return Step::kConsumed;
      }
      if (b == '0') {
        f.phase = kNumZero;
        return Step::kConsumed;
      }
      if (b >= '1' && b <= '9') return digit_into(kNumInt, kMaxDigits);
      return Step::kRejected;
    case kNumZero:
    case kNumInt:
      if (is_digit(b) && f.phase == kNumInt) return digit_into(kNumInt, kMaxDigits);
      if (!integer && b == '.') {
        f.phase = kNumDot;
        return Step::kConsumed;
      }
      if (!integer && (b == 'e' || b == 'E')) {
        f.phase = kNumE;
        return Step::kConsumed;
      }
      return end_here();
    case kNumDot:
      return is_digit(b) ? digit_into(kNumFrac, kMaxDigits) : Step::kRejected;
    case kNumFrac:
      if (is_digit(b)) return digit_into(kNumFrac, kMaxDigits);
      if (b == 'e' || b == 'E') {
        f.phase = kNumE;
        return Step::kConsumed;
      }
      return end_here();
    case kNumE:
      if (b == '+' || b == '-') {
        f.phase = kNumESign;
        return Step::kConsumed;
      }
      return is_digit(b) ? digit_into(kNumExp, kMaxExponentDigits) : Step::kRejected;
    case kNumESign:
      return is_digit(b) ? digit_into(kNumExp, kMaxExponentDigits) : Step::kRejected;
    case kNumExp:
      if (is_digit(b)) return digit_into(kNumExp, kMaxExponentDigits);
      return end_here();
    default:
      return Step::kRejected;
  }
}

}  // namespace hearth
