// Tokenizer construction: reading tokenizer.ggml.* metadata, validating it and building the lookup tables.

#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_vocab.h"

namespace hearth {
namespace {

using Vocab = Tokenizer::Vocab;

// A special-token id as stored: unsigned or signed. The conventional "none" values (0xFFFFFFFF, all ones, any
// negative) become -1; other huge values stay huge, so that the range check reports them.
Result<std::optional<int64_t>> read_token_id(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return std::optional<int64_t>();
  if (const auto* u = std::get_if<uint64_t>(&value->data)) {
    if (*u == 0xFFFFFFFFull || *u == ~uint64_t{0}) return std::optional<int64_t>(-1);
    return std::optional<int64_t>(static_cast<int64_t>(std::min<uint64_t>(*u, INT64_MAX)));
  }
  if (const auto* i = std::get_if<int64_t>(&value->data)) return std::optional<int64_t>(*i);
  return make_error("{}: metadata key '{}' has type {}, expected an integer token id", file.name(), key,
                    gguf_type_name(value->type));
}

// Copies a Result<T> into `out`, or returns its error.
template <class T, class U>
Result<void> assign(Result<T> result, U& out) {
  if (!result) return result.error();
  out = std::move(*result);
  return {};
}

Result<void> read_special_ids(const GgufFile& file, TokenizerVocab& v) {
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.bos_token_id"), v.bos_id));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.eos_token_id"), v.eos_id));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.unknown_token_id"), v.unknown_id));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.padding_token_id"), v.padding_id));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.eot_token_id"), v.eot_id));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.eom_token_id"), v.eom_id));
  HEARTH_TRY(assign(file.get_bool("tokenizer.ggml.add_bos_token"), v.add_bos));
  HEARTH_TRY(assign(file.get_bool("tokenizer.ggml.add_eos_token"), v.add_eos));
  HEARTH_TRY(assign(file.get_bool("tokenizer.ggml.add_space_prefix"), v.add_space_prefix));
  HEARTH_TRY(assign(read_token_id(file, "tokenizer.ggml.seperator_token_id"), v.sep_id));
  HEARTH_TRY(assign(file.get_bool("tokenizer.ggml.normalizer.lowercase"), v.lowercase));
  HEARTH_TRY(assign(file.get_bool("tokenizer.ggml.normalizer.strip_accents"), v.strip_accents));
  return {};
}

Result<TokenizerVocab> read_vocab(const GgufFile& file) {
  TokenizerVocab v;
  std::optional<std::string> model;
  HEARTH_TRY(assign(file.get_string("tokenizer.ggml.model"), model));
  if (!model) {
    return make_error("{}: the file has no tokenizer (metadata key 'tokenizer.ggml.model' is missing)", file.name());
  }
  v.model = std::move(*model);
  std::optional<std::string> text;
  HEARTH_TRY(assign(file.get_string("tokenizer.ggml.pre"), text));
  v.pre = text.value_or("");
  HEARTH_TRY(assign(file.get_string("general.name"), text));
  v.model_name = text.value_or("");
  HEARTH_TRY(assign(file.get_string_array("tokenizer.ggml.tokens"), v.tokens));
  HEARTH_TRY(assign(file.get_float_array("tokenizer.ggml.scores"), v.scores));
  HEARTH_TRY(assign(file.get_int_array("tokenizer.ggml.token_type"), v.token_types));
  HEARTH_TRY(assign(file.get_string_array("tokenizer.ggml.merges"), v.merges));
  HEARTH_TRY(read_special_ids(file, v));
  return v;
}

// Resolves one special-token id: unset takes `default_id`, negative means none, anything else must be in range.
Result<int32_t> resolve_id(std::string_view key, std::optional<int64_t> given, int32_t default_id, size_t n_vocab,
                           bool required) {
  int64_t id = given.value_or(default_id);
  if (id < 0) id = Vocab::kNone;
  if (id >= static_cast<int64_t>(n_vocab)) {
    return make_error("tokenizer.ggml.{} = {} is out of range: the vocabulary has {} tokens", key, id, n_vocab);
  }
  if (required && id == Vocab::kNone) return make_error("the tokenizer has no tokenizer.ggml.{}", key);
  return static_cast<int32_t>(id);
}

