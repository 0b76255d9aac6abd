// Synthetic encoder models (synth.h: bert, nomic-bert): a WordPiece vocabulary made here and random weights in
// llama.cpp's bert layout.

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "gguf/gguf_writer.h"
#include "model/synth_internal.h"

namespace hearth::detail {
namespace {

constexpr std::string_view kPhantomSpace = "\xE2\x96\x81";
constexpr int64_t kTokenTypes = 2;

// Common English words (word-initial pieces) and suffixes (continuation pieces): enough for text to tokenize into
// whole words often, and into letter pairs otherwise.
constexpr std::array<std::string_view, 160> kWords = {
    "the",       "of",       "and",      "to",      "in",      "a",      "is",       "that",    "for",      "it",
    "as",        "was",      "with",     "be",      "by",      "on",     "not",      "he",      "i",        "this",
    "are",       "or",       "his",      "from",    "at",      "which",  "but",      "have",    "an",       "had",
    "they",      "you",      "were",     "their",   "one",     "all",    "we",       "can",     "her",      "has",
    "there",     "been",     "if",       "more",    "when",    "will",   "would",    "who",     "so",       "no",
    "what",      "up",       "out",      "about",   "into",    "than",   "them",     "some",    "could",    "time",
    "these",     "two",      "may",      "first",   "then",    "do",     "any",      "like",    "my",       "now",
    "over",      "such",     "our",      "man",     "me",      "even",   "most",     "made",    "after",    "also",
    "did",       "many",     "before",   "must",    "through", "back",   "years",    "where",   "much",     "your",
    "way",       "well",     "down",     "should",  "because", "each",   "just",     "those",   "people",   "how",
    "too",       "little",   "state",    "good",    "very",    "make",   "world",    "still",   "own",      "see",
    "house",     "home",     "family",   "kitchen", "garden",  "school", "dinner",   "morning", "evening",  "water",
    "light",     "door",     "window",   "table",   "chair",   "bed",    "room",     "car",     "dog",      "cat",
    "child",     "children", "mother",   "father",  "rules",   "recipe", "shopping", "list",    "week",     "day",
    "night",     "today",    "tomorrow", "please",  "thank",   "hello",  "question", "answer",  "document", "search",
    "embedding", "model",    "vector",   "server",  "cache",   "memory", "prefix",   "token",   "text",     "data"};
constexpr std::array<std::string_view, 24> kSuffixes = {"s",   "es",   "ed",   "ing",  "er",   "ers", "est",  "ly",
                                                        "ion", "ions", "tion", "ment", "ness", "ful", "less", "able",
                                                        "al",  "ic",   "ous",  "ive",  "ize",  "ity", "y",    "en"};

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<GgufValue> types;
};

// [PAD] [UNK] [CLS] [SEP] [MASK] (control), then every printable ASCII character and lower-case letter pair as a
// word start ("▁x") and a continuation ("x"), then the words and suffixes not already there.
Vocabulary wordpiece_vocabulary() {
  Vocabulary v;
  auto add = [&](std::string text, int32_t type) {
    for (const std::string& t : v.tokens) {
      if (t == text) return;
    }
    v.tokens.push_back(std::move(text));
    v.types.push_back(gguf_int(GgufType::INT32, type));
  };
  for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) add(special, 3);
  for (char c = 33; c < 127; ++c) {
    if (c >= 'A' && c <= 'Z') continue;  // the text is lowercased first
    add(std::string(kPhantomSpace) + c, 1);
    add(std::string(1, c), 1);
  }
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) {
      add(std::string(kPhantomSpace) + a + b, 1);
      add(std::string{a, b}, 1);
    }
  }
  for (std::string_view w : kWords) add(std::string(kPhantomSpace) + std::string(w), 1);
  for (std::string_view s : kSuffixes) add(std::string(s), 1);
  return v;
}

