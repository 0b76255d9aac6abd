#pragma once
// Internal to the tokenizer: byte-level BPE ("gpt2" tokenizer model), as in GPT-2 and its descendants.

#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_vocab.h"

namespace hearth {

// Builds the BPE tables (merge ranks, byte tokens, pieces) of `out` from `v`.
[[nodiscard]] Result<void> bpe_build(const TokenizerVocab& v, Tokenizer::Vocab& out);

// Appends the BPE tokens of one plain-text fragment to `out`: each pre-tokenized word merged alone, or taken from
// `memo` (the call's, tokenizer_memo.h; nullptr: every word merged, the reference twin).
void bpe_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out,
                         WordMemo* memo);

}  // namespace hearth
