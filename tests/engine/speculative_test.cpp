// Speculative decoding (prompt lookup): the output is plain decoding's, token for token and logprob for logprob,
// greedy and seeded, with and without prefix-cache hits, with a grammar, stop strings, EOS and n = 2; a workload
// that repeats its input accepts drafts and takes fewer steps; rejected draft tokens never enter the prefix cache.
// Pool invariants are checked after every step.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "engine/model_drafter.h"
#include "grammar/grammar.h"
#include "model/synth.h"

namespace hearth {
namespace {

using testing::kShared;
using testing::kStories;
using testing::load_model;

const std::string kSynthQ8 = kShared + "/models/synthetic/synth-tiny-q8_0.gguf";

EngineConfig config(SpeculativeMode mode) {
  EngineConfig c;
  c.block_size = 16;
  c.kv_memory_bytes = 8ll << 20;
  c.max_batch_tokens = 64;
  c.speculative.mode = mode;
  return c;
}

struct Outcome {
  std::vector<TokenId> tokens;  // generated
  std::vector<TokenLogprobs> logprobs;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  RequestUsage usage;
  std::vector<TokenId> all_tokens;  // prompt + generated, from the final output
};

struct SpecRun {
  std::vector<Outcome> outcomes;  // per spec, in order
  uint64_t steps = 0;
  EngineStats stats;
  std::vector<CachedPrefixNode> cached;  // the unsalted namespace's cached prefixes afterwards
};

// Runs one round of `specs` on `engine`, all at once, into r.outcomes; `after_step` runs after every step (the
// invariants of every engine involved).
void run_round(Engine& engine, const std::vector<RequestSpec>& specs, SpecRun& r,
               const std::function<void()>& after_step) {
  std::map<uint64_t, size_t> index;
  r.outcomes.assign(specs.size(), {});
  for (size_t i = 0; i < specs.size(); ++i) {
    auto id = engine.add_request(specs[i]);
    ASSERT_TRUE(id.ok()) << id.error().message;
    index[id->value] = i;
  }
  while (engine.has_unfinished()) {
    for (RequestOutput& out : engine.step()) {
      Outcome& o = r.outcomes[index.at(out.id.value)];
      EXPECT_EQ(out.logprobs.size(), out.logprobs.empty() ? 0 : out.new_tokens.size());
      o.tokens.insert(o.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      o.logprobs.insert(o.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
      o.text += out.new_text;
      if (out.finished) {
        o.reason = out.finish_reason;
        o.usage = out.usage;
        o.all_tokens = out.tokens;
      }
    }
    after_step();
  }
}

// Runs `rounds` rounds of `specs` on one engine (a later round hits the cache of the earlier), all of a round's
// requests at once. Returns the last round's outcomes.
SpecRun run_engine(const std::string& model, SpeculativeMode mode, const std::vector<RequestSpec>& specs,
                   int rounds = 1, int32_t max_batch_tokens = 64) {
  auto& m = load_model(model);
  ThreadPool pool(1);
  EngineConfig c = config(mode);
  c.max_batch_tokens = max_batch_tokens;
  auto engine = *Engine::create(*m.model, *m.tokenizer, c, pool);
  SpecRun r;
  for (int round = 0; round < rounds; ++round) run_round(*engine, specs, r, [&] { engine->check_invariants(); });
  r.steps = engine->counters().num_steps;
  r.stats = engine->stats();
  r.cached = engine->kv().cached_prefix_tree(engine->cache_namespace(""), {}).nodes;
  return r;
}

void expect_same_output(const SpecRun& plain, const SpecRun& spec) {
  ASSERT_EQ(plain.outcomes.size(), spec.outcomes.size());
  for (size_t i = 0; i < plain.outcomes.size(); ++i) {
    const Outcome& a = plain.outcomes[i];
    const Outcome& b = spec.outcomes[i];
    EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
    EXPECT_EQ(a.all_tokens, b.all_tokens) << "request " << i;
    EXPECT_EQ(a.text, b.text) << "request " << i;
    EXPECT_EQ(a.reason, b.reason) << "request " << i;
    EXPECT_EQ(a.usage.completion_tokens, b.usage.completion_tokens) << "request " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << "request " << i;
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      EXPECT_EQ(a.logprobs[t].token, b.logprobs[t].token);
      EXPECT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob) << "request " << i << " token " << t;  // bitwise
      ASSERT_EQ(a.logprobs[t].top.size(), b.logprobs[t].top.size());
      for (size_t j = 0; j < a.logprobs[t].top.size(); ++j) {
        EXPECT_EQ(a.logprobs[t].top[j].token, b.logprobs[t].top[j].token);
        EXPECT_EQ(a.logprobs[t].top[j].logprob, b.logprobs[t].top[j].logprob);
      }
    }
    EXPECT_EQ(a.usage.drafted_tokens, 0);
  }
}

RequestSpec story_spec(const std::vector<TokenId>& prompt, int32_t max_tokens, float temperature = 0.0f,
                       uint64_t seed = 0) {
  RequestSpec spec;
  spec.prompt = prompt;
  spec.sampling.temperature = temperature;
  spec.sampling.seed = seed;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

// stories260K's greedy story, then its opening again: the continuation quotes the story it already told.
std::vector<TokenId> repeating_prompt(int32_t story_tokens) {
  auto& m = load_model(kStories);
  const std::vector<TokenId> opening = m.tokenizer->encode("Once upon a time", true, false);
  const SpecRun first = run_engine(kStories, SpeculativeMode::kOff, {story_spec(opening, story_tokens)});
  std::vector<TokenId> prompt = first.outcomes[0].all_tokens;
  prompt.insert(prompt.end(), opening.begin() + 1, opening.end());  // no second BOS
  return prompt;
}

// Every cached prefix is a prefix of one of `sequences`: no block holds a token that was drafted and rejected.
void expect_only_emitted_tokens_cached(const SpecRun& r, const std::vector<std::vector<TokenId>>& sequences) {
  // Only a chain with no branch can be checked token by token from the tree's first tokens; a branch means two
  // different continuations of one prefix were cached, which one request's emitted tokens cannot make.
  for (const CachedPrefixNode& node : r.cached) {
    if (node.parent != -1) continue;
    bool found = false;
    for (const auto& seq : sequences) {
      found = found ||
              (node.tokens.size() <= seq.size() && std::equal(node.tokens.begin(), node.tokens.end(), seq.begin()));
    }
    EXPECT_TRUE(found) << "a cached root holds tokens no request emitted";
  }
}

TEST(Speculative, GreedyOnARepeatingPromptIsPlainDecodingInFewerSteps) {
  const std::vector<TokenId> prompt = repeating_prompt(60);
  const std::vector<RequestSpec> specs = {story_spec(prompt, 60)};
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  const SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs);
  ASSERT_EQ(plain.outcomes[0].tokens, spec.outcomes[0].tokens);
  EXPECT_EQ(plain.outcomes[0].all_tokens, spec.outcomes[0].all_tokens);
  const RequestUsage& u = spec.outcomes[0].usage;
  EXPECT_GT(u.drafted_tokens, 0);
  EXPECT_GT(u.accepted_tokens, 10) << "the continuation quotes the prompt";
  EXPECT_EQ(spec.stats.num_drafted_tokens, static_cast<uint64_t>(u.drafted_tokens));
  EXPECT_EQ(spec.stats.num_accepted_tokens, static_cast<uint64_t>(u.accepted_tokens));
  EXPECT_LT(spec.steps * 4, plain.steps * 3) << "plain " << plain.steps << " steps, speculative " << spec.steps;
  // One sequence ran: its cached blocks are one chain of its own tokens.
  EXPECT_EQ(spec.cached.size(), 1u);
  expect_only_emitted_tokens_cached(spec, {spec.outcomes[0].all_tokens});
  EXPECT_EQ(spec.stats.num_blocks_cached, plain.stats.num_blocks_cached);
}

TEST(Speculative, SeededSamplingGivesTheSameTokensAndLogprobs) {
  const std::vector<TokenId> prompt = repeating_prompt(60);
  std::vector<RequestSpec> specs;
  for (uint64_t seed : {1, 7, 42}) {
    RequestSpec s = story_spec(prompt, 50, seed == 42 ? 1.0f : 0.6f, seed);
    s.sampling.top_k = seed == 7 ? 0 : 40;
    s.top_logprobs = 3;
    specs.push_back(std::move(s));
  }
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  const SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs);
  ASSERT_EQ(plain.outcomes.size(), spec.outcomes.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SpecRun one_plain{{plain.outcomes[i]}, 0, {}, {}};
    SpecRun one_spec{{spec.outcomes[i]}, 0, {}, {}};
    one_spec.outcomes[0].usage.drafted_tokens = 0;  // expect_same_output checks the plain side drafted nothing
    expect_same_output(one_plain, one_spec);
  }
  EXPECT_GT(spec.stats.num_accepted_tokens, 0u);
}

TEST(Speculative, PrefixCacheHitsAndGreedyLogprobsAreIdentical) {
  const std::vector<TokenId> prompt = repeating_prompt(60);
  RequestSpec s = story_spec(prompt, 70);
  s.top_logprobs = 5;
  // The second round reuses the first's prompt and answer blocks (its own decoded blocks included).
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, {s}, 2);
  const SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, {s}, 2);
  EXPECT_GT(spec.outcomes[0].usage.cached_tokens, 0);
  EXPECT_EQ(spec.outcomes[0].usage.cached_tokens, plain.outcomes[0].usage.cached_tokens);
  SpecRun spec_view = spec;
  spec_view.outcomes[0].usage.drafted_tokens = 0;
  expect_same_output(plain, spec_view);
  EXPECT_GT(spec.outcomes[0].usage.accepted_tokens, 0);
  EXPECT_EQ(spec.cached.size(), 1u);
  expect_only_emitted_tokens_cached(spec, {spec.outcomes[0].all_tokens});
}

