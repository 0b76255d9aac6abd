// The forward pass against an independent implementation (golden text from ../shared/models/SOURCE.md),
// and the determinism the prefix cache relies on: chunking and batching never change a single bit.
#include "model/model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "tokenizer/tokenizer.h"

namespace hearth {
namespace {

const std::string kShared = HEARTH_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";

// llama.cpp's greedy continuation of "Once upon a time" on stories260K (SOURCE.md), 64 tokens.
const std::string kReferenceText =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red "
    "ball. She wanted to play with it, but it was too high.\nLily's mom said";

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
  l.model = std::move(*model);
  auto tok = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  l.tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
  return l;
}

std::vector<TokenId> ids(std::initializer_list<int32_t> v) {
  std::vector<TokenId> out;
  for (int32_t x : v) out.push_back(TokenId{x});
  return out;
}

TEST(StoriesGolden, GreedyTextMatchesIndependentImplementation) {
  Loaded m = load(kStories);
  ThreadPool pool(2);
  GenerateOptions options;
  options.max_tokens = 64;
  options.sampling.temperature = 0.0f;
  auto result = generate(*m.model, *m.tokenizer, "Once upon a time", options, pool);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->prompt_tokens, ids({1, 403, 407, 261, 378}));
  ASSERT_EQ(result->output_tokens.size(), 64u);
  EXPECT_EQ(result->text, kReferenceText);
  EXPECT_EQ(m.tokenizer->decode(result->output_tokens), kReferenceText);
}

// Prefill of `tokens` split into chunks of `chunk` tokens; returns the logits of the last token.
std::vector<float> prefill_in_chunks(Model& model, std::span<const TokenId> tokens, int32_t chunk, ThreadPool& pool) {
  const int32_t block_size = 16;
  const int32_t n = static_cast<int32_t>(tokens.size());
  KvStorage kv(model.config().n_layers, model.config().n_kv_heads, model.config().head_dim, block_size,
               (n + block_size - 1) / block_size);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < kv.num_blocks(); ++b) table.push_back(BlockId{kv.num_blocks() - 1 - b});  // scrambled
  std::span<const float> logits;
  for (int32_t begin = 0; begin < n; begin += chunk) {
    const int32_t len = std::min(chunk, n - begin);
    BatchSequence seq{0, len, begin, table, begin + len == n};
    logits = model.forward({tokens.subspan(begin, len), {&seq, 1}}, kv, pool);
  }
  return {logits.begin(), logits.end()};
}

std::vector<TokenId> story_tokens(const Tokenizer& tok, size_t n) {
  std::string text;
  while (tok.encode(text, true).size() < n) text += "Tom and Sue went to the big park. They saw a dog and a cat. ";
  auto t = tok.encode(text, true);
  t.resize(n);
  return t;
}

void expect_chunking_invariant(const std::string& path, size_t n_tokens) {
  Loaded m = load(path);
  ThreadPool pool(2);
  const auto tokens = story_tokens(*m.tokenizer, n_tokens);
  const auto whole = prefill_in_chunks(*m.model, tokens, static_cast<int32_t>(tokens.size()), pool);
  ASSERT_EQ(whole.size(), static_cast<size_t>(m.model->config().n_vocab));
  for (int32_t chunk : {1, 7, 64}) {
    const auto chunked = prefill_in_chunks(*m.model, tokens, chunk, pool);
    ASSERT_EQ(chunked.size(), whole.size());
    EXPECT_EQ(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)), 0)
        << path << ": chunk size " << chunk << " changed the logits";
  }
  ThreadPool single(1);
  const auto one_thread = prefill_in_chunks(*m.model, tokens, 7, single);
  EXPECT_EQ(std::memcmp(one_thread.data(), whole.data(), whole.size() * sizeof(float)), 0)
      << path << ": thread count changed the logits";
}

TEST(Determinism, ChunkedPrefillIsBitIdenticalStories) {
  expect_chunking_invariant(kStories, 150);
}
TEST(Determinism, ChunkedPrefillIsBitIdenticalQ8_0) {
  expect_chunking_invariant(kShared + "/models/synthetic/synth-tiny-q8_0.gguf", 100);
}
TEST(Determinism, ChunkedPrefillIsBitIdenticalQ4_K) {
  expect_chunking_invariant(kShared + "/models/synthetic/synth-tiny-q4_k_m.gguf", 100);
}

TEST(Determinism, BatchedSequencesMatchSequencesAlone) {
  Loaded m = load(kStories);
  ThreadPool pool(2);
  const auto a = story_tokens(*m.tokenizer, 40);
  auto b = m.tokenizer->encode("The little bird sang a happy song", true);
  const auto alone_a = prefill_in_chunks(*m.model, a, 40, pool);
  const auto alone_b = prefill_in_chunks(*m.model, b, static_cast<int32_t>(b.size()), pool);

  const auto& c = m.model->config();
  KvStorage kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 8);
  std::vector<BlockId> table_a{BlockId{5}, BlockId{1}, BlockId{7}}, table_b{BlockId{2}, BlockId{0}};
  std::vector<TokenId> tokens(a.begin(), a.end());
  tokens.insert(tokens.end(), b.begin(), b.end());
  BatchSequence seqs[2] = {{0, 40, 0, table_a, true}, {40, static_cast<int32_t>(b.size()), 0, table_b, true}};
  auto logits = m.model->forward({tokens, seqs}, kv, pool);
  ASSERT_EQ(logits.size(), 2 * alone_a.size());
  EXPECT_EQ(std::memcmp(logits.data(), alone_a.data(), alone_a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(logits.data() + alone_a.size(), alone_b.data(), alone_b.size() * sizeof(float)), 0);
}

TEST(ModelLoad, EveryWeightFormatRuns) {
  for (const char* name : {"f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q6_k"}) {
    Loaded m = load(kShared + "/models/synthetic/synth-tiny-" + name + ".gguf");
    ThreadPool pool(2);
    auto logits = prefill_in_chunks(*m.model, story_tokens(*m.tokenizer, 20), 20, pool);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << name;
  }
}

TEST(ModelLoad, VocabOnlyFileFailsNamingWhatIsMissing) {
  auto file = GgufFile::open(kShared + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto model = Model::load(std::make_shared<const GgufFile>(std::move(*file)));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("ggml-vocab-llama-spm.gguf"), std::string::npos) << model.error().message;
}

TEST(Generate, RejectsPromptPlusMaxTokensBeyondContext) {
  Loaded m = load(kStories);
  ThreadPool pool(1);
  GenerateOptions options;
  options.max_tokens = 600;
  auto result = generate(*m.model, *m.tokenizer, "Once upon a time", options, pool);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("605"), std::string::npos) << result.error().message;
  EXPECT_NE(result.error().message.find("512"), std::string::npos) << result.error().message;
}

}  // namespace
}  // namespace hearth
