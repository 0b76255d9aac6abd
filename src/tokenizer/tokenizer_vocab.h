#pragma once
// Internal to the tokenizer: the indexed vocabulary shared by the SentencePiece and BPE encoders.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer/tokenizer_tables.h"
#include "tokenizer/utf8.h"

namespace hearth {

class WordMemo;

struct TokenEntry {
  std::string text;  // as stored in the vocabulary
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
  bool lstrip = false;  // when matched as a special token, whitespace before it is dropped
  bool rstrip = false;  // ... and whitespace after it
};

// Neither copied nor moved once built (it lives behind the Tokenizer's shared_ptr).
struct Tokenizer::Vocab {
  static constexpr int32_t kNone = -1;

  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  TokenizerKind kind = TokenizerKind::kSpm;
  std::vector<TokenEntry> entries;  // [vocab_size]
  TokenTextIndex index;             // text -> id over `entries`; the last of duplicates wins, as in llama.cpp
  // SentencePiece: byte -> its fallback token (<0xNN>, else the byte's own piece, else <unk>).
  // BPE: byte -> the piece spelling that byte alone, or kNone.
  std::array<int32_t, 256> byte_tokens{};
  std::vector<int32_t> special_tokens;  // matched in text before splitting, longest text first
  // token_to_piece without render_special, all in one buffer: token i is piece_bytes[piece_offsets[i], [i + 1]).
  std::string piece_bytes;
  std::vector<size_t> piece_offsets;  // [vocab_size + 1]
  // SentencePiece: every pair of well-formed characters that sit side by side inside some vocabulary text. No
  // merge can join two characters outside this set, so a fragment splits there into parts that merge alone
  // (spm_encode_fragment).
  CodepointPairSet joinable;

  int32_t bos = kNone;
  int32_t eos = kNone;
  int32_t unknown = kNone;
  int32_t padding = kNone;
  int32_t eot = kNone;
  int32_t eom = kNone;
  std::vector<int32_t> eog_tokens;  // end of generation: EOS, EOT and the usual end-of-turn markers
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // BPE only: (left, right) -> (rank, merged token); lower ranks merge first.
  MergeTable merges;
  PreTokenizer pre = PreTokenizer::kGpt2;
  bool normalize_nfc = false;  // BPE only: NFC before pre-tokenizing (Qwen's normalizer; tokenizer_normalize.h)
  // WordPiece only (tokenizer_wpm.cpp).
  int32_t sep = kNone;
  bool wpm_lowercase = false;
  bool wpm_strip_accents = false;
  size_t max_token_bytes = 0;  // the longest token text

  std::string_view piece(int32_t id) const {
    return std::string_view(piece_bytes).substr(piece_offsets[id], piece_offsets[id + 1] - piece_offsets[id]);
  }

  int32_t find(std::string_view text) const {
    return index.find(text, [this](size_t id) -> std::string_view { return entries[id].text; });
  }
};

// The symbols a SentencePiece merge starts from, in order: a well-formed UTF-8 character, else one byte of an
// ill-formed sequence. Calls fn(pos, length, valid, cp); cp is the character's code point (0 when !valid).
template <class Fn>
void for_each_spm_symbol(std::string_view text, Fn&& fn) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = utf8_scan(text, pos);
    const bool valid = scan.status == Utf8Status::kValid;
    const size_t length = valid ? scan.length : 1;
    fn(pos, length, valid, valid ? utf8_decode(text, pos) : char32_t{0});
    pos += length;
  }
}

// Calls fn(pos, left, right) for every two adjacent symbols of `text` that are both well-formed characters; pos is
// where the right one starts.
template <class Fn>
void for_each_character_pair(std::string_view text, Fn&& fn) {
  bool have_left = false;
  char32_t left = 0;
  for_each_spm_symbol(text, [&](size_t pos, size_t, bool valid, char32_t cp) {
    if (valid && have_left) fn(pos, left, cp);
    have_left = valid;
    left = cp;
  });
}

// Appends the SentencePiece tokens of one plain-text fragment (spaces already escaped to "▁") to `out`: split
// into parts, each merged alone or taken from `memo` (the call's, tokenizer_memo.h). `memo` nullptr merges the
// fragment whole (the reference twin); the tokens are the same.
void spm_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out,
                         WordMemo* memo);

// Appends the WordPiece tokens of one plain-text fragment to `out` (tokenizer_wpm.cpp).
void wpm_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

}  // namespace hearth