void add_encoder_metadata(GgufWriter& w, const SynthConfig& c, Vocabulary vocab) {
  auto u32 = [](int64_t v) { return gguf_u32(static_cast<uint32_t>(v)); };
  const std::string& a = c.architecture;
  w.add("general.architecture", gguf_string(a));
  w.add("general.name", gguf_string(c.name));
  w.add("general.file_type", gguf_u32(llama_file_type(c.weight_type, false)));
  if (dtype_info(c.weight_type).block_size > 1) w.add("general.quantization_version", gguf_u32(2));
  w.add(a + ".context_length", u32(c.context_length));
  w.add(a + ".embedding_length", u32(c.dim));
  w.add(a + ".block_count", u32(c.n_layers));
  w.add(a + ".feed_forward_length", u32(c.ffn_dim));
  w.add(a + ".attention.head_count", u32(c.n_heads));
  w.add(a + ".attention.layer_norm_epsilon", gguf_f32(c.rms_eps));
  w.add(a + ".attention.causal", gguf_bool(false));
  w.add(a + ".pooling_type", u32(c.pooling_type));
  if (a == "nomic-bert") w.add(a + ".rope.freq_base", gguf_f32(c.rope_freq_base));
  w.add("tokenizer.ggml.model", gguf_string("bert"));
  w.add("tokenizer.ggml.token_type_count", u32(kTokenTypes));
  w.add("tokenizer.ggml.tokens", gguf_string_array(vocab.tokens));
  w.add("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, std::move(vocab.types)));
  w.add("tokenizer.ggml.padding_token_id", u32(0));
  w.add("tokenizer.ggml.unknown_token_id", u32(1));
  w.add("tokenizer.ggml.bos_token_id", u32(2));  // [CLS]
  w.add("tokenizer.ggml.cls_token_id", u32(2));
  w.add("tokenizer.ggml.seperator_token_id", u32(3));
  w.add("tokenizer.ggml.mask_token_id", u32(4));
  w.add("tokenizer.ggml.add_bos_token", gguf_bool(true));
  w.add("tokenizer.ggml.add_eos_token", gguf_bool(false));
  w.add("tokenizer.ggml.add_sep_token", gguf_bool(true));
  w.add("tokenizer.ggml.normalizer.lowercase", gguf_bool(true));
}

// LayerNorm weight and bias [dim]: 1 + noise and noise.
void plan_layer_norm(const SynthConfig& c, const std::string& name, std::vector<TensorPlan>& plan) {
  plan.push_back({name + ".weight", {c.dim}, DType::F32, 1.0f, c.qk_norm_sd});
  plan.push_back({name + ".bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
}

std::vector<TensorPlan> plan_encoder_tensors(const SynthConfig& c, int64_t n_vocab) {
  const DType w = c.weight_type;
  const bool bert = c.architecture == "bert";
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", {c.dim, n_vocab}, w, 0.0f, c.weight_sd});
  plan.push_back({"token_types.weight", {c.dim, kTokenTypes}, DType::F32, 0.0f, c.weight_sd});
  if (bert) plan.push_back({"position_embd.weight", {c.dim, c.context_length}, w, 0.0f, c.weight_sd});
  plan_layer_norm(c, "token_embd_norm", plan);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string blk = fmt::format("blk.{}.", i);
    if (bert) {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
        plan.push_back({blk + m + ".weight", {c.dim, c.dim}, w, 0.0f, c.weight_sd});
        plan.push_back({blk + m + ".bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
      }
    } else {
      plan.push_back({blk + "attn_qkv.weight", {c.dim, 3 * c.dim}, w, 0.0f, c.weight_sd});
    }
    plan.push_back({blk + "attn_output.weight", {c.dim, c.dim}, w, 0.0f, c.weight_sd});
    if (bert) plan.push_back({blk + "attn_output.bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
    plan_layer_norm(c, blk + "attn_output_norm", plan);
    plan.push_back({blk + "ffn_up.weight", {c.dim, c.ffn_dim}, w, 0.0f, c.weight_sd});
    if (bert) plan.push_back({blk + "ffn_up.bias", {c.ffn_dim}, DType::F32, 0.0f, c.bias_sd});
    if (!bert) plan.push_back({blk + "ffn_gate.weight", {c.dim, c.ffn_dim}, w, 0.0f, c.weight_sd});
    plan.push_back({blk + "ffn_down.weight", {c.ffn_dim, c.dim}, w, 0.0f, c.weight_sd});
    if (bert) plan.push_back({blk + "ffn_down.bias", {c.dim}, DType::F32, 0.0f, c.bias_sd});
    plan_layer_norm(c, blk + "layer_output_norm", plan);
  }
  return plan;
}

}  // namespace

Result<void> write_synthetic_encoder(const SynthConfig& c) {
  Vocabulary vocab = wordpiece_vocabulary();
  const auto n_vocab = static_cast<int64_t>(vocab.tokens.size());
  GgufWriter writer;
  add_encoder_metadata(writer, c, std::move(vocab));
  ThreadPool pool(c.num_threads);
  const std::vector<TensorPlan> plan = plan_encoder_tensors(c, n_vocab);
  for (const TensorPlan& t : plan) writer.add_tensor({t.name, t.type, t.shape, make_fill(t, c, pool)});
  return writer.write_file(c.out_path);
}

}  // namespace hearth::detail