TEST(Speculative, TwoChoicesBatchedDraftIndependently) {
  const std::vector<TokenId> prompt = repeating_prompt(50);
  // n = 2: two requests with one prompt, sampled with different seeds, plus a greedy one, all in one batch.
  std::vector<RequestSpec> specs = {story_spec(prompt, 40, 0.8f, 3), story_spec(prompt, 40, 0.8f, 4),
                                    story_spec(prompt, 40)};
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs);
  for (Outcome& o : spec.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, spec);
}

TEST(Speculative, TightTokenBudgetStillMatches) {
  // A budget of 4 tokens a step: drafts are cut to fit beside the other requests' decode tokens.
  const std::vector<TokenId> prompt = repeating_prompt(40);
  std::vector<RequestSpec> specs = {story_spec(prompt, 30), story_spec(prompt, 30, 0.7f, 9)};
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs, 1, 4);
  SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs, 1, 4);
  for (Outcome& o : spec.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, spec);
}

TEST(Speculative, StopStringsEosAndMaxTokensEndWhereThePlainOutputEnds) {
  const std::vector<TokenId> prompt = repeating_prompt(80);
  auto& m = load_model(kStories);
  const std::string story = m.tokenizer->decode(prompt);
  std::vector<RequestSpec> specs;
  for (int32_t max_tokens : {1, 2, 7, 9, 33}) specs.push_back(story_spec(prompt, max_tokens));
  RequestSpec with_eos = story_spec(prompt, 200);
  with_eos.ignore_eos = false;  // the quoted story ends with EOS, or the context does
  specs.push_back(with_eos);
  // A stop string taken from the quoted story: it matches in the middle of an accepted draft.
  RequestSpec stopped = story_spec(prompt, 100);
  stopped.stop = {story.substr(story.size() / 2, 6)};
  specs.push_back(stopped);
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs);
  EXPECT_EQ(plain.outcomes.back().reason, FinishReason::kStop);
  for (Outcome& o : spec.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, spec);
}

