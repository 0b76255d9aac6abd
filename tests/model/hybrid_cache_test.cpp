// The prefix cache on a hybrid model (qwen35: Gated DeltaNet layers beside attention): a hit resumes the recurrent
// state from a checkpoint (engine/recurrent_states.h) and gives the bits of a cold run, whether the checkpoint was
// written while prefilling a prompt, while decoding an answer, read back from the disk tier after a restart, or the
// request was preempted and resumed. Those four run on every hybrid family (EveryHybrid: qwen35, and the mixtures of
// experts qwen35moe and qwen3next); the rest, the cache's bookkeeping of checkpoints, on qwen35.

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "../engine/first_logits.h"
#include "engine/engine.h"
#include "hybrid_support.h"
#include "kv/disk_tier.h"
#include "kv/redis_test_server.h"  // tests/kv
#include "kv/redis_tier.h"
#include "model/model.h"
#include "tmp_files.h"
#include "tokenizer/tokenizer.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

using test::expect_same_bits;
using test::sample_tokens;

struct Loaded {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// hybrid_support.h's tiny model of `architecture`.
Loaded load(const std::string& architecture = "qwen35", uint64_t seed = 7) {
  Loaded l;
  auto file = GgufFile::open(test::hybrid_model(architecture, DType::F32, seed));
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  l.file = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(l.file);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  l.model = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(tokenizer.ok()) << (tokenizer.ok() ? "" : tokenizer.error().message);
  l.tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
  return l;
}

// Block size 16, prefill chunks of 16 tokens: a checkpoint after every prompt block.
EngineConfig small_config() {
  EngineConfig config;
  config.block_size = 16;
  config.kv_memory_bytes = 8 << 20;
  config.max_batch_tokens = 16;
  config.kv_prefault = false;
  return config;
}

// The hit matrix every hybrid family passes, named ArchPrefixCacheHit/EveryHybrid.<case>/<family>: neither the FFN
// (dense, or routed experts beside a shared expert) nor how the DeltaNet's projections are stored (qwen3next's fused
// ssm_in and ssm_ba) may change how a checkpoint is written, kept or resumed.
class EveryHybrid : public ::testing::TestWithParam<test::HybridFamily> {
 protected:
  static Loaded load_family() { return load(GetParam().architecture); }
};
INSTANTIATE_TEST_SUITE_P(ArchPrefixCacheHit, EveryHybrid, ::testing::ValuesIn(test::kHybridFamilies),
                         [](const ::testing::TestParamInfo<test::HybridFamily>& family) {
                           return std::string(family.param.name);
                         });

// The engine's budget holds the recurrent states beside the KV pool, and the pool holds the attention layer only.
TEST(ArchHybrid, Qwen35EngineCarvesStatesOutOfTheBudget) {
  Loaded l = load();
  ThreadPool pool(2);
  const EngineConfig config = small_config();
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const EngineInfo& info = (*engine)->info();
  const ModelConfig& c = l.model->config();
  EXPECT_EQ(c.n_kv_layers(), 1);
  EXPECT_EQ(info.kv_plan.shape.n_layers, 1);
  EXPECT_EQ(info.state_bytes_per_sequence, c.recurrent_state_floats() * 4);
  EXPECT_EQ(info.state_bytes_per_sequence, 3 * (3 * 256 + 4 * 32 * 32) * 4);  // 3 layers: conv window, 4 heads
  EXPECT_GT(info.num_state_running_slots, 0);
  EXPECT_GT(info.num_state_checkpoint_slots, 0);
  const int64_t states =
      info.state_bytes_per_sequence * (info.num_state_running_slots + info.num_state_checkpoint_slots);
  EXPECT_EQ(static_cast<int64_t>((*engine)->storage().state_bytes_total()), states);
  EXPECT_LE(info.kv_plan.pool_bytes + states, config.kv_memory_bytes);
}

// A 60-token prompt is cached; a prompt sharing its first 40 tokens matches 40 tokens of KV, resumes from the
// checkpoint after block 2 (32 tokens: no partial block, no token of block 3), and computes the cold bits.
TEST_P(EveryHybrid, BitIdenticalToCold) {
  Loaded l = load_family();
  ThreadPool pool(2);
  const std::vector<int32_t> base = sample_tokens(60, 0);
  std::vector<int32_t> prompt = base;
  for (size_t i = 40; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i);
  auto warm = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  int32_t cached = -1;
  test::first_logits(**warm, base, &cached);
  EXPECT_EQ(cached, 0);
  std::vector<TokenId> prompt_ids;
  for (int32_t t : prompt) prompt_ids.push_back(TokenId{t});
  const CacheReport report = (*warm)->explain_prompt(prompt_ids, "");
  EXPECT_EQ(report.cached_tokens, 32);  // said before it runs: KV for 40 tokens, the state resumes at 32
  EXPECT_EQ(report.explanation.reason, ReuseStop::kNoCheckpoint);
  EXPECT_EQ(report.explanation.kv_matched_tokens, 40);
  const auto hit = test::first_logits(**warm, prompt, &cached);
  EXPECT_EQ(cached, 32);
  EXPECT_EQ((*warm)->stats().num_state_resumes, 1u);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  const auto cold = test::first_logits(**cold_engine, prompt, &cached);
  EXPECT_EQ(cached, 0);
  expect_same_bits(hit, cold, "prompt checkpoint");
}

// Three prompts after one shared 80-token prefix (five blocks), in 64-token chunks: the first leaves checkpoints
// at 64 and 96 only, so the second's hit (KV for 80 tokens) is cut back to 64; computing on, it leaves a checkpoint
// at its branch point, 80, and the third resumes there, with the cold bits.
TEST(ArchPrefixCacheHit, Qwen35BranchPointCheckpointBitIdenticalToCold) {
  Loaded l = load();
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.max_batch_tokens = 64;
  const std::vector<int32_t> shared = sample_tokens(80, 3);
  auto user = [&](int32_t id) {
    std::vector<int32_t> p = shared;
    for (int32_t i = 0; i < 20; ++i) p.push_back(1000 + 37 * id + i);
    return p;
  };
  auto warm = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  int32_t cached = -1;
  test::first_logits(**warm, user(1), &cached);
  EXPECT_EQ(cached, 0);
  test::first_logits(**warm, user(2), &cached);
  EXPECT_EQ(cached, 64);  // the checkpoint at the first chunk's end
  const auto hit = test::first_logits(**warm, user(3), &cached);
  EXPECT_EQ(cached, 80);  // the branch point the second request left
  EXPECT_EQ((*warm)->stats().num_state_resumes, 2u);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  const auto cold = test::first_logits(**cold_engine, user(3), &cached);
  EXPECT_EQ(cached, 0);
  expect_same_bits(hit, cold, "branch-point checkpoint");
}

// A checkpoint hint (the server's: where the system prompt ends) leaves a checkpoint at the block boundary at or
// before it, in the middle of a 128-token chunk, so the next prompt sharing the first 50 tokens resumes at 48 with
// the cold bits. Hints outside the prompt, or too many, are refused.
TEST(ArchPrefixCacheHit, Qwen35CheckpointHintBitIdenticalToCold) {
  Loaded l = load();
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.max_batch_tokens = 128;
  const std::vector<int32_t> shared = sample_tokens(50, 5);
  auto user = [&](int32_t id) {
    std::vector<int32_t> p = shared;
    for (int32_t i = 0; i < 30; ++i) p.push_back(2000 + 41 * id + i);
    return p;
  };
  auto warm = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  int32_t cached = -1;
  test::first_logits(**warm, user(1), &cached, {50});
  EXPECT_EQ(cached, 0);
  const auto hit = test::first_logits(**warm, user(2), &cached, {50});
  EXPECT_EQ(cached, 48);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  const auto cold = test::first_logits(**cold_engine, user(2), &cached);
  expect_same_bits(hit, cold, "checkpoint hint");
  for (const std::vector<int32_t>& hints : {std::vector<int32_t>{0}, {81}, {1, 2, 3, 4, 5}}) {
    RequestSpec spec;
    for (int32_t t : user(3)) spec.prompt.push_back(TokenId{t});
    spec.max_tokens = 1;
    spec.checkpoint_hints = hints;
    EXPECT_FALSE((*warm)->add_request(spec).ok()) << hints.size() << " hints from " << hints[0];
  }
}

// The state after the answer's tokens is checkpointed as it is decoded: the next turn (prompt, 28 of the answer's
// tokens, a new question) resumes after block 2, which ends inside the answer, and computes the cold bits.
TEST_P(EveryHybrid, FromAnswerCheckpointBitIdenticalToCold) {
  Loaded l = load_family();
  ThreadPool pool(2);
  auto warm = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  RequestSpec spec;
  for (int32_t t : sample_tokens(20, 3)) spec.prompt.push_back(TokenId{t});
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = 30;
  spec.ignore_eos = true;
  std::vector<int32_t> answer;
  ASSERT_TRUE((*warm)->add_request(spec).ok());
  while ((*warm)->has_unfinished()) {
    for (const RequestOutput& out : (*warm)->step()) {
      for (TokenId t : out.new_tokens) answer.push_back(t.value);
    }
  }
  ASSERT_EQ(answer.size(), 30u);
  std::vector<int32_t> next_turn;
  for (TokenId t : spec.prompt) next_turn.push_back(t.value);
  next_turn.insert(next_turn.end(), answer.begin(), answer.begin() + 28);  // 48 tokens: blocks 0-2
  for (int32_t t : sample_tokens(9, 5)) next_turn.push_back(t);
  int32_t cached = -1;
  const auto hit = test::first_logits(**warm, next_turn, &cached);
  EXPECT_EQ(cached, 48);
  EXPECT_EQ((*warm)->stats().num_state_resumes, 1u);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  const auto cold = test::first_logits(**cold_engine, next_turn, &cached);
  EXPECT_EQ(cached, 0);
  expect_same_bits(hit, cold, "answer checkpoint");
}

// Every logits row each request samples from, by request.
std::map<uint64_t, std::vector<std::vector<float>>> run_all(Engine& engine, const std::vector<RequestSpec>& specs,
                                                            std::vector<RequestId>* ids) {
  std::map<uint64_t, std::vector<std::vector<float>>> rows;
  engine.set_logits_observer(
      [&](RequestId id, std::span<const float> row) { rows[id.value].emplace_back(row.begin(), row.end()); });
  for (const RequestSpec& spec : specs) {
    auto id = engine.add_request(spec);
    EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
    if (id.ok()) ids->push_back(*id);
  }
  for (int step = 0; engine.has_unfinished() && step < 10000; ++step) (void)engine.step();
  engine.check_invariants();
  return rows;
}

RequestSpec greedy_spec(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  RequestSpec spec;
  for (int32_t t : prompt) spec.prompt.push_back(TokenId{t});
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

// Two requests in a pool of 6 blocks that each need 5: the newer one is preempted (its state slot freed), resumes
// later from its last checkpoint whose KV blocks are still cached (or from the start), and samples every token from
// the logits a run alone gives, bit for bit.
TEST_P(EveryHybrid, AfterPreemptionBitIdenticalToCold) {
  Loaded l = load_family();
  ThreadPool pool(2);
  const ModelConfig& c = l.model->config();
  const int64_t state = c.recurrent_state_floats() * 4;
  const int64_t block = int64_t{c.n_kv_layers()} * c.n_kv_heads * c.head_dim * 2 * 2 * 16;  // f16 K and V
  EngineConfig tight = small_config();
  tight.max_running = 2;
  tight.state_checkpoints = 8;
  tight.kv_memory_bytes = 10 * state + 6 * block;
  auto engine = Engine::create(*l.model, *l.tokenizer, tight, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  ASSERT_EQ((*engine)->info().kv_plan.num_blocks, 6);
  const std::vector<RequestSpec> specs = {greedy_spec(sample_tokens(40, 2), 40), greedy_spec(sample_tokens(40, 4), 40)};
  std::vector<RequestId> ids;
  auto rows = run_all(**engine, specs, &ids);
  EXPECT_GT((*engine)->stats().num_preemptions, 0u);
  EXPECT_GT((*engine)->stats().num_state_resumes, 0u);  // the preempted request resumed from a checkpoint
  for (size_t i = 0; i < specs.size(); ++i) {
    auto alone = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
    ASSERT_TRUE(alone.ok()) << alone.error().message;
    std::vector<RequestId> alone_ids;
    auto cold = run_all(**alone, {specs[i]}, &alone_ids);
    const auto& got = rows[ids[i].value];
    const auto& want = cold[alone_ids[0].value];
    ASSERT_EQ(got.size(), want.size()) << "request " << i;
    for (size_t r = 0; r < got.size(); ++r) expect_same_bits(got[r], want[r], "request " + std::to_string(i));
  }
}

// Runs `prompt` on a fresh engine over the disk tier in `dir` (opened for it, closed after) and returns its first
// logits, the tokens it reused and the checkpoints it read back from the tier.
struct DiskRun {
  std::vector<float> logits;
  int32_t cached = -1;
  uint64_t tier_loads = 0;
};
DiskRun run_on_disk_tier(Loaded& l, const fs::path& dir, const std::vector<int32_t>& prompt) {
  auto tier = DiskTier::open({.dir = dir, .capacity_bytes = 64ll << 20});
  EXPECT_TRUE(tier.ok()) << (tier.ok() ? "" : tier.error().message);
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.disk_tier = tier->get();
  config.tier_load_policy = TierLoadPolicy::kAlways;
  DiskRun run;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
    EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
    run.logits = test::first_logits(**engine, prompt, &run.cached);
    run.tier_loads = (*engine)->stats().num_state_tier_loads;
  }
  (*tier)->flush();
  return run;
}

// Checkpoints are written through to the disk tier with their blocks: after a restart (a new engine, the tier
// reopened) a prompt sharing 40 tokens reads the checkpoint after block 2 back, loads the KV, resumes at 32 and
// computes the cold bits. A checkpoint entry with a flipped bit is never loaded: the request recomputes, same bits.
TEST_P(EveryHybrid, FromDiskAfterRestartBitIdenticalToCold) {
  Loaded l = load_family();
  const fs::path dir = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/hybrid_disk_" +
                                            GetParam().architecture + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::vector<int32_t> base = sample_tokens(60, 0);
  std::vector<int32_t> prompt = base;
  for (size_t i = 40; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i);
  EXPECT_EQ(run_on_disk_tier(l, dir, base).cached, 0);
  const DiskRun hit = run_on_disk_tier(l, dir, prompt);
  EXPECT_EQ(hit.cached, 32);
  EXPECT_EQ(hit.tier_loads, 1u);
  ThreadPool pool(2);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  int32_t cached = -1;
  const auto cold = test::first_logits(**cold_engine, prompt, &cached);
  expect_same_bits(hit.logits, cold, "checkpoint from the disk tier");

  // Damage every checkpoint entry (a state entry is 57 KiB; a KV block's 4 KiB): none is loaded, the bits hold.
  const fs::path other = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/hybrid_disk_flip_" +
                                              GetParam().architecture + "_" + std::to_string(getpid()));
  fs::remove_all(other);
  EXPECT_EQ(run_on_disk_tier(l, other, base).cached, 0);
  int flipped = 0;
  for (const auto& entry : fs::recursive_directory_iterator(other)) {
    if (entry.path().extension() != ".kvb" || entry.file_size() < (32 << 10)) continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(entry.file_size() / 2));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    f.seekp(static_cast<std::streamoff>(entry.file_size() / 2));
    f.write(&byte, 1);
    ++flipped;
  }
  EXPECT_GT(flipped, 0);
  const DiskRun damaged = run_on_disk_tier(l, other, prompt);
  EXPECT_EQ(damaged.tier_loads, 0u);
  EXPECT_EQ(damaged.cached, 0);
  expect_same_bits(damaged.logits, cold, "damaged checkpoint");
  fs::remove_all(dir);
  fs::remove_all(other);
}

