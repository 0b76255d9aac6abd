// The encoder families (bert, nomic-bert; model/encoder.cpp) on small synthetic files (hearth synth --arch bert,
// nomic-bert: a synthetic WordPiece vocabulary, random weights), proven three ways:
//   (a) Engine::embed against a straight-line double-precision forward written here from llama.cpp's llm_build_bert
//       (embeddings + LayerNorm, post-norm layers, bidirectional attention), pooled and L2-normalised;
//   (b) batch invariance: an input embedded alone and in a batch of 8 gives the same bits, and no block is left
//       held or indexed;
//   (c) against llama.cpp v0.5.0 as node-llama-cpp 3.22.1 ships it (bench/peer/embed.mjs): the same WordPiece
//       token ids on texts with accents, punctuation, CJK, numbers and unknown words, and cosine similarity >= 0.9999
//       (F32 weights; Q8_0's is printed and held to 0.999).

#include <unistd.h>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/synth.h"
#include "tensor/quant.h"
#include "tmp_files.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

// bert: dim 64, 2 layers, 4 heads, ffn 128, context 256; nomic-bert the same with RoPE base 1000. One file per
// (architecture, pooling, weight type, process).
const std::string& encoder_model(const std::string& arch, int32_t pooling, DType type = DType::F32) {
  static std::map<std::string, std::string> paths;
  const std::string key = fmt::format("{}_{}_{}", arch, pooling, dtype_name(type));
  auto it = paths.find(key);
  if (it != paths.end()) return it->second;
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  SynthConfig c;
  c.out_path = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/encoder_test_" + key + "_" +
                                    std::to_string(getpid()) + ".gguf");
  c.architecture = arch;
  c.name = "hearth-synthetic-" + arch;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.ffn_dim = 128;
  c.context_length = 256;
  c.weight_type = type;
  c.weight_sd = 0.1f;
  c.qk_norm_sd = 0.1f;
  c.rms_eps = 1e-12f;
  c.rope_freq_base = 1000.0f;
  c.seed = 17;
  c.num_threads = 2;
  c.pooling_type = pooling;
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  return paths.emplace(key, c.out_path).first->second;
}

struct Loaded {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded load(const std::string& path) {
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  Loaded l;
  l.file = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(l.file);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  auto tokenizer = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(tokenizer.ok()) << (tokenizer.ok() ? "" : tokenizer.error().message);
  if (model.ok()) l.model = std::move(*model);
  if (tokenizer.ok()) l.tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
  return l;
}

EngineConfig engine_config(int32_t max_batch_tokens) {
  EngineConfig c;
  c.kv_memory_bytes = 8ll << 20;
  c.kv_format = {KvDtype::kF32, KvDtype::kF32};
  c.max_batch_tokens = max_batch_tokens;
  c.kv_prefault = false;
  return c;
}

// Accents, punctuation, CJK, numbers, words outside the vocabulary, runs of spaces, upper case.
const std::vector<std::string> kTexts = {"The house rules: no shoes in the kitchen!",
                                         "Café déjà vu — naïve façade, Ångström résumé.",
                                         "東京 is the capital; 北京 too? 中文字符",
                                         "Order #1234 costs $56.78 (tax 7%) on 2026-12-07.",
                                         "xylophonequartzjumping zzzqqq supercalifragilistic",
                                         "  Hello,   WORLD...  hello\tworld\n",
                                         "embedding models map text to vectors; similar texts land close together.",
                                         "a",
                                         "Emoji 🙂 and symbols ~ ^ | \\ ` < > = + * & @ © ™ ±",
                                         "The children's garden-party was wonderful, wasn't it?"};

Embeddings engine_embed(Loaded& l, const std::vector<std::vector<TokenId>>& inputs, int32_t max_batch_tokens) {
  ThreadPool pool(2);
  auto engine = Engine::create(*l.model, *l.tokenizer, engine_config(max_batch_tokens), pool);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return {};
  EXPECT_EQ((*engine)->info().embedding_refusal, "");
  auto out = (*engine)->embed(inputs);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  (*engine)->check_invariants();
  EXPECT_EQ((*engine)->kv().pool().num_blocks_in_use(), 0) << "embed must give back every block it borrowed";
  EXPECT_EQ((*engine)->kv().pool().num_blocks_cached(), 0) << "an encoder's blocks must never be indexed";
  return out.ok() ? *out : Embeddings{};
}

std::vector<std::vector<TokenId>> tokenize_all(const Tokenizer& tokenizer) {
  std::vector<std::vector<TokenId>> out;
  for (const std::string& t : kTexts) out.push_back(tokenizer.encode(t, /*add_special=*/true));
  return out;
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// ---- (a) the straight-line reference forward ----

using Vec = std::vector<double>;

// A tensor as doubles, row after row (any weight type, through the reference dequantizer).
struct RefTensor {
  int64_t n_cols = 0, n_rows = 0;
  std::vector<double> v;
  const double* row(int64_t r) const { return v.data() + r * n_cols; }
};

RefTensor tensor(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  RefTensor out;
  if (t == nullptr) return out;
  out.n_cols = t->ne[0];
  out.n_rows = t->ne[1] * t->ne[2] * t->ne[3];
  std::vector<float> row(out.n_cols);
  for (int64_t r = 0; r < out.n_rows; ++r) {
    dequantize_row(t->type, t->data + r * row_bytes(t->type, out.n_cols), row.data(), out.n_cols);
    out.v.insert(out.v.end(), row.begin(), row.end());
  }
  return out;
}

bool has(const GgufFile& f, const std::string& name) {
  return f.find_tensor(name) != nullptr;
}

// y = W x (+ b): W [n_rows, n_cols].
Vec linear(const RefTensor& w, const Vec& x, const RefTensor* b = nullptr) {
  Vec y(w.n_rows, 0.0);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    for (int64_t c = 0; c < w.n_cols; ++c) y[r] += w.row(r)[c] * x[c];
    if (b != nullptr) y[r] += b->v[r];
  }
  return y;
}

void layer_norm(Vec& x, const RefTensor& w, const RefTensor& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) / std::sqrt(var + eps) * w.v[i] + b.v[i];
}

