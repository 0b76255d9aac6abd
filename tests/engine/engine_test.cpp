// The engine end to end on real models: prefix-cache hits reproduce cold logits bit for bit, batching and
// preemption never change a token, stops and aborts behave, and every block comes back.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine_test_util.h"  // tests/engine

namespace hearth {
namespace {

using testing::load_model;
using testing::run_to_completion;
using testing::story_tokens;

// f32 KV unless a test is about KV dtypes: it is the reference precision.
// Bytes of `n_blocks` 16-token blocks of stories260K KV (5 layers, 4 KV heads of 8) in `format`.
int64_t stories_blocks(int64_t n_blocks, KvFormat format = {}) {
  return n_blocks * 16 * *kv_bytes_per_token({5, 4, 8}, format);
}

EngineConfig small_config(int64_t kv_bytes = 8ll << 20, KvFormat format = {}) {
  EngineConfig c;
  c.block_size = 16;
  c.kv_memory_bytes = kv_bytes;
  c.kv_format = format;
  c.max_batch_tokens = 64;
  return c;
}

RequestSpec greedy(std::vector<TokenId> prompt, int32_t max_tokens) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

// Runs `prompt` for one token and returns the logits it was sampled from.
std::vector<float> first_logits(Engine& engine, const std::vector<TokenId>& prompt, RequestUsage* usage = nullptr) {
  std::vector<float> logits;
  engine.set_logits_observer([&](RequestId, std::span<const float> row) { logits.assign(row.begin(), row.end()); });
  auto id = engine.add_request(greedy(prompt, 1));
  EXPECT_TRUE(id.ok()) << id.error().message;
  auto done = run_to_completion(engine);
  if (usage != nullptr) *usage = done[id->value].usage;
  engine.set_logits_observer({});
  return logits;
}

void expect_hits_match_cold(const std::string& path, KvFormat format) {
  auto& m = load_model(path);
  ThreadPool pool(2);
  const auto base = story_tokens(*m.tokenizer, 80, "Once upon a time");
  struct Case {
    const char* name;
    size_t shared;
    size_t length;
  };
  for (const Case& c : {Case{"full blocks", 48, 70}, Case{"partial block", 37, 60}, Case{"fully cached", 80, 80}}) {
    auto warm = *Engine::create(*m.model, *m.tokenizer, small_config(8 << 20, format), pool);
    first_logits(*warm, base);
    std::vector<TokenId> prompt(base.begin(), base.begin() + c.length);
    for (size_t i = c.shared; i < prompt.size(); ++i) prompt[i] = TokenId{static_cast<int32_t>(50 + i)};
    RequestUsage usage;
    const auto hit = first_logits(*warm, prompt, &usage);
    EXPECT_EQ(usage.cached_tokens, static_cast<int32_t>(std::min(c.shared, c.length - 1))) << c.name;
    auto cold_engine = *Engine::create(*m.model, *m.tokenizer, small_config(8 << 20, format), pool);
    const auto cold = first_logits(*cold_engine, prompt);
    ASSERT_EQ(hit.size(), cold.size());
    EXPECT_EQ(std::memcmp(hit.data(), cold.data(), hit.size() * sizeof(float)), 0)
        << path << " at KV " << format.name() << ": " << c.name << " hit differs from a cold run";
    warm->check_invariants();
  }
}

// Hit == miss bit for bit at every KV dtype, and with K and V in different dtypes.
void expect_hits_match_cold_at_every_kv_dtype(const std::string& path) {
  for (KvDtype type : all_kv_dtypes()) expect_hits_match_cold(path, {type, type});
  expect_hits_match_cold(path, {KvDtype::kQ8_0, KvDtype::kQ4_0});
}

TEST(KvPrefault, CommittingThePoolAheadOfUseChangesNoLogit) {
  // Engines with the prefaulter (the default) and without it: a cold request and a prefix hit give the same bits.
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  const auto base = story_tokens(*m.tokenizer, 90, "Once upon a time");
  std::vector<TokenId> next(base.begin(), base.begin() + 70);
  for (size_t i = 40; i < next.size(); ++i) next[i] = TokenId{static_cast<int32_t>(60 + i)};
  std::vector<std::vector<float>> logits[2];
  for (const bool prefault : {true, false}) {
    EngineConfig config = small_config(stories_blocks(64), KvFormat{KvDtype::kF16, KvDtype::kF16});
    config.kv_prefault = prefault;
    auto engine = *Engine::create(*m.model, *m.tokenizer, config, pool);
    logits[prefault].push_back(first_logits(*engine, base));
    RequestUsage usage;
    logits[prefault].push_back(first_logits(*engine, next, &usage));
    EXPECT_EQ(usage.cached_tokens, 40);  // a hit (its partial block copied token by token)
  }
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(logits[0][i].size(), logits[1][i].size());
    EXPECT_EQ(std::memcmp(logits[0][i].data(), logits[1][i].data(), logits[0][i].size() * sizeof(float)), 0)
        << "request " << i;
  }
}

TEST(PrefixCacheHit, BitIdenticalToColdStories) {
  expect_hits_match_cold_at_every_kv_dtype(testing::kStories);
}
TEST(PrefixCacheHit, BitIdenticalToColdQ8_0) {
  expect_hits_match_cold_at_every_kv_dtype(testing::kShared + "/models/synthetic/synth-tiny-q8_0.gguf");
}
TEST(PrefixCacheHit, BitIdenticalToColdQ4_K) {
  expect_hits_match_cold_at_every_kv_dtype(testing::kShared + "/models/synthetic/synth-tiny-q4_k_m.gguf");
}

// Greedy tokens of each prompt run alone in a fresh engine.
std::vector<std::vector<TokenId>> run_alone(const std::vector<std::vector<TokenId>>& prompts, int32_t max_tokens,
                                            KvFormat format = {}) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  std::vector<std::vector<TokenId>> out;
  for (const auto& p : prompts) {
    auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(8 << 20, format), pool);
    auto id = *engine->add_request(greedy(p, max_tokens));
    out.push_back(run_to_completion(*engine)[id.value].tokens);
  }
  return out;
}