// Checkpoints reach the Redis tier as they reach the disk: server A computes a prompt, server B (another engine
// with its own connection to the same redis-server) resumes a prompt sharing 40 tokens from A's checkpoint after
// block 2 and A's KV, bit-identical to a cold run.
TEST(ArchPrefixCacheHit, Qwen35FromRedisOnAnotherServerBitIdenticalToCold) {
  hearth::testing::RedisTestServer server;
  if (!server.installed()) GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  Loaded l = load();
  const auto open = [&](const std::string& id) {
    RedisTierConfig c;
    c.url = *parse_redis_url(server.url());
    c.server_id = id;
    return RedisTier::open(c);
  };
  auto redis_a = open("a");
  auto redis_b = open("b");
  const std::vector<int32_t> base = sample_tokens(60, 0);
  std::vector<int32_t> prompt = base;
  for (size_t i = 40; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i);
  ThreadPool pool(2);
  const auto run = [&](RedisTier* redis, const std::vector<int32_t>& p, int32_t* cached, uint64_t* tier_loads) {
    EngineConfig config = small_config();
    config.redis_tier = redis;
    config.redis_load_policy = TierLoadPolicy::kAlways;
    auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
    EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
    auto logits = test::first_logits(**engine, p, cached);
    *tier_loads = (*engine)->stats().num_state_tier_loads;
    return logits;
  };
  int32_t cached = -1;
  uint64_t tier_loads = 0;
  run(redis_a.get(), base, &cached, &tier_loads);
  EXPECT_EQ(cached, 0);
  redis_a->flush();
  const auto written = static_cast<size_t>(redis_a->stats().num_writes);
  EXPECT_GT(written, 3u);  // KV blocks and state checkpoints
  ASSERT_TRUE(redis_b->wait_num_known(written, std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  const auto hit = run(redis_b.get(), prompt, &cached, &tier_loads);
  EXPECT_EQ(cached, 32);
  EXPECT_EQ(tier_loads, 1u);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  int32_t cold_cached = -1;
  const auto cold = test::first_logits(**cold_engine, prompt, &cold_cached);
  expect_same_bits(hit, cold, "checkpoint from the Redis tier");
}

// The disk tier's other faults, on checkpoint entries: an entry cut short, and a directory holding another model's
// checkpoints for the same prompt. Neither is ever loaded; the request recomputes and gives the cold bits.
TEST(ArchPrefixCacheHit, Qwen35TruncatedOrForeignCheckpointsAreNeverLoaded) {
  Loaded l = load();
  const std::vector<int32_t> base = sample_tokens(60, 0);
  std::vector<int32_t> prompt = base;
  for (size_t i = 40; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i);
  ThreadPool pool(2);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  int32_t cold_cached = -1;
  const auto cold = test::first_logits(**cold_engine, prompt, &cold_cached);

  const fs::path cut =
      test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/hybrid_disk_cut_" + std::to_string(getpid()));
  fs::remove_all(cut);
  EXPECT_EQ(run_on_disk_tier(l, cut, base).cached, 0);
  int truncated = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cut)) {
    if (entry.path().extension() != ".kvb" || entry.file_size() < (32 << 10)) continue;  // state entries only
    fs::resize_file(entry.path(), entry.file_size() / 2);
    ++truncated;
  }
  EXPECT_GT(truncated, 0);
  const DiskRun after_cut = run_on_disk_tier(l, cut, prompt);
  EXPECT_EQ(after_cut.tier_loads, 0u);
  EXPECT_EQ(after_cut.cached, 0);
  expect_same_bits(after_cut.logits, cold, "truncated checkpoint");
  fs::remove_all(cut);

  const fs::path shared =
      test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/hybrid_disk_foreign_" + std::to_string(getpid()));
  fs::remove_all(shared);
  Loaded other = load("qwen35", 8);
  EXPECT_EQ(run_on_disk_tier(other, shared, base).cached, 0);
  const DiskRun foreign = run_on_disk_tier(l, shared, prompt);
  EXPECT_EQ(foreign.tier_loads, 0u);
  EXPECT_EQ(foreign.cached, 0);
  expect_same_bits(foreign.logits, cold, "another model's checkpoints");
  // The other model still finds its own.
  EXPECT_EQ(run_on_disk_tier(other, shared, prompt).tier_loads, 1u);
  fs::remove_all(shared);
}