Result<void> check_arrays(const TokenizerVocab& v) {
  const size_t n = v.tokens.size();
  if (n == 0) return make_error("tokenizer.ggml.tokens is missing or empty");
  if (n > static_cast<size_t>(INT32_MAX)) return make_error("tokenizer.ggml.tokens has {} entries, too many", n);
  if (!v.scores.empty() && v.scores.size() != n) {
    return make_error("tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}", v.scores.size(), n);
  }
  if (!v.token_types.empty() && v.token_types.size() != n) {
    return make_error("tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", v.token_types.size(),
                      n);
  }
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    if (v.token_types[i] < 0 || v.token_types[i] > static_cast<int64_t>(TokenType::kByte)) {
      return make_error("tokenizer.ggml.token_type[{}] = {} is not a token type (0..6)", i, v.token_types[i]);
    }
  }
  return {};
}

Result<void> resolve_special_ids(const TokenizerVocab& v, Vocab& out) {
  const bool spm = out.kind == TokenizerKind::kSpm;
  const size_t n = v.tokens.size();
  const bool wpm = out.kind == TokenizerKind::kWpm;  // BERT's vocabularies have no EOS (llama.cpp: none)
  HEARTH_TRY(assign(resolve_id("bos_token_id", v.bos_id, spm ? 1 : Vocab::kNone, n, !wpm), out.bos));
  HEARTH_TRY(assign(resolve_id("eos_token_id", v.eos_id, spm ? 2 : Vocab::kNone, n, !wpm), out.eos));
  HEARTH_TRY(assign(resolve_id("unknown_token_id", v.unknown_id, spm ? 0 : Vocab::kNone, n, false), out.unknown));
  HEARTH_TRY(assign(resolve_id("padding_token_id", v.padding_id, Vocab::kNone, n, false), out.padding));
  HEARTH_TRY(assign(resolve_id("eot_token_id", v.eot_id, Vocab::kNone, n, false), out.eot));
  HEARTH_TRY(assign(resolve_id("eom_token_id", v.eom_id, Vocab::kNone, n, false), out.eom));
  out.add_bos = v.add_bos.value_or(spm);
  out.add_eos = v.add_eos.value_or(false);
  out.add_space_prefix = v.add_space_prefix.value_or(spm);
  if (out.kind == TokenizerKind::kWpm) {  // llama.cpp's defaults for "bert"
    HEARTH_TRY(assign(resolve_id("bos_token_id", v.bos_id, 101, n, true), out.bos));
    HEARTH_TRY(assign(resolve_id("unknown_token_id", v.unknown_id, 100, n, true), out.unknown));
    HEARTH_TRY(assign(resolve_id("seperator_token_id", v.sep_id, 102, n, true), out.sep));
    HEARTH_TRY(assign(resolve_id("padding_token_id", v.padding_id, 0, n, false), out.padding));
    if (out.eos == Vocab::kNone) out.eos = out.sep;  // [SEP] ends an input; nothing is generated
    out.add_bos = true;
    out.add_space_prefix = false;
    out.wpm_lowercase = v.lowercase.value_or(true);  // llama.cpp's normalizer default
    out.wpm_strip_accents = v.strip_accents.value_or(out.wpm_lowercase);
  }
  return {};
}

void fill_entries(TokenizerVocab& v, Vocab& out) {
  const size_t n = v.tokens.size();
  out.entries.resize(n);
  for (size_t i = 0; i < n; ++i) {
    TokenEntry& e = out.entries[i];
    e.text = std::move(v.tokens[i]);
    e.score = v.scores.empty() ? 0.0f : v.scores[i];
    e.type = v.token_types.empty() ? TokenType::kNormal : static_cast<TokenType>(v.token_types[i]);
  }
  out.index.build(n, [&](size_t id) -> std::string_view { return out.entries[id].text; });
}

