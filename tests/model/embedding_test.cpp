// Embeddings, proven three ways on a tiny synthetic Qwen3-Embedding-shaped file (qwen3, pooling_type last, EOS
// appended to every input):
//   (a) pool_rows/finish_pooling (model/pooling.h) against a plain double-precision twin, and chunked pooling
//       bit-identical to pooling at once;
//   (b) Engine::embed against the scalar reference forward (reference_forward.h): the LM head applied to an
//       embedding points the same way as the reference's logits at the pooled position(s), since the embedding is
//       the output-normed hidden state scaled to unit length; batched, chunked and one-at-a-time runs agree bit for
//       bit;
//   (c) against an independent implementation: llama.cpp v0.5.0 as node-llama-cpp 3.22.1 ships it
//       (bench/peer/embed.mjs, createEmbeddingContext + getEmbeddingFor): the same token ids and cosine
//       similarity >= 0.9999. A missing peer fails, as in arch_test.

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/engine.h"
#include "model/model.h"
#include "model/pooling.h"
#include "model/synth.h"
#include "reference_forward.h"
#include "tmp_files.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

const std::string kShared = HEARTH_SHARED_DIR;

// ---- (a) pooling against its twin ----

// The twin: every row in double, the mean as sum / n, then x / sqrt(sum x^2).
std::vector<float> reference_pool(PoolingType type, const std::vector<float>& rows, int32_t dim) {
  const auto n = static_cast<int32_t>(rows.size() / dim);
  std::vector<double> v(dim, 0.0);
  for (int32_t r = 0; r < n; ++r) {
    const bool take = type == PoolingType::kMean || (type == PoolingType::kCls && r == 0) ||
                      (type == PoolingType::kLast && r == n - 1);
    for (int32_t i = 0; take && i < dim; ++i) v[i] += rows[static_cast<size_t>(r) * dim + i];
  }
  if (type == PoolingType::kMean) {
    for (double& x : v) x /= n;
  }
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out(dim);
  for (int32_t i = 0; i < dim; ++i) out[i] = static_cast<float>(v[i] / norm);
  return out;
}

std::vector<float> pool_in_chunks(PoolingType type, const std::vector<float>& rows, int32_t dim, int32_t chunk) {
  const auto n = static_cast<int32_t>(rows.size() / dim);
  std::vector<float> acc(dim, 0.0f);
  for (int32_t p = 0; p < n; p += chunk) {
    const int32_t take = std::min(chunk, n - p);
    pool_rows(type, std::span(rows).subspan(static_cast<size_t>(p) * dim, static_cast<size_t>(take) * dim), dim, p, n,
              acc);
  }
  finish_pooling(type, n, acc);
  return acc;
}

TEST(Pooling, MatchesTheDoubleTwinAndChunkingKeepsTheBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto type : {PoolingType::kMean, PoolingType::kCls, PoolingType::kLast}) {
    for (const int32_t n : {1, 2, 7, 33}) {
      const int32_t dim = 48;
      std::vector<float> rows(static_cast<size_t>(n) * dim);
      for (float& x : rows) x = normal(rng);
      const std::vector<float> once = pool_in_chunks(type, rows, dim, n);
      const std::vector<float> twin = reference_pool(type, rows, dim);
      for (int32_t i = 0; i < dim; ++i) {
        ASSERT_NEAR(once[i], twin[i], 1e-6f) << pooling_name(type) << " n " << n << " element " << i;
      }
      for (const int32_t chunk : {1, 3, 16}) {
        EXPECT_EQ(pool_in_chunks(type, rows, dim, chunk), once)
            << pooling_name(type) << " n " << n << " chunk " << chunk;
      }
    }
  }
}

TEST(Pooling, NamesRoundTripAndOnlyMeanClsLastEmbed) {
  for (const auto type :
       {PoolingType::kNone, PoolingType::kMean, PoolingType::kCls, PoolingType::kLast, PoolingType::kRank}) {
    EXPECT_EQ(pooling_from_name(pooling_name(type)), type);
  }
  EXPECT_FALSE(pooling_from_name("max"));
  EXPECT_FALSE(pooling_embeds(PoolingType::kNone));
  EXPECT_FALSE(pooling_embeds(PoolingType::kRank));
  EXPECT_TRUE(pooling_embeds(PoolingType::kLast));
  std::vector<float> zero(4, 0.0f);
  l2_normalize(zero);
  EXPECT_EQ(zero, std::vector<float>(4, 0.0f));
}

// ---- the synthetic embedding file ----