// A pinned prefix keeps its checkpoint: with 4 checkpoint slots, three other prompts evict every checkpoint but the
// pinned one, and a prompt continuing the pinned 48 tokens still resumes after them (bits of a cold run); unpinned,
// the same happens to it as to the others.
TEST(ArchPrefixCacheHit, Qwen35PinnedPrefixKeepsItsCheckpoint) {
  Loaded l = load();
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.state_checkpoints = 4;
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const std::vector<int32_t> rules = sample_tokens(48, 9);
  int32_t cached = -1;
  test::first_logits(**engine, rules, &cached);
  std::vector<TokenId> rule_ids;
  for (int32_t t : rules) rule_ids.push_back(TokenId{t});
  auto pin = (*engine)->pin_prefix(rule_ids, "");
  ASSERT_TRUE(pin.ok()) << pin.error().message;
  EXPECT_EQ(pin->num_tokens, 48);
  for (int32_t seed : {1, 2, 3}) test::first_logits(**engine, sample_tokens(48, 20 + seed), &cached);
  std::vector<int32_t> next = rules;
  for (int32_t t : sample_tokens(7, 4)) next.push_back(t);
  const auto hit = test::first_logits(**engine, next, &cached);
  EXPECT_EQ(cached, 48);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  expect_same_bits(hit, test::first_logits(**cold_engine, next, &cached), "pinned checkpoint");

  EXPECT_TRUE((*engine)->unpin(pin->key));
  // Each later prompt's end evicts the least recently used prompt end (its passing checkpoints go first).
  for (int32_t seed : {4, 5, 6, 7, 8, 9}) test::first_logits(**engine, sample_tokens(48, 20 + seed), &cached);
  next.back() = 7;
  test::first_logits(**engine, next, &cached);
  EXPECT_LT(cached, 48);  // its checkpoint went the way of the others
}