// Neox RoPE over the whole head: pair (i, i + d/2) turns by pos × base^(-2i/d).
void rope_neox(double* x, int64_t d, int64_t pos, double base) {
  for (int64_t i = 0; i < d / 2; ++i) {
    const double angle = static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / d);
    const double a = x[i], b = x[i + d / 2];
    x[i] = a * std::cos(angle) - b * std::sin(angle);
    x[i + d / 2] = a * std::sin(angle) + b * std::cos(angle);
  }
}

// Every token's final hidden state [n][dim], as llama.cpp's llm_build_bert computes it.
std::vector<Vec> reference_hidden(const GgufFile& f, const std::vector<int32_t>& ids) {
  const std::string arch = *f.get_string("general.architecture").value();
  const bool nomic = arch == "nomic-bert";
  const int64_t dim = static_cast<int64_t>(*f.get_uint(arch + ".embedding_length").value());
  const int64_t n_layers = static_cast<int64_t>(*f.get_uint(arch + ".block_count").value());
  const int64_t n_heads = static_cast<int64_t>(*f.get_uint(arch + ".attention.head_count").value());
  const double eps = *f.get_float(arch + ".attention.layer_norm_epsilon").value();
  const double base = nomic ? *f.get_float(arch + ".rope.freq_base").value() : 0.0;
  const int64_t hd = dim / n_heads;
  const auto n = static_cast<int64_t>(ids.size());
  const RefTensor embd = tensor(f, "token_embd.weight"), types = tensor(f, "token_types.weight");
  std::vector<Vec> x(n, Vec(dim));
  const RefTensor pos = nomic ? RefTensor{} : tensor(f, "position_embd.weight");
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < dim; ++i) {
      x[t][i] = embd.row(ids[t])[i] + types.row(0)[i] + (nomic ? 0.0 : pos.row(t)[i]);
    }
    layer_norm(x[t], tensor(f, "token_embd_norm.weight"), tensor(f, "token_embd_norm.bias"), eps);
  }
  for (int64_t il = 0; il < n_layers; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    std::vector<Vec> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      if (nomic) {
        const Vec qkv = linear(tensor(f, p + "attn_qkv.weight"), x[t]);
        q[t].assign(qkv.begin(), qkv.begin() + dim);
        k[t].assign(qkv.begin() + dim, qkv.begin() + 2 * dim);
        v[t].assign(qkv.begin() + 2 * dim, qkv.end());
        for (int64_t h = 0; h < n_heads; ++h) {
          rope_neox(q[t].data() + h * hd, hd, t, base);
          rope_neox(k[t].data() + h * hd, hd, t, base);
        }
      } else {
        const RefTensor bq = tensor(f, p + "attn_q.bias"), bk = tensor(f, p + "attn_k.bias");
        const RefTensor bv = tensor(f, p + "attn_v.bias");
        q[t] = linear(tensor(f, p + "attn_q.weight"), x[t], &bq);
        k[t] = linear(tensor(f, p + "attn_k.weight"), x[t], &bk);
        v[t] = linear(tensor(f, p + "attn_v.weight"), x[t], &bv);
      }
    }
    const RefTensor wo = tensor(f, p + "attn_output.weight");
    const RefTensor bo = has(f, p + "attn_output.bias") ? tensor(f, p + "attn_output.bias") : RefTensor{};
    for (int64_t t = 0; t < n; ++t) {
      Vec attn(dim, 0.0);
      for (int64_t h = 0; h < n_heads; ++h) {  // every token reads every key: no causal mask
        Vec s(n);
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          s[j] = 0;
          for (int64_t i = 0; i < hd; ++i) s[j] += q[t][h * hd + i] * k[j][h * hd + i];
          s[j] /= std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - m));
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += s[j] / sum * v[j][h * hd + i];
        }
      }
      const Vec o = linear(wo, attn, bo.v.empty() ? nullptr : &bo);
      Vec y(dim);
      for (int64_t i = 0; i < dim; ++i) y[i] = x[t][i] + o[i];
      layer_norm(y, tensor(f, p + "attn_output_norm.weight"), tensor(f, p + "attn_output_norm.bias"), eps);
      Vec hidden;
      if (nomic) {  // SwiGLU: silu(gate x) * up x
        const Vec g = linear(tensor(f, p + "ffn_gate.weight"), y), u = linear(tensor(f, p + "ffn_up.weight"), y);
        hidden.resize(g.size());
        for (size_t i = 0; i < g.size(); ++i) hidden[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      } else {  // GELU (tanh form) of up x + b
        const RefTensor bu = tensor(f, p + "ffn_up.bias");
        hidden = linear(tensor(f, p + "ffn_up.weight"), y, &bu);
        for (double& z : hidden) {
          z = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * z * (1.0 + 0.044715 * z * z)));
        }
      }
      const RefTensor bd = has(f, p + "ffn_down.bias") ? tensor(f, p + "ffn_down.bias") : RefTensor{};
      const Vec d = linear(tensor(f, p + "ffn_down.weight"), hidden, bd.v.empty() ? nullptr : &bd);
      for (int64_t i = 0; i < dim; ++i) y[i] += d[i];
      layer_norm(y, tensor(f, p + "layer_output_norm.weight"), tensor(f, p + "layer_output_norm.bias"), eps);
      x[t] = std::move(y);  // safe: every token's K/V of this layer is already computed
    }
  }
  return x;
}

