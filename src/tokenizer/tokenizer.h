#pragma once
// Tokenizer: text <-> token ids with the vocabulary stored in a GGUF file.
//
// Supported `tokenizer.ggml.model` values:
//   "llama": SentencePiece-style BPE over scored pieces (Llama 2, Mistral, TinyLlama, Phi-3, Gemma 3). Spaces
//            become U+2581 "▁", a "▁" is prepended to the text (add_space_prefix), and the adjacent pair whose
//            concatenation is the highest-scoring vocab piece is merged first (ties: leftmost). Characters outside
//            the vocab fall back to <0xNN> byte tokens.
//   "gpt2":  byte-level BPE with ranked merges (see tokenizer_bpe.h), after the pre-tokenizer named by
//            tokenizer.ggml.pre splits the text into words (gpt-2, mpt, olmo, starcoder, refact, smollm, llama3 /
//            llama-bpe, qwen2, deepseek-coder, gpt-4o; see tokenizer_pretokenize.h). qwen2 first normalizes to NFC
//            (tokenizer_normalize.h). Decoding is byte-exact: no clean-up of spaces.
//   "bert":  WordPiece (BERT, bge, all-MiniLM, nomic-embed), as llama.cpp's WPM: the text is normalised
//            (tokenizer.ggml.normalizer.lowercase, .strip_accents: both true unless they say false) and split into
//            words at whitespace, punctuation and CJK ideographs, and each word covered greedily by the longest pieces,
//            "▁"-prefixed first (tokenizer_wpm.cpp); a word with an uncovered byte becomes [UNK]. With add_special the
//            input is framed by [CLS] (bos) and [SEP] (tokenizer.ggml.seperator_token_id), as llama.cpp always does.
// Results match the reference tokenizations in shared/vocab token for token (llama.cpp c392e5094's for llama-spm,
// phi-3, gpt-2, mpt, starcoder, refact, deepseek-coder; Hugging Face tokenizers' for llama-bpe, qwen2, gemma3,
// gpt-oss):
// tests/tokenizer/tokenizer_reference_test.cpp.
//
// Encoding never fails: ill-formed UTF-8 input is split into single bytes, which take the byte-fallback path.
// Decoding always yields well-formed UTF-8: bytes that do not form a character become U+FFFD.
//
// A Tokenizer is immutable after construction, cheap to copy (the vocabulary is shared) and safe to use from
// several threads at once.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/ids.h"
#include "util/result.h"

namespace hearth {

class GgufFile;
struct TokenizerVocab;

// GGUF `tokenizer.ggml.token_type` values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>, chat markers: never produced from plain text unless parse_special is set
  kUserDefined = 4,  // always matched verbatim in text, before the model's own splitting
  kUnused = 5,
  kByte = 6,  // <0xNN>
};

enum class TokenizerKind { kSpm, kBpe, kWpm };

struct DecodeOptions {
  // Render control tokens (<s>, </s>, <|im_end|>) as their text instead of nothing.
  bool render_special = false;
  // Treat the first token as the start of a text even when it is not BOS, dropping the space that encoding
  // prepended (add_space_prefix). Without it, only a sequence that starts with BOS counts as a text start; tokens
  // that continue a text (e.g. generated after a prompt) decode verbatim.
  bool starts_text = false;
};

// Plain-data description of a vocabulary, as GGUF stores it. Tokenizer::from_gguf fills one from file metadata;
// tests and synthetic models may build one by hand.
struct TokenizerVocab {
  std::string model = "llama";           // tokenizer.ggml.model
  std::string pre;                       // tokenizer.ggml.pre (pre-tokenizer name, BPE only)
  std::string model_name;                // general.name: selects llama.cpp's per-model quirks (Phi-3)
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens
  std::vector<float> scores;             // tokenizer.ggml.scores; empty means all 0
  std::vector<int64_t> token_types;      // tokenizer.ggml.token_type; empty means all normal
  std::vector<std::string> merges;       // tokenizer.ggml.merges ("left right" per line, rank = index), BPE only
  std::optional<int64_t> bos_id;         // unset: the model's default (llama: 1)
  std::optional<int64_t> eos_id;         // unset: the model's default (llama: 2)
  std::optional<int64_t> unknown_id;     // unset: the model's default (llama: 0)
  std::optional<int64_t> padding_id;     // unset or negative/0xFFFFFFFF: none
  std::optional<int64_t> eot_id;         // end of turn (tokenizer.ggml.eot_token_id), if any
  std::optional<int64_t> eom_id;         // end of message (tokenizer.ggml.eom_token_id, Llama 3.1's <|eom_id|>)
  std::optional<bool> add_bos;           // unset: llama true, gpt2 false
  std::optional<bool> add_eos;           // unset: false
  std::optional<bool> add_space_prefix;  // unset: llama true, gpt2 false
  std::optional<int64_t> sep_id;         // bert: [SEP] (tokenizer.ggml.seperator_token_id; unset: 102)
  std::optional<bool> lowercase;         // bert: tokenizer.ggml.normalizer.lowercase (unset: true)
  std::optional<bool> strip_accents;     // bert: tokenizer.ggml.normalizer.strip_accents (unset: lowercase)
};