TEST(Speculative, JsonSchemaGrammarOutputIsPlainDecodings) {
  const nlohmann::json schema = nlohmann::json::parse(R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}, "mood": {"enum": ["happy", "sad"]}},
    "required": ["name", "age", "mood"], "additionalProperties": false})");
  auto grammar = std::make_shared<const Grammar>(*Grammar::from_json_schema(schema));
  auto& m = load_model(kStories);
  // A prompt that already holds such objects, so drafts come from them.
  const std::vector<TokenId> prompt = m.tokenizer->encode(
      R"(Once upon a time {"name": "Tom", "age": 3, "mood": "happy"} and {"name": "Sue", "age": 4, "mood": "sad"})",
      true, false);
  std::vector<RequestSpec> specs;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    RequestSpec s = story_spec(prompt, 60, seed == 0 ? 0.0f : 1.0f, seed);
    s.sampling.top_k = 0;
    s.sampling.top_p = 1.0f;
    s.ignore_eos = false;
    s.grammar = grammar;
    s.top_logprobs = 2;
    specs.push_back(std::move(s));
  }
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  SpecRun spec = run_engine(kStories, SpeculativeMode::kPromptLookup, specs);
  EXPECT_GT(spec.stats.num_drafted_tokens, 0u);
  for (Outcome& o : spec.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, spec);
}

