// SentencePiece-style merging: start from single characters and repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary piece (ties: the leftmost pair).
//
// Symbols form a doubly linked list over the text; candidate pairs sit in a max-heap. A merge absorbs the right
// symbol into the left one and pushes the two new pairs it creates, so the whole encode is O(n log n). Heap entries
// made stale by an earlier merge are recognised and skipped when popped.

#include <queue>

#include "model/tokenizer_vocab.h"
#include "model/utf8.h"

namespace hearth {
namespace {

struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  size_t offset = 0;  // into the fragment text
  size_t length = 0;  // 0 once absorbed into its left neighbour
};

struct Bigram {
  float score = 0.0f;
  int32_t left = 0;
  int32_t right = 0;
  size_t length = 0;  // left.length + right.length when pushed; a mismatch at pop time means the entry is stale
};

// Max-heap order: higher score first, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Tokenizer::Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void encode(std::vector<TokenId>& out) {
    split_characters();
    for (size_t i = 1; i < symbols_.size(); ++i) try_add_bigram(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    merge_all();
    emit(out);
  }

 private:
  // One symbol per well-formed UTF-8 character; each byte of an ill-formed sequence is a symbol of its own.
  void split_characters() {
    symbols_.reserve(text_.size());
    for (size_t pos = 0; pos < text_.size();) {
      const Utf8Scan scan = utf8_scan(text_, pos);
      const size_t length = scan.status == Utf8Status::kValid ? scan.length : 1;
      const auto index = static_cast<int32_t>(symbols_.size());
      symbols_.push_back(Symbol{index - 1, -1, pos, length});
      if (index > 0) symbols_[index - 1].next = index;
      pos += length;
    }
  }

  void try_add_bigram(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    // Adjacent symbols are contiguous in the text, so their concatenation is a view: no allocation.
    const size_t length = symbols_[left].length + symbols_[right].length;
    const int32_t token = vocab_.find(text_.substr(symbols_[left].offset, length));
    if (token == Tokenizer::Vocab::kNone) return;
    queue_.push(Bigram{vocab_.entries[token].score, left, right, length});
  }

  void merge_all() {
    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      // Symbols only grow or vanish, so an unchanged total length means both are still there and adjacent.
      if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }
  }

  // Every surviving symbol is a vocabulary piece or a single character; characters outside the vocabulary fall
  // back to one token per byte.
  void emit(std::vector<TokenId>& out) const {
    for (int32_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) {
      const std::string_view piece = text_.substr(symbols_[i].offset, symbols_[i].length);
      const int32_t token = vocab_.find(piece);
      if (token != Tokenizer::Vocab::kNone) {
        out.emplace_back(token);
        continue;
      }
      for (const char c : piece) {
        const int32_t byte_token = vocab_.byte_tokens[static_cast<uint8_t>(c)];
        HEARTH_CHECK(byte_token != Tokenizer::Vocab::kNone, "no fallback token for byte {:#04x}", c);
        out.emplace_back(byte_token);
      }
    }
  }

  const Tokenizer::Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void spm_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  SpmSession(vocab, text).encode(out);
}

}  // namespace hearth