// With no checkpoint slots the model still serves, every prompt recomputed: no reuse, the cold bits.
TEST(ArchHybrid, Qwen35WithoutCheckpointsRecomputes) {
  Loaded l = load();
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.state_checkpoints = 0;
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const std::vector<int32_t> prompt = sample_tokens(50, 1);
  int32_t cached = -1;
  const auto first = test::first_logits(**engine, prompt, &cached);
  const auto again = test::first_logits(**engine, prompt, &cached);
  EXPECT_EQ(cached, 0);
  auto cold_engine = Engine::create(*l.model, *l.tokenizer, small_config(), pool);
  ASSERT_TRUE(cold_engine.ok()) << cold_engine.error().message;
  expect_same_bits(again, test::first_logits(**cold_engine, prompt, &cached), "no checkpoints");
  expect_same_bits(first, again, "no checkpoints, twice");
}

// A hybrid cannot roll a recurrent state back past a rejected draft: a request that asks for speculation or brings
// a predicted output is refused with the reason (a 400 at the server), not served plainly as if it had not asked;
// the server's default mode is simply off here.
TEST(ArchHybrid, Qwen35RefusesSpeculationARequestAsksFor) {
  Loaded l = load();
  ThreadPool pool(2);
  EngineConfig config = small_config();
  config.speculative.mode = SpeculativeMode::kAuto;
  auto engine = Engine::create(*l.model, *l.tokenizer, config, pool);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  RequestSpec plain;
  plain.prompt = {TokenId{1}, TokenId{2}, TokenId{3}};
  plain.max_tokens = 2;
  EXPECT_TRUE((*engine)->add_request(plain).ok()) << "the server's default stays off on a hybrid";
  RequestSpec predicted = plain;
  predicted.prediction = {TokenId{4}, TokenId{5}};
  RequestSpec speculative = plain;
  speculative.speculative = SpeculativeParams{.mode = SpeculativeMode::kPromptLookup};
  for (const RequestSpec& spec : {predicted, speculative}) {
    auto id = (*engine)->add_request(spec);
    ASSERT_FALSE(id.ok());
    EXPECT_NE(id.error().message.find("hybrid"), std::string::npos) << id.error().message;
  }
  RequestSpec off = plain;
  off.speculative = SpeculativeParams{.mode = SpeculativeMode::kOff};
  EXPECT_TRUE((*engine)->add_request(off).ok());
}

}  // namespace
}  // namespace hearth
