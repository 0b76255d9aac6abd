#pragma once
// Token masks for constrained decoding: which tokens' bytes keep a Grammar's output a valid prefix.
//
// VocabBytes holds every token's decoded bytes (Tokenizer::token_to_piece: "▁" a space, <0xNN> its byte, so a
// byte-fallback token may hold part of a UTF-8 character and a token may span several grammar symbols), once per
// vocabulary, sorted so that tokens sharing a prefix are neighbours. compute_token_mask walks that order like a
// trie: the state after a shared prefix is computed once, and a prefix the grammar rejects rejects every token
// after it that shares it, without reading them. Inside a string's text (the common case), tokens of plain text
// are allowed from a precomputed list (their code-point count against maxLength), and only the rest are walked.
// Control tokens (empty pieces) are never allowed, except the stop tokens once the output may end.
// compute_token_mask_reference is the scalar twin: every token fed byte by byte from the state; tests compare them.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"
#include "util/ids.h"

namespace hearth {

class VocabBytes {
 public:
  explicit VocabBytes(const Tokenizer& tokenizer);
  // From explicit pieces (tests): pieces[i] is token i's bytes.
  explicit VocabBytes(std::vector<std::string> pieces);

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(TokenId token) const { return pieces_[token.value]; }
  // Sets allowed[t] to 1 for every token whose bytes are a non-empty prefix of `bytes`, 0 for every other (resized
  // to the vocabulary). Returns how many. A binary search per prefix length over the sorted pieces.
  int32_t allow_prefixes_of(std::string_view bytes, std::vector<uint8_t>& allowed) const;

 private:
  void index();
  friend class TokenMasker;
  friend void compute_token_mask_reference(const Grammar&, const GrammarState&, const VocabBytes&,
                                           std::span<const TokenId>, std::vector<uint8_t>&);

  std::vector<std::string> pieces_;
  std::vector<int32_t> order_;  // non-empty pieces, sorted by bytes
  std::vector<int32_t> lcp_;    // lcp_[i]: bytes order_[i] shares with order_[i - 1] (0 for i = 0)
  // Plain string text: no quote, backslash, control byte or partial UTF-8 character; with its code points.
  std::vector<int32_t> plain_;
  std::vector<int32_t> plain_chars_;
  std::vector<int32_t> not_plain_order_;  // the other non-empty pieces, in sorted order
  std::vector<int32_t> not_plain_lcp_;
};

// Reusable scratch for mask computation (one per engine; not thread-safe).
class TokenMasker {
 public:
  // Sets allowed[t] to 1 for every token t whose bytes `grammar` accepts from `state`, 0 otherwise (resized to the
  // vocabulary); the `stop_tokens` are allowed when the output may end. Returns the number allowed.
  int32_t compute(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
                  std::span<const TokenId> stop_tokens, std::vector<uint8_t>& allowed);

 private:
  // The trie walk over `order` (with its lcp), marking accepted tokens.
  int32_t walk(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
               std::span<const int32_t> order, std::span<const int32_t> lcp, std::vector<uint8_t>& allowed);
  std::vector<GrammarState> states_;  // states_[k]: after the current token's first k bytes
};

// The scalar reference: same contract as TokenMasker::compute, one token at a time.
void compute_token_mask_reference(const Grammar& grammar, const GrammarState& state, const VocabBytes& vocab,
                                  std::span<const TokenId> stop_tokens, std::vector<uint8_t>& allowed);

}  // namespace hearth