// Tokens matched verbatim in text before splitting, longest first so that "<|im_end|>" wins over "<|im".
void index_special_tokens(const TokenizerVocab& v, Vocab& out) {
  for (size_t i = 0; i < out.entries.size(); ++i) {
    const TokenEntry& e = out.entries[i];
    const bool special =
        e.type == TokenType::kControl || e.type == TokenType::kUserDefined || e.type == TokenType::kUnknown;
    if (special && !e.text.empty()) out.special_tokens.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(out.special_tokens.begin(), out.special_tokens.end(),
                   [&](int32_t a, int32_t b) { return out.entries[a].text.size() > out.entries[b].text.size(); });
  // llama.cpp's Phi-3 quirk (mirroring the HF tokenizer's rstrip flags): whitespace after its chat markers is
  // dropped, except after <unk>, <s> and <|endoftext|>.
  std::string name = v.model_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (const int32_t id : out.special_tokens) out.entries[id].rstrip = true;
  for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
    if (const int32_t id = out.find(text); id != Vocab::kNone) out.entries[id].rstrip = false;
  }
}

// End of generation: EOS, EOT, and (as llama.cpp does, since converters rarely name them) the end-of-turn markers
// of the common chat formats, found by their text (Gemma 4: <turn|>, and <|tool_response>, which its template writes
// after a turn's calls). Harmony (gpt-oss) ends an answer with <|return|> or a tool call
// with <|call|>; its <|end|> closes one message (the analysis) before the next (the final answer) starts, so a
// vocabulary with all three keeps <|end|> out, as llama.cpp does.
void index_eog_tokens(Vocab& out) {
  const auto add = [&](int32_t id) {
    if (id != Vocab::kNone && std::find(out.eog_tokens.begin(), out.eog_tokens.end(), id) == out.eog_tokens.end()) {
      out.eog_tokens.push_back(id);
    }
  };
  add(out.eos);
  add(out.eot);
  add(out.eom);
  for (const char* text :
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "<｜end▁of▁sentence｜>", "<|return|>", "<|call|>", "<turn|>", "<|tool_response>"}) {
    add(out.find(text));
  }
  const int32_t end = out.find("<|end|>");
  if (end != Vocab::kNone && out.find("<|return|>") != Vocab::kNone && out.find("<|call|>") != Vocab::kNone) {
    std::erase(out.eog_tokens, end);
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Parses "<0xNN>", the text of a byte token; -1 when `text` has another form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// SentencePiece byte fallback: <0xNN>, else the one-byte piece itself, else <unk>.
Result<void> index_spm_bytes(Vocab& out) {
  for (int b = 0; b < 256; ++b) {
    int32_t id = out.find(fmt::format("<0x{:02X}>", b));
    if (id == Vocab::kNone) id = out.find(std::string(1, static_cast<char>(b)));
    if (id == Vocab::kNone) id = out.unknown;
    if (id == Vocab::kNone) {
      return make_error(
          "the vocabulary has no byte token <0x{:02X}> and no unknown token, so text outside the "
          "vocabulary cannot be encoded",
          b);
    }
    out.byte_tokens[b] = id;
  }
  return {};
}

// Appends `text` with SentencePiece's "▁" turned back into " ".
void append_unescaped(std::string& out, std::string_view text) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  for (size_t pos = 0;;) {
    const size_t next = text.find(kSpace, pos);
    out.append(text.substr(pos, next - pos));
    if (next == std::string_view::npos) return;
    out.push_back(' ');
    pos = next + kSpace.size();
  }
}