TEST(Speculative, SyntheticModelGreedyAndSeededMatchPlain) {
  auto& m = load_model(kSynthQ8);
  std::vector<TokenId> prompt = testing::story_tokens(*m.tokenizer, 40, "Once upon a time");
  // The model's own greedy output, fed back twice: it drafts from it whatever its random weights make of it.
  const SpecRun first = run_engine(kSynthQ8, SpeculativeMode::kOff, {story_spec(prompt, 40)});
  std::vector<TokenId> repeating = first.outcomes[0].all_tokens;
  repeating.insert(repeating.end(), prompt.begin() + 1, prompt.end());
  std::vector<RequestSpec> specs = {story_spec(repeating, 48), story_spec(repeating, 48, 0.9f, 11),
                                    story_spec(prompt, 48)};
  const SpecRun plain = run_engine(kSynthQ8, SpeculativeMode::kOff, specs, 2);
  SpecRun spec = run_engine(kSynthQ8, SpeculativeMode::kPromptLookup, specs, 2);
  EXPECT_GT(spec.stats.num_accepted_tokens, 0u);
  for (Outcome& o : spec.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, spec);
}

TEST(Speculative, AutoModePausesDraftingWhereDraftsAreRejected) {
  // Seeded sampling at a high temperature from a short prompt: the output seldom repeats, drafts are mostly rejected,
  // so auto drafts far fewer tokens than prompt lookup does, and the output is plain decoding's either way.
  auto& m = load_model(kStories);
  const std::vector<TokenId> prompt = m.tokenizer->encode("Once upon a time", true, false);
  RequestSpec s = story_spec(prompt, 200, 1.5f, 5);
  s.sampling.top_k = 0;
  s.sampling.top_p = 1.0f;
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, {s});
  SpecRun always = run_engine(kStories, SpeculativeMode::kPromptLookup, {s});
  SpecRun autom = run_engine(kStories, SpeculativeMode::kAuto, {s});
  EXPECT_LT(always.stats.num_accepted_tokens * 4, always.stats.num_drafted_tokens);
  EXPECT_LT(autom.stats.num_drafted_tokens * 2, always.stats.num_drafted_tokens)
      << "auto " << autom.stats.num_drafted_tokens << ", prompt lookup " << always.stats.num_drafted_tokens;
  always.outcomes[0].usage.drafted_tokens = 0;
  autom.outcomes[0].usage.drafted_tokens = 0;
  expect_same_output(plain, always);
  expect_same_output(plain, autom);
}

TEST(Speculative, PerRequestModeOverridesTheEngineDefault) {
  const std::vector<TokenId> prompt = repeating_prompt(40);
  RequestSpec on = story_spec(prompt, 30);
  on.speculative = SpeculativeParams{.mode = SpeculativeMode::kPromptLookup, .max_draft = 4};
  RequestSpec off = story_spec(prompt, 30);
  off.speculative = SpeculativeParams{.mode = SpeculativeMode::kOff};
  const SpecRun r = run_engine(kStories, SpeculativeMode::kOff, {on, off});
  EXPECT_GT(r.outcomes[0].usage.drafted_tokens, 0);
  EXPECT_LE(r.outcomes[0].usage.drafted_tokens, 4 * r.outcomes[0].usage.verify_steps);
  EXPECT_EQ(r.outcomes[1].usage.drafted_tokens, 0);
  EXPECT_EQ(r.outcomes[0].tokens, r.outcomes[1].tokens);
  const SpecRun r2 = run_engine(kStories, SpeculativeMode::kPromptLookup, {off});
  EXPECT_EQ(r2.stats.num_drafted_tokens, 0u);
  // Out-of-range values are refused at submit.
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(SpeculativeMode::kOff), pool);
  RequestSpec bad = story_spec(prompt, 4);
  bad.speculative = SpeculativeParams{.mode = SpeculativeMode::kPromptLookup, .max_draft = 0};
  EXPECT_FALSE(engine->add_request(bad).ok());
}

