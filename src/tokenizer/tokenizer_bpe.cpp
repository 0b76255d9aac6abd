// Byte-level BPE: the text is split into words by the pre-tokenizer, each word's bytes are spelled as printable
// characters (GPT-2's byte-to-unicode table, so the vocabulary never holds raw bytes or spaces), then adjacent
// symbols are merged by rank (lowest first, ties leftmost) with the same linked-list + heap scheme as the
// SentencePiece encoder.

#include "tokenizer/tokenizer_bpe.h"

#include <array>

#include "tokenizer/tokenizer_memo.h"
#include "tokenizer/tokenizer_merge.h"
#include "tokenizer/tokenizer_normalize.h"
#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer/utf8.h"

namespace hearth {
namespace {

using Vocab = Tokenizer::Vocab;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 become U+0100.. in order.
const std::array<char32_t, 256> kByteToCodepoint = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}();

// The UTF-8 spelling of each byte's stand-in character.
const std::array<std::string, 256> kByteSpelling = [] {
  std::array<std::string, 256> table;
  for (int b = 0; b < 256; ++b) utf8_append(table[b], kByteToCodepoint[b]);
  return table;
}();

// Inverse of kByteToCodepoint over the stand-in range U+0000..U+0143; -1 elsewhere.
const std::array<int16_t, 324> kCodepointToByte = [] {
  std::array<int16_t, 324> table;
  table.fill(-1);
  for (int b = 0; b < 256; ++b) table[kByteToCodepoint[b]] = static_cast<int16_t>(b);
  return table;
}();

// Turns a vocabulary spelling back into raw bytes. Characters outside the byte table (never in a well-formed
// byte-level vocabulary) are kept as they are.
void append_unspelled(std::string& out, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = utf8_scan(text, pos);
    const char32_t cp = scan.status == Utf8Status::kValid ? utf8_decode(text, pos) : 0xFFFFFFFF;
    if (cp < kCodepointToByte.size() && kCodepointToByte[cp] >= 0) {
      out.push_back(static_cast<char>(kCodepointToByte[cp]));
    } else {
      out.append(text.substr(pos, scan.length));
    }
    pos += scan.length;
  }
}

// Merging works on token ids: every merge joins two vocabulary pieces into a third, so no strings are built.
class BpeSession {
 public:
  explicit BpeSession(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of one pre-tokenized word (raw bytes) to `out`.
  void encode_word(std::string_view word, std::vector<TokenId>& out) {
    if (vocab_.pre == PreTokenizer::kLlama3 && emit_whole_word(word, out)) return;
    merger_.clear();
    for (size_t i = 0; i < word.size(); ++i) merger_.append(vocab_.byte_tokens[static_cast<uint8_t>(word[i])], i, 1);
    merger_.merge_all([this](int32_t left, int32_t right) { propose(left, right); });
    emit(out);
  }

 private:
  // Llama 3 takes a word that is a whole vocabulary piece as it is, without merging (llama.cpp: ignore_merges).
  bool emit_whole_word(std::string_view word, std::vector<TokenId>& out) {
    spelled_.clear();
    for (const char c : word) spelled_ += kByteSpelling[static_cast<uint8_t>(c)];
    const int32_t token = vocab_.find(spelled_);
    if (token == Vocab::kNone) return false;
    out.emplace_back(token);
    return true;
  }

  void propose(int32_t left, int32_t right) {
    const auto& symbols = merger_.symbols();
    const MergeTable::Merge* merge = vocab_.merges.find(symbols[left].token, symbols[right].token);
    if (merge == nullptr) return;
    merger_.push(-static_cast<double>(merge->rank), left, right, merge->merged);  // lowest rank first
  }

  // A byte whose spelling is not in the vocabulary (only in an incomplete one) becomes <unk>, if there is one.
  void emit(std::vector<TokenId>& out) const {
    merger_.for_each([&](const MergeSymbol& s) {
      const int32_t token = s.token != Vocab::kNone ? s.token : vocab_.unknown;
      if (token != Vocab::kNone) out.emplace_back(token);
    });
  }

  const Vocab& vocab_;
  std::string spelled_;
  SymbolMerger merger_;
};

// Each merge "left right" joins two pieces into the piece left+right. Merges that name pieces missing from the
// vocabulary can never apply to a tokenization and are skipped.
Result<void> build_merges(const TokenizerVocab& v, Vocab& out) {
  if (v.merges.empty()) return make_error("tokenizer.ggml.merges is missing or empty (required by model 'gpt2')");
  if (v.merges.size() > static_cast<size_t>(INT32_MAX)) return make_error("tokenizer.ggml.merges is too long");
  out.merges.reserve(v.merges.size());
  std::string joined;
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string_view merge = v.merges[i];
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos || space + 1 == merge.size()) {
      return make_error("tokenizer.ggml.merges[{}] = '{}' is not two pieces separated by a space", i, merge);
    }
    const int32_t left = out.find(merge.substr(0, space));
    const int32_t right = out.find(merge.substr(space + 1));
    joined.assign(merge.substr(0, space)).append(merge.substr(space + 1));
    const int32_t merged = out.find(joined);
    if (left == Vocab::kNone || right == Vocab::kNone || merged == Vocab::kNone) continue;
    out.merges.insert(left, right, MergeTable::Merge{static_cast<int32_t>(i), merged});
  }
  return {};
}

void build_bpe_pieces(Vocab& out) {
  out.piece_offsets.resize(out.entries.size() + 1);
  for (size_t i = 0; i < out.entries.size(); ++i) {
    const TokenEntry& e = out.entries[i];
    out.piece_offsets[i] = out.piece_bytes.size();
    switch (e.type) {
      case TokenType::kNormal:
      case TokenType::kByte:
        append_unspelled(out.piece_bytes, e.text);
        break;
      case TokenType::kUserDefined:  // stored as plain text, as llama.cpp treats them
      case TokenType::kUnknown:
        out.piece_bytes.append(e.text);
        break;
      case TokenType::kControl:
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }
  out.piece_offsets.back() = out.piece_bytes.size();
}

}  // namespace

Result<void> bpe_build(const TokenizerVocab& v, Vocab& out) {
  auto pre = pre_tokenizer_from_name(v.pre);
  if (!pre) return pre.error();
  out.pre = *pre;
  out.normalize_nfc = v.pre == "qwen2";
  if (*pre == PreTokenizer::kLlama3 && !v.add_bos) out.add_bos = true;  // llama.cpp's default for Llama 3
  HEARTH_TRY(build_merges(v, out));
  for (int b = 0; b < 256; ++b) out.byte_tokens[b] = out.find(kByteSpelling[b]);
  build_bpe_pieces(out);
  return {};
}

void bpe_encode_fragment(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out, WordMemo* memo) {
  std::string normalized;
  if (vocab.normalize_nfc && !is_nfc(text)) {
    to_nfc(text, normalized);
    text = normalized;
  }
  std::vector<std::string_view> words;
  pre_tokenize(vocab.pre, text, words);
  BpeSession session(vocab);
  if (memo == nullptr) {
    for (const std::string_view word : words) session.encode_word(word, out);
    return;
  }
  const auto merge = [&](std::string_view word, std::vector<TokenId>& tokens) { session.encode_word(word, tokens); };
  for (const std::string_view word : words) memo->encode(word, out, merge);
}

}  // namespace hearth