Result<void> build_spm_pieces(Vocab& out) {
  out.piece_offsets.resize(out.entries.size() + 1);
  out.piece_bytes.reserve(out.entries.size() * 6);
  for (size_t i = 0; i < out.entries.size(); ++i) {
    const TokenEntry& e = out.entries[i];
    out.piece_offsets[i] = out.piece_bytes.size();
    switch (e.type) {
      case TokenType::kNormal:
      case TokenType::kUserDefined:  // Gemma 3's whitespace runs are user-defined pieces spelled "▁▁"
        append_unescaped(out.piece_bytes, e.text);
        break;
      case TokenType::kByte: {
        const int byte = parse_byte_token(e.text);
        if (byte < 0) return make_error("token {} has type byte but its text '{}' is not <0xNN>", i, e.text);
        out.piece_bytes.push_back(static_cast<char>(byte));
        break;
      }
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
  return {};
}

// The character pairs of every vocabulary text, split into symbols as spm_encode_fragment splits a text: a
// well-formed character, else one byte. A pair with an ill-formed byte on either side is left out; the encoder
// never splits next to such a byte. UTF-8 is self-synchronizing, so a well-formed character inside a text is found
// by this scan wherever it sits, even after ill-formed bytes.
void build_spm_joinable(Vocab& out) {
  std::vector<uint64_t> pairs;
  for (const TokenEntry& e : out.entries) {
    for_each_character_pair(e.text, [&](size_t, char32_t left, char32_t right) {
      pairs.push_back(CodepointPairSet::pack(left, right));
    });
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  out.joinable.build(pairs);
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  auto vocab = read_vocab(file);
  if (!vocab) return vocab.error();
  auto tokenizer = from_vocab(std::move(*vocab));
  if (!tokenizer) return make_error("{}: bad tokenizer: {}", file.name(), tokenizer.error().message);
  return tokenizer;
}

Result<Tokenizer> Tokenizer::from_vocab(TokenizerVocab v) {
  auto out = std::make_shared<Vocab>();
  if (v.model == "llama") {
    out->kind = TokenizerKind::kSpm;
  } else if (v.model == "gpt2") {
    out->kind = TokenizerKind::kBpe;
  } else if (v.model == "bert") {
    out->kind = TokenizerKind::kWpm;
  } else {
    return make_error("unsupported tokenizer model '{}' (tokenizer.ggml.model); supported: llama, gpt2, bert", v.model);
  }
  HEARTH_TRY(check_arrays(v));
  HEARTH_TRY(resolve_special_ids(v, *out));
  fill_entries(v, *out);
  index_special_tokens(v, *out);
  index_eog_tokens(*out);
  if (out->kind == TokenizerKind::kWpm) {
    for (const TokenEntry& e : out->entries) out->max_token_bytes = std::max(out->max_token_bytes, e.text.size());
    HEARTH_TRY(build_spm_pieces(*out));  // "▁" reads back as a space, as llama.cpp's WPM pieces do
  } else if (out->kind == TokenizerKind::kSpm) {
    HEARTH_TRY(index_spm_bytes(*out));
    HEARTH_TRY(build_spm_pieces(*out));
    build_spm_joinable(*out);
  } else {
    HEARTH_TRY(bpe_build(v, *out));
  }
  return Tokenizer(std::move(out));
}

TokenizerKind Tokenizer::kind() const {
  return vocab_->kind;
}
int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(vocab_->entries.size());
}
TokenId Tokenizer::bos() const {
  return TokenId(vocab_->bos);
}
TokenId Tokenizer::eos() const {
  return TokenId(vocab_->eos);
}
bool Tokenizer::add_bos_token() const {
  return vocab_->add_bos;
}
bool Tokenizer::add_eos_token() const {
  return vocab_->add_eos;
}
bool Tokenizer::add_space_prefix() const {
  return vocab_->add_space_prefix;
}

std::optional<TokenId> Tokenizer::unknown() const {
  return vocab_->unknown == Vocab::kNone ? std::nullopt : std::optional<TokenId>(vocab_->unknown);
}

std::optional<TokenId> Tokenizer::padding() const {
  return vocab_->padding == Vocab::kNone ? std::nullopt : std::optional<TokenId>(vocab_->padding);
}

TokenType Tokenizer::token_type(TokenId token) const {
  HEARTH_CHECK(is_valid(token), "token id {} outside the vocabulary of {}", token.value, vocab_size());
  return vocab_->entries[token.value].type;
}

bool Tokenizer::is_eog(TokenId token) const {
  const auto& eog = vocab_->eog_tokens;
  return std::find(eog.begin(), eog.end(), token.value) != eog.end();
}

std::string_view Tokenizer::token_text(TokenId token) const {
  HEARTH_CHECK(is_valid(token), "token id {} outside the vocabulary of {}", token.value, vocab_size());
  return vocab_->entries[token.value].text;
}

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = vocab_->find(text);
  return id == Vocab::kNone ? std::nullopt : std::optional<TokenId>(id);
}

}  // namespace hearth
