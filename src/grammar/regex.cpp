// Regular expressions (the subset byte_dfa.h lists) to ByteDfa: a recursive-descent parser to a small syntax tree,
// a Thompson NFA over bytes (UTF-8 sequences spelled out), then the subset construction (byte_dfa.cpp).

#include <algorithm>
#include <bitset>

#include "grammar/byte_dfa.h"
#include "grammar/byte_dfa_build.h"

namespace hearth {
namespace {

constexpr int32_t kMaxRepeat = 1000;  // {m,n} bounds; larger ones are refused by name

// One node of the syntax tree. kSet: one character (ASCII bytes in `ascii`, every non-ASCII character but U+2028
// and U+2029 when `non_ascii`); kBytes: a literal byte string; kSeq / kAlt of `kids`; kRepeat of kids[0].
struct RegexNode {
  enum Kind : uint8_t { kSet, kBytes, kSeq, kAlt, kRepeat } kind = kSeq;
  ByteSet ascii;
  bool non_ascii = false;
  std::string bytes;
  std::vector<int32_t> kids;
  int32_t min = 0;
  int32_t max = -1;  // -1: unbounded
};

// The bytes a JSON string holds raw: printable ASCII but the quote and the backslash.
ByteSet json_raw_ascii() {
  ByteSet s;
  for (int b = 0x20; b < 0x80; ++b) s.set(b);
  s.reset('"');
  s.reset('\\');
  return s;
}

ByteSet range_set(int lo, int hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(b);
  return s;
}

ByteSet digit_set() {
  return range_set('0', '9');
}
ByteSet word_set() {
  ByteSet s = range_set('a', 'z') | range_set('A', 'Z') | digit_set();
  s.set('_');
  return s;
}
ByteSet space_set() {  // \s as JSON can hold it raw: the other white space is control characters
  ByteSet s;
  s.set(' ');
  return s;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view text) : text_(text) {}

  Result<int32_t> parse() {
    if (!text_.empty() && text_.front() == '^') pos_ = 1;
    if (text_.size() > pos_ && text_.back() == '$' && !escaped_at(text_.size() - 1)) text_.remove_suffix(1);
    auto root = alternation();
    if (!root) return root;
    if (pos_ != text_.size()) return fail("an unmatched ')'");
    return root;
  }

  std::vector<RegexNode> nodes;

 private:
  // Whether the character at `i` is preceded by an odd run of backslashes.
  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && text_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }

  Error fail(std::string_view what) const {
    return make_error(
        "pattern: {} (at offset {}) is not supported; supported: literals, classes [...], . \\d \\w \\s "
        "\\D \\W \\S, groups (...) (?:...), |, ? * + {{m}} {{m,}} {{m,n}}, ^ and $ at the ends",
        what, pos_);
  }

  int32_t add(RegexNode n) {
    nodes.push_back(std::move(n));
    return static_cast<int32_t>(nodes.size() - 1);
  }

  int32_t set_node(const ByteSet& ascii, bool non_ascii) {
    RegexNode n;
    n.kind = RegexNode::kSet;
    n.ascii = ascii & json_raw_ascii();
    n.non_ascii = non_ascii;
    return add(std::move(n));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  Result<int32_t> alternation() {
    RegexNode alt;
    alt.kind = RegexNode::kAlt;
    while (true) {
      auto seq = sequence();
      if (!seq) return seq;
      alt.kids.push_back(*seq);
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    if (alt.kids.size() == 1) return alt.kids[0];
    return add(std::move(alt));
  }

  Result<int32_t> sequence() {
    RegexNode seq;
    seq.kind = RegexNode::kSeq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      auto atom_id = atom();
      if (!atom_id) return atom_id;
      auto quantified = quantifier(*atom_id);
      if (!quantified) return quantified;
      seq.kids.push_back(*quantified);
    }
    return add(std::move(seq));
  }

  Result<int32_t> quantifier(int32_t atom_id) {
    while (!at_end()) {
      int32_t lo = 0;
      int32_t hi = -1;
      const char c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        lo = 1;
        ++pos_;
      } else if (c == '?') {
        hi = 1;
        ++pos_;
      } else if (c == '{') {
        auto bounds = braces(&lo, &hi);
        if (!bounds) return bounds.error();
        if (!*bounds) return atom_id;  // a literal '{', read as the next atom
      } else {
        return atom_id;
      }
      if (!at_end() && peek() == '?') ++pos_;  // lazy: the same strings
      RegexNode r;
      r.kind = RegexNode::kRepeat;
      r.kids = {atom_id};
      r.min = lo;
      r.max = hi;
      atom_id = add(std::move(r));
    }
    return atom_id;
  }