// A predicted output (OpenAI's "prediction") drafts with speculation off: equal to the answer, every draft is
// accepted and the answer takes a step per max_draft + 1 tokens; edited, the answer is still plain decoding's, and
// seeded sampling's too.
TEST(Speculative, APredictedOutputDraftsAndTheAnswerIsPlainDecodings) {
  auto& m = load_model(kStories);
  const std::vector<TokenId> prompt = m.tokenizer->encode("Once upon a time", true, false);
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, {story_spec(prompt, 64)});
  const std::vector<TokenId>& answer = plain.outcomes[0].tokens;
  ASSERT_EQ(answer.size(), 64u);

  RequestSpec exact = story_spec(prompt, 64);
  exact.prediction = answer;
  const SpecRun hit = run_engine(kStories, SpeculativeMode::kOff, {exact});
  EXPECT_EQ(hit.outcomes[0].tokens, answer);
  const RequestUsage& u = hit.outcomes[0].usage;
  EXPECT_EQ(u.prediction_tokens, 64);
  EXPECT_EQ(u.accepted_prediction_tokens, u.drafted_tokens) << "every drafted token is the answer's";
  EXPECT_EQ(u.rejected_prediction_tokens, 0);
  EXPECT_GE(u.accepted_prediction_tokens, 56);
  EXPECT_LE(hit.steps, plain.steps / 6) << "8 drafted + 1 per step after the prompt";

  // An edit: tokens 20..23 of the prediction replaced, and its tail cut.
  std::vector<TokenId> edited(answer.begin(), answer.begin() + 56);
  for (int i = 20; i < 24; ++i) edited[i] = TokenId{(edited[i].value + 7) % 512};
  for (const float temperature : {0.0f, 0.8f}) {
    RequestSpec plain_spec = story_spec(prompt, 64, temperature, 11);
    RequestSpec predicted = plain_spec;
    predicted.prediction = edited;
    predicted.top_logprobs = plain_spec.top_logprobs = 2;
    const SpecRun a = run_engine(kStories, SpeculativeMode::kOff, {plain_spec});
    SpecRun b = run_engine(kStories, SpeculativeMode::kOff, {predicted});
    EXPECT_GT(b.outcomes[0].usage.accepted_prediction_tokens, 0) << "temperature " << temperature;
    EXPECT_GT(b.outcomes[0].usage.rejected_prediction_tokens, 0) << "temperature " << temperature;
    b.outcomes[0].usage.drafted_tokens = 0;
    expect_same_output(a, b);
  }

  // Ids outside the vocabulary are refused at submit.
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, config(SpeculativeMode::kOff), pool);
  RequestSpec bad = story_spec(prompt, 4);
  bad.prediction = {TokenId{1}, TokenId{1 << 20}};
  EXPECT_FALSE(engine->add_request(bad).ok());
}

// Runs `specs` on a fresh stories260K engine whose draft model is `draft_path` (SpeculativeMode::kDraftModel).
SpecRun run_with_draft_model(const std::string& draft_path, const std::vector<RequestSpec>& specs,
                             uint64_t* draft_steps = nullptr) {
  auto& target = load_model(kStories);
  auto& draft = load_model(draft_path);
  ThreadPool pool(1);
  EngineConfig dc = config(SpeculativeMode::kOff);
  auto drafter = ModelDrafter::create(*draft.model, *draft.tokenizer, *target.tokenizer, dc, pool);
  EXPECT_TRUE(drafter.ok()) << drafter.error().message;
  EngineConfig c = config(SpeculativeMode::kDraftModel);
  c.drafter = drafter->get();
  auto engine = *Engine::create(*target.model, *target.tokenizer, c, pool);
  SpecRun r;
  run_round(*engine, specs, r, [&] {
    engine->check_invariants();
    (*drafter)->engine().check_invariants();
  });
  r.steps = engine->counters().num_steps;
  r.stats = engine->stats();
  if (draft_steps) *draft_steps = (*drafter)->engine().counters().num_steps;
  return r;
}

