// End to end on the real quantization mixes of ../shared/models/mixes/ (llama-quantize's output from
// synth-tiny-f16.gguf): Hearth loads each, prefills with finite logits that do not change by one bit with chunk size or thread
// count, serves a prefix-cache hit whose logits are the cold run's bit for bit (the prefix-cache contract), and
// generates greedy tokens.
// It lives with the kernel tests because what it proves is the weight formats; it links the model and engine.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "../engine/first_logits.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "shared_mixes.h"
#include "tokenizer/tokenizer.h"

namespace hearth {
namespace {

std::vector<float> prefill_in_chunks(Model& model, std::span<const TokenId> tokens, int32_t chunk, ThreadPool& pool) {
  const int32_t block_size = 16;
  const int32_t n = static_cast<int32_t>(tokens.size());
  KvStorage kv(model.config().n_layers, model.config().n_kv_heads, model.config().head_dim, block_size,
               (n + block_size - 1) / block_size);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < kv.num_blocks(); ++b) table.push_back(BlockId{b});
  std::span<const float> logits;
  for (int32_t begin = 0; begin < n; begin += chunk) {
    const int32_t len = std::min(chunk, n - begin);
    BatchSequence seq{0, len, begin, table, begin + len == n};
    logits = model.forward({tokens.subspan(begin, len), {&seq, 1}}, kv, pool);
  }
  return {logits.begin(), logits.end()};
}

// Through the engine: a 60-token prompt, then one sharing its first 37 tokens (two full blocks and 5 tokens copied
// from a third) reuses them, and its logits are bitwise those of a cold engine's run of the same prompt.
void expect_hit_matches_cold(Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const char* mix) {
  EngineConfig config;
  config.block_size = 16;
  config.kv_memory_bytes = 8 << 20;
  config.max_batch_tokens = 24;  // the cold prompt in three chunks
  const int32_t n_vocab = model.config().n_vocab;
  std::vector<int32_t> base, prompt;
  for (int32_t i = 0; i < 60; ++i) base.push_back((7 + 37 * i) % n_vocab);
  prompt = base;
  for (size_t i = 37; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((100 + 11 * i) % n_vocab);
  auto warm = Engine::create(model, tokenizer, config, pool);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  int32_t cached = -1;
  test::first_logits(**warm, base, &cached);
  const std::vector<float> hit = test::first_logits(**warm, prompt, &cached);
  EXPECT_EQ(cached, 37) << mix;
  auto cold_engine = Engine::create(model, tokenizer, config, pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  const std::vector<float> cold = test::first_logits(**cold_engine, prompt, &cached);
  EXPECT_EQ(cached, 0);
  ASSERT_FALSE(hit.empty());
  ASSERT_EQ(hit.size(), cold.size());
  EXPECT_EQ(std::memcmp(hit.data(), cold.data(), hit.size() * sizeof(float)), 0) << mix << ": hit differs from cold";
}

class QuantizedModelTest : public testing::TestWithParam<mixes::Mix> {};

TEST_P(QuantizedModelTest, LoadsPrefillsDeterministicallyAndGenerates) {
  const char* mix = GetParam().name;
  auto file = GgufFile::open(mixes::gguf_path(GetParam()));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto shared = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(shared);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tokenizer = Tokenizer::from_gguf(*shared);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;

  ThreadPool two(2);
  ThreadPool one(1);
  const std::vector<TokenId> tokens = tokenizer->encode("Tom and Sue went to the big park. They saw a dog.", true);
  const std::vector<float> whole = prefill_in_chunks(**model, tokens, static_cast<int32_t>(tokens.size()), two);
  ASSERT_EQ(whole.size(), static_cast<size_t>((*model)->config().n_vocab));
  for (float x : whole) ASSERT_TRUE(std::isfinite(x));
  for (int32_t chunk : {1, 5}) {
    const std::vector<float> chunked = prefill_in_chunks(**model, tokens, chunk, one);
    EXPECT_EQ(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)), 0) << "chunk " << chunk;
  }

  expect_hit_matches_cold(**model, *tokenizer, two, mix);

  GenerateOptions options;
  options.max_tokens = 8;
  options.sampling.temperature = 0.0f;
  options.stop_at_eos = false;
  auto result = generate(**model, *tokenizer, "Once upon a time", options, two);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->output_tokens.size(), 8u);
  auto again = generate(**model, *tokenizer, "Once upon a time", options, one);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->output_tokens, result->output_tokens) << mix << ": greedy tokens changed with the thread count";
}

INSTANTIATE_TEST_SUITE_P(PeerMixes, QuantizedModelTest, testing::ValuesIn(mixes::kMixes),
                         [](const testing::TestParamInfo<mixes::Mix>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hearth
