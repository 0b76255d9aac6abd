#include "server/cache/answer_memory.h"

#include <algorithm>

namespace hearth::server {
namespace {

bool is_utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

AnswerMemory::AnswerMemory(const Tokenizer& tokenizer, size_t max_entries, size_t max_bytes)
    : tokenizer_(tokenizer), max_entries_(max_entries), max_bytes_(max_bytes) {}

size_t AnswerMemory::Entry::bytes() const {
  return prompt_text.size() + answer_text.size() + (prompt.size() + answer.size()) * sizeof(TokenId) +
         answer_ends.size() * sizeof(size_t);
}

void AnswerMemory::remember(std::string cache_salt, bool parse_special, std::string prompt_text,
                            std::vector<TokenId> prompt,
                            std::span<const TokenId> answer) {
  if (max_entries_ == 0 || answer.empty() || prompt.empty()) return;
  Entry e;
  e.cache_salt = std::move(cache_salt);
  e.parse_special = parse_special;
  e.prompt_text = std::move(prompt_text);
  e.prompt = std::move(prompt);
  e.answer.assign(answer.begin(), answer.end());
  e.answer_ends.reserve(answer.size());
  e.first_control = answer.size();
  for (size_t i = 0; i < answer.size(); ++i) {
    if (tokenizer_.is_control(answer[i]) && e.first_control == answer.size()) e.first_control = i;
    e.answer_text += tokenizer_.token_to_piece(answer[i], /*render_special=*/true);
    e.answer_ends.push_back(e.answer_text.size());
  }
  if (e.bytes() > max_bytes_) return;
  std::lock_guard lock(mutex_);
  // The same prompt and answer again (a retry at temperature 0): keep one.
  std::erase_if(entries_, [&](const Entry& old) {
    const bool same =
        old.cache_salt == e.cache_salt && old.parse_special == e.parse_special && old.prompt_text == e.prompt_text &&
        old.answer == e.answer;
    if (same) bytes_ -= old.bytes();
    return same;
  });
  bytes_ += e.bytes();
  entries_.push_front(std::move(e));
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= entries_.back().bytes();
    entries_.pop_back();
  }
}

size_t AnswerMemory::matched_answer_tokens(const Entry& e, std::string_view text) {
  const std::string_view rest = text.substr(e.prompt_text.size());
  // Control tokens render as their text; they can stand for that text only where the prompt parses specials.
  const size_t limit = e.parse_special ? e.answer.size() : e.first_control;
  size_t matched = 0;
  for (size_t i = 0; i < limit; ++i) {
    const size_t end = e.answer_ends[i];
    if (end > rest.size()) break;
    const size_t begin = i == 0 ? 0 : e.answer_ends[i - 1];
    if (rest.compare(begin, end - begin, e.answer_text, begin, end - begin) != 0) break;
    // The rest is tokenized on its own, so the cut must not split a character.
    if (end < rest.size() && is_utf8_continuation(rest[end])) continue;
    matched = i + 1;
  }
  return matched;
}

std::optional<AnswerMemory::Spliced> AnswerMemory::splice(std::string_view cache_salt, bool parse_special,
                                                          std::string_view text) {
  std::unique_lock lock(mutex_);
  auto best = entries_.end();
  size_t best_tokens = 0;
  size_t best_bytes = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->cache_salt != cache_salt || it->parse_special != parse_special || !text.starts_with(it->prompt_text)) {
      continue;
    }
    const size_t tokens = matched_answer_tokens(*it, text);
    if (tokens == 0) continue;  // nothing beyond what tokenizing the text would find in the cache anyway
    const size_t bytes = it->prompt_text.size() + it->answer_ends[tokens - 1];
    if (bytes > best_bytes) {
      best = it;
      best_tokens = tokens;
      best_bytes = bytes;
    }
  }
  if (best == entries_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, best);
  const Entry& e = entries_.front();
  Spliced out;
  out.tokens = e.prompt;
  out.tokens.insert(out.tokens.end(), e.answer.begin(), e.answer.begin() + static_cast<ptrdiff_t>(best_tokens));
  out.answer_tokens = static_cast<int32_t>(best_tokens);
  const std::string rest(text.substr(best_bytes));
  lock.unlock();
  // After a control token the rest starts a new text, as it would when tokenizing the whole (its space prefix).
  const bool after_control = tokenizer_.is_control(out.tokens.back());
  const std::vector<TokenId> tail = after_control ? tokenizer_.encode(rest, /*add_special=*/false, parse_special)
                                                  : tokenizer_.encode_continuation(rest, parse_special);
  out.tokens.insert(out.tokens.end(), tail.begin(), tail.end());
  return out;
}

size_t AnswerMemory::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t AnswerMemory::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace hearth::server