// The target as its own draft model: every draft is what plain greedy decoding picks, so every one is accepted,
// the answer is plain decoding's, and the draft engine's prefix cache spares it the prompt after the first proposal.
TEST(Speculative, TheTargetAsItsOwnDraftModelIsAcceptedWhole) {
  auto& m = load_model(kStories);
  const std::vector<TokenId> prompt = m.tokenizer->encode("Once upon a time", true, false);
  const std::vector<RequestSpec> specs = {story_spec(prompt, 64)};
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  uint64_t draft_steps = 0;
  SpecRun drafted = run_with_draft_model(kStories, specs, &draft_steps);
  const RequestUsage& u = drafted.outcomes[0].usage;
  EXPECT_GT(u.drafted_tokens, 32);
  EXPECT_EQ(u.accepted_tokens, u.drafted_tokens) << "the draft is the target: greedy agrees token for token";
  EXPECT_LT(drafted.steps * 3, plain.steps) << "plain " << plain.steps << " steps, drafted " << drafted.steps;
  EXPECT_GT(draft_steps, 0u);
  drafted.outcomes[0].usage.drafted_tokens = 0;
  expect_same_output(plain, drafted);
}

// Another model of the same vocabulary (random weights: its drafts are mostly wrong): greedy and seeded answers,
// logprobs and a batch of two are plain decoding's.
TEST(Speculative, ADraftModelOfTheSameVocabularyLeavesTheAnswerPlain) {
  auto& m = load_model(kStories);
  const std::vector<TokenId> prompt = m.tokenizer->encode("Once upon a time", true, false);
  std::vector<RequestSpec> specs = {story_spec(prompt, 40), story_spec(prompt, 40, 0.8f, 3)};
  for (RequestSpec& s : specs) s.top_logprobs = 2;
  const SpecRun plain = run_engine(kStories, SpeculativeMode::kOff, specs);
  SpecRun drafted = run_with_draft_model(kSynthQ8, specs);
  EXPECT_GT(drafted.stats.num_drafted_tokens, 0u);
  for (Outcome& o : drafted.outcomes) o.usage.drafted_tokens = 0;
  expect_same_output(plain, drafted);
}

TEST(Speculative, ADraftModelOfAnotherVocabularyOrNoneIsRefused) {
  const std::string path = ::testing::TempDir() + "/hearth-draft-other-vocab.gguf";
  SynthConfig c;
  c.out_path = path;
  c.vocab_from = kShared + "/vocab/ggml-vocab-gpt-2.gguf";
  c.dim = 64;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.ffn_dim = 64;
  c.context_length = 256;
  c.weight_type = DType::F32;
  ASSERT_TRUE(write_synthetic_model(c).ok());
  auto loaded = load_model_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto& target = load_model(kStories);
  ThreadPool pool(1);
  auto drafter =
      ModelDrafter::create(*loaded->model, *loaded->tokenizer, *target.tokenizer, config(SpeculativeMode::kOff), pool);
  ASSERT_FALSE(drafter.ok());
  EXPECT_NE(drafter.error().message.find("vocabulary"), std::string::npos) << drafter.error().message;
  std::remove(path.c_str());
  // Without a draft model, a request asking for one is refused at submit with the flag to set.
  auto engine = *Engine::create(*target.model, *target.tokenizer, config(SpeculativeMode::kOff), pool);
  RequestSpec spec = story_spec(target.tokenizer->encode("Once", true, false), 4);
  spec.speculative = SpeculativeParams{.mode = SpeculativeMode::kDraftModel};
  auto id = engine->add_request(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.error().message.find("--draft-model"), std::string::npos) << id.error().message;
}

}  // namespace
}  // namespace hearth