// Qwen3-Embedding's shape in small on the Qwen vocabulary: dim 64, 2 layers, 4 heads, 2 KV heads, F32, pooling
// `pooling` (-1: none, a chat model), EOS appended. One file per (pooling, process).
const std::string& embedding_model(int32_t pooling) {
  static std::map<int32_t, std::string> paths;
  auto it = paths.find(pooling);
  if (it != paths.end()) return it->second;
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  SynthConfig c;
  c.out_path = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/embedding_test_" + std::to_string(pooling) +
                                    "_" + std::to_string(getpid()) + ".gguf");
  c.vocab_from = kShared + "/vocab/ggml-vocab-qwen2.gguf";
  c.architecture = "qwen3";
  c.name = "hearth-synthetic-qwen3-embedding";
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 128;
  c.context_length = 256;
  c.weight_type = DType::F32;
  c.weight_sd = 0.1f;
  c.qk_norm_sd = 0.3f;
  c.rope_freq_base = 1000000.0f;
  c.seed = 11;
  c.num_threads = 2;
  c.pooling_type = pooling;
  c.add_eos = true;
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  return paths.emplace(pooling, c.out_path).first->second;
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
  l.model = std::move(*model);
  l.tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
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

const std::vector<std::string> kTexts = {"Once upon a time", "The capital of France is Paris.",
                                         "def add(a, b):\n    return a + b", "a",
                                         "Embeddings map text to vectors; similar texts land close together."};

Embeddings engine_embed(Loaded& l, const std::vector<std::vector<TokenId>>& inputs, int32_t max_batch_tokens,
                        std::optional<PoolingType> pooling = std::nullopt) {
  ThreadPool pool(2);
  EngineConfig config = engine_config(max_batch_tokens);
  config.pooling = pooling;
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return {};
  EXPECT_EQ((*engine)->info().embedding_refusal, "");
  auto out = (*engine)->embed(inputs);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  (*engine)->check_invariants();
  EXPECT_EQ((*engine)->kv().pool().num_blocks_in_use(), 0) << "embed must give back every block it borrowed";
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

// ---- (b) the engine against the reference forward ----

TEST(Embedding, ConfigReadsPoolingTypeAndTheTokenizerAppendsEos) {
  Loaded l = load(embedding_model(3));
  EXPECT_EQ(l.model->config().pooling, PoolingType::kLast);
  const std::vector<TokenId> ids = l.tokenizer->encode("Once upon a time", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_TRUE(l.tokenizer->is_eog(ids.back())) << "add_eos_token: the input ends with the end-of-text token";
  EXPECT_EQ(load(embedding_model(-1)).model->config().pooling, PoolingType::kNone);
}

// W · embedding (the LM head on the unit-length output-normed state) is parallel to the reference's logits at the
// last token (last), the first (cls), or their mean over the tokens (mean: W is linear).
TEST(Embedding, LmHeadOfTheEmbeddingIsParallelToTheReferenceLogits) {
  for (const auto type : {PoolingType::kLast, PoolingType::kCls, PoolingType::kMean}) {
    Loaded l = load(embedding_model(static_cast<int32_t>(type)));
    const auto inputs = tokenize_all(*l.tokenizer);
    const Embeddings got = engine_embed(l, inputs, 512);
    ASSERT_EQ(got.size(), inputs.size());
    const GgufTensor* output = l.file->find_tensor("output.weight");
    ASSERT_NE(output, nullptr);
    ASSERT_EQ(output->type, DType::F32);
    const auto* w = reinterpret_cast<const float*>(output->data);
    const int64_t dim = output->ne[0], n_vocab = output->ne[1];
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(got[i].size(), static_cast<size_t>(dim));
      std::vector<int32_t> ids;
      for (TokenId t : inputs[i]) ids.push_back(t.value);
      const auto ref = test::reference_logits(*l.file, ids);
      std::vector<float> want(n_vocab, 0.0f), head(n_vocab, 0.0f);
      for (size_t t = 0; t < ref.size(); ++t) {
        const bool take = type == PoolingType::kMean || (type == PoolingType::kCls && t == 0) ||
                          (type == PoolingType::kLast && t + 1 == ref.size());
        for (int64_t v = 0; take && v < n_vocab; ++v) want[v] += ref[t][v];
      }
      for (int64_t v = 0; v < n_vocab; ++v) {
        double s = 0;
        for (int64_t k = 0; k < dim; ++k) s += double{w[v * dim + k]} * got[i][k];
        head[v] = static_cast<float>(s);
      }
      EXPECT_GT(cosine(head, want), 0.99999) << pooling_name(type) << " input " << i;
      EXPECT_NEAR(cosine(got[i], got[i]), 1.0, 1e-6);
      double norm = 0;
      for (float x : got[i]) norm += double{x} * x;
      EXPECT_NEAR(norm, 1.0, 1e-5) << "embeddings are unit vectors";
    }
  }
}

TEST(Embedding, BatchedChunkedAndOneAtATimeAreBitIdentical) {
  Loaded l = load(embedding_model(3));
  const auto inputs = tokenize_all(*l.tokenizer);
  const Embeddings batched = engine_embed(l, inputs, 512);
  EXPECT_EQ(engine_embed(l, inputs, 3), batched) << "3-row forwards cut inputs into chunks";
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(engine_embed(l, {inputs[i]}, 512).at(0), batched[i]) << "input " << i;
  }
}