std::vector<std::vector<TokenId>> varied_prompts(size_t n) {
  auto& m = load_model(testing::kStories);
  const char* starts[] = {"Once upon a time", "The little dog", "Lily and Ben", "One day, a bird"};
  std::vector<std::vector<TokenId>> prompts;
  for (size_t i = 0; i < n; ++i) {
    prompts.push_back(story_tokens(*m.tokenizer, 20 + 13 * (i % 5), starts[i % 4]));
  }
  return prompts;
}

void expect_concurrent_equals_alone(size_t n, int64_t kv_bytes, bool expect_preemption, KvFormat format = {}) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  const auto prompts = varied_prompts(n);
  const auto alone = run_alone(prompts, 40, format);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(kv_bytes, format), pool);
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*engine->add_request(greedy(p, 40)));
  auto done = run_to_completion(*engine);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(done[ids[i].value].tokens, alone[i]) << "request " << i << " of " << n;
  if (expect_preemption) {
    EXPECT_GT(engine->scheduler().num_preemptions(), 0u);
  }
  engine->check_invariants();
}

TEST(Batching, ConcurrentGreedyEqualsAlone1) {
  expect_concurrent_equals_alone(1, 8 << 20, false);
}
TEST(Batching, ConcurrentGreedyEqualsAlone4) {
  expect_concurrent_equals_alone(4, 8 << 20, false);
}
TEST(Batching, ConcurrentGreedyEqualsAlone16) {
  expect_concurrent_equals_alone(16, 8 << 20, false);
}
TEST(Batching, PreemptionUnderATightPoolChangesNoToken) {
  // stories260K at f32: 5 layers × 32 kv dims × 2 × 4 bytes = 1280 bytes/token, 20 KiB per block: 12 blocks.
  expect_concurrent_equals_alone(8, 12 * 20480, true);
}
TEST(Batching, PreemptionAtQ8_0KvChangesNoToken) {
  const KvFormat q8{KvDtype::kQ8_0, KvDtype::kQ8_0};
  expect_concurrent_equals_alone(8, stories_blocks(12, q8), true, q8);
}

