#pragma once
// Internal to the tokenizer: the tokens of each distinct word one encode call has met, so a word the text repeats
// is merged once. A chat history repeats most of its words, and it is tokenized whole on every request.
//
// A word (BPE: one pre-tokenized word; SentencePiece: one part of a fragment between two characters that never
// join) is merged alone, so its tokens depend on its bytes and the vocabulary only, and a repeat copies them.
// The memo lives for one call: no request's words can change what another request's encode does or how long it
// takes. Its size is bounded: words over kMaxWordBytes and words past kMaxWords distinct ones are merged every time.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/ids.h"

namespace hearth {

class WordMemo {
 public:
  static constexpr size_t kMaxWordBytes = 64;
  static constexpr size_t kMaxWords = 1 << 16;

  // Appends `word`'s tokens to `out`: a copy of the tokens recorded for it, else `merge(word, out)`'s, recorded.
  template <class Merge>
  void encode(std::string_view word, std::vector<TokenId>& out, Merge&& merge) {
    if (word.size() > kMaxWordBytes) {
      merge(word, out);
      return;
    }
    if (const auto it = spans_.find(word); it != spans_.end()) {
      out.insert(out.end(), tokens_.begin() + it->second.begin, tokens_.begin() + it->second.end);
      return;
    }
    const size_t first = out.size();
    merge(word, out);
    if (spans_.size() >= kMaxWords) return;
    const size_t begin = tokens_.size();
    tokens_.insert(tokens_.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    spans_.emplace(std::string(word), Span{begin, tokens_.size()});
  }

 private:
  struct Span {
    size_t begin = 0;
    size_t end = 0;
  };
  struct Hash {  // looks a string_view up without building a string
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::unordered_map<std::string, Span, Hash, std::equal_to<>> spans_;
  std::vector<TokenId> tokens_;  // every recorded word's tokens, one after another
};

}  // namespace hearth
