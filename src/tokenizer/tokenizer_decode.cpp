// Detokenization: token pieces, whole-sequence decode and the streaming IncrementalDecoder.

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_vocab.h"
#include "tokenizer/utf8.h"

namespace hearth {

std::string_view Tokenizer::piece_view(TokenId token, bool render_special) const {
  HEARTH_CHECK(is_valid(token), "token id {} outside the vocabulary of {}", token.value, vocab_size());
  const TokenEntry& entry = vocab_->entries[token.value];
  if (render_special && entry.type == TokenType::kControl) return entry.text;
  return vocab_->piece(token.value);
}

std::string Tokenizer::token_to_piece(TokenId token, bool render_special) const {
  return std::string(piece_view(token, render_special));
}

std::string Tokenizer::decode(std::span<const TokenId> tokens, DecodeOptions options) const {
  IncrementalDecoder decoder(*this, options);
  std::string out;
  for (const TokenId token : tokens) out += decoder.push(token);
  out += decoder.flush();
  return out;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(&tokenizer), options_(options) {}

std::string IncrementalDecoder::push(TokenId token) {
  std::string_view piece = tokenizer_->piece_view(token, options_.render_special);
  const bool first = num_pushed_++ == 0;
  // The encoder put a space in front of the text (add_space_prefix); a text start is a leading BOS that renders as
  // nothing, or the first token when the caller says so. Only one space goes, as in SentencePiece and llama.cpp.
  bool strip = false;
  if (tokenizer_->add_space_prefix()) {
    if (first && token == tokenizer_->bos() && piece.empty()) {
      strip_next_space_ = true;
      return {};
    }
    strip = strip_next_space_ || (first && options_.starts_text);
  }
  strip_next_space_ = false;
  if (strip && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);

  pending_ += piece;
  std::string out;
  const size_t consumed = utf8_append_complete(out, pending_, /*final=*/false);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  utf8_append_complete(out, pending_, /*final=*/true);
  pending_.clear();
  num_pushed_ = 0;
  strip_next_space_ = false;
  return out;
}

}  // namespace hearth
