#pragma once
// AnswerMemory: the token ids of recent answers, so that a conversation's next prompt is built from the ids the
// model generated instead of a re-tokenization of their text.
//
// A chat client sends each turn as text: the previous prompt, the answer it received, a new question. Tokenizing
// that text again rarely gives back the answer's generated ids (a model may spell " Hello" as "▁H" "ello"), so the
// prefix cache would stop at the start of the answer and every turn would recompute the whole previous answer.
// The memory keeps, per finished request: the prompt text, its ids, and the generated ids. A new prompt text that
// starts with a remembered prompt text followed by (a prefix of) the answer's text is built as
//   remembered prompt ids + the answer ids whose text it repeats + encode_continuation(the rest of the text)
// which holds exactly the same text, and whose leading ids are the ones whose K/V the cache holds.
//
// An answer id matches only where the text repeats it byte for byte and the cut falls on a UTF-8 character
// boundary; a control token (EOS, <|im_end|>) matches only its own text in a prompt that parses special tokens.
// Bounded in entries and in bytes (texts and ids): the least recently used entries go first. Thread-safe.

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hearth::server {

class AnswerMemory {
 public:
  // A prompt built from a remembered turn.
  struct Spliced {
    std::vector<TokenId> tokens;
    int32_t answer_tokens = 0;  // of which were generated ids of the remembered answer
  };

  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  // Keeps at most `max_entries` turns (0 disables the memory) holding at most `max_bytes` of text and ids; a
  // single turn larger than that is not remembered.
  AnswerMemory(const Tokenizer& tokenizer, size_t max_entries, size_t max_bytes = kDefaultMaxBytes);

  // Remembers a finished request of tenant `cache_salt`: `prompt` are the ids `prompt_text` was turned into (with
  // `parse_special` as they were), `answer` the ids generated after them. An empty answer is not remembered.
  void remember(std::string cache_salt, bool parse_special, std::string prompt_text, std::vector<TokenId> prompt,
                std::span<const TokenId> answer);

  // The prompt for `text` built from the remembered turn of the same `cache_salt` that covers the most of it, when
  // one covers all of a remembered prompt text; nullopt otherwise (tokenize `text` as usual). Marks the entry
  // used. Turns of other salts are never used (tenant isolation: a reuse count would reveal their answers).
  [[nodiscard]] std::optional<Spliced> splice(std::string_view cache_salt, bool parse_special, std::string_view text);

  size_t size() const;
  size_t bytes() const;
  size_t max_entries() const { return max_entries_; }

 private:
  struct Entry {
    std::string cache_salt;
    bool parse_special = false;
    std::string prompt_text;
    std::vector<TokenId> prompt;
    std::vector<TokenId> answer;
    std::vector<size_t> answer_ends;  // answer_ends[i]: bytes of answer text through answer[i]
    std::string answer_text;          // answer pieces concatenated (control tokens as their text)
    size_t first_control = 0;         // index of the first control token in answer (answer.size() if none)
    size_t bytes() const;
  };
  // How many answer ids of `e` the text after its prompt text repeats (requires text to start with it).
  static size_t matched_answer_tokens(const Entry& e, std::string_view text);

  const Tokenizer& tokenizer_;
  size_t max_entries_;
  size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  size_t bytes_ = 0;          // sum of entries_' bytes()
};

}  // namespace hearth::server