TEST(Stops, StopStringEndsTheTextBeforeIt) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto spec = greedy(m.tokenizer->encode("Once upon a time", true), 64);
  spec.stop = {"Lily"};
  auto id = *engine->add_request(spec);
  auto done = run_to_completion(*engine);
  EXPECT_EQ(done[id.value].text, ", there was a little girl named ");
  EXPECT_EQ(done[id.value].reason, FinishReason::kStop);
}

TEST(Stops, MaxTokensEndsWithLength) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto id = *engine->add_request(greedy(m.tokenizer->encode("Once upon a time", true), 5));
  auto done = run_to_completion(*engine);
  EXPECT_EQ(done[id.value].tokens.size(), 5u);
  EXPECT_EQ(done[id.value].reason, FinishReason::kLength);
  EXPECT_EQ(done[id.value].usage.completion_tokens, 5);
  EXPECT_EQ(done[id.value].usage.prompt_tokens, 5);
}

// A control token (here BOS, forced by a logit bias) is left out of the text unless the request asks for it spelled
// out, as the server does for harmony answers whose markers it parses.
TEST(Stops, ControlTokensAreSpelledOnlyWhenAsked) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto spec = greedy(m.tokenizer->encode("Once upon a time", true), 3);
  spec.sampling.logit_bias = {{m.tokenizer->bos().value, 100.0f}};
  auto plain = *engine->add_request(spec);
  spec.render_special_tokens = true;
  auto spelled = *engine->add_request(spec);
  auto done = run_to_completion(*engine);
  EXPECT_EQ(done[plain.value].tokens, std::vector<TokenId>(3, m.tokenizer->bos()));
  EXPECT_EQ(done[plain.value].text, "");
  EXPECT_EQ(done[spelled.value].text, "<s><s><s>");
}

TEST(Abort, FreesBlocksWithinOneStep) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto id = *engine->add_request(greedy(story_tokens(*m.tokenizer, 100, "Once"), 200));
  engine->step();
  EXPECT_GT(engine->kv().pool().num_blocks_in_use(), 0);
  engine->abort(id);
  EXPECT_EQ(engine->kv().pool().num_blocks_in_use(), 0);
  auto outputs = engine->step();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].finished);
  EXPECT_EQ(outputs[0].finish_reason, FinishReason::kAborted);
  EXPECT_FALSE(outputs[0].runtime_error.has_value()) << "a client's cancel is no runtime error";
  EXPECT_FALSE(engine->has_unfinished());
  engine->check_invariants();
}

TEST(Limits, ImpossibleRequestsAreRejectedWithTheNumbers) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(stories_blocks(12)), pool);
  auto too_long = engine->add_request(greedy(story_tokens(*m.tokenizer, 600, "Once"), 1));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("600"), std::string::npos) << too_long.error().message;
  EXPECT_EQ(too_long.error().code, SubmitErrorCode::kPromptTooLong);
  RequestSpec strict = greedy(story_tokens(*m.tokenizer, 300, "Once"), 300);
  strict.strict_max_tokens = true;  // without it, max_tokens is clamped (Limits.MaxTokensBeyondTheContext...)
  auto beyond = engine->add_request(strict);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.error().message.find("512"), std::string::npos) << beyond.error().message;
  EXPECT_EQ(beyond.error().code, SubmitErrorCode::kContextExceeded);
  // 12 blocks hold 192 tokens: a prompt of 192 leaves no slot for the first generated token.
  auto no_pool = engine->add_request(greedy(story_tokens(*m.tokenizer, 192, "Once"), 1));
  ASSERT_FALSE(no_pool.ok());
  EXPECT_NE(no_pool.error().message.find("KV blocks"), std::string::npos) << no_pool.error().message;
  EXPECT_EQ(no_pool.error().code, SubmitErrorCode::kExceedsKvPool);
  auto bad_token = engine->add_request(greedy({TokenId{1}, TokenId{9999}}, 1));
  ASSERT_FALSE(bad_token.ok());
  EXPECT_EQ(bad_token.error().code, SubmitErrorCode::kInvalidToken);
}