TEST(Embedding, ChatModelIsRefusedUnlessAPoolingIsNamed) {
  Loaded l = load(embedding_model(-1));
  ThreadPool pool(2);
  auto engine = Engine::create(*l.model, *l.tokenizer, engine_config(512), pool);
  ASSERT_TRUE(engine.ok());
  const std::string& refusal = (*engine)->info().embedding_refusal;
  EXPECT_NE(refusal.find("not an embedding model"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("--pooling"), std::string::npos) << refusal;
  EXPECT_EQ((*engine)->info().embedding_pooling, "");
  const auto inputs = tokenize_all(*l.tokenizer);
  EXPECT_EQ(engine_embed(l, inputs, 512, PoolingType::kMean).size(), inputs.size());
}

TEST(Embedding, BadInputsFailNamingTheInput) {
  Loaded l = load(embedding_model(3));
  ThreadPool pool(2);
  auto engine = Engine::create(*l.model, *l.tokenizer, engine_config(512), pool);
  ASSERT_TRUE(engine.ok());
  auto empty = (*engine)->embed(std::vector<std::vector<TokenId>>{{TokenId{1}}, {}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, SubmitErrorCode::kEmptyPrompt);
  EXPECT_NE(empty.error().message.find("input 1"), std::string::npos) << empty.error().message;
  auto too_long = (*engine)->embed(std::vector<std::vector<TokenId>>{std::vector<TokenId>(257, TokenId{5})});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, SubmitErrorCode::kPromptTooLong);
  auto bad_id = (*engine)->embed(std::vector<std::vector<TokenId>>{{TokenId{-1}}});
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(bad_id.error().code, SubmitErrorCode::kInvalidToken);
  EXPECT_EQ((*engine)->kv().pool().num_blocks_in_use(), 0);
}

// A running request holds most of a 4-block pool: an input that needs 2 blocks is a kOverloaded to retry, nothing is
// left held, and once the request is done the same input runs.
TEST(Embedding, BusyPoolIsOverloadedAndHoldsNothing) {
  Loaded l = load(embedding_model(3));
  ThreadPool pool(2);
  EngineConfig config = engine_config(512);
  config.kv_memory_bytes = 4 * 16 * 512;  // 4 blocks of 16 tokens at 512 B/token (f32, 2 layers, 2 KV heads of 16)
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  ASSERT_EQ((*engine)->kv().pool().num_blocks_total(), 4);
  RequestSpec spec;
  spec.prompt = std::vector<TokenId>(40, TokenId{100});
  spec.max_tokens = 2;
  spec.ignore_eos = true;
  ASSERT_TRUE((*engine)->add_request(spec).ok());
  (*engine)->step();
  ASSERT_GE((*engine)->kv().pool().num_blocks_in_use(), 3);
  const std::vector<std::vector<TokenId>> input = {std::vector<TokenId>(20, TokenId{7})};
  auto busy = (*engine)->embed(input);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, SubmitErrorCode::kOverloaded) << busy.error().message;
  while ((*engine)->has_unfinished()) (*engine)->step();
  EXPECT_EQ((*engine)->kv().pool().num_blocks_in_use(), 0);
  auto after = (*engine)->embed(input);
  ASSERT_TRUE(after.ok()) << after.error().message;
  (*engine)->check_invariants();
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

// The lowest cosine similarity between Hearth's and the peer's embeddings of kTexts on the file with `pooling`; the
// token ids must match too, and a text's embedding must be far from another's (the bound tells them apart).
double lowest_peer_cosine(int32_t pooling) {
  const std::string peer_dir = HEARTH_PEER_DIR;
  EXPECT_TRUE(fs::exists(peer_dir + "/node_modules/@node-llama-cpp/linux-x64/bins"))
      << "the peer is not installed in " << peer_dir << ": run scripts/peer-install.sh";
  const std::string& path = embedding_model(pooling);
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
    EXPECT_EQ(our_ids, their_ids) << "input " << i << " tokenizes differently";
    const std::vector<float> theirs = j["inputs"][i]["embedding"].get<std::vector<float>>();
    EXPECT_EQ(theirs.size(), ours[i].size());
    if (theirs.size() != ours[i].size()) return 0.0;
    worst = std::min(worst, cosine(ours[i], theirs));
    EXPECT_LT(cosine(ours[(i + 1) % inputs.size()], theirs), 0.99) << "inputs " << i << " and the next look alike";
  }
  std::printf("%s pooling: lowest cosine similarity to llama.cpp v0.5.0 over %zu inputs: %.9f\n",
              std::string(pooling_name(static_cast<PoolingType>(pooling))).c_str(), inputs.size(), worst);
  return worst;
}

// Last pooling is what a file without pooling_type gives the peer too (its last token's state); mean proves that
// llama.cpp reads the key the generator writes.
TEST(EmbeddingPeer, Qwen3EmbeddingLastPoolingMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine(3), 0.9999);
}
TEST(EmbeddingPeer, MeanPoolingMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine(1), 0.9999);
}
TEST(EmbeddingPeer, ClsPoolingMatchesLlamaCpp) {
  EXPECT_GE(lowest_peer_cosine(2), 0.9999);
}

}  // namespace
}  // namespace hearth
