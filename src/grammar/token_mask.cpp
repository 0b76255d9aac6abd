#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace hearth {
namespace {

// Code points of `piece` when it is plain string text (see VocabBytes), else -1.
int32_t plain_chars(const std::string& piece) {
  int32_t chars = 0;
  for (size_t i = 0; i < piece.size();) {
    const auto b = static_cast<uint8_t>(piece[i]);
    if (b == '"' || b == '\\' || b < 0x20) return -1;
    size_t len = 1;
    if (b >= 0x80) {
      if (b < 0xC2 || b > 0xF4) return -1;
      len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      if (i + len > piece.size()) return -1;
      const auto c1 = static_cast<uint8_t>(piece[i + 1]);
      const bool first_ok = b == 0xE0   ? (c1 >= 0xA0 && c1 <= 0xBF)
                            : b == 0xED ? (c1 >= 0x80 && c1 <= 0x9F)
                            : b == 0xF0 ? (c1 >= 0x90 && c1 <= 0xBF)
                            : b == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F)
                                        : (c1 >= 0x80 && c1 <= 0xBF);
      if (!first_ok) return -1;
      for (size_t k = 2; k < len; ++k) {
        const auto c = static_cast<uint8_t>(piece[i + k]);
        if (c < 0x80 || c > 0xBF) return -1;
      }
    }
    i += len;
    ++chars;
  }
  return chars;
}

int32_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int32_t>(i);
}

void fill_lcp(const std::vector<std::string>& pieces, const std::vector<int32_t>& order, std::vector<int32_t>& lcp) {
  lcp.assign(order.size(), 0);
  for (size_t i = 1; i < order.size(); ++i) lcp[i] = common_prefix(pieces[order[i - 1]], pieces[order[i]]);
}

}  // namespace

VocabBytes::VocabBytes(const Tokenizer& tokenizer) {
  pieces_.reserve(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t t = 0; t < tokenizer.vocab_size(); ++t) {
    // Control tokens decode to nothing in the output text, so they never advance a grammar: left empty.
    pieces_.push_back(tokenizer.is_control(TokenId{t}) ? std::string() : tokenizer.token_to_piece(TokenId{t}));
  }
  index();
}

VocabBytes::VocabBytes(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
  index();
}

void VocabBytes::index() {
  for (int32_t t = 0; t < vocab_size(); ++t) {
    if (!pieces_[t].empty()) order_.push_back(t);
  }
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
  fill_lcp(pieces_, order_, lcp_);
  for (int32_t t : order_) {
    const int32_t chars = plain_chars(pieces_[t]);
    if (chars >= 0) {
      plain_.push_back(t);
      plain_chars_.push_back(chars);
    } else {
      not_plain_order_.push_back(t);
    }
  }
  fill_lcp(pieces_, not_plain_order_, not_plain_lcp_);
}

int32_t VocabBytes::allow_prefixes_of(std::string_view bytes, std::vector<uint8_t>& allowed) const {
  allowed.assign(pieces_.size(), 0);
  int32_t n = 0;
  auto less = [&](int32_t t, std::string_view key) { return std::string_view(pieces_[t]) < key; };
  for (size_t k = 1; k <= bytes.size(); ++k) {
    const std::string_view prefix = bytes.substr(0, k);
    auto it = std::lower_bound(order_.begin(), order_.end(), prefix, less);
    // No piece starts with this prefix: none starts with a longer one either.
    if (it == order_.end() || std::string_view(pieces_[*it]).substr(0, k) != prefix) break;
    for (; it != order_.end() && pieces_[*it] == prefix; ++it) {
      allowed[*it] = 1;
      ++n;
    }
  }
  return n;
}

int32_t TokenMasker::walk(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
                          std::span<const int32_t> order, std::span<const int32_t> lcp, std::vector<uint8_t>& allowed) {
  if (states_.empty()) states_.resize(8);
  states_[0].copy_from(state);
  int32_t num_allowed = 0;
  int32_t valid = 0;              // states_[0..valid] hold the previous token's prefix states
  int32_t failed_at = INT32_MAX;  // the previous token's first rejected byte
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& piece = vocab.pieces_[order[i]];
    const int32_t shared = lcp[i];
    if (shared > failed_at) continue;  // shares the rejected byte: rejected too (failed_at and valid stay)
    const auto size = static_cast<int32_t>(piece.size());
    if (static_cast<int32_t>(states_.size()) <= size) states_.resize(static_cast<size_t>(size) + 1);
    int32_t k = std::min(shared, valid);
    failed_at = INT32_MAX;
    for (; k < size; ++k) {
      states_[k + 1].copy_from(states_[k]);
      if (!grammar.advance(states_[k + 1], static_cast<uint8_t>(piece[k]))) {
        failed_at = k;
        break;
      }
    }
    valid = k;
    if (failed_at == INT32_MAX) {
      allowed[order[i]] = 1;
      ++num_allowed;
    }
  }
  return num_allowed;
}

int32_t TokenMasker::compute(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
                             std::span<const TokenId> stop_tokens, std::vector<uint8_t>& allowed) {
  allowed.assign(static_cast<size_t>(vocab.vocab_size()), 0);
  int32_t num_allowed = 0;
  int32_t room = 0;
  if (grammar.in_plain_string(state, &room)) {
    for (size_t i = 0; i < vocab.plain_.size(); ++i) {
      if (room >= 0 && vocab.plain_chars_[i] > room) continue;
      allowed[vocab.plain_[i]] = 1;
      ++num_allowed;
    }
    num_allowed += walk(grammar, state, vocab, vocab.not_plain_order_, vocab.not_plain_lcp_, allowed);
  } else {
    num_allowed += walk(grammar, state, vocab, vocab.order_, vocab.lcp_, allowed);
  }
  if (grammar.can_end(state)) {
    for (TokenId t : stop_tokens) {
      if (allowed[t.value] == 0) ++num_allowed;
      allowed[t.value] = 1;
    }
  }
  return num_allowed;
}

void compute_token_mask_reference(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
                                  std::span<const TokenId> stop_tokens, std::vector<uint8_t>& allowed) {
  allowed.assign(static_cast<size_t>(vocab.vocab_size()), 0);
  for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
    if (vocab.pieces_[t].empty()) continue;
    GrammarState s;
    s.copy_from(state);
    allowed[t] = grammar.advance(s, vocab.pieces_[t]) ? 1 : 0;
  }
  if (grammar.can_end(state)) {
    for (TokenId t : stop_tokens) allowed[t.value] = 1;
  }
}

}  // namespace hearth