// Anthropic clients always send a large max_tokens: by default it is cut to the context's room, the request runs to
// the context's end with length, and the usage says what it ran with. A prompt alone beyond the context stays an
// error; a max_tokens that fits is not marked.
TEST(Limits, MaxTokensBeyondTheContextIsClampedToTheRoomLeft) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  const auto clamped = *engine->add_request(greedy(story_tokens(*m.tokenizer, 500, "Once"), 100000));
  const auto fits = *engine->add_request(greedy(story_tokens(*m.tokenizer, 500, "Once"), 12));
  auto done = run_to_completion(*engine);
  EXPECT_EQ(done[clamped.value].reason, FinishReason::kLength);
  EXPECT_EQ(done[clamped.value].tokens.size(), 12u);  // 512 - 500
  EXPECT_EQ(done[clamped.value].usage.max_tokens_clamped_to, 12);
  EXPECT_EQ(done[fits.value].tokens, done[clamped.value].tokens) << "the clamp changes nothing but the limit";
  EXPECT_EQ(done[fits.value].usage.max_tokens_clamped_to, 0);
  auto too_long = engine->add_request(greedy(story_tokens(*m.tokenizer, 512, "Once"), 100000));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, SubmitErrorCode::kPromptTooLong);
  EXPECT_NE(too_long.error().message.find("at least one must remain"), std::string::npos) << too_long.error().message;
  RequestSpec zero = greedy(story_tokens(*m.tokenizer, 10, "Once"), 0);
  EXPECT_EQ(engine->add_request(zero).error().code, SubmitErrorCode::kInvalidMaxTokens);
}

TEST(PrefixCache, SecondTurnReusesTheAnswer) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto prompt = story_tokens(*m.tokenizer, 40, "Once upon a time");
  auto first = *engine->add_request(greedy(prompt, 30));
  auto turn1 = run_to_completion(*engine)[first.value];
  auto next = prompt;
  next.insert(next.end(), turn1.tokens.begin(), turn1.tokens.end());
  auto question = m.tokenizer->encode(" What did they see?", false);
  next.insert(next.end(), question.begin(), question.end());
  RequestUsage usage;
  const auto warm = first_logits(*engine, next, &usage);
  // Turn 1 computed 40 + 29 tokens (its last token was sampled, never fed back): 4 full blocks are cached,
  // including the blocks that hold the answer, and the 5 computed tokens of its last block are copied.
  EXPECT_EQ(usage.cached_tokens, 69);
  EXPECT_EQ(usage.copied_tokens, 5);
  auto cold_engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  const auto cold = first_logits(*cold_engine, next);
  ASSERT_EQ(warm.size(), cold.size());
  EXPECT_EQ(std::memcmp(warm.data(), cold.data(), warm.size() * sizeof(float)), 0)
      << "the second turn's logits differ from a cold run";
  engine->check_invariants();
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

TEST(Pinning, PinnedPromptSurvivesPressureAndTheCapIsEnforced) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  // 16 blocks of 16 tokens; pins may hold half of them.
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(stories_blocks(16)), pool);
  const auto rules = story_tokens(*m.tokenizer, 64, "House rules: be kind.");
  auto spec = greedy(rules, 2);
  spec.pin_prefix = true;
  auto id = *engine->add_request(spec);
  auto done = run_to_completion(*engine);
  EXPECT_EQ(done[id.value].usage.pinned_tokens, 64);
  EXPECT_EQ(engine->kv().num_blocks_pinned(), 4);
  for (int i = 0; i < 3; ++i) {  // one-off documents that need most of the pool
    auto doc =
        *engine->add_request(greedy(story_tokens(*m.tokenizer, 150, "A long document " + std::to_string(i)), 20));
    run_to_completion(*engine);
    (void)doc;
  }
  EXPECT_GT(engine->kv().pool().num_evictions(), 0u);
  auto again = *engine->add_request(greedy(rules, 1));
  EXPECT_EQ(run_to_completion(*engine)[again.value].usage.cached_tokens, 63);

  auto big = story_tokens(*m.tokenizer, 100, "Another prefix");
  *engine->add_request(greedy(big, 1));
  run_to_completion(*engine);
  auto too_many = engine->pin_prefix(big, "");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("pin cap"), std::string::npos) << too_many.error().message;
  auto pin = engine->pin_prefix(rules, "");
  ASSERT_TRUE(pin.ok());  // pinning the same prefix again returns the existing pin
  EXPECT_TRUE(engine->unpin(pin->key));
  EXPECT_EQ(engine->kv().num_blocks_pinned(), 0);
  engine->check_invariants();
}