std::vector<float> reference_embedding(const GgufFile& f, const std::vector<int32_t>& ids, PoolingType pooling) {
  const std::vector<Vec> h = reference_hidden(f, ids);
  Vec pooled(h[0].size(), 0.0);
  for (size_t t = 0; t < h.size(); ++t) {
    if (pooling == PoolingType::kCls && t > 0) break;
    for (size_t i = 0; i < pooled.size(); ++i) pooled[i] += h[t][i];
  }
  double norm = 0;
  for (double v : pooled) norm += v * v;
  std::vector<float> out(pooled.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(pooled[i] / std::sqrt(norm));
  return out;
}

void expect_matches_reference(const std::string& arch, PoolingType pooling) {
  Loaded l = load(encoder_model(arch, static_cast<int32_t>(pooling)));
  ASSERT_TRUE(l.model && l.tokenizer);
  EXPECT_TRUE(l.model->config().encoder);
  EXPECT_EQ(l.model->config().pooling, pooling);
  const auto inputs = tokenize_all(*l.tokenizer);
  const Embeddings got = engine_embed(l, inputs, 512);
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> ids;
    for (TokenId t : inputs[i]) ids.push_back(t.value);
    const std::vector<float> want = reference_embedding(*l.file, ids, pooling);
    ASSERT_EQ(got[i].size(), want.size());
    float worst = 0.0f;
    for (size_t k = 0; k < want.size(); ++k) worst = std::max(worst, std::abs(got[i][k] - want[k]));
    EXPECT_LT(worst, 2e-5f) << arch << " input " << i;
    EXPECT_GT(cosine(got[i], want), 0.9999999) << arch << " input " << i;
  }
}

