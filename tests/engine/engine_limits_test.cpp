// The engine at its limits: KV grows on demand (max_tokens reserves nothing, a request alone at the pool's end is
// stopped with length and says so), and a model whose logits turn non-finite at run time ends the request with a
// runtime error instead of sampling garbage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"

namespace hearth {
namespace {

using testing::load_model;
using testing::run_to_completion;
using testing::story_tokens;

// `n_blocks` 16-token blocks of stories260K KV at f32 (5 layers, 4 KV heads of 8: 1280 bytes per token).
EngineConfig pool_of(int64_t n_blocks) {
  EngineConfig c;
  c.block_size = 16;
  c.kv_format = KvFormat{};
  c.kv_memory_bytes = n_blocks * 16 * *kv_bytes_per_token({5, 4, 8}, KvFormat{});
  c.max_batch_tokens = 64;
  return c;
}

RequestSpec greedy(std::vector<TokenId> prompt, std::optional<int32_t> max_tokens) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

// Greedy tokens of `prompt` alone in a pool far larger than it needs.
std::vector<TokenId> alone(const std::vector<TokenId>& prompt, int32_t max_tokens) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, pool_of(64), pool);
  auto id = *engine->add_request(greedy(prompt, max_tokens));
  auto done = run_to_completion(*engine);
  EXPECT_FALSE(done[id.value].usage.stopped_by_kv_pool);
  return done[id.value].tokens;
}

// A chat request without max_tokens may run to the end of the context (492 tokens here), but the pool holds 64
// tokens. It is admitted (only its prompt must fit), runs until the pool is full and ends with length, its usage
// saying the pool stopped it; every token is the one a large pool gives.
TEST(KvOnDemand, RequestWithoutMaxTokensRunsInAPoolSmallerThanTheContext) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, pool_of(4), pool);
  const auto prompt = story_tokens(*m.tokenizer, 20, "Once upon a time");
  auto id = engine->add_request(greedy(prompt, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.error().message;
  auto done = run_to_completion(*engine);
  const auto& f = done[id->value];
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_TRUE(f.usage.stopped_by_kv_pool);
  EXPECT_FALSE(f.runtime_error.has_value());
  // 64 tokens have K/V; the 65th was sampled from the 64th's logits.
  EXPECT_EQ(f.usage.completion_tokens, 64 - 20 + 1);
  EXPECT_EQ(f.usage.preemptions, 0);
  EXPECT_EQ(f.tokens, alone(prompt, 64 - 20 + 1));
  EXPECT_EQ(engine->kv().pool().num_blocks_in_use(), 0);
}

// Two requests, each of which fits the pool alone but not both at once and not to their max_tokens: the older one
// preempts the newer, runs to the pool's end and stops; the newer resumes from the cache and does the same. Both
// finish, with the tokens each gives alone; invariants hold after every step (run_to_completion).
TEST(KvOnDemand, TwoRequestsCompetingForASmallPoolBothFinish) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, pool_of(6), pool);  // 96 tokens
  const auto a = story_tokens(*m.tokenizer, 30, "Once upon a time");
  const auto b = story_tokens(*m.tokenizer, 30, "The little dog");
  auto id_a = engine->add_request(greedy(a, 100));  // 130 tokens > 96
  auto id_b = engine->add_request(greedy(b, 100));
  ASSERT_TRUE(id_a.ok()) << id_a.error().message;
  ASSERT_TRUE(id_b.ok()) << id_b.error().message;
  auto done = run_to_completion(*engine);
  for (const auto& [id, prompt] : {std::pair{*id_a, a}, std::pair{*id_b, b}}) {
    const auto& f = done[id.value];
    EXPECT_EQ(f.reason, FinishReason::kLength) << id.value;
    EXPECT_TRUE(f.usage.stopped_by_kv_pool) << id.value;
    EXPECT_EQ(f.usage.completion_tokens, 96 - 30 + 1) << id.value;
    EXPECT_EQ(f.tokens, alone(prompt, 96 - 30 + 1)) << id.value;
  }
  EXPECT_EQ(done[id_a->value].usage.preemptions, 0);
  EXPECT_GE(done[id_b->value].usage.preemptions, 1);
  EXPECT_EQ(engine->kv().pool().num_blocks_in_use(), 0);
}

