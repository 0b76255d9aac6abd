// Constrained decoding through Engine::step on stories260K: a request with a grammar emits only a valid prefix,
// ends with stop when the output is whole (and the text is then the JSON), with length at max_tokens, and shares
// its prompt's cache with unconstrained requests; penalties and logit bias act on the masked row.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "grammar/grammar.h"

namespace hearth {
namespace {

using nlohmann::json;
using testing::kStories;
using testing::load_model;
using testing::run_to_completion;

EngineConfig config() {
  EngineConfig c;
  c.block_size = 16;
  c.kv_memory_bytes = 8ll << 20;
  c.max_batch_tokens = 64;
  return c;
}

const json kSchema = json::parse(R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}, "mood": {"enum": ["happy", "sad"]}},
  "required": ["name", "age", "mood"], "additionalProperties": false})");

RequestSpec constrained(const LoadedModel& m, float temperature, uint64_t seed, int32_t max_tokens) {
  RequestSpec spec;
  spec.prompt = m.tokenizer->encode("Once upon a time", true, false);
  spec.sampling = {.temperature = temperature, .top_k = 0, .top_p = 1.0f, .seed = seed};
  spec.max_tokens = max_tokens;
  spec.grammar = std::make_shared<const Grammar>(*Grammar::from_json_schema(kSchema));
  return spec;
}

TEST(ConstrainedDecoding, EveryRequestEndsWithWholeValidJsonAndStop) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(), pool);
  std::vector<RequestId> ids;
  const std::vector<TokenId> prompt = testing::story_tokens(*m.tokenizer, 40, "Once upon a time");
  for (uint64_t seed = 0; seed < 7; ++seed) {
    RequestSpec spec = constrained(m, seed == 6 ? 0.0f : 1.0f, seed, 200);  // the last one greedy
    spec.prompt = prompt;
    ids.push_back(*engine->add_request(std::move(spec)));
  }
  auto done = run_to_completion(*engine);
  for (RequestId id : ids) {
    const testing::Finished& f = done.at(id.value);
    EXPECT_EQ(f.reason, FinishReason::kStop) << f.text;
    const json parsed = json::parse(f.text, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << f.text;
    EXPECT_TRUE(parsed["name"].is_string() && parsed["age"].is_number_integer()) << f.text;
    EXPECT_TRUE(parsed["mood"] == "happy" || parsed["mood"] == "sad") << f.text;
    EXPECT_LE(parsed.size(), 3u);
    EXPECT_EQ(f.text, m.tokenizer->decode(std::span(f.tokens)));
  }
  // The prompt is cached as always: the later requests reused its two full blocks.
  EXPECT_EQ(done.at(ids.back().value).usage.cached_tokens, 32);
}

TEST(ConstrainedDecoding, MaxTokensEndsItWithLengthAndAValidPrefix) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(), pool);
  RequestSpec spec = constrained(m, 1.0f, 3, 4);
  const auto grammar = spec.grammar;
  const RequestId id = *engine->add_request(std::move(spec));
  auto done = run_to_completion(*engine);
  const testing::Finished& f = done.at(id.value);
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_EQ(f.tokens.size(), 4u);
  GrammarState s = grammar->start();
  EXPECT_TRUE(grammar->advance(s, f.text)) << f.text;
}

// Strings without maxLength: under a weak model a string may never end, so near max_tokens the output wraps up
// along the grammar's quick completion and still ends whole and valid, within max_tokens, with length.
TEST(ConstrainedDecoding, NearMaxTokensAnUnboundedOutputWrapsUpWholeAndValid) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(), pool);
  const json schema = json::parse(R"({"type": "object", "properties": {
    "note": {"type": "string"}, "room": {"type": "string", "minLength": 2}, "level": {"type": "integer"}},
    "required": ["note", "room", "level"], "additionalProperties": false})");
  const auto grammar = std::make_shared<const Grammar>(*Grammar::from_json_schema(schema));
  std::vector<RequestId> ids;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    RequestSpec spec = constrained(m, 1.0f, seed, 40 + static_cast<int32_t>(seed) * 5);
    spec.grammar = grammar;
    ids.push_back(*engine->add_request(std::move(spec)));
  }
  auto done = run_to_completion(*engine);
  int wrapped = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const testing::Finished& f = done.at(ids[i].value);
    EXPECT_LE(f.tokens.size(), 40u + i * 5) << f.text;
    const json parsed = json::parse(f.text, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << f.text;
    EXPECT_TRUE(parsed["note"].is_string() && parsed["room"].is_string() && parsed["level"].is_number_integer())
        << f.text;
    EXPECT_GE(parsed["room"].get<std::string>().size(), 2u) << f.text;
    wrapped += f.reason == FinishReason::kLength;
  }
  // stories260K rarely closes a free string on its own: most of them had to wrap up.
  EXPECT_GT(wrapped, 0);
}

TEST(ConstrainedDecoding, LogitBiasCannotPushATokenPastTheMask) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(), pool);
  RequestSpec spec = constrained(m, 0.0f, 0, 200);
  const TokenId the = m.tokenizer->encode("the", false, false).at(0);
  spec.sampling.logit_bias = {{the.value, 100.0f}};
  spec.sampling.frequency_penalty = 0.5f;
  const RequestId id = *engine->add_request(std::move(spec));
  auto done = run_to_completion(*engine);
  const testing::Finished& f = done.at(id.value);
  ASSERT_EQ(f.reason, FinishReason::kStop) << f.text;
  const json parsed = json::parse(f.text, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << f.text;
  // Inside the name string " the" is allowed and, biased, always chosen until maxLength leaves no room for it.
  EXPECT_NE(parsed["name"].get<std::string>().find("the"), std::string::npos) << f.text;
}

}  // namespace
}  // namespace hearth
