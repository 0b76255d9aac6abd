// SentencePiece-style merging: start from single characters and repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary piece (ties: the leftmost pair).
//
// A fragment first splits between every two characters that never sit side by side in a vocabulary text
// (Vocab::joinable): no merge can cross such a point, so each part merges alone, and in the same order as inside
// the whole fragment (a merge in one part never changes another part's candidates, and the leftmost of equal
// candidates in a part is the leftmost in the fragment). The tokens are the same; the heap holds one word's pairs
// instead of a whole chat history's, which makes a long prompt's encode several times faster.
//
// The linked list of symbols and the heap of candidate pairs are tokenizer_merge.h's, shared with the BPE encoder.

#include "tokenizer/tokenizer_memo.h"
#include "tokenizer/tokenizer_merge.h"
#include "tokenizer/tokenizer_vocab.h"

namespace hearth {
namespace {

class SpmSession {
 public:
  SpmSession(const Tokenizer::Vocab& vocab, std::string_view text, SymbolMerger& merger)
      : vocab_(vocab), text_(text), merger_(merger) {}

  void encode(std::vector<TokenId>& out) {
    merger_.clear();
    split_characters();
    merger_.merge_all([this](int32_t left, int32_t right) { propose(left, right); });
    emit(out);
  }

 private:
  // One symbol per well-formed UTF-8 character; each byte of an ill-formed sequence is a symbol of its own.
  void split_characters() {
    merger_.symbols().reserve(text_.size());
    for_each_spm_symbol(text_, [this](size_t pos, size_t length, bool, char32_t) {
      merger_.append(Tokenizer::Vocab::kNone, pos, length);
    });
  }

  void propose(int32_t left, int32_t right) {
    const auto& symbols = merger_.symbols();
    // Adjacent symbols are contiguous in the text, so their concatenation is a view: no allocation.
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t token = vocab_.find(text_.substr(symbols[left].offset, length));
    if (token == Tokenizer::Vocab::kNone) return;
    merger_.push(vocab_.entries[token].score, left, right, token);
  }

  // Every surviving symbol is a vocabulary piece or a single character; characters outside the vocabulary fall
  // back to one token per byte.
  void emit(std::vector<TokenId>& out) const {
    merger_.for_each([&](const MergeSymbol& s) {
      const std::string_view piece = text_.substr(s.offset, s.length);
      const int32_t token = s.token != Tokenizer::Vocab::kNone ? s.token : vocab_.find(piece);
      if (token != Tokenizer::Vocab::kNone) {
        out.emplace_back(token);
        return;
      }
      for (const char c : piece) {
        const int32_t byte_token = vocab_.byte_tokens[static_cast<uint8_t>(c)];
        HEARTH_CHECK(byte_token != Tokenizer::Vocab::kNone, "no fallback token for byte {:#04x}", c);
        out.emplace_back(byte_token);
      }
    });
  }

  const Tokenizer::Vocab& vocab_;
  std::string_view text_;
  SymbolMerger& merger_;
};

}  // namespace

void spm_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out,
                         WordMemo* memo) {
  SymbolMerger merger;
  if (memo == nullptr) {
    SpmSession(vocab, text, merger).encode(out);
    return;
  }
  const auto merge = [&](std::string_view part, std::vector<TokenId>& tokens) {
    SpmSession(vocab, part, merger).encode(tokens);
  };
  size_t part = 0;  // where the current part starts
  for_each_character_pair(text, [&](size_t pos, char32_t left, char32_t right) {
    if (vocab.joinable.contains(left, right)) return;
    memo->encode(text.substr(part, pos - part), out, merge);
    part = pos;
  });
  if (part < text.size()) memo->encode(text.substr(part), out, merge);
}

}  // namespace hearth