TEST(Abort, MidPrefillAndMidDecodeLeaveOthersUntouched) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  const auto keep = story_tokens(*m.tokenizer, 30, "Once upon a time");
  auto alone_engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto alone_id = *alone_engine->add_request(greedy(keep, 30));
  const auto alone = run_to_completion(*alone_engine)[alone_id.value].tokens;

  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  auto kept = *engine->add_request(greedy(keep, 30));
  auto decoding = *engine->add_request(greedy(story_tokens(*m.tokenizer, 20, "The dog"), 100));
  auto prefilling = *engine->add_request(greedy(story_tokens(*m.tokenizer, 300, "A long prompt"), 10));
  std::map<uint64_t, std::vector<TokenId>> tokens;
  std::map<uint64_t, FinishReason> reasons;
  for (int step = 0; engine->has_unfinished(); ++step) {
    if (step == 2) {
      const Request* r = engine->scheduler().find(prefilling);
      ASSERT_NE(r, nullptr);
      EXPECT_LT(r->num_computed_tokens, r->num_prompt_tokens) << "should still be prefilling";
      engine->abort(prefilling);
    }
    if (step == 6) engine->abort(decoding);
    for (auto& out : engine->step()) {
      tokens[out.id.value].insert(tokens[out.id.value].end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) reasons[out.id.value] = out.finish_reason;
    }
    engine->check_invariants();
  }
  EXPECT_EQ(reasons[prefilling.value], FinishReason::kAborted);
  EXPECT_EQ(reasons[decoding.value], FinishReason::kAborted);
  EXPECT_EQ(tokens[kept.value], alone);
  EXPECT_EQ(engine->kv().pool().num_blocks_in_use(), 0);
}

TEST(Batching, SharedPrefixesAndMixedLengthsEqualAlone) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  const auto stem = story_tokens(*m.tokenizer, 45, "House rules:");
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 6; ++i) {
    auto p = stem;
    auto tail = m.tokenizer->encode(
        " Question " + std::to_string(i) + " about the dog and the" + std::string(i * 3, ' ') + " cat", false);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  std::vector<std::vector<TokenId>> alone;
  for (const auto& p : prompts) {
    auto e = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
    auto id = *e->add_request(greedy(p, 25));
    alone.push_back(run_to_completion(*e)[id.value].tokens);
  }
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*engine->add_request(greedy(p, 25)));
  auto done = run_to_completion(*engine);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(done[ids[i].value].tokens, alone[i]) << i;
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

TEST(SharedPrefix, FourUsersAtOnceComputeTheSystemPromptOnce) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  const auto system = story_tokens(*m.tokenizer, 128, "House rules: be kind and tidy.");
  std::vector<std::vector<TokenId>> prompts;
  int32_t suffix_tokens = 0;
  for (int i = 0; i < 4; ++i) {
    auto p = system;
    auto q = m.tokenizer->encode(" Question " + std::to_string(i) + ": where is the cat?", false);
    p.insert(p.end(), q.begin(), q.end());
    suffix_tokens += static_cast<int32_t>(q.size());
    prompts.push_back(p);
  }
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*engine->add_request(greedy(p, 10)));
  auto done = run_to_completion(*engine);
  // The 128-token system prompt (8 full blocks) is computed once; each request computes only its question.
  EXPECT_EQ(engine->counters().num_prefill_tokens, static_cast<uint64_t>(128 + suffix_tokens));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(done[ids[i].value].usage.cached_tokens, 128) << i;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = *Engine::create(*m.model, *m.tokenizer, small_config(), pool);
    auto id = *alone->add_request(greedy(prompts[i], 10));
    EXPECT_EQ(run_to_completion(*alone)[id.value].tokens, done[ids[i].value].tokens) << i;
  }
}

}  // namespace
}  // namespace hearth