TEST(Encoder, BertMeanMatchesTheReferenceForward) {
  expect_matches_reference("bert", PoolingType::kMean);
}
TEST(Encoder, BertClsMatchesTheReferenceForward) {
  expect_matches_reference("bert", PoolingType::kCls);
}
TEST(Encoder, NomicBertMatchesTheReferenceForward) {
  expect_matches_reference("nomic-bert", PoolingType::kMean);
}

// ---- (b) batch invariance, refusals ----

TEST(Encoder, AloneAndInABatchOfEightAreBitIdentical) {
  for (const std::string arch : {"bert", "nomic-bert"}) {
    Loaded l = load(encoder_model(arch, 1));
    std::vector<std::vector<TokenId>> inputs = tokenize_all(*l.tokenizer);
    inputs.resize(8);
    const Embeddings batched = engine_embed(l, inputs, 512);
    ASSERT_EQ(batched.size(), 8u);
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(engine_embed(l, {inputs[i]}, 512).at(0), batched[i]) << arch << " input " << i;
    }
    // Forwards too small for the whole batch: inputs go whole into later forwards, never chunked.
    EXPECT_EQ(engine_embed(l, inputs, 40), batched) << arch;
  }
}

TEST(Encoder, InputLongerThanAForwardIsRefusedAndChatIsRefused) {
  Loaded l = load(encoder_model("bert", 1));
  ThreadPool pool(2);
  auto engine = Engine::create(*l.model, *l.tokenizer, engine_config(32), pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const std::string& refusal = (*engine)->info().generation_refusal;
  EXPECT_NE(refusal.find("embedding model"), std::string::npos) << refusal;
  EXPECT_EQ((*engine)->info().embedding_pooling, "mean");
  auto too_long = (*engine)->embed(std::vector<std::vector<TokenId>>{std::vector<TokenId>(33, TokenId{7})});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, SubmitErrorCode::kPromptTooLong);
  EXPECT_NE(too_long.error().message.find("--max-batch-tokens"), std::string::npos) << too_long.error().message;
  RequestSpec spec;  // no generation request is admitted, so none can index an encoder's blocks
  spec.prompt = {TokenId{2}, TokenId{7}, TokenId{3}};
  spec.max_tokens = 2;
  auto added = (*engine)->add_request(spec);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.error().code, SubmitErrorCode::kNotGenerative);
  EXPECT_EQ((*engine)->kv().pool().num_blocks_in_use(), 0);
  EXPECT_EQ((*engine)->kv().pool().num_blocks_cached(), 0);
}

TEST(Encoder, WordPieceSplitsLikeBert) {
  Loaded l = load(encoder_model("bert", 1));
  const Tokenizer& t = *l.tokenizer;
  auto texts = [&](const std::string& s) {
    std::vector<std::string> out;
    for (TokenId id : t.encode(s, true)) out.emplace_back(t.token_text(id));
    return out;
  };
  const std::string u = "\xE2\x96\x81";  // "▁"
  EXPECT_EQ(texts("The House"), (std::vector<std::string>{"[CLS]", u + "the", u + "house", "[SEP]"}));
  EXPECT_EQ(texts("Café!"), (std::vector<std::string>{"[CLS]", u + "ca", "fe", u + "!", "[SEP]"}));
  EXPECT_EQ(texts("rules?"), (std::vector<std::string>{"[CLS]", u + "rules", u + "?", "[SEP]"}));
  EXPECT_EQ(texts("東"), (std::vector<std::string>{"[CLS]", "[UNK]", "[SEP]"}));
}