// stories260K with every output_norm weight at 3e38: finite, so the load-time scan accepts it, but the final norm
// overflows to inf and every logit becomes inf or NaN at run time. Kept alive with its bytes.
struct OverflowingModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<Model> model;
};

OverflowingModel overflowing_stories() {
  auto src = GgufFile::open(testing::kStories);
  HEARTH_CHECK(src.ok(), "{}", src.error().message);
  auto shared_src = std::make_shared<GgufFile>(std::move(*src));
  GgufWriter w(GgufWriterOptions{3, shared_src->alignment()});
  for (const auto& [k, v] : shared_src->metadata()) {
    if (k != "general.alignment") w.add(k, v);
  }
  for (const GgufTensor& t : shared_src->tensors()) {
    std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
    GgufTensorFill fill = [shared_src, t](GgufDataSink& sink) -> Result<void> {
      if (t.name != "output_norm.weight") return sink.write({t.data, t.nbytes});
      std::vector<float> values(t.nbytes / sizeof(float), 3e38f);
      return sink.write({reinterpret_cast<const uint8_t*>(values.data()), t.nbytes});
    };
    w.add_tensor({t.name, t.type, shape, fill});
  }
  OverflowingModel out;
  auto bytes = w.write_buffer();
  HEARTH_CHECK(bytes.ok(), "{}", bytes.error().message);
  out.bytes = std::move(*bytes);
  auto parsed = GgufFile::parse(out.bytes, "overflowing-stories260K.gguf");
  HEARTH_CHECK(parsed.ok(), "{}", parsed.error().message);
  auto model = Model::load(std::make_shared<const GgufFile>(std::move(*parsed)));
  HEARTH_CHECK(model.ok(), "the overflowing model must load (its weights are finite): {}", model.error().message);
  out.model = std::move(*model);
  return out;
}

TEST(RuntimeErrors, NonFiniteLogitsEndTheRequestWithAnErrorNotATokenOfGarbage) {
  auto& m = load_model(testing::kStories);  // its tokenizer
  OverflowingModel broken = overflowing_stories();
  ThreadPool pool(2);
  auto engine = *Engine::create(*broken.model, *m.tokenizer, pool_of(16), pool);
  int32_t rows = 0, non_finite_rows = 0;
  engine->set_logits_observer([&](RequestId, std::span<const float> row) {
    rows++;
    non_finite_rows += std::any_of(row.begin(), row.end(), [](float x) { return !std::isfinite(x); });
  });
  const auto prompt_a = story_tokens(*m.tokenizer, 20, "Once upon a time");
  const auto prompt_b = story_tokens(*m.tokenizer, 7, "The little dog");
  auto a = *engine->add_request(greedy(prompt_a, 10));
  auto b = *engine->add_request(greedy(prompt_b, 10));
  auto done = run_to_completion(*engine);
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(non_finite_rows, 2) << "the test model must really give non-finite logits";
  for (const auto& [id, prompt] : {std::pair{a, prompt_a}, std::pair{b, prompt_b}}) {
    const auto& f = done[id.value];
    EXPECT_EQ(f.reason, FinishReason::kAborted) << id.value;
    ASSERT_TRUE(f.runtime_error.has_value()) << id.value;
    EXPECT_EQ(f.runtime_error->code, RuntimeErrorCode::kNonFiniteLogits);
    EXPECT_NE(f.runtime_error->message.find("not finite"), std::string::npos) << f.runtime_error->message;
    EXPECT_TRUE(f.text.empty()) << f.text;
    EXPECT_EQ(f.usage.completion_tokens, 0);
    EXPECT_EQ(f.num_outputs, 1) << "only the final output, no token before it";
  }
  EXPECT_EQ(engine->kv().pool().num_blocks_in_use(), 0);
}

TEST(RuntimeErrors, AbortWithACauseReportsIt) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, pool_of(16), pool);
  auto id = *engine->add_request(greedy(story_tokens(*m.tokenizer, 20, "Once"), 50));
  engine->step();
  engine->abort(id, RuntimeError{RuntimeErrorCode::kShuttingDown, "the server is shutting down"});
  auto outputs = engine->step();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].finished);
  EXPECT_EQ(outputs[0].finish_reason, FinishReason::kAborted);
  ASSERT_TRUE(outputs[0].runtime_error.has_value());
  EXPECT_EQ(outputs[0].runtime_error->code, RuntimeErrorCode::kShuttingDown);
  engine->check_invariants();
}

}  // namespace
}  // namespace hearth