  // {m}, {m,}, {m,n}: false (nothing consumed) when the brace does not start one.
  Result<bool> braces(int32_t* lo, int32_t* hi) {
    size_t p = pos_ + 1;
    auto number = [&](int32_t* out) {
      const size_t start = p;
      int64_t v = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (text_[p++] - '0'), kMaxRepeat + 1);
      }
      *out = static_cast<int32_t>(std::min<int64_t>(v, kMaxRepeat + 1));
      return p > start;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(hi)) *hi = -1;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    if (*lo > kMaxRepeat || *hi > kMaxRepeat) return fail("a repeat bound over 1000");
    if (*hi >= 0 && *hi < *lo) return make_error("pattern: {{{},{}}} has its bounds reversed", *lo, *hi);
    pos_ = p + 1;
    return true;
  }

  Result<int32_t> atom() {
    const char c = peek();
    if (c == '(') return group();
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return set_node(json_raw_ascii(), true);
    }
    if (c == '\\') return escape_atom();
    if (c == '*' || c == '+' || c == '?') return fail("a quantifier with nothing to repeat");
    if (c == '^' || c == '$') return fail("an anchor inside the pattern");
    return literal_char();
  }

  Result<int32_t> group() {
    ++pos_;
    if (!at_end() && peek() == '?') {
      if (text_.substr(pos_, 2) != "?:")
        return fail(text_.substr(pos_, 2) == "?<" ? "a named group or lookbehind" : "a lookahead");
      pos_ += 2;
    }
    auto inner = alternation();
    if (!inner) return inner;
    if (at_end() || peek() != ')') return fail("an unclosed '('");
    ++pos_;
    return inner;
  }

  // A literal character, its UTF-8 bytes whole.
  Result<int32_t> literal_char() {
    const auto lead = static_cast<uint8_t>(peek());
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    if (pos_ + len > text_.size()) return fail("a cut UTF-8 character");
    RegexNode n;
    n.kind = RegexNode::kBytes;
    n.bytes = std::string(text_.substr(pos_, len));
    pos_ += len;
    if (len == 1 && !json_raw_ascii().test(lead)) {
      return make_error("pattern: the character 0x{:02x} must be escaped in JSON, so no output can hold it", lead);
    }
    return add(std::move(n));
  }

  // One escape: a class (\d ...) into `set`/`non_ascii`, or a single byte into `*byte`.
  Result<bool> escape(ByteSet* set, bool* non_ascii, int* byte) {
    ++pos_;
    if (at_end()) return fail("a trailing backslash");
    const char c = text_[pos_++];
    *non_ascii = false;
    *byte = -1;
    switch (c) {
      case 'd':
        *set = digit_set();
        return true;
      case 'w':
        *set = word_set();
        return true;
      case 's':
        *set = space_set();
        return true;
      case 'D':
        *set = ~digit_set();
        *non_ascii = true;
        return true;
      case 'W':
        *set = ~word_set();
        *non_ascii = true;
        return true;
      case 'S':
        *set = ~space_set();
        return true;  // ASCII only: a subset of \S without Unicode white space
      case 'n':
      case 'r':
      case 't':
      case 'f':
      case 'v':
      case '0':
        return make_error("pattern: '\\{}' matches a control character, which JSON must escape", c);
      default:
        break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
      pos_ -= 2;
      return make_error(
          "pattern: the escape '\\{}' (at offset {}) is not supported; supported: \\d \\w \\s \\D \\W "
          "\\S and escaped punctuation",
          c, pos_);
    }
    if (static_cast<uint8_t>(c) >= 0x80) return fail("an escaped non-ASCII character");
    *byte = static_cast<uint8_t>(c);
    return true;
  }

  Result<int32_t> escape_atom() {
    ByteSet set;
    bool non_ascii = false;
    int byte = -1;
    auto ok = escape(&set, &non_ascii, &byte);
    if (!ok) return ok.error();
    if (byte < 0) return set_node(set, non_ascii);
    if (!json_raw_ascii().test(byte)) {
      return make_error("pattern: the character 0x{:02x} must be escaped in JSON, so no output can hold it", byte);
    }
    RegexNode n;
    n.kind = RegexNode::kBytes;
    n.bytes = std::string(1, static_cast<char>(byte));
    return add(std::move(n));
  }

  // [...] and [^...]: ASCII members only (a negated class takes every non-ASCII character but U+2028/U+2029).
  Result<int32_t> char_class() {
    ++pos_;
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    ByteSet set;
    bool first = true;
    while (true) {
      if (at_end()) return fail("an unclosed '['");
      if (peek() == ']' && !first) break;
      first = false;
      auto lo = class_member(&set);
      if (!lo) return lo.error();
      if (*lo >= 0 && pos_ + 1 < text_.size() && peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        auto hi = class_member(&set);
        if (!hi) return hi.error();
        if (*hi < 0) return fail("a range ending in a class escape");
        if (*hi < *lo) return fail("a reversed range");
        set |= range_set(*lo, *hi);
      } else if (*lo >= 0) {
        set.set(static_cast<size_t>(*lo));
      }
    }
    ++pos_;
    return set_node(negated ? ~set : set, negated);
  }

  // One member: its byte (>= 0), or -1 after adding a class escape to `set`.
  Result<int> class_member(ByteSet* set) {
    const auto c = static_cast<uint8_t>(peek());
    if (c >= 0x80) return fail("a non-ASCII character inside [...]");
    if (c != '\\') {
      ++pos_;
      return static_cast<int>(c);
    }
    ByteSet escaped;
    bool non_ascii = false;
    int byte = -1;
    auto ok = escape(&escaped, &non_ascii, &byte);
    if (!ok) return ok.error();
    if (byte >= 0) return byte;
    if (non_ascii) return fail("\\D or \\W inside [...]");
    *set |= escaped;
    return -1;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Thompson construction: a fragment of `nfa` from `start` to `end` per syntax node.
class NfaBuilder {
 public:
  NfaBuilder(const std::vector<RegexNode>& nodes, ByteNfa& nfa) : nodes_(nodes), nfa_(nfa) {}

  Result<void> build(int32_t node, int32_t start, int32_t end) {
    if (nfa_.size() > kMaxRegexNfaStates) {
      return make_error("pattern: too large (over {} automaton states while compiling it)", kMaxRegexNfaStates);
    }
    const RegexNode& n = nodes_[node];
    switch (n.kind) {
      case RegexNode::kSet:
        if (n.ascii.any()) nfa_.add_edge(start, n.ascii, end);
        if (n.non_ascii) add_non_ascii(start, end);
        return {};
      case RegexNode::kBytes:
        chain_bytes(start, n.bytes, end);
        return {};
      case RegexNode::kSeq: {
        int32_t at = start;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          const int32_t to = i + 1 == n.kids.size() ? end : nfa_.add_state();
          auto ok = build(n.kids[i], at, to);
          if (!ok) return ok;
          at = to;
        }
        if (n.kids.empty()) nfa_.add_eps(start, end);
        return {};
      }
      case RegexNode::kAlt:
        for (int32_t kid : n.kids) {
          auto ok = build(kid, start, end);
          if (!ok) return ok;
        }
        return {};
      case RegexNode::kRepeat:
        return build_repeat(n, start, end);
    }
    return {};
  }

 private:
  Result<void> build_repeat(const RegexNode& n, int32_t start, int32_t end) {
    int32_t at = start;
    for (int32_t i = 0; i < n.min; ++i) {
      const int32_t to = nfa_.add_state();
      auto ok = build(n.kids[0], at, to);
      if (!ok) return ok;
      at = to;
    }
    if (n.max < 0) {  // a loop: at -> body -> at, and out
      const int32_t body_end = nfa_.add_state();
      auto ok = build(n.kids[0], at, body_end);
      if (!ok) return ok;
      nfa_.add_eps(body_end, at);
      nfa_.add_eps(at, end);
      return {};
    }
    for (int32_t i = n.min; i < n.max; ++i) {
      nfa_.add_eps(at, end);
      const int32_t to = nfa_.add_state();
      auto ok = build(n.kids[0], at, to);
      if (!ok) return ok;
      at = to;
    }
    nfa_.add_eps(at, end);
    return {};
  }

  void chain_bytes(int32_t start, std::string_view bytes, int32_t end) {
    int32_t at = start;
    for (size_t i = 0; i < bytes.size(); ++i) {
      const int32_t to = i + 1 == bytes.size() ? end : nfa_.add_state();
      ByteSet s;
      s.set(static_cast<uint8_t>(bytes[i]));
      nfa_.add_edge(at, s, to);
      at = to;
    }
  }

  void chain_sets(int32_t start, std::initializer_list<ByteSet> sets, int32_t end) {
    int32_t at = start;
    size_t i = 0;
    for (const ByteSet& s : sets) {
      const int32_t to = ++i == sets.size() ? end : nfa_.add_state();
      nfa_.add_edge(at, s, to);
      at = to;
    }
  }

  // Every well-formed UTF-8 character of 2..4 bytes (RFC 3629) but U+2028 and U+2029, which `.` does not match.
  void add_non_ascii(int32_t start, int32_t end) {
    const ByteSet cont = range_set(0x80, 0xBF);
    ByteSet e2_80_tail = cont;
    e2_80_tail.reset(0xA8);
    e2_80_tail.reset(0xA9);
    chain_sets(start, {range_set(0xC2, 0xDF), cont}, end);
    chain_sets(start, {range_set(0xE0, 0xE0), range_set(0xA0, 0xBF), cont}, end);
    chain_sets(start, {range_set(0xE1, 0xE1) | range_set(0xE3, 0xEC) | range_set(0xEE, 0xEF), cont, cont}, end);
    chain_sets(start, {range_set(0xE2, 0xE2), range_set(0x81, 0xBF), cont}, end);
    chain_sets(start, {range_set(0xE2, 0xE2), range_set(0x80, 0x80), e2_80_tail}, end);
    chain_sets(start, {range_set(0xED, 0xED), range_set(0x80, 0x9F), cont}, end);
    chain_sets(start, {range_set(0xF0, 0xF0), range_set(0x90, 0xBF), cont, cont}, end);
    chain_sets(start, {range_set(0xF1, 0xF3), cont, cont, cont}, end);
    chain_sets(start, {range_set(0xF4, 0xF4), range_set(0x80, 0x8F), cont, cont}, end);
  }

  const std::vector<RegexNode>& nodes_;
  ByteNfa& nfa_;
};