// llama.cpp's BertNormalizer defaults: lowercase unless tokenizer.ggml.normalizer.lowercase is false, accents
// stripped as lowercase says unless strip_accents says otherwise.
TEST(Encoder, WordPieceNormalizerKeysAsLlamaCpp) {
  const std::string u = "\xE2\x96\x81";
  TokenizerVocab v;
  v.model = "bert";
  v.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", u + "the", u + "The", u + "cafe", u + "caf\xC3\xA9"};
  v.token_types = {3, 3, 3, 3, 1, 1, 1, 1};
  v.bos_id = 2;
  v.unknown_id = 1;
  v.sep_id = 3;
  auto ids = [&](const TokenizerVocab& vocab) {
    auto t = Tokenizer::from_vocab(vocab);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    std::vector<int32_t> out;
    if (!t.ok()) return out;
    for (TokenId id : t->encode("The caf\xC3\xA9", true)) out.push_back(id.value);
    return out;
  };
  EXPECT_EQ(ids(v), (std::vector<int32_t>{2, 4, 6, 3}));
  v.lowercase = false;
  EXPECT_EQ(ids(v), (std::vector<int32_t>{2, 5, 7, 3}));
  v.strip_accents = true;
  EXPECT_EQ(ids(v), (std::vector<int32_t>{2, 5, 6, 3}));
}

// ---- (c) against the peer ----

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// The lowest cosine similarity between Hearth's and the peer's embeddings of kTexts; the ids must match too.
double lowest_peer_cosine(const std::string& arch, int32_t pooling, DType type) {
  const std::string peer_dir = HEARTH_PEER_DIR;
  EXPECT_TRUE(fs::exists(peer_dir + "/node_modules/@node-llama-cpp/linux-x64/bins"))
      << "the peer is not installed in " << peer_dir << ": run scripts/peer-install.sh";
  const std::string& path = encoder_model(arch, pooling, type);
  const std::string texts = path + ".texts.json";
  std::ofstream(texts) << nlohmann::json(kTexts).dump();
  const std::string log = path + ".peer.log";
  const std::string command =
      "node '" + peer_dir + "/embed.mjs' --model '" + path + "' --texts '" + texts + "' --ctx 256 -t 1 2>'" + log + "'";
  const nlohmann::json j = nlohmann::json::parse(run_command(command), nullptr, false);
  fs::remove(texts);
  EXPECT_TRUE(j.is_object() && j.contains("inputs")) << command << " (stderr in " << log << ")";
  if (!j.is_object() || !j.contains("inputs")) return 0.0;
  Loaded l = load(path);
  const auto inputs = tokenize_all(*l.tokenizer);
  const Embeddings ours = engine_embed(l, inputs, 512);
  EXPECT_EQ(j["inputs"].size(), inputs.size());
  if (j["inputs"].size() != inputs.size()) return 0.0;
  double worst = 1.0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> our_ids, their_ids = j["inputs"][i]["ids"].get<std::vector<int32_t>>();
    for (TokenId t : inputs[i]) our_ids.push_back(t.value);
    EXPECT_EQ(our_ids, their_ids) << "input " << i << " (" << kTexts[i] << ") tokenizes differently";
    const std::vector<float> theirs = j["inputs"][i]["embedding"].get<std::vector<float>>();
    EXPECT_EQ(theirs.size(), ours[i].size());
    if (theirs.size() != ours[i].size()) return 0.0;
    worst = std::min(worst, cosine(ours[i], theirs));
    EXPECT_LT(cosine(ours[(i + 1) % inputs.size()], theirs), 0.99) << "inputs " << i << " and the next look alike";
  }
  std::printf("%s %s %s: lowest cosine similarity to llama.cpp v0.5.0 over %zu inputs: %.9f\n", arch.c_str(),
              std::string(pooling_name(static_cast<PoolingType>(pooling))).c_str(),
              std::string(dtype_name(type)).c_str(), inputs.size(), worst);
  return worst;
}

TEST(EncoderPeer, BertMeanMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine("bert", 1, DType::F32), 0.9999);
}
TEST(EncoderPeer, BertClsMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine("bert", 2, DType::F32), 0.9999);
}
TEST(EncoderPeer, NomicBertMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine("nomic-bert", 1, DType::F32), 0.9999);
}
TEST(EncoderPeer, BertQ8MatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine("bert", 1, DType::Q8_0), 0.999);
}
TEST(EncoderPeer, NomicBertQ8MatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine("nomic-bert", 1, DType::Q8_0), 0.999);
}

}  // namespace
}  // namespace hearth
