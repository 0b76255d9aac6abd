// Tokenizer::encode: split the text on special tokens, then hand each plain-text fragment to the model's encoder.

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_memo.h"
#include "tokenizer/tokenizer_vocab.h"

namespace hearth {
namespace {

using Vocab = Tokenizer::Vocab;

// A piece of the input: plain text to tokenize, or one special token found in it.
struct Fragment {
  std::string_view text;
  int32_t token = Vocab::kNone;
};

// Whitespace as C's isspace sees it in the "C" locale, which is what llama.cpp strips around special tokens.
bool is_c_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_c_space(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_c_space(s.back())) s.remove_suffix(1);
  return s;
}

// Splits plain text `raw` at every occurrence of special token `id`, appending the pieces to `out`.
void split_on_token(std::string_view raw, int32_t id, const TokenEntry& entry, std::vector<Fragment>& out) {
  while (!raw.empty()) {
    const size_t match = raw.find(entry.text);
    if (match == std::string_view::npos) break;
    std::string_view left = raw.substr(0, match);
    if (entry.lstrip) left = trim_right(left);
    if (!left.empty()) out.push_back(Fragment{left, Vocab::kNone});
    out.push_back(Fragment{{}, id});
    raw.remove_prefix(match + entry.text.size());
    if (entry.rstrip) raw = trim_left(raw);
  }
  if (!raw.empty()) out.push_back(Fragment{raw, Vocab::kNone});
}

// Splits `text` into plain fragments and special tokens, trying longer special tokens first. User-defined tokens
// are always matched; control and unknown tokens only with `parse_special`.
std::vector<Fragment> partition_special(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(Fragment{text, Vocab::kNone});
  std::vector<Fragment> next;
  for (const int32_t id : vocab.special_tokens) {
    const TokenEntry& entry = vocab.entries[id];
    if (!parse_special && entry.type != TokenType::kUserDefined) continue;
    if (text.find(entry.text) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token != Vocab::kNone) {
        next.push_back(fragment);
      } else {
        split_on_token(fragment.text, id, entry, next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

// SentencePiece input: a "▁" in front when the fragment starts the text or follows a special token
// (add_space_prefix), and every space escaped to "▁".
void escape_spm_text(std::string_view text, bool space_prefix, std::string& out) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  out.clear();
  out.reserve(text.size() + text.size() / 2 + kSpace.size());
  if (space_prefix) out.append(kSpace);
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpace);
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_impl(text, add_special, parse_special, /*starts_text=*/true);
}

std::vector<TokenId> Tokenizer::encode_continuation(std::string_view text, bool parse_special) const {
  return encode_impl(text, /*add_special=*/false, parse_special, /*starts_text=*/false);
}

std::vector<TokenId> Tokenizer::encode_unsplit(std::string_view text, bool add_special, bool parse_special) const {
  return encode_impl(text, add_special, parse_special, /*starts_text=*/true, /*split=*/false);
}

std::vector<TokenId> Tokenizer::encode_impl(std::string_view text, bool add_special, bool parse_special,
                                            bool starts_text, bool split) const {
  const Vocab& vocab = *vocab_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab.add_bos) out.emplace_back(vocab.bos);
  bool after_special = starts_text;
  std::string escaped;
  WordMemo memo;
  WordMemo* const words = split ? &memo : nullptr;
  for (const Fragment& fragment : partition_special(vocab, text, parse_special)) {
    if (fragment.token != Vocab::kNone) {
      out.emplace_back(fragment.token);
      after_special = true;
      continue;
    }
    switch (vocab.kind) {
      case TokenizerKind::kSpm:
        escape_spm_text(fragment.text, vocab.add_space_prefix && after_special, escaped);
        spm_encode_fragment(vocab, escaped, out, words);
        break;
      case TokenizerKind::kBpe:
        bpe_encode_fragment(vocab, fragment.text, out, words);
        break;
      case TokenizerKind::kWpm:
        wpm_encode_fragment(vocab, fragment.text, out);
        break;
    }
    after_special = false;
  }
  if (add_special && vocab.add_eos) out.emplace_back(vocab.eos);
  if (add_special && vocab.kind == TokenizerKind::kWpm) out.emplace_back(vocab.sep);
  return out;
}

}  // namespace hearth