// Edges spelling `text` from `from`; returns the state after its last byte.
int32_t add_text(ByteNfa& nfa, int32_t from, std::string_view text) {
  for (char c : text) {
    ByteSet byte;
    byte.set(static_cast<uint8_t>(c));
    const int32_t to = nfa.add_state();
    nfa.add_edge(from, byte, to);
    from = to;
  }
  return from;
}

// `quote` empty: the raw bytes; else the body between two quotes.
Result<ByteDfa> compile_pattern(std::string_view pattern, std::string_view quote) {
  RegexParser parser(pattern);
  auto root = parser.parse();
  if (!root) return root.error();
  ByteNfa nfa;
  const int32_t start = nfa.add_state();
  int32_t body_start = start;
  int32_t body_end = nfa.add_state();
  int32_t end = body_end;
  if (!quote.empty()) {
    body_start = add_text(nfa, start, quote);
    end = add_text(nfa, body_end, quote);
  }
  NfaBuilder builder(parser.nodes, nfa);
  auto ok = builder.build(*root, body_start, body_end);
  if (!ok) return ok.error();
  return nfa_to_dfa(nfa, start, end);
}

}  // namespace

Result<ByteDfa> compile_string_pattern(std::string_view pattern, std::string_view quote) {
  HEARTH_CHECK(!quote.empty(), "a string pattern needs its quote");
  return compile_pattern(pattern, quote);
}

Result<ByteDfa> compile_raw_pattern(std::string_view pattern) {
  return compile_pattern(pattern, {});
}

}  // namespace hearth