class Tokenizer {
 public:
  // Reads the tokenizer.ggml.* metadata of `file`. Fails, naming the key and the problem, when the tokenizer is
  // missing, of an unsupported model, or malformed (array lengths differ, a special id is out of range, ...).
  [[nodiscard]] static Result<Tokenizer> from_gguf(const GgufFile& file);
  // Validates and indexes `vocab`; same failures as from_gguf.
  [[nodiscard]] static Result<Tokenizer> from_vocab(TokenizerVocab vocab);

  // Tokenizes `text`. With `add_special`, adds BOS and/or EOS as the model asks (add_bos_token / add_eos_token).
  // With `parse_special`, control tokens written in the text (e.g. "</s>") become their ids; otherwise they are
  // tokenized as plain text. User-defined tokens are always matched.
  [[nodiscard]] std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special = false) const;
  // Tokenizes `text` as the continuation of a sequence already in progress: no BOS or EOS, and no space prefix
  // before the text's first fragment (a special token inside `text` still starts a new text, as in encode).
  // Used to append the rest of a prompt after token ids that are known already.
  [[nodiscard]] std::vector<TokenId> encode_continuation(std::string_view text, bool parse_special) const;
  // encode()'s reference twin: each SentencePiece fragment is merged whole, never first split where no merge can
  // cross (tokenizer_spm.cpp), and every word is merged, never copied from an earlier one (tokenizer_memo.h).
  // The same tokens, slower; for tests and hearth-bench-tokenizer.
  [[nodiscard]] std::vector<TokenId> encode_unsplit(std::string_view text, bool add_special,
                                                    bool parse_special = false) const;

  // The bytes one token stands for: "▁" becomes a space, <0xNN> the raw byte (so a piece may be a fragment of a
  // UTF-8 character), control tokens nothing unless `render_special`, unused tokens nothing.
  // Requires is_valid(token).
  [[nodiscard]] std::string token_to_piece(TokenId token, bool render_special = false) const;

  // Detokenizes a whole sequence into well-formed UTF-8; equal to streaming it through an IncrementalDecoder and
  // flushing. decode(encode(s, true)) == s for well-formed s without special tokens. Requires all ids valid.
  [[nodiscard]] std::string decode(std::span<const TokenId> tokens, DecodeOptions options = {}) const;

  TokenizerKind kind() const;
  int32_t vocab_size() const;
  bool is_valid(TokenId token) const { return token.value >= 0 && token.value < vocab_size(); }
  TokenId bos() const;
  TokenId eos() const;
  std::optional<TokenId> unknown() const;
  std::optional<TokenId> padding() const;
  bool add_bos_token() const;
  bool add_eos_token() const;
  bool add_space_prefix() const;

  // Requires is_valid(token).
  TokenType token_type(TokenId token) const;
  bool is_control(TokenId token) const { return token_type(token) == TokenType::kControl; }
  // End of generation: EOS, tokenizer.ggml.eot_token_id and eom_token_id, and the end-of-turn markers of common chat
  // formats found by their text (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>, <EOT>,
  // _<EOT>, DeepSeek's <｜end▁of▁sentence｜>, harmony's <|return|> and <|call|>), as llama.cpp does since converters
  // rarely name them. A harmony vocabulary (one with <|return|> and <|call|>) keeps <|end|> out: it ends a message,
  // not the answer.
  bool is_eog(TokenId token) const;
  // The token's text exactly as stored in the vocabulary (e.g. "▁the", "<0x0A>", "</s>").
  std::string_view token_text(TokenId token) const;
  // Exact vocabulary lookup of a piece's stored text.
  std::optional<TokenId> find_token(std::string_view text) const;

  struct Vocab;  // the indexed vocabulary, private to the implementation

 private:
  friend class IncrementalDecoder;

  explicit Tokenizer(std::shared_ptr<const Vocab> vocab) : vocab_(std::move(vocab)) {}
  // token_to_piece without the copy; valid as long as the tokenizer.
  std::string_view piece_view(TokenId token, bool render_special) const;

  std::vector<TokenId> encode_impl(std::string_view text, bool add_special, bool parse_special, bool starts_text,
                                   bool split = true) const;

  std::shared_ptr<const Vocab> vocab_;
};

// Streams detokenization for one sequence: each push returns only complete UTF-8 characters, holding back the
// start of a multi-byte character until its last byte arrives, so no character is ever split across two outputs.
// Concatenating every push and the final flush gives Tokenizer::decode of the same tokens.
class IncrementalDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // Adds one token (requires tokenizer.is_valid(token)); returns the text that became complete, possibly "".
  [[nodiscard]] std::string push(TokenId token);
  // Ends the sequence: returns what is held back, with an incomplete final character replaced by U+FFFD.
  // The decoder can then start a new sequence.
  [[nodiscard]] std::string flush();
  // Bytes held back, waiting for the rest of a character (0..3).
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
  size_t num_pushed_ = 0;
  bool strip_next_space_ = false;
};

}  // namespace hearth
